/* Incremental evaluation and simulated annealing of rank maps (001 §4.4, §5.3).
 *
 * A move permutes the places of k ranks. Only the flows of those ranks change
 * route (001 §4.4 evaluates whole maps; SPEC §3 asks for incremental moves):
 * each is moved off the links of its old route that its new route does not
 * share, piece by piece (reroute). maxlink is kept with the count of links at
 * the maximum: the new maximum is the largest changed load unless every link
 * at the old maximum went down, the only case that rescans all links.
 *
 * Routing is topology.py's: dimension-order, shortest way round a torus
 * ring, ties toward +. Link id = (node * ndim + dim) * 2 + (0: +, 1: -).
 * Loads and bytes are int64, so incremental and full evaluation agree exactly.
 * Ranks beyond the real ones are empty slots (no flows) when the network has
 * more slots than the pattern has ranks.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MSA_API __attribute__((visibility("default")))
#define MSA_MAXDIM 8

enum { OBJ_EVAL = 0, OBJ_HOPBYTES = 1, OBJ_MAXLINK = 2 };

/* One flow as seen from one of its ends; a rank's edges are contiguous. */
typedef struct { int32_t peer, out; int64_t w; } edge_t;
/* Per rank: place, and the place a move under evaluation gives it. */
typedef struct { int32_t node, slot; uint32_t stamp; int32_t newnode; } rank_t;
/* A load change of the move under evaluation, kept to undo it. */
typedef struct { int64_t link, w; } jent_t;

typedef struct {
    int ndim, torus, rpn;
    int dims[MSA_MAXDIM];
    int64_t strides[MSA_MAXDIM];
    int64_t nnodes, nlinks, nranks, nflows;
    int32_t *coord;                    /* node * ndim + d */
    int32_t *fsrc, *fdst;
    int64_t *fbytes;
    int64_t *adj_off;                  /* edges of each rank (CSR) */
    edge_t *adj;
    rank_t *rk;
    int32_t *slot_rank;
    int64_t *load;
    int64_t maxlink, nmax, hop_sum, hop_bytes;
    /* scratch of the move being evaluated */
    uint32_t stamp;
    jent_t *journal;
    int64_t njournal, jcap, at_max, d_hops, d_hopbytes, new_max;
    /* best map seen by msa_anneal */
    int32_t *best;
    double best_obj;
} msa_t;

typedef struct { int64_t hop_sum, hop_bytes, maxlink; } msa_metrics;

/* Moves are applied to the loads in place and journalled, so that the loads
 * stay the only per-link array (it fits in L2 for 16x16x16) and a rejected
 * move is undone by replaying the journal backwards. at_max follows the
 * number of links at the old maximum through every change. */
static inline void add_link(msa_t *h, int64_t l, int64_t w)
{
    const int64_t old = h->load[l], nl = old + w;
    h->load[l] = nl;
    h->at_max += (nl == h->maxlink) - (old == h->maxlink);
    if (h->njournal == h->jcap) {
        h->jcap *= 2;
        h->journal = realloc(h->journal, (size_t)h->jcap * sizeof *h->journal);
    }
    h->journal[h->njournal++] = (jent_t){l, w};
}

static void undo(msa_t *h)
{
    for (int64_t i = h->njournal - 1; i >= 0; i--)
        h->load[h->journal[i].link] -= h->journal[i].w;
    h->njournal = 0;
}

/* Walk the route a -> b adding w to each link's load; returns the hop count.
 * Full evaluation only: moves go through reroute(). */
static int64_t route(msa_t *h, int32_t a, int32_t b, int64_t w)
{
    const int nd = h->ndim;
    int64_t hops = 0, node = a;
    for (int d = 0; d < nd; d++) {
        const int ca = h->coord[(int64_t)a * nd + d], cb = h->coord[(int64_t)b * nd + d], L = h->dims[d];
        int f = cb - ca, n, dir;
        if (f == 0)
            continue;
        if (h->torus) {
            if (f < 0)
                f += L;
            if (f <= L - f) { n = f; dir = 0; } else { n = L - f; dir = 1; }
        } else if (f > 0) { n = f; dir = 0; } else { n = -f; dir = 1; }
        hops += n;
        const int64_t stride = h->strides[d], base = node - (int64_t)ca * stride;
        int c = ca;
        for (int s = 0; s < n; s++) {
            const int64_t l = ((base + (int64_t)c * stride) * nd + d) * 2 + dir;
            h->load[l] += w;
            if (dir == 0) { if (++c == L) c = 0; } else { if (--c < 0) c = L - 1; }
        }
        node = base + (int64_t)cb * stride;
    }
    return hops;
}

