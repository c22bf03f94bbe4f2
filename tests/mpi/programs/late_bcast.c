/* Late broadcast: the root (rank 0) sleeps DELAY before each MPI_Bcast; the other
 * ranks wait for it there.
 *   late_bcast ITERS DELAY_MS */
#include <mpi.h>

#include "delay.h"

int main(int argc, char **argv)
{
    int rank;
    double buf[16] = {0};
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    int iters = (int)arg(argc, argv, 1, 5);
    double d = arg(argc, argv, 2, 40);
    for (int i = 0; i < iters; i++) {
        if (rank == 0)
            sleep_ms(d);
        MPI_Bcast(buf, 16, MPI_DOUBLE, 0, MPI_COMM_WORLD); /* BCAST */
    }
    MPI_Finalize();
    return 0;
}
