/* A solver that checkpoints through MPI-IO: each iteration computes (a sleep
 * of COMPUTE_MS, twice as long on the last rank), exchanges a halo with its
 * neighbours and agrees on a residual (MPI_Allreduce); every CHECKPOINT_EVERY
 * iterations every rank writes its block of BYTES bytes into one shared file
 * ($TMPDIR or /tmp) at its own offset, collectively (MPI_File_write_at_all), and syncs it. At
 * the end each rank checks the file's size and reads its last block back four ways (a collective read
 * through a file view, a split collective, a nonblocking read completed by
 * MPI_Wait, an independent read) and checks it, then the file is deleted.
 *
 *     mpiexec -n 4 ./checkpoint [ITERATIONS=6] [BYTES=1048576] [CHECKPOINT_EVERY=3] [COMPUTE_MS=20]
 *
 * The time in the MPI_File_* calls is I/O: a tracer that does not record
 * them counts it as computation. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static void compute(int ms)
{
    struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&t, NULL);
}

static int check(const char *how, const int *got, int n, int iteration, int rank)
{
    for (int i = 0; i < n; i++)
        if (got[i] != iteration * 1000003 + rank * 7919 + i) {
            fprintf(stderr, "rank %d: %s read back word %d wrong\n", rank, how, i);
            return 1;
        }
    return 0;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int iterations = argc > 1 ? atoi(argv[1]) : 6;
    long bytes = argc > 2 ? atol(argv[2]) : 1048576;
    int every = argc > 3 ? atoi(argv[3]) : 3;
    int compute_ms = argc > 4 ? atoi(argv[4]) : 20;
    int n = (int)(bytes / (long)sizeof(int));
    int *block = malloc((size_t)n * sizeof(int)), *back = malloc((size_t)n * sizeof(int));
    double halo_out = rank, halo_in = 0, residual = 0;
    int right = (rank + 1) % size, left = (rank + size - 1) % size, last = -1;
    char path[256];
    const char *dir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(path, sizeof path, "%s/mpiscope-checkpoint-%d.dat", dir, (int)getpid());
    MPI_Bcast(path, (int)sizeof path, MPI_CHAR, 0, MPI_COMM_WORLD);

    MPI_File fh;
    MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL, &fh);
    for (int it = 1; it <= iterations; it++) {
        compute(rank == size - 1 ? 2 * compute_ms : compute_ms);
        MPI_Sendrecv(&halo_out, 1, MPI_DOUBLE, right, 0, &halo_in, 1, MPI_DOUBLE, left, 0, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
        double mine = halo_in / it;
        MPI_Allreduce(&mine, &residual, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        if (it % every == 0) {
            for (int i = 0; i < n; i++)
                block[i] = it * 1000003 + rank * 7919 + i;
            MPI_File_write_at_all(fh, (MPI_Offset)rank * n * (MPI_Offset)sizeof(int), block, n, MPI_INT,
                                  MPI_STATUS_IGNORE);
            MPI_File_sync(fh);
            last = it;
        }
    }
    int bad = 0;
    if (last > 0) {
        /* sync-barrier-sync: what the collective writes put in the file, through whichever rank
         * wrote it, is there for every rank's reads */
        MPI_File_sync(fh);
        MPI_Barrier(MPI_COMM_WORLD);
        MPI_File_sync(fh);
        MPI_Offset written;
        MPI_File_get_size(fh, &written);
        if (written != (MPI_Offset)size * n * (MPI_Offset)sizeof(int)) {
            fprintf(stderr, "rank %d: the file has %lld bytes\n", rank, (long long)written);
            bad = 1;
        }
        MPI_File_set_view(fh, (MPI_Offset)rank * n * (MPI_Offset)sizeof(int), MPI_INT, MPI_INT, "native",
                          MPI_INFO_NULL);
        memset(back, 0, (size_t)n * sizeof(int));
        MPI_File_read_at_all(fh, 0, back, n, MPI_INT, MPI_STATUS_IGNORE);
        bad |= check("MPI_File_read_at_all", back, n, last, rank);
        memset(back, 0, (size_t)n * sizeof(int));
        MPI_File_read_at_all_begin(fh, 0, back, n, MPI_INT);
        MPI_File_read_at_all_end(fh, back, MPI_STATUS_IGNORE);
        bad |= check("MPI_File_read_at_all_begin/end", back, n, last, rank);
        memset(back, 0, (size_t)n * sizeof(int));
        MPI_Request req;
        MPI_File_iread_at(fh, 0, back, n, MPI_INT, &req);
        MPI_Wait(&req, MPI_STATUS_IGNORE);
        bad |= check("MPI_File_iread_at", back, n, last, rank);
        memset(back, 0, (size_t)n * sizeof(int));
        MPI_File_read_at(fh, 0, back, n, MPI_INT, MPI_STATUS_IGNORE);
        bad |= check("MPI_File_read_at", back, n, last, rank);
    }
    MPI_File_close(&fh);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0)
        MPI_File_delete(path, MPI_INFO_NULL);
    int any_bad = 0;
    MPI_Allreduce(&bad, &any_bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0)
        printf("checkpoint: %d iterations, %d checkpoints of %ld bytes per rank, residual %g, %s\n", iterations,
               last > 0 ? iterations / every : 0, bytes, residual, any_bad ? "read back WRONG" : "read back ok");
    free(block);
    free(back);
    MPI_Finalize();
    return any_bad;
}
