/* The sparse product of 000 §5.2 (SPEC §5): C = A x A with A in CCS (column
 * pointer, row index, value). For each row i the root extracts row i of A
 * (slow in CCS: a binary search in every column) and broadcasts it; every
 * other process multiplies it with its own contiguous range of columns (a
 * merge of the row with each column). Rank 0 is the root.
 *
 * The matrix: order N, non-zero ratio R, column slope C. Column i (1-based)
 * holds NZ(i) = C NZ(N/2) + (i - 1)(1 - C) NZ(N/2) / ((N/2) - 1) non-zeros up
 * to the middle column, symmetric after it, at rows drawn from a generator
 * seeded with (seed, column); NZ(N/2) = 2 R N / (1 + C) makes the total R N^2.
 *
 * Real runs do the arithmetic. Simulated runs (MSC_SIMULATED) spend the
 * time the same steps would take: a merge step 2.7 ns, a search step 10 ns,
 * from 000 Table 3 (N = 4000 and 14000, 8 processes: 1261 and 14640 us of
 * work per row are ~370 million merge steps a second; 64 processes wait
 * ~430 and ~1480 us per row for the root's extraction).
 *
 * Per variant and run, rank 0 prints the per-row means over the ranks of the
 * work time (extraction or multiplication), the MPI_Bcast time and their sum.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bcast_exp.h"

#define MERGE_STEP_S 2.7e-9
#define SEARCH_STEP_S 10e-9

struct matrix {
    int n;
    int *nz;           /* non-zeros of each column */
    int *rowcount;     /* non-zeros of each row */
    long *colptr;      /* CCS, real runs only: the columns this rank needs */
    int *rowidx;
    double *val;
};

