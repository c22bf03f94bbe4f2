/* The binomial tree over virtual positions (SPEC §5, 000 §3.1).
 *
 * Position p = (vr[rank] - vr[root]) mod M. Position 0 (the root) sends, in
 * this order, to 2^n, 2^(n-1), ..., 1 with 2^n < M <= 2^(n+1); a position
 * whose lowest set bit is 2^i receives from p - 2^i and sends to
 * p + 2^(i-1), ..., p + 1, skipping positions >= M. (000 §3.1 prints
 * 2^n <= M < 2^(n+1), a typo: for M = 16 the root would send to 16.)
 */
#include "bcast.h"

int msc_bc_position(const struct msc_bc_table *t, int rank, int root)
{
    int p = t->vr[rank] - t->vr[root];
    return p < 0 ? p + t->size : p;
}

int msc_bc_real_at(const struct msc_bc_table *t, int pos, int root)
{
    int v = t->vr[root] + pos;
    return t->real[v >= t->size ? v - t->size : v];
}

int msc_bc_parent(int pos)
{
    return pos & (pos - 1); /* clear the lowest set bit */
}

/* The step of the first child: 2^n for the root, 2^(i-1) for a position
 * whose lowest set bit is 2^i (0: a leaf by construction). */
int msc_bc_first_child_step(int pos, int size)
{
    if (pos) return (pos & -pos) >> 1;
    int step = 1;
    while (step < size) step <<= 1; /* 2^(n+1) >= M */
    return step >> 1;
}

int msc_bc_sends(int pos, int size)
{
    int n = 0;
    for (int k = msc_bc_first_child_step(pos, size); k >= 1; k >>= 1)
        if (pos + k < size) n++;
    return n;
}

int msc_bc_depth(int pos)
{
    return __builtin_popcount((unsigned)pos);
}

void msc_bc_table_swap(struct msc_bc_table *t, int a, int b)
{
    int va = t->vr[a], vb = t->vr[b];
    t->vr[a] = vb;
    t->vr[b] = va;
    t->real[vb] = a;
    t->real[va] = b;
}

/* The wait is the time in MPI_Wait on the receive (000 §4.4): the receive is
 * posted first, so the wait is what this process spends for its parent, and
 * nothing when MPI_Test finds the data already there. The
 * sends are blocking and in the tree's order, as a binomial tree's cost
 * model has them (each child starts forwarding as soon as it has the data);
 * a small message leaves at once (eager), so a late child delays only its
 * own subtree. */
int msc_bc_tree(const struct msc_bc_table *t, int me, void *buf, int count, MPI_Datatype dt, int root,
                MPI_Comm comm, int tag, double *wait_s)
{
    int size = t->size, pos = msc_bc_position(t, me, root), rc = MPI_SUCCESS;
    *wait_s = -1.0;
    if (pos) {
        MPI_Request rq;
        rc = PMPI_Irecv(buf, count, dt, msc_bc_real_at(t, msc_bc_parent(pos), root), tag, comm, &rq);
        if (rc != MPI_SUCCESS) return rc;
        /* Data already there when the process arrives means no wait at all:
         * the process is the late one, the optimiser's zero-wait candidate.
         * Timed around MPI_Wait alone, a late process with its data there
         * still reported milliseconds (MPICH, 8 ranks on 2 cores: the wait
         * gives the core away), and was never taken for a late one. */
        int arrived = 0;
        double t0 = PMPI_Wtime();
        rc = PMPI_Test(&rq, &arrived, MPI_STATUS_IGNORE);
        if (rc == MPI_SUCCESS && !arrived) rc = PMPI_Wait(&rq, MPI_STATUS_IGNORE);
        *wait_s = arrived ? 0.0 : PMPI_Wtime() - t0;
        if (rc != MPI_SUCCESS) return rc;
    }
    for (int k = msc_bc_first_child_step(pos, size); k >= 1; k >>= 1) {
        if (pos + k >= size) continue;
        rc = PMPI_Send(buf, count, dt, msc_bc_real_at(t, pos + k, root), tag, comm);
        if (rc != MPI_SUCCESS) return rc;
    }
    return rc;
}
