/* Nonblocking starts -> the completion that finished them, by (rank, request
 * id) in a hash table (trace/requests.py states the rules). */
#include <stdlib.h>

#include "merge.h"

/* request ids are rank-local */
static uint64_t request_key(const struct msm_columns *rec, int64_t i)
{
    return (uint64_t)(int64_t)rec->rank[i] << 32 | (uint64_t)rec->req[i];
}

/* Request ids are a process's counter: a rank starts its requests, and mostly
 * completes them, in increasing id order. Runs of REQ_RUN consecutive ids
 * share a hash and so take neighbouring slots: walking the rows touches the
 * tables' memory once per run rather than once per request (a rank's tables
 * outgrow the caches: 15.6 M records, ~170 MB; there the kernel took 0.65 s
 * with a hash per id, 0.28 s with runs of 32, 0.34 s of 16). The runs are
 * scattered as any key; ids far apart in a run (one in 32 completed) share
 * its slots and probe a few neighbours, in the same cache lines. */
#define REQ_RUN 32

static uint64_t request_hash(uint64_t key)
{
    return msm_hash(key / REQ_RUN);
}

static uint64_t request_slot(const struct msm_map *m, uint64_t key)
{
    uint64_t i = (request_hash(key) * REQ_RUN + key % REQ_RUN) & m->mask;
    while (m->vals[i] >= 0 && m->keys[i] != key)
        i = (i + 1) & m->mask;
    return i;
}

/* A request id's share of the threads when a rank's rows are split between
 * them by id (high bits of the hash: the tables' slots use the low ones), a
 * run of ids in one share. */
static int part_of(uint64_t key, int parts)
{
    return parts > 1 ? (int)((request_hash(key) >> 32) % (uint64_t)parts) : 0;
}

/* The first completion of each request id of share `part` in rows [a, b)
 * goes to done; ids MPI returned already complete (role immediate) go to
 * late. */
static void index_completions(const struct msm_columns *rec, int64_t a, int64_t b, uint8_t role_complete,
                              uint8_t role_immediate, int part, int parts, struct msm_map *done,
                              struct msm_map *late)
{
    for (int64_t i = a; i < b; i++) {
        if (rec->role[i] == role_complete && rec->req[i] != 0 && rec->t_leave[i] >= 0) {
            uint64_t key = request_key(rec, i);
            if (part_of(key, parts) != part)
                continue;
            uint64_t s = request_slot(done, key);
            if (done->vals[s] < 0) {
                done->keys[s] = key;
                done->vals[s] = i;
            }
        } else if (rec->role[i] == role_immediate) {
            uint64_t key = request_key(rec, i);
            if (part_of(key, parts) != part)
                continue;
            uint64_t s = request_slot(late, key);
            late->keys[s] = key;
            late->vals[s] = i;
        }
    }
}

static void clear(struct msm_map *m)
{
    for (uint64_t i = 0; i <= m->mask; i++)
        m->vals[i] = -1;
}

static int by_value(const void *pa, const void *pb)
{
    int32_t a = *(const int32_t *)pa, b = *(const int32_t *)pb;
    return (a > b) - (a < b);
}

/* Rows of one rank are contiguous when every rank file was read once; then
 * each rank gets its own small table, which stays in cache. Returns the
 * number of row ranges (one if a rank repeats), bounds in *cut (caller
 * frees), -1 when out of memory. */
static int64_t rank_ranges(const struct msm_columns *rec, int64_t n, int64_t **cut)
{
    int64_t runs = 0;
    for (int64_t i = 0; i < n; i++)
        runs += i == 0 || rec->rank[i] != rec->rank[i - 1];
    *cut = malloc((size_t)(runs + 2) * sizeof **cut);
    int32_t *ranks = malloc((size_t)(runs + 1) * sizeof *ranks);
    if (!*cut || !ranks) {
        free(ranks);
        return -1;
    }
    int64_t r = 0;
    for (int64_t i = 0; i < n; i++)
        if (i == 0 || rec->rank[i] != rec->rank[i - 1]) {
            ranks[r] = rec->rank[i];
            (*cut)[r++] = i;
        }
    (*cut)[r] = n;
    qsort(ranks, (size_t)runs, sizeof *ranks, by_value);
    for (r = 1; r < runs; r++)
        if (ranks[r] == ranks[r - 1]) {
            runs = 1;
            (*cut)[1] = n;
            break;
        }
    free(ranks);
    return runs;
}

struct links_out {
    int64_t *t_complete, *completed_by, *bytes;
    int32_t *peer, *tag;
};

