/* The on-disk trace format written by libmpiscope, one file per rank.
 *
 * A rank file is a 4 KiB header page followed, from offset 2 MiB on, by 2 MiB
 * blocks. Each block belongs to one thread and holds fixed 48-byte records
 * after a 64-byte block header. The gap after the header page is a hole (no
 * disk, no memory): it puts every block at a 2 MiB-aligned file offset, so
 * that where the filesystem caches a block as one 2 MiB folio (ext4 and XFS
 * with large folios) the kernel maps it whole at its first store, one page
 * fault per block instead of one per 4 KiB page (see buffer.c).
 *
 * Records are written through a shared file mapping, so whatever a rank
 * stored survives any way the process ends (the kernel owns the pages, even
 * after SIGKILL). A record is valid once its `call` field is non-zero:
 * that field is stored last, so a reader stops at the first zero.
 *
 * Each thread records into a ring of blocks of the file that it reuses; a
 * full block is copied to a block of its own further on before its place is
 * zeroed for reuse (buffer.c, writer.c). A block (thread, seq) can therefore
 * be in the file twice, the copy and the original not yet zeroed; readers
 * keep the one with more records.
 *
 * From format 5 on, the writer thread seals every block it copies, and the
 * end of a clean run seals the blocks left in the rings and the file header:
 * a CRC-32C (crc32c.c) over the block header's fields before `crc` and its
 * first crc_records records, so that the reader tells damaged blocks from
 * sound ones. Blocks of a rank that died have no CRC (crc_records == 0);
 * the reader checks their records for plausibility instead.
 *
 * src/mpiscope/trace/record.py mirrors these layouts; a test compiles a probe
 * printing sizeof/offsetof and compares. Bump MSC_FORMAT_VERSION on change.
 */
#ifndef MSC_RECORD_H
#define MSC_RECORD_H

#include <stdint.h>
#include <stddef.h>

/* 1: 1 MiB blocks right after the header page; 2: a block is in the file
 * once; 3: a block may be in the file twice (see below); 4: a collective's
 * received bytes follow it in a record of their own (MSC_SUB_RECV_BYTES,
 * calls_gen.h) where they differ from its sent bytes, so that the reader
 * takes a collective without one as receiving what it sent; 5: CRC-32C of
 * blocks, of the file header at a clean end, and of communicator definitions; 6: a
 * call that failed is followed by a sub:rc record, and a polling loop's unsuccessful
 * calls are folded into one record followed by a sub:count (complete.c); polls of 2 to 4
 * call sites taking turns leave one such pair per call site, their spans overlapping (the
 * merge lays them one after the other: trace/outcomes.py) */
#define MSC_FORMAT_VERSION 6u
#define MSC_FILE_MAGIC 0x4543415254435353ull /* "SSCTRACE" little-endian */
#define MSC_BLOCK_MAGIC 0x4b4c4253u          /* "SBLK" */
#define MSC_COMMDEF_MAGIC 0x46454443u        /* "CDEF" */
#define MSC_SEALED_MAGIC 0x4c414553u         /* "SEAL": the file header's CRC is set */
#define MSC_HEADER_PAGE 4096u          /* what the file header occupies */
#define MSC_HEADER_BYTES (2u << 20)    /* file offset of the first block */
#define MSC_BLOCK_BYTES (2u << 20)
#define MSC_BLOCK_HEADER_BYTES 64u
#define MSC_PAIR_EVERY 4096u
#define MSC_RECS_PER_BLOCK ((MSC_BLOCK_BYTES - MSC_BLOCK_HEADER_BYTES) / 48u)

/* Special peer values (world ranks are >= 0). */
#define MSC_PEER_NONE (-1)       /* call has no peer */
#define MSC_PEER_ANY (-2)        /* MPI_ANY_SOURCE */
#define MSC_PEER_PROC_NULL (-3)  /* MPI_PROC_NULL */
#define MSC_PEER_ROOT (-4)       /* MPI_ROOT (root side of an intercommunicator collective) */
#define MSC_PEER_UNKNOWN (-5)    /* rank could not be translated */
#define MSC_PEER_CANCELLED (-6)  /* completion of a cancelled request: no message */
#define MSC_TAG_ANY (-1000001)   /* MPI_ANY_TAG, kept apart from user tags */
#define MSC_TAG_NONE (-1000002)  /* call has no tag; Iprobe/Improbe without a message */

/* Comm id 0xffff: the communicator table overflowed; such events are kept
 * but cannot be matched. */
#define MSC_COMM_UNKNOWN 0xffffu

struct msc_rec {
    uint64_t t_enter;  /* raw clock ticks (see header clock fields) */
    uint64_t t_leave;
    uint64_t bytes;
    uint64_t callsite; /* return address into the caller of the MPI function; in a
                        * sub:pcoll record (a persistent collective started), the call
                        * id of the *_init call that made the request instead */
    uint32_t req;      /* request id (nonblocking start <-> completion), 0: none */
    int32_t peer;      /* world rank of the peer; root for rooted collectives */
    int32_t tag;       /* tag; per-communicator sequence number for collectives */
    uint16_t comm;     /* rank-local communicator/window id (see .comms file) */
    uint16_t call;     /* call id (calls.json), stored last: 0 = not committed */
};
_Static_assert(sizeof(struct msc_rec) == 48, "record must stay 48 bytes");

