/* The communication-roofline benchmark of 004 §4.2, and the measurements of
 * `mpiscope roofline measure`. One MPI rank = one node.
 *
 *   roofline_mm mixed N REPS MSG ROUNDS [N REPS MSG ROUNDS ...] [-r REPEAT]
 *       each point: REPS dense products of N x N doubles (cblas_dgemm, 2N^3
 *       flops each) in the main thread while a second thread exchanges ROUNDS
 *       messages of MSG bytes, unrelated to the product (004 §4.2: flops and
 *       bytes set independently). REPS = 0: communication part alone (the
 *       measured-bandwidth ceiling of 004 §4.3); ROUNDS = 0: the single-node
 *       rate of the kernel (the other 004 §4.3 ceiling).
 *   roofline_mm pingpong MSG ITERS [-r REPEAT]   ranks 0 and 1 (one port)
 *   roofline_mm exchange MSG ITERS [-r REPEAT]   every rank with every other
 *       rank at once (all-neighbour exchange: all ports of a node busy)
 *   roofline_mm clock                            the fastest core clock of any rank
 *
 * The exchange of `mixed` follows a round-robin tournament (circle method):
 * in each round the nodes form disjoint pairs, so no two transfers use the
 * same pair of nodes at the same time (004 §4.2: contention-free, ideal).
 *
 * Prints JSON lines on rank 0: first {"hosts": [...]}, then one line per
 * point and repetition with the flops and bytes per node and the slowest
 * rank's time (a node's rate is bounded by the slowest node of the run). */
#include <cblas.h>
#include <mpi.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct point {
    int n;
    long reps;
    long msg;
    long rounds;
};

struct comm_job {
    long msg;
    long rounds;
    char *sendbuf;
    char *recvbuf;
    double bytes; /* sent + received by this rank */
    double seconds;
};

static int world_rank, world_size;

static void die(const char *what)
{
    if (world_rank == 0) fprintf(stderr, "roofline_mm: %s\n", what);
    MPI_Abort(MPI_COMM_WORLD, 2);
}

/* Partner of `me` in round r of a round-robin tournament over `slots` (even)
 * participants; a partner >= world_size is the bye of an odd node count. */
static int partner(int me, long r, int slots)
{
    int m = slots - 1;
    if (me < m) {
        int p = (int)(((r - me) % m + m) % m);
        return p == me ? m : p;
    }
    for (int i = 0; i < m; i++)
        if ((int)(((r - i) % m + m) % m) == i) return i;
    return me;
}

