/* Per-communicator state of the adaptive broadcast, and the window the
 * evaluation values are put into.
 *
 * The state hangs on the user's communicator as an attribute (no lookup
 * table to keep in step with communicator handles, which MPIs reuse; a
 * duplicate does not inherit it; freeing the communicator frees it). It is
 * made inside the first MPI_Bcast on that communicator, which every member
 * calls, so the collective calls it makes (MPI_Comm_dup, MPI_Allreduce,
 * MPI_Bcast, all on the private duplicate) are matched on every member.
 *
 * Reports (000 §4.4: MPI_Put to the optimiser) go into one window over
 * MPI_COMM_WORLD, made at MPI_Init with MPI_Win_create_dynamic: each
 * optimiser attaches an array of slots to it, one per member. A window per
 * communicator would have to be freed collectively, and programs may free
 * their communicators in different orders on different ranks (a deadlock in
 * MPI_Win_free); attaching and detaching is local. Slots stay attached until
 * MPI_Finalize, since a report may still be on its way when the user frees
 * the communicator. A communicator with members outside this world (spawned
 * processes) reports with nonblocking messages instead.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "bcast.h"

MPI_Win msc_bc_win = MPI_WIN_NULL;
int msc_bc_world_rank = -1;
msc_bc_event_fn msc_bc_on_event;

static MPI_Comm world_dup = MPI_COMM_NULL;
static MPI_Group world_group = MPI_GROUP_NULL;
static int keyval = MPI_KEYVAL_INVALID;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct msc_bc_state *live;        /* states whose duplicate is still held */
static struct retired { void *slots; struct retired *next; } *retired;
static char intercomm_marker;             /* attribute value: this communicator falls back */

int msc_bc_setup(MPI_Comm world, const struct msc_bc_params *p)
{
    PMPI_Comm_rank(world, &msc_bc_world_rank);
    PMPI_Comm_group(world, &world_group);
    if (p->mode != MSC_BC_ADAPTIVE || p->report != MSC_BC_REPORT_PUT) return MPI_SUCCESS;
    PMPI_Comm_dup(world, &world_dup);
    /* An MPI without the one-sided support this needs returns an error
     * instead of aborting: communicators then report with messages. */
    PMPI_Comm_set_errhandler(world_dup, MPI_ERRORS_RETURN);
    MPI_Win win = MPI_WIN_NULL;
    if (PMPI_Win_create_dynamic(MPI_INFO_NULL, world_dup, &win) != MPI_SUCCESS) return MPI_ERR_OTHER;
    PMPI_Win_set_errhandler(win, MPI_ERRORS_RETURN);
    if (PMPI_Win_lock_all(MPI_MODE_NOCHECK, win) != MPI_SUCCESS) {
        PMPI_Win_free(&win);
        return MPI_ERR_OTHER;
    }
    msc_bc_win = win;
    return MPI_SUCCESS;
}

/* Reports sent as messages must all be received before the duplicate is
 * freed (an MPI may refuse to free a communicator with unmatched messages):
 * each member ends its reports with a last one, MSC_BC_BYE, and the
 * optimiser receives until it has one from every member. The optimiser thus
 * waits in MPI_Comm_free until every member calls it, as a collective may. */
#define MSC_BC_BYE INT64_MIN

static int sends_reports(const struct msc_bc_state *s)
{
    return s->comm != MPI_COMM_NULL && s->report == MSC_BC_REPORT_SEND && s->size > 1 && !s->byes_done;
}

static void say_bye(struct msc_bc_state *s)
{
    if (!sends_reports(s) || s->rank == 0) return;
    s->byes_done = 1;
    if (s->report_req != MPI_REQUEST_NULL) PMPI_Wait(&s->report_req, MPI_STATUS_IGNORE);
    int64_t bye[2] = {MSC_BC_BYE, 0};
    PMPI_Send(bye, 2, MPI_INT64_T, 0, MSC_BC_TAG_REPORT, s->comm);
}

