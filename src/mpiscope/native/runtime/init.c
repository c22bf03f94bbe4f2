/* Start and end of recording: MPI_Init*, MPI_Finalize, MPI_Pcontrol, MPI_Abort
 * (sessions, which may start and end it too, are in session.c).
 *
 * Recording is on when MPISCOPE_DIR names a trace directory (set by
 * `mpiscope run`); otherwise every wrapper passes straight through. Nothing
 * here stops the user's program: any failure prints one `mpiscope:` line and
 * leaves that rank unrecorded.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "runtime.h"

int msc_world_rank_self = -1;
static MPI_Comm private_comm = MPI_COMM_NULL; /* clock sync, apart from user traffic */
static char trace_dir[PATH_MAX];

static void raw_path(const char *suffix, char *path, size_t size)
{
    snprintf(path, size, "%s/raw/rank-%06d.%s", trace_dir, msc_world_rank_self, suffix);
}

static int open_raw(const char *suffix, int flags, char *path, size_t size)
{
    raw_path(suffix, path, size);
    return open(path, flags | O_CLOEXEC, 0644);
}

/* The CPUs the rank may run on and the MPI library that runs it: several ranks of
 * one host on fewer CPUs take turns on them, and every wait then includes that. */
static void where_it_runs(struct msc_file_header *f)
{
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    f->cpus_online = online > 0 ? (uint32_t)online : 0;
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        f->cpus_allowed = (uint32_t)CPU_COUNT(&set);
        for (int c = 0; c < 256 && c < CPU_SETSIZE; c++)
            if (CPU_ISSET(c, &set)) f->cpu_mask[c / 64] |= 1ULL << (c % 64);
    }
    char version[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    if (PMPI_Get_library_version(version, &len) == MPI_SUCCESS && len > 0) {
        version[len < MPI_MAX_LIBRARY_VERSION_STRING ? len : MPI_MAX_LIBRARY_VERSION_STRING - 1] = 0;
        size_t n = strcspn(version, "\n");
        if (n > sizeof f->mpi_library - 1) n = sizeof f->mpi_library - 1;
        memcpy(f->mpi_library, version, n);
    }
}

static void copy_maps(void)
{
    /* The memory map resolves call-site addresses to file:line afterwards. Copied
     * aside, then renamed over the copy before: a rank killed while it copies (the
     * job torn down by another rank's MPI_Abort, or by its own) keeps the earlier
     * copy, where it left an empty file (4 ranks, one aborting: seen in a test). */
    char path[PATH_MAX + 32], copy[PATH_MAX + 32], buf[16384];
    int in = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
    int out = open_raw("maps.tmp", O_WRONLY | O_CREAT | O_TRUNC, copy, sizeof copy);
    ssize_t n = -1;
    int whole = in >= 0 && out >= 0;
    while (whole && (n = read(in, buf, sizeof buf)) > 0) whole = write(out, buf, (size_t)n) == n;
    if (in >= 0) close(in);
    if (out >= 0 && close(out) != 0) whole = 0;
    raw_path("maps", path, sizeof path);
    if (whole && n == 0) rename(copy, path);
    else if (out >= 0) unlink(copy);
}

/* A child forked by a rank (a shell command, a Python subprocess) shares the
 * rank file's mappings but not the writer thread: it records nothing, and
 * does not mark the file as ended when it exits. */
static void forked_child(void)
{
    __atomic_store_n(&msc_recording, 0, __ATOMIC_RELAXED);
    msc_tracking = 0;
    msc_hdr = NULL;
}

static void at_exit(void)
{
    if (!msc_hdr) return;
    uint32_t state = __atomic_load_n(&msc_hdr->state, __ATOMIC_ACQUIRE);
    if (state == MSC_STATE_RUNNING)
        msc_stop(MSC_STATE_EXITED, 0);
    else if (state == MSC_STATE_SIGNALED && msc_in_signal_handler())
        msc_stop(MSC_STATE_SIGNALED, msc_hdr->end_signal);  /* the program's handler of it calls exit: ended now */
}

