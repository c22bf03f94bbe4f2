/* The recorder's interface to the wrappers (generated and hand-written).
 *
 * Hot path rules: no malloc, no lock, no system call per event. A record is
 * reserved in the calling thread's mapped block and committed (call id
 * stored) by msc_enter(); the wrapper fills it, and msc_leave() stores
 * t_leave last. Sub-records (msc_sub) are filled, then committed.
 */
#ifndef MSC_RUNTIME_H
#define MSC_RUNTIME_H

#include <mpi.h>
#include <stdint.h>
#include <string.h>

#include "calls_gen.h"
#include "record.h"

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#define MSC_HAVE_TSC 1
#endif

#define MSC_LIKELY(x) __builtin_expect(!!(x), 1)
#define MSC_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define MSC_KEY(h) ((uint64_t)(uintptr_t)(h))
#define MSC_TLS_MODEL __attribute__((tls_model("initial-exec")))
/* The recorder's per-event path: gcc keeps these out of line in a file of
 * several hundred wrappers, and the calls cost more than the bodies. */
#define MSC_HOT static inline __attribute__((always_inline))
#define MSC_MAX_THREADS 1024

/* Request kinds kept in the request table. */
/* MPI-4 calls but the large-count ones (NAME_c): Open MPI 5 has them, though
 * its mpi.h says MPI 3.1. */
#if MPI_VERSION >= 4 || (defined(OMPI_MAJOR_VERSION) && OMPI_MAJOR_VERSION >= 5)
#define MSC_HAVE_MPI4 1
#else
#define MSC_HAVE_MPI4 0
#endif
/* MPI-4.1 calls (buffers attached to communicators and sessions, MPI_Intercomm_create_from_groups) */
#if MPI_VERSION > 4 || (MPI_VERSION == 4 && MPI_SUBVERSION >= 1)
#define MSC_HAVE_MPI41 1
#else
#define MSC_HAVE_MPI41 0
#endif

enum { MSC_REQ_SEND = 1, MSC_REQ_RECV, MSC_REQ_COLL, MSC_REQ_RMA, MSC_REQ_PSEND, MSC_REQ_PRECV,
       MSC_REQ_OTHER, MSC_REQ_PCOLL, MSC_REQ_SENDRECV };

/* Each thread writes into a ring of MSC_RING_SLOTS blocks of the rank file,
 * mapped once and reused: a full block goes to the writer thread (writer.c),
 * which copies it to a block of its own further on in the file and zeroes
 * its slot for reuse. Reusing the same pages keeps the recorder off the
 * kernel's page allocator: a fresh 2 MiB block costs 0.3 ms to zero and map
 * here, and 4-5 ms where the VM's host has to back new memory. */
#define MSC_RING_SLOTS 4
enum { MSC_SLOT_FREE = 0, MSC_SLOT_LIVE, MSC_SLOT_QUEUED };

struct msc_slot {
    void *map;             /* mapped block, NULL before its first use */
    int64_t off;           /* its file offset */
    int state;             /* MSC_SLOT_*, atomic: the writer frees queued slots */
};

struct msc_thread {
    struct msc_rec *next;  /* next free record in the current block */
    struct msc_rec *end;   /* where the hot path stops: the block's end, or the
                            * next calibration pair, whichever comes first */
    int busy;              /* a record is open: nested MPI calls are not recorded */
    uint16_t index;        /* thread index within the rank */
    uint32_t seq;          /* blocks this thread has used */
    void *block;           /* the current block, NULL before the first event */
    struct msc_rec *poll;  /* the thread's last record of a poll that completed nothing */
    struct msc_rec *run;   /* the first of the unfolded such polls in a row that end at poll */
    struct msc_rec *cycle; /* a folded cycle of polls (msc_poll_cycle), NULL if none */
    uint8_t cycle_k, cycle_at; /* its length, and which of its polls comes next */
    struct msc_rec *block_end; /* one past the last record of the block */
    void *scratch[2];      /* per-thread scratch (mmap, grows): [0] completions, */
    size_t scratch_bytes[2]; /* [1] Fortran argument conversions */
    struct msc_slot ring[MSC_RING_SLOTS]; /* block seq s lives in ring[s % MSC_RING_SLOTS] */
};

