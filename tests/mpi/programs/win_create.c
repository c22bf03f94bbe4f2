/* Waits at window creation and freeing: each iteration creates a window over all ranks
 * and frees it; rank 2 sleeps DELAY before MPI_Win_create (mode create, or both), before
 * MPI_Win_free (mode free, or both), and the other ranks wait in that call for it (both are
 * collective: MPI agrees on the window over all ranks, and frees none while another
 * rank may still access it).
 *   win_create MODE ITERS DELAY_MS */
#include <mpi.h>
#include <string.h>

#include "delay.h"

int main(int argc, char **argv)
{
    int rank;
    double slot[4] = {0};
    MPI_Win win;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    const char *mode = argc > 1 ? argv[1] : "create";
    int iters = (int)arg(argc, argv, 2, 4);
    double d = arg(argc, argv, 3, 60);
    MPI_Barrier(MPI_COMM_WORLD); /* the ranks leave MPI_Init milliseconds apart: not a window's wait */
    for (int i = 0; i < iters; i++) {
        if (rank == 2 && strcmp(mode, "free"))
            sleep_ms(d);
        MPI_Win_create(slot, sizeof slot, sizeof(double), MPI_INFO_NULL, MPI_COMM_WORLD, &win); /* WIN_CREATE */
        if (rank == 2 && strcmp(mode, "create"))
            sleep_ms(d);
        MPI_Win_free(&win); /* WIN_FREE */
    }
    MPI_Finalize();
    return 0;
}
