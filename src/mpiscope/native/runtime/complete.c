/* Completion calls, persistent starts and Request_free, written by hand: they
 * look the requests up before PMPI resets them, supply statuses where the
 * program passed MPI_STATUS(ES)_IGNORE (a wildcard receive's source is only
 * in its status), record one completion per finished request, and mark each
 * finished request done in the table. That last step runs while recording
 * is paused too, so that a recycled handle is never taken for a shared one.
 *
 * Single-request calls (Wait, Test, Waitany, Testany) carry the completion
 * in their own record; the multi-request ones add one sub:complete record per
 * finished request after their own.
 */

#include "runtime.h"

static int is_recv(int kind)
{
    return kind == MSC_REQ_RECV || kind == MSC_REQ_PRECV || kind == MSC_REQ_SENDRECV;
}

/* MPICH 5.0 completes an MPI_Isendrecv with a status whose tag and count are
 * not its message's (Open MPI's are). Where the receive half named its source
 * and tag, a status that disagrees with them is not taken: the envelope is
 * the one asked for, and the bytes what the receive half could hold. */
static int isendrecv_status_wrong(struct msc_rec *r, const struct msc_reqinfo *ri, const MPI_Status *st)
{
    int32_t peer = msc_world_rank(ri->comm, st->MPI_SOURCE);
    if ((ri->asked_peer == MSC_PEER_ANY || peer == ri->asked_peer) &&
        (ri->asked_tag == MSC_TAG_ANY || st->MPI_TAG == ri->asked_tag))
        return 0;
    if (ri->asked_peer != MSC_PEER_ANY) peer = ri->asked_peer;
    r->peer = peer;
    r->tag = ri->asked_tag != MSC_TAG_ANY ? ri->asked_tag : st->MPI_TAG;
    r->bytes = ri->asked_bytes;
    return 1;
}

static int is_send(int kind)
{
    return kind == MSC_REQ_SEND || kind == MSC_REQ_PSEND || kind == MSC_REQ_SENDRECV;
}

/* A cancelled request carried no message: its completion says so, and the
 * merge leaves its send out of the matching (a receive has no envelope). */
static int cancelled(struct msc_rec *r, const struct msc_reqinfo *ri, const MPI_Status *st)
{
    int flag = 0;
    if (!ri->cancel_asked || !st || PMPI_Test_cancelled(st, &flag) != MPI_SUCCESS || !flag) return 0;
    msc_no_message(r);
    r->peer = MSC_PEER_CANCELLED;
    return 1;
}

/* Envelope of a finished request into r. */
static void completion_fields(struct msc_rec *r, const struct msc_reqinfo *ri, const MPI_Status *st)
{
    r->req = ri->id;
    r->comm = ri->comm;
    if (!st || cancelled(r, ri, st) || !is_recv(ri->kind)) return;
    if (ri->kind == MSC_REQ_SENDRECV && isendrecv_status_wrong(r, ri, st)) return;
    msc_status_envelope(r, ri->comm, st);
}

void msc_emit_complete(const struct msc_span *sp, const struct msc_reqinfo *ri, const MPI_Status *st)
{
    struct msc_rec *s = msc_sub(sp);
    if (!s) return;
    completion_fields(s, ri, st);
    msc_commit(s, MSC_SUB_COMPLETE);
}

void msc_emit_recv(const struct msc_span *sp, uint16_t comm, const MPI_Status *st)
{
    struct msc_rec *s = msc_sub(sp);
    if (!s) return;
    s->comm = comm;
    msc_status_envelope(s, comm, st);
    msc_commit(s, MSC_SUB_RECV);
}

/* Per-thread scratch for n request infos and, if the program ignores them, n statuses. */
static struct msc_reqinfo *lookup_all(int n, MPI_Request *reqs, MPI_Status **statuses, int need_status)
{
    size_t info_bytes = ((sizeof(struct msc_reqinfo) * (size_t)n) + 15) & ~(size_t)15;
    int own = need_status && *statuses == MPI_STATUSES_IGNORE;
    char *mem = msc_scratch(0, info_bytes + (own ? sizeof(MPI_Status) * (size_t)n : 0) + 16);
    if (!mem) return NULL;
    struct msc_reqinfo *info = (struct msc_reqinfo *)mem;
    for (int i = 0; i < n; i++) msc_req_lookup(reqs[i], &info[i]);
    msc_req_completing(info, n);
    if (own) *statuses = (MPI_Status *)(mem + info_bytes);
    return info;
}

