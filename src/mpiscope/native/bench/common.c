/* See common.h. */
#define _GNU_SOURCE
#include "common.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int emit_rank = -1;   /* rank in the benchmark communicator; 0 prints */

/* ---- IMB's iteration policy -------------------------------------------- */

static int imin(int a, int b) { return a < b ? a : b; }

int msc_select_n_sample(const struct msc_settings *s, long size, int size_index, int *n_prev,
                        msc_bench_fn fn, void *ctx, MPI_Comm comm)
{
    /* helper_IMB_functions.h, IMB_init_buffers_iter, iter_policy dynamic. */
    int selected = s->msgspersample;
    if (size > 0) {
        long by_volume = MSC_OVERALL_VOL / size;
        selected = by_volume < 1 ? 1 : (int)(by_volume < selected ? by_volume : selected);
    }
    if (size_index == 0) *n_prev = s->msgspersample;

    /* one repetition, then enough for about a second, as IMB does */
    double mine = fn(ctx, 1), t;
    MPI_Allreduce(&mine, &t, 1, MPI_DOUBLE, MPI_MAX, comm);
    int rep_test = 1, acc_rep_test;
    if (t < 1.0 / MSC_MSGSPERSAMPLE) rep_test = MSC_MSGSPERSAMPLE;
    else if (t < 1.0) rep_test = (int)(1.0 / t + 0.5);
    MPI_Allreduce(&rep_test, &acc_rep_test, 1, MPI_INT, MPI_MAX, comm);
    int n = imin(selected, acc_rep_test);
    if (n > 1) {
        mine = fn(ctx, n);
        MPI_Allreduce(&mine, &t, 1, MPI_DOUBLE, MPI_MAX, comm);
    }
    /* secs_per_sample cap; counts never grow with the message size */
    float val = (float)(1.0 + s->secs_per_sample / t);
    int t_sample = (t > 1e-8 && val <= (float)0x7fffffff) ? (int)val : selected;
    n = imin(selected, imin(*n_prev, t_sample));
    MPI_Bcast(&n, 1, MPI_INT, 0, comm);
    *n_prev = n;
    return n;
}

int msc_warmup_count(int n_sample)
{
    int n = n_sample / MSC_WARMUP_PERCENT;
    if (n < MSC_MIN_WARMUP_ITERS) n = imin(MSC_MIN_WARMUP_ITERS, n_sample);
    return n;
}

void msc_barriers(MPI_Comm comm, int n)
{
    for (int i = 0; i < n; i++) MPI_Barrier(comm);
}

/* ---- command line ------------------------------------------------------- */

void msc_die(const char *message)
{
    fprintf(stderr, "mpiscope bench: %s\n", message);
    MPI_Abort(MPI_COMM_WORLD, 2);
    exit(2);
}

void *msc_alloc(size_t bytes)
{
    void *p = NULL;
    if (posix_memalign(&p, 64, bytes ? bytes : 64) != 0) msc_die("out of memory");
    memset(p, 0, bytes ? bytes : 64);
    return p;
}

static long parse_long(const char *text, long lo, long hi, const char *what)
{
    char *end = NULL;
    long v = strtol(text, &end, 10);
    if (!end || *end || v < lo || v > hi) msc_die(what);
    return v;
}

void msc_parse_args(int argc, char **argv, struct msc_settings *s)
{
    memset(s, 0, sizeof(*s));
    s->msgspersample = MSC_MSGSPERSAMPLE;
    s->secs_per_sample = MSC_SECS_PER_SAMPLE;
    s->kernel_size = 10;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) msc_die("missing value after the last option");
        if (!strcmp(a, "--ops")) {
            snprintf(s->ops, sizeof(s->ops), "%s", v);
        } else if (!strcmp(a, "--sizes")) {
            char buf[1024], *save = NULL;
            snprintf(buf, sizeof(buf), "%s", v);
            for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
                if (s->nsizes == MSC_MAX_SIZES) msc_die("too many sizes");
                s->sizes[s->nsizes++] = parse_long(tok, 0, 1L << 30, "sizes must be 0 .. 2^30 bytes");
            }
        } else if (!strcmp(a, "--iter")) {
            s->msgspersample = (int)parse_long(v, 1, 100000000, "--iter must be >= 1");
        } else if (!strcmp(a, "--time")) {
            s->secs_per_sample = atof(v);
            if (!(s->secs_per_sample > 0)) msc_die("--time must be > 0");
        } else if (!strcmp(a, "--kernel-size")) {
            s->kernel_size = (int)parse_long(v, 1, 4096, "--kernel-size must be 1 .. 4096");
        } else if (!strcmp(a, "--test-calls")) {
            s->test_every = (int)parse_long(v, 0, 1000000000, "--test-calls must be >= 0");
        } else {
            msc_die("unknown option");
        }
        i++;
    }
    if (!s->ops[0] || !s->nsizes) msc_die("--ops and --sizes are required");
}

