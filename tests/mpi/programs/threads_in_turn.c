/* Threads that take turns in MPI (MPI_THREAD_SERIALIZED, 2 ranks): a first thread exchanges a message
 * each way with the other rank and ends, then a second thread does the same. */
#include <mpi.h>
#include <pthread.h>

static int rank;

static void *exchange(void *arg)
{
    (void)arg;
    int v = rank, w;
    MPI_Sendrecv(&v, 1, MPI_INT, 1 - rank, 0, &w, 1, MPI_INT, 1 - rank, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    return NULL;
}

int main(int argc, char **argv)
{
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    for (int k = 0; k < 2; k++) {
        pthread_t t;
        pthread_create(&t, NULL, exchange, NULL);
        pthread_join(t, NULL);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    return 0;
}
