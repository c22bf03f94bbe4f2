/* MPI_THREAD_MULTIPLE: THREADS threads per rank call MPI at once. Thread t
 * of rank r sends MSGS messages with tag t to rank r+1 and receives as many
 * with tag t from rank r-1. The threads start and end together (a barrier):
 * the recorder gives an exited thread's slot to the next thread that calls MPI,
 * and a thread that finished before another began would share its number.
 * usage: threads [threads] [msgs] */
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static int rank, size, msgs;
static pthread_barrier_t together;

static void *work(void *arg)
{
    int t = (int)(long)arg, next = (rank + 1) % size, prev = (rank + size - 1) % size;
    double buf[16] = {0};
    pthread_barrier_wait(&together);
    for (int i = 0; i < msgs; i++) {
        MPI_Request req;
        MPI_Irecv(buf + 8, 8, MPI_DOUBLE, prev, t, MPI_COMM_WORLD, &req);
        MPI_Send(buf, 8, MPI_DOUBLE, next, t, MPI_COMM_WORLD);
        MPI_Wait(&req, MPI_STATUS_IGNORE);
    }
    pthread_barrier_wait(&together);
    return NULL;
}

int main(int argc, char **argv)
{
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    if (provided < MPI_THREAD_MULTIPLE) {
        fprintf(stderr, "threads: MPI_THREAD_MULTIPLE not provided\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    int nthreads = argc > 1 ? atoi(argv[1]) : 4;
    msgs = argc > 2 ? atoi(argv[2]) : 50;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    pthread_t *th = malloc(sizeof(pthread_t) * (size_t)nthreads);
    pthread_barrier_init(&together, NULL, (unsigned)nthreads);
    for (long t = 0; t < nthreads; t++) pthread_create(&th[t], NULL, work, (void *)t);
    for (int t = 0; t < nthreads; t++) pthread_join(th[t], NULL);
    free(th);
    pthread_barrier_destroy(&together);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    return 0;
}