struct msc_span {           /* what sub-records copy from their call */
    uint64_t t_enter, t_leave, callsite;
};

struct msc_reqinfo {
    uint32_t id;
    uint16_t comm;
    uint8_t kind;
    uint64_t *slot;   /* table entry, to mark the request done after completion */
    uint64_t val;     /* its value when looked up */
    int cancel_asked; /* MPI_Cancel was called on it */
    int32_t asked_peer, asked_tag; /* MPI_Isendrecv: what its receive half asked for */
    uint64_t asked_bytes;
};
#define MSC_REQ_IMMEDIATE 0x80000000u /* recorded id flag: complete at start */

struct msc_comm {
    uint64_t gid;
    int32_t *ranks;        /* world rank of each comm rank; NULL: identity (world) */
    int32_t *remote;       /* remote group of an intercommunicator */
    int32_t size, remote_size, my_rank, outdeg, indeg; /* degrees: of the attached topology */
    uint64_t null_nbrs;    /* bit i: neighbour i is MPI_PROC_NULL (a non-periodic Cartesian border) */
    uint32_t create_count; /* Comm_create_group calls seen on this parent */
    int kind;              /* enum msc_comm_kind */
    uint32_t seq;          /* collective calls so far (atomic) */
};

extern int msc_init_from_fortran; /* a Fortran MPI_INIT is running the MPI's own */
extern int msc_concurrent; /* MPI_THREAD_MULTIPLE: threads may call MPI at once */
extern int msc_tracking;   /* the library is recording this run (paused or not) */
extern int msc_recording;  /* events are being written: tracking, not paused, not stopped */
extern int msc_use_tsc;
extern int msc_world_rank_self;
extern struct msc_comm msc_comms[65536];
/* The calling thread's recorder state; a thread that has not recorded yet
 * points to msc_unattached, whose empty block sends it to msc_next_record. */
extern _Thread_local struct msc_thread *msc_tls MSC_TLS_MODEL;
extern struct msc_thread msc_unattached;
extern struct msc_file_header *msc_hdr;

struct msc_thread *msc_thread_attach(void);
struct msc_rec *msc_next_record(struct msc_thread *t);
void msc_ring_prepare(void);
uint64_t msc_now_ns(void);
void *msc_scratch(int which, size_t bytes);
void msc_stop(int state, int sig);
void msc_release_unused(void);
void msc_warn(const char *what, const char *path, int err);

/* communicators (comm.c) */
uint16_t msc_handle_lookup(uint64_t key);
/* The id of a communicator or window already known, else MSC_COMM_UNKNOWN (never registers). */
uint16_t msc_comm_known(MPI_Comm comm);
uint16_t msc_win_known(MPI_Win win);
void msc_comm_forget(MPI_Comm comm);
void msc_win_forget(MPI_Win win);
uint16_t msc_comm_created(uint16_t parent, int32_t seq, MPI_Comm newcomm, int same_group);
uint16_t msc_comm_created_group(uint16_t parent, int tag, MPI_Comm newcomm);
uint16_t msc_comm_created_from_group(const char *stringtag, MPI_Comm newcomm);
uint16_t msc_intercomm_created_from_groups(const char *stringtag, MPI_Comm newcomm);
uint16_t msc_intercomm_created(MPI_Comm local, int local_leader, MPI_Comm peer_comm,
                               int remote_leader, int tag, MPI_Comm newcomm);
uint16_t msc_win_created(uint16_t comm, int32_t seq, MPI_Win win);
uint16_t msc_comm_register_unknown(MPI_Comm comm);
uint16_t msc_win_register_unknown(MPI_Win win);

/* the writer of full blocks (writer.c) */
void msc_writer_open(const char *path);
void msc_writer_start(void);
void msc_writer_hand_over(struct msc_thread *t, unsigned slot);
int msc_writer_wait_free(struct msc_slot *s);
void msc_writer_finish(void);
void msc_block_seal(void *block);
/* CRC-32C (crc32c.c) */
void msc_crc32c_init(void);
uint32_t msc_crc32c(uint32_t crc, const void *data, size_t n);
int msc_block_reserve(off_t *off);
int msc_write_block(int fd, const void *block, off_t off);
void msc_disk_full(const char *what, int err);

