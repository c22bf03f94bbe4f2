/* Threads that come and go: ROUNDS rounds of THREADS short-lived threads,
 * each sending one message to the next rank and receiving one (tag = round).
 * More threads in total than the recorder has thread slots, so slots of
 * finished threads must be reused. usage: threads_churn [rounds] [threads] */
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static int rank, size;

static void *once(void *arg)
{
    int tag = (int)(long)arg, x = rank, y;
    MPI_Sendrecv(&x, 1, MPI_INT, (rank + 1) % size, tag, &y, 1, MPI_INT, (rank + size - 1) % size, tag,
                 MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    return NULL;
}

int main(int argc, char **argv)
{
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    if (provided < MPI_THREAD_MULTIPLE) {
        fprintf(stderr, "threads_churn: MPI_THREAD_MULTIPLE not provided\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    int rounds = argc > 1 ? atoi(argv[1]) : 300, nthreads = argc > 2 ? atoi(argv[2]) : 4;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    pthread_t *th = malloc(sizeof(pthread_t) * (size_t)nthreads);
    for (int r = 0; r < rounds; r++) {
        for (int t = 0; t < nthreads; t++) pthread_create(&th[t], NULL, once, (void *)(long)(r * nthreads + t));
        for (int t = 0; t < nthreads; t++) pthread_join(th[t], NULL);
    }
    free(th);
    MPI_Finalize();
    return 0;
}
