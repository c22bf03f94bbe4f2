/* A program that crashes mid-run: ranks exchange ITERS ring messages, then
 * rank 1 dereferences NULL (SIGSEGV) while the others block in a barrier;
 * the launcher then kills them. What was recorded before must be readable. */
#include <mpi.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    int rank, size, x = 0;
    MPI_Init(&argc, &argv);
    int iters = argc > 1 ? atoi(argv[1]) : 10;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    for (int i = 0; i < iters; i++)
        MPI_Sendrecv_replace(&x, 1, MPI_INT, (rank + 1) % size, i, (rank + size - 1) % size, i,
                             MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    if (rank == 1) {
        volatile int *nowhere = NULL;
        *nowhere = 42;
    }
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    return 0;
}