int msc_wait(void *site, MPI_Request *request, MPI_Status *status)
{
    struct msc_rec *r = msc_enter(MSC_CALL_WAIT, site);
    struct msc_reqinfo ri = {.comm = MSC_COMM_UNKNOWN};
    MPI_Status tmp, *st = (r && status == MPI_STATUS_IGNORE) ? &tmp : status;
    if (msc_tracking) {
        msc_req_lookup(*request, &ri);
        msc_req_completing(&ri, 1);
    }
    int rc = PMPI_Wait(request, st);
    uint64_t t_left = r ? msc_ticks() : 0;
    if (rc == MPI_SUCCESS) msc_req_completed(&ri);
    else msc_req_still_pending(&ri, 1);
    if (r) {
        if (rc == MPI_SUCCESS && ri.id) completion_fields(r, &ri, st);
        msc_leave_at(r, t_left);
        if (MSC_UNLIKELY(rc != MPI_SUCCESS)) msc_emit_rc(r, rc);
    }
    return rc;
}

int msc_test(void *site, MPI_Request *request, int *flag, MPI_Status *status)
{
    struct msc_rec *r = msc_enter(MSC_CALL_TEST, site);
    struct msc_reqinfo ri = {.comm = MSC_COMM_UNKNOWN};
    MPI_Status tmp, *st = (r && status == MPI_STATUS_IGNORE) ? &tmp : status;
    if (msc_tracking) {
        msc_req_lookup(*request, &ri);
        msc_req_completing(&ri, 1);
    }
    /* A test of MPI_REQUEST_NULL returns flag = true with nothing completed: a poll all the same
     * (CP2K tests arrays of finished requests in loops: 3.5 M one-call records folded to few). */
    int null = *request == MPI_REQUEST_NULL;
    int rc = PMPI_Test(request, flag, st);
    uint64_t t_left = r ? msc_ticks() : 0;
    int done = rc == MPI_SUCCESS && *flag && !null;
    if (done) msc_req_completed(&ri);
    else msc_req_still_pending(&ri, 1);
    if (r) {
        if (done && ri.id) completion_fields(r, &ri, st);
        msc_leave_at(r, t_left);
        if (MSC_UNLIKELY(rc != MPI_SUCCESS)) msc_emit_rc(r, rc);
        else if (!done) msc_poll_missed(r);
    }
    return rc;
}

int msc_any(void *site, int count, MPI_Request reqs[], int *index, int *flag, MPI_Status *status, int test)
{
    struct msc_rec *r = msc_enter(test ? MSC_CALL_TESTANY : MSC_CALL_WAITANY, site);
    MPI_Status tmp, *st = (r && status == MPI_STATUS_IGNORE) ? &tmp : status;
    MPI_Status *none = MPI_STATUSES_IGNORE;
    struct msc_reqinfo *info = msc_tracking ? lookup_all(count, reqs, &none, 0) : NULL;
    int rc = test ? PMPI_Testany(count, reqs, index, flag, st) : PMPI_Waitany(count, reqs, index, st);
    uint64_t t_left = r ? msc_ticks() : 0;
    int done = rc == MPI_SUCCESS && (!test || *flag) && *index != MPI_UNDEFINED;
    if (done && info) msc_req_completed(&info[*index]);
    if (info) msc_req_still_pending(info, count);
    if (r) {
        if (done && info && info[*index].id) completion_fields(r, &info[*index], st);
        msc_leave_at(r, t_left);
        if (MSC_UNLIKELY(rc != MPI_SUCCESS)) msc_emit_rc(r, rc);
        else if (test && !done) msc_poll_missed(r);  /* nothing left to complete: index MPI_UNDEFINED */
    }
    return rc;
}

MSC_API int MPI_Waitany(int count, MPI_Request array_of_requests[], int *index, MPI_Status *status)
{
    return msc_any(__builtin_return_address(0), count, array_of_requests, index, NULL, status, 0);
}

