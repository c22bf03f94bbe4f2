/* Requests and messages (MPI_Message) -> small ids.
 *
 * A nonblocking start stores (id, comm, kind) under the request handle; its
 * completion looks the handle up before calling PMPI (which resets it to
 * MPI_REQUEST_NULL). Entries are never removed: MPI hands a freed handle to
 * the next request only after the completion that freed it, and that
 * completion has already read its id, so overwriting on reuse is race-free
 * and the table holds at most the distinct handles MPI ever used (its pool
 * of outstanding requests). Slots are claimed with one CAS; no locks.
 */
#define _GNU_SOURCE
#include <sys/mman.h>

#include "runtime.h"

#define RBITS 18
#define MBITS 12

struct rslot {
    uint64_t key;
    uint64_t val;   /* id | comm << 32 | kind << 48 */
    int32_t peer;   /* persistent requests: their envelope; MPI_Isendrecv: its receive half's */
    int32_t tag;
    uint64_t bytes;
    uint64_t recv_bytes; /* persistent collectives: what one instance receives */
};

struct rtab {
    struct rslot *slots;
    uint32_t bits;
};

static struct rtab reqs = {NULL, RBITS}, msgs = {NULL, MBITS};
static uint32_t next_id = 1;

static int table_init(struct rtab *t)
{
    size_t bytes = sizeof(struct rslot) << t->bits;
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) return -1;
    t->slots = p;
    return 0;
}

int msc_requests_init(void)
{
    return table_init(&reqs) || table_init(&msgs) ? -1 : 0;
}

#define SHARED (1ull << 56)
#define CANCEL_ASKED (1ull << 57) /* until the handle's next start */
#define COMPLETING (1ull << 58)   /* a completion call holds it (MPI_THREAD_MULTIPLE) */
#define ID_MASK 0x7fffffffu

static inline uint64_t pack(uint32_t id, uint16_t comm, int kind)
{
    return (uint64_t)id | (uint64_t)comm << 32 | (uint64_t)(kind & 0xff) << 48;
}

static inline uint32_t new_id(void)
{
    /* 31 bits: the top bit of a recorded id says MSC_REQ_IMMEDIATE */
    uint32_t id = __atomic_fetch_add(&next_id, 1, __ATOMIC_RELAXED) & ID_MASK;
    return id ? id : (__atomic_fetch_add(&next_id, 1, __ATOMIC_RELAXED) & ID_MASK);
}

static struct rslot *find(const struct rtab *t, uint64_t key, int claim)
{
    if (!t->slots || key == 0) return NULL;
    uint32_t mask = (1u << t->bits) - 1;
    uint32_t s = (uint32_t)((key * 0x9e3779b97f4a7c15ull) >> (64 - t->bits));
    for (uint32_t i = 0; i < 64; i++, s = (s + 1) & mask) {
        uint64_t k = __atomic_load_n(&t->slots[s].key, __ATOMIC_ACQUIRE);
        if (k == key) return &t->slots[s];
        if (k == 0) {
            if (!claim) return NULL;
            uint64_t expect = 0;
            if (__atomic_compare_exchange_n(&t->slots[s].key, &expect, key, 0, __ATOMIC_ACQ_REL,
                                            __ATOMIC_ACQUIRE) || expect == key)
                return &t->slots[s];
        }
    }
    if (claim) __atomic_fetch_add(&msc_hdr->dropped, 1, __ATOMIC_RELAXED);
    return NULL;
}

static int persistent(uint64_t v)
{
    int kind = (int)(uint8_t)(v >> 48);
    return kind == MSC_REQ_PSEND || kind == MSC_REQ_PRECV || kind == MSC_REQ_PCOLL;
}

/* A nonblocking start. MPI implementations hand out one shared request
 * object for operations that complete at once (MPICH's builtin completed
 * request, Open MPI's ompi_request_empty): a handle started again while its
 * previous request is still pending is such an object. Requests on it are
 * recorded as complete at start (MSC_REQ_IMMEDIATE) and their completions
 * are not attributed. */
