/* The call pattern of Intel MPI Benchmarks' IMB-MPI1 default run: each
 * benchmark in its order (PingPong, PingPing, Sendrecv, Exchange, then the
 * collectives) at message sizes 0, 1, 2, 4, ... MAX bytes, with IMB's
 * repetition rule (REPS, fewer for large messages: at most 40 MB per size)
 * and a barrier before each size. PingPong and PingPing run on ranks 0 and 1
 * while the others wait in the barrier, as IMB runs them on 2 processes.
 * usage: imb_like [reps] [max_bytes]          (defaults 200, 65536) */
#include <mpi.h>
#include <stdlib.h>

enum { PINGPONG, PINGPING, SENDRECV, EXCHANGE, ALLREDUCE, REDUCE, REDUCE_SCATTER, ALLGATHER, ALLGATHERV,
       GATHER, GATHERV, SCATTER, SCATTERV, ALLTOALL, ALLTOALLV, BCAST, BARRIER, BENCHMARKS };

static int rank, size;
static char *sbuf, *rbuf;
static int *counts, *displs;

static void once(int bench, int bytes)
{
    int left = (rank + size - 1) % size, right = (rank + 1) % size, other = rank ^ 1, n = bytes / 4;
    MPI_Request req[4];
    for (int i = 0; i < size; i++) {
        counts[i] = n;
        displs[i] = i * n;
    }
    switch (bench) {
    case PINGPONG:
        if (rank == 0) {
            MPI_Send(sbuf, bytes, MPI_BYTE, 1, 1, MPI_COMM_WORLD);
            MPI_Recv(rbuf, bytes, MPI_BYTE, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else if (rank == 1) {
            MPI_Recv(rbuf, bytes, MPI_BYTE, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(sbuf, bytes, MPI_BYTE, 0, 1, MPI_COMM_WORLD);
        }
        break;
    case PINGPING:
        if (rank < 2) {
            MPI_Isend(sbuf, bytes, MPI_BYTE, other, 1, MPI_COMM_WORLD, &req[0]);
            MPI_Recv(rbuf, bytes, MPI_BYTE, other, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Wait(&req[0], MPI_STATUS_IGNORE);
        }
        break;
    case SENDRECV:
        MPI_Sendrecv(sbuf, bytes, MPI_BYTE, right, 1, rbuf, bytes, MPI_BYTE, left, 1, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
        break;
    case EXCHANGE:
        MPI_Isend(sbuf, bytes, MPI_BYTE, left, 1, MPI_COMM_WORLD, &req[0]);
        MPI_Isend(sbuf, bytes, MPI_BYTE, right, 1, MPI_COMM_WORLD, &req[1]);
        MPI_Recv(rbuf, bytes, MPI_BYTE, left, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Recv(rbuf, bytes, MPI_BYTE, right, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Waitall(2, req, MPI_STATUSES_IGNORE);
        break;
    case ALLREDUCE: MPI_Allreduce(sbuf, rbuf, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); break;
    case REDUCE: MPI_Reduce(sbuf, rbuf, n, MPI_FLOAT, MPI_SUM, 0, MPI_COMM_WORLD); break;
    case REDUCE_SCATTER: MPI_Reduce_scatter(sbuf, rbuf, counts, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); break;
    case ALLGATHER: MPI_Allgather(sbuf, bytes, MPI_BYTE, rbuf, bytes, MPI_BYTE, MPI_COMM_WORLD); break;
    case ALLGATHERV:
        MPI_Allgatherv(sbuf, n, MPI_FLOAT, rbuf, counts, displs, MPI_FLOAT, MPI_COMM_WORLD);
        break;
    case GATHER: MPI_Gather(sbuf, bytes, MPI_BYTE, rbuf, bytes, MPI_BYTE, 0, MPI_COMM_WORLD); break;
    case GATHERV: MPI_Gatherv(sbuf, n, MPI_FLOAT, rbuf, counts, displs, MPI_FLOAT, 0, MPI_COMM_WORLD); break;
    case SCATTER: MPI_Scatter(sbuf, bytes, MPI_BYTE, rbuf, bytes, MPI_BYTE, 0, MPI_COMM_WORLD); break;
    case SCATTERV:
        MPI_Scatterv(sbuf, counts, displs, MPI_FLOAT, rbuf, n, MPI_FLOAT, 0, MPI_COMM_WORLD);
        break;
    case ALLTOALL: MPI_Alltoall(sbuf, bytes, MPI_BYTE, rbuf, bytes, MPI_BYTE, MPI_COMM_WORLD); break;
    case ALLTOALLV:
        MPI_Alltoallv(sbuf, counts, displs, MPI_FLOAT, rbuf, counts, displs, MPI_FLOAT, MPI_COMM_WORLD);
        break;
    case BCAST: MPI_Bcast(sbuf, bytes, MPI_BYTE, 0, MPI_COMM_WORLD); break;
    default: MPI_Barrier(MPI_COMM_WORLD);
    }
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int reps = argc > 1 ? atoi(argv[1]) : 200, max = argc > 2 ? atoi(argv[2]) : 65536;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    size_t room = (size_t)max * (size_t)size + 16;
    sbuf = calloc(room, 1);
    rbuf = calloc(room, 1);
    counts = malloc(sizeof(int) * (size_t)size);
    displs = malloc(sizeof(int) * (size_t)size);
    for (int bench = 0; bench < BENCHMARKS; bench++) {
        for (int bytes = 0; bytes <= max; bytes = bytes ? 2 * bytes : 1) {
            /* IMB: 1000 repetitions, at most 40 MB of messages per size (scaled to REPS) */
            long volume = 40L * 1024 * 1024 / (bytes ? bytes : 1);
            int n = (int)(volume < reps ? (volume > 0 ? volume : 1) : reps);
            MPI_Barrier(MPI_COMM_WORLD);
            for (int i = 0; i < n; i++) once(bench, bytes);
            if (bench == BARRIER) break;
        }
    }
    free(displs);
    free(counts);
    free(rbuf);
    free(sbuf);
    MPI_Finalize();
    return 0;
}