struct share {
    const struct msm_columns *rec;
    const int64_t *cut;      /* row ranges of ranks */
    int64_t r0, r1;          /* this thread's ranges */
    int part, parts;         /* this thread's share of the request ids (all: 0, 1) */
    const int64_t *start;    /* all starts, in row order */
    int64_t nstart;
    uint8_t role_complete, role_immediate;
    const struct links_out *out;
    int failed;
};

/* First start at or after row. */
static int64_t lower_bound(const int64_t *a, int64_t n, int64_t row)
{
    int64_t lo = 0, hi = n;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (a[mid] < row)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static void link_one(const struct share *w, const struct msm_map *done, const struct msm_map *late, int64_t k)
{
    const struct msm_columns *rec = w->rec;
    int64_t i = w->start[k];
    uint64_t key = request_key(rec, i);
    int64_t comp = done->vals[request_slot(done, key)];
    int immediate = rec->immediate[i] || late->vals[request_slot(late, key)] >= 0;
    if (immediate) {
        w->out->t_complete[k] = rec->t_leave[i];
        w->out->completed_by[k] = rec->event[i];
    } else {
        w->out->t_complete[k] = comp >= 0 ? rec->t_leave[comp] : -1;
        w->out->completed_by[k] = comp >= 0 ? rec->event[comp] : -1;
    }
    /* the status envelope of the completion (receives) */
    w->out->peer[k] = comp >= 0 ? rec->peer[comp] : -1;
    w->out->tag[k] = comp >= 0 ? rec->tag[comp] : 0;
    w->out->bytes[k] = comp >= 0 ? rec->bytes[comp] : 0;
}

static void *link_share(void *arg)
{
    struct share *w = arg;
    const struct msm_columns *rec = w->rec;
    int64_t widest = 0;
    for (int64_t r = w->r0; r < w->r1; r++) {
        int64_t ndone = 0;
        for (int64_t i = w->cut[r]; i < w->cut[r + 1]; i++)
            ndone += (rec->role[i] == w->role_complete || rec->role[i] == w->role_immediate)
                     && (w->parts == 1 || part_of(request_key(rec, i), w->parts) == w->part);
        widest = ndone > widest ? ndone : widest;
    }
    struct msm_map done, late;
    if (msm_map_init(&done, widest) != 0) {
        w->failed = 1;
        return NULL;
    }
    if (msm_map_init(&late, widest) != 0) {
        msm_map_free(&done);
        w->failed = 1;
        return NULL;
    }
    int64_t k = w->r0 < w->r1 ? lower_bound(w->start, w->nstart, w->cut[w->r0]) : w->nstart;
    for (int64_t r = w->r0; r < w->r1; r++) {
        if (r > w->r0) {
            clear(&done);
            clear(&late);
        }
        index_completions(rec, w->cut[r], w->cut[r + 1], w->role_complete, w->role_immediate, w->part,
                          w->parts, &done, &late);
        for (; k < w->nstart && w->start[k] < w->cut[r + 1]; k++)
            if (w->parts == 1 || part_of(request_key(rec, w->start[k]), w->parts) == w->part)
                link_one(w, &done, &late, k);
    }
    msm_map_free(&done);
    msm_map_free(&late);
    return NULL;
}

int msm_link_starts(const struct msm_columns *rec, int64_t n, uint8_t role_complete, uint8_t role_immediate,
                    const int64_t *start, int64_t nstart, int32_t workers, int64_t *t_complete,
                    int64_t *completed_by, int32_t *peer, int32_t *tag, int64_t *bytes)
{
    int64_t *cut = NULL, ranges = rank_ranges(rec, n, &cut);
    if (ranges < 0)
        return -1;
    struct links_out out = {t_complete, completed_by, bytes, peer, tag};
    workers = msm_workers(workers);
    struct share w[MSM_MAX_WORKERS];
    if (ranges < 2 * workers) {
        /* few ranks (a merge in pieces of one rank each): every thread reads
         * all rows and links the request ids of its share */
        for (int k = 0; k < workers; k++)
            w[k] = (struct share){rec, cut, 0, ranges, k, workers, start, nstart, role_complete, role_immediate,
                                  &out, 0};
    } else {
        /* whole ranks per thread, about n / workers rows each */
        int64_t r = 0;
        for (int k = 0; k < workers; k++) {
            w[k] = (struct share){rec, cut, r, r, 0, 1, start, nstart, role_complete, role_immediate, &out, 0};
            while (r < ranges && (cut[r] < n * (k + 1) / workers || k == workers - 1))
                r++;
            w[k].r1 = r;
        }
    }
    msm_run(workers, link_share, w, sizeof w[0]);
    free(cut);
    for (int k = 0; k < workers; k++)
        if (w[k].failed)
            return -1;
    return 0;
}
