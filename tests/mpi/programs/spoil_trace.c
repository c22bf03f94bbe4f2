/* A program whose trace cannot be merged: after MPI_Finalize each rank overwrites its own
 * rank file (it finds it through MPISCOPE_DIR) with bytes that are no rank file, then exits
 * with the code given.   spoil_trace EXIT_CODE */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    int rank;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    const char *dir = getenv("MPISCOPE_DIR");
    if (dir) {
        char path[4096];
        snprintf(path, sizeof path, "%s/raw/rank-%06d.msc", dir, rank);
        FILE *f = fopen(path, "wb");
        if (f) {
            fputs("not a rank file", f);
            fclose(f);
        }
    }
    return argc > 1 ? atoi(argv[1]) : 0;
}
