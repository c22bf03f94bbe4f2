/* MPI-4 persistent collectives: an Allreduce (4 ints) started 3 times with
 * MPI_Start (rank 0 makes it with recording paused), then a Bcast (4 ints from the last rank) and a Barrier started
 * together twice with MPI_Startall, a blocking MPI_Barrier between the two
 * phases. Each start is one collective instance. Then partitioned
 * communication around a ring: 4 partitions of 2 ints to rank+1 (tag 21),
 * started twice, the partitions marked ready one by one (MPI_Pready), then
 * all at once (MPI_Pready_range); MPI_Parrived polls for the last one.
 * usage: persistent */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    int rank, size, in[4], out[4], b[4] = {0};
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Request sum, pair[2];
    /* rank 0 makes the Allreduce with recording paused: its starts must still
     * be numbered like everyone's */
    if (rank == 0) MPI_Pcontrol(0);
    MPI_Allreduce_init(in, out, 4, MPI_INT, MPI_SUM, MPI_COMM_WORLD, MPI_INFO_NULL, &sum);
    if (rank == 0) MPI_Pcontrol(1);
    for (int i = 0; i < 3; i++) {
        for (int k = 0; k < 4; k++) in[k] = rank + i;
        MPI_Start(&sum);
        MPI_Wait(&sum, MPI_STATUS_IGNORE);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Bcast_init(b, 4, MPI_INT, size - 1, MPI_COMM_WORLD, MPI_INFO_NULL, &pair[0]);
    MPI_Barrier_init(MPI_COMM_WORLD, MPI_INFO_NULL, &pair[1]);
    for (int i = 0; i < 2; i++) {
        if (rank == size - 1)
            for (int k = 0; k < 4; k++) b[k] = i;
        MPI_Startall(2, pair);
        MPI_Waitall(2, pair, MPI_STATUSES_IGNORE);
    }
    int part_out[8], part_in[8];
    MPI_Request part[2];
    MPI_Psend_init(part_out, 4, 2, MPI_INT, (rank + 1) % size, 21, MPI_COMM_WORLD, MPI_INFO_NULL, &part[0]);
    MPI_Precv_init(part_in, 4, 2, MPI_INT, (rank + size - 1) % size, 21, MPI_COMM_WORLD, MPI_INFO_NULL, &part[1]);
    for (int i = 0; i < 2; i++) {
        MPI_Startall(2, part);
        for (int p = 0; p < 8; p++) part_out[p] = rank + i;
        if (i == 0)
            for (int p = 0; p < 4; p++) MPI_Pready(p, part[0]);
        else
            MPI_Pready_range(0, 3, part[0]);
        for (int arrived = 0; !arrived;) MPI_Parrived(part[1], 3, &arrived);
        MPI_Waitall(2, part, MPI_STATUSES_IGNORE);
    }
    MPI_Request_free(&part[0]);
    MPI_Request_free(&part[1]);
    MPI_Request_free(&sum);
    MPI_Request_free(&pair[0]);
    MPI_Request_free(&pair[1]);
    if (rank == 0) printf("persistent: sum %d, bcast %d, partitioned %d\n", out[0], b[0], part_in[7]);
    MPI_Finalize();
    return 0;
}
