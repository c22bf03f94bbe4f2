/* Profile, optimise, reconfigure (SPEC §5, 000 §4), and the broadcast.
 *
 * Every process counts the broadcasts on a communicator. At the agreed count
 * (next_reconf) the optimiser, rank 0 of the communicator, decides from the
 * reported values which pair of real ranks swaps virtual ranks and after how
 * many broadcasts it decides again; a broadcast rooted at it carries that to
 * every process, each swaps the two entries of its table, and the next
 * broadcast's data flows over the new tree. After each data phase every
 * process but the root turns its receive wait into an evaluation value and
 * reports it when it changed enough; the optimisation follows the report.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bcast.h"

void msc_bc_default_params(struct msc_bc_params *p)
{
    *p = (struct msc_bc_params){.mode = MSC_BC_LIBRARY, .weight = 1, .stable = 0, .stable_tol = 0.0625,
                                .threshold = 0.5, .interval = 1, .interval_max = 0, .change = 0.25,
                                .halve = 1, .eps_frac = 0.01, .eps_min_s = 1e-6,
                                .report = MSC_BC_REPORT_PUT};
}

/* ---- optimise (one process) ---- */

enum { SEARCH = 0, TRIAL = 1, UNDONE = 2 };

int msc_bc_optimiser_init(struct msc_bc_optimiser *o, int size, const struct msc_bc_params *p)
{
    memset(o, 0, sizeof *o);
    size_t n = (size_t)(size > 0 ? size : 1);
    o->cands = malloc(sizeof(int) * n);
    o->base = calloc(n, sizeof(double));
    o->tabu = -1;
    o->interval = p->interval;
    return o->cands && o->base ? 0 : -1;
}

void msc_bc_optimiser_free(struct msc_bc_optimiser *o)
{
    free(o->cands);
    free(o->base);
    o->cands = NULL;
    o->base = NULL;
}

/* Candidate order (000 §4.3): most sends first (= earliest receive step),
 * then shallowest, then lowest rank. */
/* qsort has no context argument in C11; threads may optimise different
 * communicators at once. */
static _Thread_local const struct msc_bc_table *sort_tab;
static _Thread_local int sort_root;

static int candidate_cmp(const void *x, const void *y)
{
    int a = *(const int *)x, b = *(const int *)y, size = sort_tab->size;
    int pa = msc_bc_position(sort_tab, a, sort_root), pb = msc_bc_position(sort_tab, b, sort_root);
    int sa = msc_bc_sends(pa, size), sb = msc_bc_sends(pb, size);
    if (sa != sb) return sb - sa;
    int da = msc_bc_depth(pa), db = msc_bc_depth(pb);
    if (da != db) return da - db;
    return a - b;
}

/* Steps 1-3: the largest wait, its zero-wait candidates, the first swap. */
static int search(struct msc_bc_optimiser *o, const double *vals, const struct msc_bc_table *t, int root,
                  const struct msc_bc_params *p)
{
    int wmax = -1;
    for (int r = 0; r < t->size; r++)
        if (r != root && vals[r] > 0 && r != o->tabu && (wmax < 0 || vals[r] > vals[wmax])) wmax = r;
    if (wmax < 0) return 0;
    double eps = fmax(p->eps_frac * vals[wmax], p->eps_min_s);
    if (vals[wmax] <= eps) return 0;
    /* A zero-wait process is a late one: the swap moves it to W_max's
     * position, never to one with more sends (the paper does not say; its
     * candidate order prefers the late processes nearest the root, and its
     * Fig. 6 swaps all move them outwards). Where the waits are noise (an
     * oversubscribed machine, a late process already at a leaf) the late
     * process is often the only zero-wait one, and moving it inwards, to the
     * noise's position, delays a subtree again. */
    int wsends = msc_bc_sends(msc_bc_position(t, wmax, root), t->size);
    o->ncands = 0;
    for (int r = 0; r < t->size; r++)
        if (r != root && r != wmax && vals[r] <= eps && msc_bc_sends(msc_bc_position(t, r, root), t->size) >= wsends)
            o->cands[o->ncands++] = r;
    if (!o->ncands) return 0;
    sort_tab = t;
    sort_root = root;
    qsort(o->cands, (size_t)o->ncands, sizeof(int), candidate_cmp);
    o->wmax = wmax;
    o->next = 0;
    return 1;
}

