/* An MPI-4 sessions program: it never calls MPI_Init. From the session's
 * mpi://WORLD process set it makes a communicator in world order and one in
 * reversed order (the same string tag twice, as two creations of one
 * group), then: an Allreduce, a ring (tag 7) on the first, and on the
 * reversed one a message from its rank 0 (world rank size-1) to its rank 1
 * (world rank size-2), tag 9.
 * usage: sessions [mixed|again]
 *   mixed: also MPI_Init_thread after the session starts; the session ends
 *   first, then a ring on MPI_COMM_WORLD (tag 11) and MPI_Finalize.
 *   again: after the session ends, a second one starts (MPI-4 lets a process
 *   start sessions anew), takes mpi://WORLD's group and ends. It makes no
 *   communicator: the MPICH 5.0.2 wheel's first communicator after a re-init
 *   (even from mpi://SELF) hangs in about 1 run of 50 on a loaded machine,
 *   unrecorded too. */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

static MPI_Comm from_group(MPI_Group g)
{
    MPI_Comm c;
    MPI_Comm_create_from_group(g, "org.mpiscope.example", MPI_INFO_NULL, MPI_ERRORS_ARE_FATAL, &c);
    return c;
}

static void ring(MPI_Comm comm, int tag)
{
    int rank, size, token = 0;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    if (rank == 0) {
        MPI_Send(&token, 1, MPI_INT, 1 % size, tag, comm);
        MPI_Recv(&token, 1, MPI_INT, size - 1, tag, comm, MPI_STATUS_IGNORE);
    } else {
        MPI_Recv(&token, 1, MPI_INT, rank - 1, tag, comm, MPI_STATUS_IGNORE);
        token++;
        MPI_Send(&token, 1, MPI_INT, (rank + 1) % size, tag, comm);
    }
}

int main(int argc, char **argv)
{
    int mixed = argc > 1 && strcmp(argv[1], "mixed") == 0, again = argc > 1 && strcmp(argv[1], "again") == 0;
    MPI_Session session;
    MPI_Group world, reversed;
    MPI_Session_init(MPI_INFO_NULL, MPI_ERRORS_ARE_FATAL, &session);
    if (mixed) {
        int provided;
        MPI_Init_thread(&argc, &argv, MPI_THREAD_SINGLE, &provided);
    }
    MPI_Group_from_session_pset(session, "mpi://WORLD", &world);
    int size, rank;
    MPI_Group_size(world, &size);
    MPI_Group_rank(world, &rank);
    int range[1][3] = {{size - 1, 0, -1}};
    MPI_Group_range_incl(world, 1, range, &reversed);
    MPI_Comm forward = from_group(world), backward = from_group(reversed);

    int x = rank, sum = 0;
    MPI_Allreduce(&x, &sum, 1, MPI_INT, MPI_SUM, forward);
    ring(forward, 7);
    int brank;
    MPI_Comm_rank(backward, &brank);
    if (brank == 0) MPI_Send(&x, 1, MPI_INT, 1, 9, backward);
    else if (brank == 1) MPI_Recv(&x, 1, MPI_INT, 0, 9, backward, MPI_STATUS_IGNORE);
    if (rank == 0) printf("sessions: %d ranks, sum %d\n", size, sum);

    MPI_Comm_free(&forward);
    MPI_Comm_free(&backward);
    MPI_Group_free(&world);
    MPI_Group_free(&reversed);
    MPI_Session_finalize(&session);
    if (mixed) {
        ring(MPI_COMM_WORLD, 11);
        MPI_Finalize();
    }
    if (again) {
        MPI_Session_init(MPI_INFO_NULL, MPI_ERRORS_ARE_FATAL, &session);
        MPI_Group_from_session_pset(session, "mpi://WORLD", &world);
        int again_size;
        MPI_Group_size(world, &again_size);
        MPI_Group_free(&world);
        MPI_Session_finalize(&session);
        if (rank == 0) printf("sessions again: %d ranks\n", again_size);
    }
    return 0;
}
