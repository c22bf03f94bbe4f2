/* Ring: rank 0 starts a token that travels rank -> rank+1, ITERS times.
 * usage: ring [iters] [bytes]    tags are the iteration number */
#include <mpi.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    int rank, size;
    MPI_Init(&argc, &argv);
    int iters = argc > 1 ? atoi(argv[1]) : 3, bytes = argc > 2 ? atoi(argv[2]) : 64;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    char *buf = calloc((size_t)bytes + 1, 1);
    int next = (rank + 1) % size, prev = (rank + size - 1) % size;
    for (int i = 0; i < iters; i++) {
        if (rank == 0) {
            MPI_Send(buf, bytes, MPI_CHAR, next, i, MPI_COMM_WORLD);
            MPI_Recv(buf, bytes, MPI_CHAR, prev, i, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            MPI_Recv(buf, bytes, MPI_CHAR, prev, i, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(buf, bytes, MPI_CHAR, next, i, MPI_COMM_WORLD);
        }
    }
    free(buf);
    MPI_Finalize();
    return 0;
}
