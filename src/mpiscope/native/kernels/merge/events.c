/* The rows of events.parquet: one per call record (sub-records only feed the
 * matching), placed at their event id, so rows come out in (rank, t_enter)
 * order without a sort; and the call-site factorisation of those rows. */
#include <stdlib.h>

#include "merge.h"

int msm_events(const struct msm_columns *rec, int64_t n, const struct msm_event_inputs *in,
               const struct msm_events *out)
{
    for (int64_t e = 0; e < in->nevents; e++) {
        out->t_complete[e] = -1;
        out->completed_by[e] = -1;
    }
    for (int64_t i = 0; i < n; i++) {
        int64_t e = rec->event[i];
        if (e < 0)
            continue;
        if (e >= in->nevents)
            return -1;
        out->event[e] = e;
        out->rank[e] = rec->rank[i];
        out->thread[e] = rec->thread[i];
        out->call[e] = in->call_code[rec->call[i]];
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
    /* nonblocking starts that are calls (not sub-records of Startall) */
    for (int64_t k = 0; k < in->nlinks; k++) {
        int64_t e = rec->event[in->link_index[k]];
        if (e >= 0) {
            out->t_complete[e] = in->link_t_complete[k];
            out->completed_by[e] = in->link_completed_by[k];
        }
    }
    return 0;
}

int64_t msm_factorize(const uint64_t *key, int64_t n, int32_t *code, int64_t *first)
{
    struct msm_map seen;
    if (msm_map_init(&seen, 1024) != 0)
        return -1;
    int64_t distinct = 0;
    for (int64_t i = 0; i < n; i++) {
        uint64_t s = msm_map_slot(&seen, key[i]);
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
                s = msm_map_slot(&seen, key[i]);
            }
            seen.keys[s] = key[i];
            seen.vals[s] = distinct;
            first[distinct++] = i;
        }
        code[i] = (int32_t)seen.vals[s];
    }
    msm_map_free(&seen);
    return distinct;
}
