/* The writer: copies full blocks out of the threads' ring slots (buffer.c)
 * to blocks of their own further on in the rank file, then zeroes the slots
 * for reuse.
 *
 * It runs in a thread of its own, started with the recording, so that no
 * MPI call waits for it. The copy goes through O_DIRECT where the
 * filesystem has it: the device reads the slot's pages, and neither the
 * kernel nor this thread copies or zeroes fresh page cache (2 MiB: 35-40 us
 * of CPU on an idle VM, 70-110 us beside two busy ranks, against 0.3-5 ms
 * for a fresh buffered block). Zeroing the slot takes another 30-120 us.
 *
 * Every recorded block is always whole in its slot, in its copy, or in both:
 * a slot is zeroed only after its copy was written, and reused only after
 * that. A rank killed at any moment leaves each block readable in one of
 * them, and the reader keeps, of two copies of a block, the one with more
 * records.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stddef.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "runtime.h"

/* Full blocks waiting to be copied: at most MSC_RING_SLOTS - 2 per thread
 * (each thread keeps its current block and the one before). */
#define QUEUE_CAP (MSC_MAX_THREADS * (MSC_RING_SLOTS - 2) + 1)

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t queued = PTHREAD_COND_INITIALIZER; /* the queue has a block, or finish */
static pthread_cond_t freed = PTHREAD_COND_INITIALIZER;  /* a slot was handed back (or the writer gave up) */
static struct msc_slot *queue[QUEUE_CAP];
static unsigned head, tail;
static int started, finishing;
static int failed; /* a copy failed: the recording stopped, queued slots keep their blocks */
static pthread_t thread;
static int direct_fd = -1;
static int sealing = 1; /* MPISCOPE_BLOCK_CRC=0 turns the blocks' CRC off, to measure what it costs */

/* An O_DIRECT descriptor of the rank file, where the filesystem allows it. */
void msc_writer_open(const char *path)
{
    direct_fd = open(path, O_WRONLY | O_DIRECT | O_CLOEXEC);
}

/* Copy a full slot to a new block of the file; 0 or an errno. */
static int copy_out(const struct msc_slot *s)
{
    off_t off;
    int err = msc_block_reserve(&off);
    if (err) return err;
    if (direct_fd >= 0) {
        err = msc_write_block(direct_fd, s->map, off);
        if (err != EINVAL) return err;
        /* O_DIRECT refused after all (alignment, filesystem): buffered from now on. */
        close(direct_fd);
        direct_fd = -1;
    }
    return msc_write_block(msc_trace_fd, s->map, off);
}

/* Zero a copied slot, records first: a rank killed meanwhile leaves a block
 * header with fewer records than the copy, which the reader prefers. */
static void zero_slot(struct msc_slot *s)
{
    memset((char *)s->map + MSC_BLOCK_HEADER_BYTES, 0, MSC_BLOCK_BYTES - MSC_BLOCK_HEADER_BYTES);
    memset(s->map, 0, MSC_BLOCK_HEADER_BYTES);
}

/* Seal a block: the CRC of its header fields and committed records (a
 * prefix of the block: records are committed in order, see record.h). */
void msc_block_seal(void *block)
{
    if (!sealing) return;
    struct msc_block_header *h = block;
    const struct msc_rec *recs = (const struct msc_rec *)((const char *)block + MSC_BLOCK_HEADER_BYTES);
    uint32_t lo = 0, hi = MSC_RECS_PER_BLOCK; /* the first uncommitted record, by bisection */
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (__atomic_load_n(&recs[mid].call, __ATOMIC_ACQUIRE)) lo = mid + 1;
        else hi = mid;
    }
    uint32_t crc = msc_crc32c(0, h, offsetof(struct msc_block_header, crc));
    h->crc = msc_crc32c(crc, recs, (size_t)lo * sizeof *recs);
    h->crc_records = lo;
}

/* Copy and hand back one queued slot. On failure (disk full, I/O error) the
 * recording stops and the slot keeps its block, where the reader finds it. */
