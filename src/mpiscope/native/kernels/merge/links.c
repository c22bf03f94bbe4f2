/* Nonblocking starts -> the completion that finished them, by (rank, request
 * id) in a hash table (trace/requests.py states the rules). */
#include <stdlib.h>

#include "merge.h"

int msm_map_init(struct msm_map *m, int64_t expected)
{
    uint64_t size = 16;
    while (size < 2 * (uint64_t)(expected > 0 ? expected : 1))  /* load <= 1/2: short probes */
        size <<= 1;
    m->mask = size - 1;
    m->keys = malloc(size * sizeof *m->keys);
    m->vals = malloc(size * sizeof *m->vals);
    if (!m->keys || !m->vals) {
        msm_map_free(m);
        return -1;
    }
    for (uint64_t i = 0; i < size; i++)
        m->vals[i] = -1;
    return 0;
}

void msm_map_free(struct msm_map *m)
{
    free(m->keys);
    free(m->vals);
    m->keys = NULL;
    m->vals = NULL;
}

/* request ids are rank-local */
static uint64_t request_key(const struct msm_columns *rec, int64_t i)
{
    return (uint64_t)(int64_t)rec->rank[i] << 32 | (uint64_t)rec->req[i];
}

static int64_t parent_event(const struct msm_columns *rec, int64_t i)
{
    return rec->parent[i] >= 0 ? rec->event[rec->parent[i]] : -1;
}

/* The first completion of each request id in rows [a, b) goes to done; ids
 * MPI returned already complete (role immediate) go to late. */
static void index_completions(const struct msm_columns *rec, int64_t a, int64_t b, uint8_t role_complete,
                              uint8_t role_immediate, struct msm_map *done, struct msm_map *late)
{
    for (int64_t i = a; i < b; i++) {
        if (rec->role[i] == role_complete && rec->req[i] != 0 && rec->t_leave[i] >= 0) {
            uint64_t key = request_key(rec, i), s = msm_map_slot(done, key);
            if (done->vals[s] < 0) {
                done->keys[s] = key;
                done->vals[s] = i;
            }
        } else if (rec->role[i] == role_immediate) {
            uint64_t key = request_key(rec, i), s = msm_map_slot(late, key);
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

int msm_link_starts(const struct msm_columns *rec, int64_t n, uint8_t role_complete, uint8_t role_immediate,
                    const int64_t *start, int64_t nstart, int64_t *t_complete, int64_t *completed_by,
                    int32_t *peer, int32_t *tag, int64_t *bytes)
{
    int64_t *cut = NULL, ranges = rank_ranges(rec, n, &cut), widest = 0;
    if (ranges < 0)
        return -1;
    for (int64_t r = 0; r < ranges; r++) {
        int64_t ndone = 0;
        for (int64_t i = cut[r]; i < cut[r + 1]; i++)
            ndone += rec->role[i] == role_complete || rec->role[i] == role_immediate;
        widest = ndone > widest ? ndone : widest;
    }
    struct msm_map done, late;
    if (msm_map_init(&done, widest) != 0) {
        free(cut);
        return -1;
    }
    if (msm_map_init(&late, widest) != 0) {
        free(cut);
        msm_map_free(&done);
        return -1;
    }
    int64_t k = 0;
    for (int64_t r = 0; r < ranges; r++) {
        if (r > 0) {
            clear(&done);
            clear(&late);
        }
        index_completions(rec, cut[r], cut[r + 1], role_complete, role_immediate, &done, &late);
        for (; k < nstart && start[k] < cut[r + 1]; k++) {  /* start is in row order */
            int64_t i = start[k];
            uint64_t key = request_key(rec, i);
            int64_t comp = done.vals[msm_map_slot(&done, key)];
            int immediate = rec->immediate[i] || late.vals[msm_map_slot(&late, key)] >= 0;
            if (immediate) {
                t_complete[k] = rec->t_leave[i];
                completed_by[k] = parent_event(rec, i);
            } else {
                t_complete[k] = comp >= 0 ? rec->t_leave[comp] : -1;
                completed_by[k] = comp >= 0 ? parent_event(rec, comp) : -1;
            }
            /* the status envelope of the completion (receives) */
            peer[k] = comp >= 0 ? rec->peer[comp] : -1;
            tag[k] = comp >= 0 ? rec->tag[comp] : 0;
            bytes[k] = comp >= 0 ? rec->bytes[comp] : 0;
        }
    }
    free(cut);
    msm_map_free(&done);
    msm_map_free(&late);
    return 0;
}
