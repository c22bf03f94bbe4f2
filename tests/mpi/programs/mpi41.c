/* MPI-4.1 calls (4 ranks): an intercommunicator from the groups of even and odd world ranks
 * (MPI_Intercomm_create_from_groups), then each rank sends to the rank of the same number in
 * the other group; buffered sends on a buffer attached to the world communicator, flushed
 * (MPI_Comm_flush_buffer) and flushed as a request (MPI_Comm_iflush_buffer + MPI_Wait). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Group world, even, odd;
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    int evens[64], odds[64], ne = 0, no = 0;
    for (int r = 0; r < size; r++) {
        if (r % 2) odds[no++] = r;
        else evens[ne++] = r;
    }
    MPI_Group_incl(world, ne, evens, &even);
    MPI_Group_incl(world, no, odds, &odd);
    MPI_Comm inter;
    int mine = rank % 2;
    MPI_Intercomm_create_from_groups(mine ? odd : even, 0, mine ? even : odd, 0, "org.mpiscope.test.inter",
                                     MPI_INFO_NULL, MPI_ERRORS_ARE_FATAL, &inter);
    int me, x = rank, y = -1;
    MPI_Comm_rank(inter, &me);
    MPI_Sendrecv(&x, 1, MPI_INT, me, 3, &y, 1, MPI_INT, me, 3, inter, MPI_STATUS_IGNORE);
    if (y != (mine ? rank - 1 : rank + 1)) fprintf(stderr, "rank %d got %d\n", rank, y);
    MPI_Comm_free(&inter);

    int bytes = 4 * (MPI_BSEND_OVERHEAD + (int)sizeof(int));
    char *buffer = malloc((size_t)bytes);
    MPI_Comm_attach_buffer(MPI_COMM_WORLD, buffer, bytes);
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    MPI_Bsend(&x, 1, MPI_INT, right, 4, MPI_COMM_WORLD);
    MPI_Recv(&y, 1, MPI_INT, left, 4, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Comm_flush_buffer(MPI_COMM_WORLD);
    MPI_Bsend(&x, 1, MPI_INT, right, 5, MPI_COMM_WORLD);
    MPI_Request req;
    MPI_Comm_iflush_buffer(MPI_COMM_WORLD, &req);
    MPI_Recv(&y, 1, MPI_INT, left, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    void *addr;
    int got;
    MPI_Comm_detach_buffer(MPI_COMM_WORLD, &addr, &got);
    free(buffer);
    MPI_Group_free(&even);
    MPI_Group_free(&odd);
    MPI_Group_free(&world);
    MPI_Finalize();
    return 0;
}
