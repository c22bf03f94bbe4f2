/* Incremental evaluation of a move (SPEC §3: only the swapped ranks' flows
 * change route) and its commit.
 *
 * A move permutes the places of k ranks. Each changed flow becomes pieces:
 * the links of one block (a bit mask) whose load goes down (old route) or
 * up (new route); where the old and new route run along the same ring the
 * same way, the links they share are dropped. Nothing is written to the
 * loads, so a rejected move costs no undo.
 *
 * maxlink without a rescan: a block can only exceed the current maximum M
 * if its maximum plus everything added to it does, and can only lose a link
 * at M if its maximum is M and something leaves it. Only those "hot" blocks
 * are summed exactly. The maximum falls only when every link at M (their
 * count is kept) went down; then, rarely, every block is looked at.
 */
#include <stdlib.h>
#include <string.h>

#include "anneal.h"

static void next_stamp(msa_t *h)
{
    if (++h->stamp == 0) {   /* wrapped: clear so no stale entry matches */
        for (int64_t r = 0; r < h->nranks; r++)
            h->rk[r].stamp = 0;
        for (int64_t b = 0; b < h->nblocks; b++)
            h->bm[b].stamp = 0;
        h->stamp = 1;
    }
    h->ntouched = 0;
    h->npiece = 0;
}

/* The scratch of the move under evaluation, held apart from msa_t and
 * restrict-qualified: stores to it then do not make the compiler reload
 * the network tables after every piece (measured: about 10 % faster). */
typedef struct {
    bmove_t *restrict bm;
    piece_t *restrict piece;
    int32_t *restrict touched;
    int64_t npiece, ntouched;
    uint32_t stamp;
} mv_t;

/* Branch-free: whether a block was touched before in this move is random. */
static inline void piece_add(mv_t *restrict m, int64_t blk, uint64_t mask, int64_t w)
{
    bmove_t *b = &m->bm[blk];
    const int fresh = b->stamp != m->stamp;
    m->touched[m->ntouched] = (int32_t)blk;
    m->ntouched += fresh;
    const int32_t head = fresh ? -1 : b->head;
    const int64_t add = fresh ? 0 : b->add;
    m->piece[m->npiece] = (piece_t){mask, w, head};
    *b = (bmove_t){m->stamp, (int32_t)m->npiece++, add + (w > 0 ? w : 0)};
}

static inline uint64_t low_bits(int n)
{
    return n >= 64 ? ~0ULL : (1ULL << n) - 1;
}

/* Lowest coordinate of the n links travelled from coordinate s in direction dir. */
static inline int low_end(const dim_t *D, int s, int n, int dir)
{
    const int p = s - dir * (n - 1);
    return p < 0 ? p + D->L : p;
}

/* Rings longer than a block: the arc split at block borders and at the wrap
 * (no shared links dropped: such rings are rare and their pieces exact anyway). */
static void long_arc(mv_t *restrict m, const dim_t *D, int dir, int64_t line, int p, int n, int64_t w)
{
    const int64_t b = D->blk0[dir] + line * D->nb;
    while (n > 0) {
        const int j = p / MSA_BLK, end = (j + 1) * MSA_BLK < D->L ? (j + 1) * MSA_BLK : D->L;
        const int len = n < end - p ? n : end - p;
        piece_add(m, b + j, low_bits(len) << (p - j * MSA_BLK), w);
        n -= len;
        p += len;
        if (p == D->L)
            p = 0;
    }
}