static uint64_t mix(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static int column_nz(const struct exp_sparse *sp, int col) /* col 1-based */
{
    int n = sp->n, half = n / 2;
    double z = 2.0 * sp->density * n / (1.0 + sp->slope);
    int i = col <= half ? col : n + 1 - col;
    double nz = half > 1 ? sp->slope * z + (i - 1) * (1.0 - sp->slope) * z / (half - 1) : z;
    int v = (int)lround(nz);
    return v < 0 ? 0 : v > n ? n : v;
}

static int cmp_int(const void *a, const void *b)
{
    return *(const int *)a - *(const int *)b;
}

/* The sorted row indices of column j (0-based): Floyd's sampling of nz distinct rows. */
static void column_rows(const struct exp_sparse *sp, int j, int nz, int *out, unsigned char *seen)
{
    uint64_t s = mix(((uint64_t)sp->seed << 32) ^ (uint64_t)j);
    int k = 0;
    for (int t = sp->n - nz; t < sp->n; t++) {
        s = mix(s + 0x9e3779b97f4a7c15ull);
        int r = (int)(s % (uint64_t)(t + 1));
        if (seen[r]) r = t;
        seen[r] = 1;
        out[k++] = r;
    }
    for (int i = 0; i < k; i++) seen[out[i]] = 0;
    qsort(out, (size_t)k, sizeof(int), cmp_int);
}

/* Column counts everywhere; row counts from rank 0 (it draws every column);
 * in real runs each rank keeps the columns it works on (rank 0: all). */
static void build(const struct exp_sparse *sp, int lo, int hi, struct matrix *m)
{
    int n = sp->n;
    m->n = n;
    m->nz = malloc(sizeof(int) * (size_t)n);
    m->rowcount = calloc((size_t)n, sizeof(int));
    for (int j = 0; j < n; j++) m->nz[j] = column_nz(sp, j + 1);
    unsigned char *seen = calloc((size_t)n, 1);
    int *rows = malloc(sizeof(int) * (size_t)n);
#ifndef MSC_SIMULATED
    long total = 0;
    for (int j = lo; j < hi; j++) total += m->nz[j];
    m->colptr = malloc(sizeof(long) * (size_t)(n + 1));
    m->rowidx = malloc(sizeof(int) * (size_t)(total ? total : 1));
    m->val = malloc(sizeof(double) * (size_t)(total ? total : 1));
    long at = 0;
    for (int j = 0; j <= n; j++) {
        m->colptr[j] = at;
        if (j < lo || j >= hi || j == n) continue;
        column_rows(sp, j, m->nz[j], m->rowidx + at, seen);
        for (int k = 0; k < m->nz[j]; k++) m->val[at + k] = 1.0 + (double)((j + k) % 5);
        at += m->nz[j];
    }
#else
    (void)lo;
    (void)hi;
#endif
    if (exp_rank == 0)
        for (int j = 0; j < n; j++) {
            column_rows(sp, j, m->nz[j], rows, seen);
            for (int k = 0; k < m->nz[j]; k++) m->rowcount[rows[k]]++;
        }
    MPI_Bcast(m->rowcount, n, MPI_INT, 0, MPI_COMM_WORLD);
    free(rows);
    free(seen);
}

struct entry {
    int32_t col;
    int32_t pad;
    double val;
};

/* Root: row i of A, by a binary search in each column. */
static void extract(const struct matrix *m, int i, struct entry *row)
{
    int k = 0;
#ifdef MSC_SIMULATED
    double steps = 0;
    for (int j = 0; j < m->n; j++) steps += ceil(log2((double)m->nz[j] + 1));
    exp_spend(steps * SEARCH_STEP_S);
    (void)row;
    (void)i;
    (void)k;
#else
    for (int j = 0; j < m->n; j++) {
        const int *r = m->rowidx + m->colptr[j];
        int lo = 0, hi = m->nz[j];
        while (lo < hi) {
            int mid = (lo + hi) / 2;
            if (r[mid] < i) lo = mid + 1;
            else hi = mid;
        }
        if (lo < m->nz[j] && r[lo] == i) row[k++] = (struct entry){j, 0, m->val[m->colptr[j] + lo]};
    }
#endif
}

/* Worker: row . column j for each of its columns (row i of C in its range). */
static double multiply(const struct matrix *m, int i, const struct entry *row, int lo, int hi)
{
    double sum = 0;
#ifdef MSC_SIMULATED
    double steps = 0;
    for (int j = lo; j < hi; j++) steps += m->rowcount[i] + m->nz[j];
    exp_spend(steps * MERGE_STEP_S);
    (void)row;
#else
    int len = m->rowcount[i];
    for (int j = lo; j < hi; j++) {
        const int *r = m->rowidx + m->colptr[j];
        const double *v = m->val + m->colptr[j];
        double c = 0;
        for (int a = 0, b = 0; a < len && b < m->nz[j];) {
            if (row[a].col < r[b]) a++;
            else if (row[a].col > r[b]) b++;
            else c += row[a++].val * v[b++];
        }
        sum += c;
    }
#endif
    return sum;
}

/* Ideal (000: "the best static virtual-rank assignment"): the lighter a
 * worker's share, the earlier its position (most sends, then shallowest). */
static int pos_cmp_size;
static int pos_cmp(const void *x, const void *y)
{
    int a = *(const int *)x, b = *(const int *)y;
    int sa = msc_bc_sends(a, pos_cmp_size), sb = msc_bc_sends(b, pos_cmp_size);
    if (sa != sb) return sb - sa;
    int da = msc_bc_depth(a), db = msc_bc_depth(b);
    return da != db ? da - db : a - b;
}

static const double *work_of;
static int work_cmp(const void *x, const void *y)
{
    double a = work_of[*(const int *)x], b = work_of[*(const int *)y];
    return a < b ? -1 : a > b ? 1 : *(const int *)x - *(const int *)y;
}

static void ideal_table(const struct matrix *m, int workers, int *vr)
{
    int size = workers + 1;
    double *work = calloc((size_t)size, sizeof(double));
    int *pos = malloc(sizeof(int) * (size_t)size), *who = malloc(sizeof(int) * (size_t)size);
    for (int w = 1; w < size; w++) {
        int lo = (int)((long)m->n * (w - 1) / workers), hi = (int)((long)m->n * w / workers);
        for (int j = lo; j < hi; j++) work[w] += m->nz[j];
        pos[w - 1] = w;
        who[w - 1] = w;
    }
    pos_cmp_size = size;
    qsort(pos, (size_t)workers, sizeof(int), pos_cmp);
    work_of = work;
    qsort(who, (size_t)workers, sizeof(int), work_cmp);
    vr[0] = 0;
    for (int k = 0; k < workers; k++) vr[who[k]] = pos[k];
    free(work);
    free(pos);
    free(who);
}

void exp_sparse_run(const struct exp_sparse *sp, int nv, const int *variants)
{
    int workers = exp_size - 1;
    if (workers < 1) exp_fail("the sparse product needs at least", "2 processes");
    int lo = exp_rank == 0 ? 0 : (int)((long)sp->n * (exp_rank - 1) / workers);
    int hi = exp_rank == 0 ? sp->n : (int)((long)sp->n * exp_rank / workers);
    struct matrix m = {0};
    build(sp, lo, hi, &m);
    int maxrow = 0;
    for (int i = 0; i < sp->n; i++) maxrow = m.rowcount[i] > maxrow ? m.rowcount[i] : maxrow;
    struct entry *row = exp_buffer((long)sizeof(struct entry) * (maxrow + 1));
    int *vr = malloc(sizeof(int) * (size_t)exp_size);
    ideal_table(&m, workers, vr);
    double check = 0;
    for (int run = 0; run < sp->runs; run++)
        for (int v = 0; v < nv; v++) {
            MPI_Comm comm = exp_open(variants[v], variants[v] == V_IDEAL ? vr : NULL);
            double work = 0, bcast = 0;
            PMPI_Barrier(comm);
            for (int i = 0; i < sp->n; i++) {
                double t0 = PMPI_Wtime();
                if (exp_rank == 0) extract(&m, i, row);
                double t1 = PMPI_Wtime();
                exp_bcast(variants[v], row, (int)sizeof(struct entry) * m.rowcount[i], comm);
                double t2 = PMPI_Wtime();
                if (exp_rank != 0) check += multiply(&m, i, row, lo, hi);
                double t3 = PMPI_Wtime();
                work += (t1 - t0) + (t3 - t2);
                bcast += t2 - t1;
            }
            uint64_t swaps, undos;
            exp_close(variants[v], comm, &swaps, &undos);
            double mine[2] = {work / sp->n, bcast / sp->n}, sum[2] = {0, 0};
            MPI_Reduce(mine, sum, 2, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
            if (exp_rank == 0)
                printf("@mpiscope {\"experiment\": \"sparse\", \"variant\": \"%s\", \"run\": %d, \"n\": %d, "
                       "\"density\": %g, \"slope\": %g, \"work_s\": %.9g, \"bcast_s\": %.9g, \"total_s\": %.9g, "
                       "\"swaps\": %llu, \"undos\": %llu}\n",
                       exp_variant_name(variants[v]), run, sp->n, sp->density, sp->slope, sum[0] / exp_size,
                       sum[1] / exp_size, (sum[0] + sum[1]) / exp_size, (unsigned long long)swaps,
                       (unsigned long long)undos);
            fflush(stdout);
        }
    if (check < 0) printf("# %g\n", check); /* keeps the products from being optimised away */
    exp_buffer_free(row);
    free(vr);
    free(m.nz);
    free(m.rowcount);
    free(m.colptr);
    free(m.rowidx);
    free(m.val);
}
