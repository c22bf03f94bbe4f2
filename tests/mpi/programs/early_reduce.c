/* Early reduce: the root (rank 0) enters MPI_Reduce at once; rank r > 0 sleeps
 * r * DELAY first, so the root waits DELAY for rank 1, the first to contribute.
 *   early_reduce ITERS DELAY_MS */
#include <mpi.h>

#include "delay.h"

int main(int argc, char **argv)
{
    int rank;
    double x = 1, sum = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    int iters = (int)arg(argc, argv, 1, 5);
    double d = arg(argc, argv, 2, 40);
    for (int i = 0; i < iters; i++) {
        /* go: the root goes on into MPI_Reduce at once, the others start computing */
        MPI_Bcast(&i, 1, MPI_INT, 0, MPI_COMM_WORLD);
        sleep_ms(rank * d);
        MPI_Reduce(&x, &sum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD); /* REDUCE */
    }
    MPI_Finalize();
    return 0;
}
