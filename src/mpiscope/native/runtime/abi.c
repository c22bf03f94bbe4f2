/* Programs built for the MPI standard ABI (MPI-5; MPICH >= 4.3 with
 * `mpicc -mpi-abi`) link libmpi_abi, whose handles and constants are not
 * those of the MPI's own libmpi. This library's MPI_Init would start the
 * other libmpi and the program would crash in its first unwrapped call, so a
 * build of it for libmpi, preloaded into such a program, hands over to the
 * build for the ABI (abi/libmpiscope.so beside it, see CMakeLists.txt) by
 * executing the program again with that one preloaded. The check runs before
 * main, when the program's libraries are loaded and nothing has run yet; the
 * process keeps its pid, so launchers do not notice.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime.h"

#ifndef MPI_ABI_VERSION
#define SWITCHED "MSC_ABI_SWITCHED"

static const char anchor; /* an address inside this library, for dladdr */

static int abi_library_loaded(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    (void)data;
    const char *base = strrchr(info->dlpi_name, '/');
    base = base ? base + 1 : info->dlpi_name;
    return strncmp(base, "libmpi_abi.so", 13) == 0;
}

/* LD_PRELOAD with every libmpiscope.so replaced by `abi` ("LD_PRELOAD=" included). */
static char *preload_with(const char *abi)
{
    const char *old = getenv("LD_PRELOAD");
    size_t cap = strlen("LD_PRELOAD=") + strlen(abi) + (old ? strlen(old) : 0) + 2;
    char *out = malloc(cap);
    if (!out) return NULL;
    snprintf(out, cap, "LD_PRELOAD=%s", abi);
    char *copy = strdup(old ? old : "");
    for (char *save = NULL, *item = copy ? strtok_r(copy, ": ", &save) : NULL; item;
         item = strtok_r(NULL, ": ", &save)) {
        const char *base = strrchr(item, '/');
        if (strcmp(base ? base + 1 : item, "libmpiscope.so") == 0) continue;
        strcat(out, ":");
        strcat(out, item);
    }
    free(copy);
    return out;
}

/* One line per job, not per rank: the launcher's rank variable, where it sets one. */
static int first_rank(void)
{
    static const char *const vars[] = {"PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "SLURM_PROCID"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = getenv(vars[i]);
        if (v) return strcmp(v, "0") == 0;
    }
    return 1;
}

__attribute__((constructor)) static void msc_abi_handover(int argc, char **argv, char **envp)
{
    (void)argc;
    if (!dl_iterate_phdr(abi_library_loaded, NULL)) return;
    Dl_info self;
    char abi[4096];
    const char *slash = NULL;
    if (dladdr(&anchor, &self) && self.dli_fname) slash = strrchr(self.dli_fname, '/');
    int len = slash ? (int)(slash - self.dli_fname) : 0;
    snprintf(abi, sizeof abi, "%.*s/abi/libmpiscope.so", len, slash ? self.dli_fname : ".");
    if (getenv(SWITCHED) || access(abi, R_OK) != 0) {
        if (first_rank())
            fprintf(stderr, "mpiscope: %s is built for the MPI standard ABI (libmpi_abi) and no libmpiscope "
                "for it was found at %s; rebuild with `mpiscope doctor --rebuild` from an MPI whose mpicc "
                "has -mpi-abi, or build the program without -mpi-abi\n", argv && argv[0] ? argv[0] : "the program",
                abi);
        _exit(127);
    }
    size_t n = 0;
    while (envp[n]) n++;
    char **env = calloc(n + 3, sizeof *env);
    char *preload = preload_with(abi);
    if (!env || !preload) _exit(127);
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (strncmp(envp[i], "LD_PRELOAD=", 11) != 0) env[k++] = envp[i];
    env[k++] = preload;
    env[k++] = SWITCHED "=1";
    env[k] = NULL;
    execve("/proc/self/exe", argv, env);
    fprintf(stderr, "mpiscope: could not restart %s with the MPI ABI build of libmpiscope (%s); run it "
            "without mpiscope, or build it without -mpi-abi\n", argv && argv[0] ? argv[0] : "the program", abi);
    _exit(127);
}
#endif
