/* One-sided epochs: fence (Put, Get, Accumulate), post/start/complete/wait,
 * passive target lock/unlock (Fetch_and_op, Compare_and_swap,
 * Get_accumulate) and lock_all with request-based Rput/Rget and flush.
 * Every rank targets rank (rank+1) % size with COUNT ints. */
#include <mpi.h>
#include <stdlib.h>

#define COUNT 8

int main(int argc, char **argv)
{
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int target = (rank + 1) % size, origin = (rank + size - 1) % size;
    int *base, local[COUNT] = {0}, result[COUNT], one = 1, old;
    MPI_Win win;
    MPI_Win_allocate(COUNT * sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win);

    MPI_Win_fence(0, win);
    MPI_Put(local, COUNT, MPI_INT, target, 0, COUNT, MPI_INT, win);
    MPI_Win_fence(0, win);
    MPI_Get(result, COUNT, MPI_INT, target, 0, COUNT, MPI_INT, win);
    MPI_Win_fence(0, win);
    MPI_Accumulate(local, COUNT, MPI_INT, target, 0, COUNT, MPI_INT, MPI_SUM, win);
    MPI_Win_fence(0, win);

    MPI_Group world, to, from;
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    MPI_Group_incl(world, 1, &target, &to);
    MPI_Group_incl(world, 1, &origin, &from);
    MPI_Win_post(from, 0, win);
    MPI_Win_start(to, 0, win);
    MPI_Put(local, COUNT, MPI_INT, target, 0, COUNT, MPI_INT, win);
    MPI_Win_complete(win);
    MPI_Win_wait(win);

    MPI_Win_lock(MPI_LOCK_EXCLUSIVE, target, 0, win);
    MPI_Fetch_and_op(&one, &old, MPI_INT, target, 0, MPI_SUM, win);
    MPI_Compare_and_swap(&one, &old, &old, MPI_INT, target, 1, win);
    MPI_Get_accumulate(local, COUNT, MPI_INT, result, COUNT, MPI_INT, target, 0, COUNT, MPI_INT, MPI_SUM, win);
    MPI_Win_unlock(target, win);

    MPI_Request req[2];
    MPI_Win_lock_all(0, win);
    MPI_Rput(local, COUNT, MPI_INT, target, 0, COUNT, MPI_INT, win, &req[0]);
    MPI_Rget(result, COUNT, MPI_INT, target, 0, COUNT, MPI_INT, win, &req[1]);
    MPI_Waitall(2, req, MPI_STATUSES_IGNORE);
    MPI_Win_flush(target, win);
    MPI_Win_unlock_all(win);

    MPI_Group_free(&to);
    MPI_Group_free(&from);
    MPI_Group_free(&world);
    MPI_Win_free(&win);
    MPI_Finalize();
    return 0;
}
