/* An MPI_Isend whose request the program frees (MPI_Request_free, legal MPI) or never
 * completes (SNAP resets its send requests to MPI_REQUEST_NULL): the message is matched in
 * messages.parquet, but the OTF2 export writes neither MpiIsend nor MpiSend for it, while the
 * receiver's MpiIrecv/MpiRecv is written. */
#include <mpi.h>
#include <stdio.h>
int main(int argc, char **argv) {
    int rank, buf[16] = {0};
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    for (int i = 0; i < 3; i++) {
        if (rank == 0) {
            MPI_Request r;
            MPI_Isend(buf, 16, MPI_INT, 1, i, MPI_COMM_WORLD, &r);
            if (i == 0) MPI_Request_free(&r);          /* freed: completes in the background */
            else if (i == 1) MPI_Wait(&r, MPI_STATUS_IGNORE); /* the normal case */
            /* i == 2: never completed (leaked), as SNAP does */
        } else if (rank == 1) {
            MPI_Recv(buf, 16, MPI_INT, 0, i, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    return 0;
}
