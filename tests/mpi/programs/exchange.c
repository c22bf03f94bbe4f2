/* Many small messages both ways around a ring, several tags and two communicators, so that
 * each rank's file holds several blocks with messages in every one (the damaged-file tests).
 *   exchange ITERS */
#include <mpi.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    int rank, size, iters = argc > 1 ? atoi(argv[1]) : 1000;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm half;
    MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half);
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    double out[2] = {rank, rank}, in[2];
    for (int i = 0; i < iters; i++) {
        MPI_Request req[4];
        MPI_Comm comm = i % 3 ? MPI_COMM_WORLD : half;
        int r = i % 3 ? right : MPI_PROC_NULL, l = i % 3 ? left : MPI_PROC_NULL;
        MPI_Irecv(&in[0], 1, MPI_DOUBLE, l, i % 5, comm, &req[0]);
        MPI_Irecv(&in[1], 1, MPI_DOUBLE, r, i % 7, comm, &req[1]);
        MPI_Isend(&out[0], 1, MPI_DOUBLE, r, i % 5, comm, &req[2]);
        MPI_Isend(&out[1], 1, MPI_DOUBLE, l, i % 7, comm, &req[3]);
        MPI_Waitall(4, req, MPI_STATUSES_IGNORE);
        if (i % 100 == 0) MPI_Allreduce(MPI_IN_PLACE, out, 2, MPI_DOUBLE, MPI_SUM, half);
    }
    MPI_Comm_free(&half);
    MPI_Finalize();
    return 0;
}
