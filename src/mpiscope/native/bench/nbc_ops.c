/* See nbc_ops.h. */
#include "nbc_ops.h"

#include <stdlib.h>
#include <string.h>

const struct nbc_op nbc_ops[] = {
    {"ibcast", OP_IBCAST, 0},
    {"iallgather", OP_IALLGATHER, 0},
    {"iallgatherv", OP_IALLGATHERV, 0},
    {"igather", OP_IGATHER, 0},
    {"igatherv", OP_IGATHERV, 0},
    {"iscatter", OP_ISCATTER, 0},
    {"iscatterv", OP_ISCATTERV, 0},
    {"ialltoall", OP_IALLTOALL, 0},
    {"ialltoallv", OP_IALLTOALLV, 0},
    {"ialltoallw", OP_IALLTOALLW, 0},
    {"ireduce", OP_IREDUCE, 1},
    {"ireduce_scatter", OP_IREDUCE_SCATTER, 1},
    {"ireduce_scatter_block", OP_IREDUCE_SCATTER_BLOCK, 1},
    {"iallreduce", OP_IALLREDUCE, 1},
    {"iscan", OP_ISCAN, 1},
    {"iexscan", OP_IEXSCAN, 1},
    {"ibarrier", OP_IBARRIER, 0},
    {NULL, OP_IBARRIER, 0},
};

/* Byte pattern sent from rank `src` to rank `dst` at offset k. */
static unsigned char pat(int src, int dst, long k)
{
    return (unsigned char)(1 + 37 * src + 11 * dst + 3 * k);
}

/* Float contribution of rank r at element k (block `blk`): small integers,
 * so every sum is exact in single precision. */
static float contribution(int r, long k, int blk)
{
    return (float)(r + 1 + k % 7 + blk);
}

/* Per-rank buffer lengths in units of `size` (IMB's SENDBUF/RECVBUF_SIZE_*). */
static void lengths(enum nbc_op_id id, int np, long *s_mult, long *r_mult)
{
    *s_mult = *r_mult = 1;
    switch (id) {
    case OP_IALLGATHER: case OP_IALLGATHERV: case OP_IGATHER: case OP_IGATHERV:
        *r_mult = np;
        break;
    case OP_ISCATTER: case OP_ISCATTERV: case OP_IREDUCE_SCATTER: case OP_IREDUCE_SCATTER_BLOCK:
        *s_mult = np;
        break;
    case OP_IALLTOALL: case OP_IALLTOALLV: case OP_IALLTOALLW:
        *s_mult = *r_mult = np;
        break;
    case OP_IBARRIER:
        *s_mult = *r_mult = 0;
        break;
    default:
        break;
    }
}

void nbc_ctx_init(struct nbc_ctx *c, const struct nbc_op *op, long max_size, MPI_Comm comm,
                  const struct msc_settings *s)
{
    long s_mult, r_mult;
    memset(c, 0, sizeof(*c));
    c->op = op;
    c->settings = s;
    c->comm = comm;
    MPI_Comm_rank(comm, &c->rank);
    MPI_Comm_size(comm, &c->np);
    lengths(op->id, c->np, &s_mult, &r_mult);
    /* ibcast's root sends from sbuf and the others receive into rbuf (IMB) */
    c->sbuf = msc_alloc((size_t)(s_mult * max_size));
    c->rbuf = msc_alloc((size_t)(r_mult * max_size));
    c->scounts = msc_alloc((size_t)c->np * sizeof(int));
    c->sdispls = msc_alloc((size_t)c->np * sizeof(int));
    c->rcounts = msc_alloc((size_t)c->np * sizeof(int));
    c->rdispls = msc_alloc((size_t)c->np * sizeof(int));
    c->types = msc_alloc((size_t)c->np * sizeof(MPI_Datatype));
}

void nbc_ctx_free(struct nbc_ctx *c)
{
    free(c->sbuf);
    free(c->rbuf);
    free(c->scounts);
    free(c->sdispls);
    free(c->rcounts);
    free(c->rdispls);
    free(c->types);
}

void nbc_set_size(struct nbc_ctx *c, long size)
{
    long s_mult, r_mult;
    c->size = size;
    c->count = (int)(c->op->reduction ? size / (long)sizeof(float) : size);
    for (int i = 0; i < c->np; i++) {
        c->scounts[i] = c->rcounts[i] = c->count;
        c->sdispls[i] = c->rdispls[i] = i * c->count;   /* bytes for Ialltoallw too */
        c->types[i] = MPI_BYTE;
    }
    lengths(c->op->id, c->np, &s_mult, &r_mult);
    if (c->op->reduction) {
        float *f = (float *)c->sbuf;
        for (long blk = 0; blk < s_mult; blk++)
            for (long k = 0; k < c->count; k++) f[blk * c->count + k] = contribution(c->rank, k, (int)blk);
    } else {
        for (long blk = 0; blk < s_mult; blk++)
            for (long k = 0; k < size; k++) c->sbuf[blk * size + k] = (char)pat(c->rank, (int)blk, k);
    }
    nbc_clear_results(c);
}

