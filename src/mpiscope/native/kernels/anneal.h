/* Shared state of the incremental annealing kernel (001 §4.4, §5.3).
 *
 * layout.c  link numbering by rings, routes, full evaluation
 * delta.c   incremental evaluation of a move and its commit
 * bound.c   a cheap lower bound of a move's objective, to reject early
 * hopsum.c  per-rank hop sums by coordinate, for that bound
 * state.c   creating a map, reading it, single moves, the best map
 * snapshot.c  going back to a saved map (workers)
 * search.c  random moves, the annealing loop, worker logs and their merge
 *
 * Routing is topology.py's: dimension-order, shortest way round a torus
 * ring, ties toward +. Loads and bytes are int64, so incremental and full
 * evaluation agree exactly. Ranks beyond the real ones are empty slots (no
 * flows) when the network has more slots than the pattern has ranks.
 */
#ifndef MSA_ANNEAL_H
#define MSA_ANNEAL_H

#include <stdint.h>

#define MSA_API __attribute__((visibility("default")))
#define MSA_MAXDIM 8
#define MSA_MAXK 64     /* ranks permuted by one move */
#define MSA_BLK 64      /* links per block (a bit mask): one block per ring up to 64 nodes */
#define MSA_TRACK 8     /* links at the maximum whose places bound.c follows */

enum { OBJ_EVAL = 0, OBJ_HOPBYTES = 1, OBJ_MAXLINK = 2 };

/* A route along one dimension from coordinate ca to cb on a ring of <= 64
 * links: the links it takes (bits by coordinate), their number, and the
 * first block of the rings going its way. */
typedef struct { uint64_t mask; int32_t hops, blk0; } leg_t;

/* Links are stored ring by ring: the links leaving the nodes of one line
 * along dimension d in one direction are contiguous, indexed by the
 * coordinate of the node they leave. A route is then a few arcs of rings,
 * and a block (up to MSA_BLK links of one ring) keeps its maximum load. */
typedef struct {
    int L;                      /* ring length */
    int nb;                     /* blocks per ring */
    int64_t ring0[2];           /* first link of the rings going + (0) and - (1) */
    int64_t blk0[2];            /* first block of those rings */
    const int32_t *step;        /* [cb - ca + L]: hops * 2 + direction */
    leg_t *leg;                 /* [ca * L + cb], when nb == 1 */
    int32_t *dist;              /* [ca * L + cb]: hops, when nb == 1 */
    int32_t *zero;              /* L zeros */
} dim_t;

/* Per node and dimension: coordinate and the two parts of the index of the
 * line through it along that dimension (dimensions before it, after it),
 * so the line a route takes along d is lo(destination) + hi(source). */
typedef struct { int32_t c, lo, hi; } nodec_t;

/* One flow as seen from one of its ends; a rank's edges are contiguous. */
typedef struct { int32_t peer, out; int64_t w; } edge_t;
/* Per rank: place, and the place a move under evaluation gives it. */
typedef struct { int32_t node, slot; uint32_t stamp; int32_t newnode; } rank_t;
/* Links of one block (bit i: the block's link i) whose load changes by w. */
typedef struct { uint64_t mask; int64_t w; int32_t next; } piece_t;
/* bound.c's cache of the tracked links a rank's routes cross (valid while both versions match). */
typedef struct { uint32_t bits, rver, tver; } cover_t;
/* What the move under evaluation adds to one block (valid if stamp matches). */
typedef struct { uint32_t stamp; int32_t head; int64_t add; } bmove_t;

typedef struct {
    int ndim, torus, rpn;
    int64_t nnodes, nlinks, nblocks, nranks, nflows;
    int leg_pieces;             /* most pieces one route leg makes */
    dim_t dim[MSA_MAXDIM];
    int32_t *steps;             /* storage of every dim_t.step */
    nodec_t *nc;                /* node * ndim + d */
    int32_t *bstart, *blen;     /* first link and length of each block */
    int32_t *fsrc, *fdst;       /* the flows, for the full evaluation */
    int64_t *fbytes;
    int64_t *adj_off;           /* edges of each rank (CSR) */
    edge_t *adj;
    rank_t *rk;
    int32_t *slot_rank;
    int64_t *load, *blkmax;
    int64_t maxlink, nmax, hop_sum, hop_bytes;
    /* scratch of the move being evaluated */
    uint32_t stamp;
    bmove_t *bm;
    int64_t *bnew;              /* new block maximum, once computed */
    int32_t *touched;
    int64_t ntouched;
    piece_t *piece;
    int64_t npiece, pcap;
    int64_t d_hops, d_hopbytes, new_max;
    int use_bound;              /* rounds reject on bound.c's bound first */
    /* the links at maxlink (block, bit), when there are at most MSA_TRACK; ntrack -1: not followed */
    int ntrack;
    uint32_t track_ver;         /* changes with the tracked set */
    uint32_t track_dims;        /* dimensions of the tracked links (bits) */
    int32_t track_blk[MSA_TRACK];
    uint64_t track_bit[MSA_TRACK];
    /* hopsum.c: hop sums of each rank's flows by coordinate (NULL: not kept) */
    int64_t sum_l, hoff[MSA_MAXDIM];
    int32_t *hs;
    int64_t *hb;                /* only once the hop-bytes objective asked (hopsum_bytes) */
    uint32_t *rver;             /* changes when a rank or one of its peers moves */
    cover_t *cover;
    uint64_t *peer_bits;        /* hashed peer ids of each rank */
    struct snap_t *snap;        /* snapshot.c: msa_snapshot */
    /* best map seen */
    int32_t *best;
    double best_obj;
} msa_t;

typedef struct { int64_t hop_sum, hop_bytes, maxlink; } msa_metrics;

/* layout.c */
int layout_init(msa_t *h, const int32_t *dims);
void layout_free(msa_t *h);
void full_eval(msa_t *h);
void block_max_all(msa_t *h);
int64_t block_scan(const msa_t *h, int64_t b);
int64_t link_of(const msa_t *h, int64_t node, int d, int dir);

/* delta.c */
void mark_move(msa_t *h, int k, const int32_t *ranks, const int32_t *perm);
void eval_perm(msa_t *h, int k, const int32_t *ranks, const int32_t *perm);
void commit(msa_t *h, int k, const int32_t *ranks, const int32_t *perm);

/* bound.c */
double bound_move(msa_t *h, int k, const int32_t *ranks, const int32_t *perm, int kind);
void track_max_links(msa_t *h);

/* hopsum.c */
void hopsum_init(msa_t *h);
void hopsum_free(msa_t *h);
void hopsum_fill(msa_t *h);
void hopsum_bytes(msa_t *h);
void hopsum_commit(msa_t *h, int k, const int32_t *ranks);
int64_t hopsum_change(const msa_t *h, int k, const int32_t *ranks, int64_t *dhb, int64_t *old_hops);

/* snapshot.c */
void snap_free(struct snap_t *s);

/* state.c */
double objective(int kind, int64_t hop_sum, int64_t hop_bytes, int64_t maxlink);
double current_obj(const msa_t *h, int kind);
double eval_obj(const msa_t *h, int kind);
void offer_best(msa_t *h, double v);

#endif
