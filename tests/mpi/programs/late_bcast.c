/* Late broadcast: the root (rank 0) sleeps DELAY before each MPI_Bcast; the other
 * ranks wait for it there. With "persistent", the broadcast is an MPI-4 persistent one
 * (MPI_Bcast_init, then MPI_Start and MPI_Wait): the others wait in MPI_Wait for the
 * root's late MPI_Start.
 *   late_bcast ITERS DELAY_MS [persistent] */
#include <mpi.h>
#include <string.h>

#include "delay.h"

int main(int argc, char **argv)
{
    int rank;
    double buf[16] = {0};
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    int iters = (int)arg(argc, argv, 1, 5);
    double d = arg(argc, argv, 2, 40);
    int persistent = argc > 3 && strcmp(argv[3], "persistent") == 0;
    MPI_Request req;
    if (persistent)
        MPI_Bcast_init(buf, 16, MPI_DOUBLE, 0, MPI_COMM_WORLD, MPI_INFO_NULL, &req);
    for (int i = 0; i < iters; i++) {
        if (rank == 0)
            sleep_ms(d);
        if (persistent) {
            MPI_Start(&req); /* START_P */
            MPI_Wait(&req, MPI_STATUS_IGNORE); /* WAIT_P */
        } else {
            MPI_Bcast(buf, 16, MPI_DOUBLE, 0, MPI_COMM_WORLD); /* BCAST */
        }
    }
    if (persistent)
        MPI_Request_free(&req);
    MPI_Finalize();
    return 0;
}
