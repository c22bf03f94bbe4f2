/* mpiscope-bench-rma: passive-target one-sided latency and bandwidth between
 * an origin (rank 0) and a target (rank 1), and IMB-RMA's Truly_passive_put.
 *
 * As in IMB-RMA (src_c/IMB_rma_put.c, IMB_rma_get.c, IMB_rma_atomic.c): the
 * window is created with MPI_Win_create over user memory for every size,
 * data movement uses MPI_BYTE, Accumulate/Get_accumulate/Fetch_and_op use
 * MPI_FLOAT + MPI_SUM, Compare_and_swap uses MPI_INT, and the target waits in
 * MPI_Barrier while the origin is timed. Three synchronisation modes:
 *   lock_unlock     n x {Win_lock(SHARED); op; Win_unlock}   (latency)
 *   lock_all_flush  Win_lock_all; n x {op; Win_flush}        (latency; IMB's non-aggregate mode)
 *   aggregate       Win_lock_all; n x op; one Win_flush      (bandwidth; IMB's aggregate mode) */
#include "common.h"
#include "passive.h"

#include <stdlib.h>
#include <string.h>

enum rma_op { RMA_PUT, RMA_GET, RMA_ACC, RMA_GACC, RMA_FOP, RMA_CAS };
enum rma_mode { MODE_LOCK_UNLOCK, MODE_LOCK_ALL_FLUSH, MODE_AGGREGATE };

static const struct {
    const char *name;
    enum rma_op id;
    int single_element;     /* IMB's SingleElementTransfer: one 4-byte element */
} rma_ops[] = {
    {"put", RMA_PUT, 0}, {"get", RMA_GET, 0}, {"accumulate", RMA_ACC, 0},
    {"get_accumulate", RMA_GACC, 0}, {"fetch_and_op", RMA_FOP, 1}, {"compare_and_swap", RMA_CAS, 1},
};
static const char *mode_names[] = {"lock_unlock", "lock_all_flush", "aggregate"};

struct rma_ctx {
    MPI_Comm comm;
    int rank;
    enum rma_op op;
    enum rma_mode mode;
    long size;
    int count;              /* elements of MPI_BYTE, MPI_FLOAT or MPI_INT */
    char *win_mem, *origin, *result, *compare;
    MPI_Win win;
};

static void issue(struct rma_ctx *c)
{
    switch (c->op) {
    case RMA_PUT: MPI_Put(c->origin, c->count, MPI_BYTE, 1, 0, c->count, MPI_BYTE, c->win); break;
    case RMA_GET: MPI_Get(c->origin, c->count, MPI_BYTE, 1, 0, c->count, MPI_BYTE, c->win); break;
    case RMA_ACC:
        MPI_Accumulate(c->origin, c->count, MPI_FLOAT, 1, 0, c->count, MPI_FLOAT, MPI_SUM, c->win);
        break;
    case RMA_GACC:
        MPI_Get_accumulate(c->origin, c->count, MPI_FLOAT, c->result, c->count, MPI_FLOAT, 1, 0, c->count,
                           MPI_FLOAT, MPI_SUM, c->win);
        break;
    case RMA_FOP: MPI_Fetch_and_op(c->origin, c->result, MPI_FLOAT, 1, 0, MPI_SUM, c->win); break;
    case RMA_CAS: MPI_Compare_and_swap(c->origin, c->compare, c->result, MPI_INT, 1, 0, c->win); break;
    }
}

/* Time per operation at the origin; the target waits in MPI_Barrier. */
static double run_rma(void *ctx, int n)
{
    struct rma_ctx *c = ctx;
    double t = 0.0;
    msc_barriers(c->comm, MSC_N_BARR);
    if (c->rank == 0) {
        if (c->mode == MODE_LOCK_UNLOCK) {
            t = MPI_Wtime();
            for (int i = 0; i < n; i++) {
                MPI_Win_lock(MPI_LOCK_SHARED, 1, 0, c->win);
                issue(c);
                MPI_Win_unlock(1, c->win);
            }
            t = (MPI_Wtime() - t) / n;
        } else {
            MPI_Win_lock_all(0, c->win);
            t = MPI_Wtime();
            for (int i = 0; i < n; i++) {
                issue(c);
                if (c->mode == MODE_LOCK_ALL_FLUSH) MPI_Win_flush(1, c->win);
            }
            if (c->mode == MODE_AGGREGATE) MPI_Win_flush(1, c->win);
            t = (MPI_Wtime() - t) / n;
            MPI_Win_unlock_all(c->win);
        }
    }
    MPI_Barrier(c->comm);
    return t;
}

/* Target memory written under an exclusive lock on itself, so that it is
 * visible to RMA in the separate memory model too. */
static void target_fill(struct rma_ctx *c, int initial)
{
    MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 1, 0, c->win);
    for (long k = 0; k < c->size; k++) c->win_mem[k] = 0;
    if (c->op == RMA_GET)
        for (long k = 0; k < c->size; k++) c->win_mem[k] = (char)(3 * k + 5);
    if (c->op == RMA_CAS) *(int *)c->win_mem = initial;
    MPI_Win_unlock(1, c->win);
}

