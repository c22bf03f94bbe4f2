/* MPI_Bcast on an intercommunicator (the lower half of the world broadcasts
 * to the upper half: root MPI_ROOT, the rest of its group MPI_PROC_NULL) and
 * then on the world. Each receiver checks the value; exit code 1 if wrong.
 * usage: bcast_inter [ROUNDS] */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size, rounds = argc > 1 ? atoi(argv[1]) : 3, bad = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int low = rank < size / 2;
    MPI_Comm half, inter;
    MPI_Comm_split(MPI_COMM_WORLD, low, rank, &half);
    MPI_Intercomm_create(half, 0, MPI_COMM_WORLD, low ? size / 2 : 0, 5, &inter);
    for (int i = 0; i < rounds; i++) {
        int v = low && rank == 0 ? 100 + i : -1;
        int root = low ? (rank == 0 ? MPI_ROOT : MPI_PROC_NULL) : 0;
        MPI_Bcast(&v, 1, MPI_INT, root, inter);
        bad += !low && v != 100 + i;
        int w = rank == size - 1 ? 200 + i : -1;
        MPI_Bcast(&w, 1, MPI_INT, size - 1, MPI_COMM_WORLD);
        bad += w != 200 + i;
    }
    MPI_Comm_free(&inter);
    MPI_Comm_free(&half);
    int all = 0;
    MPI_Allreduce(&bad, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) printf("bcast_inter: %d wrong\n", all);
    MPI_Finalize();
    return all ? 1 : 0;
}
