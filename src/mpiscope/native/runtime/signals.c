/* Fatal signals: mark the rank file as ended, then let the program's previous
 * disposition act. Records are already in the kernel's page cache (shared
 * file mapping), so nothing needs writing; only async-signal-safe calls here.
 * SIGKILL cannot be caught: such a file keeps state RUNNING, and the reader
 * reports the rank as cut off. A signal the program ignores (SIGINT and
 * SIGQUIT of a shell's background job) stays ignored: it stops neither the
 * program nor its recording.
 */
#define _GNU_SOURCE
#include <signal.h>
#include <string.h>

#include "runtime.h"

static const int fatal[] = {SIGSEGV, SIGBUS, SIGFPE, SIGABRT, SIGTERM, SIGINT};
#define NFATAL (sizeof fatal / sizeof fatal[0])
static struct sigaction previous[NFATAL];

static void on_fatal(int sig, siginfo_t *info, void *ctx)
{
    size_t i = 0;
    while (i < NFATAL && fatal[i] != sig) i++;
    if (i == NFATAL) return;
    if (msc_hdr && __atomic_load_n(&msc_hdr->state, __ATOMIC_ACQUIRE) == MSC_STATE_RUNNING)
        msc_stop(MSC_STATE_SIGNALED, sig);
    struct sigaction *old = &previous[i];
    if ((old->sa_flags & SA_SIGINFO) && old->sa_sigaction) {
        old->sa_sigaction(sig, info, ctx);
    } else if (old->sa_handler != SIG_DFL) {
        old->sa_handler(sig);
    } else {
        /* Default action: reinstate it and deliver the signal again once this
         * handler returns (it is blocked until then). */
        sigaction(sig, old, NULL);
        raise(sig);
    }
}

void msc_signals_install(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_fatal;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < NFATAL; i++) {
        sigaction(fatal[i], &sa, &previous[i]);
        if (!(previous[i].sa_flags & SA_SIGINFO) && previous[i].sa_handler == SIG_IGN)
            sigaction(fatal[i], &previous[i], NULL);
    }
}
