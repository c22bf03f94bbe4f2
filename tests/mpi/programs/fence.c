/* Wait at fence: rank 2 sleeps DELAY before each MPI_Win_fence of a window on all
 * ranks, and each rank puts one value to the next rank between the fences; the
 * other ranks wait in the fence for rank 2, DELAY per fence (ITERS + 1 fences).
 *   fence ITERS DELAY_MS */
#include <mpi.h>

#include "delay.h"

int main(int argc, char **argv)
{
    int rank, size;
    double slot[4] = {0}, one = 1.0;
    MPI_Win win;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int iters = (int)arg(argc, argv, 1, 5);
    double d = arg(argc, argv, 2, 30);
    MPI_Win_create(slot, sizeof slot, sizeof(double), MPI_INFO_NULL, MPI_COMM_WORLD, &win);
    for (int i = 0; i <= iters; i++) {
        if (rank == 2)
            sleep_ms(d);
        MPI_Win_fence(0, win); /* FENCE */
        if (i < iters)
            MPI_Put(&one, 1, MPI_DOUBLE, (rank + 1) % size, rank % 4, 1, MPI_DOUBLE, win);
    }
    MPI_Win_free(&win);
    MPI_Finalize();
    return 0;
}
