/* 000 Fig. 6 (§4.3): the optimiser alone, on 8 ranks whose workload rises
 * with the rank, from the identity table, fed the exact waits of a simple
 * cost model of the binomial tree. Prints one line per operation ("swap A B"
 * or "undo A B") and then "total T" after each, and the operations count.
 *
 * Cost model (time unit: one send): rank r starts the broadcast at r (its
 * workload); a process is ready when it has started and the message has
 * arrived, plus half a unit to receive it; then it sends to its children in
 * the tree's order, one unit each, and a child's message arrives when its
 * send ends. The wait of a process is arrival - start when positive.
 */
#include <stdio.h>
#include <stdlib.h>

#include "bcast.h"

#define M 8

static double total_wait(const struct msc_bc_table *t, double *wait)
{
    double arrive[M] = {0}, total = 0;
    for (int pos = 0; pos < M; pos++) { /* a parent's position is below its children's */
        int r = msc_bc_real_at(t, pos, 0);
        double start = (double)r, ready = start;
        wait[r] = 0;
        if (pos) {
            wait[r] = arrive[pos] > start ? arrive[pos] - start : 0;
            ready = (arrive[pos] > start ? arrive[pos] : start) + 0.5;
        }
        for (int k = msc_bc_first_child_step(pos, M); k >= 1; k >>= 1)
            if (pos + k < M) arrive[pos + k] = (ready += 1.0);
        total += wait[r];
    }
    return total;
}

int main(void)
{
    int vr[M], real[M];
    for (int i = 0; i < M; i++) vr[i] = real[i] = i;
    struct msc_bc_table t = {M, vr, real};
    struct msc_bc_params p;
    msc_bc_default_params(&p);
    struct msc_bc_optimiser o;
    msc_bc_optimiser_init(&o, M, &p);
    double wait[M], total = total_wait(&t, wait);
    printf("total %g\n", total);
    int ops = 0;
    while (total > 0 && ops < 20) {
        struct msc_bc_decision d;
        double seen;
        msc_bc_decide(&o, wait, NULL, &t, 0, 0, &p, &d, &seen);
        if (d.op == MSC_BC_NONE) break;
        msc_bc_table_swap(&t, d.a, d.b);
        ops++;
        total = total_wait(&t, wait);
        printf("%s %d %d\ntotal %g\n", d.op == MSC_BC_UNDO ? "undo" : "swap", d.a, d.b, total);
    }
    printf("operations %d swaps %llu undos %llu\n", ops, (unsigned long long)o.swaps, (unsigned long long)o.undos);
    msc_bc_optimiser_free(&o);
    return 0;
}
