/* Wildcard receives: every rank but 0 sends ITERS messages tagged with its
 * rank and sized rank*8 bytes to rank 0, which takes them with
 * MPI_ANY_SOURCE/MPI_ANY_TAG, alternating Recv and Irecv+Waitany. */
#include <mpi.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    int rank, size;
    MPI_Init(&argc, &argv);
    int iters = argc > 1 ? atoi(argv[1]) : 4;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    char *buf = calloc((size_t)size * 8 + 8, 1);
    for (int it = 0; it < iters; it++) {
        if (rank == 0) {
            for (int k = 1; k < size; k++) {
                if (it % 2 == 0) {
                    MPI_Recv(buf, size * 8, MPI_BYTE, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                } else {
                    MPI_Request req;
                    int idx;
                    MPI_Irecv(buf, size * 8, MPI_BYTE, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &req);
                    MPI_Waitany(1, &req, &idx, MPI_STATUS_IGNORE);
                }
            }
        } else {
            MPI_Send(buf, rank * 8, MPI_BYTE, 0, rank, MPI_COMM_WORLD);
        }
    }
    free(buf);
    MPI_Finalize();
    return 0;
}