int msc_op_selected(const struct msc_settings *s, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = s->ops; (p = strstr(p, name)) != NULL; p += n) {
        int starts = p == s->ops || p[-1] == ',';
        int ends = p[n] == '\0' || p[n] == ',';
        if (starts && ends) return 1;
    }
    return 0;
}

int msc_sizes_in_units(const struct msc_settings *s, long unit, long *out)
{
    int n = 0;
    for (int i = 0; i < s->nsizes; i++) {
        long size = (s->sizes[i] + unit - 1) / unit * unit;
        if (n == 0 || out[n - 1] != size) out[n++] = size;
    }
    return n;
}

/* ---- output ------------------------------------------------------------- */

static void json_string(const char *str)
{
    putchar('"');
    for (const unsigned char *c = (const unsigned char *)str; *c; c++) {
        if (*c == '"' || *c == '\\') printf("\\%c", *c);
        else if (*c == '\n') printf("\\n");
        else if (*c >= 0x20) putchar(*c);
    }
    putchar('"');
}

static void json_double(double v)
{
    if (isfinite(v)) printf("%.17g", v);
    else printf("null");
}

void msc_emit_begin(const char *kind)
{
    if (emit_rank == 0) printf("@mpiscope {\"kind\": \"%s\"", kind);
}

void msc_emit_str(const char *key, const char *value)
{
    if (emit_rank != 0) return;
    printf(", \"%s\": ", key);
    json_string(value);
}

void msc_emit_long(const char *key, long value)
{
    if (emit_rank == 0) printf(", \"%s\": %ld", key, value);
}

void msc_emit_double(const char *key, double value)
{
    if (emit_rank != 0) return;
    printf(", \"%s\": ", key);
    json_double(value);
}

void msc_emit_gathered(MPI_Comm comm, const char *key, double mine)
{
    int size;
    MPI_Comm_size(comm, &size);
    double *all = emit_rank == 0 ? msc_alloc((size_t)size * sizeof(double)) : NULL;
    MPI_Gather(&mine, 1, MPI_DOUBLE, all, 1, MPI_DOUBLE, 0, comm);
    if (emit_rank != 0) return;
    printf(", \"%s\": [", key);
    for (int r = 0; r < size; r++) {
        if (r) printf(", ");
        json_double(all[r]);
    }
    printf("]");
    free(all);
}

void msc_emit_end(void)
{
    if (emit_rank != 0) return;
    printf("}\n");
    fflush(stdout);
}

void msc_emit_header(MPI_Comm comm, const char *program, const struct msc_settings *s)
{
    int size, provided, len;
    char version[MPI_MAX_LIBRARY_VERSION_STRING];
    char name[MPI_MAX_PROCESSOR_NAME] = {0};
    MPI_Comm_rank(comm, &emit_rank);
    MPI_Comm_size(comm, &size);
    MPI_Query_thread(&provided);
    MPI_Get_library_version(version, &len);
    MPI_Get_processor_name(name, &len);
    /* per-host rank counts and online CPUs: the Python side warns when ranks
     * plus progress threads outnumber the cores */
    double cpus = (double)sysconf(_SC_NPROCESSORS_ONLN);
    char *names = emit_rank == 0 ? msc_alloc((size_t)size * MPI_MAX_PROCESSOR_NAME) : NULL;
    double *all_cpus = emit_rank == 0 ? msc_alloc((size_t)size * sizeof(double)) : NULL;
    MPI_Gather(name, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, names, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, 0, comm);
    MPI_Gather(&cpus, 1, MPI_DOUBLE, all_cpus, 1, MPI_DOUBLE, 0, comm);
    msc_emit_begin("header");
    msc_emit_str("program", program);
    msc_emit_long("ranks", size);
    msc_emit_str("library_version", version);
    msc_emit_long("thread_level", provided);
    msc_emit_long("kernel_size", s->kernel_size);
    msc_emit_double("kernel_mflops", msc_kernel_mflops());
    msc_emit_double("kernel_reps_per_sec", msc_kernel_reps_per_sec());
    msc_emit_long("test_calls", s->test_every);
    if (emit_rank == 0) {
        printf(", \"hosts\": [");
        int first = 1;
        for (int r = 0; r < size; r++) {
            const char *h = names + (size_t)r * MPI_MAX_PROCESSOR_NAME;
            int seen = 0, count = 0;
            for (int q = 0; q < size; q++) {
                const char *o = names + (size_t)q * MPI_MAX_PROCESSOR_NAME;
                if (!strcmp(h, o)) {
                    seen |= q < r;
                    count++;
                }
            }
            if (seen) continue;
            printf("%s{\"name\": ", first ? "" : ", ");
            json_string(h);
            printf(", \"ranks\": %d, \"cpus\": %.0f}", count, all_cpus[r]);
            first = 0;
        }
        printf("]");
        free(names);
        free(all_cpus);
    }
    msc_emit_end();
}