int nbc_overlap_root(const struct nbc_ctx *c, int iteration)
{
    return c->op->id == OP_IREDUCE ? iteration % c->np : 0;
}

void nbc_clear_results(struct nbc_ctx *c)
{
    long s_mult, r_mult;
    lengths(c->op->id, c->np, &s_mult, &r_mult);
    memset(c->rbuf, 0, (size_t)(r_mult * c->size));
}

void nbc_start(struct nbc_ctx *c, int root, MPI_Request *req)
{
    void *bc = c->rank == root ? c->sbuf : c->rbuf;
    MPI_Comm m = c->comm;
    int n = c->count;
    switch (c->op->id) {
    case OP_IBCAST: MPI_Ibcast(bc, n, MPI_BYTE, root, m, req); break;
    case OP_IALLGATHER: MPI_Iallgather(c->sbuf, n, MPI_BYTE, c->rbuf, n, MPI_BYTE, m, req); break;
    case OP_IALLGATHERV:
        MPI_Iallgatherv(c->sbuf, n, MPI_BYTE, c->rbuf, c->rcounts, c->rdispls, MPI_BYTE, m, req);
        break;
    case OP_IGATHER: MPI_Igather(c->sbuf, n, MPI_BYTE, c->rbuf, n, MPI_BYTE, root, m, req); break;
    case OP_IGATHERV:
        MPI_Igatherv(c->sbuf, n, MPI_BYTE, c->rbuf, c->rcounts, c->rdispls, MPI_BYTE, root, m, req);
        break;
    case OP_ISCATTER: MPI_Iscatter(c->sbuf, n, MPI_BYTE, c->rbuf, n, MPI_BYTE, root, m, req); break;
    case OP_ISCATTERV:
        MPI_Iscatterv(c->sbuf, c->scounts, c->sdispls, MPI_BYTE, c->rbuf, n, MPI_BYTE, root, m, req);
        break;
    case OP_IALLTOALL: MPI_Ialltoall(c->sbuf, n, MPI_BYTE, c->rbuf, n, MPI_BYTE, m, req); break;
    case OP_IALLTOALLV:
        MPI_Ialltoallv(c->sbuf, c->scounts, c->sdispls, MPI_BYTE, c->rbuf, c->rcounts, c->rdispls, MPI_BYTE,
                       m, req);
        break;
    case OP_IALLTOALLW:
        MPI_Ialltoallw(c->sbuf, c->scounts, c->sdispls, c->types, c->rbuf, c->rcounts, c->rdispls, c->types,
                       m, req);
        break;
    case OP_IREDUCE: MPI_Ireduce(c->sbuf, c->rbuf, n, MPI_FLOAT, MPI_SUM, root, m, req); break;
    case OP_IREDUCE_SCATTER:
        MPI_Ireduce_scatter(c->sbuf, c->rbuf, c->rcounts, MPI_FLOAT, MPI_SUM, m, req);
        break;
    case OP_IREDUCE_SCATTER_BLOCK:
        MPI_Ireduce_scatter_block(c->sbuf, c->rbuf, n, MPI_FLOAT, MPI_SUM, m, req);
        break;
    case OP_IALLREDUCE: MPI_Iallreduce(c->sbuf, c->rbuf, n, MPI_FLOAT, MPI_SUM, m, req); break;
    case OP_ISCAN: MPI_Iscan(c->sbuf, c->rbuf, n, MPI_FLOAT, MPI_SUM, m, req); break;
    case OP_IEXSCAN: MPI_Iexscan(c->sbuf, c->rbuf, n, MPI_FLOAT, MPI_SUM, m, req); break;
    case OP_IBARRIER: MPI_Ibarrier(m, req); break;
    }
}

