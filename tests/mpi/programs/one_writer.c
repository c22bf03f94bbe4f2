/* One rank writes a file alone while the others wait in a barrier (2 ranks): the file is opened by
 * both (collectively), rank 0 writes MIB MiB with independent MPI_File_write_at calls, then both
 * meet in MPI_Barrier and close it.
 *   one_writer FILE MIB */
#include <mpi.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    int rank;
    MPI_File fh;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    int mib = argc > 2 ? atoi(argv[2]) : 64;
    char *buf = calloc(1, 1 << 20);
    MPI_File_open(MPI_COMM_WORLD, argv[1], MPI_MODE_CREATE | MPI_MODE_WRONLY, MPI_INFO_NULL, &fh);
    for (int round = 0; round < 3; round++) {
        if (rank == 0)
            for (int i = 0; i < mib; i++)
                MPI_File_write_at(fh, (MPI_Offset)i << 20, buf, 1 << 20, MPI_CHAR, MPI_STATUS_IGNORE);
        MPI_Barrier(MPI_COMM_WORLD);
    }
    MPI_File_close(&fh);
    free(buf);
    MPI_Finalize();
    return 0;
}