/* requests (request.c) */
uint32_t msc_req_start(MPI_Request req, int kind, uint16_t comm);
uint32_t msc_req_start_id(MPI_Request req, int kind, uint16_t comm, uint32_t id);
void msc_req_persist(MPI_Request req, int kind, uint16_t comm, int32_t peer, int32_t tag,
                     uint64_t bytes);
void msc_req_persist_coll(MPI_Request req, uint16_t comm, int32_t root, uint64_t bytes, uint64_t recv_bytes,
                          uint16_t call);
void msc_req_asked(MPI_Request req, int32_t peer, int32_t tag, uint64_t bytes);
void msc_req_lookup(MPI_Request req, struct msc_reqinfo *info);
void msc_req_completed(const struct msc_reqinfo *info);
void msc_req_cancel_asked(struct msc_reqinfo *info);
void msc_req_completing(struct msc_reqinfo *info, int n);
void msc_req_still_pending(struct msc_reqinfo *info, int n);
int msc_req_restart(MPI_Request req, struct msc_rec *sub, uint64_t *recv_bytes);
uint32_t msc_msg_start(MPI_Message msg, uint16_t comm);
uint32_t msc_msg_lookup(MPI_Message msg, uint16_t *comm);

/* start-up and clocks (init.c, clock.c) */
extern int msc_trace_fd, msc_comms_fd;
int msc_requests_init(void);
void msc_comms_init(int rank, int size, MPI_Group world);
void msc_clock_pair(uint64_t *tick, uint64_t *ns);
void msc_boot_id(char *buf, size_t size);
void msc_clock_sync(MPI_Comm comm, const char *boot_id, int64_t *offset, int64_t *rtt, uint64_t *at);
void msc_signals_install(void);
int msc_in_signal_handler(void);  /* inside the program's own handler of a fatal signal */

/* hand-written calls, shared by the C and Fortran entry points */
void msc_start(uint16_t call, uint64_t t0, void *site);
int msc_wants_recording(void);
void msc_record_init(uint16_t call, uint64_t t0, void *site);
void msc_begin(uint16_t call, uint64_t t0, void *site, int rank, int size, int level, MPI_Group world,
               MPI_Comm sync_comm);
void msc_before_finalize(void);
void msc_sync_comm_from_world(void);
void msc_finished(struct msc_rec *r);
int msc_finalize(void *site);
int msc_pcontrol(void *site, int level);
int msc_abort(void *site, MPI_Comm comm, int errorcode);
int msc_wait(void *site, MPI_Request *request, MPI_Status *status);
int msc_test(void *site, MPI_Request *request, int *flag, MPI_Status *status);
int msc_any(void *site, int count, MPI_Request reqs[], int *index, int *flag, MPI_Status *status, int test);
int msc_many(void *site, uint16_t call, int count, MPI_Request reqs[], int *flag, int *outcount, int *indices,
             MPI_Status *statuses);
int msc_request_free(void *site, MPI_Request *request);
int msc_start_request(void *site, MPI_Request *request);
int msc_startall(void *site, int count, MPI_Request array_of_requests[]);

/* the adaptive broadcast (bcast.c): after MPI_Init*, before MPI_Finalize */
void msc_bcast_init(void);
void msc_bcast_finalize(void);

/* completions (complete.c) */
void msc_emit_recv(const struct msc_span *sp, uint16_t comm, const MPI_Status *st);
void msc_emit_complete(const struct msc_span *sp, const struct msc_reqinfo *ri,
                       const MPI_Status *st);
void msc_emit_recv_bytes(const struct msc_span *sp, uint64_t bytes);
void msc_emit_rc(const struct msc_rec *r, int rc);
void msc_poll_count_starts(struct msc_rec *poll, struct msc_rec *r);
extern int msc_fold_polls;

MSC_HOT uint64_t msc_ticks(void)
{
#ifdef MSC_HAVE_TSC
    if (MSC_LIKELY(msc_use_tsc)) return __rdtsc();
#endif
    return msc_now_ns();
}

/* A record of the calling thread's current block (t: msc_tls), NULL when
 * none can be had. The hot path is a compare and a store; the rest
 * (attaching a thread, calibration pairs, block switches) is in
 * msc_next_record. */