static void process(struct msc_slot *s)
{
    msc_block_seal(s->map);
    int err = copy_out(s);
    if (!err) zero_slot(s);
    pthread_mutex_lock(&lock);
    if (!err) __atomic_store_n(&s->state, MSC_SLOT_FREE, __ATOMIC_RELEASE);
    else failed = 1;
    pthread_cond_broadcast(&freed);
    pthread_mutex_unlock(&lock);
    if (err) msc_disk_full("recording stopped, the program runs on; cannot write the trace file", err);
}

static void *run(void *arg)
{
    (void)arg;
    pthread_setname_np(pthread_self(), "mpiscope-writer"); /* as top and gdb show it */
    pthread_mutex_lock(&lock);
    for (;;) {
        while (head == tail && !finishing) pthread_cond_wait(&queued, &lock);
        if (head == tail) break;
        struct msc_slot *s = queue[head];
        head = (head + 1) % QUEUE_CAP;
        pthread_mutex_unlock(&lock);
        struct timespec t0, t1;
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
        process(s);
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t1);
        msc_hdr->writer_cpu_ns += (uint64_t)((t1.tv_sec - t0.tv_sec) * 1000000000ll + (t1.tv_nsec - t0.tv_nsec));
        msc_hdr->writer_blocks++;
        pthread_mutex_lock(&lock);
    }
    pthread_mutex_unlock(&lock);
    return NULL;
}

/* The writer takes no signal: the program's handlers run in its own threads. */
static int start(void)
{
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int err = pthread_create(&thread, NULL, run, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return err;
}

/* Start the writer with the recording, so that no MPI call pays for
 * creating it (and faulting in its stack). */
void msc_writer_start(void)
{
    const char *crc = getenv("MPISCOPE_BLOCK_CRC");
    sealing = !(crc && *crc == '0');
    msc_hdr->blocks_sealed = (uint32_t)sealing;
    pthread_mutex_lock(&lock);
    if (!started) started = start() == 0 ? 1 : -1;
    pthread_mutex_unlock(&lock);
}

/* Thread t's block in ring[slot] is full: queue it for the writer (once: a
 * switch that failed is tried again). Without a writer thread (none could be
 * started, or it finished) the caller copies it itself. */
void msc_writer_hand_over(struct msc_thread *t, unsigned slot)
{
    struct msc_slot *s = &t->ring[slot];
    if (__atomic_load_n(&s->state, __ATOMIC_ACQUIRE) != MSC_SLOT_LIVE) return;
    pthread_mutex_lock(&lock);
    if (started <= 0) {
        pthread_mutex_unlock(&lock);
        process(s);
        return;
    }
    __atomic_store_n(&s->state, MSC_SLOT_QUEUED, __ATOMIC_RELAXED);
    queue[tail] = s;
    tail = (tail + 1) % QUEUE_CAP;
    pthread_cond_signal(&queued);
    pthread_mutex_unlock(&lock);
}

/* Wait until the writer has handed slot s back: 0, or -1 when it never will
 * (a copy failed and the recording stopped). */
int msc_writer_wait_free(struct msc_slot *s)
{
    if (__atomic_load_n(&s->state, __ATOMIC_ACQUIRE) != MSC_SLOT_QUEUED) return 0;
    pthread_mutex_lock(&lock);
    while (__atomic_load_n(&s->state, __ATOMIC_ACQUIRE) == MSC_SLOT_QUEUED && !failed)
        pthread_cond_wait(&freed, &lock);
    int err = __atomic_load_n(&s->state, __ATOMIC_ACQUIRE) == MSC_SLOT_QUEUED ? -1 : 0;
    pthread_mutex_unlock(&lock);
    return err;
}

/* At a clean end: copy what is queued, then stop the writer. */
void msc_writer_finish(void)
{
    pthread_mutex_lock(&lock);
    int join = started > 0;
    finishing = 1;
    pthread_cond_signal(&queued);
    pthread_mutex_unlock(&lock);
    if (join) pthread_join(thread, NULL);
    started = 0;
    finishing = 0;
    if (direct_fd >= 0) close(direct_fd);
    direct_fd = -1;
}
