/* Late receiver (2 ranks): rank 0 sends with MPI_Ssend, which returns only once the
 * receive is posted; rank 1 sleeps DELAY before each MPI_Recv.
 *   late_receiver ITERS DELAY_MS */
#include <mpi.h>

#include "delay.h"

int main(int argc, char **argv)
{
    int rank, x = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    int iters = (int)arg(argc, argv, 1, 5);
    double d = arg(argc, argv, 2, 40);
    MPI_Barrier(MPI_COMM_WORLD);
    for (int i = 0; i < iters; i++) {
        if (rank == 0) {
            MPI_Ssend(&x, 1, MPI_INT, 1, 0, MPI_COMM_WORLD); /* WAIT_SSEND */
        } else if (rank == 1) {
            sleep_ms(d);
            MPI_Recv(&x, 1, MPI_INT, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE); /* LATE_RECV */
        }
    }
    MPI_Finalize();
    return 0;
}