MSC_HOT struct msc_rec *msc_reserve(struct msc_thread *t)
{
    struct msc_rec *r = t->next;
    if (MSC_UNLIKELY(r == t->end)) return msc_next_record(t);
    t->next = r + 1;
    return r;
}

/* Fetch the lines of the thread's next record while the current call runs.
 * Left to the store, a fresh line is a cache miss that an MPI's own atomic
 * operations in the next call then wait for: in a ping-pong, on the critical
 * path of every message (1.5 % of an 8-byte half round trip here). A
 * prefetch past the block's end is harmless: prefetches never fault. */
MSC_HOT void msc_prefetch_next(const struct msc_thread *t)
{
    __builtin_prefetch(t->next, 1, 3);
    __builtin_prefetch((const char *)t->next + sizeof(struct msc_rec) - 1, 1, 3);
}

MSC_HOT void msc_commit(struct msc_rec *r, uint16_t call)
{
    __atomic_store_n(&r->call, call, __ATOMIC_RELEASE);
}

/* Open the record of a call (NULL: not recording, or a nested call). Every
 * record is reserved in a zeroed block (a new slot of the file, or one the
 * writer zeroed): t_leave, bytes and req need no store. The reservation is
 * msc_reserve's, spelled out so that only its slow path reloads msc_tls
 * (which attaching a thread changes). */
MSC_HOT struct msc_rec *msc_enter(uint16_t call, void *site)
{
    if (MSC_UNLIKELY(!__atomic_load_n(&msc_recording, __ATOMIC_RELAXED))) return NULL;
    struct msc_thread *t = msc_tls;
    if (t->busy) return NULL;
    struct msc_rec *r = t->next;
    if (MSC_LIKELY(r != t->end)) {
        t->next = r + 1;
    } else {
        r = msc_next_record(t);
        if (!r) return NULL;
        t = msc_tls; /* attached just now */
    }
    t->busy = 1;
    msc_prefetch_next(t);
    r->callsite = (uint64_t)(uintptr_t)site;
    r->peer = MSC_PEER_NONE;
    r->tag = MSC_TAG_NONE;
    r->comm = MSC_COMM_UNKNOWN;
    r->t_enter = msc_ticks();
    /* Committed at entry: a rank that dies inside this call still shows
     * where it was (t_leave == 0: the call never returned). */
    msc_commit(r, call);
    return r;
}

/* The call returned at tick t_left (read as the PMPI call returned, so the
 * wrapper's own work is not counted in the call's time and the clock read
 * overlaps it): t_leave is stored last, after the wrapper's fields. */
MSC_HOT struct msc_span msc_leave_at(struct msc_rec *r, uint64_t t_left)
{
    struct msc_span sp = {r->t_enter, t_left, r->callsite};
    __atomic_store_n(&r->t_leave, t_left, __ATOMIC_RELEASE);
    msc_tls->busy = 0;
    return sp;
}

MSC_HOT struct msc_span msc_leave(struct msc_rec *r)
{
    return msc_leave_at(r, msc_ticks());
}

/* A record that belongs to the call just left: same times and call site. */
MSC_HOT struct msc_rec *msc_sub(const struct msc_span *sp)
{
    struct msc_thread *t = msc_tls;
    struct msc_rec *r = msc_reserve(t);
    if (!r) return NULL;
    r->t_enter = sp->t_enter;
    r->t_leave = sp->t_leave;
    r->callsite = sp->callsite;
    r->bytes = 0;
    r->req = 0;
    r->peer = MSC_PEER_NONE;
    r->tag = MSC_TAG_NONE;
    r->comm = MSC_COMM_UNKNOWN;
    return r;
}

MSC_HOT uint16_t msc_comm_id(MPI_Comm comm)
{
    if (MSC_LIKELY(comm == MPI_COMM_WORLD)) return 0;
    if (comm == MPI_COMM_SELF) return 1;
    uint16_t id = msc_handle_lookup(MSC_KEY(comm));
    return MSC_LIKELY(id != MSC_COMM_UNKNOWN) ? id : msc_comm_register_unknown(comm);
}

static inline uint16_t msc_win_id(MPI_Win win)
{
    uint16_t id = msc_handle_lookup(MSC_KEY(win));
    return MSC_LIKELY(id != MSC_COMM_UNKNOWN) ? id : msc_win_register_unknown(win);
}

