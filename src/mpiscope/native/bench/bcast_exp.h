/* Shared by the experiments of bcast_exp.c and sparse.c. */
#ifndef MSC_BCAST_EXP_H
#define MSC_BCAST_EXP_H

#include <mpi.h>
#include <stdint.h>

#include "bcast.h"

enum { V_LIBRARY = 0, V_BINOMIAL = 1, V_ADAPTIVE = 2, V_IDEAL = 3 };

extern int exp_rank, exp_size;
extern struct msc_bc_params exp_params;

void exp_fail(const char *what, const char *value);
const char *exp_variant_name(int v);
MPI_Comm exp_open(int variant, const int *vr);
int exp_bcast(int variant, void *buf, int count, MPI_Comm comm);
void exp_close(int variant, MPI_Comm comm, uint64_t *swaps, uint64_t *undos);
void *exp_buffer(long bytes);
void exp_buffer_free(void *b);
void exp_spend(double seconds);   /* simulated: that much time; real: nothing (the work was done) */

struct exp_sparse {
    int n;            /* matrix order N */
    double density;   /* non-zero ratio R */
    double slope;     /* column slope C */
    int runs;
    int seed;
};
void exp_sparse_run(const struct exp_sparse *sp, int nv, const int *variants);

#endif