MSC_API int MPI_Testany(int count, MPI_Request array_of_requests[], int *index, int *flag, MPI_Status *status)
{
    return msc_any(__builtin_return_address(0), count, array_of_requests, index, flag, status, 1);
}

/* Waitall/Testall (indices == NULL) and Waitsome/Testsome. */
int msc_many(void *site, uint16_t call, int count, MPI_Request reqs[], int *flag, int *outcount,
                int *indices, MPI_Status *statuses)
{
    struct msc_rec *r = msc_enter(call, site);
    MPI_Status *st = statuses;
    struct msc_reqinfo *info = msc_tracking ? lookup_all(count, reqs, &st, r != NULL) : NULL;
    /* Testall of requests that are all MPI_REQUEST_NULL returns flag = true with nothing completed. */
    int all_null = call == MSC_CALL_TESTALL && r;
    for (int k = 0; all_null && k < count; k++) all_null = reqs[k] == MPI_REQUEST_NULL;
    int rc;
    switch (call) {
    case MSC_CALL_WAITALL: rc = PMPI_Waitall(count, reqs, st); break;
    case MSC_CALL_TESTALL: rc = PMPI_Testall(count, reqs, flag, st); break;
    case MSC_CALL_WAITSOME: rc = PMPI_Waitsome(count, reqs, outcount, indices, st); break;
    default: rc = PMPI_Testsome(count, reqs, outcount, indices, st); break;
    }
    uint64_t t_left = r ? msc_ticks() : 0;
    int finished = rc == MPI_SUCCESS && info && (indices ? *outcount != MPI_UNDEFINED : (!flag || *flag));
    int n = !finished ? 0 : indices ? *outcount : count;
    for (int k = 0; k < n; k++) msc_req_completed(&info[indices ? indices[k] : k]);
    if (info && n < count) msc_req_still_pending(info, count);
    if (r) {
        struct msc_span sp = msc_leave_at(r, t_left);
        for (int k = 0; k < n; k++) {
            /* Waitsome packs statuses: status k belongs to indices[k]. */
            const struct msc_reqinfo *ri = &info[indices ? indices[k] : k];
            if (ri->id) msc_emit_complete(&sp, ri, st == MPI_STATUSES_IGNORE ? NULL : &st[k]);
        }
        if (MSC_UNLIKELY(rc != MPI_SUCCESS)) msc_emit_rc(r, rc);
        else if ((n == 0 || all_null) && (call == MSC_CALL_TESTALL || call == MSC_CALL_TESTSOME)) msc_poll_missed(r);
    }
    return rc;
}

MSC_API int MPI_Waitall(int count, MPI_Request array_of_requests[], MPI_Status *array_of_statuses)
{
    return msc_many(__builtin_return_address(0), MSC_CALL_WAITALL, count, array_of_requests, NULL, NULL, NULL,
                array_of_statuses);
}

MSC_API int MPI_Testall(int count, MPI_Request array_of_requests[], int *flag, MPI_Status *array_of_statuses)
{
    return msc_many(__builtin_return_address(0), MSC_CALL_TESTALL, count, array_of_requests, flag, NULL, NULL,
                array_of_statuses);
}

MSC_API int MPI_Waitsome(int incount, MPI_Request array_of_requests[], int *outcount, int array_of_indices[],
                         MPI_Status *array_of_statuses)
{
    return msc_many(__builtin_return_address(0), MSC_CALL_WAITSOME, incount, array_of_requests, NULL, outcount,
                array_of_indices, array_of_statuses);
}

MSC_API int MPI_Testsome(int incount, MPI_Request array_of_requests[], int *outcount, int array_of_indices[],
                         MPI_Status *array_of_statuses)
{
    return msc_many(__builtin_return_address(0), MSC_CALL_TESTSOME, incount, array_of_requests, NULL, outcount,
                array_of_indices, array_of_statuses);
}

/* A send about to be freed after MPI_Cancel: its status says whether it was
 * cancelled. A cancel that succeeds completes the request at once (MPICH);
 * one still pending was not cancelled (Open MPI cancels no send, MPI-4
 * deprecates cancelling them), and its message may yet be received. */
static int cancelled_before_free(MPI_Request req)
{
    int done = 0, flag = 0;
    MPI_Status st;
    if (PMPI_Request_get_status(req, &done, &st) != MPI_SUCCESS || !done) return 0;
    return PMPI_Test_cancelled(&st, &flag) == MPI_SUCCESS && flag;
}

