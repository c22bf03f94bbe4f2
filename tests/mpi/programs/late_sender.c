/* Late sender: the receiver waits for a sender that computes (sleeps) first.
 *   late_sender MODE ITERS DELAY_MS
 * (Each mode has its own tag. Build it with -O0, so that the compiler merges no two
 * alike calls and each keeps the line of its call site.)
 * blocking (2 ranks): rank 1 sleeps DELAY, then MPI_Send; rank 0 waits in MPI_Recv.
 * nonblocking (2 ranks): the same with MPI_Isend / MPI_Irecv + MPI_Wait.
 * waitall (3 ranks): rank 0 receives from ranks 1 (late by DELAY) and 2 (late by
 *   2 DELAY) with one MPI_Waitall: it waits 2 DELAY per iteration, not 3.
 * persistent (2 ranks): rank 0 receives with MPI_Recv_init + MPI_Start + MPI_Wait: it waits
 *   in the MPI_Wait, not in the MPI_Start.
 * startall (2 ranks): rank 0 starts two persistent receives with one MPI_Startall and polls them
 *   with MPI_Testsome, which completes them one at a time; rank 1 sends each after DELAY: rank 0
 *   waits 2 DELAY per iteration in MPI_Testsome, none in the MPI_Startall.
 * polling (2 ranks): rank 0 receives with MPI_Irecv and a loop of MPI_Test: it waits in
 *   the loop's calls (folded into one row), not only in the MPI_Test that completes.
 * probing (2 ranks): rank 0 loops on MPI_Iprobe until the message is there, then MPI_Recv:
 *   it waits in the probes.
 * probe (2 ranks): rank 0 waits in MPI_Probe, then receives the message it found with MPI_Recv.
 * mprobe (2 ranks): rank 0 waits in MPI_Mprobe, then receives with MPI_Mrecv (mpi4py's recv()).
 * wrong_order (3 ranks): rank 1 sends at once, rank 2 after DELAY; rank 0 receives
 *   from rank 2 first (after DELAY / 4, so it waits 3/4 DELAY), while rank 1's message
 *   is already there. */
#include <mpi.h>
#include <string.h>

#include "delay.h"

