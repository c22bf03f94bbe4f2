/* Creating a kernel for one network and pattern, setting and reading its
 * map, single moves (evaluate, apply) and the best map seen. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "anneal.h"

double objective(int kind, int64_t hop_sum, int64_t hop_bytes, int64_t maxlink)
{
    if (kind == OBJ_HOPBYTES)
        return (double)hop_bytes;
    if (kind == OBJ_MAXLINK)
        return (double)maxlink;
    return (double)hop_sum * (double)maxlink;   /* 001 §5.3 eval */
}

double current_obj(const msa_t *h, int kind)
{
    return objective(kind, h->hop_sum, h->hop_bytes, h->maxlink);
}

double eval_obj(const msa_t *h, int kind)
{
    return objective(kind, h->hop_sum + h->d_hops, h->hop_bytes + h->d_hopbytes, h->new_max);
}

static void save_best(msa_t *h)
{
    for (int64_t r = 0; r < h->nranks; r++)
        h->best[r] = h->rk[r].node;
}

void offer_best(msa_t *h, double v)
{
    if (v < h->best_obj) {
        h->best_obj = v;
        save_best(h);
    }
}

MSA_API void msa_recompute(msa_t *h)
{
    full_eval(h);
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
    full_eval(h);
    hopsum_fill(h);
}

static int by_peer(const void *a, const void *b)
{
    const edge_t *x = a, *y = b;
    return x->peer != y->peer ? (x->peer > y->peer) - (x->peer < y->peer) : x->out - y->out;
}

/* The edges of every rank (CSR), each flow once from each end, sorted by peer (hopsum.c looks them up). */
static void build_adjacency(msa_t *h, const int32_t *src, const int32_t *dst, const int64_t *bytes)
{
    const int64_t nf = h->nflows, nr = h->nranks;
    h->adj_off = calloc((size_t)nr + 1, sizeof *h->adj_off);
    h->adj = malloc((size_t)(2 * nf + 1) * sizeof *h->adj);
    for (int64_t f = 0; f < nf; f++) {
        h->adj_off[src[f] + 1]++;
        h->adj_off[dst[f] + 1]++;
    }
    for (int64_t r = 0; r < nr; r++)
        h->adj_off[r + 1] += h->adj_off[r];
    int64_t *fill = calloc((size_t)nr, sizeof *fill);
    for (int64_t f = 0; f < nf; f++) {
        h->adj[h->adj_off[src[f]] + fill[src[f]]++] = (edge_t){dst[f], 1, bytes[f]};
        h->adj[h->adj_off[dst[f]] + fill[dst[f]]++] = (edge_t){src[f], 0, bytes[f]};
    }
    free(fill);
    for (int64_t r = 0; r < nr; r++)
        qsort(h->adj + h->adj_off[r], (size_t)(h->adj_off[r + 1] - h->adj_off[r]), sizeof *h->adj, by_peer);
}

MSA_API void msa_free(msa_t *h)
{
    if (!h)
        return;
    layout_free(h);
    hopsum_free(h);
    snap_free(h->snap);
    void *p[] = {h->fsrc, h->fdst, h->fbytes, h->adj_off, h->adj, h->rk, h->slot_rank, h->best,
                 h->load, h->blkmax, h->bm, h->bnew, h->touched, h->piece};
    for (size_t i = 0; i < sizeof p / sizeof *p; i++)
        free(p[i]);
    free(h);
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
    h->use_bound = 1;
    if (!layout_init(h, dims)) {
        msa_free(h);
        return NULL;
    }
    h->nranks = nranks;
    /* a message to oneself crosses no link; hopsum.c's tables assume the peer is another rank */
    h->fsrc = malloc((size_t)nflows * sizeof *h->fsrc);
    h->fdst = malloc((size_t)nflows * sizeof *h->fdst);
    h->fbytes = malloc((size_t)nflows * sizeof *h->fbytes);
    for (int64_t f = 0; f < nflows; f++)
        if (src[f] != dst[f]) {
            h->fsrc[h->nflows] = src[f];
            h->fdst[h->nflows] = dst[f];
            h->fbytes[h->nflows++] = bytes[f];
        }
    build_adjacency(h, h->fsrc, h->fdst, h->fbytes);
    h->rk = calloc((size_t)nranks, sizeof *h->rk);
    h->slot_rank = malloc((size_t)(h->nnodes * rpn) * sizeof *h->slot_rank);
    h->best = malloc((size_t)nranks * sizeof *h->best);
    h->load = calloc((size_t)h->nlinks, sizeof *h->load);
    h->blkmax = calloc((size_t)h->nblocks, sizeof *h->blkmax);
    h->bm = calloc((size_t)h->nblocks, sizeof *h->bm);
    h->bnew = malloc((size_t)h->nblocks * sizeof *h->bnew);
    h->touched = malloc((size_t)(h->nblocks + 1) * sizeof *h->touched);   /* piece_add writes one past */
    h->pcap = 4096;
    h->piece = malloc((size_t)h->pcap * sizeof *h->piece);
    hopsum_init(h);
    msa_set_map(h, node_of);
    save_best(h);
    h->best_obj = INFINITY;
    return h;
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

/* Loads in topology.py's numbering: (node * ndim + d) * 2 + dir. */
MSA_API void msa_get_loads(const msa_t *h, int64_t *out)
{
    for (int64_t v = 0; v < h->nnodes; v++)
        for (int d = 0; d < h->ndim; d++)
            for (int dir = 0; dir < 2; dir++)
                out[(v * h->ndim + d) * 2 + dir] = h->load[link_of(h, v, d, dir)];
}

MSA_API void msa_eval(msa_t *h, int k, const int32_t *ranks, const int32_t *perm, msa_metrics *out)
{
    eval_perm(h, k, ranks, perm);
    out->hop_sum = h->hop_sum + h->d_hops;
    out->hop_bytes = h->hop_bytes + h->d_hopbytes;
    out->maxlink = h->new_max;
}

MSA_API void msa_apply(msa_t *h, int k, const int32_t *ranks, const int32_t *perm)
{
    if (k > MSA_MAXK)
        return;
    eval_perm(h, k, ranks, perm);
    commit(h, k, ranks, perm);
}

/* Apply n moves in order (a worker replaying what the master kept). */
MSA_API void msa_apply_list(msa_t *h, int64_t n, int kstride, const int32_t *k, const int32_t *ranks,
                            const int32_t *perm)
{
    for (int64_t i = 0; i < n; i++)
        msa_apply(h, k[i], ranks + i * kstride, perm + i * kstride);
}

MSA_API double msa_best_objective(const msa_t *h)
{
    return h->best_obj;
}

/* Record the current map as the best if it beats the best so far (moves made outside msa_anneal). */
MSA_API void msa_offer_best(msa_t *h, int kind)
{
    offer_best(h, current_obj(h, kind));
}

MSA_API void msa_reset_best(msa_t *h)
{
    h->best_obj = INFINITY;
    save_best(h);
}
