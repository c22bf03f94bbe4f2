/* sor: red-black successive over-relaxation on an N x N grid, row blocks (JIAJIA's SOR, 003 §5, Fig. 9).
 *
 * usage: sor [--n N] [--sweeps S]        (defaults N = 512, S = 150)
 *
 * Laplace's equation with the boundary fixed to u = x + y, which is harmonic, so the discrete
 * solution is u = x + y exactly; the interior starts at 0. Each sweep relaxes the red cells
 * ((i + j) even), then the black ones; before each colour a rank exchanges its edge rows with
 * the ranks above and below (MPI_Sendrecv). Every sweep ends with an MPI_Barrier, as JIAJIA's SOR
 * does after each iteration: S-CAT's density view of SOR is dark all over with barriers.
 *
 * Check: the largest error against x + y after the sweeps (MPI_Allreduce, max) must be below
 * the one before them.
 */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define OMEGA 1.8

static double max_error(const double *u, int rows, int first, int w)
{
    double e = 0;
    for (int i = 1; i <= rows; i++)
        for (int j = 1; j < w - 1; j++) {
            double d = fabs(u[(size_t)i * w + j] - (first + i + j));
            if (d > e) e = d;
        }
    return e;
}

int main(int argc, char **argv)
{
    int size, rank, n = 512, sweeps = 150;
    MPI_Init(&argc, &argv);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--n") && i + 1 < argc) {
            n = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--sweeps") && i + 1 < argc) {
            sweeps = atoi(argv[++i]);
        } else {
            if (rank == 0) fprintf(stderr, "usage: sor [--n N] [--sweeps S]\n");
            MPI_Finalize();
            return 2;
        }
    }
    if (n < size) n = size;
    /* interior rows first+1 .. first+rows of the (n+2)-wide grid; local rows 0 and rows+1 are halos */
    int rows = n / size + (rank < n % size), first = rank * (n / size) + (rank < n % size ? rank : n % size);
    int w = n + 2, up = rank > 0 ? rank - 1 : MPI_PROC_NULL, down = rank < size - 1 ? rank + 1 : MPI_PROC_NULL;
    double *u = calloc((size_t)(rows + 2) * (size_t)w, sizeof(double));
    for (int i = 0; i < rows + 2; i++) {
        u[(size_t)i * w] = first + i;                 /* x = 0 column */
        u[(size_t)i * w + w - 1] = first + i + w - 1; /* x = n+1 column */
    }
    for (int j = 0; j < w; j++) {
        if (rank == 0) u[j] = j;                                           /* row 0 */
        if (rank == size - 1) u[(size_t)(rows + 1) * w + j] = n + 1 + j;   /* row n+1 */
    }
    double before, after, local = max_error(u, rows, first, w);
    MPI_Allreduce(&local, &before, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);

    double t0 = MPI_Wtime();
    for (int s = 0; s < sweeps; s++) {
        for (int colour = 0; colour < 2; colour++) {
            MPI_Sendrecv(u + w, w, MPI_DOUBLE, up, 0, u + (size_t)(rows + 1) * w, w, MPI_DOUBLE, down, 0,
                         MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Sendrecv(u + (size_t)rows * w, w, MPI_DOUBLE, down, 1, u, w, MPI_DOUBLE, up, 1, MPI_COMM_WORLD,
                         MPI_STATUS_IGNORE);
            for (int i = 1; i <= rows; i++) {
                double *r = u + (size_t)i * w;
                for (int j = 1 + (first + i + 1 + colour) % 2; j < w - 1; j += 2)
                    r[j] += OMEGA * (0.25 * (r[j - 1] + r[j + 1] + r[j - w] + r[j + w]) - r[j]);
            }
        }
        MPI_Barrier(MPI_COMM_WORLD);
    }
    double seconds = MPI_Wtime() - t0;

    local = max_error(u, rows, first, w);
    MPI_Allreduce(&local, &after, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    int status = after < before ? 0 : 1;
    if (rank == 0)
        printf("sor: N=%d, %d ranks, %d sweeps (one barrier each) in %.3f s; max error %.4g -> %.4g: %s\n", n, size,
               sweeps, seconds, before, after, status ? "FAILED" : "OK");
    free(u);
    MPI_Finalize();
    return status;
}