struct msc_block_header {
    uint32_t magic;
    uint16_t version;
    uint16_t thread;   /* thread index within the rank, 0 = first thread */
    int32_t rank;
    uint32_t seq;      /* block number within its thread */
    uint64_t tick0;    /* clock calibration pair taken when the block started */
    uint64_t ns0;      /* CLOCK_MONOTONIC ns at tick0 */
    uint64_t tick_last; /* latest pair, refreshed every MSC_PAIR_EVERY events, so */
    uint64_t ns_last;   /* that even a killed rank leaves a long calibration span */
    uint32_t crc;       /* CRC-32C of the fields above and the first crc_records records */
    uint32_t crc_records; /* 0: not sealed (the block was still in use when the rank ended) */
    uint64_t reserved;
};
_Static_assert(sizeof(struct msc_block_header) == MSC_BLOCK_HEADER_BYTES, "block header size");

/* How the rank file ended. */
enum msc_state {
    MSC_STATE_RUNNING = 0,   /* never closed: killed (SIGKILL) or still running */
    MSC_STATE_FINISHED = 1,  /* MPI_Finalize completed */
    MSC_STATE_SIGNALED = 2,  /* fatal signal, see end_signal */
    MSC_STATE_ABORTED = 3,   /* MPI_Abort */
    MSC_STATE_EXITED = 4,    /* exit() without MPI_Finalize */
    MSC_STATE_DISK_FULL = 5, /* recording stopped: no space for the next block */
};

enum msc_clock_kind { MSC_CLOCK_MONOTONIC_NS = 0, MSC_CLOCK_TSC = 1 };

struct msc_file_header {
    uint64_t magic;
    uint32_t version;
    uint32_t header_bytes;
    uint32_t block_bytes;
    uint32_t rec_bytes;
    int32_t rank;
    int32_t world_size;
    int32_t pid;
    int32_t thread_level;    /* MPI_THREAD_* provided */
    uint32_t clock_kind;     /* enum msc_clock_kind */
    uint32_t state;          /* enum msc_state, updated in place */
    int32_t end_signal;
    uint32_t nblocks;        /* blocks allocated so far */
    uint64_t tick_init;      /* calibration pair at MPI_Init */
    uint64_t ns_init;
    uint64_t tick_cal;       /* second pair after a short spin: a frequency */
    uint64_t ns_cal;         /* estimate for traces that never reach the end */
    uint64_t tick_end;       /* pair at MPI_Finalize, fatal signal or abort */
    uint64_t ns_end;
    int64_t offset_init_ns;  /* this rank's clock minus rank 0's, at init */
    int64_t offset_end_ns;   /* same at finalize (0 when not measured) */
    uint64_t offset_init_at_ns; /* local ns at which the offsets were measured */
    uint64_t offset_end_at_ns;
    int64_t sync_rtt_init_ns;   /* best round trip of the offset measurement */
    int64_t sync_rtt_end_ns;    /* (0: same host as rank 0, no measurement) */
    uint64_t dropped;        /* events lost: thread or request tables full */
    char hostname[64];
    char boot_id[40];
    uint64_t writer_cpu_ns;  /* CPU time of the block writer thread (writer.c), for bench/ */
    uint32_t writer_blocks;  /* blocks it copied */
    uint32_t blocks_sealed;  /* 1: it sealed them (MPISCOPE_BLOCK_CRC, default on) */
    uint32_t sealed;         /* MSC_SEALED_MAGIC once MPI_Finalize sealed the header */
    uint32_t crc;            /* CRC-32C of the header's bytes before `sealed` */
    /* Where the rank ran, for naming oversubscription: after the CRC so that files of
     * format 6 without them (zeros here: unknown) and with them read alike. */
    uint32_t cpus_online;    /* sysconf(_SC_NPROCESSORS_ONLN) at MPI_Init */
    uint32_t cpus_allowed;   /* CPUs in the rank's affinity mask at MPI_Init */
    uint64_t cpu_mask[4];    /* that mask's CPUs 0-255 (hosts of more: the counts only) */
    char mpi_library[160];   /* first line of MPI_Get_library_version: the MPI that ran */
    uint32_t reserved;       /* 0 */
    /* CRC-32C of the bytes from cpus_online to here, set where `crc` is; 0 in files written
     * before it (and by ranks that never sealed their header): not checked */
    uint32_t tail_crc;
};
_Static_assert(sizeof(struct msc_file_header) <= MSC_HEADER_PAGE, "file header fits a page");

/* Communicator/window definitions: appended to rank-N.comms with write(2). */
enum msc_comm_kind { MSC_COMM_INTRA = 0, MSC_COMM_INTER = 1, MSC_COMM_WIN = 2 };

struct msc_commdef {
    uint32_t magic;
    uint16_t id;          /* rank-local id used in records */
    uint16_t kind;        /* enum msc_comm_kind */
    uint64_t gid;         /* identical on every member rank */
    uint32_t size;        /* members of the (local) group */
    uint32_t remote_size; /* members of the remote group (intercommunicators) */
    int32_t my_rank;      /* this rank's rank in the communicator */
    uint32_t crc;         /* CRC-32C of the definition and its ranks, with crc = 0 (format 5 on) */
    /* followed by int32 world ranks: size local, then remote_size remote */
};
_Static_assert(sizeof(struct msc_commdef) == 32, "commdef size");

#endif