static uint32_t start(struct rtab *t, uint64_t key, int kind, uint16_t comm, uint32_t id)
{
    struct rslot *s = find(t, key, 1);
    if (!s) return 0;
    uint64_t old = __atomic_load_n(&s->val, __ATOMIC_ACQUIRE), want;
    do {
        uint64_t shared = old & SHARED;
        /* A request another thread is completing may have handed its
         * handle back to the MPI already: that is reuse, not sharing. */
        if ((uint32_t)(old & ID_MASK) != 0 && !persistent(old) && !(old & COMPLETING)) shared = SHARED;
        want = shared ? (pack(0, comm, kind) | SHARED) : pack(id, comm, kind);
    } while (!__atomic_compare_exchange_n(&s->val, &old, want, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE));
    if ((want & SHARED) && !(old & SHARED)) {
        /* Sharing found only now: the request started earlier on this
         * handle was complete at its start too. */
        struct msc_thread *th = msc_tls;
        struct msc_rec *m = th && __atomic_load_n(&msc_recording, __ATOMIC_RELAXED) ? msc_reserve(th) : NULL;
        if (m) {
            m->t_enter = m->t_leave = msc_ticks();
            m->bytes = m->callsite = 0;
            m->req = (uint32_t)(old & ID_MASK);
            m->peer = MSC_PEER_NONE;
            m->tag = MSC_TAG_NONE;
            m->comm = comm;
            msc_commit(m, MSC_SUB_IMMEDIATE);
        }
    }
    return (want & SHARED) ? (id | MSC_REQ_IMMEDIATE) : id;
}

uint32_t msc_req_start(MPI_Request req, int kind, uint16_t comm)
{
    if (req == MPI_REQUEST_NULL) return 0;
    return start(&reqs, MSC_KEY(req), kind, comm, new_id());
}

uint32_t msc_req_start_id(MPI_Request req, int kind, uint16_t comm, uint32_t id)
{
    if (req == MPI_REQUEST_NULL || id == 0) return 0;
    return start(&reqs, MSC_KEY(req), kind, comm, id);
}

void msc_req_persist(MPI_Request req, int kind, uint16_t comm, int32_t peer, int32_t tag, uint64_t bytes)
{
    if (req == MPI_REQUEST_NULL) return;
    struct rslot *s = find(&reqs, MSC_KEY(req), 1);
    if (!s) return;
    s->peer = peer;
    s->tag = tag;
    s->bytes = bytes;
    __atomic_store_n(&s->val, pack(0, comm, kind), __ATOMIC_RELEASE);
}

/* A persistent collective: its slot keeps the root, the bytes one instance
 * sends and receives and, in place of a tag, the call that made it (which
 * collective each start runs). */
void msc_req_persist_coll(MPI_Request req, uint16_t comm, int32_t root, uint64_t bytes, uint64_t recv_bytes,
                          uint16_t call)
{
    struct rslot *s = req == MPI_REQUEST_NULL ? NULL : find(&reqs, MSC_KEY(req), 1);
    if (s) s->recv_bytes = recv_bytes; /* before the kind is published */
    msc_req_persist(req, MSC_REQ_PCOLL, comm, root, (int32_t)call, bytes);
}

/* MPI_Isendrecv, after its request was started: what its receive half asked for. */
void msc_req_asked(MPI_Request req, int32_t peer, int32_t tag, uint64_t bytes)
{
    struct rslot *s = req == MPI_REQUEST_NULL ? NULL : find(&reqs, MSC_KEY(req), 0);
    if (!s) return;
    s->peer = peer;
    s->tag = tag;
    s->bytes = bytes;
}

/* Before a completion call: what is pending under this handle. */
void msc_req_lookup(MPI_Request req, struct msc_reqinfo *info)
{
    *info = (struct msc_reqinfo){.comm = MSC_COMM_UNKNOWN};
    if (req == MPI_REQUEST_NULL) return;
    struct rslot *s = find(&reqs, MSC_KEY(req), 0);
    if (!s) return;
    uint64_t v = __atomic_load_n(&s->val, __ATOMIC_ACQUIRE);
    info->id = (uint32_t)(v & ID_MASK);
    info->comm = (uint16_t)(v >> 32);
    info->kind = (uint8_t)(v >> 48);
    info->slot = &s->val;
    info->val = v;
    info->cancel_asked = (v & CANCEL_ASKED) != 0;
    if (info->kind == MSC_REQ_SENDRECV) {
        info->asked_peer = s->peer;
        info->asked_tag = s->tag;
        info->asked_bytes = s->bytes;
    }
}

/* After a completion call returned the request as complete: nothing is
 * pending under its handle any more. The CAS leaves alone a request that
 * another thread has meanwhile started on the recycled handle. */
