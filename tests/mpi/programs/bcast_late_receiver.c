/* A broadcast's root held by a late receiver (2 ranks): rank 1 sleeps MS ms before each of 3 broadcasts
 * of 8 MiB from rank 0, which an MPI cannot finish before rank 1 takes part.
 *   bcast_late_receiver MS */
#include <mpi.h>
#include <stdlib.h>
#include "delay.h"

int main(int argc, char **argv)
{
    int rank;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    double ms = arg(argc, argv, 1, 60);
    const int n = 8 << 20;
    char *b = calloc(1, n);
    MPI_Barrier(MPI_COMM_WORLD);
    for (int i = 0; i < 3; i++) {
        if (rank == 1) sleep_ms(ms);
        MPI_Bcast(b, n, MPI_CHAR, 0, MPI_COMM_WORLD);
    }
    free(b);
    MPI_Finalize();
    return 0;
}
