/* A program that dies mid-run: ranks exchange ITERS ring messages and meet in
 * a barrier, then rank 1 dies while the others block in a second barrier and
 * are killed by the launcher.
 * What every rank recorded before must stay readable.
 * usage: crash [iters] [segv|abort|kill]   (kill: SIGKILL, which no handler sees) */
#include <mpi.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    int rank, size, x = 0;
    MPI_Init(&argc, &argv);
    int iters = argc > 1 ? atoi(argv[1]) : 10;
    const char *how = argc > 2 ? argv[2] : "segv";
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    for (int i = 0; i < iters; i++)
        MPI_Sendrecv_replace(&x, 1, MPI_INT, (rank + 1) % size, i, (rank + size - 1) % size, i,
                             MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Barrier(MPI_COMM_WORLD); /* every exchange is complete (and recorded) everywhere */
    if (rank == 1) {
        if (strcmp(how, "abort") == 0) {
            MPI_Abort(MPI_COMM_WORLD, 3);
        } else if (strcmp(how, "kill") == 0) {
            raise(SIGKILL);
        } else {
            volatile int *nowhere = NULL;
            *nowhere = 42;
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    return 0;
}