void nbc_blocking(struct nbc_ctx *c, int root)
{
    void *bc = c->rank == root ? c->sbuf : c->rbuf;
    MPI_Comm m = c->comm;
    int n = c->count;
    switch (c->op->id) {
    case OP_IBCAST: MPI_Bcast(bc, n, MPI_BYTE, root, m); break;
    case OP_IALLGATHER: MPI_Allgather(c->sbuf, n, MPI_BYTE, c->rbuf, n, MPI_BYTE, m); break;
    case OP_IALLGATHERV:
        MPI_Allgatherv(c->sbuf, n, MPI_BYTE, c->rbuf, c->rcounts, c->rdispls, MPI_BYTE, m);
        break;
    case OP_IGATHER: MPI_Gather(c->sbuf, n, MPI_BYTE, c->rbuf, n, MPI_BYTE, root, m); break;
    case OP_IGATHERV:
        MPI_Gatherv(c->sbuf, n, MPI_BYTE, c->rbuf, c->rcounts, c->rdispls, MPI_BYTE, root, m);
        break;
    case OP_ISCATTER: MPI_Scatter(c->sbuf, n, MPI_BYTE, c->rbuf, n, MPI_BYTE, root, m); break;
    case OP_ISCATTERV:
        MPI_Scatterv(c->sbuf, c->scounts, c->sdispls, MPI_BYTE, c->rbuf, n, MPI_BYTE, root, m);
        break;
    case OP_IALLTOALL: MPI_Alltoall(c->sbuf, n, MPI_BYTE, c->rbuf, n, MPI_BYTE, m); break;
    case OP_IALLTOALLV:
        MPI_Alltoallv(c->sbuf, c->scounts, c->sdispls, MPI_BYTE, c->rbuf, c->rcounts, c->rdispls, MPI_BYTE, m);
        break;
    case OP_IALLTOALLW:
        MPI_Alltoallw(c->sbuf, c->scounts, c->sdispls, c->types, c->rbuf, c->rcounts, c->rdispls, c->types, m);
        break;
    case OP_IREDUCE: MPI_Reduce(c->sbuf, c->rbuf, n, MPI_FLOAT, MPI_SUM, root, m); break;
    case OP_IREDUCE_SCATTER: MPI_Reduce_scatter(c->sbuf, c->rbuf, c->rcounts, MPI_FLOAT, MPI_SUM, m); break;
    case OP_IREDUCE_SCATTER_BLOCK: MPI_Reduce_scatter_block(c->sbuf, c->rbuf, n, MPI_FLOAT, MPI_SUM, m); break;
    case OP_IALLREDUCE: MPI_Allreduce(c->sbuf, c->rbuf, n, MPI_FLOAT, MPI_SUM, m); break;
    case OP_ISCAN: MPI_Scan(c->sbuf, c->rbuf, n, MPI_FLOAT, MPI_SUM, m); break;
    case OP_IEXSCAN: MPI_Exscan(c->sbuf, c->rbuf, n, MPI_FLOAT, MPI_SUM, m); break;
    case OP_IBARRIER: MPI_Barrier(m); break;
    }
}

/* Expected sum at element k of the ranks first..last contributing block blk. */
static float sum_of(int first, int last, long k, int blk)
{
    float s = 0.f;
    for (int r = first; r <= last; r++) s += contribution(r, k, blk);
    return s;
}

static long check_bytes(const struct nbc_ctx *c, int blocks, int src_is_block, int src, int dst)
{
    long wrong = 0;
    for (int b = 0; b < blocks; b++)
        for (long k = 0; k < c->size; k++) {
            unsigned char want = src_is_block ? pat(b, dst, k) : pat(src, dst, k);
            wrong += (unsigned char)c->rbuf[(long)b * c->size + k] != want;
        }
    return wrong;
}

static long check_floats(const struct nbc_ctx *c, int first, int last, int blk)
{
    const float *f = (const float *)c->rbuf;
    long wrong = 0;
    for (long k = 0; k < c->count; k++) wrong += f[k] != sum_of(first, last, k, blk);
    return wrong;
}

long nbc_check(const struct nbc_ctx *c, int root)
{
    const int me = c->rank, np = c->np;
    switch (c->op->id) {
    case OP_IBCAST: return me == root ? 0 : check_bytes(c, 1, 0, root, 0);
    case OP_IALLGATHER: case OP_IALLGATHERV: return check_bytes(c, np, 1, 0, 0);
    case OP_IGATHER: case OP_IGATHERV: return me == root ? check_bytes(c, np, 1, 0, 0) : 0;
    case OP_ISCATTER: case OP_ISCATTERV: return check_bytes(c, 1, 0, root, me);
    case OP_IALLTOALL: case OP_IALLTOALLV: case OP_IALLTOALLW: return check_bytes(c, np, 1, 0, me);
    case OP_IREDUCE: return me == root ? check_floats(c, 0, np - 1, 0) : 0;
    case OP_IREDUCE_SCATTER: case OP_IREDUCE_SCATTER_BLOCK: return check_floats(c, 0, np - 1, me);
    case OP_IALLREDUCE: return check_floats(c, 0, np - 1, 0);
    case OP_ISCAN: return check_floats(c, 0, me, 0);
    case OP_IEXSCAN: return me == 0 ? 0 : check_floats(c, 0, me - 1, 0);   /* rank 0: undefined */
    case OP_IBARRIER: return 0;
    }
    return 0;
}
