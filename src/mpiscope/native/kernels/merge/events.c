/* The rows of events.parquet: one per call record (sub-records only feed the
 * matching), placed at their event id, so rows come out in (rank, t_enter)
 * order without a sort; and the call-site factorisation of those rows. */
#include <stdlib.h>

#include "merge.h"

struct part {
    const struct msm_columns *rec;
    const struct msm_event_inputs *in;
    const struct msm_events *out;
    int64_t first, last;    /* records; in the second phase, links */
    int64_t efirst, elast;  /* event rows to initialise */
    int bad;                /* an event id out of range */
};

static void *fill_rows(void *arg)
{
    struct part *p = arg;
    const struct msm_columns *rec = p->rec;
    const struct msm_events *out = p->out;
    for (int64_t e = p->efirst; e < p->elast; e++) {
        out->t_complete[e] = -1;
        out->completed_by[e] = -1;
    }
    for (int64_t i = p->first; i < p->last; i++) {
        if (rec->call[i] < p->in->first_call_id)
            continue;
        int64_t e = rec->event[i];
        if (e < 0 || e >= p->in->nevents) {
            p->bad = 1;
            return NULL;
        }
        out->event[e] = e;
        out->rank[e] = rec->rank[i];
        out->thread[e] = rec->thread[i];
        out->call[e] = p->in->call_code[rec->call[i]];
        out->role[e] = rec->role[i];
        out->t_enter[e] = rec->t_enter[i];
        out->t_leave[e] = rec->t_leave[i];
        out->comm[e] = rec->comm[i];
        out->peer[e] = rec->peer[i];
        out->tag[e] = rec->tag[i];
        out->bytes[e] = rec->bytes[i];
        out->req[e] = rec->req[i];
        out->callsite[e] = rec->callsite[i];
    }
    return NULL;
}

/* Nonblocking starts that are calls (not sub-records of Startall). */
static void *fill_links(void *arg)
{
    struct part *p = arg;
    for (int64_t k = p->first; k < p->last; k++) {
        int64_t i = p->in->link_index[k];
        if (p->rec->call[i] >= p->in->first_call_id) {
            int64_t e = p->rec->event[i];
            p->out->t_complete[e] = p->in->link_t_complete[k];
            p->out->completed_by[e] = p->in->link_completed_by[k];
        }
    }
    return NULL;
}

int msm_events(const struct msm_columns *rec, int64_t n, const struct msm_event_inputs *in, int32_t workers,
               const struct msm_events *out)
{
    workers = msm_workers(workers);
    struct part p[MSM_MAX_WORKERS];
    for (int k = 0; k < workers; k++)
        p[k] = (struct part){rec, in, out, n * k / workers, n * (k + 1) / workers,
                             in->nevents * k / workers, in->nevents * (k + 1) / workers, 0};
    msm_run(workers, fill_rows, p, sizeof p[0]);
    for (int k = 0; k < workers; k++) {
        if (p[k].bad)
            return -1;
        p[k].first = in->nlinks * k / workers;
        p[k].last = in->nlinks * (k + 1) / workers;
    }
    msm_run(workers, fill_links, p, sizeof p[0]);
    return 0;
}

int64_t msm_factorize(const int32_t *rank, const uint64_t *value, int64_t n, int32_t *code, int64_t *first)
{
    const uint64_t low48 = (1ull << 48) - 1;
    struct msm_map seen;
    if (msm_map_init(&seen, 1024) != 0)
        return -1;
    int64_t distinct = 0;
    for (int64_t i = 0; i < n; i++) {
        uint64_t key = rank ? (uint64_t)(uint32_t)rank[i] << 48 | (value[i] & low48) : value[i];
        uint64_t s = msm_map_slot(&seen, key);
        if (seen.vals[s] < 0) {
            if (2 * (uint64_t)(distinct + 1) > seen.mask) {  /* half full: grow, re-insert */
                struct msm_map big;
                if (msm_map_init(&big, 2 * (distinct + 1)) != 0) {
                    msm_map_free(&seen);
                    return -1;
                }
                for (uint64_t j = 0; j <= seen.mask; j++)
                    if (seen.vals[j] >= 0) {
                        uint64_t t = msm_map_slot(&big, seen.keys[j]);
                        big.keys[t] = seen.keys[j];
                        big.vals[t] = seen.vals[j];
                    }
                msm_map_free(&seen);
                seen = big;
                s = msm_map_slot(&seen, key);
            }
            seen.keys[s] = key;
            seen.vals[s] = distinct;
            first[distinct++] = i;
        }
        code[i] = (int32_t)seen.vals[s];
    }
    msm_map_free(&seen);
    return distinct;
}
