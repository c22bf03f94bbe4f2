/* The kernels' hash table (merge.h): open addressing, linear probing. */
#include <stdlib.h>

#include "merge.h"

int msm_map_init(struct msm_map *m, int64_t expected)
{
    uint64_t size = 16;
    while (size < 2 * (uint64_t)(expected > 0 ? expected : 1))  /* load <= 1/2: short probes */
        size <<= 1;
    m->mask = size - 1;
    m->keys = malloc(size * sizeof *m->keys);
    m->vals = malloc(size * sizeof *m->vals);
    if (!m->keys || !m->vals) {
        msm_map_free(m);
        return -1;
    }
    for (uint64_t i = 0; i < size; i++)
        m->vals[i] = -1;
    return 0;
}

void msm_map_free(struct msm_map *m)
{
    free(m->keys);
    free(m->vals);
    m->keys = NULL;
    m->vals = NULL;
}
