/* Per-call cost of intercepted MPI calls, timed call by call: N calls of
 * MPI_Test on MPI_REQUEST_NULL and N of MPI_Iprobe with nothing pending
 * (both answered at once by MPI, so the time is mostly call overhead).
 * Prints the median and the mean in ns of each; run it with and without
 * the tracer preloaded and subtract.  usage: call_loop [n] */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Batches of 8 calls per timing: clock_gettime's own cost (~30 ns) is
 * spread, and the same in both runs, so it cancels in the difference. */
#define BATCH 8

static void report(const char *name, double *per_call, long batches, double total_ns, long n)
{
    qsort(per_call, (size_t)batches, sizeof(double), cmp);
    printf("%s_median_ns %.3f\n%s_mean_ns %.3f\n", name, per_call[batches / 2], name, total_ns / n);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    long n = argc > 1 ? atol(argv[1]) : 2000000, batches = n / BATCH;
    double *t = malloc(sizeof(double) * (size_t)batches);
    MPI_Request req = MPI_REQUEST_NULL;
    int flag;
    double start = now_ns();
    for (long b = 0; b < batches; b++) {
        double t0 = now_ns();
        for (int i = 0; i < BATCH; i++) MPI_Test(&req, &flag, MPI_STATUS_IGNORE);
        t[b] = (now_ns() - t0) / BATCH;
    }
    report("test", t, batches, now_ns() - start, batches * BATCH);
    start = now_ns();
    for (long b = 0; b < batches; b++) {
        double t0 = now_ns();
        for (int i = 0; i < BATCH; i++)
            MPI_Iprobe(MPI_ANY_SOURCE, 12345, MPI_COMM_SELF, &flag, MPI_STATUS_IGNORE);
        t[b] = (now_ns() - t0) / BATCH;
    }
    report("iprobe", t, batches, now_ns() - start, batches * BATCH);
    free(t);
    MPI_Finalize();
    return 0;
}
