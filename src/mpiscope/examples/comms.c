/* Communicator creation: dup, split (even/odd, reversed keys), idup,
 * create_group, an intercommunicator between evens and odds (with a message
 * over it and over its duplicate), and a distributed graph with a neighbourhood alltoall. Peers
 * must come out as world ranks. Needs >= 2 ranks (4 for the intercomm). */
#include <mpi.h>

int main(int argc, char **argv)
{
    int rank, size, x = 0, y = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm dup, half, idup, first, inter, graph;
    MPI_Request req;
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    MPI_Comm_split(dup, rank % 2, -rank, &half); /* reversed order inside each half */
    int hrank, hsize;
    MPI_Comm_rank(half, &hrank);
    MPI_Comm_size(half, &hsize);
    /* a ring inside each half: comm ranks differ from world ranks */
    MPI_Sendrecv(&x, 1, MPI_INT, (hrank + 1) % hsize, 5, &y, 1, MPI_INT, (hrank + hsize - 1) % hsize, 5, half,
                 MPI_STATUS_IGNORE);
    MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_SUM, half);
    MPI_Comm_idup(half, &idup, &req);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    MPI_Barrier(idup);
    /* the first two world ranks build a communicator on their own */
    MPI_Group wg, g2;
    MPI_Comm_group(MPI_COMM_WORLD, &wg);
    int two[2] = {0, 1};
    MPI_Group_incl(wg, 2, two, &g2);
    if (rank < 2) {
        MPI_Comm_create_group(MPI_COMM_WORLD, g2, 7, &first);
        MPI_Bcast(&x, 1, MPI_INT, 1, first);
        MPI_Comm_free(&first);
    }
    if (size >= 4) {
        /* evens <-> odds; each half's leader (its rank 0) is its highest world rank */
        int top_odd = (size - 1) % 2 ? size - 1 : size - 2, top_even = (size - 1) % 2 ? size - 2 : size - 1;
        MPI_Intercomm_create(half, 0, MPI_COMM_WORLD, rank % 2 == 0 ? top_odd : top_even, 11, &inter);
        if (hrank == 0) {
            /* half's rank 0 is its highest world rank; send to remote rank 0 */
            MPI_Sendrecv(&x, 1, MPI_INT, 0, 12, &y, 1, MPI_INT, 0, 12, inter, MPI_STATUS_IGNORE);
        }
        MPI_Barrier(inter);
        /* a duplicate of it: both sides must name the copy alike too */
        MPI_Comm interdup;
        MPI_Comm_dup(inter, &interdup);
        if (hrank == 0) MPI_Sendrecv(&x, 1, MPI_INT, 0, 13, &y, 1, MPI_INT, 0, 13, interdup, MPI_STATUS_IGNORE);
        MPI_Comm_free(&interdup);
        MPI_Comm_free(&inter);
    }
    int dst = (rank + 1) % size, src = (rank + size - 1) % size;
    MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, 1, &src, MPI_UNWEIGHTED, 1, &dst, MPI_UNWEIGHTED,
                                   MPI_INFO_NULL, 0, &graph);
    int sbuf[2] = {rank, rank}, rbuf[2];
    MPI_Neighbor_alltoall(sbuf, 2, MPI_INT, rbuf, 2, MPI_INT, graph);
    MPI_Comm_free(&graph);
    MPI_Group_free(&g2);
    MPI_Group_free(&wg);
    MPI_Comm_free(&idup);
    MPI_Comm_free(&half);
    MPI_Comm_free(&dup);
    MPI_Finalize();
    return 0;
}
