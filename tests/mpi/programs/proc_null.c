/* Calls to MPI_PROC_NULL move nothing (1 rank): an MPI_Isend and MPI_Irecv of 800 B, an MPI_Send of
 * 80 B and an MPI_Sendrecv of 40 B each way, all with MPI_PROC_NULL as the peer. */
#include <mpi.h>

int main(int argc, char **argv)
{
    double a[100] = {0};
    MPI_Request q[2];
    MPI_Init(&argc, &argv);
    MPI_Isend(a, 100, MPI_DOUBLE, MPI_PROC_NULL, 0, MPI_COMM_WORLD, &q[0]);
    MPI_Irecv(a, 100, MPI_DOUBLE, MPI_PROC_NULL, 0, MPI_COMM_WORLD, &q[1]);
    MPI_Waitall(2, q, MPI_STATUSES_IGNORE);
    MPI_Send(a, 10, MPI_DOUBLE, MPI_PROC_NULL, 0, MPI_COMM_WORLD);
    MPI_Sendrecv(a, 5, MPI_DOUBLE, MPI_PROC_NULL, 0, a + 50, 5, MPI_DOUBLE, MPI_PROC_NULL, 0, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
    MPI_Finalize();
    return 0;
}