static inline int32_t msc_seq_next(uint16_t c)
{
    if (c == MSC_COMM_UNKNOWN) return -1;
    return (int32_t)__atomic_fetch_add(&msc_comms[c].seq, 1, __ATOMIC_RELAXED);
}

MSC_HOT int32_t msc_translate(const int32_t *ranks, int32_t size, int rank)
{
    if (rank < 0 || rank >= size) return MSC_PEER_UNKNOWN;
    return ranks ? ranks[rank] : rank;
}

/* World rank of a peer given as a rank in communicator (or window) c. */
MSC_HOT int32_t msc_world_rank(uint16_t c, int rank)
{
    if (rank == MPI_ANY_SOURCE) return MSC_PEER_ANY;
    if (rank == MPI_PROC_NULL) return MSC_PEER_PROC_NULL;
    if (c == MSC_COMM_UNKNOWN) return MSC_PEER_UNKNOWN;
    const struct msc_comm *m = &msc_comms[c];
    if (m->kind == MSC_COMM_INTER) return msc_translate(m->remote, m->remote_size, rank);
    return msc_translate(m->ranks, m->size, rank);
}

MSC_HOT int32_t msc_world_root(uint16_t c, int root)
{
    if (root == MPI_ROOT) return MSC_PEER_ROOT;
    return msc_world_rank(c, root);
}

static inline int msc_is_root(uint16_t c, int root)
{
    if (root == MPI_ROOT) return 1;
    if (c == MSC_COMM_UNKNOWN || msc_comms[c].kind == MSC_COMM_INTER) return 0;
    return root == msc_comms[c].my_rank;
}

MSC_HOT int32_t msc_tag(int tag)
{
    return tag == MPI_ANY_TAG ? MSC_TAG_ANY : tag;
}

/* fast paths (fastpath.c): set at start-up when the MPI's layout checks out */
extern int msc_fast_types, msc_fast_status;
void msc_fast_paths_init(void);

/* Size of a predefined MPICH datatype from its handle, 0 if not one. */
MSC_HOT uint32_t msc_builtin_size(MPI_Datatype dt)
{
#ifdef MPICH_NUMVERSION
    uint32_t h = (uint32_t)(uintptr_t)dt;
    if ((h & 0xfc000000u) == 0x4c000000u) return (h >> 8) & 0xffu;
#else
    (void)dt;
#endif
    return 0;
}

/* The byte count a status holds, read in place (only when msc_fast_status). */
MSC_HOT uint64_t msc_status_count(const MPI_Status *st)
{
#if defined(MPICH_NUMVERSION)
    return (uint64_t)(uint32_t)st->count_lo | ((uint64_t)((uint32_t)st->count_hi_and_cancelled >> 1) << 32);
#elif defined(OPEN_MPI)
    return (uint64_t)st->_ucount;
#else
    (void)st;
    return 0;
#endif
}

MSC_HOT uint64_t msc_bytes(int64_t count, MPI_Datatype dt)
{
    int size = 0;
    if (count <= 0 || dt == MPI_DATATYPE_NULL) return 0;
    uint32_t builtin = msc_fast_types ? msc_builtin_size(dt) : 0;
    if (MSC_LIKELY(builtin)) return (uint64_t)count * builtin;
    PMPI_Type_size(dt, &size);
    if (MSC_UNLIKELY(size == MPI_UNDEFINED)) {
        /* a type of more than 2 GiB: its size only fits an MPI_Count (it read as 0 bytes) */
        MPI_Count large = 0;
        PMPI_Type_size_x(dt, &large);
        return (uint64_t)count * (uint64_t)(large > 0 ? large : 0);
    }
    return (uint64_t)count * (uint64_t)(size > 0 ? size : 0);
}

static inline int32_t msc_npeers(uint16_t c)
{
    if (c == MSC_COMM_UNKNOWN) return 0;
    const struct msc_comm *m = &msc_comms[c];
    return m->kind == MSC_COMM_INTER ? m->remote_size : m->size;
}

static inline int32_t msc_outdeg(uint16_t c)
{
    return c == MSC_COMM_UNKNOWN ? 0 : msc_comms[c].outdeg;
}

