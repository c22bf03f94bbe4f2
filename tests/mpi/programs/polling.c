/* Polling loops and failed calls (issue 23).
 *   polling test|testany|testsome|testall|iprobe SECONDS   (2 ranks): rank 1 sends after SECONDS
 *     (a sleep); rank 0 polls for the message with the call named until it is there.
 *   polling greq SECONDS   (1 rank, MPI_THREAD_MULTIPLE): a generalized request that another
 *     thread completes after SECONDS, polled with MPI_Test.
 *   polling bsend   (2 ranks): an MPI_Bsend without attached buffer fails (MPI_ERR_BUFFER under
 *     MPI_ERRORS_RETURN); then 3 standard sends with the same envelope, received in order.
 *   polling cycle SECONDS   (2 ranks): as test, but each turn of the loop polls three call
 *     sites: MPI_Test on the receive, MPI_Iprobe for a message never sent, MPI_Testany on the
 *     receive (a progress loop over several request sets).
 * Prints "polls N" (the calls made) on rank 0; in cycle mode, "polls TEST IPROBE TESTANY". */
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static MPI_Request greq;
static double delay;

static int query(void *extra, MPI_Status *st)
{
    (void)extra;
    MPI_Status_set_elements(st, MPI_BYTE, 0);
    MPI_Status_set_cancelled(st, 0);
    st->MPI_SOURCE = MPI_UNDEFINED;
    st->MPI_TAG = MPI_UNDEFINED;
    return MPI_SUCCESS;
}
static int free_fn(void *extra) { (void)extra; return MPI_SUCCESS; }
static int cancel_fn(void *extra, int complete) { (void)extra; (void)complete; return MPI_SUCCESS; }

static void *completer(void *arg)
{
    (void)arg;
    usleep((useconds_t)(delay * 1e6));
    MPI_Grequest_complete(greq);
    return NULL;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "test";
    delay = argc > 2 ? atof(argv[2]) : 1.0;
    int provided, rank;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    long polls = 0;
    int x = 7, y = 0, flag = 0;
    if (!strcmp(mode, "greq")) {
        MPI_Grequest_start(query, free_fn, cancel_fn, NULL, &greq);
        pthread_t th;
        pthread_create(&th, NULL, completer, NULL);
        while (!flag) {
            MPI_Test(&greq, &flag, MPI_STATUS_IGNORE);
            polls++;
        }
        pthread_join(th, NULL);
    } else if (!strcmp(mode, "bsend")) {
        MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
        if (rank == 1) {
            int rc = MPI_Bsend(&x, 1, MPI_INT, 0, 5, MPI_COMM_WORLD);  /* no buffer attached: fails */
            if (rc == MPI_SUCCESS) fprintf(stderr, "MPI_Bsend did not fail\n");
            for (int i = 0; i < 3; i++) MPI_Send(&i, 1, MPI_INT, 0, 5, MPI_COMM_WORLD);
        } else if (rank == 0) {
            for (int i = 0; i < 3; i++) {
                MPI_Recv(&y, 1, MPI_INT, 1, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                if (y != i) fprintf(stderr, "message %d out of order: %d\n", i, y);
            }
        }
    } else if (rank == 1) {
        usleep((useconds_t)(delay * 1e6));
        MPI_Send(&x, 1, MPI_INT, 0, 1, MPI_COMM_WORLD);
    } else if (rank == 0) {
        MPI_Request req;
        int index, outcount, indices[1];
        if (!strcmp(mode, "cycle")) {
            long tests = 0, probes = 0, anys = 0;
            int none = 0;
            MPI_Irecv(&y, 1, MPI_INT, 1, 1, MPI_COMM_WORLD, &req);
            while (!flag) {
                MPI_Test(&req, &flag, MPI_STATUS_IGNORE);
                tests++;
                if (flag) break;
                MPI_Iprobe(1, 9, MPI_COMM_WORLD, &none, MPI_STATUS_IGNORE);
                probes++;
                MPI_Testany(1, &req, &index, &flag, MPI_STATUS_IGNORE);
                anys++;
            }
            printf("polls %ld %ld %ld\n", tests, probes, anys);
            MPI_Finalize();
            return 0;
        } else if (!strcmp(mode, "iprobe")) {
            while (!flag) {
                MPI_Iprobe(1, 1, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
                polls++;
            }
            MPI_Recv(&y, 1, MPI_INT, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            MPI_Irecv(&y, 1, MPI_INT, 1, 1, MPI_COMM_WORLD, &req);
            while (!flag) {
                if (!strcmp(mode, "test")) MPI_Test(&req, &flag, MPI_STATUS_IGNORE);
                else if (!strcmp(mode, "testany")) MPI_Testany(1, &req, &index, &flag, MPI_STATUS_IGNORE);
                else if (!strcmp(mode, "testall")) MPI_Testall(1, &req, &flag, MPI_STATUSES_IGNORE);
                else {
                    MPI_Testsome(1, &req, &outcount, indices, MPI_STATUSES_IGNORE);
                    flag = outcount > 0;
                }
                polls++;
            }
        }
    }
    if (rank == 0) printf("polls %ld\n", polls);
    MPI_Finalize();
    return 0;
}
