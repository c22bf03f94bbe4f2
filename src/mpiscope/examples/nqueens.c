/* nqueens: count the N-queens solutions with a master/worker task farm (003 §5, Fig. 11).
 *
 * usage: nqueens [--n N] [--depth D]        (defaults N = 15, D = 3)
 *
 * Rank 0, the master, lists the placements of the first D queens (the tasks) and hands them out
 * on request. Each worker sends a request (tag REQUEST), receives a task (TASK) or the end (STOP),
 * counts the completions of its task by bitmask backtracking, sends the count back (RESULT) and
 * asks again. The master receives two messages per task and sends one: it is the hot spot S-CAT
 * found in its N-queens run. With one rank, rank 0 solves every task itself.
 *
 * Check: the total against the known counts for N <= 16 (N = 10: 724).
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { REQUEST = 1, RESULT = 2, TASK = 3, STOP = 4 };

/* 003's benchmark (ref. 8) set the N = 24 record; these are OEIS A000170 for N = 0..16 */
static const long long KNOWN[17] = {1, 1, 0, 0, 2, 10, 4, 40, 92, 352, 724, 2680, 14200, 73712, 365596,
                                    2279184, 14772512};

/* solutions below a partial placement: cols/ld/rd are the attacked columns of the next row */
static long long solve(unsigned all, unsigned cols, unsigned ld, unsigned rd)
{
    if (cols == all) return 1;
    long long count = 0;
    for (unsigned free_ = all & ~(cols | ld | rd); free_; free_ &= free_ - 1) {
        unsigned bit = free_ & -free_;
        count += solve(all, cols | bit, ((ld | bit) << 1) & all, (rd | bit) >> 1);
    }
    return count;
}

/* all placements of `depth` queens as (cols, ld, rd) triples; returns their number */
static int list_tasks(unsigned all, unsigned cols, unsigned ld, unsigned rd, int depth, unsigned *out, int n)
{
    if (depth == 0 || cols == all) {
        if (out) memcpy(out + 3 * n, (unsigned[3]){cols, ld, rd}, sizeof(unsigned) * 3);
        return n + 1;
    }
    for (unsigned free_ = all & ~(cols | ld | rd); free_; free_ &= free_ - 1) {
        unsigned bit = free_ & -free_;
        n = list_tasks(all, cols | bit, ((ld | bit) << 1) & all, (rd | bit) >> 1, depth - 1, out, n);
    }
    return n;
}

static long long master(int size, unsigned all, int depth, int *ntasks)
{
    *ntasks = list_tasks(all, 0, 0, 0, depth, NULL, 0);
    unsigned *tasks = malloc(sizeof(unsigned) * 3 * (size_t)*ntasks + 1);
    list_tasks(all, 0, 0, 0, depth, tasks, 0);
    long long total = 0;
    if (size == 1)
        for (int t = 0; t < *ntasks; t++) total += solve(all, tasks[3 * t], tasks[3 * t + 1], tasks[3 * t + 2]);
    for (int next = 0, active = size - 1; active > 0;) {
        long long msg;
        MPI_Status st;
        MPI_Recv(&msg, 1, MPI_LONG_LONG, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
        if (st.MPI_TAG == RESULT) {
            total += msg;
        } else if (next < *ntasks) {
            MPI_Send(tasks + 3 * next++, 3, MPI_UNSIGNED, st.MPI_SOURCE, TASK, MPI_COMM_WORLD);
        } else {
            MPI_Send(tasks, 0, MPI_UNSIGNED, st.MPI_SOURCE, STOP, MPI_COMM_WORLD);
            active--;
        }
    }
    free(tasks);
    return total;
}

static int worker(unsigned all)
{
    long long count = 0;
    unsigned task[3];
    int done = 0;
    MPI_Send(&count, 1, MPI_LONG_LONG, 0, REQUEST, MPI_COMM_WORLD);
    for (;;) {
        MPI_Status st;
        MPI_Recv(task, 3, MPI_UNSIGNED, 0, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
        if (st.MPI_TAG == STOP) return done;
        count = solve(all, task[0], task[1], task[2]);
        done++;
        /* the result, then the next request: the same source, so they arrive in this order */
        MPI_Send(&count, 1, MPI_LONG_LONG, 0, RESULT, MPI_COMM_WORLD);
        MPI_Send(&count, 1, MPI_LONG_LONG, 0, REQUEST, MPI_COMM_WORLD);
    }
}

int main(int argc, char **argv)
{
    int size, rank, n = 15, depth = 3;
    MPI_Init(&argc, &argv);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--n") && i + 1 < argc) {
            n = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--depth") && i + 1 < argc) {
            depth = atoi(argv[++i]);
        } else {
            if (rank == 0) fprintf(stderr, "usage: nqueens [--n N] [--depth D]\n");
            MPI_Finalize();
            return 2;
        }
    }
    if (n < 1 || n > 31) {
        if (rank == 0) fprintf(stderr, "nqueens: N must be between 1 and 31\n");
        MPI_Finalize();
        return 2;
    }
    unsigned all = (1u << n) - 1;
    int status = 0;
    double t0 = MPI_Wtime();
    if (rank == 0) {
        int ntasks;
        long long total = master(size, all, depth < 0 ? 0 : depth, &ntasks);
        printf("nqueens: N=%d, %d tasks of depth %d, %d workers, %.3f s: %lld solutions", n, ntasks, depth,
               size - 1, MPI_Wtime() - t0, total);
        if (n <= 16) {
            status = total == KNOWN[n] ? 0 : 1;
            printf(" (expected %lld): %s", KNOWN[n], status ? "FAILED" : "OK");
        }
        printf("\n");
    } else {
        worker(all);
    }
    MPI_Finalize();
    return status;
}
