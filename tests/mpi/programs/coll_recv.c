/* Collectives whose received bytes tests/mpi/test_recv_bytes.py checks against
 * the MPI standard, in this order on every rank (the test names each call by
 * its rank, name and occurrence):
 *   A. every blocking collective on MPI_COMM_WORLD, root ROOT, with per-rank
 *      counts in the v-variants and mixed datatypes in the w-variant;
 *   B. the same with MPI_IN_PLACE (the root's send buffer, a scatter root's
 *      receive buffer, every rank's send buffer in the all- variants);
 *   C. the nonblocking variants of A (MPI_Waitall);
 *   D. neighbourhood collectives on a non-periodic 1-D Cartesian grid (the
 *      end ranks have an MPI_PROC_NULL neighbour) and on a distributed graph
 *      in which rank 0 sends to every other rank (in-degree 0 at rank 0, 1
 *      elsewhere), and a nonblocking one;
 *   E. rooted and all-to-all collectives on an intercommunicator between the
 *      even and the odd world ranks (MPI_ROOT, MPI_PROC_NULL);
 *   F. (MPI 4) persistent collectives, each started twice;
 *   G. (MPI 4.0 headers) large-count variants.
 * Counts are ints unless said otherwise; needs an even number of ranks >= 4. */
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

#define ROOT 1
#define MAXN 64
#define CNT(i) ((i) + 1)                 /* v-variants: rank i's piece */
#define C2(a, b) ((a) + 2 * (b) + 1)     /* alltoallv: from a to b */
#define S2(a, b) ((a) + (b) + 1)         /* in-place alltoallv/w: symmetric */

static int n, me;
static int sbuf[4 * MAXN * MAXN], rbuf[4 * MAXN * MAXN];
static int counts[MAXN], displs[MAXN], scounts[MAXN], sdispls[MAXN], rcounts[MAXN], rdispls[MAXN];
static int wsd[MAXN], wrd[MAXN];
static MPI_Datatype stypes[MAXN], rtypes[MAXN];

static void vectors(void)
{
    for (int i = 0, d = 0; i < n; d += CNT(i), i++) {
        counts[i] = CNT(i);
        displs[i] = d;
    }
    for (int j = 0, sd = 0, rd = 0; j < n; j++) {
        scounts[j] = C2(me, j);
        sdispls[j] = sd;
        sd += scounts[j];
        rcounts[j] = C2(j, me);
        rdispls[j] = rd;
        rd += rcounts[j];
    }
    /* alltoallw: what rank a sends is of type INT if a is even, DOUBLE if odd */
    for (int j = 0, sd = 0, rd = 0; j < n; j++) {
        stypes[j] = me % 2 ? MPI_DOUBLE : MPI_INT;
        rtypes[j] = j % 2 ? MPI_DOUBLE : MPI_INT;
        wsd[j] = sd;
        wrd[j] = rd;
        sd += scounts[j] * 8;
        rd += rcounts[j] * 8;
    }
}

static void blocking(MPI_Comm w)
{
    MPI_Bcast(sbuf, 3, MPI_INT, ROOT, w);
    MPI_Gather(sbuf, 2, MPI_INT, rbuf, 2, MPI_INT, ROOT, w);
    MPI_Gatherv(sbuf, CNT(me), MPI_INT, rbuf, counts, displs, MPI_INT, ROOT, w);
    MPI_Scatter(sbuf, 2, MPI_INT, rbuf, 2, MPI_INT, ROOT, w);
    MPI_Scatterv(sbuf, counts, displs, MPI_INT, rbuf, CNT(me), MPI_INT, ROOT, w);
    MPI_Allgather(sbuf, 2, MPI_INT, rbuf, 2, MPI_INT, w);
    MPI_Allgatherv(sbuf, CNT(me), MPI_INT, rbuf, counts, displs, MPI_INT, w);
    MPI_Alltoall(sbuf, 2, MPI_INT, rbuf, 2, MPI_INT, w);
    MPI_Alltoallv(sbuf, scounts, sdispls, MPI_INT, rbuf, rcounts, rdispls, MPI_INT, w);
    MPI_Alltoallw(sbuf, scounts, wsd, stypes, rbuf, rcounts, wrd, rtypes, w);
    MPI_Reduce(sbuf, rbuf, 3, MPI_INT, MPI_SUM, ROOT, w);
    MPI_Allreduce(sbuf, rbuf, 3, MPI_INT, MPI_SUM, w);
    MPI_Reduce_scatter(sbuf, rbuf, counts, MPI_INT, MPI_SUM, w);
    MPI_Reduce_scatter_block(sbuf, rbuf, 2, MPI_INT, MPI_SUM, w);
    MPI_Scan(sbuf, rbuf, 3, MPI_INT, MPI_SUM, w);
    MPI_Exscan(sbuf, rbuf, 3, MPI_INT, MPI_SUM, w);
}