static inline int32_t msc_indeg(uint16_t c)
{
    return c == MSC_COMM_UNKNOWN ? 0 : msc_comms[c].indeg;
}

static inline int msc_is_inter(uint16_t c)
{
    return c != MSC_COMM_UNKNOWN && msc_comms[c].kind == MSC_COMM_INTER;
}

static inline int32_t msc_my_rank(uint16_t c)
{
    return c == MSC_COMM_UNKNOWN ? 0 : msc_comms[c].my_rank;
}

static inline int32_t msc_npeers_but_me(uint16_t c)
{
    int32_t p = msc_npeers(c);
    return p > 0 ? p - 1 : 0;
}

/* The MPI_PROC_NULL neighbours among the first n of a neighbourhood collective
 * (MPI-3.1 §7.6: their blocks are neither sent nor received). */
static inline uint64_t msc_null_nbrs(uint16_t c, int32_t n)
{
    uint64_t m = c == MSC_COMM_UNKNOWN ? 0 : msc_comms[c].null_nbrs;
    return n >= 64 ? m : m & ((1ull << (n > 0 ? n : 0)) - 1);
}

static inline int32_t msc_live_nbrs(uint16_t c, int32_t n)
{
    return n - __builtin_popcountll(msc_null_nbrs(c, n));
}

/* Count arrays are int[] in MPI-3 calls and MPI_Count[] in MPI-4's _c calls. */
/* (skip: bit i set leaves out entry i, an MPI_PROC_NULL neighbour) */
#define MSC_COUNT_HELPERS(suffix, type)                                                          \
    static inline uint64_t msc_sum_counts##suffix(const type *counts, int32_t n, uint64_t skip,  \
                                                  MPI_Datatype dt)                              \
    {                                                                                           \
        uint64_t total = 0;                                                                     \
        for (int32_t i = 0; i < n; i++)                                                         \
            if (!(i < 64 && (skip >> i) & 1)) total += counts[i] > 0 ? (uint64_t)counts[i] : 0; \
        return total * msc_bytes(1, dt);                                                        \
    }                                                                                           \
    static inline uint64_t msc_sum_wcounts##suffix(const type *counts, const MPI_Datatype *types, \
                                                   int32_t n, uint64_t skip)                    \
    {                                                                                           \
        uint64_t total = 0;                                                                     \
        for (int32_t i = 0; i < n; i++)                                                         \
            if (!(i < 64 && (skip >> i) & 1)) total += msc_bytes((int64_t)counts[i], types[i]); \
        return total;                                                                           \
    }                                                                                           \
    static inline uint64_t msc_mybytes##suffix(uint16_t c, const type *counts, MPI_Datatype dt) \
    {                                                                                           \
        if (c == MSC_COMM_UNKNOWN) return 0;                                                    \
        return msc_bytes((int64_t)counts[msc_comms[c].my_rank], dt);                            \
    }