/* One straight piece of a route: along dim d on the line through `base`
 * (the node with coordinate d zeroed), from coordinate c0, n links, dir. */
typedef struct { int64_t base; int c0, n, dir; } seg_t;

static inline int64_t segments(const msa_t *h, int32_t a, int32_t b, seg_t *seg)
{
    const int nd = h->ndim;
    int64_t hops = 0, node = a;
    for (int d = 0; d < nd; d++) {
        const int ca = h->coord[(int64_t)a * nd + d], cb = h->coord[(int64_t)b * nd + d], L = h->dims[d];
        int f = cb - ca, n = 0, dir = 0;
        if (h->torus) {
            if (f < 0)
                f += L;
            if (f <= L - f) { n = f; dir = 0; } else { n = L - f; dir = 1; }
        } else if (f >= 0) { n = f; dir = 0; } else { n = -f; dir = 1; }
        const int64_t base = node - (int64_t)ca * h->strides[d];
        seg[d] = (seg_t){base, ca, n, dir};
        hops += n;
        node = base + (int64_t)cb * h->strides[d];
    }
    return hops;
}

/* Add w to the links of seg at oriented positions [from, from+count) that
 * lie outside the arc [skip, skip+nskip) (positions counted in the direction
 * of travel, so both arcs are increasing runs modulo L). */
static inline void walk_arc(msa_t *h, int d, const seg_t *sg, int nskip, int skip, int64_t w)
{
    const int L = h->dims[d], nd = h->ndim;
    const int64_t stride = h->strides[d];
    int p = sg->dir == 0 || sg->c0 == 0 ? sg->c0 : L - sg->c0;
    int rel = p - skip;
    if (rel < 0)
        rel += L;
    for (int j = 0; j < sg->n; j++) {
        if (rel >= nskip) {
            const int c = sg->dir == 0 || p == 0 ? p : L - p;
            add_link(h, ((sg->base + (int64_t)c * stride) * nd + d) * 2 + sg->dir, w);
        }
        if (++p == L) p = 0;
        if (++rel == L) rel = 0;
    }
}

/* Move flow weight w from route os->ot to route ns->nt, touching only the
 * links the two routes do not share piece by piece; returns the hop change. */
static inline int64_t reroute(msa_t *h, int32_t os, int32_t ot, int32_t ns, int32_t nt, int64_t w)
{
    seg_t so[MSA_MAXDIM], sn[MSA_MAXDIM];
    const int64_t ho = segments(h, os, ot, so), hn = segments(h, ns, nt, sn);
    for (int d = 0; d < h->ndim; d++) {
        const int L = h->dims[d];
        if (so[d].n && sn[d].n && so[d].base == sn[d].base && so[d].dir == sn[d].dir) {
            const int uo = so[d].dir == 0 || so[d].c0 == 0 ? so[d].c0 : L - so[d].c0;
            const int un = sn[d].dir == 0 || sn[d].c0 == 0 ? sn[d].c0 : L - sn[d].c0;
            walk_arc(h, d, &so[d], sn[d].n, un, -w);
            walk_arc(h, d, &sn[d], so[d].n, uo, w);
        } else {
            walk_arc(h, d, &so[d], 0, 0, -w);
            walk_arc(h, d, &sn[d], 0, 0, w);
        }
    }
    return hn - ho;
}

static void next_stamp(msa_t *h)
{
    if (++h->stamp == 0) {   /* wrapped: clear so no stale entry matches */
        for (int64_t r = 0; r < h->nranks; r++)
            h->rk[r].stamp = 0;
        h->stamp = 1;
    }
    h->njournal = 0;
    h->at_max = h->nmax;
}

