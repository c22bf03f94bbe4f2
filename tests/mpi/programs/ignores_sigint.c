/* A program that ignores SIGINT (as a shell's background job does) and is sent
 * one halfway through: it goes on, and so must its recording. */
#include <mpi.h>
#include <signal.h>

int main(int argc, char **argv)
{
    signal(SIGINT, SIG_IGN);
    MPI_Init(&argc, &argv);
    for (int i = 0; i < 5; i++) MPI_Barrier(MPI_COMM_WORLD);
    raise(SIGINT);
    for (int i = 0; i < 5; i++) MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    return 0;
}
