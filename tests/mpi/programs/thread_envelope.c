/* Threads that send one envelope at once (MPI_THREAD_MULTIPLE, 2 ranks): on rank 1, THREADS
 * threads each send MSGS messages with the same communicator, destination and tag, as fast
 * as they can; rank 0 receives them all with MPI_Mprobe + MPI_Imrecv + MPI_Wait from as many
 * threads. MPI does not order sends of different threads: which send a receive got is known
 * only from the times.   thread_envelope [THREADS] [MSGS] */
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static int rank, msgs;

static void *work(void *arg)
{
    int id = (int)(long)arg, x = id;
    for (int i = 0; i < msgs; i++) {
        if (rank == 1) {
            MPI_Send(&x, 1, MPI_INT, 0, 7, MPI_COMM_WORLD);
        } else {
            MPI_Message m;
            MPI_Request req;
            int y;
            MPI_Mprobe(1, 7, MPI_COMM_WORLD, &m, MPI_STATUS_IGNORE);
            MPI_Imrecv(&y, 1, MPI_INT, &m, &req);
            MPI_Wait(&req, MPI_STATUS_IGNORE);
        }
    }
    return NULL;
}

int main(int argc, char **argv)
{
    int provided, threads = argc > 1 ? atoi(argv[1]) : 4;
    msgs = argc > 2 ? atoi(argv[2]) : 200;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    if (provided < MPI_THREAD_MULTIPLE) MPI_Abort(MPI_COMM_WORLD, 2);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    pthread_t th[64];
    for (int t = 0; t < threads; t++) pthread_create(&th[t], NULL, work, (void *)(long)t);
    for (int t = 0; t < threads; t++) pthread_join(th[t], NULL);
    MPI_Finalize();
    return 0;
}