/* Three operations in separate epochs from a known target state; wrong
 * elements on this rank (origin: fetched values; target: final memory). */
static double verify(struct rma_ctx *c)
{
    const int reps = 3;
    float *of = (float *)c->origin, *rf = (float *)c->result, *wf = (float *)c->win_mem;
    long wrong = 0;
    if (c->rank == 1) target_fill(c, 0);
    for (long k = 0; k < c->size; k++) c->origin[k] = (char)(c->op == RMA_PUT ? 7 * k + 1 : 0);
    if (c->op == RMA_ACC || c->op == RMA_GACC || c->op == RMA_FOP)
        for (int k = 0; k < c->count; k++) of[k] = 1.f;
    MPI_Barrier(c->comm);
    for (int i = 0; c->rank == 0 && i < reps; i++) {
        if (c->op == RMA_CAS) {
            ((int *)c->compare)[0] = i;     /* i -> i + 1: each swap must see the last */
            ((int *)c->origin)[0] = i + 1;
        }
        MPI_Win_lock(MPI_LOCK_SHARED, 1, 0, c->win);
        issue(c);
        MPI_Win_unlock(1, c->win);
        for (int k = 0; k < c->count; k++) {
            if (c->op == RMA_GET) wrong += c->origin[k] != (char)(3 * k + 5);
            if (c->op == RMA_GACC || c->op == RMA_FOP) wrong += rf[k] != (float)i;
            if (c->op == RMA_CAS) wrong += ((int *)c->result)[0] != i;
        }
    }
    MPI_Barrier(c->comm);
    if (c->rank == 1) {
        MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 1, 0, c->win);
        for (int k = 0; k < c->count; k++) {
            if (c->op == RMA_PUT) wrong += c->win_mem[k] != (char)(7 * k + 1);
            if (c->op == RMA_ACC || c->op == RMA_GACC || c->op == RMA_FOP) wrong += wf[k] != (float)reps;
            if (c->op == RMA_CAS) wrong += ((int *)c->win_mem)[0] != reps;
        }
        MPI_Win_unlock(1, c->win);
    }
    return (double)wrong;
}

static void bench_op(const struct msc_settings *s, int which, MPI_Comm comm)
{
    struct rma_ctx c = {.comm = comm, .op = rma_ops[which].id};
    long sizes[MSC_MAX_SIZES];
    int moves_bytes = c.op == RMA_PUT || c.op == RMA_GET;
    int nsizes = msc_sizes_in_units(s, moves_bytes ? 1 : 4, sizes);
    if (rma_ops[which].single_element) {    /* IMB: one element, one size */
        sizes[0] = 4;
        nsizes = 1;
    }
    long max_size = sizes[nsizes - 1] > 4 ? sizes[nsizes - 1] : 4;
    MPI_Comm_rank(comm, &c.rank);
    c.win_mem = msc_alloc((size_t)max_size);
    c.origin = msc_alloc((size_t)max_size);
    c.result = msc_alloc((size_t)max_size);
    c.compare = msc_alloc(sizeof(int));
    for (int m = MODE_LOCK_UNLOCK; m <= MODE_AGGREGATE; m++) {
        int n_prev = 0;
        c.mode = (enum rma_mode)m;
        for (int si = 0; si < nsizes; si++) {
            c.size = sizes[si];
            c.count = (int)(moves_bytes ? c.size : c.size / 4);
            MPI_Win_create(c.win_mem, c.size > 0 ? c.size : 1, 1, MPI_INFO_NULL, comm, &c.win);
            double wrong = m == MODE_LOCK_UNLOCK ? verify(&c) : 0.0;
            int n = msc_select_n_sample(s, c.size, si, &n_prev, run_rma, &c, comm);
            run_rma(&c, msc_warmup_count(n));
            double t = run_rma(&c, n);
            MPI_Win_free(&c.win);

            msc_emit_begin("result");
            msc_emit_str("op", rma_ops[which].name);
            msc_emit_str("mode", mode_names[m]);
            msc_emit_long("bytes", c.size);
            msc_emit_long("n_sample", n);
            msc_emit_gathered(comm, "t_op", t);
            msc_emit_gathered(comm, "errors", wrong);
            msc_emit_end();
        }
    }
    free(c.win_mem);
    free(c.origin);
    free(c.result);
    free(c.compare);
}

int main(int argc, char **argv)
{
    struct msc_settings s;
    int np;
    MPI_Init(&argc, &argv);
    msc_parse_args(argc, argv, &s);
    MPI_Comm_size(MPI_COMM_WORLD, &np);
    if (np != 2) msc_die("the RMA benchmarks run on exactly 2 ranks (origin 0, target 1)");
    msc_kernel_setup(s.kernel_size);
    msc_emit_header(MPI_COMM_WORLD, "rma", &s);
    for (size_t i = 0; i < sizeof(rma_ops) / sizeof(rma_ops[0]); i++)
        if (msc_op_selected(&s, rma_ops[i].name)) bench_op(&s, (int)i, MPI_COMM_WORLD);
    if (msc_op_selected(&s, "truly_passive_put")) bench_truly_passive_put(&s, MPI_COMM_WORLD);
    msc_emit_begin("done");
    msc_emit_end();
    MPI_Finalize();
    return 0;
}
