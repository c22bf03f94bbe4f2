/* The kernels' threads: a fixed split of the work, one part per thread. */
#include <pthread.h>

#include "merge.h"

void msm_run(int workers, void *(*fn)(void *), void *args, size_t size)
{
    pthread_t tid[MSM_MAX_WORKERS];
    int started[MSM_MAX_WORKERS] = {0};
    char *arg = args;
    for (int k = 1; k < workers; k++)
        started[k] = pthread_create(&tid[k], NULL, fn, arg + (size_t)k * size) == 0;
    for (int k = 0; k < workers; k++)
        if (k == 0 || !started[k])  /* a thread that could not start: its part runs here */
            fn(arg + (size_t)k * size);
    for (int k = 1; k < workers; k++)
        if (started[k])
            pthread_join(tid[k], NULL);
}

int msm_workers(int32_t wanted)
{
    return wanted < 1 ? 1 : wanted > MSM_MAX_WORKERS ? MSM_MAX_WORKERS : wanted;
}
