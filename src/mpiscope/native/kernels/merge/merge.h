/* Kernels of the trace merge (mpiscope.trace.native binds them with ctypes).
 *
 * columns.c  raw records of all rank files -> the merge's per-record columns
 * links.c    nonblocking starts -> the completion that finished them
 * match.c    sends <-> receives in MPI's non-overtaking order
 * events.c   the rows of events.parquet, and call-site codes
 * p2p.c      the send and receive sides of point-to-point traffic
 * parallel.c the threads of the kernels that split their work
 * map.c      their hash table
 *
 * Each replaces a chain of NumPy passes and global sorts over all records
 * with one or two passes and hash tables; the Python side keeps the column
 * layouts and dtypes, so the Parquet tables are the same.
 */
#ifndef MSM_MERGE_H
#define MSM_MERGE_H

#include <stddef.h>
#include <stdint.h>

#define MSM_API __attribute__((visibility("default")))
#define MSM_MAX_WORKERS 16

/* fn(args + k * size) for k < workers, on as many threads (the caller's one of them). */
void msm_run(int workers, void *(*fn)(void *), void *args, size_t size);
/* wanted, within 1..MSM_MAX_WORKERS */
int msm_workers(int32_t wanted);

/* One block of committed records (struct msc_rec, record.h) of one thread. */
struct msm_block {
    const void *recs;
    int64_t n;
    int32_t rank;
    int32_t thread;
    int32_t clock;   /* index into the clocks array */
    int32_t unused;
};

/* Ticks -> ns on rank 0's clock, as trace/clocks.py defines it. */
struct msm_clock {
    int64_t tick_ref;
    int64_t ns_ref;
    double ns_per_tick;
    double offset_ns;     /* offset to rank 0 at local time offset_at_ns */
    double offset_at_ns;
    double drift;         /* d(offset)/d(local ns); 0: constant offset */
};

/* The per-record columns (trace/columns.py Records), n rows each. */
struct msm_columns {
    int32_t *rank, *thread, *call, *peer, *tag, *comm;
    uint8_t *role, *starts, *immediate;
    uint32_t *req;
    int64_t *t_enter, *t_leave, *bytes;
    int64_t *event;   /* event id of the call the record belongs to (its own for calls), -1 if none */
    uint64_t *callsite;
};

/* The rows of events.parquet (one per call record, in event order). */
struct msm_events {
    int64_t *event, *t_enter, *t_leave, *comm, *bytes, *req, *t_complete, *completed_by;
    int32_t *rank, *thread, *peer, *tag;
    uint32_t *call;     /* index of the call's name in the events' Enum */
    uint8_t *role;
    uint64_t *callsite;
};

struct msm_event_inputs {
    int64_t nevents;
    int64_t first_call_id;          /* records of lower call ids are sub-records */
    const uint32_t *call_code;      /* Enum index by call id */
    const int64_t *link_index;      /* nonblocking starts (records) and their completion */
    const int64_t *link_t_complete;
    const int64_t *link_completed_by;
    int64_t nlinks;
};

/* What a role means for point-to-point traffic (bits of kind_of_role). */
enum {
    MSM_SEND = 1,      /* blocking send, Sendrecv's send half */
    MSM_NB_SEND = 2,   /* nonblocking or persistent send start */
    MSM_RECV = 4,      /* blocking receive, Sendrecv's receive part */
    MSM_NB_RECV = 8,   /* nonblocking or persistent receive start */
    MSM_MPROBE = 16,   /* matched probe */
    MSM_MRECV = 32,    /* Mrecv */
    MSM_IMRECV = 64,   /* Imrecv start */
};

/* One side of point-to-point traffic: sends (src = rank) or receives (dst = rank). */
struct msm_side {
    int64_t *comm, *posted, *event, *bytes, *leave;
    int32_t *src, *dst, *tag;
};

/* Nonblocking starts and their completions (requests.py StartLinks). */
struct msm_links {
    const int64_t *index, *t_complete, *bytes;
    const int32_t *peer, *tag;
    int64_t n;
};

