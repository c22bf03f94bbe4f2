/* mpiscope-bench-overlap: overlap of nonblocking collectives with computation,
 * measured exactly as IMB-NBC does it (IMB 2021+, src_c/IMB_<op>.c, NBC
 * branches), plus the blocking collective timed the way IMB-MPI1 times it.
 *
 * Per operation and size, every rank reports t_pure, t_ovrlp, t_comp (IMB's
 * time_CPU), the time spent in MPI_Test calls, the calibration run and the
 * blocking time; the Python side picks IMB's rank (largest t_ovrlp) and
 * computes the overlap. Result buffers are checked after every size. */
#include "common.h"
#include "nbc_ops.h"

#include <stdio.h>
#include <string.h>

struct nbc_times {
    double pure, ovrlp, comp, test, cpu_init;
};

/* IMB_<op>_pure followed by IMB_<op>: N_BARR barriers; n x {start; Wait} with
 * a sync barrier after each; CPU_Exploit(t_pure, 1); N_BARR barriers; n x
 * {start; CPU_Exploit(t_pure, 0); Wait}. Ibarrier has no per-iteration
 * barrier and is timed as one block (IMB_barrier.c). */
static void run_nbc(struct nbc_ctx *c, int n, struct nbc_times *t)
{
    MPI_Request req;
    memset(t, 0, sizeof(*t));
    msc_barriers(c->comm, MSC_N_BARR);
    if (c->op->id == OP_IBARRIER) {
        t->pure = MPI_Wtime();
        for (int i = 0; i < n; i++) {
            nbc_start(c, 0, &req);
            MPI_Wait(&req, MPI_STATUS_IGNORE);
        }
        t->pure = (MPI_Wtime() - t->pure) / n;
    } else {
        for (int i = 0; i < n; i++) {
            t->pure -= MPI_Wtime();
            nbc_start(c, 0, &req);
            MPI_Wait(&req, MPI_STATUS_IGNORE);
            t->pure += MPI_Wtime();
            MPI_Barrier(c->comm);
        }
        t->pure /= n;
    }

    t->cpu_init = msc_kernel_init(t->pure);
    msc_barriers(c->comm, MSC_N_BARR);
    if (c->op->id == OP_IBARRIER) t->ovrlp = MPI_Wtime();
    for (int i = 0; i < n; i++) {
        if (c->op->id != OP_IBARRIER) t->ovrlp -= MPI_Wtime();
        nbc_start(c, nbc_overlap_root(c, i), &req);
        t->comp -= MPI_Wtime();
        msc_kernel_run(&req, c->settings->test_every, &t->test);
        t->comp += MPI_Wtime();
        MPI_Wait(&req, MPI_STATUS_IGNORE);
        if (c->op->id != OP_IBARRIER) {
            t->ovrlp += MPI_Wtime();
            MPI_Barrier(c->comm);
        }
    }
    if (c->op->id == OP_IBARRIER) t->ovrlp = MPI_Wtime() - t->ovrlp;
    t->ovrlp /= n;
    t->comp /= n;
    t->test /= n;
}

static double nbc_time0(void *ctx, int n)
{
    struct nbc_times t;
    run_nbc(ctx, n, &t);
    return t.pure;
}

/* IMB-MPI1's loop for the blocking collective (src_c/IMB_<op>.c, MPI1
 * branches): root 0, a sync barrier after each call; MPI_Barrier timed as
 * one block. */
static double run_blocking(struct nbc_ctx *c, int n)
{
    double t = 0.0;
    msc_barriers(c->comm, MSC_N_BARR);
    if (c->op->id == OP_IBARRIER) {
        t = MPI_Wtime();
        for (int i = 0; i < n; i++) nbc_blocking(c, 0);
        return (MPI_Wtime() - t) / n;
    }
    for (int i = 0; i < n; i++) {
        t -= MPI_Wtime();
        nbc_blocking(c, 0);
        t += MPI_Wtime();
        MPI_Barrier(c->comm);
    }
    return t / n;
}

/* The overlapped path once more (start, kernel with its MPI_Test calls,
 * Wait), then the blocking call, each from cleared receive buffers: the
 * number of wrong result elements on this rank. */
static double verify(struct nbc_ctx *c)
{
    MPI_Request req;
    double t_test = 0.0;
    int root = c->np - 1;    /* a non-zero root where the operation has one */
    long wrong = 0;
    nbc_clear_results(c);
    nbc_start(c, root, &req);
    msc_kernel_run(&req, c->settings->test_every, &t_test);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    wrong += nbc_check(c, root);
    nbc_clear_results(c);
    nbc_blocking(c, root);
    wrong += nbc_check(c, root);
    return (double)wrong;
}

static void bench_op(const struct msc_settings *s, const struct nbc_op *op, MPI_Comm comm)
{
    struct nbc_ctx c;
    long sizes[MSC_MAX_SIZES];
    int n_prev = 0;
    int nsizes = msc_sizes_in_units(s, op->reduction ? (long)sizeof(float) : 1, sizes);
    if (op->id == OP_IBARRIER) {     /* IMB: Ibarrier has one "size" */
        sizes[0] = 0;
        nsizes = 1;
    }
    nbc_ctx_init(&c, op, sizes[nsizes - 1], comm, s);
    for (int si = 0; si < nsizes; si++) {
        long size = sizes[si];
        nbc_set_size(&c, size);
        int n = msc_select_n_sample(s, size, si, &n_prev, nbc_time0, &c, comm);
        struct nbc_times warm, t;
        run_nbc(&c, msc_warmup_count(n), &warm);
        run_nbc(&c, n, &t);
        run_blocking(&c, msc_warmup_count(n));
        double t_blocking = run_blocking(&c, n);
        double wrong = verify(&c);

        msc_emit_begin("result");
        msc_emit_str("op", op->name);
        msc_emit_long("bytes", size);
        msc_emit_long("n_sample", n);
        msc_emit_gathered(comm, "t_pure", t.pure);
        msc_emit_gathered(comm, "t_ovrlp", t.ovrlp);
        msc_emit_gathered(comm, "t_cpu", t.comp);
        msc_emit_gathered(comm, "t_test", t.test);
        msc_emit_gathered(comm, "t_cpu_init", t.cpu_init);
        msc_emit_gathered(comm, "t_blocking", t_blocking);
        msc_emit_gathered(comm, "errors", wrong);
        msc_emit_end();
    }
    nbc_ctx_free(&c);
}

int main(int argc, char **argv)
{
    struct msc_settings s;
    MPI_Init(&argc, &argv);
    msc_parse_args(argc, argv, &s);
    msc_kernel_setup(s.kernel_size);
    msc_emit_header(MPI_COMM_WORLD, "overlap", &s);
    for (const struct nbc_op *op = nbc_ops; op->name; op++)
        if (msc_op_selected(&s, op->name)) bench_op(&s, op, MPI_COMM_WORLD);
    msc_emit_begin("done");
    msc_emit_end();
    MPI_Finalize();
    return 0;
}
