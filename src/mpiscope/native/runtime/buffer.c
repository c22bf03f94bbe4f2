/* Per-thread record blocks mapped from the rank's trace file.
 *
 * Each thread records into its ring of mapped 2 MiB blocks (slots), one at a
 * time; full blocks go to the writer (writer.c), which copies them further on
 * in the file and hands the slot back zeroed. Space is reserved with
 * posix_fallocate before a block is used, so a full disk is seen here, as an
 * error we can report, and never later as SIGBUS on a store into the map.
 * Locks are taken only when a block fills (once per ~43,700 events).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stddef.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "runtime.h"

int msc_tracking;
int msc_concurrent;
int msc_recording;
struct msc_thread msc_unattached;
_Thread_local struct msc_thread *msc_tls MSC_TLS_MODEL = &msc_unattached;
struct msc_file_header *msc_hdr;
int msc_trace_fd = -1;

static struct msc_thread threads[MSC_MAX_THREADS];
static struct msc_thread overflow_thread; /* shared by threads beyond the limit: never records */
static unsigned nthreads;
static pthread_mutex_t block_lock = PTHREAD_MUTEX_INITIALIZER;

void msc_warn(const char *what, const char *path, int err)
{
    /* One line on stderr, async-signal-safe (no stdio). */
    char line[512];
    int n = snprintf(line, sizeof line, "mpiscope: rank %d: %s%s%s%s%s\n", msc_world_rank_self, what,
                     path && *path ? " " : "", path ? path : "", err ? ": " : "", err ? strerror(err) : "");
    if (n > 0) {
        ssize_t w = write(2, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
        (void)w;
    }
}

/* Slots of exited threads are reused (with their current block: a slot's
 * events stay in time order, since its previous thread is gone), so a program
 * that starts threads over and over keeps being recorded. */
static pthread_key_t exit_key;
static pthread_once_t exit_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t slot_lock = PTHREAD_MUTEX_INITIALIZER;
static uint16_t free_slots[MSC_MAX_THREADS];
static unsigned nfree;

static void thread_exit(void *slot)
{
    struct msc_thread *t = slot;
    pthread_mutex_lock(&slot_lock);
    if (nfree < MSC_MAX_THREADS) free_slots[nfree++] = t->index;
    pthread_mutex_unlock(&slot_lock);
}

static void make_exit_key(void)
{
    pthread_key_create(&exit_key, thread_exit);
}

struct msc_thread *msc_thread_attach(void)
{
    pthread_once(&exit_once, make_exit_key);
    pthread_mutex_lock(&slot_lock);
    unsigned i = nfree ? free_slots[--nfree] : nthreads < MSC_MAX_THREADS ? nthreads++ : MSC_MAX_THREADS;
    pthread_mutex_unlock(&slot_lock);
    if (i >= MSC_MAX_THREADS) {
        if (msc_hdr) __atomic_fetch_add(&msc_hdr->dropped, 1, __ATOMIC_RELAXED);
        msc_tls = &overflow_thread;
        return NULL;
    }
    threads[i].index = (uint16_t)i;
    threads[i].busy = 0;
    msc_tls = &threads[i];
    pthread_setspecific(exit_key, &threads[i]);
    return msc_tls;
}

void msc_stop(int state, int sig)
{
    __atomic_store_n(&msc_recording, 0, __ATOMIC_RELAXED);
    if (!msc_hdr) return;
    msc_clock_pair(&msc_hdr->tick_end, &msc_hdr->ns_end);
    msc_hdr->end_signal = sig;
    /* A disk-full stop stays the file's story even if the program finalizes. */
    if (__atomic_load_n(&msc_hdr->state, __ATOMIC_ACQUIRE) != MSC_STATE_DISK_FULL)
        __atomic_store_n(&msc_hdr->state, (uint32_t)state, __ATOMIC_RELEASE);
}

/* Never written, so every page of it is the kernel's zero page: reading it
 * costs no memory. */
static char zero_block[MSC_BLOCK_BYTES];

/* Write the block's zeros through the page cache before mapping it. A store
 * into a freshly fallocated block faults once per 4 KiB page, each fault
 * allocating and zeroing a page and running the filesystem's page_mkwrite
 * (measured 5-7 us per page on ext4 here, ~65 ns per event on average); one
 * 2 MiB write at a 2 MiB-aligned offset fills the cache in bulk (1-1.5 us
 * per 4 KiB) and, where the filesystem has large folios, as one folio that
 * the first store maps whole. Measured here (ext4, Linux 6.18) per MiB of
 * records: 1 MiB blocks after a 4 KiB header 450-990 us, of which 135-515 us
 * in 48-74 faults taken by the records' stores; 2 MiB aligned blocks 320-370
 * us, half a fault. */
static int prime_page_cache(off_t off)
{
    return msc_write_block(msc_trace_fd, zero_block, off);
}

/* Write a whole block at file offset off: 0 or an errno. */
int msc_write_block(int fd, const void *block, off_t off)
{
    size_t done = 0;
    while (done < MSC_BLOCK_BYTES) {
        ssize_t n = pwrite(fd, (const char *)block + done, MSC_BLOCK_BYTES - done, off + (off_t)done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return n < 0 ? errno : EIO;
        done += (size_t)n;
    }
    return 0;
}

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14; older kernels refuse it, harmlessly */
#endif

/* Map the whole block writable now, in one call, rather than by a fault at
 * the first store into each page (or folio) while the program runs: where
 * the filesystem has no large folios, that takes the page faults out of the
 * calls' path into the block switch. The block's space is already reserved,
 * so this cannot fail for lack of disk; if it fails at all, the stores fault
 * the pages in as before. */
static void populate(void *b)
{
    (void)madvise(b, MSC_BLOCK_BYTES, MADV_POPULATE_WRITE);
}

/* Reserve disk for one more block of the rank file: its offset in *off, or
 * an errno (ENOSPC: the disk is full). Space is reserved before anything is
 * stored, so a full disk is seen here and never as SIGBUS in the map. */
int msc_block_reserve(off_t *off)
{
    pthread_mutex_lock(&block_lock);
    uint32_t idx = msc_hdr->nblocks;
    *off = (off_t)MSC_HEADER_BYTES + (off_t)idx * MSC_BLOCK_BYTES;
    int err = posix_fallocate(msc_trace_fd, *off, MSC_BLOCK_BYTES);
    if (!err) msc_hdr->nblocks = idx + 1;
    pthread_mutex_unlock(&block_lock);
    return err;
}

/* A new ring slot: a block of the file, primed and mapped. */
static int slot_map(struct msc_slot *s)
{
    off_t off;
    int err = msc_block_reserve(&off);
    if (!err) err = prime_page_cache(off);
    if (err) return err;
    void *b = mmap(NULL, MSC_BLOCK_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, msc_trace_fd, off);
    if (b == MAP_FAILED) return errno;
    populate(b);
    s->off = (int64_t)off;
    s->map = b;
    return 0;
}

/* The trace file cannot take more (full disk, I/O error): recording stops
 * with one line on stderr, the program runs on. */
void msc_disk_full(const char *what, int err)
{
    if (__atomic_load_n(&msc_recording, __ATOMIC_RELAXED)) {
        msc_stop(MSC_STATE_DISK_FULL, 0);
        msc_warn(what, "", err);
    }
}

/* Map every slot of the calling thread's ring now (at the start of
 * recording), so that the thread that runs the program takes no block
 * allocation while it does. Where the disk has no room for them yet, the
 * slots are mapped when first needed, and a full disk is reported then. */
void msc_ring_prepare(void)
{
    struct msc_thread *t = msc_tls;
    if (t == &msc_unattached || t == &overflow_thread) return;
    for (unsigned i = 0; i < MSC_RING_SLOTS; i++)
        if (!t->ring[i].map && slot_map(&t->ring[i]) != 0) return;
}

/* Move thread t on to its next block; returns its first free record. */
static struct msc_rec *next_block(struct msc_thread *t)
{
    uint64_t t0 = msc_ticks();
    /* The block before the current one is complete: a call's record may
     * still be open in the current block (a sub-record reserved while the
     * call's own record is open has just filled it), never in the one
     * before. */
    if (t->seq >= 2) msc_writer_hand_over(t, (t->seq - 2) % MSC_RING_SLOTS);
    struct msc_slot *s = &t->ring[t->seq % MSC_RING_SLOTS];
    if (s->map) {
        if (msc_writer_wait_free(s) != 0) return NULL; /* the writer stopped the recording */
    } else {
        int err = slot_map(s);
        if (err) {
            msc_disk_full("recording stopped, the program runs on; cannot extend the trace file", err);
            return NULL;
        }
    }
    __atomic_store_n(&s->state, MSC_SLOT_LIVE, __ATOMIC_RELAXED);

    struct msc_block_header *h = s->map;
    h->magic = MSC_BLOCK_MAGIC;
    h->version = MSC_FORMAT_VERSION;
    h->thread = t->index;
    h->rank = msc_world_rank_self;
    h->seq = t->seq++;
    msc_clock_pair(&h->tick0, &h->ns0);
    h->tick_last = h->tick0;
    h->ns_last = h->ns0;
    struct msc_rec *recs = (struct msc_rec *)((char *)s->map + MSC_BLOCK_HEADER_BYTES);
    /* The block switch itself is an event: tool time the user should see. */
    recs[0].t_enter = t0;
    recs[0].t_leave = msc_ticks();
    recs[0].peer = MSC_PEER_NONE;
    recs[0].tag = MSC_TAG_NONE;
    recs[0].comm = MSC_COMM_UNKNOWN;
    msc_commit(&recs[0], MSC_SUB_BLOCK);
    t->block = s->map;
    t->next = recs + 2;
    t->block_end = recs + MSC_RECS_PER_BLOCK;
    t->end = recs + MSC_PAIR_EVERY;
    return recs + 1;
}

/* A fresh calibration pair in the block header every MSC_PAIR_EVERY events,
 * so that even a killed rank leaves a long calibration span. */
static void refresh_pair(struct msc_thread *t)
{
    struct msc_block_header *h = t->block;
    uint64_t tick, ns;
    msc_clock_pair(&tick, &ns);
    h->ns_last = ns;
    h->tick_last = tick;
}

/* The hot path reached t->end: the thread's first record, a calibration
 * point or the end of its block. */
struct msc_rec *msc_next_record(struct msc_thread *t)
{
    if (t == &msc_unattached) {
        t = msc_thread_attach();
        if (!t) return NULL;
        if (t->next != t->end) return t->next++; /* a slot of an exited thread, mid-block */
    }
    if (t == &overflow_thread || !__atomic_load_n(&msc_recording, __ATOMIC_RELAXED)) return NULL;
    if (t->next == t->block_end) return next_block(t);
    refresh_pair(t);
    t->end = t->block_end - t->next > MSC_PAIR_EVERY ? t->next + MSC_PAIR_EVERY : t->block_end;
    return t->next++;
}

/* After a clean end, seal the blocks left in the rings and the file header
 * (record.h), and give back the disk and page cache that no record uses:
 * the ring slots whose blocks the writer copied out (zeroed), and the rest of
 * each thread's current block. Holes read as zeros, where a reader stops
 * anyway; where the filesystem cannot punch holes, the zeros stay. */
void msc_release_unused(void)
{
    msc_writer_finish();
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    for (unsigned i = 0; i < nthreads; i++) {
        const struct msc_thread *t = &threads[i];
        for (unsigned k = 0; k < MSC_RING_SLOTS; k++) {
            const struct msc_slot *s = &t->ring[k];
            uintptr_t used = 0;
            if (!s->map || __atomic_load_n(&s->state, __ATOMIC_ACQUIRE) == MSC_SLOT_QUEUED) continue;
            if (__atomic_load_n(&s->state, __ATOMIC_ACQUIRE) == MSC_SLOT_LIVE) msc_block_seal(s->map);
            if (s->map == t->block) used = ((uintptr_t)t->next - (uintptr_t)t->block + page - 1) & ~(page - 1);
            else if (__atomic_load_n(&s->state, __ATOMIC_ACQUIRE) == MSC_SLOT_LIVE) continue;
            if (used >= MSC_BLOCK_BYTES) continue;
            (void)fallocate(msc_trace_fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                            (off_t)(s->off + (int64_t)used), (off_t)(MSC_BLOCK_BYTES - used));
        }
    }
    const size_t tail = offsetof(struct msc_file_header, cpus_online);
    msc_hdr->tail_crc = msc_crc32c(0, (const char *)msc_hdr + tail, offsetof(struct msc_file_header, tail_crc) - tail);
    msc_hdr->crc = msc_crc32c(0, msc_hdr, offsetof(struct msc_file_header, sealed));
    __atomic_store_n(&msc_hdr->sealed, MSC_SEALED_MAGIC, __ATOMIC_RELEASE);
}

void *msc_scratch(int which, size_t bytes)
{
    struct msc_thread *t = msc_tls;
    if (t == &msc_unattached && !(t = msc_thread_attach())) return NULL;
    if (t == &overflow_thread) return NULL;
    if (t->scratch_bytes[which] < bytes) {
        size_t want = bytes < 65536 ? 65536 : (bytes + 65535) & ~(size_t)65535;
        void *p = mmap(NULL, want, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) return NULL;
        if (t->scratch[which]) munmap(t->scratch[which], t->scratch_bytes[which]);
        t->scratch[which] = p;
        t->scratch_bytes[which] = want;
    }
    return t->scratch[which];
}
