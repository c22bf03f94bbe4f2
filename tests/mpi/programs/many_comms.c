/* More communicators than the recorder numbers (65,534 over a run; freed ones' numbers are not
 * reused): COUNT duplicates of MPI_COMM_WORLD made and freed one after another, then a barrier on
 * the last, which the recorder no longer tracks.
 *   many_comms [COUNT=65600] */
#include <mpi.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int count = argc > 1 ? atoi(argv[1]) : 65600;
    MPI_Comm c;
    for (int i = 0; i < count; i++) {
        MPI_Comm_dup(MPI_COMM_WORLD, &c);
        MPI_Comm_free(&c);
    }
    MPI_Comm_dup(MPI_COMM_WORLD, &c);
    MPI_Barrier(c);
    MPI_Comm_free(&c);
    MPI_Finalize();
    return 0;
}