MSC_COUNT_HELPERS(_int, int)
MSC_COUNT_HELPERS(_count, MPI_Count)
#define MSC_BY_COUNT(fn, counts) \
    _Generic((counts), int *: fn##_int, const int *: fn##_int, MPI_Count *: fn##_count, const MPI_Count *: fn##_count)

#define msc_vbytes(c, counts, dt) MSC_BY_COUNT(msc_sum_counts, counts)(counts, msc_npeers(c), 0, dt)
#define msc_wbytes(c, counts, types) MSC_BY_COUNT(msc_sum_wcounts, counts)(counts, types, msc_npeers(c), 0)
/* deg: the topology's out- or in-degree */
#define msc_degvbytes(c, counts, dt, deg) \
    MSC_BY_COUNT(msc_sum_counts, counts)(counts, deg, msc_null_nbrs(c, deg), dt)
#define msc_degwbytes(c, counts, types, deg) \
    MSC_BY_COUNT(msc_sum_wcounts, counts)(counts, types, deg, msc_null_nbrs(c, deg))
#define msc_mybytes(c, counts, dt) MSC_BY_COUNT(msc_mybytes, counts)(c, counts, dt)
/* all ranks' but this one's (an in-place gather's root, an in-place allgather) */
#define msc_otherbytes(c, counts, dt) (msc_vbytes(c, counts, dt) - msc_mybytes(c, counts, dt))

MSC_HOT uint64_t msc_status_bytes(const MPI_Status *st)
{
    if (MSC_LIKELY(msc_fast_status)) return msc_status_count(st);
    MPI_Count n = 0;
    if (PMPI_Get_elements_x(st, MPI_BYTE, &n) != MPI_SUCCESS || n == MPI_UNDEFINED || n < 0) return 0;
    return (uint64_t)n;
}

/* The actual envelope of a received (or probed) message, from its status. */
MSC_HOT void msc_status_envelope(struct msc_rec *r, uint16_t c, const MPI_Status *st)
{
    if (MSC_LIKELY(c == 0 && st->MPI_SOURCE >= 0)) { /* MPI_COMM_WORLD: ranks are world ranks */
        r->peer = st->MPI_SOURCE;
        r->tag = st->MPI_TAG;
        r->bytes = msc_status_bytes(st);
        return;
    }
    r->peer = msc_world_rank(c, st->MPI_SOURCE);
    r->tag = st->MPI_SOURCE == MPI_PROC_NULL ? MSC_TAG_NONE : st->MPI_TAG;
    r->bytes = st->MPI_SOURCE == MPI_PROC_NULL ? 0 : msc_status_bytes(st);
}

static inline void msc_no_message(struct msc_rec *r)
{
    r->peer = MSC_PEER_NONE;
    r->tag = MSC_TAG_NONE;
    r->bytes = 0;
}

/* Polling loops that poll several call sites in turn (a progress loop testing two request
 * arrays, Graph500's AML: MPI_Testany on one, then on the other) fold too: up to
 * MSC_CYCLE_MAX call sites, each with its own record and sub:count. */
#define MSC_CYCLE_MAX 4

static inline int msc_same_poll(const struct msc_rec *a, const struct msc_rec *b)
{
    /* (an unsuccessful poll has no request id and no bytes: the rest of the record says which) */
    return a->call == b->call && a->callsite == b->callsite && a->comm == b->comm && a->peer == b->peer &&
           a->tag == b->tag;
}

int msc_poll_cycle(struct msc_thread *t, struct msc_rec *r);

/* Fold r, the thread's last record, into the poll p whose sub:count is `count`: p now ends at
 * r's exit, and r is given back, zeroed as msc_enter expects it (it stores the other fields
 * itself, and an unsuccessful poll leaves bytes and req zero). */
MSC_HOT void msc_poll_fold(struct msc_thread *t, struct msc_rec *p, struct msc_rec *count, struct msc_rec *r)
{
    uint64_t t_left = r->t_leave;
    count->bytes++;
    count->callsite += t_left - r->t_enter;
    __atomic_store_n(&r->call, 0, __ATOMIC_RELEASE);
    r->t_leave = 0;
    t->next = r;
    __atomic_store_n(&p->t_leave, t_left, __ATOMIC_RELEASE);
}

/* r, the thread's last record, is a poll (MPI_Test & co., MPI_Iprobe, MPI_Improbe) that
 * completed nothing, just left. Where the thread's record before it is the same poll, from
 * the same call site, that completed nothing either, r is folded into it: the first record
 * of the run spans from its entry to the last exit, and a sub:count record after it holds
 * how many calls it stands for (bytes) and the ticks spent inside them (callsite). A
 * polling loop thus leaves two records, not one per call (issue 23); any other record of
 * the thread ends the run. Where 2 to MSC_CYCLE_MAX polls take turns, msc_poll_cycle folds
 * them alike. Inline: in a polling loop it runs once per call. */
MSC_HOT void msc_poll_missed(struct msc_rec *r)
{
    struct msc_thread *t = msc_tls;
    struct msc_rec *poll = t->poll;
    if (!msc_fold_polls || t->next != r + 1) {
        t->poll = r;
        t->run = r;
        return;
    }
    if (poll && msc_same_poll(poll, r)) {
        if (poll == r - 2 && r[-1].call == MSC_SUB_COUNT) {
            msc_poll_fold(t, poll, r - 1, r);
            return;
        }
        if (poll == r - 1) {
            msc_poll_count_starts(poll, r);
            return;
        }
    }
    if (msc_poll_cycle(t, r)) return;
    t->run = poll && r == poll + 1 ? t->run : r;
    t->poll = r;
}

#endif
