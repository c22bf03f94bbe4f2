/* Wait at communicator creation: rank 2 sleeps DELAY before each MPI_Comm_split of
 * MPI_COMM_WORLD; the split agrees on the new communicators over the whole parent, so
 * the other ranks wait in it for rank 2, DELAY per split.
 *   comm_split ITERS DELAY_MS */
#include <mpi.h>

#include "delay.h"

int main(int argc, char **argv)
{
    int rank;
    MPI_Comm half;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    int iters = (int)arg(argc, argv, 1, 5);
    double d = arg(argc, argv, 2, 30);
    for (int i = 0; i < iters; i++) {
        if (rank == 2)
            sleep_ms(d);
        MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half); /* SPLIT */
        MPI_Comm_free(&half);
    }
    MPI_Finalize();
    return 0;
}
