/* A broadcast's root held by a late receiver (2 ranks): rank 1 sleeps MS ms before each of 3 broadcasts
 * of 8 MiB from rank 0, which an MPI cannot finish before rank 1 takes part. Both ranks first work
 * 300 ms (asleep), as a program does: on a loaded machine the copies of the broadcasts and the MPI's
 * start-up took over 25 % of a run of sleeps alone, and read as communication-bound.
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
    sleep_ms(300);
    MPI_Barrier(MPI_COMM_WORLD);
    for (int i = 0; i < 3; i++) {
        if (rank == 1) sleep_ms(ms);
        MPI_Bcast(b, n, MPI_CHAR, 0, MPI_COMM_WORLD);
    }
    free(b);
    MPI_Finalize();
    return 0;
}
