/* MPI_Pcontrol pauses and resumes recording (S-CAT's start/stop API):
 * phase A (3 barriers, recorded), MPI_Pcontrol(0), phase B (5 allreduces and
 * a ring message, not recorded), MPI_Pcontrol(1), phase C (2 bcasts). */
#include <mpi.h>

int main(int argc, char **argv)
{
    int rank, size, x = 1, y;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    for (int i = 0; i < 3; i++) MPI_Barrier(MPI_COMM_WORLD);
    MPI_Pcontrol(0);
    for (int i = 0; i < 5; i++) MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Sendrecv(&x, 1, MPI_INT, (rank + 1) % size, 0, &y, 1, MPI_INT, (rank + size - 1) % size, 0,
                 MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Pcontrol(1);
    for (int i = 0; i < 2; i++) MPI_Bcast(&x, 1, MPI_INT, 0, MPI_COMM_WORLD);
    MPI_Finalize();
    return 0;
}
