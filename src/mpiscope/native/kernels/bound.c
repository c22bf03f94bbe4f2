/* A lower bound of a move's objective from hop counts alone, so that the
 * annealing loop rejects most moves without their link loads.
 *
 * The hop sum and hop-bytes of a move are exact and cheap (a table look-up
 * per flow and dimension); maxlink is what costs (delta.c). But maxlink
 * cannot fall while one link at the maximum has no flow leaving it, and it
 * never falls below 0, so: new maxlink >= M if some link at M lies on no
 * old route of a moved flow, else >= 0. With eval = hops x maxlink, a move
 * that adds hops and keeps M is then worse by at least its hops x M, which
 * rejects it at any temperature below about M. The decision made on the
 * bound is the one the exact change would give (search.c), not a guess.
 */
#include "anneal.h"

/* Follow the links at maxlink while they are few and every ring fits a block. */
void track_max_links(msa_t *h)
{
    h->ntrack = -1;
    if (h->nmax > MSA_TRACK || h->leg_pieces > 1)
        return;
    int n = 0;
    for (int64_t b = 0; b < h->nblocks && n < MSA_TRACK; b++) {
        if (h->blkmax[b] != h->maxlink)
            continue;
        const int64_t *load = h->load + h->bstart[b];
        for (int i = 0; i < h->blen[b] && n < MSA_TRACK; i++)
            if (load[i] == h->maxlink) {
                h->track_blk[n] = (int32_t)b;
                h->track_bit[n++] = 1ULL << i;
            }
    }
    h->ntrack = n;
}

/* Hop changes of one re-routed flow; marks the tracked links its old route crosses. */
static inline int64_t hop_change(const msa_t *h, int32_t os, int32_t ot, int32_t ns, int32_t nt,
                                 int64_t *old_hops, uint32_t *crossed)
{
    const int nd = h->ndim;
    int64_t dh = 0;
    for (int d = 0; d < nd; d++) {
        const dim_t *D = &h->dim[d];
        const nodec_t *a = &h->nc[(int64_t)os * nd + d], *b = &h->nc[(int64_t)ot * nd + d];
        const nodec_t *c = &h->nc[(int64_t)ns * nd + d], *e = &h->nc[(int64_t)nt * nd + d];
        const int no = D->step[b->c - a->c + D->L] >> 1, nn = D->step[e->c - c->c + D->L] >> 1;
        dh += nn - no;
        *old_hops += no;
        if (h->ntrack > 0 && no) {
            const leg_t *o = &D->leg[a->c * D->L + b->c];
            const int64_t bo = (int64_t)o->blk0 + b->lo + a->hi;
            for (int j = 0; j < h->ntrack; j++)
                *crossed |= (uint32_t)(bo == h->track_blk[j] && (o->mask & h->track_bit[j])) << j;
        }
    }
    return dh;
}

/* A lower bound of the objective after the move (exact for hop-bytes); leaves the move marked. */
double bound_move(msa_t *h, int k, const int32_t *ranks, const int32_t *perm, int kind)
{
    mark_move(h, k, ranks, perm);
    int64_t dh = 0, dhb = 0, old_hops = 0;
    uint32_t crossed = 0;
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
            const int64_t dhf = hop_change(h, os, ot, ns, nt, &old_hops, &crossed);
            dh += dhf;
            dhb += dhf * ed.w;
        }
    }
    /* maxlink stays >= M unless every link at M may lose a flow */
    const int keeps = h->ntrack >= 0 ? crossed != (1u << h->ntrack) - 1 : h->nmax > old_hops;
    return objective(kind, h->hop_sum + dh, h->hop_bytes + dhb, keeps ? h->maxlink : 0);
}
