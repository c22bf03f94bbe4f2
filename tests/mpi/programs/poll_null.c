/* Polling calls on requests that have nothing left to complete (MPI_REQUEST_NULL): each returns
 * flag = true, as CP2K's loops over arrays of finished requests make millions of them; then one real
 * message completed by MPI_Test. Prints the calls it made. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int n = argc > 1 ? atoi(argv[1]) : 20000, rank, flag, idx, out, ids[2];
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Request r[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
    for (int i = 0; i < n; i++) MPI_Test(&r[0], &flag, MPI_STATUS_IGNORE);
    for (int i = 0; i < n; i++) MPI_Testall(2, r, &flag, MPI_STATUSES_IGNORE);
    for (int i = 0; i < n; i++) MPI_Testany(2, r, &idx, &flag, MPI_STATUS_IGNORE);
    for (int i = 0; i < n; i++) MPI_Testsome(2, r, &out, ids, MPI_STATUSES_IGNORE);
    int v = rank, got = -1;
    if (rank == 0) MPI_Isend(&v, 1, MPI_INT, 1, 7, MPI_COMM_WORLD, &r[0]);
    else MPI_Irecv(&got, 1, MPI_INT, 0, 7, MPI_COMM_WORLD, &r[0]);
    for (flag = 0; !flag;) MPI_Test(&r[0], &flag, MPI_STATUS_IGNORE);
    printf("rank %d calls %d got %d\n", rank, 4 * n, got);
    MPI_Finalize();
    return 0;
}
