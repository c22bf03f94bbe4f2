/* 2-D halo exchange on a periodic Cartesian grid: each iteration posts
 * Irecv/Isend to the four neighbours, computes, waits, then allreduces a
 * residual. usage: halo [iters] [n]   (n x n doubles per rank) */
#include <math.h>
#include <mpi.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    int size, rank, dims[2] = {0, 0}, periods[2] = {1, 1}, nb[4];
    MPI_Comm grid;
    MPI_Init(&argc, &argv);
    int iters = argc > 1 ? atoi(argv[1]) : 5, n = argc > 2 ? atoi(argv[2]) : 64;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Dims_create(size, 2, dims);
    MPI_Cart_create(MPI_COMM_WORLD, 2, dims, periods, 0, &grid);
    MPI_Comm_rank(grid, &rank);
    MPI_Cart_shift(grid, 0, 1, &nb[0], &nb[1]);
    MPI_Cart_shift(grid, 1, 1, &nb[2], &nb[3]);
    double *u = calloc((size_t)(n * n), sizeof(double)), *halo[4], *edge[4];
    for (int d = 0; d < 4; d++) {
        halo[d] = calloc((size_t)n, sizeof(double));
        edge[d] = calloc((size_t)n, sizeof(double));
    }
    for (int it = 0; it < iters; it++) {
        MPI_Request req[8];
        for (int d = 0; d < 4; d++) {
            /* direction d receives what the neighbour sent in direction d^1 */
            MPI_Irecv(halo[d], n, MPI_DOUBLE, nb[d], d ^ 1, grid, &req[d]);
            MPI_Isend(edge[d], n, MPI_DOUBLE, nb[d], d, grid, &req[4 + d]);
        }
        double local = 0;
        for (int i = 0; i < n * n; i++) local += sin(u[i] + it);
        MPI_Waitall(8, req, MPI_STATUSES_IGNORE);
        double global;
        MPI_Allreduce(&local, &global, 1, MPI_DOUBLE, MPI_SUM, grid);
        u[0] = global;
    }
    for (int d = 0; d < 4; d++) {
        free(halo[d]);
        free(edge[d]);
    }
    free(u);
    MPI_Comm_free(&grid);
    MPI_Finalize();
    return 0;
}
