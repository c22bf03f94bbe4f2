/* mm: row-block dense matrix product C = A.B of N x N doubles, S-CAT's MM (003 §3-4).
 *
 * usage: mm [--n N] [--partition FILE] [--row-ms MS] [--no-skew]        (default N = 2048)
 *
 * Each rank owns a block of consecutive rows of A and C (003 Fig. 3). Rank 0 fills B and
 * broadcasts it (MPI_Bcast); every rank generates its own rows of A, multiplies, and C is
 * gathered on rank 0 (MPI_Gatherv). A barrier after the broadcast starts all ranks together, so
 * a rank's entry into the gather, the end of its computation, also measures its compute time.
 * Rank 0 checks C by Freivalds' test (C.x = A.(B.x)) and prints each rank's compute seconds
 * (gathered with one MPI_Gather after the product).
 *
 * Skew. In S-CAT's 16-node run (003 Table 2) node 0 finished its 128 rows in 4.99 s and node 15
 * in 8.27 s. An MPI row-block product is balanced, so mm replays that profile: rank r of P gets
 * the speed factor f_r = t(15 r / (P-1)) / t(0), with t Table 2's times interpolated linearly,
 * and every row costs it f_r x C seconds: it computes its rows for real, then sleeps until its
 * compute interval lasts rows x f_r x C. C is one per-row cost for all ranks, measured on rank 0
 * by 3 timed products of 8 rows while the other ranks wait in the broadcast of B (which carries
 * C to them): 1.25 x the larger of the median wall time of a row and o x the least CPU time of
 * a row, o = max(1, ranks per core on rank 0's node). So C covers the real work even when the
 * ranks share cores with each other (4 ranks on 2 cores) or with other jobs, where the wall time
 * of the same work varies by tens of percent between ranks and runs; the compute intervals then
 * follow rows x f_r exactly, a sleeping rank takes no core from the others, and the slowdown
 * stays proportional to a rank's rows, as a slow node's would. --row-ms MS sets C to MS
 * milliseconds instead (the same C for runs to be compared; a C far above the real work for a
 * test). --no-skew runs the product as it is.
 *
 * Partition file (--partition FILE; default: equal rows, the remainder to the first ranks).
 * Blank lines and lines starting with '#' are ignored. The other lines, one per rank in rank
 * order, are either
 *     ROWS           the number of rows of that rank, e.g.   184
 *     START END      its rows as the half-open range [START, END), e.g.   0 184
 * Ranges must follow each other from row 0, and the rows must add up to N. `mpiscope rebalance
 * TRACE --shares 512x4 -o FILE` writes such a file (START END lines).
 */
#define _POSIX_C_SOURCE 200809L /* nanosleep, clock_gettime */
#include <errno.h>
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* 003 Table 2: computation time (s) of nodes 0..15, 128 rows each */
static const double TABLE2[16] = {4.99, 5.65, 6.34, 6.91, 7.11, 7.26, 7.74, 7.51,
                                  7.59, 7.65, 7.70, 7.81, 8.04, 8.13, 8.21, 8.27};

static double speed_factor(int rank, int size)
{
    if (size < 2) return 1.0;
    double x = 15.0 * rank / (size - 1);
    int i = (int)x;
    if (i >= 15) return TABLE2[15] / TABLE2[0];
    return (TABLE2[i] + (x - i) * (TABLE2[i + 1] - TABLE2[i])) / TABLE2[0];
}

static double a_elem(long i, long k) { return (double)((i * 31 + k * 17) % 101) / 101.0 - 0.5; }
static double b_elem(long k, long j) { return (double)((k * 13 + j * 7) % 89) / 89.0 - 0.5; }

static double cpu_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* o: ranks per core on this rank's node, at least 1 */
static double oversubscription(void)
{
    MPI_Comm node;
    int on_node;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    MPI_Comm_size(node, &on_node);
    MPI_Comm_free(&node);
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    return cores > 0 && on_node > cores ? (double)on_node / (double)cores : 1.0;
}

static void sleep_seconds(double s)
{
    if (s <= 0) return;
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&ts, &ts) == -1 && errno == EINTR) {
    }
}

/* Blocked i-k-j product of `rows` rows: a B tile of BK x BJ doubles stays in cache. */
static void multiply(const double *a, const double *b, double *c, int rows, int n)
{
    enum { BK = 128, BJ = 512 };
    memset(c, 0, sizeof(double) * (size_t)rows * (size_t)n);
    for (int kk = 0; kk < n; kk += BK) {
        int ke = kk + BK < n ? kk + BK : n;
        for (int jj = 0; jj < n; jj += BJ) {
            int je = jj + BJ < n ? jj + BJ : n;
            for (int i = 0; i < rows; i++) {
                double *ci = c + (size_t)i * (size_t)n;
                const double *ai = a + (size_t)i * (size_t)n;
                for (int k = kk; k < ke; k++) {
                    double aik = ai[k];
                    const double *bk = b + (size_t)k * (size_t)n;
                    for (int j = jj; j < je; j++) ci[j] += aik * bk[j];
                }
            }
        }
    }
}

