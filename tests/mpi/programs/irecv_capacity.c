/* A receiver that posts MPI_Irecv with a 1 MiB buffer (as Quicksilver does for particle
 * buffers) while the sender sends 100 bytes each time; one extra receive is cancelled at the
 * end. Bytes received: 10 x 100 B = 1,000 B; posted: 11 MiB. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv)
{
    int rank;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    const int cap = 1 << 20, n = 100, iters = 10;
    char *buf = calloc(cap, 1);
    for (int i = 0; i < iters; i++) {
        if (rank == 0) {
            MPI_Send(buf, n, MPI_BYTE, 1, 7, MPI_COMM_WORLD);
        } else if (rank == 1) {
            MPI_Request r;
            MPI_Irecv(buf, cap, MPI_BYTE, 0, 7, MPI_COMM_WORLD, &r);
            MPI_Wait(&r, MPI_STATUS_IGNORE);
        }
    }
    if (rank == 1) {            /* a receive that never matches: cancelled */
        MPI_Request r;
        MPI_Irecv(buf, cap, MPI_BYTE, 0, 99, MPI_COMM_WORLD, &r);
        MPI_Cancel(&r);
        MPI_Wait(&r, MPI_STATUS_IGNORE);
    }
    free(buf);
    MPI_Finalize();
    return 0;
}
