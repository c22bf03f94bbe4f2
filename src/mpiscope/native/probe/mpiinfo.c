/* Prints, as JSON, the MPI this program was compiled and linked against:
 * mpiconfig.json, which `mpiscope doctor` compares with the MPI found now.
 * MPI_Get_library_version may be called before MPI_Init (MPI-3.1 §8.1.1). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>

static void json_string(const char *s)
{
    putchar('"');
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') printf("\\%c", *s);
        else if (*s == '\n') printf("\\n");
        else if ((unsigned char)*s >= 0x20) putchar(*s);
    }
    putchar('"');
}

int main(void)
{
    char version[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0, major = 0, minor = 0;
    Dl_info where = {0};
    MPI_Get_library_version(version, &len);
    MPI_Get_version(&major, &minor);
    /* dladdr wants an object pointer; go through an integer (POSIX allows it) */
    dladdr((void *)(uintptr_t)&PMPI_Init, &where);
    printf("{\n  \"library_version\": ");
    json_string(version);
    printf(",\n  \"mpi_version\": \"%d.%d\",\n  \"libmpi\": ", major, minor);
    json_string(where.dli_fname ? where.dli_fname : "");
    printf(",\n  \"compiler\": ");
    json_string(MSC_COMPILER);
    printf(",\n  \"table_sha256\": \"%s\",\n  \"sizeof_comm\": %zu\n}\n", MSC_TABLE_HASH, sizeof(MPI_Comm));
    return 0;
}