/* Pieces of moving flow weight w from route os->ot to route ns->nt; returns the hop change. */
static int64_t reroute(const msa_t *restrict h, mv_t *restrict m, int32_t os, int32_t ot, int32_t ns, int32_t nt,
                       int64_t w)
{
    const int nd = h->ndim;
    int64_t dh = 0;
    for (int d = 0; d < nd; d++) {
        const dim_t *D = &h->dim[d];
        const nodec_t *a = &h->nc[(int64_t)os * nd + d], *b = &h->nc[(int64_t)ot * nd + d];
        const nodec_t *c = &h->nc[(int64_t)ns * nd + d], *e = &h->nc[(int64_t)nt * nd + d];
        if (D->leg) {
            const leg_t *o = &D->leg[a->c * D->L + b->c], *n = &D->leg[c->c * D->L + e->c];
            const int64_t bo = (int64_t)o->blk0 + b->lo + a->hi, bn = (int64_t)n->blk0 + e->lo + c->hi;
            const uint64_t both = bo == bn ? o->mask & n->mask : 0;   /* same ring: keep the difference */
            dh += n->hops - o->hops;
            if (o->mask != both)
                piece_add(m, bo, o->mask ^ both, -w);
            if (n->mask != both)
                piece_add(m, bn, n->mask ^ both, w);
            continue;
        }
        const int vo = D->step[b->c - a->c + D->L], vn = D->step[e->c - c->c + D->L];
        const int no = vo >> 1, nn = vn >> 1, dio = vo & 1, din = vn & 1;
        dh += nn - no;
        long_arc(m, D, dio, (int64_t)b->lo + a->hi, low_end(D, a->c, no, dio), no, -w);
        long_arc(m, D, din, (int64_t)e->lo + c->hi, low_end(D, c->c, nn, din), nn, w);
    }
    return dh;
}

/* New maximum of block b into bnew[b]; counts into *dec its links at M that go below M. */
static void exact_block(msa_t *h, int64_t b, int64_t M, int64_t *dec)
{
    const int len = h->blen[b];
    const int64_t *load = h->load + h->bstart[b];
    int64_t delta[MSA_BLK];
    memset(delta, 0, (size_t)len * sizeof *delta);
    for (int32_t p = h->bm[b].head; p >= 0; p = h->piece[p].next) {
        const int64_t w = h->piece[p].w;
        for (uint64_t m = h->piece[p].mask; m; m &= m - 1)
            delta[__builtin_ctzll(m)] += w;
    }
    int64_t mx = 0, dc = 0;
    for (int i = 0; i < len; i++) {
        const int64_t nl = load[i] + delta[i];
        mx = nl > mx ? nl : mx;
        dc += (load[i] == M) & (nl < M);
    }
    h->bnew[b] = mx;
    *dec += dc;
}

static int64_t new_maximum(msa_t *h)
{
    const int64_t M = h->maxlink;
    int64_t cand = 0, dec = 0;
    for (int64_t t = 0; t < h->ntouched; t++) {
        const int32_t b = h->touched[t];
        const int64_t bx = h->blkmax[b];
        if (bx + h->bm[b].add > M || bx == M) {
            exact_block(h, b, M, &dec);
            cand = h->bnew[b] > cand ? h->bnew[b] : cand;
        }
    }
    if (dec < h->nmax)                           /* some link stays at M */
        return cand > M ? cand : M;
    for (int64_t t = 0; t < h->ntouched; t++)    /* every link at M went down: look everywhere */
        exact_block(h, h->touched[t], M, &dec);
    int64_t m = 0;
    for (int64_t b = 0; b < h->nblocks; b++) {
        const int64_t v = h->bm[b].stamp == h->stamp ? h->bnew[b] : h->blkmax[b];
        m = v > m ? v : m;
    }
    return m;
}

/* A new stamp, and the place the move gives each moved rank (newnode, valid while stamped). */
void mark_move(msa_t *h, int k, const int32_t *ranks, const int32_t *perm)
{
    next_stamp(h);
    for (int i = 0; i < k; i++) {
        h->rk[ranks[i]].newnode = h->rk[ranks[perm[i]]].node;
        h->rk[ranks[i]].stamp = h->stamp;
    }
}

