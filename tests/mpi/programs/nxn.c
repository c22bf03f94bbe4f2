/* Wait at N x N: the last rank sleeps DELAY before each MPI_Allreduce, the others
 * wait for it there.
 *   nxn ITERS DELAY_MS */
#include <mpi.h>

#include "delay.h"

int main(int argc, char **argv)
{
    int rank, size;
    double x = 1, sum = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int iters = (int)arg(argc, argv, 1, 5);
    double d = arg(argc, argv, 2, 40);
    for (int i = 0; i < iters; i++) {
        if (rank == size - 1)
            sleep_ms(d);
        MPI_Allreduce(&x, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD); /* ALLREDUCE */
    }
    MPI_Finalize();
    return 0;
}