static int open_trace(int rank, int size)
{
    char path[PATH_MAX + 32];
    msc_trace_fd = open_raw("msc", O_RDWR | O_CREAT | O_EXCL, path, sizeof path);
    if (msc_trace_fd < 0) {
        msc_warn("not recorded, the program runs on; cannot create", path, errno);
        return -1;
    }
    void *h = MAP_FAILED;
    int err = posix_fallocate(msc_trace_fd, 0, MSC_HEADER_PAGE);
    if (!err) {
        h = mmap(NULL, MSC_HEADER_PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, msc_trace_fd, 0);
        if (h == MAP_FAILED) err = errno;
    }
    if (err) {
        msc_warn("not recorded, the program runs on; cannot write", path, err);
        close(msc_trace_fd);
        msc_trace_fd = -1;
        return -1;
    }
    msc_hdr = h;
    msc_writer_open(path);
    msc_comms_fd = open_raw("comms", O_WRONLY | O_CREAT | O_EXCL | O_APPEND, path, sizeof path);
    struct msc_file_header *f = msc_hdr;
    f->magic = MSC_FILE_MAGIC;
    f->version = MSC_FORMAT_VERSION;
    f->header_bytes = MSC_HEADER_BYTES;
    f->block_bytes = MSC_BLOCK_BYTES;
    f->rec_bytes = sizeof(struct msc_rec);
    f->rank = rank;
    f->world_size = size;
    f->pid = (int32_t)getpid();
    f->clock_kind = msc_use_tsc ? MSC_CLOCK_TSC : MSC_CLOCK_MONOTONIC_NS;
    gethostname(f->hostname, sizeof f->hostname - 1);
    msc_boot_id(f->boot_id, sizeof f->boot_id);
    where_it_runs(f);
    return 0;
}

/* Is this process to be recorded (MPISCOPE_DIR set) and not yet recording? */
/* The recording ended (MPI_Finalize, or the first session's finalize): a session started after it is
 * not recorded. Beginning again opened the rank file anew ("File exists") and clock-synced into its
 * sealed header, and the merge refused every rank: the first session's events were lost too. */
static int recording_ended;

int msc_wants_recording(void)
{
    const char *dir = getenv("MPISCOPE_DIR");
    if (!dir || !*dir || msc_tracking) return 0;
    if (recording_ended) {
        if (msc_world_rank_self == 0)
            msc_warn("a session started after the recording ended (the first session's MPI_Session_finalize) "
                     "is not recorded", "", 0);
        return 0;
    }
    snprintf(trace_dir, sizeof trace_dir, "%s", dir);
    return 1;
}

/* The clock sync is collective over the world: a rank that could not open
 * its trace still takes part, and its measurement is thrown away. */
static void sync_unrecorded(void)
{
    int64_t off, rtt;
    uint64_t at;
    msc_clock_sync(private_comm, "", &off, &rtt, &at);
}

/* Recording starts once the process knows its world rank, the world's size
 * and group, and holds a communicator over the world of its own for the clock
 * sync (sync_comm, kept until msc_before_finalize). Every rank takes part in the
 * clock sync, recorded or not. */