static void count_max(msa_t *h)
{
    int64_t m = 0, c = 0;
    for (int64_t l = 0; l < h->nlinks; l++) {
        if (h->load[l] > m) { m = h->load[l]; c = 1; } else if (h->load[l] == m) c++;
    }
    h->maxlink = m;
    h->nmax = c;
}

static double objective(int kind, int64_t hop_sum, int64_t hop_bytes, int64_t maxlink)
{
    if (kind == OBJ_HOPBYTES)
        return (double)hop_bytes;
    if (kind == OBJ_MAXLINK)
        return (double)maxlink;
    return (double)hop_sum * (double)maxlink;   /* 001 §5.3 eval */
}

/* Evaluate moving ranks[i] into the place of ranks[perm[i]], leaving the result in the scratch. */
static void eval_perm(msa_t *h, int k, const int32_t *ranks, const int32_t *perm)
{
    next_stamp(h);
    for (int i = 0; i < k; i++) {
        h->rk[ranks[i]].newnode = h->rk[ranks[perm[i]]].node;
        h->rk[ranks[i]].stamp = h->stamp;
    }
    int64_t dh = 0, dhb = 0;
    for (int i = 0; i < k; i++) {
        const int32_t r = ranks[i];
        const int32_t rn = h->rk[r].node, rnew = h->rk[r].newnode;
        for (int64_t e = h->adj_off[r]; e < h->adj_off[r + 1]; e++) {
            const edge_t ed = h->adj[e];
            const rank_t *q = &h->rk[ed.peer];
            int32_t qn = q->node, qnew = qn;
            if (q->stamp == h->stamp) {
                if (ed.peer < r)
                    continue;                  /* both ends moved: walked from the lower rank */
                qnew = q->newnode;
            }
            const int32_t os = ed.out ? rn : qn, ot = ed.out ? qn : rn;
            const int32_t ns = ed.out ? rnew : qnew, nt = ed.out ? qnew : rnew;
            if (os == ns && ot == nt)
                continue;
            const int64_t dhf = reroute(h, os, ot, ns, nt, ed.w);
            dh += dhf;
            dhb += dhf * ed.w;
        }
    }
    const int64_t M = h->maxlink;
    int64_t tmax = 0;
    for (int64_t i = 0; i < h->njournal; i++) {
        const int64_t v = h->load[h->journal[i].link];
        if (v > tmax)
            tmax = v;
    }
    if (tmax >= M || h->at_max > 0) {
        h->new_max = tmax > M ? tmax : M;
    } else {                                   /* every link at the maximum went down */
        int64_t m = 0;
        for (int64_t l = 0; l < h->nlinks; l++)
            if (h->load[l] > m)
                m = h->load[l];
        h->new_max = m;
    }
    h->d_hops = dh;
    h->d_hopbytes = dhb;
}

/* Keep the move just evaluated by eval_perm (its changes are in the loads). */
static void commit(msa_t *h, int k, const int32_t *ranks, const int32_t *perm, int32_t *slots)
{
    const int64_t M = h->maxlink, N = h->new_max;
    if (N > M) {                               /* only changed links can sit at the new maximum */
        int64_t c = 0;
        for (int64_t i = 0; i < h->njournal; i++) {
            int64_t *v = &h->load[h->journal[i].link];
            if (*v == N) {
                c++;
                *v = -1;                       /* count each link once */
            }
        }
        for (int64_t i = 0; i < h->njournal; i++)
            if (h->load[h->journal[i].link] == -1)
                h->load[h->journal[i].link] = N;
        h->nmax = c;
        h->maxlink = N;
    } else if (N == M) {
        h->nmax = h->at_max;
    } else {
        count_max(h);
    }
    h->njournal = 0;
    for (int i = 0; i < k; i++)
        slots[i] = h->rk[ranks[perm[i]]].slot;
    for (int i = 0; i < k; i++) {
        rank_t *q = &h->rk[ranks[i]];
        q->node = q->newnode;
        q->slot = slots[i];
        h->slot_rank[slots[i]] = ranks[i];
    }
    h->hop_sum += h->d_hops;
    h->hop_bytes += h->d_hopbytes;
}

static void save_best(msa_t *h)
{
    for (int64_t r = 0; r < h->nranks; r++)
        h->best[r] = h->rk[r].node;
}

