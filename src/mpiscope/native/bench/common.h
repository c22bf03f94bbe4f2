/* Shared parts of the IMB-compatible benchmark programs (overlap, rma):
 * IMB's CPU_Exploit kernel, IMB's iteration policy, argument parsing and the
 * line protocol the Python side reads.
 *
 * Everything here follows the Intel MPI Benchmarks' source (IMB 2021+,
 * src_c/IMB_cpu_exploit.c, src_cpp/helpers/helper_IMB_functions.h,
 * src_c/IMB_warm_up.c, src_c/IMB_settings.h), because the numbers are only
 * comparable with IMB's when the procedure is the same (mpiscope SPEC §6). */
#ifndef MSC_BENCH_COMMON_H
#define MSC_BENCH_COMMON_H

#include <mpi.h>
#include <stddef.h>

/* IMB_settings.h */
#define MSC_N_BARR 2                          /* barriers before every timed loop */
#define MSC_MSGSPERSAMPLE 1000                /* max repetitions per size */
#define MSC_OVERALL_VOL (40 * 1048576)        /* repetitions <= OVERALL_VOL / size */
#define MSC_SECS_PER_SAMPLE 10.0              /* dynamic policy: seconds per size */
#define MSC_WARMUP_PERCENT 10
#define MSC_MIN_WARMUP_ITERS 10
#define MSC_MAX_SIZES 64

/* Run-wide settings from the command line (same on every rank). */
struct msc_settings {
    int msgspersample;          /* IMB -iter: repetitions per size at most */
    double secs_per_sample;     /* IMB -time: dynamic policy's time budget per size */
    int kernel_size;            /* CPU_Exploit matrix order (IMB: 10) */
    int test_every;             /* MPI_Test every K kernel repetitions (0: never) */
    int nsizes;
    long sizes[MSC_MAX_SIZES];
    char ops[512];              /* comma-separated operation names */
};

/* One benchmark body: runs n_sample repetitions and returns this rank's
 * "time[0]" (IMB: the value the dynamic iteration policy looks at). */
typedef double (*msc_bench_fn)(void *ctx, int n_sample);

/* CPU_Exploit (IMB_cpu_exploit.c): a repeated single-precision mat-vec. */
void msc_kernel_setup(int order);
double msc_kernel_mflops(void);
double msc_kernel_reps_per_sec(void);
/* IMB's initialize=1 call: sets the repetition count for target_secs, runs it
 * once and returns the seconds it took (IMB's tCPU). */
double msc_kernel_init(double target_secs);
/* IMB's initialize=0 call. With test_every > 0 and *req active, MPI_Test is
 * called every test_every repetitions until it completes; the time spent in
 * MPI_Test is added to *t_test. */
void msc_kernel_run(MPI_Request *req, int test_every, double *t_test);

/* IMB's repetition count for one size (dynamic policy, IMB_init_buffers_iter):
 * size_index 0 (or a size-less benchmark) restarts the monotone cap. */
int msc_select_n_sample(const struct msc_settings *s, long size, int size_index, int *n_prev,
                        msc_bench_fn fn, void *ctx, MPI_Comm comm);
/* IMB_warm_up.c: n/10 repetitions, at least min(10, n). */
int msc_warmup_count(int n_sample);
void msc_barriers(MPI_Comm comm, int n);

/* Command line: --ops A,B --sizes 0,1,2 --iter N --time S --kernel-size K
 * --test-calls K. Exits through MPI_Abort with a message on bad input (the
 * Python side validates first; this only guards direct use). */
void msc_parse_args(int argc, char **argv, struct msc_settings *s);
int msc_op_selected(const struct msc_settings *s, const char *name);
/* The sizes one operation runs: rounded up to whole elements of `unit` bytes
 * with duplicates dropped, as IMB does for reductions (unit_size); returns
 * how many were written to out. */
int msc_sizes_in_units(const struct msc_settings *s, long unit, long *out);

/* Output: rank 0 writes one "@mpiscope {json}" line per record to stdout. */
void msc_emit_header(MPI_Comm comm, const char *program, const struct msc_settings *s);
void msc_emit_begin(const char *kind);
void msc_emit_str(const char *key, const char *value);
void msc_emit_long(const char *key, long value);
void msc_emit_double(const char *key, double value);
/* Gathers one double per rank to rank 0 and emits them as a list. */
void msc_emit_gathered(MPI_Comm comm, const char *key, double mine);
void msc_emit_end(void);
void msc_die(const char *message);

void *msc_alloc(size_t bytes);

#endif