int main(int argc, char **argv)
{
    int rank, x = 0, y = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    const char *mode = argc > 1 ? argv[1] : "blocking";
    int iters = (int)arg(argc, argv, 2, 5);
    double d = arg(argc, argv, 3, 40);
    MPI_Request req[2];
    int paced = !strcmp(mode, "waitall") || !strcmp(mode, "wrong_order");
    MPI_Barrier(MPI_COMM_WORLD);
    for (int i = 0; i < iters; i++) {
        /* the senders to one receiver start when it says go (a lone sender is paced by its own
         * sleeps): a broadcast, since the root goes on at once, unlike after a barrier */
        if (paced)
            MPI_Bcast(&i, 1, MPI_INT, 0, MPI_COMM_WORLD);
        if (!strcmp(mode, "blocking")) {
            if (rank == 1) {
                sleep_ms(d);
                MPI_Send(&x, 1, MPI_INT, 0, 1, MPI_COMM_WORLD); /* LATE_SEND */
            } else if (rank == 0) {
                MPI_Recv(&y, 1, MPI_INT, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE); /* WAIT_RECV */
            }
        } else if (!strcmp(mode, "nonblocking")) {
            if (rank == 1) {
                sleep_ms(d);
                MPI_Isend(&x, 1, MPI_INT, 0, 2, MPI_COMM_WORLD, &req[0]); /* LATE_ISEND */
                MPI_Wait(&req[0], MPI_STATUS_IGNORE);
            } else if (rank == 0) {
                MPI_Irecv(&y, 1, MPI_INT, 1, 2, MPI_COMM_WORLD, &req[0]);
                MPI_Wait(&req[0], MPI_STATUS_IGNORE); /* WAIT_WAIT */
            }
        } else if (!strcmp(mode, "waitall")) {
            if (rank == 0) {
                MPI_Irecv(&x, 1, MPI_INT, 1, 3, MPI_COMM_WORLD, &req[0]);
                MPI_Irecv(&y, 1, MPI_INT, 2, 3, MPI_COMM_WORLD, &req[1]);
                MPI_Waitall(2, req, MPI_STATUSES_IGNORE); /* WAIT_WAITALL */
            } else {
                sleep_ms(rank * d);
                MPI_Send(&x, 1, MPI_INT, 0, 3, MPI_COMM_WORLD); /* LATE_SEND_ALL */
            }
        } else if (!strcmp(mode, "persistent")) {
            if (rank == 0) {
                MPI_Recv_init(&y, 1, MPI_INT, 1, 5, MPI_COMM_WORLD, &req[0]);
                MPI_Start(&req[0]);
                MPI_Wait(&req[0], MPI_STATUS_IGNORE); /* WAIT_PERSISTENT */
                MPI_Request_free(&req[0]);
            } else if (rank == 1) {
                sleep_ms(d);
                MPI_Send(&x, 1, MPI_INT, 0, 5, MPI_COMM_WORLD); /* LATE_SEND_P */
            }
        } else if (!strcmp(mode, "startall")) {
            if (rank == 0) {
                int ys[2], done = 0, count, which[2];
                for (int k = 0; k < 2; k++)
                    MPI_Recv_init(&ys[k], 1, MPI_INT, 1, 8 + k, MPI_COMM_WORLD, &req[k]);
                MPI_Startall(2, req);
                while (done < 2) {
                    MPI_Testsome(2, req, &count, which, MPI_STATUSES_IGNORE); /* WAIT_TESTSOME */
                    done += count == MPI_UNDEFINED ? 0 : count;
                }
                for (int k = 0; k < 2; k++)
                    MPI_Request_free(&req[k]);
            } else if (rank == 1) {
                for (int k = 0; k < 2; k++) {
                    sleep_ms(d);
                    MPI_Send(&x, 1, MPI_INT, 0, 8 + k, MPI_COMM_WORLD); /* LATE_SEND_SA */
                }
            }
        } else if (!strcmp(mode, "polling")) {
            if (rank == 0) {
                int done = 0;
                MPI_Irecv(&y, 1, MPI_INT, 1, 6, MPI_COMM_WORLD, &req[0]);
                while (!done)
                    MPI_Test(&req[0], &done, MPI_STATUS_IGNORE); /* WAIT_TEST */
            } else if (rank == 1) {
                sleep_ms(d);
                MPI_Send(&x, 1, MPI_INT, 0, 6, MPI_COMM_WORLD); /* LATE_SEND_T */
            }
        } else if (!strcmp(mode, "probing")) {
            if (rank == 0) {
                int found = 0;
                while (!found)
                    MPI_Iprobe(1, 7, MPI_COMM_WORLD, &found, MPI_STATUS_IGNORE); /* WAIT_PROBE */
                MPI_Recv(&y, 1, MPI_INT, 1, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            } else if (rank == 1) {
                sleep_ms(d);
                MPI_Send(&x, 1, MPI_INT, 0, 7, MPI_COMM_WORLD); /* LATE_SEND_PR */
            }
        } else if (!strcmp(mode, "probe")) {
            if (rank == 0) {
                MPI_Status st;
                MPI_Probe(MPI_ANY_SOURCE, 10, MPI_COMM_WORLD, &st); /* WAIT_BPROBE */
                MPI_Recv(&y, 1, MPI_INT, st.MPI_SOURCE, 10, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            } else if (rank == 1) {
                sleep_ms(d);
                MPI_Send(&x, 1, MPI_INT, 0, 10, MPI_COMM_WORLD); /* LATE_SEND_BP */
            }
        } else if (!strcmp(mode, "mprobe")) {
            if (rank == 0) {
                MPI_Message msg;
                MPI_Mprobe(1, 11, MPI_COMM_WORLD, &msg, MPI_STATUS_IGNORE); /* WAIT_MPROBE */
                MPI_Mrecv(&y, 1, MPI_INT, &msg, MPI_STATUS_IGNORE);
            } else if (rank == 1) {
                sleep_ms(d);
                MPI_Send(&x, 1, MPI_INT, 0, 11, MPI_COMM_WORLD); /* LATE_SEND_MP */
            }
        } else if (!strcmp(mode, "wrong_order")) {
            if (rank == 0) {
                sleep_ms(d / 4);
                MPI_Recv(&x, 1, MPI_INT, 2, 4, MPI_COMM_WORLD, MPI_STATUS_IGNORE); /* WAIT_RECV_WO */
                MPI_Recv(&y, 1, MPI_INT, 1, 4, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            } else if (rank == 1) {
                MPI_Send(&x, 1, MPI_INT, 0, 4, MPI_COMM_WORLD);
            } else {
                sleep_ms(d);
                MPI_Send(&x, 1, MPI_INT, 0, 4, MPI_COMM_WORLD); /* LATE_SEND_WO */
            }
        }
    }
    MPI_Finalize();
    return 0;
}