MSA_API void msa_recompute(msa_t *h)
{
    memset(h->load, 0, (size_t)h->nlinks * sizeof *h->load);
    int64_t hs = 0, hb = 0;
    for (int64_t f = 0; f < h->nflows; f++) {
        const int64_t n = route(h, h->rk[h->fsrc[f]].node, h->rk[h->fdst[f]].node, h->fbytes[f]);
        hs += n;
        hb += n * h->fbytes[f];
    }
    h->hop_sum = hs;
    h->hop_bytes = hb;
    count_max(h);
}

MSA_API void msa_set_map(msa_t *h, const int32_t *node_of)
{
    int64_t *fill = calloc((size_t)h->nnodes, sizeof *fill);
    for (int64_t r = 0; r < h->nranks; r++) {
        const int32_t n = node_of[r];
        h->rk[r].node = n;
        h->rk[r].slot = (int32_t)(n * h->rpn + fill[n]++);
        h->slot_rank[h->rk[r].slot] = (int32_t)r;
    }
    free(fill);
    msa_recompute(h);
}

MSA_API msa_t *msa_create(int ndim, const int32_t *dims, int torus, int rpn, int64_t nranks, int64_t nflows,
                          const int32_t *src, const int32_t *dst, const int64_t *bytes, const int32_t *node_of)
{
    if (ndim < 1 || ndim > MSA_MAXDIM)
        return NULL;
    msa_t *h = calloc(1, sizeof *h);
    h->ndim = ndim;
    h->torus = torus;
    h->rpn = rpn;
    h->nnodes = 1;
    for (int d = 0; d < ndim; d++) {
        h->dims[d] = dims[d];
        h->strides[d] = h->nnodes;
        h->nnodes *= dims[d];
    }
    h->nlinks = h->nnodes * ndim * 2;
    h->nranks = nranks;
    h->nflows = nflows;
    h->coord = malloc((size_t)(h->nnodes * ndim) * sizeof *h->coord);
    for (int64_t n = 0; n < h->nnodes; n++)
        for (int d = 0; d < ndim; d++)
            h->coord[n * ndim + d] = (int32_t)((n / h->strides[d]) % dims[d]);
    h->fsrc = malloc((size_t)nflows * sizeof *h->fsrc);
    h->fdst = malloc((size_t)nflows * sizeof *h->fdst);
    h->fbytes = malloc((size_t)nflows * sizeof *h->fbytes);
    memcpy(h->fsrc, src, (size_t)nflows * sizeof *src);
    memcpy(h->fdst, dst, (size_t)nflows * sizeof *dst);
    memcpy(h->fbytes, bytes, (size_t)nflows * sizeof *bytes);
    h->adj_off = calloc((size_t)nranks + 1, sizeof *h->adj_off);
    h->adj = malloc((size_t)(2 * nflows + 1) * sizeof *h->adj);
    for (int64_t f = 0; f < nflows; f++) {
        h->adj_off[src[f] + 1]++;
        h->adj_off[dst[f] + 1]++;
    }
    for (int64_t r = 0; r < nranks; r++)
        h->adj_off[r + 1] += h->adj_off[r];
    int64_t *fill = calloc((size_t)nranks, sizeof *fill);
    for (int64_t f = 0; f < nflows; f++) {
        h->adj[h->adj_off[src[f]] + fill[src[f]]++] = (edge_t){dst[f], 1, bytes[f]};
        h->adj[h->adj_off[dst[f]] + fill[dst[f]]++] = (edge_t){src[f], 0, bytes[f]};
    }
    free(fill);
    h->rk = calloc((size_t)nranks, sizeof *h->rk);
    h->slot_rank = malloc((size_t)(h->nnodes * rpn) * sizeof *h->slot_rank);
    h->best = malloc((size_t)nranks * sizeof *h->best);
    h->load = calloc((size_t)h->nlinks, sizeof *h->load);
    h->jcap = 1024;
    h->journal = malloc((size_t)h->jcap * sizeof *h->journal);
    msa_set_map(h, node_of);
    save_best(h);
    h->best_obj = INFINITY;
    return h;
}

