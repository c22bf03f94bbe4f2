/* Work between collectives no other rank takes part in (2 ranks): rank 0 computes (sleeps) 20 pieces of
 * MS ms, each followed by a reduction on MPI_COMM_SELF (as LAMMPS' replicas of one rank reduce over
 * their own partition), then both ranks meet in an MPI_Allreduce on the world; 3 times.
 *   self_collectives MS */
#include <mpi.h>
#include "delay.h"

int main(int argc, char **argv)
{
    int rank;
    double x = 1, y;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    double ms = arg(argc, argv, 1, 10);
    for (int it = 0; it < 3; it++) {
        if (rank == 0)
            for (int k = 0; k < 20; k++) {
                sleep_ms(ms);
                MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_SELF);
            }
        MPI_Allreduce(&x, &y, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    }
    MPI_Finalize();
    return 0;
}
