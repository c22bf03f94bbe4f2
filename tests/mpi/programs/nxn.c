/* Wait at N x N: the last rank sleeps DELAY before each MPI_Allreduce, the others
 * wait for it there. With "persistent", the Allreduce is an MPI-4 persistent one
 * (MPI_Allreduce_init once, then MPI_Start and MPI_Wait each time): the others wait in
 * MPI_Wait, and the late rank is late to its MPI_Start.
 *   nxn ITERS DELAY_MS [persistent] */
#include <mpi.h>
#include <string.h>

#include "delay.h"

int main(int argc, char **argv)
{
    int rank, size;
    double x = 1, sum = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int iters = (int)arg(argc, argv, 1, 5);
    double d = arg(argc, argv, 2, 40);
    int persistent = argc > 3 && strcmp(argv[3], "persistent") == 0;
    MPI_Request req;
    if (persistent)
        MPI_Allreduce_init(&x, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, MPI_INFO_NULL, &req);
    for (int i = 0; i < iters; i++) {
        if (rank == size - 1)
            sleep_ms(d);
        if (persistent) {
            MPI_Start(&req); /* START_P */
            MPI_Wait(&req, MPI_STATUS_IGNORE); /* WAIT_P */
        } else {
            MPI_Allreduce(&x, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD); /* ALLREDUCE */
        }
    }
    if (persistent)
        MPI_Request_free(&req);
    MPI_Finalize();
    return 0;
}