/* What the column pass needs besides the records. */
struct msm_tables {
    const uint8_t *role_of_call;    /* by call id */
    const uint8_t *starts_of_call;  /* by call id: the call starts a request */
    int64_t first_call_id;          /* ids below are sub-records of a call */
    const int64_t *comm_lut;        /* dense comm id at rank * comm_width + local id, -1 unknown */
    int64_t comm_width;
    int64_t lut_size;               /* 0: no communicator is known */
};

/* Open addressing for 64-bit keys; slots with val < 0 are empty. */
struct msm_map {
    uint64_t *keys;
    int64_t *vals;
    uint64_t mask;
};

static inline uint64_t msm_hash(uint64_t k)
{
    /* murmur3's finaliser: request ids and envelopes are dense small ints */
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33;
    k *= 0xc4ceb9fe1a85ec53ull;
    k ^= k >> 33;
    return k;
}

int msm_map_init(struct msm_map *m, int64_t expected);
void msm_map_free(struct msm_map *m);

/* The slot holding key, or the empty slot where it goes. */
static inline uint64_t msm_map_slot(const struct msm_map *m, uint64_t key)
{
    uint64_t i = msm_hash(key) & m->mask;
    while (m->vals[i] >= 0 && m->keys[i] != key)
        i = (i + 1) & m->mask;
    return i;
}

MSM_API int msm_columns(const struct msm_block *blocks, int64_t nblocks, const struct msm_clock *clocks,
                        const struct msm_tables *tab, int32_t workers, const struct msm_columns *out);

MSM_API int msm_link_starts(const struct msm_columns *rec, int64_t n, uint8_t role_complete,
                            uint8_t role_immediate, const int64_t *start, int64_t nstart, int32_t workers,
                            int64_t *t_complete, int64_t *completed_by, int32_t *peer, int32_t *tag,
                            int64_t *bytes);

/* One side of the matching: envelopes (comm, src, dst, tag), posting time and event. */
struct msm_envelopes {
    const int64_t *comm, *t, *ev;
    const int32_t *src, *dst, *tag;
    int64_t n;
};

/* Matched (send, receive) index pairs into si, ri (min(sends, receives) long
 * at least); returns their number, -1 when out of memory. */
MSM_API int64_t msm_match(const struct msm_envelopes *sends, const struct msm_envelopes *recvs, int64_t *si,
                          int64_t *ri);

/* counts = (sends, receives); with sends or recvs NULL, only counts. */
MSM_API int msm_p2p(const struct msm_columns *rec, int64_t n, const uint8_t *kind_of_role,
                    const struct msm_links *links, int64_t counts[2], const struct msm_side *sends,
                    const struct msm_side *recvs);

MSM_API int msm_events(const struct msm_columns *rec, int64_t n, const struct msm_event_inputs *in,
                       int32_t workers, const struct msm_events *out);

/* Dense codes of keys by first appearance; first[c] = first row of code c.
 * The key of row i is value[i], or with rank given the call-site key
 * rank[i] << 48 | (value[i] & (2^48 - 1)). Returns the number of distinct
 * keys, -1 when out of memory. */
MSM_API int64_t msm_factorize(const int32_t *rank, const uint64_t *value, int64_t n, int32_t *code,
                              int64_t *first);

/* What the quiet points of a rank's records depend on besides the records. */
struct msm_quiet_tables {
    const uint8_t *role_of_call;    /* by call id */
    const uint8_t *starts_of_call;  /* by call id: the call starts a request */
    int64_t ncalls;                 /* ids of both tables */
    int64_t first_call_id;          /* ids below are sub-records of a call */
    uint8_t role_create, role_create_win;
    uint8_t release;                /* the blocks map a file: take each one's pages out once read */
};

/* Record positions (in block order) where one single-threaded rank's records
 * are cut into pieces of at most `most` records where its quiet points allow
 * (the first piece starts at 0, not listed); at most max_cuts. Returns their
 * number, -1 when out of memory. */
MSM_API int64_t msm_quiet_cuts(const struct msm_block *blocks, int64_t nblocks,
                               const struct msm_quiet_tables *tab, int64_t most, int64_t *cuts,
                               int64_t max_cuts);

#endif