int msc_request_free(void *site, MPI_Request *request)
{
    struct msc_rec *r = msc_enter(MSC_CALL_REQUEST_FREE, site);
    struct msc_reqinfo ri = {.comm = MSC_COMM_UNKNOWN};
    if (msc_tracking) {
        msc_req_lookup(*request, &ri);
        msc_req_completing(&ri, 1);
    }
    int gone = r && ri.id && ri.cancel_asked && is_send(ri.kind) && cancelled_before_free(*request);
    int rc = PMPI_Request_free(request);
    uint64_t t_left = r ? msc_ticks() : 0;
    /* The request completes on its own; its handle may come back for another. */
    if (rc == MPI_SUCCESS) msc_req_completed(&ri);
    else msc_req_still_pending(&ri, 1);
    if (r) {
        r->req = ri.id;
        r->comm = ri.comm;
        struct msc_span sp = msc_leave_at(r, t_left);
        if (rc == MPI_SUCCESS && gone) {
            struct msc_rec *s = msc_sub(&sp);
            if (s) {
                s->req = ri.id;
                s->comm = ri.comm;
                s->peer = MSC_PEER_CANCELLED;
                msc_commit(s, MSC_SUB_COMPLETE);
            }
        }
    }
    return rc;
}

/* Record one started persistent request after Start/Startall returned. */
static void started(const struct msc_span *sp, MPI_Request req)
{
    struct msc_rec *s = sp ? msc_sub(sp) : NULL;
    uint64_t recv_bytes = 0;
    int kind = msc_req_restart(req, s, &recv_bytes);
    if (!s) return;
    /* a reserved record must be committed, or readers stop at it */
    msc_commit(s, kind == MSC_REQ_PRECV   ? MSC_SUB_PRECV
                  : kind == MSC_REQ_PSEND ? MSC_SUB_PSEND
                  : kind == MSC_REQ_PCOLL ? MSC_SUB_PCOLL
                                          : MSC_SUB_PSTART);
    if (kind == MSC_REQ_PCOLL && recv_bytes != s->bytes) msc_emit_recv_bytes(sp, recv_bytes);
}

/* What a collective (or the persistent collective started just before) receives,
 * in the record after its own (see MSC_SUB_RECV_BYTES in record.h). */
void msc_emit_recv_bytes(const struct msc_span *sp, uint64_t bytes)
{
    struct msc_rec *s = msc_sub(sp);
    if (!s) return;
    s->bytes = bytes;
    msc_commit(s, MSC_SUB_RECV_BYTES);
}

/* The call of record r (just left) returned rc, not MPI_SUCCESS: a record after it says so,
 * and the merge keeps the call as an event but matches no message or collective with it. */
void msc_emit_rc(const struct msc_rec *r, int rc)
{
    struct msc_span sp = {r->t_enter, r->t_leave, r->callsite};
    struct msc_rec *s = msc_sub(&sp);
    if (!s) return;
    s->tag = rc;
    msc_commit(s, MSC_SUB_RC);
}

int msc_fold_polls = 1; /* MPISCOPE_POLL_FOLD=0: one record per call, to measure what folding saves */

/* The first calls of a polling loop (see msc_poll_missed): r, the second unsuccessful poll
 * in a row, becomes the run's sub:count record. */
void msc_poll_count_starts(struct msc_rec *poll, struct msc_rec *r)
{
    uint64_t t_left = r->t_leave;
    r->bytes = 2;
    r->callsite = poll->t_leave - poll->t_enter + (t_left - r->t_enter);
    r->t_enter = poll->t_enter;
    r->req = 0;
    r->peer = MSC_PEER_NONE;
    r->tag = MSC_TAG_NONE;
    r->comm = MSC_COMM_UNKNOWN;
    __atomic_store_n(&r->call, (uint16_t)MSC_SUB_COUNT, __ATOMIC_RELEASE);
    __atomic_store_n(&poll->t_leave, t_left, __ATOMIC_RELEASE);
}

