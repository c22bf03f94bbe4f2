/* Random moves and the OPTIM loop (001 §4.4, §5.3): initOp picks the ranks,
 * a round tries permutations of their places and keeps the best by the
 * Metropolis rule. Workers log the moves they accept; the master replays
 * the logs of all workers on its own map (msa_merge). */
#include <math.h>
#include <string.h>

#include "anneal.h"

/* Accepted moves of a worker, in order, for the master to replay. */
typedef struct {
    int64_t cap, n;             /* entries available, written */
    int32_t *k;                 /* ranks moved */
    int32_t *ranks, *perm;      /* k entries each, at a stride of the k given to msa_anneal */
    double *thr;                /* accepted because delta <= thr (see msa_merge) */
} msa_log;

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
        const int L = h->dim[d].L;
        w[d] = win[d] < L ? win[d] : L;
        origin[d] = (int)rng_below(rng, (uint32_t)(h->torus ? L : L - w[d] + 1));
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
            int64_t stride = 1;
            for (int d = 0; d < h->ndim; d++) {
                node += ((origin[d] + u % w[d]) % h->dim[d].L) * stride;
                stride *= h->dim[d].L;
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

/* The best of `tries` random permutations of ranks into perm_out; returns its objective. */
static double best_of(msa_t *h, int k, const int32_t *ranks, int tries, int kind, uint64_t *rng, int32_t *perm_out)
{
    int32_t perm[MSA_MAXK];
    double best = INFINITY;
    for (int t = 0; t < tries; t++) {
        random_perm(k, rng, perm);
        eval_perm(h, k, ranks, perm);
        const double v = eval_obj(h, kind);
        if (v < best) {
            best = v;
            memcpy(perm_out, perm, (size_t)k * sizeof *perm);
        }
    }
    if (tries > 1)
        eval_perm(h, k, ranks, perm_out);    /* leave the kept one in the scratch, ready to commit */
    return best;
}

static void log_move(msa_log *wl, int kstride, int k, const int32_t *ranks, const int32_t *perm, double thr)
{
    const int64_t i = wl->n++;
    wl->k[i] = k;
    memcpy(wl->ranks + i * kstride, ranks, (size_t)k * sizeof *ranks);
    memcpy(wl->perm + i * kstride, perm, (size_t)k * sizeof *perm);
    wl->thr[i] = thr;
}

/* Metropolis at temperature T: accept when delta <= -T ln u, u uniform in
 * [0, 1), drawn only for an uphill move. */
static double threshold(double delta, double T, uint64_t *rng)
{
    if (delta <= 0)
        return 0;
    return T > 0 ? -T * log(rng_unit(rng)) : -INFINITY;
}

/* One round on `ranks`: the kept permutation in perm, its objective in *obj,
 * the threshold it was judged by in *thr; returns whether it is accepted
 * (then ready to commit). With one try, bound.c's lower bound rejects most
 * moves first; a bound above the current objective means the move is uphill,
 * so u is drawn exactly when the exact change would draw it, and the
 * decision and the random stream are those of the exact evaluation. */
static int round_decide(msa_t *h, int k, const int32_t *ranks, int tries, double T, int kind, uint64_t *rng,
                        int32_t *perm, double *obj, double *thr, int64_t *early)
{
    const double now = current_obj(h, kind);
    if (tries == 1 && h->use_bound && kind != OBJ_MAXLINK) {
        random_perm(k, rng, perm);
        const double low = bound_move(h, k, ranks, perm, kind) - now;
        *thr = low > 0 ? threshold(low, T, rng) : 0;
        if (low > *thr) {
            ++*early;
            return 0;
        }
        eval_perm(h, k, ranks, perm);
        *obj = eval_obj(h, kind);
        if (low <= 0)
            *thr = threshold(*obj - now, T, rng);
        return *obj - now <= *thr;
    }
    *obj = best_of(h, k, ranks, tries, kind, rng, perm);
    *thr = threshold(*obj - now, T, rng);
    return *obj - now <= *thr;
}

/* The sequential OPTIM loop: `rounds` rounds of pick_window + round_decide.
 * stats: evaluated, accepted, new bests, rejected on the bound. With a log (a worker), every
 * accepted move is also written there; then at most its free entries of
 * rounds run. */
MSA_API void msa_anneal(msa_t *h, int64_t rounds, const int32_t *win, int k, int tries, double T, int kind,
                        uint64_t *rng, int64_t *stats, msa_log *wlog)
{
    int32_t ranks[MSA_MAXK], perm[MSA_MAXK];
    k = k > MSA_MAXK ? MSA_MAXK : k;
    if (wlog && rounds > wlog->cap - wlog->n)
        rounds = wlog->cap - wlog->n;
    if (h->best_obj == INFINITY)
        h->best_obj = current_obj(h, kind);
    for (int64_t r = 0; r < rounds; r++) {
        const int kk = pick_window(h, win, k, rng, ranks);
        if (kk < 2 || tries < 1)
            continue;
        double obj, thr;
        stats[0] += tries;
        if (!round_decide(h, kk, ranks, tries, T, kind, rng, perm, &obj, &thr, &stats[3]))
            continue;
        commit(h, kk, ranks, perm);
        stats[1]++;
        if (obj < h->best_obj) {
            offer_best(h, obj);
            stats[2]++;
        }
        if (wlog)
            log_move(wlog, k, kk, ranks, perm, thr);
    }
}

/* bound.c's lower bound of the objective after a move (tests check it against the exact change). */
MSA_API double msa_bound(msa_t *h, int k, const int32_t *ranks, const int32_t *perm, int kind)
{
    return bound_move(h, k, ranks, perm, kind);
}

/* Whether the rounds use bound.c's early rejection (tests compare both ways). */
MSA_API void msa_use_bound(msa_t *h, int on)
{
    h->use_bound = on;
}

/* The master's side (001 §5.3 update): replay the n logged moves of the
 * workers on this map, in the order given. A move is kept if its change
 * here is within the threshold it was accepted with: moves of different
 * workers that do not interact get exactly the worker's decision, and one
 * that became worse through another worker's move is judged by the same
 * random draw. stats: accepted, new bests; kept[i]: whether move i was kept. */
MSA_API void msa_merge(msa_t *h, int64_t n, int kstride, const int32_t *k, const int32_t *ranks,
                       const int32_t *perm, const double *thr, int kind, int64_t *stats, uint8_t *kept)
{
    if (h->best_obj == INFINITY)
        h->best_obj = current_obj(h, kind);
    for (int64_t i = 0; i < n; i++) {
        kept[i] = 0;
        if (k[i] < 2 || k[i] > MSA_MAXK)
            continue;
        const int32_t *r = ranks + i * kstride, *p = perm + i * kstride;
        const double now = current_obj(h, kind);
        if (h->use_bound && kind != OBJ_MAXLINK && bound_move(h, k[i], r, p, kind) - now > thr[i])
            continue;
        eval_perm(h, k[i], r, p);
        const double v = eval_obj(h, kind);
        if (v - now > thr[i])
            continue;
        commit(h, k[i], r, p);
        kept[i] = 1;
        stats[0]++;
        if (v < h->best_obj) {
            offer_best(h, v);
            stats[1]++;
        }
    }
}

/* Objective and maxlink changes of n random moves from the current map, not applied (to set T0). */
MSA_API void msa_sample(msa_t *h, int64_t n, const int32_t *win, int k, int kind, uint64_t *rng, double *out,
                        double *dmax)
{
    int32_t ranks[MSA_MAXK], perm[MSA_MAXK];
    k = k > MSA_MAXK ? MSA_MAXK : k;
    const double now = current_obj(h, kind);
    for (int64_t i = 0; i < n; i++) {
        const int kk = pick_window(h, win, k, rng, ranks);
        if (kk < 2) { out[i] = dmax[i] = 0; continue; }
        random_perm(kk, rng, perm);
        eval_perm(h, kk, ranks, perm);
        out[i] = eval_obj(h, kind) - now;
        dmax[i] = (double)(h->new_max - h->maxlink);
    }
}