static void *exchange_rounds(void *arg)
{
    struct comm_job *job = arg;
    int slots = world_size + (world_size & 1);
    double t0 = MPI_Wtime();
    job->bytes = 0;
    for (long k = 0; k < job->rounds; k++) {
        int p = partner(world_rank, k % (slots - 1), slots);
        if (p >= world_size) continue;
        /* count as int is enough: MSG is bounded by the driver (<= 1 GiB) */
        MPI_Sendrecv(job->sendbuf, (int)job->msg, MPI_BYTE, p, 7, job->recvbuf, (int)job->msg, MPI_BYTE, p, 7,
                     MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        job->bytes += 2.0 * (double)job->msg;
    }
    job->seconds = MPI_Wtime() - t0;
    return NULL;
}

static void print_hosts(void)
{
    char name[MPI_MAX_PROCESSOR_NAME] = {0};
    int len = 0;
    MPI_Get_processor_name(name, &len);
    char *all = world_rank == 0 ? calloc((size_t)world_size, MPI_MAX_PROCESSOR_NAME) : NULL;
    MPI_Gather(name, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, all, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, 0, MPI_COMM_WORLD);
    if (world_rank != 0) return;
    printf("{\"hosts\": [");
    for (int i = 0; i < world_size; i++) printf("%s\"%s\"", i ? ", " : "", all + (size_t)i * MPI_MAX_PROCESSOR_NAME);
    printf("]}\n");
    free(all);
}

static void run_mixed(const struct point *pts, int npts, int repeat)
{
    int nmax = 1;
    long msgmax = 1;
    for (int i = 0; i < npts; i++) {
        if (pts[i].n > nmax) nmax = pts[i].n;
        if (pts[i].msg > msgmax) msgmax = pts[i].msg;
    }
    size_t nn = (size_t)nmax * (size_t)nmax;
    double *a = malloc(nn * sizeof *a), *b = malloc(nn * sizeof *b), *c = malloc(nn * sizeof *c);
    char *sbuf = malloc((size_t)msgmax), *rbuf = malloc((size_t)msgmax);
    if (!a || !b || !c || !sbuf || !rbuf) die("out of memory for the matrices or message buffers");
    for (size_t i = 0; i < nn; i++) {
        a[i] = 1.0 / (double)(i % 7 + 1);
        b[i] = 0.5;
        c[i] = 0.0;
    }
    memset(sbuf, world_rank & 0xff, (size_t)msgmax);
    memset(rbuf, 0, (size_t)msgmax);
    for (int i = 0; i < npts; i++) {
        const struct point *pt = &pts[i];
        /* repetition -1 is a warm-up (page faults, BLAS buffers, MPI connections) */
        for (int rep = -1; rep < repeat; rep++) {
            struct comm_job job = {pt->msg, pt->rounds, sbuf, rbuf, 0, 0};
            pthread_t thread;
            MPI_Barrier(MPI_COMM_WORLD);
            double t0 = MPI_Wtime();
            int threaded = pt->rounds > 0 && pt->reps > 0;
            if (threaded && pthread_create(&thread, NULL, exchange_rounds, &job) != 0) die("cannot start the thread");
            if (!threaded && pt->rounds > 0) exchange_rounds(&job);
            for (long r = 0; r < pt->reps; r++)
                cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, pt->n, pt->n, pt->n, 1.0, a, pt->n, b, pt->n,
                            1.0, c, pt->n);
            double t_comp = MPI_Wtime() - t0;
            if (threaded) pthread_join(thread, NULL);
            double local[3] = {MPI_Wtime() - t0, t_comp, job.seconds}, slowest[3], bytes_sum = 0;
            MPI_Reduce(local, slowest, 3, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
            MPI_Reduce(&job.bytes, &bytes_sum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
            if (world_rank != 0 || rep < 0) continue;
            double flops = 2.0 * (double)pt->n * (double)pt->n * (double)pt->n * (double)pt->reps;
            printf("{\"mode\": \"mixed\", \"point\": %d, \"repeat\": %d, \"nodes\": %d, \"n\": %d, \"reps\": %ld, "
                   "\"msg_bytes\": %ld, \"rounds\": %ld, \"flops_per_node\": %.17g, \"bytes_per_node\": %.17g, "
                   "\"seconds\": %.9g, \"compute_seconds\": %.9g, \"comm_seconds\": %.9g, \"check\": %.6g}\n",
                   i, rep, world_size, pt->n, pt->reps, pt->msg, pt->rounds, flops, bytes_sum / world_size,
                   slowest[0], slowest[1], slowest[2], c[0]);
            fflush(stdout);
        }
    }
    free(a);
    free(b);
    free(c);
    free(sbuf);
    free(rbuf);
}

static void run_pingpong(long msg, long iters, int repeat)
{
    char *buf = malloc((size_t)msg + 1);
    if (!buf) die("out of memory for the message buffer");
    /* written, not calloc'ed: untouched pages all map the one zero page, which stays in cache */
    memset(buf, 1 + world_rank, (size_t)msg + 1);
    for (int rep = -1; rep < repeat; rep++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        for (long k = 0; k < iters && world_rank < 2; k++) {
            if (world_rank == 0) {
                MPI_Send(buf, (int)msg, MPI_BYTE, 1, 3, MPI_COMM_WORLD);
                MPI_Recv(buf, (int)msg, MPI_BYTE, 1, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            } else {
                MPI_Recv(buf, (int)msg, MPI_BYTE, 0, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                MPI_Send(buf, (int)msg, MPI_BYTE, 0, 3, MPI_COMM_WORLD);
            }
        }
        double t = MPI_Wtime() - t0;
        if (world_rank == 0 && rep >= 0)
            /* one direction at a time: bytes per direction = msg per half round trip */
            printf("{\"mode\": \"pingpong\", \"repeat\": %d, \"nodes\": %d, \"msg_bytes\": %ld, \"iters\": %ld, "
                   "\"bytes_per_direction\": %.17g, \"seconds\": %.9g}\n",
                   rep, world_size, msg, iters, 2.0 * (double)msg * (double)iters, t);
        fflush(stdout);
    }
    free(buf);
}

static void run_exchange(long msg, long iters, int repeat)
{
    int peers = world_size - 1;
    char *sbuf = malloc((size_t)msg + 1), *rbuf = malloc((size_t)msg * (size_t)peers + 1);
    MPI_Request *req = malloc(sizeof *req * (size_t)(2 * peers));
    if (!sbuf || !rbuf || !req) die("out of memory for the message buffers");
    memset(sbuf, 1 + world_rank, (size_t)msg + 1); /* real pages, as in run_pingpong */
    memset(rbuf, 0, (size_t)msg * (size_t)peers + 1);
    for (int rep = -1; rep < repeat; rep++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        for (long k = 0; k < iters; k++) {
            int q = 0;
            for (int d = 1; d <= peers; d++) {
                int to = (world_rank + d) % world_size, from = (world_rank - d + world_size) % world_size;
                MPI_Irecv(rbuf + (size_t)(d - 1) * (size_t)msg, (int)msg, MPI_BYTE, from, 5, MPI_COMM_WORLD, &req[q++]);
                MPI_Isend(sbuf, (int)msg, MPI_BYTE, to, 5, MPI_COMM_WORLD, &req[q++]);
            }
            MPI_Waitall(q, req, MPI_STATUSES_IGNORE);
        }
        double t = MPI_Wtime() - t0, slowest = 0;
        MPI_Reduce(&t, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
        if (world_rank == 0 && rep >= 0)
            printf("{\"mode\": \"exchange\", \"repeat\": %d, \"nodes\": %d, \"msg_bytes\": %ld, \"iters\": %ld, "
                   "\"bytes_per_direction\": %.17g, \"seconds\": %.9g}\n",
                   rep, world_size, msg, iters, (double)msg * (double)peers * (double)iters, slowest);
        fflush(stdout);
    }
    free(sbuf);
    free(rbuf);
    free(req);
}

/* The core clock, from a chain of dependent integer adds (one cycle each on every
 * x86-64 and AArch64 core): /proc/cpuinfo shows the base or TSC clock, not the
 * boost clock DGEMM runs at, so a peak from it is no upper bound. The best of many
 * short samples dodges time slices lost to other processes. 0 = not measured here. */
#if defined(__x86_64__)
#define ADD1 "add $1, %0\n\t"
#elif defined(__aarch64__)
#define ADD1 "add %0, %0, #1\n\t"
#endif
static void run_clock(void)
{
    double ghz = 0.0, all = 0.0;
#ifdef ADD1
#define ADD8 ADD1 ADD1 ADD1 ADD1 ADD1 ADD1 ADD1 ADD1
#define ADD64 ADD8 ADD8 ADD8 ADD8 ADD8 ADD8 ADD8 ADD8
    unsigned long x = 0;
    double best = 1e30;
    for (int sample = 0; sample < 3000; sample++) {
        double t0 = MPI_Wtime();
        for (int i = 0; i < 1000; i++) __asm__ volatile(ADD64 ADD64 : "+r"(x));
        double t = MPI_Wtime() - t0;
        if (t < best) best = t;
    }
    ghz = 128.0 * 1000.0 / best / 1e9;
#endif
    MPI_Reduce(&ghz, &all, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (world_rank == 0) printf("{\"mode\": \"clock\", \"ghz\": %.6g}\n", all);
}

static long positive(const char *s, const char *what, long min)
{
    char *end = NULL;
    long v = strtol(s, &end, 10);
    if (!end || *end || v < min || v > (1L << 30)) {
        char msg[160];
        snprintf(msg, sizeof msg, "bad %s '%s' (an integer from %ld to 2^30)", what, s, min);
        die(msg);
    }
    return v;
}

int main(int argc, char **argv)
{
    int provided = 0;
    /* the exchange thread calls MPI while the main thread does not */
    MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world_size);
    if (provided < MPI_THREAD_SERIALIZED) die("the MPI library does not provide MPI_THREAD_SERIALIZED");
    if (world_size < 2) die("needs at least 2 ranks (one per node)");
    int repeat = 3;
    if (argc > 3 && strcmp(argv[argc - 2], "-r") == 0) {
        repeat = (int)positive(argv[argc - 1], "repeat count", 1);
        argc -= 2;
    }
    if (argc < 2) die("usage: roofline_mm mixed|pingpong|exchange ...");
    print_hosts();
    if (strcmp(argv[1], "mixed") == 0) {
        int npts = (argc - 2) / 4;
        if (npts < 1 || (argc - 2) % 4) die("mixed takes groups of N REPS MSG ROUNDS");
        struct point *pts = calloc((size_t)npts, sizeof *pts);
        for (int i = 0; i < npts; i++) {
            pts[i].n = (int)positive(argv[2 + 4 * i], "matrix size", 1);
            pts[i].reps = positive(argv[3 + 4 * i], "product count", 0);
            pts[i].msg = positive(argv[4 + 4 * i], "message size", 1);
            pts[i].rounds = positive(argv[5 + 4 * i], "round count", 0);
        }
        run_mixed(pts, npts, repeat);
        free(pts);
    } else if (strcmp(argv[1], "clock") == 0) {
        run_clock();
    } else if ((strcmp(argv[1], "pingpong") == 0 || strcmp(argv[1], "exchange") == 0) && argc == 4) {
        long msg = positive(argv[2], "message size", 1), iters = positive(argv[3], "iteration count", 1);
        if (argv[1][0] == 'p') run_pingpong(msg, iters, repeat);
        else run_exchange(msg, iters, repeat);
    } else {
        die("usage: roofline_mm mixed N REPS MSG ROUNDS ... | pingpong|exchange MSG ITERS [-r R] | clock");
    }
    MPI_Finalize();
    return 0;
}
