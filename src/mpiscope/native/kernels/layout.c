/* Link numbering by rings, routes, and the full evaluation of a map.
 *
 * topology.py numbers a link (node * ndim + d) * 2 + dir; the kernel stores
 * the links of each ring contiguously instead (see anneal.h), so that a
 * route piece along one dimension is a run of consecutive loads and a block
 * maximum covers a ring or a piece of one. link_of converts.
 */
#include <stdlib.h>
#include <string.h>

#include "anneal.h"

int layout_init(msa_t *h, const int32_t *dims)
{
    const int nd = h->ndim;
    int64_t stride[MSA_MAXDIM], nsteps = 0;
    h->nnodes = 1;
    h->leg_pieces = 1;
    for (int d = 0; d < nd; d++) {
        if (dims[d] < 1)
            return 0;
        stride[d] = h->nnodes;
        h->nnodes *= dims[d];
        nsteps += 2 * (int64_t)dims[d];
    }
    h->nlinks = h->nnodes * nd * 2;
    if (h->nlinks >= INT32_MAX)
        return 0;                               /* pieces hold link indices as int32 */
    h->steps = malloc((size_t)nsteps * sizeof *h->steps);
    h->nc = malloc((size_t)(h->nnodes * nd) * sizeof *h->nc);
    int64_t links = 0, blocks = 0;
    int32_t *step = h->steps;
    for (int d = 0; d < nd; d++) {
        dim_t *D = &h->dim[d];
        const int L = dims[d];
        D->L = L;
        D->nb = (L + MSA_BLK - 1) / MSA_BLK;
        /* pieces one route leg can make: one block, or a split at every border and the wrap */
        h->leg_pieces = D->nb == 1 ? h->leg_pieces : D->nb + 1 > h->leg_pieces ? D->nb + 1 : h->leg_pieces;
        for (int dir = 0; dir < 2; dir++) {
            D->ring0[dir] = links;
            D->blk0[dir] = blocks;
            links += h->nnodes;                  /* nnodes / L lines of L links */
            blocks += h->nnodes / L * D->nb;
        }
        /* step[f + L] for f = cb - ca: the hop count and direction of the shortest way (ties +). */
        for (int f = -(L - 1); f <= L - 1; f++) {
            int n, dir;
            if (h->torus) {
                const int fw = f < 0 ? f + L : f;
                if (fw <= L - fw) { n = fw; dir = 0; } else { n = L - fw; dir = 1; }
            } else if (f >= 0) { n = f; dir = 0; } else { n = -f; dir = 1; }
            step[f + L] = n * 2 + dir;
        }
        D->step = step;
        step += 2 * L;
        D->leg = D->nb == 1 ? malloc((size_t)L * L * sizeof *D->leg) : NULL;
        D->dist = D->nb == 1 ? malloc((size_t)L * L * sizeof *D->dist) : NULL;
        D->zero = calloc((size_t)L, sizeof *D->zero);
        for (int ca = 0; D->leg && ca < L; ca++)
            for (int cb = 0; cb < L; cb++) {
                const int v = D->step[cb - ca + L], n = v >> 1, dir = v & 1;
                const int lo = dir ? (ca - n + 1 + L) % L : ca;       /* lowest coordinate of the arc */
                uint64_t m = 0;
                for (int i = 0; i < n; i++)
                    m |= 1ULL << ((lo + i) % L);
                D->leg[ca * L + cb] = (leg_t){m, n, (int32_t)D->blk0[dir]};
                D->dist[ca * L + cb] = n;
            }
        for (int64_t v = 0; v < h->nnodes; v++) {
            const int64_t c = (v / stride[d]) % L;
            /* line index = v with coordinate d taken out: low dimensions, then high ones */
            h->nc[v * nd + d] = (nodec_t){(int32_t)c, (int32_t)(v % stride[d]),
                                          (int32_t)(v / (stride[d] * L) * stride[d])};
        }
    }
    h->nblocks = blocks;
    h->bstart = malloc((size_t)blocks * sizeof *h->bstart);
    h->blen = malloc((size_t)blocks * sizeof *h->blen);
    for (int d = 0; d < nd; d++) {
        const dim_t *D = &h->dim[d];
        for (int dir = 0; dir < 2; dir++)
            for (int64_t line = 0; line < h->nnodes / D->L; line++)
                for (int j = 0; j < D->nb; j++) {
                    const int64_t b = D->blk0[dir] + line * D->nb + j;
                    h->bstart[b] = (int32_t)(D->ring0[dir] + line * D->L + j * MSA_BLK);
                    h->blen[b] = D->L - j * MSA_BLK < MSA_BLK ? D->L - j * MSA_BLK : MSA_BLK;
                }
    }
    return 1;
}

void layout_free(msa_t *h)
{
    free(h->steps);
    for (int d = 0; d < h->ndim; d++) {
        free(h->dim[d].leg);
        free(h->dim[d].dist);
        free(h->dim[d].zero);
    }
    free(h->nc);
    free(h->bstart);
    free(h->blen);
}

int64_t link_of(const msa_t *h, int64_t node, int d, int dir)
{
    const nodec_t *p = &h->nc[node * h->ndim + d];
    const dim_t *D = &h->dim[d];
    return D->ring0[dir] + ((int64_t)p->lo + p->hi) * D->L + p->c;
}

/* Add w to the links of route a -> b; returns its hop count. */
static int64_t route(msa_t *h, int32_t a, int32_t b, int64_t w)
{
    const int nd = h->ndim;
    int64_t hops = 0;
    for (int d = 0; d < nd; d++) {
        const dim_t *D = &h->dim[d];
        const nodec_t *pa = &h->nc[(int64_t)a * nd + d], *pb = &h->nc[(int64_t)b * nd + d];
        const int v = D->step[pb->c - pa->c + D->L], n = v >> 1, dir = v & 1;
        if (n == 0)
            continue;
        hops += n;
        int64_t *ring = h->load + D->ring0[dir] + ((int64_t)pb->lo + pa->hi) * D->L;
        int p = dir ? pa->c - n + 1 : pa->c;    /* lowest coordinate of the arc */
        if (p < 0)
            p += D->L;
        for (int s = 0; s < n; s++) {
            ring[p] += w;
            if (++p == D->L)
                p = 0;
        }
    }
    return hops;
}

int64_t block_scan(const msa_t *h, int64_t b)
{
    const int64_t *v = h->load + h->bstart[b];
    int64_t m = 0;
    for (int i = 0; i < h->blen[b]; i++)
        m = v[i] > m ? v[i] : m;
    return m;
}

/* Every block maximum, maxlink and the number of links at it. */
void block_max_all(msa_t *h)
{
    int64_t m = 0, c = 0;
    for (int64_t b = 0; b < h->nblocks; b++) {
        h->blkmax[b] = block_scan(h, b);
        m = h->blkmax[b] > m ? h->blkmax[b] : m;
    }
    for (int64_t l = 0; l < h->nlinks; l++)
        c += h->load[l] == m;
    h->maxlink = m;
    h->nmax = c;
    track_max_links(h);
}

void full_eval(msa_t *h)
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
    block_max_all(h);
}
