/* Fatal signals: mark the rank file as ended, then let the program's previous
 * disposition act. Records are already in the kernel's page cache (shared
 * file mapping), so nothing needs writing; only async-signal-safe calls here.
 * SIGKILL cannot be caught: such a file keeps state RUNNING, and the reader
 * reports the rank as cut off. A signal the program ignores (SIGINT and
 * SIGQUIT of a shell's background job) stays ignored: it stops neither the
 * program nor its recording.
 *
 * A signal the program handles itself may end it (the handler calls _exit,
 * exit or abort) or not: a handler that sets a flag and returns lets the
 * program go on, to write a checkpoint before a batch system's SIGTERM turns
 * into SIGKILL, say, with MPI calls; Python's handler of SIGINT returns too,
 * and a rank blocked in MPI then never raises KeyboardInterrupt. While the
 * handler runs, the file says the signal stopped the rank at the time it came
 * (what a handler that ends the process leaves), and the recording goes on;
 * when the handler returns, the file is running again and keeps that time: a
 * rank killed later by SIGKILL (a launcher told twice) ran at least until then.
 */
#define _GNU_SOURCE
#include <signal.h>
#include <string.h>

#include "runtime.h"

static const int fatal[] = {SIGSEGV, SIGBUS, SIGFPE, SIGABRT, SIGTERM, SIGINT};
#define NFATAL (sizeof fatal / sizeof fatal[0])
static struct sigaction previous[NFATAL];
/* Inside the program's handler of the signal that marked the file (at_exit: an exit() there). */
static volatile sig_atomic_t handling;

static int running(void)
{
    return msc_hdr && __atomic_load_n(&msc_hdr->state, __ATOMIC_ACQUIRE) == MSC_STATE_RUNNING;
}

/* The file says the rank was stopped by sig now; recording goes on. */
static void mark_signaled(int sig)
{
    msc_clock_pair(&msc_hdr->tick_end, &msc_hdr->ns_end);
    msc_hdr->end_signal = sig;
    __atomic_store_n(&msc_hdr->state, (uint32_t)MSC_STATE_SIGNALED, __ATOMIC_RELEASE);
}

/* The program's handler of sig returned: the file is running again, unless the handler
 * ended the recording otherwise (MPI_Finalize, MPI_Abort inside it); the time stays. */
static void unmark_signaled(int sig)
{
    uint32_t marked = MSC_STATE_SIGNALED;
    if (msc_hdr->end_signal != sig ||
        !__atomic_compare_exchange_n(&msc_hdr->state, &marked, (uint32_t)MSC_STATE_RUNNING, 0,
                                     __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
        return;
    msc_hdr->end_signal = 0;
}

static void on_fatal(int sig, siginfo_t *info, void *ctx)
{
    size_t i = 0;
    while (i < NFATAL && fatal[i] != sig) i++;
    if (i == NFATAL) return;
    struct sigaction *old = &previous[i];
    int own = (old->sa_flags & SA_SIGINFO) ? old->sa_sigaction != NULL : old->sa_handler != SIG_DFL;
    if (!own) {
        if (running()) msc_stop(MSC_STATE_SIGNALED, sig);
        /* Default action: reinstate it and deliver the signal again once this
         * handler returns (it is blocked until then). */
        sigaction(sig, old, NULL);
        raise(sig);
        return;
    }
    int marked = running();
    if (marked) {
        mark_signaled(sig);
        handling = 1;
    }
    if (old->sa_flags & SA_SIGINFO)
        old->sa_sigaction(sig, info, ctx);
    else
        old->sa_handler(sig);
    if (marked) {
        handling = 0;
        unmark_signaled(sig);
    }
}

int msc_in_signal_handler(void)
{
    return handling;
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
