/* Two threads of rank 0 in MPI at once: each receives one message from rank 1, which
 * sleeps DELAY first (a sleep: the threads spin in MPI_Recv on shared cores).
 *   threads_in_mpi DELAY_MS   (2 ranks, MPI_THREAD_MULTIPLE) */
#include <mpi.h>
#include <pthread.h>

#include "delay.h"

static void *receive(void *tag)
{
    int x;
    MPI_Recv(&x, 1, MPI_INT, 1, *(int *)tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    return NULL;
}

int main(int argc, char **argv)
{
    int provided, rank, x = 1, tags[2] = {1, 2};
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (provided < MPI_THREAD_MULTIPLE)
        MPI_Abort(MPI_COMM_WORLD, 2);
    if (rank == 0) {
        pthread_t t[2];
        for (int i = 0; i < 2; i++)
            pthread_create(&t[i], NULL, receive, &tags[i]);
        for (int i = 0; i < 2; i++)
            pthread_join(t[i], NULL);
    } else if (rank == 1) {
        sleep_ms(arg(argc, argv, 1, 200));
        for (int i = 0; i < 2; i++)
            MPI_Send(&x, 1, MPI_INT, 0, tags[i], MPI_COMM_WORLD);
    }
    MPI_Finalize();
    return 0;
}
