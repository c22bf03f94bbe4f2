/* The experiments of 000 §5 (SPEC §5, §9.1) for `mpiscope bench bcast`: the
 * adaptive broadcast (native/bcast/, linked in unchanged) against the MPI's
 * own MPI_Bcast, the fixed binomial tree and the ideal static table.
 *
 * Built with the MPI's mpicc (mpiscope-bench-bcast) and, with
 * -DMSC_SIMULATED, with SimGrid's smpicc: the workload is then simulated
 * computation (smpi_execute_flops) instead of real arithmetic, so 128
 * processes run deterministically on any machine.
 *
 * usage: bcast_exp max-effect|random|sparse [options]; rank 0 prints one
 * "@mpiscope {json}" line per result:
 *   max-effect  --sizes B,.. --loads N,.. --iters 100 --variants V,..  [--loaded R]
 *               MPI_Barrier, the N x N matrix product on rank R (default: the
 *               first receiver of root 0), MPI_Bcast; ITERS times
 *   random      --sizes B,.. --patterns P --first F --iters 100 --variants V,..
 *               rank r of pattern p multiplies k times, k from a 31-bit PRNG
 *               seeded with (r, p), mod 1,000,000
 *   sparse      see sparse.c
 * Variants: library (MPI_Bcast), binomial, adaptive, ideal (binomial over the
 * best static table). Adaptive parameters: --weight --stable --stable-tol
 * --threshold --interval --interval-max --change --halve --eps --eps-min
 * --report put|send (bcast.h).
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bcast.h"
#include "bcast_exp.h"

#ifdef MSC_SIMULATED
#include <smpi/smpi.h>
#define BUF_ALLOC(n) SMPI_SHARED_MALLOC(n)
#define BUF_FREE(p) SMPI_SHARED_FREE(p)
#else
#define BUF_ALLOC(n) malloc(n)
#define BUF_FREE(p) free(p)
#endif

int exp_rank, exp_size;
struct msc_bc_params exp_params;

void exp_fail(const char *what, const char *value)
{
    if (exp_rank == 0) fprintf(stderr, "bcast_exp: %s %s\n", what, value ? value : "");
    MPI_Abort(MPI_COMM_WORLD, 2);
}

int exp_list(const char *text, long *out, int max)
{
    int n = 0;
    for (const char *p = text; *p && n < max;) {
        char *end;
        out[n++] = strtol(p, &end, 10);
        if (end == p) exp_fail("not a list of numbers:", text);
        p = *end == ',' ? end + 1 : end;
    }
    return n;
}

/* ---- workload ---- */

#ifndef MSC_SIMULATED
static double *mat;
static int mat_n;
#endif

void exp_matmul(int n)
{
    if (n <= 0) return;
#ifdef MSC_SIMULATED
    smpi_execute_flops(2.0 * n * n * n);
#else
    if (n > mat_n) {
        free(mat);
        mat = calloc((size_t)3 * n * n, sizeof *mat);
        for (long i = 0; i < 2L * n * n; i++) mat[i] = 1.0 + (double)(i % 7) * 0.125;
        mat_n = n;
    }
    double *a = mat, *b = mat + (size_t)n * n, *c = mat + 2 * (size_t)n * n;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            double s = 0;
            for (int k = 0; k < n; k++) s += a[(size_t)i * n + k] * b[(size_t)k * n + j];
            c[(size_t)i * n + j] = s;
        }
#endif
}

void exp_multiply(long k)
{
#ifdef MSC_SIMULATED
    if (k > 0) smpi_execute_flops((double)k);
#else
    volatile double x = 1.0;
    for (long i = 0; i < k; i++) x *= 1.0000001;
#endif
}

/* ---- variants ---- */

int exp_variant(const char *name)
{
    static const char *names[] = {"library", "binomial", "adaptive", "ideal"};
    for (int v = 0; v < 4; v++)
        if (strcmp(name, names[v]) == 0) return v;
    exp_fail("unknown variant:", name);
    return -1;
}

const char *exp_variant_name(int v)
{
    static const char *names[] = {"library", "binomial", "adaptive", "ideal"};
    return names[v];
}

/* A fresh communicator per run: its broadcast state starts from the identity
 * table, or from vr (virtual rank of each rank: ideal), made before the timed
 * loop (its collective set-up is not timed). */
