/* Two windows created one after the other, then used in the other order (as mpi4py's cpi-rma
 * demo does): each creation belongs to its own MPI_Win_create. */
#include <mpi.h>

int main(int argc, char **argv)
{
    int a[4] = {0}, b[4] = {0};
    MPI_Win first, second;
    MPI_Init(&argc, &argv);
    MPI_Win_create(a, sizeof a, sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &first);
    MPI_Win_create(b, sizeof b, sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &second);
    MPI_Win_fence(0, second);
    MPI_Win_fence(0, second);
    MPI_Win_fence(0, first);
    MPI_Win_fence(0, first);
    MPI_Win_free(&second);
    MPI_Win_free(&first);
    MPI_Finalize();
    return 0;
}
