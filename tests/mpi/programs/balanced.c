/* Balanced: every rank sleeps the same DELAY, exchanges with its ring neighbours and
 * joins an MPI_Allreduce; no rank should wait noticeably.
 *   balanced ITERS DELAY_MS */
#include <mpi.h>

#include "delay.h"

int main(int argc, char **argv)
{
    int rank, size;
    double x = 1, y = 0, sum = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int iters = (int)arg(argc, argv, 1, 10);
    double d = arg(argc, argv, 2, 40);
    for (int i = 0; i < iters; i++) {
        sleep_ms(d);
        MPI_Sendrecv(&x, 1, MPI_DOUBLE, (rank + 1) % size, 0, &y, 1, MPI_DOUBLE, (rank + size - 1) % size, 0,
                     MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Allreduce(&x, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    }
    MPI_Finalize();
    return 0;
}