void msc_req_completed(const struct msc_reqinfo *info)
{
    if (!info->slot || (info->val & ID_MASK) == 0) return;
    uint64_t expect = info->val;
    /* flag bits may have changed since the lookup; a new request has a new id */
    while (!__atomic_compare_exchange_n(info->slot, &expect, expect & ~(ID_MASK | COMPLETING), 0,
                                        __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
        if ((expect & ID_MASK) != (info->val & ID_MASK)) return;
}

/* Set or clear a flag bit of a looked-up request, unless its handle has
 * started another request since (other bits may change meanwhile). */
static void mark(struct msc_reqinfo *info, uint64_t bit, int on)
{
    if (!info->slot || (info->val & ID_MASK) == 0) return;
    uint64_t expect = __atomic_load_n(info->slot, __ATOMIC_ACQUIRE), want;
    do {
        if ((expect & ID_MASK) != (info->val & ID_MASK)) return;
        want = on ? expect | bit : expect & ~bit;
    } while (!__atomic_compare_exchange_n(info->slot, &expect, want, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE));
    info->val = want;
}

/* Under MPI_THREAD_MULTIPLE, before a completion call: the MPI may hand
 * these handles to another thread's start before the call has marked them
 * done. Single-threaded programs skip it. */
void msc_req_completing(struct msc_reqinfo *info, int n)
{
    for (int i = 0; msc_concurrent && i < n; i++) mark(&info[i], COMPLETING, 1);
}

/* After it, for the requests it did not complete (a no-op on those it did,
 * which msc_req_completed has marked done). */
void msc_req_still_pending(struct msc_reqinfo *info, int n)
{
    for (int i = 0; msc_concurrent && i < n; i++) mark(&info[i], COMPLETING, 0);
}

/* MPI_Cancel was called on a pending request: its completion (or its
 * Request_free) says whether a message went. Only such requests pay for
 * asking MPI whether they were cancelled. */
void msc_req_cancel_asked(struct msc_reqinfo *info)
{
    mark(info, CANCEL_ASKED, 1);
}

/* MPI_Start of a persistent request: a new instance id, and its envelope
 * written into `sub` (a psend/precv record); a persistent collective's
 * received bytes into *recv_bytes. Returns the kind, 0 if unknown. */
int msc_req_restart(MPI_Request req, struct msc_rec *sub, uint64_t *recv_bytes)
{
    struct rslot *s = find(&reqs, MSC_KEY(req), 0);
    if (!s) return 0;
    uint64_t v = __atomic_load_n(&s->val, __ATOMIC_ACQUIRE);
    int kind = (int)(uint8_t)(v >> 48);
    uint16_t comm = (uint16_t)(v >> 32);
    uint32_t id = new_id();
    __atomic_store_n(&s->val, pack(id, comm, kind), __ATOMIC_RELEASE);
    /* A persistent collective's start is the communicator's next collective,
     * numbered whether recording or paused, as the others are. */
    int32_t seq = kind == MSC_REQ_PCOLL ? msc_seq_next(comm) : 0;
    if (sub) {
        sub->req = id;
        sub->comm = comm;
        sub->peer = s->peer;
        sub->tag = s->tag;
        sub->bytes = s->bytes;
        if (kind == MSC_REQ_PCOLL) {
            sub->tag = seq;
            sub->callsite = (uint64_t)(uint16_t)s->tag; /* see MSC_SUB_PCOLL in record.h */
            *recv_bytes = s->recv_bytes;
        }
    }
    return kind;
}

uint32_t msc_msg_start(MPI_Message msg, uint16_t comm)
{
    if (msg == MPI_MESSAGE_NULL || msg == MPI_MESSAGE_NO_PROC) return 0;
    return start(&msgs, MSC_KEY(msg), MSC_REQ_RECV, comm, new_id()) & ID_MASK;
}

uint32_t msc_msg_lookup(MPI_Message msg, uint16_t *comm)
{
    if (msg == MPI_MESSAGE_NULL || msg == MPI_MESSAGE_NO_PROC) return 0;
    struct rslot *s = find(&msgs, MSC_KEY(msg), 0);
    if (!s) return 0;
    uint64_t v = __atomic_exchange_n(&s->val, 0, __ATOMIC_ACQ_REL); /* a message is received once */
    *comm = (uint16_t)(v >> 32);
    return (uint32_t)(v & ID_MASK);
}