static void interval_next(struct msc_bc_optimiser *o, double total, const struct msc_bc_params *p)
{
    /* 000 §5.1: double when the total wait changed by at most 25 %, else halve
     * (000 §4.4 states the inverse, a slip: §5's rule is the one used). */
    if (o->have_prev) {
        double base = o->prev_total, change = fabs(total - base);
        int small = base > 0 ? change <= p->change * base : change == 0;
        if (small) {
            if (o->interval < (1 << 29) && (!p->interval_max || o->interval * 2 <= p->interval_max))
                o->interval *= 2;
            else if (p->interval_max && o->interval < p->interval_max)
                o->interval = p->interval_max;
        } else if (p->halve && o->interval > 1) {
            o->interval /= 2;
        }
    }
    o->prev_total = total;
    o->have_prev = 1;
}

/* How much a swap on trial changed the total wait: the sum, over the
 * processes that measured on the trial's table, of the value minus the one
 * measured on the table before it. A process that reported nothing since
 * has not changed by the reporting threshold, and counts as unchanged; a
 * report measured before the trial that arrives late (000 §5.2: the root
 * runs ahead of the profiles) corrects the value before, rather than
 * counting as the trial's. Judged on totals alone, such a late report, or
 * one measured on a trial already undone, reads as a change the trial made. */
static double trial_change(struct msc_bc_optimiser *o, const double *vals, const uint64_t *when, int size,
                           int root)
{
    double change = 0;
    for (int r = 0; r < size; r++) {
        if (r == root) continue;
        if (when && when[r] < o->base_since) o->base[r] = vals[r];
        else if (!when || when[r] >= o->since) change += vals[r] - o->base[r];
    }
    return change;
}

void msc_bc_decide(struct msc_bc_optimiser *o, const double *vals, const uint64_t *when, struct msc_bc_table *t,
                   int root, uint64_t next, const struct msc_bc_params *p, struct msc_bc_decision *d,
                   double *total_s)
{
    double total = 0;
    int fresh = when == NULL, unheard = 0;
    for (int r = 0; r < t->size; r++) {
        if (r == root) continue;
        total += vals[r];
        fresh |= when && when[r] >= o->since;
        unheard |= when && when[r] == 0;
    }
    /* The first search waits for every process's first value (each reports
     * its first measurement, even a zero): a process that has not yet
     * reported reads as zero wait, and a trial judged against such a base
     * takes the late report, or a later one that overwrote it, for a rise
     * it caused. A process that never reports (always the root, say) holds
     * it up for three optimisations at most. */
    if (unheard && o->swaps == 0 && o->held < 3) fresh = 0;
    /* A swap on trial is judged on the value its W_max process measured on
     * the new table: that process's wait is what the swap set out to cut,
     * and with 000's i = 1 and 50 % threshold a wait that falls to almost
     * zero is reported one broadcast late (NewVal halves by a hair less
     * than 50 %). If it does not report, the trial is judged after three
     * optimisations all the same. */
    if (when && o->phase == TRIAL && o->a >= 0 && o->a < t->size && when[o->a] < o->since && o->held < 3)
        fresh = 0;
    *total_s = total;
    d->op = MSC_BC_NONE;
    d->a = d->b = -1;
    /* Step 4 judges a swap, and step 1 restarts, "with the new values": only
     * once a value measured on the table of the last operation has arrived.
     * The reports of the broadcasts just before are often still on their
     * way (000 §5.2: the root runs ahead of the profiles); judged on them, a
     * good swap can look bad. Until then nothing is done and the interval
     * stays. */
    if (!fresh) {
        o->held++;
        d->interval = o->interval;
        return;
    }
    o->held = 0;
    /* Step 4: a trial that raised the total is undone (one operation), and
     * the next candidate is tried at the next optimisation. */
    if (o->phase == TRIAL && trial_change(o, vals, when, t->size, root) > 0) {
        d->op = MSC_BC_UNDO;
        d->a = o->a;
        d->b = o->b;
        o->phase = UNDONE;
        o->undos++;
    } else if (o->phase == UNDONE && o->next + 1 < o->ncands && o->wmax != root && o->cands[o->next + 1] != root) {
        o->next++;
        d->op = MSC_BC_SWAP;
        d->a = o->wmax;
        d->b = o->cands[o->next];
        o->phase = TRIAL;
    } else {
        if (o->phase == UNDONE) { /* every candidate of this W_max failed: leave it until the total moves */
            o->tabu = o->wmax;
            o->tabu_total = o->base_total;
        } else if (o->tabu >= 0 && fabs(total - o->tabu_total) > p->change * o->tabu_total) {
            o->tabu = -1;
        }
        o->phase = SEARCH;
        if (search(o, vals, t, root, p)) {
            d->op = MSC_BC_SWAP;
            d->a = o->wmax;
            d->b = o->cands[0];
            o->base_total = total;
            memcpy(o->base, vals, sizeof(double) * (size_t)t->size);
            o->base_since = next;
            o->phase = TRIAL;
        }
    }
    if (d->op != MSC_BC_NONE) o->since = next;
    if (d->op == MSC_BC_SWAP) {
        o->a = d->a;
        o->b = d->b;
        o->swaps++;
    }
    interval_next(o, total, p);
    d->interval = o->interval;
}