/* C: seconds of compute interval per row at factor 1 (see the header); wall and cpu: per row */
static double row_cost(const double *b, int n, double per_core, double *wall, double *cpu)
{
    enum { ROWS = 8, TRIES = 3 };
    double *a = malloc(sizeof(double) * ROWS * (size_t)n), *c = malloc(sizeof(double) * ROWS * (size_t)n);
    double walls[TRIES];
    for (int i = 0; i < ROWS; i++)
        for (int k = 0; k < n; k++) a[(size_t)i * n + k] = a_elem(i, k);
    *cpu = 1e300;
    for (int t = 0; t < TRIES; t++) {
        double w0 = MPI_Wtime(), c0 = cpu_seconds();
        multiply(a, b, c, ROWS, n);
        double used = (cpu_seconds() - c0) / ROWS;
        walls[t] = (MPI_Wtime() - w0) / ROWS;
        if (used < *cpu) *cpu = used;
    }
    free(a);
    free(c);
    /* the median of 3 */
    *wall = fmax(fmin(walls[0], walls[1]), fmin(fmax(walls[0], walls[1]), walls[2]));
    return 1.25 * fmax(*wall, per_core * *cpu);
}

/* Rows per rank from a partition file; returns an error text, or NULL. */
static const char *read_partition(const char *path, int size, int n, int *rows)
{
    static char err[256];
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, sizeof err, "mm: cannot open partition file %s (%s)", path, strerror(errno));
        return err;
    }
    char line[256];
    int got = 0, next = 0;
    const char *bad = NULL;
    while (!bad && fgets(line, sizeof line, f)) {
        char *p = line + strspn(line, " \t\r\n");
        if (*p == '\0' || *p == '#') continue;
        p[strcspn(p, "\r\n")] = '\0';
        long x, y;
        char tail;
        int fields = sscanf(p, "%ld %ld %c", &x, &y, &tail);
        if (got >= size) {
            snprintf(err, sizeof err, "mm: %s has more than %d rank lines", path, size);
            bad = err;
        } else if (fields < 1 || fields > 2) {
            snprintf(err, sizeof err, "mm: %s: line \"%.40s\" is not ROWS or START END", path, p);
            bad = err;
        } else if (fields == 2 && x != next) {
            snprintf(err, sizeof err, "mm: %s: rank %d starts at row %ld, expected %d", path, got, x, next);
            bad = err;
        } else {
            long r = fields == 2 ? y - x : x;
            if (r < 0 || next + r > n) {
                snprintf(err, sizeof err, "mm: %s: rank %d's rows (%ld) go beyond N = %d", path, got, r, n);
                bad = err;
            } else {
                rows[got++] = (int)r;
                next += (int)r;
            }
        }
    }
    fclose(f);
    if (!bad && (got != size || next != n)) {
        snprintf(err, sizeof err, "mm: %s has %d rank lines and %d rows; %d ranks and N = %d need %d and %d",
                 path, got, next, size, n, size, n);
        bad = err;
    }
    return bad;
}

/* Freivalds: max relative difference between C.x and A.(B.x), x fixed. */
static double check(const double *c, const double *b, int n)
{
    double *x = malloc(sizeof(double) * (size_t)n), *y = calloc((size_t)n, sizeof(double));
    for (int j = 0; j < n; j++) x[j] = 1.0 / (1 + j % 7);
    for (int k = 0; k < n; k++)
        for (int j = 0; j < n; j++) y[k] += b[(size_t)k * (size_t)n + j] * x[j];
    double worst = 0;
    for (int i = 0; i < n; i++) {
        double cx = 0, ay = 0, scale = 1e-300;
        for (int j = 0; j < n; j++) {
            cx += c[(size_t)i * (size_t)n + j] * x[j];
            ay += a_elem(i, j) * y[j];
            scale += fabs(a_elem(i, j) * y[j]);
        }
        double e = fabs(cx - ay) / scale;
        if (e > worst) worst = e;
    }
    free(x);
    free(y);
    return worst;
}