static void in_place(MPI_Comm w)
{
    int root = me == ROOT;
    int sym[MAXN], symd[MAXN], wd[MAXN];
    MPI_Datatype ints[MAXN];
    for (int j = 0, d = 0; j < n; d += sym[j], j++) {
        sym[j] = S2(me, j);
        symd[j] = d;
        wd[j] = d * 4;
        ints[j] = MPI_INT;
    }
    MPI_Gather(root ? MPI_IN_PLACE : sbuf, 2, MPI_INT, rbuf, 2, MPI_INT, ROOT, w);
    MPI_Gatherv(root ? MPI_IN_PLACE : sbuf, CNT(me), MPI_INT, rbuf, counts, displs, MPI_INT, ROOT, w);
    MPI_Scatter(sbuf, 2, MPI_INT, root ? MPI_IN_PLACE : rbuf, 2, MPI_INT, ROOT, w);
    MPI_Scatterv(sbuf, counts, displs, MPI_INT, root ? MPI_IN_PLACE : rbuf, CNT(me), MPI_INT, ROOT, w);
    MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, rbuf, 2, MPI_INT, w);
    MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, rbuf, counts, displs, MPI_INT, w);
    MPI_Alltoall(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, rbuf, 2, MPI_INT, w);
    MPI_Alltoallv(MPI_IN_PLACE, NULL, NULL, MPI_DATATYPE_NULL, rbuf, sym, symd, MPI_INT, w);
    MPI_Alltoallw(MPI_IN_PLACE, NULL, NULL, NULL, rbuf, sym, wd, ints, w);
    MPI_Reduce(root ? MPI_IN_PLACE : sbuf, rbuf, 3, MPI_INT, MPI_SUM, ROOT, w);
    MPI_Allreduce(MPI_IN_PLACE, rbuf, 3, MPI_INT, MPI_SUM, w);
    MPI_Reduce_scatter(MPI_IN_PLACE, rbuf, counts, MPI_INT, MPI_SUM, w);
    MPI_Reduce_scatter_block(MPI_IN_PLACE, rbuf, 2, MPI_INT, MPI_SUM, w);
    MPI_Scan(MPI_IN_PLACE, rbuf, 3, MPI_INT, MPI_SUM, w);
    MPI_Exscan(MPI_IN_PLACE, rbuf, 3, MPI_INT, MPI_SUM, w);
}

