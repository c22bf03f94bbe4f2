/* A datatype of more than 2 GiB (300 M doubles, 2.4e9 bytes): its size does not fit the int of
 * MPI_Type_size, which returns MPI_UNDEFINED. A persistent send of one of them is made and freed,
 * never started, so no memory of that size is needed; its record holds the bytes of its buffer.
 *   big_type (1 rank) */
#include <mpi.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Datatype big;
    MPI_Type_contiguous(300000000, MPI_DOUBLE, &big);
    MPI_Type_commit(&big);
    static double never_sent[1];
    MPI_Request req;
    MPI_Send_init(never_sent, 1, big, 0, 3, MPI_COMM_WORLD, &req);
    MPI_Request_free(&req);
    MPI_Type_free(&big);
    MPI_Finalize();
    return 0;
}
