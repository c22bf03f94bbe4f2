/* MPI_Bcast, written by hand (calls.toml: hand = true): recorded as one
 * MPI_Bcast per rank like any collective, and run by the adaptive broadcast
 * (bcast/) when MPISCOPE_BCAST asks for it, recording or not
 * (`mpiscope run --bcast adaptive [--no-record]`).
 *
 * The parameters come from the environment (MPISCOPE_BCAST_*, see
 * bcast/bcast.h); `mpiscope run` checks them and writes them into the
 * manifest, so a value out of range only reaches here when set by hand: it
 * is then named in one line and its default used. The optimiser's swaps go
 * to raw/rank-N.bcast (one text line each), which the merge reads into the
 * manifest.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../bcast/bcast.h"
#include "runtime.h"

static struct msc_bc_params params;
static pthread_once_t params_once = PTHREAD_ONCE_INIT;
static int params_loaded, said_fallback, world_rank = -1;

static void warn(const char *what)
{
    char line[512];
    int n = snprintf(line, sizeof line, "mpiscope: rank %d: %s\n", world_rank, what);
    ssize_t w = write(2, line, n > 0 && (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
    (void)w;
}

static void say(const char *what)
{
    /* once per run, by world rank 0 (by every process of a program that never calls MPI_Init) */
    if (world_rank <= 0) warn(what);
}

static double env_number(const char *name, double def, double lo, double hi, int integer)
{
    const char *v = getenv(name);
    if (!v || !*v) return def;
    char *end = NULL;
    errno = 0;
    double x = strtod(v, &end);
    if (errno || end == v || *end || x < lo || x > hi || (integer && x != (double)(long)x)) {
        char line[256];
        snprintf(line, sizeof line, "%s=%s is out of range; give %s from %g to %g (the default %g is used)", name, v,
                 integer ? "a whole number" : "a number", lo, hi, def);
        say(line);
        return def;
    }
    return x;
}

static void load_params(void)
{
    struct msc_bc_params *p = &params;
    msc_bc_default_params(p);
    const char *mode = getenv("MPISCOPE_BCAST");
    if (mode && *mode) {
        if (strcmp(mode, "adaptive") == 0) p->mode = MSC_BC_ADAPTIVE;
        else if (strcmp(mode, "binomial") == 0) p->mode = MSC_BC_BINOMIAL;
        else if (strcmp(mode, "library") != 0) {
            char line[256];
            snprintf(line, sizeof line, "MPISCOPE_BCAST=%.64s is not a broadcast mode; give adaptive, binomial or "
                     "library (the MPI's own MPI_Bcast runs)", mode);
            say(line);
        }
    }
    p->weight = (int)env_number("MPISCOPE_BCAST_WEIGHT", p->weight, 0, 16, 1);
    p->stable = (int)env_number("MPISCOPE_BCAST_STABLE", p->stable, 0, 1, 1);
    p->stable_tol = env_number("MPISCOPE_BCAST_STABLE_TOL", p->stable_tol, 0, 1, 0);
    p->threshold = env_number("MPISCOPE_BCAST_THRESHOLD", p->threshold, 0, 100, 0);
    p->interval = (int)env_number("MPISCOPE_BCAST_INTERVAL", p->interval, 1, 1 << 20, 1);
    p->interval_max = (int)env_number("MPISCOPE_BCAST_INTERVAL_MAX", p->interval_max, 0, 1 << 29, 1);
    p->change = env_number("MPISCOPE_BCAST_CHANGE", p->change, 0, 100, 0);
    p->halve = (int)env_number("MPISCOPE_BCAST_HALVE", p->halve, 0, 1, 1);
    p->eps_frac = env_number("MPISCOPE_BCAST_EPS", p->eps_frac, 0, 1, 0);
    p->eps_min_s = env_number("MPISCOPE_BCAST_EPS_MIN", p->eps_min_s, 0, 1, 0);
    const char *rep = getenv("MPISCOPE_BCAST_REPORT");
    if (rep && strcmp(rep, "send") == 0) p->report = MSC_BC_REPORT_SEND;
    else if (rep && *rep && strcmp(rep, "put") != 0) {
        say("MPISCOPE_BCAST_REPORT is neither put nor send; give one of them (put is used)");
    }
}

static const struct msc_bc_params *bcast_params(void)
{
    if (MSC_UNLIKELY(!__atomic_load_n(&params_loaded, __ATOMIC_ACQUIRE))) {
        pthread_once(&params_once, load_params);
        __atomic_store_n(&params_loaded, 1, __ATOMIC_RELEASE);
    }
    return &params;
}

/* One line per swap or undo in raw/rank-N.bcast: op, communicator (this
 * rank's id), broadcast number, the two world ranks, next interval, total wait. */
static void log_event(MPI_Comm comm, const struct msc_bc_event *e)
{
    const char *dir = getenv("MPISCOPE_DIR");
    if (!msc_tracking || !dir || !*dir) return;
    uint16_t c = msc_comm_id(comm);
    char path[PATH_MAX], line[256];
    snprintf(path, sizeof path, "%s/raw/rank-%06d.bcast", dir, msc_world_rank_self);
    int n = snprintf(line, sizeof line, "%s %u %llu %d %d %d %lld\n", e->op == MSC_BC_UNDO ? "undo" : "swap",
                     (unsigned)c, (unsigned long long)e->bcast, msc_world_rank(c, e->a), msc_world_rank(c, e->b),
                     e->interval, (long long)(e->total_wait_s * 1e9));
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) return;
    ssize_t w = write(fd, line, (size_t)n); /* O_APPEND: one line, whole */
    (void)w;
    close(fd);
}

