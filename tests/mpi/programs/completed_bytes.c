/* Rank 1 receives 6 messages from rank 0, of 1000, 2000, ... 6000 bytes into 8000-byte
 * buffers, completed by MPI_Waitall (two receives and a send), MPI_Waitsome until both of
 * two receives are done, MPI_Testall polled until both are done, and one MPI_Wait. Each
 * completion call's bytes are what its receives received: 3000, 7000, 11000 and 6000 B
 * (its sends add nothing). */
#include <mpi.h>
#include <string.h>

int main(int argc, char **argv)
{
    static char buf[6][8000], out[100];
    int rank, done = 0, flag = 0, idx[2], n;
    MPI_Request rq[3];
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    memset(buf, 1, sizeof buf);
    if (rank == 0) {
        MPI_Recv(out, 100, MPI_CHAR, 1, 99, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        for (int i = 0; i < 6; i++) MPI_Send(buf[i], 1000 * (i + 1), MPI_CHAR, 1, i, MPI_COMM_WORLD);
    } else if (rank == 1) {
        MPI_Irecv(buf[0], 8000, MPI_CHAR, 0, 0, MPI_COMM_WORLD, &rq[0]);
        MPI_Irecv(buf[1], 8000, MPI_CHAR, 0, 1, MPI_COMM_WORLD, &rq[1]);
        MPI_Isend(out, 100, MPI_CHAR, 0, 99, MPI_COMM_WORLD, &rq[2]);
        MPI_Waitall(3, rq, MPI_STATUSES_IGNORE);
        MPI_Irecv(buf[2], 8000, MPI_CHAR, 0, 2, MPI_COMM_WORLD, &rq[0]);
        MPI_Irecv(buf[3], 8000, MPI_CHAR, 0, 3, MPI_COMM_WORLD, &rq[1]);
        while (done < 2) {
            MPI_Waitsome(2, rq, &n, idx, MPI_STATUSES_IGNORE);
            done += n;
        }
        MPI_Irecv(buf[4], 8000, MPI_CHAR, 0, 4, MPI_COMM_WORLD, &rq[0]);
        MPI_Irecv(buf[5], 8000, MPI_CHAR, 0, 5, MPI_COMM_WORLD, &rq[1]);
        while (!flag) MPI_Testall(2, rq, &flag, MPI_STATUSES_IGNORE);
        MPI_Irecv(buf[0], 8000, MPI_CHAR, 0, 0, MPI_COMM_WORLD, &rq[0]);
        MPI_Send(out, 1, MPI_CHAR, 0, 98, MPI_COMM_WORLD);
        MPI_Wait(&rq[0], MPI_STATUS_IGNORE);
    }
    if (rank == 0) {
        MPI_Recv(out, 1, MPI_CHAR, 1, 98, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Send(buf[0], 6000, MPI_CHAR, 1, 0, MPI_COMM_WORLD);
    }
    MPI_Finalize();
    return 0;
}
