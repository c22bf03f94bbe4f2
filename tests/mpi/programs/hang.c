/* A run that stops progressing, for the diagnosis of a run stopped by a signal (analysis/hang.py).
 * ./hang MODE: after a few allreduces, "ready" on stdout (rank 0), then
 *   recv:     rank 1 receives (tag 7) what rank 0 never sends; the others enter a barrier. Rank 1
 *             blocks SIGINT (in every thread: before MPI_Init starts any), as a rank the launcher
 *             kills with SIGKILL before its Ctrl-C acts does: its file says only "cut off"
 *   sends:    ranks 0 and 1 both send 4 MiB to each other before receiving (above any eager limit)
 *   outside:  rank 2 sleeps for ever outside MPI; the others enter an allreduce
 *   progress: every rank loops on an allreduce and a 2 ms sleep: busy, never blocked long */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "recv";
    const char *launched = getenv("PMI_RANK") ? getenv("PMI_RANK") : getenv("OMPI_COMM_WORLD_RANK");
    if (!strcmp(mode, "recv") && launched && !strcmp(launched, "1")) {
        sigset_t intr;
        sigemptyset(&intr);
        sigaddset(&intr, SIGINT);
        pthread_sigmask(SIG_BLOCK, &intr, NULL);
    }
    MPI_Init(&argc, &argv);
    int rank, x = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    for (int i = 0; i < 10; i++) MPI_Allreduce(MPI_IN_PLACE, &x, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("ready\n");
        fflush(stdout);
    }
    if (!strcmp(mode, "recv")) {
        if (rank == 1) MPI_Recv(&x, 1, MPI_INT, 0, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        else MPI_Barrier(MPI_COMM_WORLD);
    } else if (!strcmp(mode, "sends")) {
        int n = 1 << 20, *out = calloc(n, sizeof(int)), *in = calloc(n, sizeof(int));
        if (rank < 2) {
            MPI_Send(out, n, MPI_INT, 1 - rank, 3, MPI_COMM_WORLD);
            MPI_Recv(in, n, MPI_INT, 1 - rank, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        }
        MPI_Barrier(MPI_COMM_WORLD);
    } else if (!strcmp(mode, "outside")) {
        if (rank == 2)
            for (;;) sleep(1);
        MPI_Allreduce(MPI_IN_PLACE, &x, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    } else {
        for (;;) {
            MPI_Allreduce(MPI_IN_PLACE, &x, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
            usleep(2000);
        }
    }
    MPI_Finalize();
    return 0;
}