/* ---- profile (every process but the root) ---- */

static void report(struct msc_bc_state *s, double val)
{
    int64_t ns = (int64_t)(val * 1e9), when = (int64_t)s->count;
    if (s->rank == 0) { /* the optimiser's own value */
        __atomic_store_n(&s->slots[0], ns, __ATOMIC_RELAXED);
        __atomic_store_n(&s->slots[1], when, __ATOMIC_RELAXED);
        return;
    }
    if (s->report == MSC_BC_REPORT_PUT) {
        /* Completed at the optimiser: an MPI may hold a put back until the
         * origin's next synchronisation (MPICH does), and every value would
         * arrive one report late. The flush waits for the optimiser's MPI to
         * take it, which it does in its own broadcasts and calls. */
        s->report_buf[0] = ns;
        s->report_buf[1] = when;
        PMPI_Put(s->report_buf, 2, MPI_INT64_T, s->opt_world, s->opt_disp + (MPI_Aint)s->rank * 16, 2,
                 MPI_INT64_T, msc_bc_win);
        PMPI_Win_flush(s->opt_world, msc_bc_win);
        return;
    }
    if (s->report_req != MPI_REQUEST_NULL) PMPI_Wait(&s->report_req, MPI_STATUS_IGNORE);
    s->report_buf[0] = ns;
    s->report_buf[1] = when;
    PMPI_Isend(s->report_buf, 2, MPI_INT64_T, 0, MSC_BC_TAG_REPORT, s->comm, &s->report_req);
}

void msc_bc_profile(struct msc_bc_state *s, double wait_s, const struct msc_bc_params *p)
{
    if (wait_s < 0) return;
    if (!s->measured) {
        /* No previous value: the first measurement stands, and is sent
         * whatever it is, so that the optimiser knows it has every value. */
        s->measured = 1;
        s->val = s->sent = wait_s;
        if (p->stable) s->hist[s->nhist++ % 3] = wait_s;
        report(s, wait_s);
        return;
    }
    /* 000 eq. (1): NewVal = ((2^i - 1) PreVal + Wait) / 2^i */
    double w = ldexp(1.0, p->weight), val = ((w - 1) * s->val + wait_s) / w;
    if (p->stable) {
        /* 000 §5.2: three measurements in a row that agree within 6.25 %
         * give their arithmetic mean. */
        s->hist[s->nhist % 3] = wait_s;
        s->nhist++;
        if (s->nhist >= 3) {
            double lo = fmin(s->hist[0], fmin(s->hist[1], s->hist[2]));
            double hi = fmax(s->hist[0], fmax(s->hist[1], s->hist[2]));
            double mean = (s->hist[0] + s->hist[1] + s->hist[2]) / 3;
            if (hi - lo <= p->stable_tol * mean) val = mean;
        }
    }
    s->val = val;
    /* Sent only on a change of at least the threshold (50 %) of the value
     * last sent, and of at least the zero-wait floor: a wait that is noise
     * around zero is not worth a message. */
    if (fabs(val - s->sent) >= fmax(p->threshold * s->sent, p->eps_min_s)) {
        report(s, val);
        s->sent = val;
    }
}

