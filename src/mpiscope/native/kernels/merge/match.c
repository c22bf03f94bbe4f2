/* Sends <-> receives by MPI's non-overtaking rule (trace/match.py): within
 * one envelope (communicator, source, destination, tag) the k-th send, in
 * posting order, matches the k-th receive, in posting order. Envelopes go
 * to groups through a hash table; each group's members are laid out by a
 * counting sort that keeps input order, which is already posting order
 * unless threads interleave, so a group is sorted only when it is not. */
#include <stdlib.h>

#include "merge.h"

struct groups {
    struct msm_map map;   /* envelope hash -> latest group with that hash */
    int64_t (*env)[4];
    int64_t *next;        /* next group with the same hash */
    int64_t count, cap;
};

static uint64_t env_hash(const int64_t e[4])
{
    uint64_t h = 0;
    for (int k = 0; k < 4; k++)
        h = msm_hash(h ^ (uint64_t)e[k]) + (uint64_t)k;
    return h;
}

static int same_env(const int64_t a[4], const int64_t b[4])
{
    return a[0] == b[0] && a[1] == b[1] && a[2] == b[2] && a[3] == b[3];
}

static void link_group(struct groups *g, int64_t j)
{
    uint64_t h = env_hash(g->env[j]), s = msm_map_slot(&g->map, h);
    g->next[j] = g->map.vals[s];
    g->map.keys[s] = h;
    g->map.vals[s] = j;
}

/* A table twice as large, when half full. */
static int rehash(struct groups *g)
{
    msm_map_free(&g->map);
    if (msm_map_init(&g->map, 2 * g->count) != 0)
        return -1;
    for (int64_t j = 0; j < g->count; j++)
        link_group(g, j);
    return 0;
}

/* Group id of an envelope, adding it when new; -1 when out of memory. */
static int64_t group_of(struct groups *g, const int64_t e[4])
{
    uint64_t s = msm_map_slot(&g->map, env_hash(e));
    for (int64_t j = g->map.vals[s]; j >= 0; j = g->next[j])
        if (same_env(g->env[j], e))
            return j;
    if (2 * (uint64_t)(g->count + 1) > g->map.mask && rehash(g) != 0)
        return -1;
    if (g->count == g->cap) {
        int64_t cap = 2 * g->cap;
        int64_t(*env)[4] = realloc(g->env, (size_t)cap * sizeof *env);
        if (!env)
            return -1;
        g->env = env;
        int64_t *next = realloc(g->next, (size_t)cap * sizeof *next);
        if (!next)
            return -1;
        g->next = next;
        g->cap = cap;
    }
    int64_t j = g->count++;
    for (int k = 0; k < 4; k++)
        g->env[j][k] = e[k];
    link_group(g, j);  /* chains are short: hashes of distinct envelopes rarely collide */
    return j;
}

static int64_t assign(struct groups *g, const struct msm_envelopes *sd, int64_t *gid)
{
    for (int64_t i = 0; i < sd->n; i++) {
        int64_t e[4] = {sd->comm[i], sd->src[i], sd->dst[i], sd->tag[i]};
        if ((gid[i] = group_of(g, e)) < 0)
            return -1;
    }
    return 0;
}

/* Members of each group in input order: start[g] .. start[g + 1] of out. */
static int lay_out(const int64_t *gid, int64_t n, int64_t ngroups, int64_t *start, int64_t *out)
{
    int64_t *fill = calloc((size_t)ngroups + 1, sizeof *fill);
    if (!fill)
        return -1;
    for (int64_t i = 0; i < n; i++)
        fill[gid[i] + 1]++;
    for (int64_t j = 0; j < ngroups; j++)
        fill[j + 1] += fill[j];
    for (int64_t j = 0; j <= ngroups; j++)
        start[j] = fill[j];
    for (int64_t i = 0; i < n; i++)
        out[fill[gid[i]]++] = i;
    free(fill);
    return 0;
}

/* Posting order: time, then event id, then input (recording) order. */
static int posting_cmp(const struct msm_envelopes *s, int64_t a, int64_t b)
{
    if (s->t[a] != s->t[b])
        return s->t[a] < s->t[b] ? -1 : 1;
    if (s->ev[a] != s->ev[b])
        return s->ev[a] < s->ev[b] ? -1 : 1;
    return (a > b) - (a < b);
}

