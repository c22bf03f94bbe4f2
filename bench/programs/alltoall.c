/* Collective-heavy, in the manner of a distributed 3-D FFT: each iteration
 * transposes with MPI_Alltoall and MPI_Alltoallv (N doubles per pair of
 * ranks), reduces a norm with MPI_Allreduce, and every tenth iteration
 * broadcasts parameters and synchronises with MPI_Barrier.
 * usage: alltoall [iters] [n]                  (defaults 2000, 64) */
#include <mpi.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    int size, rank;
    MPI_Init(&argc, &argv);
    int iters = argc > 1 ? atoi(argv[1]) : 2000, n = argc > 2 ? atoi(argv[2]) : 64;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    double *a = calloc((size_t)(n * size), sizeof(double)), *b = calloc((size_t)(n * size), sizeof(double));
    int *counts = malloc(sizeof(int) * (size_t)size), *displs = malloc(sizeof(int) * (size_t)size);
    for (int i = 0; i < size; i++) {
        counts[i] = n - (i + rank) % 2; /* uneven pencils, symmetric: what i sends me, I send i */
        displs[i] = i * n;
    }
    for (int it = 0; it < iters; it++) {
        MPI_Alltoall(a, n, MPI_DOUBLE, b, n, MPI_DOUBLE, MPI_COMM_WORLD);
        for (int i = 0; i < n * size; i++) a[i] = b[i] * 0.5 + 1.0;
        MPI_Alltoallv(a, counts, displs, MPI_DOUBLE, b, counts, displs, MPI_DOUBLE, MPI_COMM_WORLD);
        double local = b[0], norm;
        MPI_Allreduce(&local, &norm, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        if (it % 10 == 0) {
            MPI_Bcast(&norm, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
            MPI_Barrier(MPI_COMM_WORLD);
        }
        a[0] = norm;
    }
    free(displs);
    free(counts);
    free(b);
    free(a);
    MPI_Finalize();
    return 0;
}
