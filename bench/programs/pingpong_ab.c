/* 8-byte ping-pong, traced and untraced in the same run: under a PMPI tool
 * (LD_PRELOAD) the MPI_ calls go through the tool and the PMPI_ calls go
 * straight to the MPI, so alternating blocks of each compares the two on the
 * same processes, cores and memory, a few milliseconds apart. Separate runs
 * on a shared VM differ by +-30 % in their untraced time alone.
 * usage: pingpong_ab [iters per block] [block pairs] [bytes]
 * Prints, from rank 0, the half round trip of each kind (us, over all its
 * blocks) and the median over block pairs of traced/untraced. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double block(int tool, int rank, int iters, char *buf, int bytes)
{
    int (*send)(const void *, int, MPI_Datatype, int, int, MPI_Comm) = tool ? MPI_Send : PMPI_Send;
    int (*recv)(void *, int, MPI_Datatype, int, int, MPI_Comm, MPI_Status *) = tool ? MPI_Recv : PMPI_Recv;
    double t0 = PMPI_Wtime();
    for (int i = 0; i < iters; i++) {
        if (rank == 0) {
            send(buf, bytes, MPI_BYTE, 1, 1, MPI_COMM_WORLD);
            recv(buf, bytes, MPI_BYTE, 1, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else if (rank == 1) {
            recv(buf, bytes, MPI_BYTE, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            send(buf, bytes, MPI_BYTE, 0, 2, MPI_COMM_WORLD);
        }
    }
    return PMPI_Wtime() - t0;
}

int main(int argc, char **argv)
{
    int rank;
    MPI_Init(&argc, &argv);
    int iters = argc > 1 ? atoi(argv[1]) : 2000, pairs = argc > 2 ? atoi(argv[2]) : 100;
    int bytes = argc > 3 ? atoi(argv[3]) : 8;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    char *buf = calloc((size_t)bytes + 1, 1);
    double *ratio = malloc(sizeof(double) * (size_t)pairs), sum[2] = {0, 0};
    block(0, rank, iters, buf, bytes); /* warm-up */
    block(1, rank, iters, buf, bytes);
    PMPI_Barrier(MPI_COMM_WORLD);
    for (int p = 0; p < pairs; p++) {
        /* Alternate which kind goes first, so neither always follows the other. */
        double t[2];
        int first = p & 1;
        t[first] = block(first, rank, iters, buf, bytes);
        t[!first] = block(!first, rank, iters, buf, bytes);
        sum[0] += t[0];
        sum[1] += t[1];
        ratio[p] = t[1] / t[0];
    }
    if (rank == 0) {
        qsort(ratio, (size_t)pairs, sizeof(double), cmp);
        printf("untraced_half_round_trip_us %.4f\n", sum[0] / ((double)iters * pairs) / 2 * 1e6);
        printf("traced_half_round_trip_us %.4f\n", sum[1] / ((double)iters * pairs) / 2 * 1e6);
        printf("median_block_ratio %.4f\n", ratio[pairs / 2]);
    }
    PMPI_Barrier(MPI_COMM_WORLD);
    free(ratio);
    free(buf);
    MPI_Finalize();
    return 0;
}
