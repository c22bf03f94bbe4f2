/* The nonblocking collectives the overlap benchmark measures, with their
 * blocking counterparts, buffers and result checks. Arguments follow IMB-NBC
 * (src_c/IMB_<op>.c): MPI_BYTE for data movement, MPI_FLOAT + MPI_SUM for
 * reductions, `size` bytes per rank and peer, root 0. */
#ifndef MSC_NBC_OPS_H
#define MSC_NBC_OPS_H

#include "common.h"

enum nbc_op_id {
    OP_IBCAST, OP_IALLGATHER, OP_IALLGATHERV, OP_IGATHER, OP_IGATHERV, OP_ISCATTER,
    OP_ISCATTERV, OP_IALLTOALL, OP_IALLTOALLV, OP_IALLTOALLW, OP_IREDUCE, OP_IREDUCE_SCATTER,
    OP_IREDUCE_SCATTER_BLOCK, OP_IALLREDUCE, OP_ISCAN, OP_IEXSCAN, OP_IBARRIER
};

struct nbc_op {
    const char *name;
    enum nbc_op_id id;
    int reduction;          /* MPI_FLOAT elements of size/4 (IMB's red_data_type) */
};

extern const struct nbc_op nbc_ops[];   /* terminated by a NULL name */

struct nbc_ctx {
    const struct nbc_op *op;
    const struct msc_settings *settings;
    MPI_Comm comm;
    int rank, np;
    long size;              /* bytes per rank (and per peer) */
    int count;              /* elements: size, or size/4 for reductions */
    char *sbuf, *rbuf;
    int *scounts, *sdispls, *rcounts, *rdispls;
    MPI_Datatype *types;    /* MPI_Ialltoallw's per-peer types */
};

/* Buffers for sizes up to max_size bytes. */
void nbc_ctx_init(struct nbc_ctx *c, const struct nbc_op *op, long max_size, MPI_Comm comm,
                  const struct msc_settings *s);
void nbc_ctx_free(struct nbc_ctx *c);
/* Counts, displacements and send data for `size`. */
void nbc_set_size(struct nbc_ctx *c, long size);
/* IMB_ireduce rotates the root in its overlapped loop only (root = i % np). */
int nbc_overlap_root(const struct nbc_ctx *c, int iteration);
void nbc_start(struct nbc_ctx *c, int root, MPI_Request *req);
void nbc_blocking(struct nbc_ctx *c, int root);
void nbc_clear_results(struct nbc_ctx *c);
/* Wrong result elements on this rank after one call with `root`. */
long nbc_check(const struct nbc_ctx *c, int root);

#endif
