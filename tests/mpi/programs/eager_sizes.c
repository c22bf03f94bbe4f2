/* Sends of growing size to a receiver that is late (2 ranks):
 *   eager_sizes REPEATS MS [SMALLEST]
 * for each size from SMALLEST (default 1 KiB) to 32 KiB, REPEATS times: rank 1 sleeps MS ms before its MPI_Recv, rank 0
 * calls MPI_Send at once. Below the MPI's eager limit the send returns at once; from it on it waits
 * for the receive (MPICH 5.0: from 8 KiB), which the diagnosis should see without being told. */
#include <mpi.h>
#include <stdlib.h>
#include "delay.h"

int main(int argc, char **argv)
{
    int rank;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    int repeats = (int)arg(argc, argv, 1, 3);
    double ms = arg(argc, argv, 2, 5);
    char *buf = calloc(1, 32768);
    for (int n = (int)arg(argc, argv, 3, 1024); n <= 32768; n *= 2)
        for (int i = 0; i < repeats; i++) {
            MPI_Barrier(MPI_COMM_WORLD);
            if (rank == 0) {
                MPI_Send(buf, n, MPI_BYTE, 1, i, MPI_COMM_WORLD);
            } else if (rank == 1) {
                sleep_ms(ms);
                MPI_Recv(buf, n, MPI_BYTE, 0, i, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            }
        }
    free(buf);
    MPI_Finalize();
    return 0;
}