static void await_byes(struct msc_bc_state *s)
{
    if (!sends_reports(s) || s->rank != 0) return;
    s->byes_done = 1;
    for (int left = s->size - 1; left > 0;) {
        int64_t v[2] = {0, 0};
        PMPI_Recv(v, 2, MPI_INT64_T, MPI_ANY_SOURCE, MSC_BC_TAG_REPORT, s->comm, MPI_STATUS_IGNORE);
        left -= v[0] == MSC_BC_BYE;
    }
}

static void release(struct msc_bc_state *s)
{
    say_bye(s);
    await_byes(s);
    if (s->report_req != MPI_REQUEST_NULL) PMPI_Request_free(&s->report_req);
    if (s->comm != MPI_COMM_NULL) PMPI_Comm_free(&s->comm);
}

void msc_bc_teardown(void)
{
    /* MPI_Finalize: no other thread broadcasts now. Every member's byes
     * first, then the optimisers wait: no order of communicators across
     * ranks can deadlock. */
    pthread_mutex_lock(&lock);
    struct msc_bc_state *all = live;
    pthread_mutex_unlock(&lock);
    for (struct msc_bc_state *s = all; s; s = s->next_state) say_bye(s);
    for (struct msc_bc_state *s = all; s; s = s->next_state) release(s);
    if (msc_bc_win != MPI_WIN_NULL) {
        /* Every origin's unlock completes its puts; the free waits for all. */
        PMPI_Win_unlock_all(msc_bc_win);
        PMPI_Win_free(&msc_bc_win);
        msc_bc_win = MPI_WIN_NULL;
    }
    for (struct retired *r = retired, *n; r; r = n) {
        n = r->next;
        free(r->slots);
        free(r);
    }
    retired = NULL;
    if (world_dup != MPI_COMM_NULL) PMPI_Comm_free(&world_dup);
    if (world_group != MPI_GROUP_NULL) PMPI_Group_free(&world_group);
}

static void free_state(struct msc_bc_state *s)
{
    if (s->slots && msc_bc_win != MPI_WIN_NULL && s->report == MSC_BC_REPORT_PUT) {
        struct retired *r = malloc(sizeof *r);
        pthread_mutex_lock(&lock);
        if (r) {
            *r = (struct retired){s->slots, retired};
            retired = r;
        }
        pthread_mutex_unlock(&lock);
    } else {
        free(s->slots);
    }
    if (s->opt) msc_bc_optimiser_free(s->opt);
    free(s->opt);
    free(s->vals);
    free(s->when);
    free(s->tab.vr);
    free(s->tab.real);
    free(s);
}

static int delete_state(MPI_Comm comm, int kv, void *val, void *extra)
{
    (void)comm;
    (void)kv;
    (void)extra;
    struct msc_bc_state *s = val;
    if (val == &intercomm_marker || !s) return MPI_SUCCESS;
    int finalized = 0;
    PMPI_Finalized(&finalized);
    pthread_mutex_lock(&lock);
    for (struct msc_bc_state **p = &live; *p; p = &(*p)->next_state) {
        if (*p == s) {
            *p = s->next_state;
            break;
        }
    }
    pthread_mutex_unlock(&lock);
    /* MPI calls outside the lock: another thread may be making a state */
    if (!finalized) release(s);
    free_state(s);
    return MPI_SUCCESS;
}

/* Are all members of comm in this process's MPI_COMM_WORLD (so that the
 * world window reaches the optimiser)? */
static int in_world(MPI_Comm comm, int size)
{
    if (world_group == MPI_GROUP_NULL) return 0;
    MPI_Group g;
    PMPI_Comm_group(comm, &g);
    int *in = malloc(sizeof(int) * (size_t)size), *out = malloc(sizeof(int) * (size_t)size), ok = in && out;
    for (int i = 0; ok && i < size; i++) in[i] = i;
    if (ok) PMPI_Group_translate_ranks(g, size, in, world_group, out);
    for (int i = 0; ok && i < size; i++) ok = out[i] != MPI_UNDEFINED;
    free(in);
    free(out);
    PMPI_Group_free(&g);
    return ok;
}

