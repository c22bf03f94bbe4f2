/* A long call of one thread among many short ones of another (2 ranks, MPI_THREAD_MULTIPLE): thread 0
 * of rank 0 sits in MPI_Recv until rank 1 sends at the end; thread 1 of both ranks ping-pongs 300
 * times on a duplicated communicator, 1 ms apart (a sleep). */
#include <mpi.h>
#include <pthread.h>
#include "delay.h"

static int rank;
static MPI_Comm other;

static void *pingpong(void *arg)
{
    (void)arg;
    char b[16] = {0};
    for (int i = 0; i < 300; i++) {
        sleep_ms(1);
        if (rank == 0) {
            MPI_Send(b, 16, MPI_CHAR, 1, 3, other);
            MPI_Recv(b, 16, MPI_CHAR, 1, 3, other, MPI_STATUS_IGNORE);
        } else {
            MPI_Recv(b, 16, MPI_CHAR, 0, 3, other, MPI_STATUS_IGNORE);
            MPI_Send(b, 16, MPI_CHAR, 0, 3, other);
        }
    }
    return NULL;
}

int main(int argc, char **argv)
{
    int provided;
    char b[8] = {0};
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_dup(MPI_COMM_WORLD, &other);
    pthread_t t;
    pthread_create(&t, NULL, pingpong, NULL);
    if (rank == 0) MPI_Recv(b, 8, MPI_CHAR, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    pthread_join(t, NULL);
    if (rank == 1) MPI_Send(b, 8, MPI_CHAR, 0, 1, MPI_COMM_WORLD);
    MPI_Comm_free(&other);
    MPI_Finalize();
    return 0;
}
