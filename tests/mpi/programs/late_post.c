/* One-sided synchronisation with a late target: rank 1 sleeps DELAY before each MPI_Win_post;
 * rank 0 starts its access epoch at once and puts one int (MPI_Win_start, MPI_Put,
 * MPI_Win_complete): it waits for the post, which diagnose cannot attribute to a pattern.
 *   late_post ITERS DELAY_MS */
#include <mpi.h>

#include "delay.h"

int main(int argc, char **argv)
{
    int rank, *base, x = 1;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    int iters = (int)arg(argc, argv, 1, 4);
    double d = arg(argc, argv, 2, 60);
    MPI_Win win;
    MPI_Win_allocate(sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win);
    MPI_Group world, peer;
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    int other = 1 - rank;
    MPI_Group_incl(world, 1, &other, &peer);
    for (int i = 0; i < iters; i++) {
        if (rank == 0) {
            MPI_Win_start(peer, 0, win);
            MPI_Put(&x, 1, MPI_INT, 1, 0, 1, MPI_INT, win);
            MPI_Win_complete(win);
        } else if (rank == 1) {
            sleep_ms(d);
            MPI_Win_post(peer, 0, win);
            MPI_Win_wait(win);
        }
    }
    MPI_Group_free(&peer);
    MPI_Group_free(&world);
    MPI_Win_free(&win);
    MPI_Finalize();
    return 0;
}
