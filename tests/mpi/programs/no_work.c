/* Ranks that compute nothing between their collectives (2 ranks): 20 MPI_Allreduce in a row. */
#include <mpi.h>

int main(int argc, char **argv)
{
    double x = 1, y;
    MPI_Init(&argc, &argv);
    for (int i = 0; i < 20; i++) MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    MPI_Finalize();
    return 0;
}
