/* Per-rank hop sums by coordinate, so that a move's hop change costs a few
 * look-ups instead of a walk over the moved ranks' flows (for bound.c).
 *
 * hs[r][d][x] = sum over the flows of rank r of the hops along dimension d
 * between coordinate x and the peer's coordinate; hb[r][d][x] the same
 * weighted by bytes. Hops along d depend on the two coordinates only and
 * are symmetric, so a rank moving from A to B changes the hop sum of its
 * flows by sum_d hs[r][d][B_d] - hs[r][d][A_d], exactly, as long as its peers
 * stay; flows between two moved ranks are corrected one by one.
 *
 * Kept only where it is cheap: every ring fits a block (leg tables), a
 * rank's update (degree x sum of ring lengths) stays small, the tables fit
 * in memory. A commit moves the peers' tables along.
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "anneal.h"

#define HOPSUM_MAX_UPDATE 65536        /* entries one moved rank may change */
#define HOPSUM_MAX_ENTRIES (1 << 22)   /* per table */

static inline int hops_1d(const dim_t *D, int a, int b)
{
    return D->dist[a * D->L + b];
}

static int64_t node_hops(const msa_t *h, int32_t a, int32_t b)
{
    int64_t n = 0;
    for (int d = 0; d < h->ndim; d++)
        n += hops_1d(&h->dim[d], h->nc[(int64_t)a * h->ndim + d].c, h->nc[(int64_t)b * h->ndim + d].c);
    return n;
}

/* A one-word filter of a rank's peers: most pairs of moved ranks do not talk, and a bit test is
 * cheaper than the search of the edge list. */
static inline uint64_t peer_bit(int32_t q)
{
    return 1ULL << ((uint32_t)q * 0x9e3779b9u >> 26);
}

static int64_t max_degree(const msa_t *h)
{
    int64_t m = 0;
    for (int64_t r = 0; r < h->nranks; r++)
        m = h->adj_off[r + 1] - h->adj_off[r] > m ? h->adj_off[r + 1] - h->adj_off[r] : m;
    return m;
}

/* Allocate the tables if they are worth keeping (leaves hs NULL otherwise). */
void hopsum_init(msa_t *h)
{
    int64_t sum = 0;
    for (int d = 0; d < h->ndim; d++) {
        if (!h->dim[d].dist)
            return;
        h->hoff[d] = sum;
        sum += h->dim[d].L;
    }
    if (h->nranks < 1 || max_degree(h) * sum > HOPSUM_MAX_UPDATE || h->nranks * sum > HOPSUM_MAX_ENTRIES)
        return;
    h->sum_l = sum;
    h->hs = calloc((size_t)(h->nranks * sum), sizeof *h->hs);
    h->rver = calloc((size_t)h->nranks, sizeof *h->rver);
    h->cover = calloc((size_t)h->nranks, sizeof *h->cover);
    h->peer_bits = calloc((size_t)h->nranks, sizeof *h->peer_bits);
    for (int64_t r = 0; r < h->nranks; r++)
        for (int64_t e = h->adj_off[r]; e < h->adj_off[r + 1]; e++)
            h->peer_bits[r] |= peer_bit(h->adj[e].peer);
}

void hopsum_free(msa_t *h)
{
    free(h->hs);
    free(h->hb);
    free(h->rver);
    free(h->cover);
    free(h->peer_bits);
}

/* Rank r's tables along d for a peer whose coordinate goes from a to b (a < 0: a new peer). Rows of
 * D->dist are contiguous in x, so this vectorises. */
static inline void move_peer(msa_t *h, int64_t r, int d, int a, int b, int64_t w)
{
    const dim_t *D = &h->dim[d];
    const int32_t *to = D->dist + b * D->L, *from = a < 0 ? D->zero : D->dist + a * D->L;
    int32_t *restrict hs = h->hs + r * h->sum_l + h->hoff[d];
    for (int x = 0; x < D->L; x++)
        hs[x] += to[x] - from[x];
    if (!h->hb)
        return;
    int64_t *restrict hb = h->hb + r * h->sum_l + h->hoff[d];
    for (int x = 0; x < D->L; x++)
        hb[x] += (to[x] - from[x]) * w;
}

