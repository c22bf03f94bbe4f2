/* The call pattern of HPCG's conjugate gradient: a 3-D domain (process grid
 * from MPI_Dims_create, not periodic) whose halo exchange (HPCG's
 * ExchangeHalo: MPI_Irecv from every neighbour of the 26, MPI_Send to each,
 * then MPI_Wait on each receive, tag 99) runs before every sparse
 * matrix-vector product and symmetric Gauss-Seidel sweep of a 4-level
 * multigrid V-cycle, with three 8-byte MPI_Allreduce dot products per
 * iteration. Messages are faces, edges and corners of an NX^3 block per level.
 * usage: hpcg_like [iters] [nx]                (defaults 200, 16) */
#include <mpi.h>
#include <stdlib.h>

#define LEVELS 4
#define TAG 99

static int nnb, nb[26], nb_cells[26];
static double *sendbuf, *recvbuf, work[64];

static void exchange_halo(int level)
{
    MPI_Request req[26];
    int off = 0;
    for (int i = 0; i < nnb; i++) {
        int n = nb_cells[i] >> (level * (nb_cells[i] > 1 ? 1 : 0));
        MPI_Irecv(recvbuf + off, n ? n : 1, MPI_DOUBLE, nb[i], TAG, MPI_COMM_WORLD, &req[i]);
        off += n ? n : 1;
    }
    off = 0;
    for (int i = 0; i < nnb; i++) {
        int n = nb_cells[i] >> (level * (nb_cells[i] > 1 ? 1 : 0));
        MPI_Send(sendbuf + off, n ? n : 1, MPI_DOUBLE, nb[i], TAG, MPI_COMM_WORLD);
        off += n ? n : 1;
    }
    for (int i = 0; i < nnb; i++) MPI_Wait(&req[i], MPI_STATUS_IGNORE);
}

static void compute(int cells)
{
    for (int i = 0; i < cells; i++) work[i & 63] = work[(i + 1) & 63] * 0.5 + 1.0;
}

static double dot(void)
{
    double local = work[0], global;
    MPI_Allreduce(&local, &global, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    return global;
}

static void mg(int level, int nx)
{
    int cells = (nx >> level) * (nx >> level) * (nx >> level);
    exchange_halo(level); /* pre-smoother: SYMGS */
    compute(cells);
    if (level + 1 < LEVELS) {
        exchange_halo(level); /* residual: SPMV, then restriction */
        compute(cells);
        mg(level + 1, nx);
    }
    exchange_halo(level); /* post-smoother: SYMGS after prolongation */
    compute(cells);
}

int main(int argc, char **argv)
{
    int rank, size, dims[3] = {0, 0, 0}, coords[3];
    MPI_Init(&argc, &argv);
    int iters = argc > 1 ? atoi(argv[1]) : 200, nx = argc > 2 ? atoi(argv[2]) : 16;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Dims_create(size, 3, dims);
    coords[0] = rank / (dims[1] * dims[2]);
    coords[1] = rank / dims[2] % dims[1];
    coords[2] = rank % dims[2];
    for (int dx = -1; dx <= 1; dx++)
        for (int dy = -1; dy <= 1; dy++)
            for (int dz = -1; dz <= 1; dz++) {
                int c[3] = {coords[0] + dx, coords[1] + dy, coords[2] + dz};
                int flat = abs(dx) + abs(dy) + abs(dz);
                if (!flat || c[0] < 0 || c[1] < 0 || c[2] < 0 || c[0] >= dims[0] || c[1] >= dims[1] ||
                    c[2] >= dims[2])
                    continue;
                nb[nnb] = (c[0] * dims[1] + c[1]) * dims[2] + c[2];
                nb_cells[nnb++] = flat == 1 ? nx * nx : flat == 2 ? nx : 1; /* face, edge, corner */
            }
    sendbuf = calloc((size_t)(26 * nx * nx), sizeof(double));
    recvbuf = calloc((size_t)(26 * nx * nx), sizeof(double));
    double rtz = dot();
    for (int it = 0; it < iters; it++) {
        mg(0, nx);                /* preconditioner */
        double pap = dot();       /* p'Ap after the product below */
        exchange_halo(0);         /* SPMV: A p */
        compute(nx * nx * nx);
        double rr = dot();        /* new residual norm */
        rtz = dot() + pap + rr;   /* r'z */
        work[1] = rtz;
    }
    free(recvbuf);
    free(sendbuf);
    MPI_Finalize();
    return 0;
}
