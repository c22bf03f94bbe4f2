/* lu: LU factorization without pivoting, rows distributed cyclically (JIAJIA's LU, 003 §5, Fig. 8).
 *
 * usage: lu [--n N]        (default N = 1024)
 *
 * A is diagonally dominant, so no row exchange is needed. At step k the owner of row k
 * (rank k mod P) broadcasts the pivot row (MPI_Bcast of its N-k trailing entries, root k mod P)
 * and every rank eliminates its own rows below k, keeping the multipliers in place (L below the
 * diagonal, U on and above it). Cyclic rows give each rank the same share of every step, so the
 * run is balanced, with little communication for its computation: S-CAT saw thin, even traffic.
 *
 * Check: with x = (1, ..., 1), A.x = L.(U.x). Each rank computes U.x for its rows; one
 * MPI_Allreduce assembles the vector; each rank compares L.(U.x) with the row sums of the
 * original A for its rows, and rank 0 prints the largest relative error (MPI_Reduce).
 */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static double a_elem(long i, long j, int n)
{
    return (double)((i * 7 + j * 13) % 17) / 17.0 + (i == j ? (double)n : 0.0);
}

int main(int argc, char **argv)
{
    int size, rank, n = 1024;
    MPI_Init(&argc, &argv);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--n") && i + 1 < argc) {
            n = atoi(argv[++i]);
        } else {
            if (rank == 0) fprintf(stderr, "usage: lu [--n N]\n");
            MPI_Finalize();
            return 2;
        }
    }
    if (n < 1) n = 1;
    int mine = n / size + (rank < n % size);  /* rows rank, rank+P, rank+2P, ... */
    double *a = malloc(sizeof(double) * ((size_t)mine * (size_t)n + 1));
    double *piv = malloc(sizeof(double) * (size_t)n), *y = calloc((size_t)n, sizeof(double));
    for (int li = 0; li < mine; li++)
        for (int j = 0; j < n; j++) a[(size_t)li * n + j] = a_elem(rank + (long)li * size, j, n);
    if (rank == 0) printf("lu: N=%d, %d ranks, rows cyclic, one pivot-row broadcast per step\n", n, size);

    double t0 = MPI_Wtime();
    for (int k = 0; k < n; k++) {
        int owner = k % size;
        if (rank == owner) memcpy(piv + k, a + (size_t)(k / size) * n + k, sizeof(double) * (size_t)(n - k));
        MPI_Bcast(piv + k, n - k, MPI_DOUBLE, owner, MPI_COMM_WORLD);
        /* first own row below k: global index rank + li*size > k */
        for (int li = k < rank ? 0 : (k - rank) / size + 1; li < mine; li++) {
            double *row = a + (size_t)li * n;
            double l = row[k] / piv[k];
            row[k] = l;
            for (int j = k + 1; j < n; j++) row[j] -= l * piv[j];
        }
    }
    double seconds = MPI_Wtime() - t0;

    /* U.x with x = 1 for own rows, then A.x = L.(U.x) row by row */
    double *ux = calloc((size_t)n, sizeof(double));
    for (int li = 0; li < mine; li++) {
        long i = rank + (long)li * size;
        for (long j = i; j < n; j++) ux[i] += a[(size_t)li * n + j];
    }
    MPI_Allreduce(ux, y, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    double worst = 0, global;
    for (int li = 0; li < mine; li++) {
        long i = rank + (long)li * size;
        double lux = y[i], ax = 0;
        for (long k = 0; k < i; k++) lux += a[(size_t)li * n + k] * y[k];
        for (long j = 0; j < n; j++) ax += a_elem(i, j, n);
        double e = fabs(lux - ax) / fabs(ax);
        if (e > worst) worst = e;
    }
    MPI_Reduce(&worst, &global, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    int status = 0;
    if (rank == 0) {
        status = global < 1e-10 ? 0 : 1;
        printf("lu: factorized in %.3f s; check A.x = L.(U.x): max relative error %.2e: %s\n", seconds, global,
               status ? "FAILED" : "OK");
    }
    free(a);
    free(piv);
    free(y);
    free(ux);
    MPI_Finalize();
    return status;
}
