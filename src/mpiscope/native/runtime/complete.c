/* Completion calls and persistent starts, written by hand: they must look the
 * requests up before PMPI resets them, supply statuses where the program
 * passed MPI_STATUS(ES)_IGNORE (a wildcard receive's source is only in its
 * status), and record one completion per finished request.
 *
 * Single-request calls (Wait, Test, Waitany, Testany) carry the completion
 * in their own record; the multi-request ones add one sub:complete record per
 * finished request after their own.
 */
#include "runtime.h"

void msc_req_finished(MPI_Request req, const struct msc_reqinfo *info);
int msc_req_restart(MPI_Request req, struct msc_rec *sub);

static int is_recv(int kind)
{
    return kind == MSC_REQ_RECV || kind == MSC_REQ_PRECV;
}

/* Envelope of a finished request into r; cancelled receives delivered nothing. */
static void completion_fields(struct msc_rec *r, const struct msc_reqinfo *ri, const MPI_Status *st)
{
    r->req = ri->id;
    r->comm = ri->comm;
    if (!is_recv(ri->kind) || !st) return;
    int cancelled = 0;
    PMPI_Test_cancelled(st, &cancelled);
    if (cancelled) {
        msc_no_message(r);
        return;
    }
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

/* Scratch for n request infos and, if the program ignores them, n statuses. */
static struct msc_reqinfo *lookup_all(int n, MPI_Request *reqs, MPI_Status **statuses)
{
    size_t info_bytes = ((sizeof(struct msc_reqinfo) * (size_t)n) + 15) & ~(size_t)15;
    size_t need = info_bytes + (*statuses == MPI_STATUSES_IGNORE ? sizeof(MPI_Status) * (size_t)n : 0);
    char *mem = msc_scratch(need ? need : 16);
    if (!mem) return NULL;
    struct msc_reqinfo *info = (struct msc_reqinfo *)mem;
    for (int i = 0; i < n; i++) {
        info[i] = (struct msc_reqinfo){0, MSC_COMM_UNKNOWN, 0};
        msc_req_lookup(reqs[i], &info[i]);
    }
    if (*statuses == MPI_STATUSES_IGNORE) *statuses = (MPI_Status *)(mem + info_bytes);
    return info;
}

static void finish_one(struct msc_rec *r, const struct msc_reqinfo *ri, MPI_Request after, const MPI_Status *st)
{
    completion_fields(r, ri, st);
    msc_req_finished(after, ri);
}

MSC_API int MPI_Wait(MPI_Request *request, MPI_Status *status)
{
    struct msc_rec *r = msc_enter(MSC_CALL_WAIT, __builtin_return_address(0));
    struct msc_reqinfo ri = {0, MSC_COMM_UNKNOWN, 0};
    MPI_Status tmp, *st = status;
    if (r) {
        msc_req_lookup(*request, &ri);
        if (status == MPI_STATUS_IGNORE) st = &tmp;
    }
    int rc = PMPI_Wait(request, st);
    if (r) {
        if (rc == MPI_SUCCESS && ri.id) finish_one(r, &ri, *request, st);
        msc_leave(r);
    }
    return rc;
}

MSC_API int MPI_Test(MPI_Request *request, int *flag, MPI_Status *status)
{
    struct msc_rec *r = msc_enter(MSC_CALL_TEST, __builtin_return_address(0));
    struct msc_reqinfo ri = {0, MSC_COMM_UNKNOWN, 0};
    MPI_Status tmp, *st = status;
    if (r) {
        msc_req_lookup(*request, &ri);
        if (status == MPI_STATUS_IGNORE) st = &tmp;
    }
    int rc = PMPI_Test(request, flag, st);
    if (r) {
        if (rc == MPI_SUCCESS && *flag && ri.id) finish_one(r, &ri, *request, st);
        msc_leave(r);
    }
    return rc;
}

static int any(void *site, int count, MPI_Request reqs[], int *index, int *flag, MPI_Status *status, int test)
{
    struct msc_rec *r = msc_enter(test ? MSC_CALL_TESTANY : MSC_CALL_WAITANY, site);
    MPI_Status tmp, *st = status;
    struct msc_reqinfo *info = NULL;
    if (r) {
        MPI_Status *none = MPI_STATUSES_IGNORE;
        info = lookup_all(count, reqs, &none);
        if (status == MPI_STATUS_IGNORE) st = &tmp;
    }
    int rc = test ? PMPI_Testany(count, reqs, index, flag, st) : PMPI_Waitany(count, reqs, index, st);
    if (r) {
        int done = rc == MPI_SUCCESS && (!test || *flag) && *index != MPI_UNDEFINED;
        if (done && info && info[*index].id) finish_one(r, &info[*index], reqs[*index], st);
        msc_leave(r);
    }
    return rc;
}

MSC_API int MPI_Waitany(int count, MPI_Request array_of_requests[], int *index,
                                          MPI_Status *status)
{
    return any(__builtin_return_address(0), count, array_of_requests, index, NULL, status, 0);
}

MSC_API int MPI_Testany(int count, MPI_Request array_of_requests[], int *index,
                                          int *flag, MPI_Status *status)
{
    return any(__builtin_return_address(0), count, array_of_requests, index, flag, status, 1);
}

/* Waitall/Testall (indices == NULL) and Waitsome/Testsome. */
static int many(void *site, uint16_t call, int count, MPI_Request reqs[], int *flag, int *outcount, int *indices,
                MPI_Status *statuses)
{
    struct msc_rec *r = msc_enter(call, site);
    MPI_Status *st = statuses;
    struct msc_reqinfo *info = r ? lookup_all(count, reqs, &st) : NULL;
    int rc;
    switch (call) {
    case MSC_CALL_WAITALL: rc = PMPI_Waitall(count, reqs, st); break;
    case MSC_CALL_TESTALL: rc = PMPI_Testall(count, reqs, flag, st); break;
    case MSC_CALL_WAITSOME: rc = PMPI_Waitsome(count, reqs, outcount, indices, st); break;
    default: rc = PMPI_Testsome(count, reqs, outcount, indices, st); break;
    }
    if (r) {
        r->tag = count;
        struct msc_span sp = msc_leave(r);
        if (rc != MPI_SUCCESS || !info) return rc;
        if (indices) {
            if (*outcount == MPI_UNDEFINED) return rc;
            for (int k = 0; k < *outcount; k++) {
                int i = indices[k];
                /* Waitsome packs statuses: status k belongs to indices[k]. */
                if (info[i].id) msc_emit_complete(&sp, &info[i], &st[k]);
                msc_req_finished(reqs[i], &info[i]);
            }
        } else if (!flag || *flag) {
            for (int i = 0; i < count; i++) {
                if (info[i].id) msc_emit_complete(&sp, &info[i], &st[i]);
                msc_req_finished(reqs[i], &info[i]);
            }
        }
    }
    return rc;
}

MSC_API int MPI_Waitall(int count, MPI_Request array_of_requests[], MPI_Status *array_of_statuses)
{
    return many(__builtin_return_address(0), MSC_CALL_WAITALL, count, array_of_requests, NULL, NULL, NULL, array_of_statuses);
}

MSC_API int MPI_Testall(int count, MPI_Request array_of_requests[], int *flag,
                                          MPI_Status *array_of_statuses)
{
    return many(__builtin_return_address(0), MSC_CALL_TESTALL, count, array_of_requests, flag, NULL, NULL, array_of_statuses);
}

MSC_API int MPI_Waitsome(int incount, MPI_Request array_of_requests[], int *outcount,
                                           int array_of_indices[], MPI_Status *array_of_statuses)
{
    return many(__builtin_return_address(0), MSC_CALL_WAITSOME, incount, array_of_requests, NULL, outcount, array_of_indices,
                array_of_statuses);
}

MSC_API int MPI_Testsome(int incount, MPI_Request array_of_requests[], int *outcount,
                                           int array_of_indices[], MPI_Status *array_of_statuses)
{
    return many(__builtin_return_address(0), MSC_CALL_TESTSOME, incount, array_of_requests, NULL, outcount, array_of_indices,
                array_of_statuses);
}

static void started(const struct msc_span *sp, MPI_Request req)
{
    struct msc_rec *s = msc_sub(sp);
    if (!s) return;
    int kind = msc_req_restart(req, s);
    /* a reserved record must be committed, or readers stop at it */
    msc_commit(s, kind == MSC_REQ_PRECV ? MSC_SUB_PRECV : kind == MSC_REQ_PSEND ? MSC_SUB_PSEND : MSC_SUB_PSTART);
}

MSC_API int MPI_Start(MPI_Request *request)
{
    struct msc_rec *r = msc_enter(MSC_CALL_START, __builtin_return_address(0));
    int rc = PMPI_Start(request);
    if (r) {
        struct msc_span sp = msc_leave(r);
        if (rc == MPI_SUCCESS) started(&sp, *request);
    }
    return rc;
}

MSC_API int MPI_Startall(int count, MPI_Request array_of_requests[])
{
    struct msc_rec *r = msc_enter(MSC_CALL_STARTALL, __builtin_return_address(0));
    int rc = PMPI_Startall(count, array_of_requests);
    if (r) {
        r->tag = count;
        struct msc_span sp = msc_leave(r);
        for (int i = 0; rc == MPI_SUCCESS && i < count; i++) started(&sp, array_of_requests[i]);
    }
    return rc;
}
