/* Wait at barrier: rank r sleeps r * DELAY before each MPI_Barrier, so rank r waits
 * (last - r) * DELAY for the last rank.
 *   barrier ITERS DELAY_MS */
#include <mpi.h>

#include "delay.h"

int main(int argc, char **argv)
{
    int rank;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    int iters = (int)arg(argc, argv, 1, 5);
    double d = arg(argc, argv, 2, 30);
    for (int i = 0; i < iters; i++) {
        sleep_ms(rank * d);
        MPI_Barrier(MPI_COMM_WORLD); /* BARRIER */
    }
    MPI_Finalize();
    return 0;
}
