/* The only clock of the recorder, and the offsets of each rank against rank 0.
 *
 * Events are stamped with the TSC when the kernel itself trusts it as its
 * clock source (invariant, synchronised across cores): ~11 ns a read here,
 * against ~29 ns for clock_gettime. Calibration pairs (tick, CLOCK_MONOTONIC
 * ns) in the headers let the merge convert ticks to ns.
 *
 * Offsets: CLOCK_MONOTONIC is one clock per booted system, so ranks on the
 * same host as rank 0 (same boot id) need no measurement. Others ping-pong
 * with rank 0 and keep the offset of the fastest round trip (Cristian's
 * method); the merge interpolates linearly between init and finalize.
 * MPISCOPE_SYNC=always measures even on one host (used by the tests).
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "runtime.h"

int msc_use_tsc;

#define SYNC_ROUNDS 24
#define SYNC_TAG 7117

uint64_t msc_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void read_small_file(const char *path, char *buf, size_t size)
{
    buf[0] = '\0';
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    ssize_t n = read(fd, buf, size - 1);
    close(fd);
    if (n <= 0) return;
    buf[n] = '\0';
    char *nl = strchr(buf, '\n');
    if (nl) *nl = '\0';
}

__attribute__((constructor)) static void msc_clock_setup(void)
{
#ifdef MSC_HAVE_TSC
    char source[64];
    const char *force = getenv("MPISCOPE_CLOCK");
    read_small_file("/sys/devices/system/clocksource/clocksource0/current_clocksource", source,
                    sizeof source);
    msc_use_tsc = strcmp(source, "tsc") == 0 && !(force && strcmp(force, "monotonic") == 0);
#endif
}

/* A (tick, ns) pair: the tightest of a few brackets, so that a preemption
 * between the two reads (frequent on oversubscribed cores) does not skew it. */
void msc_clock_pair(uint64_t *tick, uint64_t *ns)
{
    uint64_t best = UINT64_MAX;
    for (int i = 0; i < 5; i++) {
        uint64_t a = msc_ticks();
        uint64_t n = msc_now_ns();
        uint64_t b = msc_ticks();
        if (b - a < best) {
            best = b - a;
            *tick = a + (b - a) / 2;
            *ns = n;
        }
    }
}

void msc_boot_id(char *buf, size_t size)
{
    read_small_file("/proc/sys/kernel/random/boot_id", buf, size);
}

/* Measure this rank's offset to rank 0 over the private communicator; ranks
 * that booted with rank 0 (boot_id: this rank's, "" if unknown) share its clock. */
void msc_clock_sync(MPI_Comm comm, const char *boot_id, int64_t *offset, int64_t *rtt, uint64_t *at)
{
    int rank, size;
    char boot0[40];
    PMPI_Comm_rank(comm, &rank);
    PMPI_Comm_size(comm, &size);
    strncpy(boot0, boot_id, sizeof boot0 - 1);
    boot0[sizeof boot0 - 1] = '\0';
    PMPI_Bcast(boot0, sizeof boot0, MPI_CHAR, 0, comm);
    const char *force = getenv("MPISCOPE_SYNC");
    int measure = rank != 0 && (strcmp(boot0, boot_id) != 0 || (force && strcmp(force, "always") == 0));
    int *flags = rank == 0 ? calloc((size_t)size, sizeof(int)) : NULL;
    PMPI_Gather(&measure, 1, MPI_INT, flags, 1, MPI_INT, 0, comm);
    *offset = 0;
    *rtt = 0;
    *at = msc_now_ns();
    if (rank == 0) {
        for (int r = 1; r < size; r++) {
            if (!flags || !flags[r]) continue;
            for (int k = 0; k < SYNC_ROUNDS; k++) {
                uint64_t dummy, now;
                PMPI_Recv(&dummy, 1, MPI_UINT64_T, r, SYNC_TAG, comm, MPI_STATUS_IGNORE);
                now = msc_now_ns();
                PMPI_Send(&now, 1, MPI_UINT64_T, r, SYNC_TAG, comm);
            }
        }
        free(flags);
    } else if (measure) {
        int64_t best = INT64_MAX;
        for (int k = 0; k < SYNC_ROUNDS; k++) {
            uint64_t t1 = msc_now_ns(), t0;
            PMPI_Send(&t1, 1, MPI_UINT64_T, 0, SYNC_TAG, comm);
            PMPI_Recv(&t0, 1, MPI_UINT64_T, 0, SYNC_TAG, comm, MPI_STATUS_IGNORE);
            uint64_t t2 = msc_now_ns();
            int64_t trip = (int64_t)(t2 - t1);
            if (trip < best) {
                best = trip;
                *offset = (int64_t)(t1 + (t2 - t1) / 2) - (int64_t)t0;
                *at = t1 + (t2 - t1) / 2;
            }
        }
        *rtt = best;
    }
}
