/* The max-effect loop of 000 §5.1 with a sleep as the workload: ITERS times
 * MPI_Barrier, then rank LOADED sleeps LOAD_US microseconds, then MPI_Bcast
 * of BYTES from rank 0. By default the loaded rank is the first receiver of
 * root 0 (2^n with 2^n < size <= 2^(n+1)), the one whose lateness delays the
 * largest subtree.
 *
 * usage: bcast_load [ITERS] [BYTES] [LOAD_US] [LOADED]
 *
 * Rank 0 prints the means over the iterations of the overall time (last end
 * minus first start) and of the average per-process time (end - start), in
 * microseconds: "bcast_load: overall_us X average_us Y".
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int iters = argc > 1 ? atoi(argv[1]) : 50;
    int bytes = argc > 2 ? atoi(argv[2]) : 1024;
    long load_us = argc > 3 ? atol(argv[3]) : 20000;
    int first = 1;
    while (first * 2 < size) first *= 2;
    int loaded = argc > 4 ? atoi(argv[4]) : first;
    char *buf = calloc((size_t)bytes + 1, 1);
    double *t = malloc(sizeof(double) * 2 * (size_t)iters), *all = NULL;
    if (rank == 0) all = malloc(sizeof(double) * 2 * (size_t)iters * (size_t)size);
    for (int i = 0; i < iters; i++) {
        MPI_Barrier(MPI_COMM_WORLD);
        if (rank == loaded && load_us > 0) {
            /* a sleep, not computation: the ranks share few cores and spin while they wait */
            struct timespec ts = {load_us / 1000000, (load_us % 1000000) * 1000};
            nanosleep(&ts, NULL);
        }
        if (rank == 0) buf[0] = (char)i;
        t[2 * i] = MPI_Wtime();
        MPI_Bcast(buf, bytes, MPI_BYTE, 0, MPI_COMM_WORLD);
        t[2 * i + 1] = MPI_Wtime();
        if (buf[0] != (char)i) fprintf(stderr, "bcast_load: rank %d got wrong data at %d\n", rank, i);
    }
    /* MPI_Wtime is not synchronised across ranks unless MPI_WTIME_IS_GLOBAL; on one host it is one clock */
    MPI_Gather(t, 2 * iters, MPI_DOUBLE, all, 2 * iters, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        double overall = 0, average = 0;
        for (int i = 0; i < iters; i++) {
            double first_start = 1e300, last_end = -1e300, sum = 0;
            for (int r = 0; r < size; r++) {
                double s = all[(size_t)r * 2 * iters + 2 * i], e = all[(size_t)r * 2 * iters + 2 * i + 1];
                first_start = s < first_start ? s : first_start;
                last_end = e > last_end ? e : last_end;
                sum += e - s;
            }
            overall += last_end - first_start;
            average += sum / size;
        }
        printf("bcast_load: overall_us %.3f average_us %.3f\n", 1e6 * overall / iters, 1e6 * average / iters);
    }
    free(buf);
    free(t);
    free(all);
    MPI_Finalize();
    return 0;
}