/* The optimiser's slots, and where reporters put into them. */
static int setup_reports(struct msc_bc_state *s, const struct msc_bc_params *p)
{
    int ok = p->report == MSC_BC_REPORT_PUT && msc_bc_win != MPI_WIN_NULL && in_world(s->comm, s->size);
    int all = 0;
    PMPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, s->comm);
    s->report = all ? MSC_BC_REPORT_PUT : MSC_BC_REPORT_SEND;
    struct { int64_t disp; int64_t world; } where = {0, -1};
    if (s->rank == 0) {
        s->slots = calloc(2 * (size_t)s->size, sizeof *s->slots);
        s->vals = calloc((size_t)s->size, sizeof *s->vals);
        s->when = calloc((size_t)s->size, sizeof *s->when);
        s->opt = calloc(1, sizeof *s->opt);
        if (!s->slots || !s->vals || !s->when || !s->opt || msc_bc_optimiser_init(s->opt, s->size, p) != 0) return MPI_ERR_NO_MEM;
        if (s->report == MSC_BC_REPORT_PUT) {
            MPI_Aint disp;
            PMPI_Win_attach(msc_bc_win, s->slots, (MPI_Aint)(2 * sizeof *s->slots * (size_t)s->size));
            PMPI_Get_address(s->slots, &disp);
            where.disp = (int64_t)disp;
            where.world = msc_bc_world_rank;
        }
    }
    int rc = PMPI_Bcast(&where, 2, MPI_INT64_T, 0, s->comm);
    s->opt_disp = (MPI_Aint)where.disp;
    s->opt_world = (int)where.world;
    return rc;
}

static int make_keyval(void)
{
    pthread_mutex_lock(&lock);
    int rc = MPI_SUCCESS;
    if (keyval == MPI_KEYVAL_INVALID) rc = PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, delete_state, &keyval, NULL);
    pthread_mutex_unlock(&lock);
    return rc;
}

static struct msc_bc_state *create(MPI_Comm comm, const struct msc_bc_params *p)
{
    struct msc_bc_state *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->comm = MPI_COMM_NULL;
    s->report_req = MPI_REQUEST_NULL;
    PMPI_Comm_size(comm, &s->size);
    PMPI_Comm_rank(comm, &s->rank);
    s->tab.size = s->size;
    s->tab.vr = malloc(sizeof(int) * (size_t)s->size);
    s->tab.real = malloc(sizeof(int) * (size_t)s->size);
    if (!s->tab.vr || !s->tab.real || PMPI_Comm_dup(comm, &s->comm) != MPI_SUCCESS) {
        free_state(s);
        return NULL;
    }
    for (int i = 0; i < s->size; i++) s->tab.vr[i] = s->tab.real[i] = i;
    s->interval = p->interval;
    s->next_reconf = (uint64_t)p->interval; /* optimised at the end of broadcast `interval` */
    if (p->mode == MSC_BC_ADAPTIVE && setup_reports(s, p) != MPI_SUCCESS) {
        release(s);
        free_state(s);
        return NULL;
    }
    return s;
}

/* The state of comm, made on first use; NULL with *fallback set where the
 * tree cannot run (an intercommunicator), NULL alone when out of memory. */
struct msc_bc_state *msc_bc_state_of(MPI_Comm comm, const struct msc_bc_params *p, int *fallback)
{
    *fallback = 0;
    if (keyval == MPI_KEYVAL_INVALID && make_keyval() != MPI_SUCCESS) {
        *fallback = 1;
        return NULL;
    }
    void *val = NULL;
    int found = 0;
    PMPI_Comm_get_attr(comm, keyval, &val, &found);
    if (found) {
        *fallback = val == &intercomm_marker;
        return *fallback ? NULL : val;
    }
    int inter = 0;
    PMPI_Comm_test_inter(comm, &inter);
    if (inter) {
        PMPI_Comm_set_attr(comm, keyval, &intercomm_marker);
        *fallback = 1;
        return NULL;
    }
    struct msc_bc_state *s = create(comm, p);
    if (!s) {
        *fallback = 1;
        return NULL;
    }
    PMPI_Comm_set_attr(comm, keyval, s);
    pthread_mutex_lock(&lock);
    s->next_state = live;
    live = s;
    pthread_mutex_unlock(&lock);
    return s;
}
