/* The hot loop of the OTF2 export (mpiscope.export.otf2_events): one location's records,
 * as columns, turned into OTF2_EvtWriter_* calls of the library the `otf2` package bundles.
 * The writer functions come as pointers resolved by ctypes in that library, so this kernel
 * does not link against it (nor need its headers): the types below are OTF2's fixed-width
 * ones (OTF2_TimeStamp uint64, *Ref uint32, OTF2_CollectiveOp uint8, request ids uint64).
 * In Python the same loop cost ~3 us per record, most of the export of 10^7 events.
 * No MPI calls.
 */
#include <stdint.h>

#define MSE_API __attribute__((visibility("default")))

typedef void *W;   /* OTF2_EvtWriter * */
typedef void *AL;  /* OTF2_AttributeList *, always NULL */
typedef int (*f_region)(W, AL, uint64_t t, uint32_t region);
typedef int (*f_p2p)(W, AL, uint64_t t, uint32_t peer, uint32_t comm, uint32_t tag, uint64_t bytes);
typedef int (*f_p2p_req)(W, AL, uint64_t t, uint32_t peer, uint32_t comm, uint32_t tag, uint64_t bytes,
                         uint64_t request);
typedef int (*f_req)(W, AL, uint64_t t, uint64_t request);
typedef int (*f_time)(W, AL, uint64_t t);
typedef int (*f_coll_end)(W, AL, uint64_t t, uint8_t op, uint32_t comm, uint32_t root, uint64_t sent,
                          uint64_t received);
typedef int (*f_nbc_done)(W, AL, uint64_t t, uint8_t op, uint32_t comm, uint32_t root, uint64_t sent,
                          uint64_t received, uint64_t request);

/* In the order of the record kinds of streams.py (ENTER = 0 ... NBC_DONE = 11). */
struct mse_otf2_writers {
    f_region enter, leave;
    f_p2p send;
    f_p2p_req isend;
    f_req isend_done;
    f_p2p recv;
    f_req irecv_request;
    f_p2p_req irecv;
    f_time collective_begin;
    f_coll_end collective_end;
    f_req nbc_request;
    f_nbc_done nbc_done;
};

/* Columns as otf2_events.translate() leaves them: refs, communicator ranks and the
 * collective operation already OTF2's; sent and received bytes of collectives already >= 0. */
struct mse_records {
    const int64_t *t;
    const uint8_t *kind;
    const int64_t *x, *a, *b, *c, *d, *e;
    int64_t n;
};

/* Writes records [from, n) and returns n; stops early at a record of another kind
 * (RMA: Python writes it) and returns its index, or at an error of the library, which goes
 * to *error with the index of the refused record returned. */
MSE_API int64_t mse_otf2_write(W w, const struct mse_otf2_writers *f, const struct mse_records *r,
                               int64_t from, int *error)
{
    int rc = 0;
    int64_t i = from;
    for (; i < r->n && rc == 0; i++) {
        uint64_t t = (uint64_t)r->t[i];
        int64_t a = r->a[i], b = r->b[i], c = r->c[i], d = r->d[i];
        /* an MPI tag is an int: OTF2's uint32 holds its bits */
        uint32_t tag = (uint32_t)(c & 0xFFFFFFFF);
        switch (r->kind[i]) {
        case 0: rc = f->enter(w, 0, t, (uint32_t)r->x[i]); break;
        case 1: rc = f->leave(w, 0, t, (uint32_t)r->x[i]); break;
        case 2: rc = f->send(w, 0, t, (uint32_t)a, (uint32_t)b, tag, (uint64_t)d); break;
        case 3: rc = f->isend(w, 0, t, (uint32_t)a, (uint32_t)b, tag, (uint64_t)d, (uint64_t)r->e[i]); break;
        case 4: rc = f->isend_done(w, 0, t, (uint64_t)a); break;
        case 5: rc = f->recv(w, 0, t, (uint32_t)a, (uint32_t)b, tag, (uint64_t)d); break;
        case 6: rc = f->irecv_request(w, 0, t, (uint64_t)a); break;
        case 7: rc = f->irecv(w, 0, t, (uint32_t)a, (uint32_t)b, tag, (uint64_t)d, (uint64_t)r->e[i]); break;
        case 8: rc = f->collective_begin(w, 0, t); break;
        case 9:
            rc = f->collective_end(w, 0, t, (uint8_t)r->x[i], (uint32_t)a, (uint32_t)b, (uint64_t)c, (uint64_t)d);
            break;
        case 10: rc = f->nbc_request(w, 0, t, (uint64_t)a); break;
        case 11:
            rc = f->nbc_done(w, 0, t, (uint8_t)r->x[i], (uint32_t)a, (uint32_t)b, (uint64_t)c, (uint64_t)d,
                             (uint64_t)r->e[i]);
            break;
        default: *error = 0; return i;
        }
    }
    *error = rc;
    return rc ? i - 1 : i;
}