void msc_begin(uint16_t call, uint64_t t0, void *site, int rank, int size, int level, MPI_Group world,
               MPI_Comm sync_comm)
{
    msc_world_rank_self = rank;
    private_comm = sync_comm;
    msc_crc32c_init();
    const char *fold = getenv("MPISCOPE_POLL_FOLD");
    msc_fold_polls = !(fold && *fold == '0');
    if (open_trace(rank, size) != 0 || msc_requests_init() != 0) {
        sync_unrecorded();
        PMPI_Group_free(&world);
        return;
    }
    msc_hdr->thread_level = level;
    msc_concurrent = level == MPI_THREAD_MULTIPLE;
    msc_clock_pair(&msc_hdr->tick_init, &msc_hdr->ns_init);
    msc_comms_init(rank, size, world);
    msc_fast_paths_init();
    msc_clock_sync(private_comm, msc_hdr->boot_id, &msc_hdr->offset_init_ns, &msc_hdr->sync_rtt_init_ns,
                   &msc_hdr->offset_init_at_ns);
    copy_maps();
    /* A second calibration pair at least 2 ms later gives the tick rate of a
     * trace that never reaches a later pair (killed ranks). */
    do msc_clock_pair(&msc_hdr->tick_cal, &msc_hdr->ns_cal);
    while (msc_hdr->ns_cal - msc_hdr->ns_init < 2000000);
    msc_signals_install();
    atexit(at_exit);
    pthread_atfork(NULL, NULL, forked_child);
    msc_tracking = 1;
    const char *paused = getenv("MPISCOPE_START_PAUSED");
    __atomic_store_n(&msc_recording, !(paused && *paused == '1'), __ATOMIC_RELEASE);
    /* Map the ring and start the writer before the MPI_Init record closes: that
     * work (milliseconds: 8 MiB of blocks reserved and populated) is then inside
     * the recorded MPI_Init, not charged to the program as computation before
     * its first call (and as a wait of the other ranks at it). */
    if (msc_tls == &msc_unattached) msc_thread_attach();
    msc_ring_prepare();
    msc_writer_start();
    msc_record_init(call, t0, site);
}

/* The record of a call that starts MPI (MPI_Init*, MPI_Session_init), which
 * entered at t0, before recording could start. */
void msc_record_init(uint16_t call, uint64_t t0, void *site)
{
    struct msc_rec *r = msc_enter(call, site);
    if (r) {
        r->t_enter = t0;
        r->comm = 0;
        msc_leave(r);
    }
}

/* Rank 0 of a world started by MPI_Comm_spawn: one byte per such world in
 * raw/spawned (the merge counts them), and one line for the first of the job. */
static void spawned_world(void)
{
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/raw/spawned", trace_dir);
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    off_t before = fd >= 0 ? lseek(fd, 0, SEEK_END) : 0;
    if (fd >= 0 && write(fd, "w", 1) == 1 && before > 0) {
        close(fd);
        return;
    }
    if (fd >= 0) close(fd);
    msc_warn("processes started by MPI_Comm_spawn are not recorded (said once per run); they run on", "", 0);
}

/* MPI_Init or MPI_Init_thread returned. */
void msc_start(uint16_t call, uint64_t t0, void *site)
{
    msc_bcast_init(); /* recording or not */
    if (msc_tracking) { /* a session started the recording: this is one more call */
        msc_record_init(call, t0, site);
        return;
    }
    if (!msc_wants_recording()) return;
    int rank, size, level = MPI_THREAD_SINGLE;
    MPI_Group world;
    MPI_Comm sync_comm, parent = MPI_COMM_NULL;
    PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
    PMPI_Comm_get_parent(&parent);
    if (parent != MPI_COMM_NULL) {
        /* Its world ranks are its own: its files would take the parents' names. */
        msc_world_rank_self = rank;
        if (rank == 0) spawned_world();
        return;
    }
    PMPI_Comm_size(MPI_COMM_WORLD, &size);
    PMPI_Query_thread(&level);
    PMPI_Comm_group(MPI_COMM_WORLD, &world);
    PMPI_Comm_dup(MPI_COMM_WORLD, &sync_comm);
    msc_begin(call, t0, site, rank, size, level, world, sync_comm);
}

/* Set while a Fortran MPI_INIT runs the MPI's own: MPICH's calls the C
 * MPI_Init, which must not record a second start. */
int msc_init_from_fortran;

MSC_API int MPI_Init(int *argc, char ***argv)
{
    uint64_t t0 = msc_ticks();
    int rc = PMPI_Init(argc, argv);
    if (rc == MPI_SUCCESS && !msc_init_from_fortran) msc_start(MSC_CALL_INIT, t0, __builtin_return_address(0));
    return rc;
}