/* qsort takes no context argument */
static _Thread_local const struct msm_envelopes *sort_side;
static _Thread_local const int64_t (*sort_env)[4];

static int by_posting(const void *pa, const void *pb)
{
    return posting_cmp(sort_side, *(const int64_t *)pa, *(const int64_t *)pb);
}

static void order_group(const struct msm_envelopes *sd, int64_t *m, int64_t len)
{
    for (int64_t k = 1; k < len; k++)
        if (posting_cmp(sd, m[k - 1], m[k]) > 0) {
            sort_side = sd;
            qsort(m, (size_t)len, sizeof *m, by_posting);
            return;
        }
}

/* Envelopes in (comm, src, dst, tag) order: the pairs come out in that order. */
static int by_envelope(const void *pa, const void *pb)
{
    const int64_t *a = sort_env[*(const int64_t *)pa], *b = sort_env[*(const int64_t *)pb];
    for (int k = 0; k < 4; k++)
        if (a[k] != b[k])
            return a[k] < b[k] ? -1 : 1;
    return 0;
}

struct laid_out {
    int64_t *gid, *start, *member;
};

static void free_laid_out(struct laid_out *l)
{
    free(l->gid);
    free(l->start);
    free(l->member);
}

static int group_side(struct groups *g, const struct msm_envelopes *sd, struct laid_out *l)
{
    l->gid = malloc((size_t)(sd->n ? sd->n : 1) * sizeof *l->gid);
    l->member = malloc((size_t)(sd->n ? sd->n : 1) * sizeof *l->member);
    return !l->gid || !l->member || assign(g, sd, l->gid) != 0 ? -1 : 0;
}

static int64_t pair_up(const struct groups *g, const struct msm_envelopes *s, struct laid_out *ls, const struct msm_envelopes *r,
                       struct laid_out *lr, int64_t *si, int64_t *ri)
{
    int64_t *order = malloc((size_t)(g->count ? g->count : 1) * sizeof *order);
    if (!order)
        return -1;
    for (int64_t j = 0; j < g->count; j++)
        order[j] = j;
    sort_env = (const int64_t(*)[4])g->env;
    qsort(order, (size_t)g->count, sizeof *order, by_envelope);
    int64_t out = 0;
    for (int64_t o = 0; o < g->count; o++) {
        int64_t j = order[o];
        int64_t *ms = ls->member + ls->start[j], *mr = lr->member + lr->start[j];
        int64_t ns = ls->start[j + 1] - ls->start[j], nr = lr->start[j + 1] - lr->start[j];
        if (ns == 0 || nr == 0)
            continue;
        order_group(s, ms, ns);
        order_group(r, mr, nr);
        for (int64_t k = 0; k < ns && k < nr; k++) {
            si[out] = ms[k];
            ri[out++] = mr[k];
        }
    }
    free(order);
    return out;
}

int64_t msm_match(const struct msm_envelopes *s, const struct msm_envelopes *r, int64_t *si, int64_t *ri)
{
    struct groups g = {.cap = 64};
    struct laid_out ls = {0}, lr = {0};
    int64_t out = -1;
    g.env = malloc((size_t)g.cap * sizeof *g.env);
    g.next = malloc((size_t)g.cap * sizeof *g.next);
    if (!g.env || !g.next || msm_map_init(&g.map, 1024) != 0)
        goto done;
    if (group_side(&g, s, &ls) != 0 || group_side(&g, r, &lr) != 0)
        goto done;
    ls.start = malloc((size_t)(g.count + 1) * sizeof *ls.start);
    lr.start = malloc((size_t)(g.count + 1) * sizeof *lr.start);
    if (!ls.start || !lr.start || lay_out(ls.gid, s->n, g.count, ls.start, ls.member) != 0 ||
        lay_out(lr.gid, r->n, g.count, lr.start, lr.member) != 0)
        goto done;
    out = pair_up(&g, s, &ls, r, &lr, si, ri);
done:
    free_laid_out(&ls);
    free_laid_out(&lr);
    msm_map_free(&g.map);
    free(g.env);
    free(g.next);
    return out;
}
