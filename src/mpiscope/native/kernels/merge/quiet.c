/* Quiet points of one single-threaded rank: the call records before which
 * its records can be cut into pieces that the merge builds on their own
 * (trace/quiet.py states the rules and why they suffice). One pass finds the
 * last record of every request id, a second walks the records counting the
 * ids that are open: seen, their last record not yet. */
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "merge.h"
#include "record.h"

#define REQ_ID_MASK 0x7fffffffu   /* the top bit of a recorded id says "complete at start" */

/* A block of a mapped rank file, read: its pages leave the process (the page cache keeps them,
 * and the next pass faults them back in), so that a rank file larger than the merge's memory
 * budget is scanned in it. Only where tab->release says every block maps a file: on memory of
 * its own, MADV_DONTNEED would zero it. */
static void done_with(const struct msm_quiet_tables *tab, const struct msm_block *b)
{
    if (!tab->release || b->n <= 0)
        return;
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t lo = (uintptr_t)b->recs & ~(page - 1);
    uintptr_t hi = ((uintptr_t)b->recs + (uintptr_t)b->n * sizeof(struct msc_rec)) & ~(page - 1);
    if (hi > lo)
        (void)madvise((void *)lo, hi - lo, MADV_DONTNEED);
}

struct quiet_scan {
    const struct msm_block *blocks;
    int64_t nblocks;
    const struct msm_quiet_tables *tab;
};

/* The request id a record names (0: none). A creating call's record names the
 * new communicator's rank-local id there instead, unless it starts a request
 * (MPI_Comm_idup). */
static uint64_t id_of(const struct msm_quiet_tables *tab, const struct msc_rec *r)
{
    uint32_t id = r->req & REQ_ID_MASK;
    if (id == 0)
        return 0;
    if (r->call < tab->ncalls) {
        uint8_t role = tab->role_of_call[r->call];
        if ((role == tab->role_create || role == tab->role_create_win) && !tab->starts_of_call[r->call])
            return 0;
    }
    return id;
}

/* The ids a rank's records name, as positions in a table: an id's offset from
 * the smallest where they are dense (a rank's counter: 8 + 1 bytes per id,
 * in order), else a hash table's slot (16 + 1 bytes per slot, scattered). */
struct id_table {
    uint32_t lo;              /* dense: smallest id */
    int64_t size;             /* dense: ids lo .. lo + size - 1 */
    int64_t *last;            /* dense: the last record of each id, -1 none */
    struct msm_map map;       /* sparse: id -> the last record */
    int dense;
};

static int table_init(struct id_table *t, const struct quiet_scan *s)
{
    int64_t n = 0;
    uint32_t lo = UINT32_MAX, hi = 0;
    for (int64_t b = 0; b < s->nblocks; b++) {
        const struct msc_rec *r = s->blocks[b].recs;
        for (int64_t k = 0; k < s->blocks[b].n; k++) {
            uint32_t id = (uint32_t)id_of(s->tab, &r[k]);
            if (id) {
                n++;
                lo = id < lo ? id : lo;
                hi = id > hi ? id : hi;
            }
        }
        done_with(s->tab, &s->blocks[b]);
    }
    t->dense = n == 0 || (int64_t)(hi - lo) < 4 * n + 1024;
    if (!t->dense)
        return msm_map_init(&t->map, n);
    t->lo = n ? lo : 0;
    t->size = n ? (int64_t)(hi - lo) + 1 : 1;
    t->last = malloc((size_t)t->size * sizeof *t->last);
    if (!t->last)
        return -1;
    for (int64_t i = 0; i < t->size; i++)
        t->last[i] = -1;
    return 0;
}

static int64_t table_slots(const struct id_table *t)
{
    return t->dense ? t->size : (int64_t)t->map.mask + 1;
}

static int64_t *table_last(struct id_table *t, uint64_t id, int64_t *slot)
{
    if (t->dense) {
        *slot = (int64_t)(id - t->lo);
        return &t->last[*slot];
    }
    uint64_t s = msm_map_slot(&t->map, id);
    t->map.keys[s] = id;
    *slot = (int64_t)s;
    return &t->map.vals[s];
}

static void table_free(struct id_table *t)
{
    if (t->dense)
        free(t->last);
    else
        msm_map_free(&t->map);
}

int64_t msm_quiet_cuts(const struct msm_block *blocks, int64_t nblocks, const struct msm_quiet_tables *tab,
                       int64_t most, int64_t *cuts, int64_t max_cuts)
{
    struct quiet_scan s = {blocks, nblocks, tab};
    struct id_table ids;
    if (table_init(&ids, &s) != 0)
        return -1;
    /* the last record of each id */
    int64_t i = 0, slot;
    for (int64_t b = 0; b < nblocks; b++) {
        const struct msc_rec *r = blocks[b].recs;
        for (int64_t k = 0; k < blocks[b].n; k++, i++) {
            uint64_t id = id_of(tab, &r[k]);
            if (id)
                *table_last(&ids, id, &slot) = i;
        }
        done_with(tab, &blocks[b]);
    }
    uint8_t *opened = calloc((size_t)table_slots(&ids), 1);
    if (!opened) {
        table_free(&ids);
        return -1;
    }
    int64_t open = 0, ncuts = 0, start = 0, candidate = 0;
    int have_call = 0;
    uint64_t prev_leave = 0;
    i = 0;
    for (int64_t b = 0; b < nblocks; b++) {
        const struct msc_rec *r = blocks[b].recs;
        for (int64_t k = 0; k < blocks[b].n; k++, i++) {
            if (r[k].call >= tab->first_call_id) {
                /* quiet before this call: no id open, the call before returned
                 * and ended before this one began (folded polls overlap) */
                if (have_call && open == 0 && prev_leave != 0 && r[k].t_enter >= prev_leave
                    && ncuts + 2 <= max_cuts) {
                    if (i - start > most && candidate > start) {
                        cuts[ncuts++] = candidate;
                        start = candidate;
                    }
                    if (i - start >= most) {
                        cuts[ncuts++] = i;
                        start = i;
                    }
                    candidate = i;
                }
                have_call = 1;
                prev_leave = r[k].t_leave;
            }
            uint64_t id = id_of(tab, &r[k]);
            if (id) {
                if (*table_last(&ids, id, &slot) == i)
                    open -= opened[slot];
                else if (!opened[slot]) {
                    opened[slot] = 1;
                    open++;
                }
            }
        }
        done_with(tab, &blocks[b]);
    }
    if (i - start > most && candidate > start && ncuts < max_cuts)
        cuts[ncuts++] = candidate;
    free(opened);
    table_free(&ids);
    return ncuts;
}