void hopsum_fill(msa_t *h)
{
    if (!h->hs)
        return;
    memset(h->hs, 0, (size_t)(h->nranks * h->sum_l) * sizeof *h->hs);
    if (h->hb)
        memset(h->hb, 0, (size_t)(h->nranks * h->sum_l) * sizeof *h->hb);
    for (int64_t r = 0; r < h->nranks; r++) {
        h->rver[r]++;
        for (int64_t e = h->adj_off[r]; e < h->adj_off[r + 1]; e++) {
            const int32_t p = h->rk[h->adj[e].peer].node;
            for (int d = 0; d < h->ndim; d++)
                move_peer(h, r, d, -1, h->nc[(int64_t)p * h->ndim + d].c, h->adj[e].w);
        }
    }
}

/* The hop-byte tables too, from now on (only the hop-bytes objective needs them). */
void hopsum_bytes(msa_t *h)
{
    if (!h->hs || h->hb)
        return;
    h->hb = calloc((size_t)(h->nranks * h->sum_l), sizeof *h->hb);
    hopsum_fill(h);
}

/* Before a move is committed (node = old place, newnode = new one): move the peers' tables along. */
void hopsum_commit(msa_t *h, int k, const int32_t *ranks)
{
    if (!h->hs)
        return;
    for (int i = 0; i < k; i++) {
        const rank_t *q = &h->rk[ranks[i]];
        if (q->node == q->newnode)
            continue;
        h->rver[ranks[i]]++;
        for (int64_t e = h->adj_off[ranks[i]]; e < h->adj_off[ranks[i] + 1]; e++) {
            const int32_t r = h->adj[e].peer;
            h->rver[r]++;
            for (int d = 0; d < h->ndim; d++) {
                const int a = h->nc[(int64_t)q->node * h->ndim + d].c, b = h->nc[(int64_t)q->newnode * h->ndim + d].c;
                if (a != b)
                    move_peer(h, r, d, a, b, h->adj[e].w);
            }
        }
    }
}

/* The first edge of rank r to peer q or later (edges are sorted by peer). */
static int64_t find_peer(const msa_t *h, int32_t r, int32_t q)
{
    int64_t lo = h->adj_off[r], hi = h->adj_off[r + 1];
    while (lo < hi) {
        const int64_t mid = (lo + hi) / 2;
        if (h->adj[mid].peer < q)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Hop change of the marked move, hop-byte change into *dhb unless NULL; *old_hops: at least the hops
 * of the moved flows before. */
int64_t hopsum_change(const msa_t *h, int k, const int32_t *ranks, int64_t *dhb, int64_t *old_hops)
{
    int64_t dh = 0, db = 0, before = 0;
    for (int i = 0; i < k; i++) {
        const rank_t *q = &h->rk[ranks[i]];
        const int64_t base = ranks[i] * h->sum_l;
        for (int d = 0; d < h->ndim; d++) {
            const int64_t a = base + h->hoff[d] + h->nc[(int64_t)q->node * h->ndim + d].c;
            const int64_t b = base + h->hoff[d] + h->nc[(int64_t)q->newnode * h->ndim + d].c;
            dh += h->hs[b] - h->hs[a];
            if (dhb)
                db += h->hb[b] - h->hb[a];
            before += h->hs[a];
        }
    }
    /* A flow between two moved ranks was counted from each end with the other end in its old place;
     * each such flow is in the edge list of both, so the pair is looked up from one side. */
    for (int i = 0; i < k; i++) {
        const rank_t *r = &h->rk[ranks[i]];
        for (int j = i + 1; j < k && r->node != r->newnode; j++) {
            const rank_t *q = &h->rk[ranks[j]];
            if (q->node == q->newnode || !(h->peer_bits[ranks[i]] & peer_bit(ranks[j])))
                continue;
            for (int64_t e = find_peer(h, ranks[i], ranks[j]); e < h->adj_off[ranks[i] + 1] &&
                 h->adj[e].peer == ranks[j]; e++) {
                const int64_t c = node_hops(h, r->newnode, q->newnode) - node_hops(h, r->newnode, q->node) -
                                  node_hops(h, r->node, q->newnode) + node_hops(h, r->node, q->node);
                dh += c;
                db += c * h->adj[e].w;
            }
        }
    }
    if (dhb)
        *dhb = db;
    *old_hops = before;
    return dh;
}