MSA_API void msa_free(msa_t *h)
{
    if (!h)
        return;
    void *p[] = {h->coord, h->fsrc, h->fdst, h->fbytes, h->adj_off, h->adj, h->rk, h->slot_rank, h->best,
                 h->load, h->journal};
    for (size_t i = 0; i < sizeof p / sizeof *p; i++)
        free(p[i]);
    free(h);
}

MSA_API void msa_metrics_now(const msa_t *h, msa_metrics *out)
{
    out->hop_sum = h->hop_sum;
    out->hop_bytes = h->hop_bytes;
    out->maxlink = h->maxlink;
}

MSA_API void msa_get_map(const msa_t *h, int32_t *out, int best)
{
    for (int64_t r = 0; r < h->nranks; r++)
        out[r] = best ? h->best[r] : h->rk[r].node;
}

MSA_API void msa_get_loads(const msa_t *h, int64_t *out)
{
    memcpy(out, h->load, (size_t)h->nlinks * sizeof *out);
}

MSA_API void msa_eval(msa_t *h, int k, const int32_t *ranks, const int32_t *perm, msa_metrics *out)
{
    eval_perm(h, k, ranks, perm);
    undo(h);
    out->hop_sum = h->hop_sum + h->d_hops;
    out->hop_bytes = h->hop_bytes + h->d_hopbytes;
    out->maxlink = h->new_max;
}

MSA_API void msa_apply(msa_t *h, int k, const int32_t *ranks, const int32_t *perm)
{
    int32_t slots[64];
    if (k > 64)
        return;
    eval_perm(h, k, ranks, perm);
    commit(h, k, ranks, perm, slots);
}

/* ---- random moves ---- */

static inline uint64_t rng_next(uint64_t *s)          /* splitmix64 */
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static inline uint32_t rng_below(uint64_t *s, uint32_t n)
{
    return (uint32_t)(((rng_next(s) >> 32) * (uint64_t)n) >> 32);
}

static inline double rng_unit(uint64_t *s)
{
    return (double)(rng_next(s) >> 11) * 0x1.0p-53;
}

/* 001 §5.3 initOp: k distinct ranks from a window of size win[] at a uniform
 * position (wrapping on a torus, inside the mesh otherwise). Returns k used. */
static int pick_window(msa_t *h, const int32_t *win, int k, uint64_t *rng, int32_t *ranks)
{
    int origin[MSA_MAXDIM], w[MSA_MAXDIM];
    int64_t wslots = h->rpn;
    for (int d = 0; d < h->ndim; d++) {
        w[d] = win[d] < h->dims[d] ? win[d] : h->dims[d];
        origin[d] = (int)rng_below(rng, (uint32_t)(h->torus ? h->dims[d] : h->dims[d] - w[d] + 1));
        wslots *= w[d];
    }
    if (k > wslots)
        k = (int)wslots;
    for (int i = 0; i < k; i++) {
        int32_t r;
        int dup;
        do {
            int64_t u = rng_below(rng, (uint32_t)wslots), node = 0;
            const int64_t j = u % h->rpn;
            u /= h->rpn;
            for (int d = 0; d < h->ndim; d++) {
                node += ((origin[d] + u % w[d]) % h->dims[d]) * h->strides[d];
                u /= w[d];
            }
            r = h->slot_rank[node * h->rpn + j];
            dup = 0;
            for (int q = 0; q < i; q++)
                dup |= ranks[q] == r;
        } while (dup);
        ranks[i] = r;
    }
    return k;
}

static void random_perm(int k, uint64_t *rng, int32_t *perm)
{
    if (k == 2) { perm[0] = 1; perm[1] = 0; return; }
    int identity;
    do {
        for (int i = 0; i < k; i++)
            perm[i] = i;
        for (int i = k - 1; i > 0; i--) {
            const int j = (int)rng_below(rng, (uint32_t)i + 1);
            const int32_t t = perm[i]; perm[i] = perm[j]; perm[j] = t;
        }
        identity = 1;
        for (int i = 0; i < k; i++)
            identity &= perm[i] == i;
    } while (identity);
}

static double current_obj(const msa_t *h, int kind)
{
    return objective(kind, h->hop_sum, h->hop_bytes, h->maxlink);
}