/* A cycle of polls (see msc_poll_missed): r, the thread's last record, an unsuccessful poll.
 * Where a cycle is folded and r is its next poll, r is folded into that poll's record and
 * sub:count, and given back. Else, where the polls in a row that end at r are two turns of
 * k (2..MSC_CYCLE_MAX) polls of different call sites, their 2k records become the k polls'
 * records, each followed by its sub:count: [P1 .. Pk P1' .. Pk'] -> [P1 c1 .. Pk ck], each Pi
 * from its first entry to its last exit. Returns 1 where r was folded or began a cycle. The
 * merge (trace/outcomes.py) lays the k rows one after the other across the cycle's span. */
int msc_poll_cycle(struct msc_thread *t, struct msc_rec *r)
{
    if (t->cycle) {
        struct msc_rec *p = t->cycle + 2 * t->cycle_at;
        if (r == t->cycle + 2 * t->cycle_k && msc_same_poll(p, r)) {
            msc_poll_fold(t, p, p + 1, r);
            t->cycle_at = (uint8_t)((t->cycle_at + 1) % t->cycle_k);
            return 1;
        }
        t->cycle = NULL;
        return 0;
    }
    struct msc_rec *run = t->poll && r == t->poll + 1 ? t->run : r;
    for (int k = 2; k <= MSC_CYCLE_MAX && r - run + 1 >= 2 * k; k++) {
        struct msc_rec *base = r - 2 * k + 1;
        int turns = 1;
        for (int i = 0; i < k && turns; i++) turns = msc_same_poll(base + i, base + k + i);
        if (!turns) continue;
        struct msc_rec was[2 * MSC_CYCLE_MAX];
        for (int i = 0; i < 2 * k; i++) was[i] = base[i];  /* memcpy's length: a false overflow warning at -O1 */
        for (int i = 0; i < k; i++) {
            const struct msc_rec *first = &was[i], *second = &was[k + i];
            struct msc_rec *p = base + 2 * i, *count = p + 1;
            __atomic_store_n(&count->call, 0, __ATOMIC_RELEASE);
            *p = *first;
            p->t_leave = second->t_leave;
            count->t_enter = first->t_enter;
            count->t_leave = second->t_leave;
            count->bytes = 2;
            count->callsite = (first->t_leave - first->t_enter) + (second->t_leave - second->t_enter);
            count->req = 0;
            count->peer = MSC_PEER_NONE;
            count->tag = MSC_TAG_NONE;
            count->comm = MSC_COMM_UNKNOWN;
            __atomic_store_n(&count->call, (uint16_t)MSC_SUB_COUNT, __ATOMIC_RELEASE);
        }
        t->cycle = base;
        t->cycle_k = (uint8_t)k;
        t->cycle_at = 0;
        t->poll = NULL;
        return 1;
    }
    return 0;
}

int msc_start_request(void *site, MPI_Request *request)
{
    struct msc_rec *r = msc_enter(MSC_CALL_START, site);
    int rc = PMPI_Start(request);
    struct msc_span sp;
    if (r) sp = msc_leave(r);
    if (rc == MPI_SUCCESS && msc_tracking) started(r ? &sp : NULL, *request);
    return rc;
}

int msc_startall(void *site, int count, MPI_Request array_of_requests[])
{
    struct msc_rec *r = msc_enter(MSC_CALL_STARTALL, site);
    int rc = PMPI_Startall(count, array_of_requests);
    struct msc_span sp;
    if (r) sp = msc_leave(r);
    for (int i = 0; rc == MPI_SUCCESS && msc_tracking && i < count; i++)
        started(r ? &sp : NULL, array_of_requests[i]);
    return rc;
}

/* The C entry points: their caller is the call site. */
MSC_API int MPI_Wait(MPI_Request *request, MPI_Status *status)
{
    return msc_wait(__builtin_return_address(0), request, status);
}

MSC_API int MPI_Test(MPI_Request *request, int *flag, MPI_Status *status)
{
    return msc_test(__builtin_return_address(0), request, flag, status);
}

MSC_API int MPI_Request_free(MPI_Request *request)
{
    return msc_request_free(__builtin_return_address(0), request);
}

MSC_API int MPI_Start(MPI_Request *request)
{
    return msc_start_request(__builtin_return_address(0), request);
}

MSC_API int MPI_Startall(int count, MPI_Request array_of_requests[])
{
    return msc_startall(__builtin_return_address(0), count, array_of_requests);
}
