/* Every blocking collective (and the neighbourhood ones), twice: on
 * MPI_COMM_WORLD with root size-1, and on a communicator whose ranks are in
 * reverse world order with root 0 (the same world rank), so recorded roots
 * must come out as world ranks. Counts are COUNT ints per rank and peer. */
#include <mpi.h>
#include <stdlib.h>

#define COUNT 4

static void all(MPI_Comm comm, int root)
{
    int n, me;
    MPI_Comm_size(comm, &n);
    MPI_Comm_rank(comm, &me);
    int *s = calloc((size_t)(COUNT * n), sizeof(int)), *r = calloc((size_t)(COUNT * n), sizeof(int));
    int *counts = malloc(sizeof(int) * (size_t)n), *displs = malloc(sizeof(int) * (size_t)n);
    MPI_Datatype *types = malloc(sizeof(MPI_Datatype) * (size_t)n);
    for (int i = 0; i < n; i++) {
        counts[i] = COUNT;
        displs[i] = i * COUNT;
        types[i] = MPI_INT;
    }
    int *wd = malloc(sizeof(int) * (size_t)n);
    for (int i = 0; i < n; i++) wd[i] = displs[i] * (int)sizeof(int);
    MPI_Barrier(comm);
    MPI_Bcast(s, COUNT, MPI_INT, root, comm);
    MPI_Gather(s, COUNT, MPI_INT, r, COUNT, MPI_INT, root, comm);
    MPI_Gatherv(s, COUNT, MPI_INT, r, counts, displs, MPI_INT, root, comm);
    MPI_Scatter(s, COUNT, MPI_INT, r, COUNT, MPI_INT, root, comm);
    MPI_Scatterv(s, counts, displs, MPI_INT, r, COUNT, MPI_INT, root, comm);
    MPI_Allgather(s, COUNT, MPI_INT, r, COUNT, MPI_INT, comm);
    MPI_Allgatherv(s, COUNT, MPI_INT, r, counts, displs, MPI_INT, comm);
    MPI_Alltoall(s, COUNT, MPI_INT, r, COUNT, MPI_INT, comm);
    MPI_Alltoallv(s, counts, displs, MPI_INT, r, counts, displs, MPI_INT, comm);
    MPI_Alltoallw(s, counts, wd, types, r, counts, wd, types, comm);
    MPI_Reduce(s, r, COUNT, MPI_INT, MPI_SUM, root, comm);
    MPI_Allreduce(s, r, COUNT, MPI_INT, MPI_SUM, comm);
    MPI_Reduce_scatter(s, r, counts, MPI_INT, MPI_SUM, comm);
    MPI_Reduce_scatter_block(s, r, COUNT, MPI_INT, MPI_SUM, comm);
    MPI_Scan(s, r, COUNT, MPI_INT, MPI_SUM, comm);
    MPI_Exscan(s, r, COUNT, MPI_INT, MPI_SUM, comm);
    (void)me;
    free(wd);
    free(types);
    free(displs);
    free(counts);
    free(r);
    free(s);
}

static void neighbours(void)
{
    int size, dims[1] = {0}, periods[1] = {1};
    MPI_Comm ring;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    dims[0] = size;
    MPI_Cart_create(MPI_COMM_WORLD, 1, dims, periods, 0, &ring);
    int s[2 * COUNT] = {0}, r[2 * COUNT], counts[2] = {COUNT, COUNT}, displs[2] = {0, COUNT};
    MPI_Aint wd[2] = {0, COUNT * sizeof(int)};
    MPI_Datatype types[2] = {MPI_INT, MPI_INT};
    MPI_Neighbor_allgather(s, COUNT, MPI_INT, r, COUNT, MPI_INT, ring);
    MPI_Neighbor_allgatherv(s, COUNT, MPI_INT, r, counts, displs, MPI_INT, ring);
    MPI_Neighbor_alltoall(s, COUNT, MPI_INT, r, COUNT, MPI_INT, ring);
    MPI_Neighbor_alltoallv(s, counts, displs, MPI_INT, r, counts, displs, MPI_INT, ring);
    MPI_Neighbor_alltoallw(s, counts, wd, types, r, counts, wd, types, ring);
    MPI_Comm_free(&ring);
}

int main(int argc, char **argv)
{
    int rank, size;
    MPI_Comm reversed;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    all(MPI_COMM_WORLD, size - 1);
    MPI_Comm_split(MPI_COMM_WORLD, 0, size - rank, &reversed);
    all(reversed, 0);
    MPI_Comm_free(&reversed);
    neighbours();
    MPI_Finalize();
    return 0;
}