MSC_API int MPI_Init_thread(int *argc, char ***argv, int required, int *provided)
{
    uint64_t t0 = msc_ticks();
    int rc = PMPI_Init_thread(argc, argv, required, provided);
    if (rc == MPI_SUCCESS && !msc_init_from_fortran)
        msc_start(MSC_CALL_INIT_THREAD, t0, __builtin_return_address(0));
    return rc;
}

/* While the MPI still runs: the last clock sync (freeing the private
 * communicator) and the memory map again, with what was loaded since. */
void msc_before_finalize(void)
{
    if (private_comm != MPI_COMM_NULL) {
        if (msc_hdr) {
            msc_clock_sync(private_comm, msc_hdr->boot_id, &msc_hdr->offset_end_ns, &msc_hdr->sync_rtt_end_ns,
                           &msc_hdr->offset_end_at_ns);
        } else {
            sync_unrecorded();
        }
        PMPI_Comm_free(&private_comm);
    }
    copy_maps();
}

/* The session that carried the clock sync ends before the world model does:
 * the last sync goes over a duplicate of MPI_COMM_WORLD instead. */
void msc_sync_comm_from_world(void)
{
    if (private_comm != MPI_COMM_NULL) PMPI_Comm_free(&private_comm);
    PMPI_Comm_dup(MPI_COMM_WORLD, &private_comm);
}

/* The MPI's own finalize returned (r: its record): the rank file is complete. */
void msc_finished(struct msc_rec *r)
{
    if (r) {
        r->comm = 0;
        msc_leave(r);
    }
    if (msc_tracking) {
        msc_tracking = 0;
        recording_ended = 1;
        msc_stop(MSC_STATE_FINISHED, 0);
        msc_release_unused();
    }
}

int msc_finalize(void *site)
{
    struct msc_rec *r = msc_enter(MSC_CALL_FINALIZE, site);
    msc_bcast_finalize();
    msc_before_finalize();
    int rc = PMPI_Finalize();
    msc_finished(r);
    return rc;
}

int msc_pcontrol(void *site, int level)
{
    /* S-CAT's start/stop API: 0 pauses recording, any other level resumes.
     * The call itself is recorded on both sides of the switch, so the merge
     * knows the paused intervals. */
    if (msc_tracking && level == 0) {
        struct msc_rec *r = msc_enter(MSC_CALL_PCONTROL, site);
        if (r) {
            r->tag = level;
            msc_leave(r);
        }
        __atomic_store_n(&msc_recording, 0, __ATOMIC_RELEASE);
    } else if (msc_tracking && msc_hdr->state == MSC_STATE_RUNNING) {
        __atomic_store_n(&msc_recording, 1, __ATOMIC_RELEASE);
        struct msc_rec *r = msc_enter(MSC_CALL_PCONTROL, site);
        if (r) {
            r->tag = level;
            msc_leave(r);
        }
    }
    return PMPI_Pcontrol(level);
}

int msc_abort(void *site, MPI_Comm comm, int errorcode)
{
    struct msc_rec *r = msc_enter(MSC_CALL_ABORT, site);
    if (r) {
        r->comm = msc_comm_id(comm);
        r->tag = errorcode;
        msc_leave(r);
    }
    if (msc_tracking) {
        msc_stop(MSC_STATE_ABORTED, 0);
        copy_maps();  /* as before MPI_Finalize: what was loaded since MPI_Init places its call sites */
    }
    return PMPI_Abort(comm, errorcode);
}

MSC_API int MPI_Finalize(void)
{
    return msc_finalize(__builtin_return_address(0));
}

MSC_API int MPI_Pcontrol(const int level, ...)
{
    return msc_pcontrol(__builtin_return_address(0), level);
}

MSC_API int MPI_Abort(MPI_Comm comm, int errorcode)
{
    return msc_abort(__builtin_return_address(0), comm, errorcode);
}