MPI_Comm exp_open(int variant, const int *vr)
{
    MPI_Comm comm;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    if (variant == V_LIBRARY) return comm;
    struct msc_bc_params p = exp_params;
    p.mode = variant == V_ADAPTIVE ? MSC_BC_ADAPTIVE : MSC_BC_BINOMIAL;
    int fallback = 0;
    struct msc_bc_state *s = msc_bc_state_of(comm, &p, &fallback);
    if (!s) exp_fail("cannot set up the broadcast on", "MPI_COMM_WORLD");
    for (int r = 0; variant == V_IDEAL && vr && r < exp_size; r++) {
        s->tab.vr[r] = vr[r];
        s->tab.real[vr[r]] = r;
    }
    return comm;
}

void exp_spend(double seconds)
{
#ifdef MSC_SIMULATED
    if (seconds > 0) smpi_execute(seconds);
#else
    (void)seconds;
#endif
}

int exp_bcast(int variant, void *buf, int count, MPI_Comm comm)
{
    if (variant == V_LIBRARY) return MPI_Bcast(buf, count, MPI_BYTE, 0, comm);
    struct msc_bc_params p = exp_params;
    p.mode = variant == V_ADAPTIVE ? MSC_BC_ADAPTIVE : MSC_BC_BINOMIAL;
    int fallback = 0;
    return msc_bc_bcast(buf, count, MPI_BYTE, 0, comm, &p, &fallback);
}

/* Swaps and undos the optimiser of comm made (on rank 0). */
void exp_close(int variant, MPI_Comm comm, uint64_t *swaps, uint64_t *undos)
{
    *swaps = *undos = 0;
    int fallback = 0;
    struct msc_bc_params p = exp_params;
    p.mode = MSC_BC_BINOMIAL;
    if (exp_rank == 0 && variant != V_LIBRARY) { /* the state exists: no collective set-up here */
        struct msc_bc_state *s = msc_bc_state_of(comm, &p, &fallback);
        if (s && s->opt) {
            *swaps = s->opt->swaps;
            *undos = s->opt->undos;
        }
    }
    MPI_Comm_free(&comm);
}

/* The means over iterations of the overall time (last end - first start) and
 * of the average per-process time, from every rank's (start, end) pairs. */