int main(int argc, char **argv)
{
    int size, rank, n = 2048, skew = 1;
    double row_ms = 0;
    const char *partition = NULL, *err = NULL;
    MPI_Init(&argc, &argv);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    for (int i = 1; i < argc && !err; i++) {
        if (!strcmp(argv[i], "--n") && i + 1 < argc) n = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--partition") && i + 1 < argc) partition = argv[++i];
        else if (!strcmp(argv[i], "--row-ms") && i + 1 < argc) row_ms = atof(argv[++i]);
        else if (!strcmp(argv[i], "--no-skew")) skew = 0;
        else err = "usage: mm [--n N] [--partition FILE] [--row-ms MS] [--no-skew]";
    }
    if (!err && (n < 1 || n > 46000)) err = "mm: N must be between 1 and 46000";
    int *rows = malloc(sizeof(int) * (size_t)size), *counts = malloc(sizeof(int) * (size_t)size),
        *displs = malloc(sizeof(int) * (size_t)size);
    if (!err && partition) {
        err = read_partition(partition, size, n, rows);
    } else if (!err) {
        for (int r = 0; r < size; r++) rows[r] = n / size + (r < n % size);
    }
    if (err) {  /* every rank parsed the same input, so all stop here together */
        if (rank == 0) fprintf(stderr, "%s\n", err);
        free(rows);
        free(counts);
        free(displs);
        MPI_Finalize();
        return 2;
    }
    int first = 0;
    for (int r = 0, start = 0; r < size; start += rows[r++]) {
        counts[r] = rows[r] * n;
        displs[r] = start * n;
        if (r == rank) first = start;
    }
    int mine = rows[rank];
    double factor = speed_factor(rank, size), per_core = oversubscription();
    size_t nn = (size_t)n * (size_t)n;
    /* B, then C (the per-row cost) in the same broadcast */
    double *b = malloc(sizeof(double) * (nn + 1)), *a = malloc(sizeof(double) * ((size_t)mine * n + 1)),
           *c = malloc(sizeof(double) * ((size_t)mine * n + 1)), *call = NULL;
    if (rank == 0) {
        call = malloc(sizeof(double) * nn);
        for (size_t k = 0; k < nn; k++) b[k] = b_elem((long)(k / (size_t)n), (long)(k % (size_t)n));
        double wall = 0, cpu = 0;
        b[nn] = !skew ? 0.0 : row_ms > 0 ? row_ms / 1e3 : row_cost(b, n, per_core, &wall, &cpu);
        printf("mm: N=%d, %d ranks, rows", n, size);
        for (int r = 0; r < size; r++) printf(" %d", rows[r]);
        printf(" (%s)\n", partition ? partition : "equal");
        if (skew) {
            printf("mm: replaying S-CAT 003 Table 2 (16 nodes, 4.99 ... 8.27 s) as speed factors");
            for (int r = 0; r < size; r++) printf(" %.3f", speed_factor(r, size));
            if (row_ms > 0)
                printf("\nmm: a row costs factor x %.3f ms (--row-ms)\n", 1e3 * b[nn]);
            else
                printf("\nmm: a row costs factor x %.3f ms (1.25 x the larger of its wall time on rank 0, %.3f ms,"
                       " and %.2f ranks per core x its CPU time, %.3f ms)\n", 1e3 * b[nn], 1e3 * wall, per_core,
                       1e3 * cpu);
        } else {
            printf("mm: no skew (balanced)\n");
        }
        fflush(stdout);
    }
    for (int i = 0; i < mine; i++)
        for (int k = 0; k < n; k++) a[(size_t)i * n + k] = a_elem(first + i, k);
    MPI_Bcast(b, (int)nn + 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    /* all ranks start computing together, as in 003 §4.1 (so an end time is a compute time) */
    MPI_Barrier(MPI_COMM_WORLD);

    double t0 = MPI_Wtime(), c0 = cpu_seconds();
    multiply(a, b, c, mine, n);
    double cpu = cpu_seconds() - c0;
    if (skew) sleep_seconds(mine * factor * b[nn] - (MPI_Wtime() - t0));
    double times[2] = {cpu, MPI_Wtime() - t0};

    MPI_Gatherv(c, counts[rank], MPI_DOUBLE, call, counts, displs, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    double *all = rank == 0 ? malloc(sizeof(double) * 2 * (size_t)size) : NULL;
    MPI_Gather(times, 2, MPI_DOUBLE, all, 2, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    int status = 0;
    if (rank == 0) {
        printf("rank  rows  compute_s  work_cpu_s\n");
        for (int r = 0; r < size; r++)
            printf("%4d %5d %10.3f %11.3f\n", r, rows[r], all[2 * r + 1], all[2 * r]);
        double e = check(call, b, n);
        status = e < 1e-10 ? 0 : 1;
        printf("mm: check C.x = A.(B.x): max relative error %.2e: %s\n", e, status ? "FAILED" : "OK");
        free(all);
        free(call);
    }
    free(a);
    free(b);
    free(c);
    free(rows);
    free(counts);
    free(displs);
    MPI_Finalize();
    return status;
}