/* ---- reconfigure (every process) ---- */

static void collect(struct msc_bc_state *s)
{
    if (s->report == MSC_BC_REPORT_PUT) {
        PMPI_Win_sync(msc_bc_win);
    } else {
        for (;;) {
            int flag = 0;
            MPI_Status st;
            PMPI_Iprobe(MPI_ANY_SOURCE, MSC_BC_TAG_REPORT, s->comm, &flag, &st);
            if (!flag) break;
            int64_t v[2] = {0, 0};
            PMPI_Recv(v, 2, MPI_INT64_T, st.MPI_SOURCE, MSC_BC_TAG_REPORT, s->comm, MPI_STATUS_IGNORE);
            if (st.MPI_SOURCE >= 0 && st.MPI_SOURCE < s->size) memcpy(&s->slots[2 * st.MPI_SOURCE], v, sizeof v);
        }
    }
    for (int r = 0; r < s->size; r++) {
        s->vals[r] = (double)__atomic_load_n(&s->slots[2 * r], __ATOMIC_RELAXED) * 1e-9;
        s->when[r] = (uint64_t)__atomic_load_n(&s->slots[2 * r + 1], __ATOMIC_RELAXED);
    }
}

int msc_bc_reconfigure(struct msc_bc_state *s, int root, MPI_Comm user_comm, const struct msc_bc_params *p)
{
    struct msc_bc_decision d = {.interval = s->interval, .op = MSC_BC_NONE, .a = -1, .b = -1};
    double total = 0, ignored;
    if (s->rank == 0) {
        collect(s);
        msc_bc_decide(s->opt, s->vals, s->when, &s->tab, root, s->count + 1, p, &d, &total);
    }
    int rc = msc_bc_tree(&s->tab, s->rank, &d, 4, MPI_INT32_T, 0, s->comm, MSC_BC_TAG_RECONF, &ignored);
    if (rc != MPI_SUCCESS) return rc;
    if (d.op != MSC_BC_NONE && d.a >= 0 && d.b >= 0 && d.a < s->size && d.b < s->size) {
        msc_bc_table_swap(&s->tab, d.a, d.b);
        s->swaps++;
        /* A new tree: the next wait starts the evaluation value afresh and is sent
         * whatever it is. Blended with the waits of the tree before (eq. (1)), it
         * would show the optimiser a trial's effect late and mixed with the old
         * tree's, and a good swap undone for the waits it had just removed. */
        s->measured = 0;
        s->nhist = 0;
    }
    s->interval = d.interval > 0 ? d.interval : 1;
    s->next_reconf = s->count + (uint64_t)s->interval;
    if (s->rank == 0 && d.op != MSC_BC_NONE && msc_bc_on_event) {
        struct msc_bc_event e = {s->count + 1, d.op, d.a, d.b, d.interval, total};
        msc_bc_on_event(user_comm, &e);
    }
    return MPI_SUCCESS;
}

/* ---- the broadcast ---- */

int msc_bc_bcast(void *buf, int count, MPI_Datatype dt, int root, MPI_Comm comm, const struct msc_bc_params *p,
                 int *fallback)
{
    struct msc_bc_state *s = msc_bc_state_of(comm, p, fallback);
    if (!s) return MPI_SUCCESS;
    if (root < 0 || root >= s->size) { /* the MPI's own broadcast reports the error */
        *fallback = 1;
        return MPI_SUCCESS;
    }
    s->count++;
    int adaptive = p->mode == MSC_BC_ADAPTIVE && s->size > 1;
    double wait;
    int rc = msc_bc_tree(&s->tab, s->rank, buf, count, dt, root, s->comm, MSC_BC_TAG_DATA, &wait);
    if (!adaptive || rc != MPI_SUCCESS) return rc;
    msc_bc_profile(s, wait, p);
    /* After the data phase: a late process then delays only the processes
     * it delayed anyway, and the next broadcast runs wholly on the new tree. */
    return s->count == s->next_reconf ? msc_bc_reconfigure(s, root, comm, p) : MPI_SUCCESS;
}
