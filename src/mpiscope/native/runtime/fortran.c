/* Fortran entry points of the hand-written calls, and helpers of the
 * generated ones (fortran_gen.c).
 *
 * Completion calls carry no buffers, so their Fortran entries convert the
 * handles and statuses and run the same code as the C wrappers (complete.c),
 * with the Fortran caller as call site. MPI_Init must run the MPI's own
 * Fortran initialisation, so it calls the Fortran PMPI routine.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fortran.h"
#if MSC_HAVE_FORTRAN

/* The MPI's own Fortran routine. MPICH names the profiling versions of its
 * `use mpi_f08` entry points pmpir_x_f08(ts)_, Open MPI pmpi_x_f08_. */
void *msc_fortran_symbol(const char *name)
{
    void *p = dlsym(RTLD_NEXT, name);
    if (!p && strncmp(name, "pmpi_", 5) == 0 && strstr(name, "_f08")) {
        char alt[128];
        if ((size_t)snprintf(alt, sizeof alt, "pmpir_%s", name + 5) < sizeof alt) p = dlsym(RTLD_NEXT, alt);
    }
    if (!p) {
        /* Only a Fortran program reaches here, so the MPI has Fortran bindings. */
        msc_warn("the MPI library has no Fortran symbol", name, 0);
        abort();
    }
    return p;
}

/* The `use mpi_f08` sentinels are the mpif.h ones in Open MPI and objects of
 * their own in MPICH. mpi.h declares them only from MPI-4 (Open MPI 4 has
 * them without the declaration), so they are looked up by name, once. */
static const void *f08_ignore[2];
static int f08_looked_up;

static const void *f08_sentinel(int which)
{
    if (!__atomic_load_n(&f08_looked_up, __ATOMIC_ACQUIRE)) {
        const char *names[2] = {"MPI_F08_STATUS_IGNORE", "MPI_F08_STATUSES_IGNORE"};
        for (int i = 0; i < 2; i++) {
            void *const *var = dlsym(RTLD_DEFAULT, names[i]);
            f08_ignore[i] = var ? *var : NULL;
        }
        __atomic_store_n(&f08_looked_up, 1, __ATOMIC_RELEASE);
    }
    return f08_ignore[which];
}

int msc_f_status_ignored(const MPI_Fint *f)
{
    const void *f08 = f08_sentinel(0);
    return f == MPI_F_STATUS_IGNORE || (f08 && (const void *)f == f08);
}

int msc_f_statuses_ignored(const MPI_Fint *f)
{
    const void *f08 = f08_sentinel(1);
    return f == MPI_F_STATUSES_IGNORE || (f08 && (const void *)f == f08);
}

/* Fortran's MPI_IN_PLACE is an object of the MPI's Fortran side, not C's
 * MPI_IN_PLACE: Open MPI's common block mpi_fortran_in_place (in the
 * compiler's spelling; `use mpi_f08` binds to it too), MPICH's object
 * MPIR_F08_MPI_IN_PLACE (`use mpi_f08`) and, for mpif.h and `use mpi`, the
 * address MPICH's Fortran MPI_INIT stores in MPIR_F_MPI_IN_PLACE (read at
 * each use, since it is set after start-up). Looked up by name, once. */
static const void *in_place_objects[5];
static void *const *mpich_f_in_place;
static int in_place_looked_up;

int msc_f_in_place(const void *buf)
{
    if (!__atomic_load_n(&in_place_looked_up, __ATOMIC_ACQUIRE)) {
        const char *names[5] = {"mpi_fortran_in_place", "mpi_fortran_in_place_", "mpi_fortran_in_place__",
                                "MPI_FORTRAN_IN_PLACE", "MPIR_F08_MPI_IN_PLACE"};
        for (int i = 0; i < 5; i++) in_place_objects[i] = dlsym(RTLD_DEFAULT, names[i]);
        mpich_f_in_place = dlsym(RTLD_DEFAULT, "MPIR_F_MPI_IN_PLACE");
        __atomic_store_n(&in_place_looked_up, 1, __ATOMIC_RELEASE);
    }
    if (!buf) return 0;
    for (int i = 0; i < 5; i++)
        if (buf == in_place_objects[i]) return 1;
    return mpich_f_in_place && buf == *mpich_f_in_place;
}

