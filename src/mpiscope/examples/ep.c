/* ep: embarrassingly parallel Gaussian deviates (NAS EP as shipped with JIAJIA, 003 §5, Fig. 10).
 *
 * usage: ep [--seconds T | --m M]        (default: T = 2)
 *
 * Each rank draws uniform pairs from its own random stream (xorshift64*, seeded by rank), keeps
 * those inside the unit circle and turns them into Gaussian deviates (Marsaglia's polar method),
 * summing them and counting them in ten square annuli, as NAS EP does. Nothing is communicated
 * until one MPI_Reduce at the end sums the counts and sums on rank 0: S-CAT's density view of EP
 * is blank except for a sliver at the end.
 *
 * --seconds T (the default) draws for T seconds on every rank (a fixed-time EP): the ranks reach
 * the reduction together even when they share cores with each other or with other jobs, where
 * the same work takes tens of percent longer on one rank than on another. --m M draws 2^M pairs
 * in all, split evenly (NAS EP's fixed size).
 *
 * Check: the fraction of pairs kept is pi/4 (within 5 standard deviations), and the mean of the
 * deviates is 0 (within 5 standard errors).
 */
#include <math.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static double uniform(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return (double)((*s * 2685821657736338717ULL) >> 11) * 0x1.0p-53;
}

enum { CHUNK = 1 << 14 };  /* pairs between two looks at the clock (about 0.5 ms) */

/* [0..9]: deviates per annulus, [10]: pairs kept, [11], [12]: sums of X and Y, [13]: pairs drawn */
static void draw(uint64_t *seed, long long pairs, double *acc)
{
    for (long long p = 0; p < pairs; p++) {
        double x = 2 * uniform(seed) - 1, y = 2 * uniform(seed) - 1, t = x * x + y * y;
        if (t > 1 || t == 0) continue;
        double f = sqrt(-2 * log(t) / t), gx = x * f, gy = y * f;
        double big = fmax(fabs(gx), fabs(gy));
        acc[big < 10 ? (int)big : 9] += 1;
        acc[10] += 1;
        acc[11] += gx;
        acc[12] += gy;
    }
    acc[13] += (double)pairs;
}

int main(int argc, char **argv)
{
    int size, rank, m = 0;
    double budget = 2.0;
    MPI_Init(&argc, &argv);
    double t0 = MPI_Wtime();
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--m") && i + 1 < argc) {
            m = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--seconds") && i + 1 < argc) {
            budget = atof(argv[++i]);
        } else {
            if (rank == 0) fprintf(stderr, "usage: ep [--seconds T | --m M]\n");
            MPI_Finalize();
            return 2;
        }
    }
    if (m < 0 || m > 50) m = 0;
    uint64_t seed = 0x9E3779B97F4A7C15ULL * (uint64_t)(rank + 1);
    double local[14] = {0}, global[14];
    if (m > 0) {
        long long total = 1LL << m;
        draw(&seed, total / size + (rank < total % size), local);
    } else {
        while (MPI_Wtime() - t0 < budget) draw(&seed, CHUNK, local);
    }
    double seconds = MPI_Wtime() - t0;
    MPI_Reduce(local, global, 14, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    int status = 0;
    if (rank == 0) {
        double total = global[13], kept = global[10], frac = kept / total, q = 0.78539816339744830962; /* pi/4 */
        double sd_frac = sqrt(q * (1 - q) / total), se_mean = 1 / sqrt(kept);
        double mean_x = global[11] / kept, mean_y = global[12] / kept;
        status = fabs(frac - q) < 5 * sd_frac && fabs(mean_x) < 5 * se_mean && fabs(mean_y) < 5 * se_mean ? 0 : 1;
        printf("ep: %.0f pairs on %d ranks in %.3f s (rank 0); kept %.0f (%.6f, pi/4 = %.6f); "
               "mean X %.2e, mean Y %.2e: %s\n", total, size, seconds, kept, frac, q, mean_x, mean_y,
               status ? "FAILED" : "OK");
        printf("ep: deviates per annulus:");
        for (int i = 0; i < 10; i++) printf(" %.0f", global[i]);
        printf("\n");
    }
    MPI_Finalize();
    return status;
}
