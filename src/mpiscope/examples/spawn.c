/* Dynamic processes: the world spawns 2 workers with MPI_Comm_spawn, twice;
 * each time its rank 0 sends each worker an int (tag 5) over the
 * intercommunicator, then all meet in a barrier on it. Run it by name, so
 * that the workers find the binary. usage: spawn */
#include <mpi.h>
#include <stdio.h>

#define ROUNDS 2

int main(int argc, char **argv)
{
    MPI_Comm parent, inter;
    int rank, x = 7;
    MPI_Init(&argc, &argv);
    MPI_Comm_get_parent(&parent);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    int worker = parent != MPI_COMM_NULL;
    for (int round = 0; round < (worker ? 1 : ROUNDS); round++) {
        if (!worker) {
            MPI_Comm_spawn(argv[0], MPI_ARGV_NULL, 2, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &inter,
                           MPI_ERRCODES_IGNORE);
            if (rank == 0)
                for (int w = 0; w < 2; w++) MPI_Send(&x, 1, MPI_INT, w, 5, inter);
        } else {
            inter = parent;
            MPI_Recv(&x, 1, MPI_INT, 0, 5, inter, MPI_STATUS_IGNORE);
        }
        MPI_Barrier(inter);
        MPI_Comm_disconnect(&inter);
    }
    if (rank == 0) printf("%s done\n", worker ? "workers" : "parents");
    MPI_Finalize();
    return 0;
}