/* MPI_Init* returned: the report window of the adaptive broadcast. */
void msc_bcast_init(void)
{
    PMPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    const struct msc_bc_params *p = bcast_params();
    if (p->mode == MSC_BC_LIBRARY) return;
    msc_bc_on_event = log_event;
    if (msc_bc_setup(MPI_COMM_WORLD, p) != MPI_SUCCESS)
        say("the MPI has no one-sided window for the broadcast's reports; they go as messages");
}

void msc_bcast_finalize(void)
{
    if (params.mode != MSC_BC_LIBRARY) msc_bc_teardown();
}

static int library_said(MPI_Comm comm)
{
    /* said once in the run: by the leader of the lower group of an intercommunicator */
    int inter = 0, rank = 0;
    PMPI_Comm_test_inter(comm, &inter);
    PMPI_Comm_rank(comm, &rank);
    if (rank != 0 || __atomic_exchange_n(&said_fallback, 1, __ATOMIC_RELAXED)) return 0;
    if (inter) {
        MPI_Group local, remote, world;
        int zero = 0, me = -1, other = -1;
        PMPI_Comm_group(comm, &local);
        PMPI_Comm_remote_group(comm, &remote);
        PMPI_Comm_group(MPI_COMM_WORLD, &world);
        PMPI_Group_translate_ranks(local, 1, &zero, world, &me);
        PMPI_Group_translate_ranks(remote, 1, &zero, world, &other);
        PMPI_Group_free(&local);
        PMPI_Group_free(&remote);
        PMPI_Group_free(&world);
        if (other != MPI_UNDEFINED && me != MPI_UNDEFINED && other < me) return 0;
    }
    return 1;
}

static int run_bcast(void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm)
{
    const struct msc_bc_params *p = bcast_params();
    if (MSC_LIKELY(p->mode == MSC_BC_LIBRARY)) return PMPI_Bcast(buffer, count, datatype, root, comm);
    int fallback = 0;
    int rc = msc_bc_bcast(buffer, count, datatype, root, comm, p, &fallback);
    if (!fallback) return rc;
    int inter = 0;
    PMPI_Comm_test_inter(comm, &inter);
    if (inter && library_said(comm))
        warn("MPI_Bcast on an intercommunicator runs the MPI's own broadcast (the adaptive one needs an "
             "intracommunicator; said once)");
    return PMPI_Bcast(buffer, count, datatype, root, comm);
}

/* As the generated wrappers record a collective (wrapgen, calls.toml): the root
 * sends the buffer, the others receive it (in a record of its own, as received
 * bytes differ from sent ones), a root of MPI_PROC_NULL (an intercommunicator's
 * idle side) neither. */
static void record_bytes(struct msc_rec *r, uint64_t t_left, uint16_t c, int root, uint64_t buffer)
{
    int idle = root == MPI_PROC_NULL, is_root = !idle && msc_is_root(c, root);
    r->bytes = is_root ? buffer : 0;
    uint64_t received = idle || is_root ? 0 : buffer;
    struct msc_span sp = msc_leave_at(r, t_left);
    if (received != r->bytes) msc_emit_recv_bytes(&sp, received);
}

/* The record of an MPI_Bcast (or _c) just entered: its communicator and sequence number,
 * taken on every rank that tracks, recorded or not (the numbering must stay alike). */
static uint16_t bcast_opened(struct msc_rec *r, MPI_Comm comm)
{
    uint16_t c = msc_tracking ? msc_comm_id(comm) : MSC_COMM_UNKNOWN;
    int32_t seq = msc_tracking ? msc_seq_next(c) : 0;
    if (r) {
        r->comm = c;
        r->tag = seq;
    }
    return c;
}

/* The broadcast returned: its root and bytes, and its record closed. */
static void bcast_closed(struct msc_rec *r, uint16_t c, int root, int64_t count, MPI_Datatype datatype)
{
    uint64_t t_left = r ? msc_ticks() : 0;
    if (r) {
        r->peer = msc_world_root(c, root);
        record_bytes(r, t_left, c, root, msc_bytes(count, datatype));
    }
}

MSC_API int MPI_Bcast(void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm)
{
    struct msc_rec *r = msc_enter(MSC_CALL_BCAST, __builtin_return_address(0));
    uint16_t c = bcast_opened(r, comm);
    int rc = run_bcast(buffer, count, datatype, root, comm);
    bcast_closed(r, c, root, count, datatype);
    return rc;
}

#if MPI_VERSION >= 4
static int said_large;

MSC_API int MPI_Bcast_c(void *buffer, MPI_Count count, MPI_Datatype datatype, int root, MPI_Comm comm)
{
    struct msc_rec *r = msc_enter(MSC_CALL_BCAST_C, __builtin_return_address(0));
    uint16_t c = bcast_opened(r, comm);
    /* Decided on the bytes, which every rank has alike (a rank may count
     * more elements of a smaller type): up to INT_MAX bytes every count fits. */
    MPI_Count size = 0;
    if (count > 0) PMPI_Type_size_x(datatype, &size);
    int rc;
    if ((count <= 0 || size * count <= INT_MAX) || bcast_params()->mode == MSC_BC_LIBRARY) {
        rc = count <= INT_MAX ? run_bcast(buffer, (int)count, datatype, root, comm)
                              : PMPI_Bcast_c(buffer, count, datatype, root, comm);
    } else {
        int rank = 0;
        PMPI_Comm_rank(comm, &rank);
        if (rank == 0 && !__atomic_exchange_n(&said_large, 1, __ATOMIC_RELAXED))
            warn("MPI_Bcast_c of more than INT_MAX bytes runs the MPI's own broadcast (said once)");
        rc = PMPI_Bcast_c(buffer, count, datatype, root, comm);
    }
    bcast_closed(r, c, root, count, datatype);
    return rc;
}
#endif
