/* A receive posted and never completed still takes its message (LAMMPS' FixNEB posts two MPI_Irecv
 * into one request and waits for the second only). Rank 1 sends 800, 80 and 8 B with one envelope;
 * rank 0 posts 800 B (the request is overwritten: never completed), 80 B (waited for), then a
 * blocking 8 B MPI_Recv; three times. Prints the bytes the blocking receive got. */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    int rank;
    double a[100], b[10], c[1], s[100] = {0};
    MPI_Request q;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    for (int it = 0; it < 3; it++) {
        if (rank == 0) {
            MPI_Status st;
            int n;
            MPI_Irecv(a, 100, MPI_DOUBLE, 1, 0, MPI_COMM_WORLD, &q);
            MPI_Irecv(b, 10, MPI_DOUBLE, 1, 0, MPI_COMM_WORLD, &q);
            MPI_Wait(&q, MPI_STATUS_IGNORE);
            MPI_Recv(c, 1, MPI_DOUBLE, 1, 0, MPI_COMM_WORLD, &st);
            MPI_Get_count(&st, MPI_BYTE, &n);
            printf("got %d\n", n);
        } else if (rank == 1) {
            MPI_Send(s, 100, MPI_DOUBLE, 0, 0, MPI_COMM_WORLD);
            MPI_Send(s, 10, MPI_DOUBLE, 0, 0, MPI_COMM_WORLD);
            MPI_Send(s, 1, MPI_DOUBLE, 0, 0, MPI_COMM_WORLD);
        }
        MPI_Barrier(MPI_COMM_WORLD);
    }
    MPI_Finalize();
    return 0;
}
