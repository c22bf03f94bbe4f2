/* Waits between threads (MPI_THREAD_MULTIPLE, 2 ranks, 2 threads each, delays as sleeps).
 * handoff: on each rank a second thread sleeps 150 ms ("computes"), then sends to its own rank,
 *   while the first thread waits in MPI_Recv for it: a wait between threads of one rank, 3 times.
 * order: each thread on a communicator of its own; rank 1's thread 1 sends at once, its thread 0
 *   after 100 ms; rank 0's thread 0 waits for the late message while thread 1's message, sent first,
 *   is received by thread 1 only after its own 200 ms: nothing this thread could receive instead. */
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include "delay.h"

static int rank, handoff;
static MPI_Comm comms[2];

static void *body(void *arg)
{
    int t = (int)(long)arg;
    char buf[256] = {0};
    for (int i = 0; i < 3; i++) {
        if (handoff) {
            if (t == 1) {
                sleep_ms(150);
                MPI_Send(buf, 64, MPI_CHAR, rank, 5, MPI_COMM_WORLD);
            } else {
                MPI_Recv(buf, 256, MPI_CHAR, rank, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            }
        } else if (rank == 1) {
            if (t == 0) sleep_ms(100);
            MPI_Send(buf, 100 + t, MPI_CHAR, 0, 7, comms[t]);
        } else {
            if (t == 1) sleep_ms(200);
            MPI_Recv(buf, 256, MPI_CHAR, 1, 7, comms[t], MPI_STATUS_IGNORE);
        }
    }
    return NULL;
}

int main(int argc, char **argv)
{
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    handoff = argc > 1 && strcmp(argv[1], "handoff") == 0;
    MPI_Comm_dup(MPI_COMM_WORLD, &comms[0]);
    MPI_Comm_dup(MPI_COMM_WORLD, &comms[1]);
    pthread_t other;
    pthread_create(&other, NULL, body, (void *)1L);
    body((void *)0L);
    pthread_join(other, NULL);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Comm_free(&comms[0]);
    MPI_Comm_free(&comms[1]);
    MPI_Finalize();
    return provided == MPI_THREAD_MULTIPLE ? 0 : 2;
}
