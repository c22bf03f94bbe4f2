/* The two sides of point-to-point traffic (merge.py's P2P), in one pass:
 * sends are blocking sends in recording order, then nonblocking and
 * persistent starts in recording order, less the cancelled ones; receives
 * are blocking receives, then nonblocking ones, then matched probes (Mprobe
 * takes the message off the queue; the Mrecv, or Imrecv's completion,
 * delivers it). */
#include <stdlib.h>

#include "merge.h"
#include "record.h"

static uint64_t request_key(const struct msm_columns *rec, int64_t i)
{
    return (uint64_t)(int64_t)rec->rank[i] << 32 | (uint64_t)rec->req[i];
}

static void put(const struct msm_side *s, int64_t k, int64_t comm, int32_t src, int32_t dst, int32_t tag,
                int64_t posted, int64_t event, int64_t bytes, int64_t leave)
{
    s->comm[k] = comm;
    s->src[k] = src;
    s->dst[k] = dst;
    s->tag[k] = tag;
    s->posted[k] = posted;
    s->event[k] = event;
    s->bytes[k] = bytes;
    s->leave[k] = leave;
}

/* Where matched probes' messages were delivered: Mrecv exits and Imrecv
 * completions by (rank, request id), the first of each id. */
struct delivered {
    struct msm_map mrecv, imrecv;
};

static int index_deliveries(const struct msm_columns *rec, int64_t n, const uint8_t *kind,
                            const struct msm_links *links, struct delivered *d)
{
    int64_t nm = 0, ni = 0;
    for (int64_t i = 0; i < n; i++)
        nm += (kind[rec->role[i]] & MSM_MRECV) != 0;
    for (int64_t k = 0; k < links->n; k++)
        ni += (kind[rec->role[links->index[k]]] & MSM_IMRECV) != 0;
    if (msm_map_init(&d->mrecv, nm) != 0)
        return -1;
    if (msm_map_init(&d->imrecv, ni) != 0) {
        msm_map_free(&d->mrecv);
        return -1;
    }
    for (int64_t i = 0; i < n; i++)
        if ((kind[rec->role[i]] & MSM_MRECV) && rec->t_leave[i] >= 0) {
            uint64_t key = request_key(rec, i), s = msm_map_slot(&d->mrecv, key);
            if (d->mrecv.vals[s] < 0) {
                d->mrecv.keys[s] = key;
                d->mrecv.vals[s] = rec->t_leave[i];
            }
        }
    for (int64_t k = 0; k < links->n; k++)
        if (kind[rec->role[links->index[k]]] & MSM_IMRECV) {
            uint64_t key = request_key(rec, links->index[k]), s = msm_map_slot(&d->imrecv, key);
            if (d->imrecv.vals[s] < 0 && links->t_complete[k] >= 0) {
                d->imrecv.keys[s] = key;
                d->imrecv.vals[s] = links->t_complete[k];
            }
        }
    return 0;
}

/* Exit of the Mrecv that delivered probe i's message, else the completion
 * of its Imrecv, else -1. */
static int64_t probe_leave(const struct delivered *d, uint64_t key)
{
    int64_t t = d->mrecv.vals[msm_map_slot(&d->mrecv, key)];
    return t >= 0 ? t : d->imrecv.vals[msm_map_slot(&d->imrecv, key)];
}

static int64_t sends_pass(const struct msm_columns *rec, int64_t n, const uint8_t *kind,
                          const struct msm_links *l, const struct msm_side *out)
{
    int64_t k = 0;
    for (int64_t i = 0; i < n; i++)
        if ((kind[rec->role[i]] & MSM_SEND) && rec->peer[i] >= 0 && rec->t_leave[i] >= 0) {
            if (out)
                put(out, k, rec->comm[i], rec->rank[i], rec->peer[i], rec->tag[i], rec->t_enter[i],
                    rec->event[i], rec->bytes[i], rec->t_leave[i]);
            k++;
        }
    for (int64_t j = 0; j < l->n; j++) {
        int64_t i = l->index[j];
        /* a cancelled send's completion says no message went */
        if ((kind[rec->role[i]] & MSM_NB_SEND) && rec->peer[i] >= 0 && l->peer[j] != MSC_PEER_CANCELLED) {
            if (out)
                put(out, k, rec->comm[i], rec->rank[i], rec->peer[i], rec->tag[i], rec->t_enter[i],
                    rec->event[i], rec->bytes[i], l->t_complete[j]);
            k++;
        }
    }
    return k;
}

/* Receives: src is the actual source (status), dst the receiving rank. */
static int64_t recvs_pass(const struct msm_columns *rec, int64_t n, const uint8_t *kind,
                          const struct msm_links *l, const struct delivered *d, const struct msm_side *out)
{
    int64_t k = 0;
    for (int64_t i = 0; i < n; i++)
        if ((kind[rec->role[i]] & MSM_RECV) && rec->peer[i] >= 0 && rec->t_leave[i] >= 0) {
            if (out)
                put(out, k, rec->comm[i], rec->peer[i], rec->rank[i], rec->tag[i], rec->t_enter[i],
                    rec->event[i], rec->bytes[i], rec->t_leave[i]);
            k++;
        }
    for (int64_t j = 0; j < l->n; j++) {
        int64_t i = l->index[j];
        if ((kind[rec->role[i]] & MSM_NB_RECV) && l->peer[j] >= 0) {
            if (out)
                put(out, k, rec->comm[i], l->peer[j], rec->rank[i], l->tag[j], rec->t_enter[i],
                    rec->event[i], l->bytes[j], l->t_complete[j]);
            k++;
        } else if ((kind[rec->role[i]] & MSM_NB_RECV) && l->t_complete[j] < 0 && l->peer[j] != MSC_PEER_CANCELLED
                   && rec->peer[i] >= 0 && rec->tag[i] >= 0) {
            /* Never completed (its request leaked or freed), yet posted for one source and tag: the MPI
             * delivers that envelope's next message into it all the same. Left out, every later message
             * of the envelope paired with the receive after its own (LAMMPS' NEB posts two receives
             * into one request: 480 messages paired with receives smaller than them). */
            if (out)
                put(out, k, rec->comm[i], rec->peer[i], rec->rank[i], rec->tag[i], rec->t_enter[i],
                    rec->event[i], rec->bytes[i], -1);
            k++;
        }
    }
    for (int64_t i = 0; i < n; i++)
        if ((kind[rec->role[i]] & MSM_MPROBE) && rec->peer[i] >= 0 && rec->req[i] != 0 && rec->t_leave[i] >= 0) {
            if (out)
                put(out, k, rec->comm[i], rec->peer[i], rec->rank[i], rec->tag[i], rec->t_enter[i],
                    rec->event[i], rec->bytes[i], probe_leave(d, request_key(rec, i)));
            k++;
        }
    return k;
}

int msm_p2p(const struct msm_columns *rec, int64_t n, const uint8_t *kind, const struct msm_links *links,
            int64_t counts[2], const struct msm_side *sends, const struct msm_side *recvs)
{
    if (!sends || !recvs) {
        counts[0] = sends_pass(rec, n, kind, links, NULL);
        counts[1] = recvs_pass(rec, n, kind, links, NULL, NULL);
        return 0;
    }
    struct delivered d;
    if (index_deliveries(rec, n, kind, links, &d) != 0)
        return -1;
    counts[0] = sends_pass(rec, n, kind, links, sends);
    counts[1] = recvs_pass(rec, n, kind, links, &d, recvs);
    msm_map_free(&d.mrecv);
    msm_map_free(&d.imrecv);
    return 0;
}
