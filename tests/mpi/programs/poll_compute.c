/* A polling loop that computes between its polls (2 ranks):
 *   poll_compute POLLS MS
 * rank 0 probes POLLS times for a message that never comes, working MS ms (a sleep) before each
 * probe, as a solver that checks for requests between steps; then both ranks meet at a barrier.
 * The probes fold into one record whose span is mostly the work between them. */
#include <mpi.h>
#include "delay.h"

int main(int argc, char **argv)
{
    int rank, flag;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    int polls = (int)arg(argc, argv, 1, 40);
    double ms = arg(argc, argv, 2, 2);
    if (rank == 0)
        for (int i = 0; i < polls; i++) {
            sleep_ms(ms);
            MPI_Iprobe(1, 99, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
        }
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    return 0;
}