static double eval_obj(const msa_t *h, int kind)
{
    return objective(kind, h->hop_sum + h->d_hops, h->hop_bytes + h->d_hopbytes, h->new_max);
}

/* A worker's share of one round (001 §5.3): `tries` random permutations of
 * the listed ranks from the current map; the best one goes to perm_out.
 * Returns its objective (the current one if no try was better). */
MSA_API double msa_try_list(msa_t *h, int k, const int32_t *ranks, int tries, int kind, uint64_t *rng,
                            int32_t *perm_out)
{
    int32_t perm[64];
    double best = INFINITY;
    if (k < 2 || k > 64)
        return current_obj(h, kind);
    for (int t = 0; t < tries; t++) {
        random_perm(k, rng, perm);
        eval_perm(h, k, ranks, perm);
        undo(h);
        const double v = eval_obj(h, kind);
        if (v < best) {
            best = v;
            memcpy(perm_out, perm, (size_t)k * sizeof *perm);
        }
    }
    return best;
}

/* The sequential OPTIM loop: `rounds` rounds of pick_window + msa_try_list +
 * Metropolis acceptance at temperature T. stats: evaluated, accepted, new bests. */
MSA_API void msa_anneal(msa_t *h, int64_t rounds, const int32_t *win, int k, int tries, double T, int kind,
                        uint64_t *rng, int64_t *stats)
{
    int32_t ranks[64], perm[64], bestperm[64], slots[64];
    if (k > 64)
        k = 64;
    if (h->best_obj == INFINITY)
        h->best_obj = current_obj(h, kind);
    for (int64_t r = 0; r < rounds; r++) {
        const int kk = pick_window(h, win, k, rng, ranks);
        if (kk < 2)
            continue;
        double best = INFINITY;
        for (int t = 0; t < tries; t++) {
            random_perm(kk, rng, perm);
            eval_perm(h, kk, ranks, perm);
            if (tries > 1)
                undo(h);
            const double v = eval_obj(h, kind);
            if (v < best) {
                best = v;
                memcpy(bestperm, perm, (size_t)kk * sizeof *perm);
            }
        }
        stats[0] += tries;
        const double delta = best - current_obj(h, kind);
        if (delta <= 0 || (T > 0 && rng_unit(rng) < exp(-delta / T))) {
            if (tries > 1)
                eval_perm(h, kk, ranks, bestperm);
            commit(h, kk, ranks, bestperm, slots);
            stats[1]++;
            if (best < h->best_obj) {
                h->best_obj = best;
                save_best(h);
                stats[2]++;
            }
        } else if (tries == 1) {
            undo(h);
        }
    }
}

MSA_API double msa_best_objective(const msa_t *h)
{
    return h->best_obj;
}

/* Record the current map as the best if it beats the best so far (moves made outside msa_anneal). */
MSA_API void msa_offer_best(msa_t *h, int kind)
{
    const double v = current_obj(h, kind);
    if (v < h->best_obj) {
        h->best_obj = v;
        save_best(h);
    }
}

MSA_API void msa_reset_best(msa_t *h)
{
    h->best_obj = INFINITY;
    save_best(h);
}

/* initOp alone (001 §5.3), for a master that hands the list to workers. */
MSA_API int msa_pick(msa_t *h, const int32_t *win, int k, uint64_t *rng, int32_t *ranks)
{
    return pick_window(h, win, k > 64 ? 64 : k, rng, ranks);
}

/* Objective and maxlink changes of n random moves from the current map, not applied (to set T0). */
MSA_API void msa_sample(msa_t *h, int64_t n, const int32_t *win, int k, int kind, uint64_t *rng, double *out,
                        double *dmax)
{
    int32_t ranks[64], perm[64];
    if (k > 64)
        k = 64;
    const double now = current_obj(h, kind);
    for (int64_t i = 0; i < n; i++) {
        const int kk = pick_window(h, win, k, rng, ranks);
        if (kk < 2) { out[i] = dmax[i] = 0; continue; }
        random_perm(kk, rng, perm);
        eval_perm(h, kk, ranks, perm);
        undo(h);
        out[i] = eval_obj(h, kind) - now;
        dmax[i] = (double)(h->new_max - h->maxlink);
    }
}
