/* Every nonblocking collective, root size-1, COUNT ints; completed by
 * MPI_Wait, MPI_Waitall, or an MPI_Test loop in turn. */
#include <mpi.h>
#include <stdlib.h>

#define COUNT 4
#define NOPS 17

static void complete(MPI_Request *req, int i)
{
    int flag = 0;
    if (i % 3 == 0) MPI_Wait(req, MPI_STATUS_IGNORE);
    else if (i % 3 == 1) MPI_Waitall(1, req, MPI_STATUSES_IGNORE);
    else while (!flag) MPI_Test(req, &flag, MPI_STATUS_IGNORE);
}

int main(int argc, char **argv)
{
    int n, me;
    MPI_Init(&argc, &argv);
    MPI_Comm comm = MPI_COMM_WORLD;
    MPI_Comm_size(comm, &n);
    MPI_Comm_rank(comm, &me);
    int root = n - 1;
    int *s = calloc((size_t)(COUNT * n), sizeof(int)), *r = calloc((size_t)(COUNT * n), sizeof(int));
    int *counts = malloc(sizeof(int) * (size_t)n), *displs = malloc(sizeof(int) * (size_t)n);
    int *wd = malloc(sizeof(int) * (size_t)n);
    MPI_Datatype *types = malloc(sizeof(MPI_Datatype) * (size_t)n);
    for (int i = 0; i < n; i++) {
        counts[i] = COUNT;
        displs[i] = i * COUNT;
        wd[i] = displs[i] * (int)sizeof(int);
        types[i] = MPI_INT;
    }
    for (int op = 0; op < NOPS; op++) {
        MPI_Request req;
        switch (op) {
        case 0: MPI_Ibarrier(comm, &req); break;
        case 1: MPI_Ibcast(s, COUNT, MPI_INT, root, comm, &req); break;
        case 2: MPI_Igather(s, COUNT, MPI_INT, r, COUNT, MPI_INT, root, comm, &req); break;
        case 3: MPI_Igatherv(s, COUNT, MPI_INT, r, counts, displs, MPI_INT, root, comm, &req); break;
        case 4: MPI_Iscatter(s, COUNT, MPI_INT, r, COUNT, MPI_INT, root, comm, &req); break;
        case 5: MPI_Iscatterv(s, counts, displs, MPI_INT, r, COUNT, MPI_INT, root, comm, &req); break;
        case 6: MPI_Iallgather(s, COUNT, MPI_INT, r, COUNT, MPI_INT, comm, &req); break;
        case 7: MPI_Iallgatherv(s, COUNT, MPI_INT, r, counts, displs, MPI_INT, comm, &req); break;
        case 8: MPI_Ialltoall(s, COUNT, MPI_INT, r, COUNT, MPI_INT, comm, &req); break;
        case 9: MPI_Ialltoallv(s, counts, displs, MPI_INT, r, counts, displs, MPI_INT, comm, &req); break;
        case 10: MPI_Ialltoallw(s, counts, wd, types, r, counts, wd, types, comm, &req); break;
        case 11: MPI_Ireduce(s, r, COUNT, MPI_INT, MPI_SUM, root, comm, &req); break;
        case 12: MPI_Iallreduce(s, r, COUNT, MPI_INT, MPI_SUM, comm, &req); break;
        case 13: MPI_Ireduce_scatter(s, r, counts, MPI_INT, MPI_SUM, comm, &req); break;
        case 14: MPI_Ireduce_scatter_block(s, r, COUNT, MPI_INT, MPI_SUM, comm, &req); break;
        case 15: MPI_Iscan(s, r, COUNT, MPI_INT, MPI_SUM, comm, &req); break;
        default: MPI_Iexscan(s, r, COUNT, MPI_INT, MPI_SUM, comm, &req); break;
        }
        complete(&req, op);
    }
    (void)me;
    free(types);
    free(wd);
    free(displs);
    free(counts);
    free(r);
    free(s);
    MPI_Finalize();
    return 0;
}