/* Evaluate moving ranks[i] into the place of ranks[perm[i]], leaving the result in the scratch. */
void eval_perm(msa_t *h, int k, const int32_t *ranks, const int32_t *perm)
{
    mark_move(h, k, ranks, perm);
    int64_t dh = 0, dhb = 0;
    int64_t need = 0;
    for (int i = 0; i < k; i++)
        need += (h->adj_off[ranks[i] + 1] - h->adj_off[ranks[i]]) * h->ndim * 2 * h->leg_pieces;
    if (need > h->pcap) {
        h->pcap = need;
        h->piece = realloc(h->piece, (size_t)need * sizeof *h->piece);
    }
    mv_t m = {h->bm, h->piece, h->touched, 0, 0, h->stamp};
    for (int i = 0; i < k; i++) {
        const int32_t r = ranks[i];
        const int32_t rn = h->rk[r].node, rnew = h->rk[r].newnode;
        if (rn == rnew)
            continue;                          /* a swap within one node moves no flow */
        for (int64_t e = h->adj_off[r]; e < h->adj_off[r + 1]; e++) {
            const edge_t ed = h->adj[e];
            const rank_t *q = &h->rk[ed.peer];
            int32_t qn = q->node, qnew = qn;
            if (q->stamp == h->stamp) {
                if (ed.peer < r && q->node != q->newnode)
                    continue;                  /* both ends moved: walked from the lower rank */
                qnew = q->newnode;
            }
            const int32_t os = ed.out ? rn : qn, ot = ed.out ? qn : rn;
            const int32_t ns = ed.out ? rnew : qnew, nt = ed.out ? qnew : rnew;
            const int64_t dhf = reroute(h, &m, os, ot, ns, nt, ed.w);
            dh += dhf;
            dhb += dhf * ed.w;
        }
    }
    h->npiece = m.npiece;
    h->ntouched = m.ntouched;
    h->d_hops = dh;
    h->d_hopbytes = dhb;
    h->new_max = new_maximum(h);
}

static int64_t count_eq(const msa_t *h, int64_t b, int64_t v)
{
    const int64_t *load = h->load + h->bstart[b];
    int64_t c = 0;
    for (int i = 0; i < h->blen[b]; i++)
        c += load[i] == v;
    return c;
}

/* Keep the move just evaluated by eval_perm: apply its pieces, then update the
 * block maxima and the count at the maximum from the touched blocks alone. */
void commit(msa_t *h, int k, const int32_t *ranks, const int32_t *perm)
{
    const int64_t M = h->maxlink, N = h->new_max;
    int64_t before = 0, after = 0;
    for (int64_t t = 0; t < h->ntouched; t++)
        if (N == M && h->blkmax[h->touched[t]] == M)
            before += count_eq(h, h->touched[t], M);
    for (int64_t t = 0; t < h->ntouched; t++) {
        int64_t *load = h->load + h->bstart[h->touched[t]];
        for (int32_t p = h->bm[h->touched[t]].head; p >= 0; p = h->piece[p].next)
            for (uint64_t m = h->piece[p].mask; m; m &= m - 1)
                load[__builtin_ctzll(m)] += h->piece[p].w;
    }
    for (int64_t t = 0; t < h->ntouched; t++) {
        const int32_t b = h->touched[t];
        h->blkmax[b] = block_scan(h, b);
        if (N >= M && h->blkmax[b] == N)
            after += count_eq(h, b, N);
    }
    if (N > M) {                               /* only changed links can be above M */
        h->nmax = after;
    } else if (N == M) {
        h->nmax += after - before;
    } else {
        h->nmax = 0;
        for (int64_t b = 0; b < h->nblocks; b++)
            if (h->blkmax[b] == N)
                h->nmax += count_eq(h, b, N);
    }
    h->maxlink = N;
    if (N != M || before || after)             /* the links at the maximum may have changed */
        track_max_links(h);
    hopsum_commit(h, k, ranks);
    int32_t slots[MSA_MAXK];
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
