/* Point-to-point in all its forms, rank 0 <-> rank 1 (2 ranks or more; the
 * others only join the barriers). Every message is COUNT ints; tags say
 * which form sent it (see TAG_*), but TAG_DERIVED: a derived datatype (96
 * bytes) received into a larger buffer. */
#include <mpi.h>
#include <stdlib.h>

#define COUNT 16
enum { TAG_B = 1, TAG_S, TAG_R, TAG_SR, TAG_SRR, TAG_P, TAG_PROBE, TAG_IPROBE, TAG_MPROBE, TAG_IMPROBE,
       TAG_ANY, TAG_SOME, TAG_TESTALL, TAG_ISSEND, TAG_DERIVED, TAG_ISENDRECV, TAG_CANCEL };

int main(int argc, char **argv)
{
    int rank, size, a[COUNT] = {0}, b[COUNT];
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int peer = rank == 0 ? 1 : 0, flag = 0;
    MPI_Status st;
    MPI_Request req[4];
    if (rank < 2) {
        /* buffered, synchronous, ready */
        int bufsize = COUNT * (int)sizeof(int) + MPI_BSEND_OVERHEAD;
        char *attach = malloc((size_t)bufsize);
        MPI_Buffer_attach(attach, bufsize);
        if (rank == 0) MPI_Bsend(a, COUNT, MPI_INT, peer, TAG_B, MPI_COMM_WORLD);
        else MPI_Recv(b, COUNT, MPI_INT, peer, TAG_B, MPI_COMM_WORLD, &st);
        MPI_Buffer_detach(&attach, &bufsize);
        free(attach);
        if (rank == 0) MPI_Ssend(a, COUNT, MPI_INT, peer, TAG_S, MPI_COMM_WORLD);
        else MPI_Recv(b, COUNT, MPI_INT, peer, TAG_S, MPI_COMM_WORLD, &st);
        if (rank == 1) MPI_Irecv(b, COUNT, MPI_INT, peer, TAG_R, MPI_COMM_WORLD, &req[0]);
        MPI_Sendrecv(a, 0, MPI_INT, peer, 99, b, 0, MPI_INT, peer, 99, MPI_COMM_WORLD, &st);
        if (rank == 0) MPI_Rsend(a, COUNT, MPI_INT, peer, TAG_R, MPI_COMM_WORLD);
        else MPI_Wait(&req[0], &st);
        /* combined send-receive */
        MPI_Sendrecv(a, COUNT, MPI_INT, peer, TAG_SR, b, COUNT, MPI_INT, peer, TAG_SR, MPI_COMM_WORLD, &st);
        MPI_Sendrecv_replace(a, COUNT, MPI_INT, peer, TAG_SRR, peer, TAG_SRR, MPI_COMM_WORLD, &st);
        /* persistent, three rounds */
        MPI_Send_init(a, COUNT, MPI_INT, peer, TAG_P, MPI_COMM_WORLD, &req[0]);
        MPI_Recv_init(b, COUNT, MPI_INT, peer, TAG_P, MPI_COMM_WORLD, &req[1]);
        for (int i = 0; i < 3; i++) {
            MPI_Startall(2, req);
            MPI_Waitall(2, req, MPI_STATUSES_IGNORE);
        }
        MPI_Request_free(&req[0]);
        MPI_Request_free(&req[1]);
        /* probes: Probe+Recv, Iprobe loop+Recv, Mprobe+Mrecv, Improbe+Imrecv */
        if (rank == 0) {
            for (int t = TAG_PROBE; t <= TAG_IMPROBE; t++) MPI_Send(a, COUNT, MPI_INT, peer, t, MPI_COMM_WORLD);
        } else {
            MPI_Message msg;
            MPI_Probe(peer, TAG_PROBE, MPI_COMM_WORLD, &st);
            MPI_Recv(b, COUNT, MPI_INT, peer, TAG_PROBE, MPI_COMM_WORLD, &st);
            while (!flag) MPI_Iprobe(peer, TAG_IPROBE, MPI_COMM_WORLD, &flag, &st);
            MPI_Recv(b, COUNT, MPI_INT, peer, TAG_IPROBE, MPI_COMM_WORLD, &st);
            MPI_Mprobe(peer, TAG_MPROBE, MPI_COMM_WORLD, &msg, &st);
            MPI_Mrecv(b, COUNT, MPI_INT, &msg, &st);
            flag = 0;
            while (!flag) MPI_Improbe(peer, TAG_IMPROBE, MPI_COMM_WORLD, &flag, &msg, &st);
            MPI_Imrecv(b, COUNT, MPI_INT, &msg, &req[0]);
            MPI_Wait(&req[0], &st);
        }
        /* Waitany, Waitsome, Testall, Issend + Test */
        if (rank == 0) {
            MPI_Send(a, COUNT, MPI_INT, peer, TAG_ANY, MPI_COMM_WORLD);
            MPI_Send(a, COUNT, MPI_INT, peer, TAG_SOME, MPI_COMM_WORLD);
            MPI_Send(a, COUNT, MPI_INT, peer, TAG_TESTALL, MPI_COMM_WORLD);
            MPI_Issend(a, COUNT, MPI_INT, peer, TAG_ISSEND, MPI_COMM_WORLD, &req[0]);
            flag = 0;
            while (!flag) MPI_Test(&req[0], &flag, &st);
        } else {
            int idx, out, ids[1];
            MPI_Irecv(b, COUNT, MPI_INT, peer, TAG_ANY, MPI_COMM_WORLD, &req[0]);
            MPI_Waitany(1, req, &idx, &st);
            MPI_Irecv(b, COUNT, MPI_INT, peer, TAG_SOME, MPI_COMM_WORLD, &req[0]);
            MPI_Waitsome(1, req, &out, ids, MPI_STATUSES_IGNORE);
            MPI_Irecv(b, COUNT, MPI_INT, peer, TAG_TESTALL, MPI_COMM_WORLD, &req[0]);
            flag = 0;
            while (!flag) MPI_Testall(1, req, &flag, MPI_STATUSES_IGNORE);
            MPI_Recv(b, COUNT, MPI_INT, peer, TAG_ISSEND, MPI_COMM_WORLD, &st);
        }
        /* 2 x (3 blocks of 2 doubles): 96 bytes, received with room for 384 */
        double d[48] = {0};
        MPI_Datatype vec;
        MPI_Type_vector(3, 2, 4, MPI_DOUBLE, &vec);
        MPI_Type_commit(&vec);
        if (rank == 0) MPI_Send(d, 2, vec, peer, TAG_DERIVED, MPI_COMM_WORLD);
        else MPI_Recv(d, 48, MPI_DOUBLE, peer, TAG_DERIVED, MPI_COMM_WORLD, &st);
        MPI_Type_free(&vec);
#if MPI_VERSION >= 4 || (defined(OMPI_MAJOR_VERSION) && OMPI_MAJOR_VERSION >= 5)
        /* MPI-4 Isendrecv both ways, then a Sendrecv with the same envelope
         * (MPICH 5.0 completes an Isendrecv with a status that is not its message's) */
        MPI_Request isr;
        MPI_Isendrecv(a, COUNT, MPI_INT, peer, TAG_ISENDRECV, b, COUNT, MPI_INT, peer, TAG_ISENDRECV,
                      MPI_COMM_WORLD, &isr);
        MPI_Wait(&isr, MPI_STATUS_IGNORE);
        MPI_Sendrecv(a, COUNT, MPI_INT, peer, TAG_ISENDRECV, b, COUNT, MPI_INT, peer, TAG_ISENDRECV,
                     MPI_COMM_WORLD, MPI_STATUS_IGNORE);
#endif
        /* Cancelled sends, to itself (MPICH cancels those; Open MPI cancels
         * no send): one completed by Wait, one freed. What was not cancelled
         * is received; then a real message of the same envelope. */
        MPI_Isend(a, COUNT, MPI_INT, 0, TAG_CANCEL, MPI_COMM_SELF, &req[0]);
        MPI_Cancel(&req[0]);
        MPI_Wait(&req[0], &st);
        MPI_Issend(a, COUNT, MPI_INT, 0, TAG_CANCEL, MPI_COMM_SELF, &req[0]);
        MPI_Cancel(&req[0]);
        MPI_Request_free(&req[0]);
        for (flag = 1; flag;) {
            MPI_Iprobe(0, TAG_CANCEL, MPI_COMM_SELF, &flag, &st);
            if (flag) MPI_Recv(b, COUNT, MPI_INT, 0, TAG_CANCEL, MPI_COMM_SELF, &st);
        }
        MPI_Isend(a, COUNT, MPI_INT, 0, TAG_CANCEL, MPI_COMM_SELF, &req[0]);
        MPI_Recv(b, COUNT, MPI_INT, 0, TAG_CANCEL, MPI_COMM_SELF, &st);
        MPI_Wait(&req[0], &st);
        /* MPI_PROC_NULL: no message */
        MPI_Send(a, COUNT, MPI_INT, MPI_PROC_NULL, 0, MPI_COMM_WORLD);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    return 0;
}
