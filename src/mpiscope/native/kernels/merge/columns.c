/* Raw records of all rank files -> the merge's per-record columns, in the
 * layout trace/columns.py documents: grouped by rank, then thread, in
 * recording order. The records are read once from the mapped files, by
 * `workers` threads each filling a contiguous range of blocks; a second,
 * sequential pass ties sub-records to their call and numbers the events.
 */
#include <math.h>
#include <stdlib.h>

#include "merge.h"
#include "record.h"

/* double -> int64 as x86 (and so NumPy's astype) converts: out of range,
 * which only a damaged record's ticks reach, gives INT64_MIN. */
static int64_t to_int64(double x)
{
    return x >= -0x1p63 && x < 0x1p63 ? (int64_t)x : INT64_MIN;
}

/* Ticks -> ns on rank 0's clock. The arithmetic is clocks.py's, operation
 * for operation in double, with rint's ties-to-even, so that the times equal
 * what the NumPy formulation gave; integer sums wrap as NumPy's int64 do. */
static int64_t global_ns(const struct msm_clock *c, uint64_t ticks)
{
    int64_t dt = (int64_t)(ticks - (uint64_t)c->tick_ref);
    int64_t local = (int64_t)((uint64_t)c->ns_ref + (uint64_t)to_int64(rint((double)dt * c->ns_per_tick)));
    double offset = c->drift != 0.0 ? c->offset_ns + ((double)local - c->offset_at_ns) * c->drift : c->offset_ns;
    return (int64_t)((uint64_t)local - (uint64_t)to_int64(rint(offset)));
}

struct work {
    const struct msm_block *blocks;
    int64_t first, last;   /* block range */
    int64_t row;           /* output row of the first record */
    const struct msm_clock *clocks;
    const struct msm_tables *tab;
    const struct msm_columns *out;
};

static int32_t dense_comm(const struct msm_tables *tab, int32_t rank, uint16_t local)
{
    if (tab->lut_size == 0 || rank < 0 || local >= tab->comm_width)
        return -1;
    int64_t at = (int64_t)rank * tab->comm_width;
    return at < tab->lut_size ? (int32_t)tab->comm_lut[at + local] : -1;
}

static void fill_block(const struct work *w, const struct msm_block *b, int64_t row)
{
    const struct msc_rec *r = b->recs;
    const struct msm_columns *o = w->out;
    const struct msm_clock *c = &w->clocks[b->clock];
    for (int64_t k = 0; k < b->n; k++, r++) {
        int64_t i = row + k;
        o->rank[i] = b->rank;
        o->thread[i] = b->thread;
        o->call[i] = r->call;
        o->role[i] = w->tab->role_of_call[r->call];
        o->starts[i] = w->tab->starts_of_call[r->call];
        o->t_enter[i] = global_ns(c, r->t_enter);
        o->t_leave[i] = r->t_leave ? global_ns(c, r->t_leave) : -1;  /* 0: the call never returned */
        o->bytes[i] = (int64_t)r->bytes;
        o->callsite[i] = r->callsite;
        o->req[i] = r->req & 0x7fffffffu;
        o->immediate[i] = (r->req & 0x80000000u) != 0;  /* MPI returned a complete, shared request */
        o->peer[i] = r->peer;
        o->tag[i] = r->tag;
        o->comm[i] = dense_comm(w->tab, b->rank, r->comm);
    }
}

static void *fill_range(void *arg)
{
    const struct work *w = arg;
    int64_t row = w->row;
    for (int64_t b = w->first; b < w->last; b++) {
        fill_block(w, &w->blocks[b], row);
        row += w->blocks[b].n;
    }
    return NULL;
}

struct call_key {
    int32_t rank;
    int64_t t_enter;
    int64_t index;
};

static int by_rank_time(const void *pa, const void *pb)
{
    const struct call_key *a = pa, *b = pb;
    if (a->rank != b->rank)
        return a->rank < b->rank ? -1 : 1;
    if (a->t_enter != b->t_enter)
        return a->t_enter < b->t_enter ? -1 : 1;
    return (a->index > b->index) - (a->index < b->index);
}

/* Events of several threads interleave: number them in (rank, t_enter)
 * order. On entry event[] holds the row of each record's call. */
static int number_by_time(const struct msm_columns *o, int64_t n, int64_t first_call_id)
{
    int64_t ncalls = 0;
    for (int64_t i = 0; i < n; i++)
        ncalls += o->call[i] >= first_call_id;
    struct call_key *keys = malloc((size_t)(ncalls ? ncalls : 1) * sizeof *keys);
    int64_t *event_of_row = malloc((size_t)(n ? n : 1) * sizeof *event_of_row);
    if (!keys || !event_of_row) {
        free(keys);
        free(event_of_row);
        return -1;
    }
    int64_t k = 0;
    for (int64_t i = 0; i < n; i++)
        if (o->call[i] >= first_call_id)
            keys[k++] = (struct call_key){o->rank[i], o->t_enter[i], i};
    qsort(keys, (size_t)ncalls, sizeof *keys, by_rank_time);
    for (k = 0; k < ncalls; k++)
        event_of_row[keys[k].index] = k;
    for (int64_t i = 0; i < n; i++)
        o->event[i] = o->event[i] >= 0 ? event_of_row[o->event[i]] : -1;
    free(keys);
    free(event_of_row);
    return 0;
}

/* Sub-records follow their call in the same thread's stream (a block marker
 * may sit in between; it is a sub-record too). With one thread per rank,
 * recording order is (rank, t_enter) order and numbers the events. */
static int number_events(const struct msm_columns *o, int64_t n, int64_t first_call_id)
{
    int threaded = 0;
    for (int64_t i = 0; i < n && !threaded; i++)
        threaded = o->thread[i] != 0;
    int64_t last = -1, next_event = 0;
    for (int64_t i = 0; i < n; i++) {
        if (i == 0 || o->rank[i] != o->rank[i - 1] || o->thread[i] != o->thread[i - 1])
            last = -1;
        if (o->call[i] >= first_call_id)
            last = threaded ? i : next_event++;  /* threaded: the call's row, numbered below */
        o->event[i] = last;
    }
    return threaded ? number_by_time(o, n, first_call_id) : 0;
}

int msm_columns(const struct msm_block *blocks, int64_t nblocks, const struct msm_clock *clocks,
                const struct msm_tables *tab, int32_t workers, const struct msm_columns *out)
{
    int64_t total = 0;
    for (int64_t b = 0; b < nblocks; b++)
        total += blocks[b].n;
    workers = msm_workers(workers);
    struct work w[MSM_MAX_WORKERS];
    /* contiguous block ranges of about total / workers records each */
    int64_t b = 0, row = 0;
    for (int k = 0; k < workers; k++) {
        w[k] = (struct work){blocks, b, b, row, clocks, tab, out};
        int64_t goal = total * (k + 1) / workers;
        while (b < nblocks && (row < goal || k == workers - 1)) {
            row += blocks[b].n;
            b++;
        }
        w[k].last = b;
    }
    msm_run(workers, fill_range, w, sizeof w[0]);
    return number_events(out, total, tab->first_call_id);
}