void exp_times(const double *t, int iters, double *overall, double *average)
{
    double *all = exp_rank == 0 ? malloc(sizeof(double) * 2 * (size_t)iters * (size_t)exp_size) : NULL;
    MPI_Gather(t, 2 * iters, MPI_DOUBLE, all, 2 * iters, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    *overall = *average = 0;
    if (exp_rank != 0) return;
    for (int i = 0; i < iters; i++) {
        double first = 1e300, last = -1e300, sum = 0;
        for (int r = 0; r < exp_size; r++) {
            double s = all[(size_t)r * 2 * iters + 2 * i], e = all[(size_t)r * 2 * iters + 2 * i + 1];
            first = s < first ? s : first;
            last = e > last ? e : last;
            sum += e - s;
        }
        *overall += last - first;
        *average += sum / exp_size;
    }
    *overall /= iters;
    *average /= iters;
    free(all);
}

void *exp_buffer(long bytes)
{
    void *b = BUF_ALLOC((size_t)(bytes > 0 ? bytes : 1));
    if (!b) exp_fail("out of memory for a buffer of", "the largest size");
    memset(b, 0, (size_t)(bytes > 0 ? bytes : 1));
    return b;
}

void exp_buffer_free(void *b)
{
    BUF_FREE(b);
}

/* ---- max-effect (000 §5.1) ---- */

static void max_effect(int nsizes, const long *sizes, int nloads, const long *loads, int nv, const int *variants,
                       int iters, int loaded)
{
    long biggest = 0;
    for (int i = 0; i < nsizes; i++) biggest = sizes[i] > biggest ? sizes[i] : biggest;
    char *buf = exp_buffer(biggest);
    double *t = malloc(sizeof(double) * 2 * (size_t)iters);
    /* ideal: the loaded process swapped with the last position from the start (000: real ranks 64 and 127) */
    int *ideal = malloc(sizeof(int) * (size_t)exp_size);
    for (int r = 0; r < exp_size; r++) ideal[r] = r;
    ideal[loaded] = exp_size - 1;
    ideal[exp_size - 1] = loaded;
    for (int l = 0; l < nloads; l++)
        for (int s = 0; s < nsizes; s++)
            for (int v = 0; v < nv; v++) {
                MPI_Comm comm = exp_open(variants[v], ideal);
                for (int i = 0; i < iters; i++) {
                    PMPI_Barrier(comm);
                    if (exp_rank == loaded) exp_matmul((int)loads[l]);
                    if (exp_rank == 0) buf[0] = (char)i;
                    t[2 * i] = PMPI_Wtime();
                    exp_bcast(variants[v], buf, (int)sizes[s], comm);
                    t[2 * i + 1] = PMPI_Wtime();
                }
                uint64_t swaps, undos;
                exp_close(variants[v], comm, &swaps, &undos);
                double overall, average;
                exp_times(t, iters, &overall, &average);
                if (exp_rank == 0)
                    printf("@mpiscope {\"experiment\": \"max-effect\", \"variant\": \"%s\", \"bytes\": %ld, \"load\": %ld, "
                           "\"iters\": %d, \"overall_s\": %.9g, \"average_s\": %.9g, \"swaps\": %llu, \"undos\": %llu}\n",
                           exp_variant_name(variants[v]), sizes[s], loads[l], iters, overall, average,
                           (unsigned long long)swaps, (unsigned long long)undos);
                fflush(stdout);
            }
    free(t);
    free(ideal);
    exp_buffer_free(buf);
}

/* ---- random loads (000 §5.1, Figs. 13-14) ---- */

static long pattern_load(int rank, int pattern)
{
    /* Park-Miller minimal standard generator (31 bits), seeded with (rank, pattern) */
    uint64_t x = ((uint64_t)pattern * 1000003u + (uint64_t)rank * 7919u + 1u) % 2147483647u;
    for (int i = 0; i < 3; i++) x = x * 48271u % 2147483647u;
    return (long)(x % 1000000u);
}

static void random_loads(int nsizes, const long *sizes, int first, int patterns, int nv, const int *variants,
                         int iters)
{
    long biggest = 0;
    for (int i = 0; i < nsizes; i++) biggest = sizes[i] > biggest ? sizes[i] : biggest;
    char *buf = exp_buffer(biggest);
    double *t = malloc(sizeof(double) * 2 * (size_t)iters);
    for (int p = first; p < first + patterns; p++) {
        long k = pattern_load(exp_rank, p);
        for (int s = 0; s < nsizes; s++)
            for (int v = 0; v < nv; v++) {
                MPI_Comm comm = exp_open(variants[v], NULL);
                for (int i = 0; i < iters; i++) {
                    PMPI_Barrier(comm);
                    exp_multiply(k);
                    t[2 * i] = PMPI_Wtime();
                    exp_bcast(variants[v], buf, (int)sizes[s], comm);
                    t[2 * i + 1] = PMPI_Wtime();
                }
                uint64_t swaps, undos;
                exp_close(variants[v], comm, &swaps, &undos);
                double overall, average;
                exp_times(t, iters, &overall, &average);
                if (exp_rank == 0)
                    printf("@mpiscope {\"experiment\": \"random\", \"variant\": \"%s\", \"bytes\": %ld, \"pattern\": %d, "
                           "\"iters\": %d, \"overall_s\": %.9g, \"average_s\": %.9g, \"swaps\": %llu, \"undos\": %llu}\n",
                           exp_variant_name(variants[v]), sizes[s], p, iters, overall, average,
                           (unsigned long long)swaps, (unsigned long long)undos);
                fflush(stdout);
            }
    }
    free(t);
    exp_buffer_free(buf);
}

/* MSC_BC_EVENTS=1: every swap and undo on stderr, as mpiscope run logs them */
static void print_event(MPI_Comm comm, const struct msc_bc_event *e)
{
    (void)comm;
    fprintf(stderr, "bcast_exp: %s %d %d at broadcast %llu, next interval %d, total wait %.6f s\n",
            e->op == MSC_BC_UNDO ? "undo" : "swap", e->a, e->b, (unsigned long long)e->bcast, e->interval,
            e->total_wait_s);
}

/* ---- command line ---- */

static int param(const char *key, const char *value)
{
    struct { const char *name; double *d; int *i; } table[] = {
        {"--weight", NULL, &exp_params.weight},        {"--stable", NULL, &exp_params.stable},
        {"--stable-tol", &exp_params.stable_tol, NULL}, {"--threshold", &exp_params.threshold, NULL},
        {"--interval", NULL, &exp_params.interval},    {"--interval-max", NULL, &exp_params.interval_max},
        {"--change", &exp_params.change, NULL},        {"--halve", NULL, &exp_params.halve},
        {"--eps", &exp_params.eps_frac, NULL},         {"--eps-min", &exp_params.eps_min_s, NULL},
    };
    if (strcmp(key, "--report") == 0) {
        exp_params.report = strcmp(value, "send") == 0 ? MSC_BC_REPORT_SEND : MSC_BC_REPORT_PUT;
        return 1;
    }
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        if (strcmp(key, table[i].name) != 0) continue;
        if (table[i].d) *table[i].d = atof(value);
        else *table[i].i = atoi(value);
        return 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &exp_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &exp_size);
    msc_bc_default_params(&exp_params);
    if (argc < 2) exp_fail("usage: bcast_exp max-effect|random|sparse [options]", NULL);
    long sizes[64] = {1}, loads[64] = {0};
    int nsizes = 1, nloads = 1, variants[4] = {V_BINOMIAL, V_ADAPTIVE}, nv = 2, iters = 100, loaded = -1;
    int patterns = 1, first = 0;
    struct exp_sparse sp = {4000, 0.1, 0.2, 1, 1};
    for (int i = 2; i < argc; i++) {
        const char *k = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) exp_fail("option without a value:", k);
        i++;
        if (strcmp(k, "--sizes") == 0) nsizes = exp_list(v, sizes, 64);
        else if (strcmp(k, "--loads") == 0) nloads = exp_list(v, loads, 64);
        else if (strcmp(k, "--iters") == 0) iters = atoi(v);
        else if (strcmp(k, "--loaded") == 0) loaded = atoi(v);
        else if (strcmp(k, "--patterns") == 0) patterns = atoi(v);
        else if (strcmp(k, "--first") == 0) first = atoi(v);
        else if (strcmp(k, "--n") == 0) sp.n = atoi(v);
        else if (strcmp(k, "--density") == 0) sp.density = atof(v);
        else if (strcmp(k, "--slope") == 0) sp.slope = atof(v);
        else if (strcmp(k, "--runs") == 0) sp.runs = atoi(v);
        else if (strcmp(k, "--seed") == 0) sp.seed = atoi(v);
        else if (strcmp(k, "--variants") == 0) {
            char names[256];
            snprintf(names, sizeof names, "%s", v);
            nv = 0;
            for (char *tok = strtok(names, ","); tok && nv < 4; tok = strtok(NULL, ",")) variants[nv++] = exp_variant(tok);
        } else if (!param(k, v)) exp_fail("unknown option:", k);
    }
    if (iters < 1) exp_fail("--iters must be at least", "1");
    if (loaded < 0) { /* the first receiver of root 0: 2^n with 2^n < M <= 2^(n+1) */
        loaded = 1;
        while (loaded * 2 < exp_size) loaded *= 2;
        if (exp_size < 2) loaded = 0;
    }
    int adaptive = 0;
    for (int v = 0; v < nv; v++) adaptive |= variants[v] == V_ADAPTIVE;
    if (adaptive) {
        struct msc_bc_params p = exp_params;
        p.mode = MSC_BC_ADAPTIVE;
        msc_bc_setup(MPI_COMM_WORLD, &p);
        if (getenv("MSC_BC_EVENTS")) msc_bc_on_event = print_event;
    }
    if (exp_rank == 0)
        printf("@mpiscope {\"experiment\": \"%s\", \"header\": true, \"ranks\": %d, \"iters\": %d, \"loaded\": %d}\n",
               argv[1], exp_size, iters, loaded);
    if (strcmp(argv[1], "max-effect") == 0) max_effect(nsizes, sizes, nloads, loads, nv, variants, iters, loaded);
    else if (strcmp(argv[1], "random") == 0) random_loads(nsizes, sizes, first, patterns, nv, variants, iters);
    else if (strcmp(argv[1], "sparse") == 0) exp_sparse_run(&sp, nv, variants);
    else exp_fail("unknown experiment:", argv[1]);
    if (adaptive) msc_bc_teardown();
    MPI_Finalize();
    return 0;
}
