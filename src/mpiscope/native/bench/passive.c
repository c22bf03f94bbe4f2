/* IMB-RMA's Truly_passive_put (IMB 2021+, src_c/IMB_rma_put.c,
 * IMB_rma_passive_put): does the origin complete MPI_Put + MPI_Win_flush while
 * the target computes outside MPI?
 *
 * Phase 1: the origin runs n x {Put; Win_flush; Barrier} while the target
 * loops on MPI_Barrier -> t_pure. The origin sends t_pure to the target, which
 * calibrates CPU_Exploit to it. Phase 2: the same origin loop while the target
 * runs n x {CPU_Exploit(t_pure); Barrier} -> t_ovrlp. Without passive
 * progress the flush waits for the target's barrier: t_ovrlp ~ 2 t_pure
 * (002, RMA section). */
#include "passive.h"

#include <stdlib.h>

struct passive_ctx {
    MPI_Comm comm;
    int rank;
    long size;
    char *origin, *target;
    MPI_Win win;
    double t_pure, t_ovrlp;
};

static double origin_loop(struct passive_ctx *c, int n)
{
    double t = MPI_Wtime();
    for (int i = 0; i < n; i++) {
        MPI_Put(c->origin, (int)c->size, MPI_BYTE, 1, 0, (int)c->size, MPI_BYTE, c->win);
        MPI_Win_flush(1, c->win);
        MPI_Barrier(c->comm);
    }
    return (MPI_Wtime() - t) / n;
}

static void target_loop(struct passive_ctx *c, int n, int compute)
{
    double unused = 0.0;
    for (int i = 0; i < n; i++) {
        if (compute) msc_kernel_run(NULL, 0, &unused);
        MPI_Barrier(c->comm);
    }
}

/* One run with n repetitions; returns IMB's time[0] (the origin's t_pure). */
static double passive_put(void *ctx, int n)
{
    struct passive_ctx *c = ctx;
    c->t_pure = c->t_ovrlp = 0.0;
    MPI_Barrier(c->comm);
    if (c->rank == 0) {
        MPI_Win_lock(MPI_LOCK_SHARED, 1, 0, c->win);
        c->t_pure = origin_loop(c, n);
        MPI_Send(&c->t_pure, 1, MPI_DOUBLE, 1, 1, c->comm);
        MPI_Barrier(c->comm);
        c->t_ovrlp = origin_loop(c, n);
        MPI_Win_unlock(1, c->win);
    } else {
        double t_pure;
        target_loop(c, n, 0);
        MPI_Recv(&t_pure, 1, MPI_DOUBLE, 0, 1, c->comm, MPI_STATUS_IGNORE);
        msc_kernel_init(t_pure);
        MPI_Barrier(c->comm);
        target_loop(c, n, 1);
    }
    return c->t_pure;
}

void bench_truly_passive_put(const struct msc_settings *s, MPI_Comm comm)
{
    struct passive_ctx c = {.comm = comm};
    long max_size = 1;
    int n_prev = 0;
    MPI_Comm_rank(comm, &c.rank);
    for (int i = 0; i < s->nsizes; i++)
        if (s->sizes[i] > max_size) max_size = s->sizes[i];
    c.origin = msc_alloc((size_t)max_size);
    c.target = msc_alloc((size_t)max_size);
    for (long k = 0; k < max_size; k++) c.origin[k] = (char)(k * 7 + 1);
    for (int si = 0; si < s->nsizes; si++) {
        c.size = s->sizes[si];
        /* IMB creates the window over user memory for every size */
        MPI_Win_create(c.target, c.size > 0 ? c.size : 1, 1, MPI_INFO_NULL, comm, &c.win);
        int n = msc_select_n_sample(s, c.size, si, &n_prev, passive_put, &c, comm);
        passive_put(&c, msc_warmup_count(n));
        passive_put(&c, n);
        /* the last Put is complete (flushed) and ordered before the barrier */
        double wrong = 0.0;
        if (c.rank == 1) {
            MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 1, 0, c.win);
            for (long k = 0; k < c.size; k++) wrong += c.target[k] != (char)(k * 7 + 1);
            MPI_Win_unlock(1, c.win);
        }
        MPI_Win_free(&c.win);

        msc_emit_begin("result");
        msc_emit_str("op", "truly_passive_put");
        msc_emit_long("bytes", c.size);
        msc_emit_long("n_sample", n);
        msc_emit_gathered(comm, "t_pure", c.t_pure);
        msc_emit_gathered(comm, "t_ovrlp", c.t_ovrlp);
        msc_emit_gathered(comm, "errors", wrong);
        msc_emit_end();
        for (long k = 0; k < c.size; k++) c.target[k] = 0;
    }
    free(c.origin);
    free(c.target);
}