int32_t msc_f_peers(MPI_Comm comm)
{
    uint16_t c = msc_comm_id(comm);
    int32_t p = msc_npeers(c), d = msc_outdeg(c), i = msc_indeg(c);
    p = p > d ? p : d;
    return p > i ? p : i;
}

const MPI_Datatype *msc_f2c_types(const MPI_Fint *types, int32_t n)
{
    MPI_Datatype *out = msc_scratch(1, sizeof(MPI_Datatype) * (size_t)(n > 0 ? n : 1));
    if (!out) return NULL;
    for (int32_t i = 0; i < n; i++) out[i] = PMPI_Type_f2c(types[i]);
    return out;
}

/* Four spellings of each Fortran entry point (mpi_x, mpi_x_, mpi_x__, MPI_X),
 * and the `use mpi_f08` one of Open MPI and MPICH (mpi_x_f08_): its handles
 * are derived types holding the INTEGER handle, passed by reference like it,
 * and its ierror is OPTIONAL, so it may be NULL. */
#define MSC_FORTRAN_F77(lower, upper, params, args)                \
    MSC_API void lower params { msc_f_##lower args; }              \
    MSC_API void lower##_ params { msc_f_##lower args; }           \
    MSC_API void lower##__ params { msc_f_##lower args; }          \
    MSC_API void upper params { msc_f_##lower args; }
#define MSC_FORTRAN(lower, upper, params, args)                    \
    MSC_FORTRAN_F77(lower, upper, params, args)                    \
    MSC_API void lower##_f08_ params                               \
    {                                                              \
        MPI_Fint msc_ierr_;                                        \
        if (!ierr) ierr = &msc_ierr_;                              \
        msc_f_##lower args;                                        \
    }

#define SITE __builtin_return_address(0)

typedef void (*init_fn)(MPI_Fint *);
typedef void (*init_thread_fn)(MPI_Fint *, MPI_Fint *, MPI_Fint *);

static void msc_f_mpi_init(void *site, const char *real_name, MPI_Fint *ierr)
{
    init_fn real;
    uint64_t t0 = msc_ticks();
    *(void **)&real = msc_fortran_symbol(real_name);
    msc_init_from_fortran = 1;
    real(ierr);
    msc_init_from_fortran = 0;
    if (*ierr == MPI_SUCCESS) msc_start(MSC_CALL_INIT, t0, site);
}

static void msc_f_mpi_init_thread(void *site, const char *real_name, MPI_Fint *required, MPI_Fint *provided,
                                  MPI_Fint *ierr)
{
    init_thread_fn real;
    uint64_t t0 = msc_ticks();
    *(void **)&real = msc_fortran_symbol(real_name);
    msc_init_from_fortran = 1;
    real(required, provided, ierr);
    msc_init_from_fortran = 0;
    if (*ierr == MPI_SUCCESS) msc_start(MSC_CALL_INIT_THREAD, t0, site);
}

MSC_API void mpi_init(MPI_Fint *ierr) { msc_f_mpi_init(SITE, "pmpi_init", ierr); }
MSC_API void mpi_init_(MPI_Fint *ierr) { msc_f_mpi_init(SITE, "pmpi_init_", ierr); }
MSC_API void mpi_init__(MPI_Fint *ierr) { msc_f_mpi_init(SITE, "pmpi_init__", ierr); }
MSC_API void MPI_INIT(MPI_Fint *ierr) { msc_f_mpi_init(SITE, "PMPI_INIT", ierr); }
MSC_API void mpi_init_thread(MPI_Fint *q, MPI_Fint *p, MPI_Fint *e) { msc_f_mpi_init_thread(SITE, "pmpi_init_thread", q, p, e); }
MSC_API void mpi_init_thread_(MPI_Fint *q, MPI_Fint *p, MPI_Fint *e) { msc_f_mpi_init_thread(SITE, "pmpi_init_thread_", q, p, e); }
MSC_API void mpi_init_thread__(MPI_Fint *q, MPI_Fint *p, MPI_Fint *e) { msc_f_mpi_init_thread(SITE, "pmpi_init_thread__", q, p, e); }
MSC_API void MPI_INIT_THREAD(MPI_Fint *q, MPI_Fint *p, MPI_Fint *e) { msc_f_mpi_init_thread(SITE, "PMPI_INIT_THREAD", q, p, e); }
MSC_API void mpi_init_f08_(MPI_Fint *ierr)
{
    MPI_Fint e = 0;
    msc_f_mpi_init(SITE, "pmpi_init_f08_", ierr ? ierr : &e);
}
MSC_API void mpi_init_thread_f08_(MPI_Fint *q, MPI_Fint *p, MPI_Fint *ierr)
{
    MPI_Fint e = 0;
    msc_f_mpi_init_thread(SITE, "pmpi_init_thread_f08_", q, p, ierr ? ierr : &e);
}

static void msc_f_mpi_finalize(void *site, MPI_Fint *ierr) { *ierr = msc_finalize(site); }
MSC_FORTRAN(mpi_finalize, MPI_FINALIZE, (MPI_Fint *ierr), (SITE, ierr))

static void msc_f_mpi_pcontrol(void *site, MPI_Fint *level) { msc_pcontrol(site, (int)*level); }
MSC_FORTRAN_F77(mpi_pcontrol, MPI_PCONTROL, (MPI_Fint *level), (SITE, level))
MSC_API void mpi_pcontrol_f08_(MPI_Fint *level) { msc_f_mpi_pcontrol(SITE, level); }

static void msc_f_mpi_abort(void *site, MPI_Fint *comm, MPI_Fint *code, MPI_Fint *ierr)
{
    *ierr = msc_abort(site, PMPI_Comm_f2c(*comm), (int)*code);
}
MSC_FORTRAN(mpi_abort, MPI_ABORT, (MPI_Fint *comm, MPI_Fint *code, MPI_Fint *ierr), (SITE, comm, code, ierr))

/* Fortran status in, C status for the C code, Fortran status back. */
static MPI_Status *c_status(const MPI_Fint *f, MPI_Status *tmp)
{
    return msc_f_status_ignored(f) ? MPI_STATUS_IGNORE : tmp;
}

static void f_status(const MPI_Status *c, MPI_Fint *f, int rc)
{
    if (!msc_f_status_ignored(f) && rc == MPI_SUCCESS) PMPI_Status_c2f(c, f);
}

static void msc_f_mpi_wait(void *site, MPI_Fint *req, MPI_Fint *status, MPI_Fint *ierr)
{
    MPI_Request c = PMPI_Request_f2c(*req);
    MPI_Status st;
    *ierr = msc_wait(site, &c, c_status(status, &st));
    *req = PMPI_Request_c2f(c);
    f_status(&st, status, *ierr);
}
MSC_FORTRAN(mpi_wait, MPI_WAIT, (MPI_Fint *req, MPI_Fint *status, MPI_Fint *ierr), (SITE, req, status, ierr))

static void msc_f_mpi_test(void *site, MPI_Fint *req, MPI_Fint *flag, MPI_Fint *status, MPI_Fint *ierr)
{
    MPI_Request c = PMPI_Request_f2c(*req);
    MPI_Status st;
    int f = 0;
    *ierr = msc_test(site, &c, &f, c_status(status, &st));
    *req = PMPI_Request_c2f(c);
    *flag = f;
    if (f) f_status(&st, status, *ierr);
}
MSC_FORTRAN(mpi_test, MPI_TEST, (MPI_Fint *req, MPI_Fint *flag, MPI_Fint *status, MPI_Fint *ierr),
            (SITE, req, flag, status, ierr))

static MPI_Request *c_requests(const MPI_Fint *f, int n, size_t extra)
{
    MPI_Request *c = msc_scratch(1, sizeof(MPI_Request) * (size_t)n + extra);
    for (int i = 0; c && i < n; i++) c[i] = PMPI_Request_f2c(f[i]);
    return c;
}

static void f_requests(const MPI_Request *c, MPI_Fint *f, int n)
{
    for (int i = 0; i < n; i++) f[i] = PMPI_Request_c2f(c[i]);
}

static void msc_f_any(void *site, MPI_Fint *count, MPI_Fint *reqs, MPI_Fint *index, MPI_Fint *flag,
                      MPI_Fint *status, MPI_Fint *ierr, int test)
{
    int n = (int)*count, idx = MPI_UNDEFINED, f = 1;
    MPI_Request *c = c_requests(reqs, n, 0);
    MPI_Status st;
    if (!c) {
        *ierr = MPI_ERR_NO_MEM;
        return;
    }
    *ierr = msc_any(site, n, c, &idx, test ? &f : NULL, c_status(status, &st), test);
    f_requests(c, reqs, n);
    *index = idx == MPI_UNDEFINED ? MPI_UNDEFINED : idx + 1; /* Fortran indices start at 1 */
    if (test) *flag = f;
    if (f && idx != MPI_UNDEFINED) f_status(&st, status, *ierr);
}

static void msc_f_mpi_waitany(void *site, MPI_Fint *count, MPI_Fint *reqs, MPI_Fint *index, MPI_Fint *status,
                              MPI_Fint *ierr)
{
    msc_f_any(site, count, reqs, index, NULL, status, ierr, 0);
}
MSC_FORTRAN(mpi_waitany, MPI_WAITANY, (MPI_Fint *c, MPI_Fint *r, MPI_Fint *i, MPI_Fint *s, MPI_Fint *ierr),
            (SITE, c, r, i, s, ierr))

static void msc_f_mpi_testany(void *site, MPI_Fint *count, MPI_Fint *reqs, MPI_Fint *index, MPI_Fint *flag,
                              MPI_Fint *status, MPI_Fint *ierr)
{
    msc_f_any(site, count, reqs, index, flag, status, ierr, 1);
}
MSC_FORTRAN(mpi_testany, MPI_TESTANY, (MPI_Fint *c, MPI_Fint *r, MPI_Fint *i, MPI_Fint *f, MPI_Fint *s, MPI_Fint *ierr),
            (SITE, c, r, i, f, s, ierr))

/* Waitall/Testall (indices NULL) and Waitsome/Testsome, with Fortran status arrays. */
static void msc_f_many(void *site, uint16_t call, MPI_Fint *count, MPI_Fint *reqs, MPI_Fint *flag,
                       MPI_Fint *outcount, MPI_Fint *indices, MPI_Fint *statuses, MPI_Fint *ierr)
{
    int n = (int)*count, f = 1, out = 0;
    int ignore = msc_f_statuses_ignored(statuses);
    size_t sts = ignore ? 0 : sizeof(MPI_Status) * (size_t)n, ids = indices ? sizeof(int) * (size_t)n : 0;
    MPI_Request *c = c_requests(reqs, n, sts + ids + 16);
    if (!c) {
        *ierr = MPI_ERR_NO_MEM;
        return;
    }
    MPI_Status *st = ignore ? MPI_STATUSES_IGNORE : (MPI_Status *)(void *)(c + n);
    int *cidx = indices ? (int *)(void *)((char *)(c + n) + sts) : NULL;
    *ierr = msc_many(site, call, n, c, flag ? &f : NULL, indices ? &out : NULL, cidx, st);
    f_requests(c, reqs, n);
    if (flag) *flag = f;
    int done = indices ? (out == MPI_UNDEFINED ? 0 : out) : (f ? n : 0);
    if (indices) {
        *outcount = out;
        for (int k = 0; k < done; k++) indices[k] = cidx[k] + 1;
    }
    for (int k = 0; !ignore && *ierr == MPI_SUCCESS && k < done; k++)
        PMPI_Status_c2f(&st[k], statuses + (size_t)k * MPI_F_STATUS_SIZE);
}

static void msc_f_mpi_waitall(void *site, MPI_Fint *c, MPI_Fint *r, MPI_Fint *s, MPI_Fint *e)
{
    msc_f_many(site, MSC_CALL_WAITALL, c, r, NULL, NULL, NULL, s, e);
}
MSC_FORTRAN(mpi_waitall, MPI_WAITALL, (MPI_Fint *c, MPI_Fint *r, MPI_Fint *s, MPI_Fint *ierr), (SITE, c, r, s, ierr))

static void msc_f_mpi_testall(void *site, MPI_Fint *c, MPI_Fint *r, MPI_Fint *f, MPI_Fint *s, MPI_Fint *e)
{
    msc_f_many(site, MSC_CALL_TESTALL, c, r, f, NULL, NULL, s, e);
}
MSC_FORTRAN(mpi_testall, MPI_TESTALL, (MPI_Fint *c, MPI_Fint *r, MPI_Fint *f, MPI_Fint *s, MPI_Fint *ierr),
            (SITE, c, r, f, s, ierr))

static void msc_f_mpi_waitsome(void *site, MPI_Fint *c, MPI_Fint *r, MPI_Fint *o, MPI_Fint *i, MPI_Fint *s,
                               MPI_Fint *e)
{
    msc_f_many(site, MSC_CALL_WAITSOME, c, r, NULL, o, i, s, e);
}
MSC_FORTRAN(mpi_waitsome, MPI_WAITSOME, (MPI_Fint *c, MPI_Fint *r, MPI_Fint *o, MPI_Fint *i, MPI_Fint *s, MPI_Fint *ierr),
            (SITE, c, r, o, i, s, ierr))

static void msc_f_mpi_testsome(void *site, MPI_Fint *c, MPI_Fint *r, MPI_Fint *o, MPI_Fint *i, MPI_Fint *s,
                               MPI_Fint *e)
{
    msc_f_many(site, MSC_CALL_TESTSOME, c, r, NULL, o, i, s, e);
}
MSC_FORTRAN(mpi_testsome, MPI_TESTSOME, (MPI_Fint *c, MPI_Fint *r, MPI_Fint *o, MPI_Fint *i, MPI_Fint *s, MPI_Fint *ierr),
            (SITE, c, r, o, i, s, ierr))

static void msc_f_mpi_request_free(void *site, MPI_Fint *req, MPI_Fint *ierr)
{
    MPI_Request c = PMPI_Request_f2c(*req);
    *ierr = msc_request_free(site, &c);
    *req = PMPI_Request_c2f(c);
}
MSC_FORTRAN(mpi_request_free, MPI_REQUEST_FREE, (MPI_Fint *req, MPI_Fint *ierr), (SITE, req, ierr))

static void msc_f_mpi_start(void *site, MPI_Fint *req, MPI_Fint *ierr)
{
    MPI_Request c = PMPI_Request_f2c(*req);
    *ierr = msc_start_request(site, &c);
    *req = PMPI_Request_c2f(c);
}
MSC_FORTRAN(mpi_start, MPI_START, (MPI_Fint *req, MPI_Fint *ierr), (SITE, req, ierr))

static void msc_f_mpi_startall(void *site, MPI_Fint *count, MPI_Fint *reqs, MPI_Fint *ierr)
{
    int n = (int)*count;
    MPI_Request *c = c_requests(reqs, n, 0);
    if (!c) {
        *ierr = MPI_ERR_NO_MEM;
        return;
    }
    *ierr = msc_startall(site, n, c);
    f_requests(c, reqs, n);
}
MSC_FORTRAN(mpi_startall, MPI_STARTALL, (MPI_Fint *count, MPI_Fint *reqs, MPI_Fint *ierr), (SITE, count, reqs, ierr))

#endif /* MSC_HAVE_FORTRAN */
