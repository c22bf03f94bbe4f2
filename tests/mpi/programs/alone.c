/* Work one rank does alone, then a local MPI call: rank 0 works DELAY (a sleep) while the others
 * go straight on, frees a communicator (a call that waits for no one), then joins an allreduce
 * the others wait in. The wait is rank 0's work, however many local calls come between; no share
 * of rows can balance it.
 *   alone DELAY_MS */
#include <mpi.h>

#include "delay.h"

int main(int argc, char **argv)
{
    int rank;
    long x, y;
    MPI_Comm dup;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    if (rank == 0) sleep_ms(arg(argc, argv, 1, 200));
    MPI_Comm_free(&dup);
    x = rank;
    MPI_Allreduce(&x, &y, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    MPI_Finalize();
    return 0;
}