static void nonblocking(MPI_Comm w)
{
    /* each call its own buffers: they are in flight together */
    static int s[16][4 * MAXN * MAXN], r[16][4 * MAXN * MAXN];
    MPI_Request q[16];
    MPI_Ibcast(s[0], 3, MPI_INT, ROOT, w, &q[0]);
    MPI_Igather(s[1], 2, MPI_INT, r[1], 2, MPI_INT, ROOT, w, &q[1]);
    MPI_Igatherv(s[2], CNT(me), MPI_INT, r[2], counts, displs, MPI_INT, ROOT, w, &q[2]);
    MPI_Iscatter(s[3], 2, MPI_INT, r[3], 2, MPI_INT, ROOT, w, &q[3]);
    MPI_Iscatterv(s[4], counts, displs, MPI_INT, r[4], CNT(me), MPI_INT, ROOT, w, &q[4]);
    MPI_Iallgather(s[5], 2, MPI_INT, r[5], 2, MPI_INT, w, &q[5]);
    MPI_Iallgatherv(s[6], CNT(me), MPI_INT, r[6], counts, displs, MPI_INT, w, &q[6]);
    MPI_Ialltoall(s[7], 2, MPI_INT, r[7], 2, MPI_INT, w, &q[7]);
    MPI_Ialltoallv(s[8], scounts, sdispls, MPI_INT, r[8], rcounts, rdispls, MPI_INT, w, &q[8]);
    MPI_Ialltoallw(s[9], scounts, wsd, stypes, r[9], rcounts, wrd, rtypes, w, &q[9]);
    MPI_Ireduce(s[10], r[10], 3, MPI_INT, MPI_SUM, ROOT, w, &q[10]);
    MPI_Iallreduce(s[11], r[11], 3, MPI_INT, MPI_SUM, w, &q[11]);
    MPI_Ireduce_scatter(s[12], r[12], counts, MPI_INT, MPI_SUM, w, &q[12]);
    MPI_Ireduce_scatter_block(s[13], r[13], 2, MPI_INT, MPI_SUM, w, &q[13]);
    MPI_Iscan(s[14], r[14], 3, MPI_INT, MPI_SUM, w, &q[14]);
    MPI_Iexscan(s[15], r[15], 3, MPI_INT, MPI_SUM, w, &q[15]);
    MPI_Waitall(16, q, MPI_STATUSES_IGNORE);
}

static void neighbours(void)
{
    int dims[1] = {n}, periods[1] = {0};
    MPI_Comm line, star;
    MPI_Cart_create(MPI_COMM_WORLD, 1, dims, periods, 0, &line);
    /* neighbours: [below, above]; what goes down arrives from above */
    int rc[2] = {1, 3}, rd[2] = {0, 1}, sc[2] = {3, 1}, sd[2] = {0, 3};
    int wr[2] = {0, 4}, ws[2] = {0, 12};
    MPI_Datatype ints[2] = {MPI_INT, MPI_INT};
    MPI_Neighbor_allgather(sbuf, 2, MPI_INT, rbuf, 2, MPI_INT, line);
    MPI_Neighbor_allgatherv(sbuf, 2, MPI_INT, rbuf, (int[2]){2, 2}, (int[2]){0, 2}, MPI_INT, line);
    MPI_Neighbor_alltoall(sbuf, 2, MPI_INT, rbuf, 2, MPI_INT, line);
    MPI_Neighbor_alltoallv(sbuf, sc, sd, MPI_INT, rbuf, rc, rd, MPI_INT, line);
    MPI_Neighbor_alltoallw(sbuf, sc, (MPI_Aint[2]){ws[0], ws[1]}, ints, rbuf, rc,
                           (MPI_Aint[2]){wr[0], wr[1]}, ints, line);
    MPI_Request q;
    MPI_Ineighbor_alltoallv(sbuf, sc, sd, MPI_INT, rbuf, rc, rd, MPI_INT, line, &q);
    MPI_Wait(&q, MPI_STATUS_IGNORE);
    MPI_Comm_free(&line);
    int dest[MAXN], src[1] = {0};
    for (int j = 1; j < n; j++) dest[j - 1] = j;
    MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, me ? 1 : 0, src, MPI_UNWEIGHTED, me ? 0 : n - 1, dest,
                                   MPI_UNWEIGHTED, MPI_INFO_NULL, 0, &star);
    MPI_Neighbor_allgather(sbuf, 2, MPI_INT, rbuf, 2, MPI_INT, star);
    MPI_Comm_free(&star);
}

