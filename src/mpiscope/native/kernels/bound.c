/* A lower bound of a move's objective from hop counts alone, so that the
 * annealing loop rejects most moves without their link loads.
 *
 * The hop sum and hop-bytes of a move are exact and cheap (a few look-ups
 * per moved rank and dimension, hopsum.c); maxlink is what costs (delta.c),
 * measured 5 us against 0.3 us for 4096-rank Bruck. But maxlink
 * cannot fall while one link at the maximum has no flow leaving it, and it
 * never falls below 0, so: new maxlink >= M if some link at M lies on no
 * old route of a moved flow, else >= 0. With eval = hops x maxlink, a move
 * that adds hops and keeps M is then worse by at least its hops x M, which
 * rejects it at any temperature below about M. The decision made on the
 * bound is the one the exact change would give (search.c), not a guess.
 */
#include <stddef.h>

#include "anneal.h"

static int dim_of_block(const msa_t *h, int64_t b)
{
    int d = 0;
    while (d + 1 < h->ndim && b >= h->dim[d + 1].blk0[0])
        d++;
    return d;
}

/* Follow the links at maxlink while they are few and every ring fits a block. */
void track_max_links(msa_t *h)
{
    h->ntrack = -1;
    h->track_ver++;
    if (h->nmax > MSA_TRACK || h->leg_pieces > 1)
        return;
    int n = 0;
    h->track_dims = 0;
    for (int64_t b = 0; b < h->nblocks && n < MSA_TRACK; b++) {
        if (h->blkmax[b] != h->maxlink)
            continue;
        const int64_t *load = h->load + h->bstart[b];
        for (int i = 0; i < h->blen[b] && n < MSA_TRACK; i++)
            if (load[i] == h->maxlink) {
                h->track_blk[n] = (int32_t)b;
                h->track_bit[n++] = 1ULL << i;
                h->track_dims |= 1u << dim_of_block(h, b);
            }
    }
    h->ntrack = n;
}

/* The tracked links (bits) that route a -> b crosses. */
static inline uint32_t crossed_by(const msa_t *h, int32_t a, int32_t b)
{
    uint32_t bits = 0;
    for (int d = 0; d < h->ndim; d++) {
        if (!(h->track_dims >> d & 1))
            continue;
        const dim_t *D = &h->dim[d];
        const nodec_t *pa = &h->nc[(int64_t)a * h->ndim + d], *pb = &h->nc[(int64_t)b * h->ndim + d];
        const leg_t *o = &D->leg[pa->c * D->L + pb->c];
        const int64_t blk = (int64_t)o->blk0 + pb->lo + pa->hi;
        for (int j = 0; j < h->ntrack; j++)
            bits |= (uint32_t)(blk == h->track_blk[j] && (o->mask & h->track_bit[j])) << j;
    }
    return bits;
}

/* The tracked links the routes of rank r's flows cross, kept until r, a peer or the tracked set moves. */
static uint32_t cover_of(msa_t *h, int32_t r)
{
    cover_t *c = &h->cover[r];
    if (c->rver == h->rver[r] && c->tver == h->track_ver)
        return c->bits;
    uint32_t bits = 0;
    const int32_t rn = h->rk[r].node;
    for (int64_t e = h->adj_off[r]; e < h->adj_off[r + 1]; e++) {
        const int32_t q = h->rk[h->adj[e].peer].node;
        bits |= h->adj[e].out ? crossed_by(h, rn, q) : crossed_by(h, q, rn);
    }
    *c = (cover_t){bits, h->rver[r], h->track_ver};
    return bits;
}

/* The walk over every re-routed flow, where there are no hop-sum tables (hopsum.c). */
static int64_t walk_flows(const msa_t *h, int k, const int32_t *ranks, int64_t *dhb, int64_t *old_hops,
                          uint32_t *crossed)
{
    int64_t dh = 0;
    for (int i = 0; i < k; i++) {
        const int32_t r = ranks[i];
        const int32_t rn = h->rk[r].node, rnew = h->rk[r].newnode;
        if (rn == rnew)
            continue;
        for (int64_t e = h->adj_off[r]; e < h->adj_off[r + 1]; e++) {
            const edge_t ed = h->adj[e];
            const rank_t *q = &h->rk[ed.peer];
            int32_t qn = q->node, qnew = qn;
            if (q->stamp == h->stamp) {        /* as in eval_perm: a flow between moved ranks once */
                if (ed.peer < r && q->node != q->newnode)
                    continue;
                qnew = q->newnode;
            }
            const int32_t os = ed.out ? rn : qn, ot = ed.out ? qn : rn;
            const int32_t ns = ed.out ? rnew : qnew, nt = ed.out ? qnew : rnew;
            const nodec_t *ps = &h->nc[(int64_t)os * h->ndim], *pt = &h->nc[(int64_t)ot * h->ndim];
            const nodec_t *qs = &h->nc[(int64_t)ns * h->ndim], *qt = &h->nc[(int64_t)nt * h->ndim];
            int64_t dhf = 0;
            for (int d = 0; d < h->ndim; d++) {
                const dim_t *D = &h->dim[d];
                const int no = D->step[pt[d].c - ps[d].c + D->L] >> 1, nn = D->step[qt[d].c - qs[d].c + D->L] >> 1;
                dhf += nn - no;
                *old_hops += no;
            }
            if (h->ntrack > 0)
                *crossed |= crossed_by(h, os, ot);
            dh += dhf;
            *dhb += dhf * ed.w;
        }
    }
    return dh;
}

/* A lower bound of the objective after the move (exact for hop-bytes); leaves the move marked. */
double bound_move(msa_t *h, int k, const int32_t *ranks, const int32_t *perm, int kind)
{
    mark_move(h, k, ranks, perm);
    int64_t dh, dhb = 0, old_hops = 0;
    uint32_t crossed = 0;
    if (kind == OBJ_HOPBYTES)
        hopsum_bytes(h);
    if (h->hs) {
        dh = hopsum_change(h, k, ranks, kind == OBJ_HOPBYTES ? &dhb : NULL, &old_hops);
        if (kind != OBJ_EVAL || dh <= 0)       /* maxlink is not needed, or cannot reject the move */
            return objective(kind, h->hop_sum + dh, h->hop_bytes + dhb, 0);
        for (int i = 0; i < k && h->ntrack > 0; i++)
            if (h->rk[ranks[i]].node != h->rk[ranks[i]].newnode)
                crossed |= cover_of(h, ranks[i]);
    } else {
        dh = walk_flows(h, k, ranks, &dhb, &old_hops, &crossed);
    }
    /* maxlink stays >= M unless every link at M may lose a flow */
    const int keeps = h->ntrack >= 0 ? crossed != (1u << h->ntrack) - 1 : h->nmax > old_hops;
    return objective(kind, h->hop_sum + dh, h->hop_bytes + dhb, keeps ? h->maxlink : 0);
}