static void inter(void)
{
    MPI_Comm half, both;
    int side = me % 2;
    MPI_Comm_split(MPI_COMM_WORLD, side, me, &half);
    MPI_Intercomm_create(half, 0, MPI_COMM_WORLD, 1 - side, 7, &both);
    int leader = me < 2; /* world ranks 0 and 1 lead their halves */
    /* the even side's leader is the root: MPI_ROOT there, MPI_PROC_NULL beside it */
    int root = side ? 0 : (leader ? MPI_ROOT : MPI_PROC_NULL);
    MPI_Bcast(sbuf, 3, MPI_INT, root, both);
    MPI_Gather(sbuf, 2, MPI_INT, rbuf, 2, MPI_INT, root, both);
    MPI_Scatter(sbuf, 2, MPI_INT, rbuf, 2, MPI_INT, root, both);
    MPI_Reduce(sbuf, rbuf, 3, MPI_INT, MPI_SUM, root, both);
    MPI_Allgather(sbuf, 2, MPI_INT, rbuf, 2, MPI_INT, both);
    MPI_Comm_free(&both);
    MPI_Comm_free(&half);
}

#if MPI_VERSION >= 4 || (defined(OMPI_MAJOR_VERSION) && OMPI_MAJOR_VERSION >= 5)
static void persistent(MPI_Comm w)
{
    MPI_Request q[4];
    MPI_Bcast_init(sbuf, 3, MPI_INT, ROOT, w, MPI_INFO_NULL, &q[0]);
    MPI_Gatherv_init(sbuf, CNT(me), MPI_INT, rbuf, counts, displs, MPI_INT, ROOT, w, MPI_INFO_NULL, &q[1]);
    MPI_Allgather_init(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, rbuf + 1024, 2, MPI_INT, w, MPI_INFO_NULL, &q[2]);
    MPI_Exscan_init(sbuf, rbuf + 2048, 3, MPI_INT, MPI_SUM, w, MPI_INFO_NULL, &q[3]);
    for (int round = 0; round < 2; round++) {
        MPI_Start(&q[0]);
        MPI_Startall(3, &q[1]);
        MPI_Waitall(4, q, MPI_STATUSES_IGNORE);
    }
    for (int i = 0; i < 4; i++) MPI_Request_free(&q[i]);
}
#endif

#if MPI_VERSION >= 4
static void large_count(MPI_Comm w)
{
    MPI_Count c[MAXN], rc[MAXN];
    MPI_Aint d[MAXN], rd[MAXN];
    for (int i = 0; i < n; i++) {
        c[i] = counts[i];
        d[i] = displs[i];
        rc[i] = rcounts[i];
        rd[i] = rdispls[i];
    }
    MPI_Count sc[MAXN];
    MPI_Aint sd[MAXN];
    for (int i = 0; i < n; i++) {
        sc[i] = scounts[i];
        sd[i] = sdispls[i];
    }
    MPI_Bcast_c(sbuf, 3, MPI_INT, ROOT, w);
    MPI_Gatherv_c(sbuf, CNT(me), MPI_INT, rbuf, c, d, MPI_INT, ROOT, w);
    MPI_Allgatherv_c(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, rbuf, c, d, MPI_INT, w);
    MPI_Alltoallv_c(sbuf, sc, sd, MPI_INT, rbuf, rc, rd, MPI_INT, w);
    MPI_Reduce_scatter_c(sbuf, rbuf, c, MPI_INT, MPI_SUM, w);
}
#endif

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    if (n < 4 || n % 2 || n > MAXN) MPI_Abort(MPI_COMM_WORLD, 2);
    memset(sbuf, 0, sizeof sbuf);
    vectors();
    blocking(MPI_COMM_WORLD);
    in_place(MPI_COMM_WORLD);
    nonblocking(MPI_COMM_WORLD);
    neighbours();
    inter();
#if MPI_VERSION >= 4 || (defined(OMPI_MAJOR_VERSION) && OMPI_MAJOR_VERSION >= 5)
    persistent(MPI_COMM_WORLD);
#endif
#if MPI_VERSION >= 4
    large_count(MPI_COMM_WORLD);
#endif
    MPI_Finalize();
    return 0;
}
