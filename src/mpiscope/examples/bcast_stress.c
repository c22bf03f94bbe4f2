/* A seeded stress test of MPI_Bcast; run it under mpiscope run --bcast adaptive.
 *
 * usage: bcast_stress SEED ITERS [MAXBYTES] [THREADS]
 *
 * Every rank draws the same choices from SEED for each broadcast: the
 * communicator (MPI_COMM_WORLD, a duplicate, two splits, and one made and
 * another freed every 8 broadcasts), the root, the datatype (basic, or
 * derived with gaps: vector, struct with a hole, indexed, resized) and the
 * byte count (mostly small, some up to MAXBYTES, default 1 MiB). The root
 * fills its buffer with a pattern of (broadcast, root), the others with a
 * pattern of their own; afterwards every rank checks each byte the datatype
 * covers and that the gaps between them were left alone. Around each
 * broadcast the ranks of its communicator exchange messages of their own
 * (MPI_ANY_SOURCE, MPI_ANY_TAG receives pending during the broadcast). With
 * THREADS > 1 (MPI_THREAD_MULTIPLE) each thread broadcasts on a communicator
 * of its own at the same time.
 *
 * Rank 0 prints "bcast_stress: N broadcasts, M mismatches"; exit code 1 on a
 * mismatch.
 */
#include <mpi.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NTYPES 7
#define POOL 5

static int world_rank, world_size;
static long maxbytes = 1 << 20;

static uint64_t next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static unsigned char pattern(uint64_t bcast, int who, size_t i)
{
    return (unsigned char)((bcast * 131u + (uint64_t)who * 31u + i * 7u + (i >> 8)) & 0xff);
}

struct elem {
    MPI_Datatype type;
    MPI_Aint extent;
    int size;
    unsigned char *mask; /* bytes of one element the type covers */
};
static struct elem types[NTYPES];

static void describe(struct elem *e, MPI_Datatype t)
{
    MPI_Aint lb;
    e->type = t;
    MPI_Type_get_extent(t, &lb, &e->extent);
    MPI_Type_size(t, &e->size);
    e->mask = calloc((size_t)e->extent, 1);
    unsigned char *ones = malloc((size_t)e->size);
    memset(ones, 0xff, (size_t)e->size);
    int pos = 0;
    MPI_Unpack(ones, e->size, &pos, e->mask, 1, t, MPI_COMM_SELF);
    free(ones);
}

static void make_types(void)
{
    MPI_Datatype v, s, ix, rs;
    MPI_Type_vector(2, 3, 5, MPI_INT, &v);                        /* 2 blocks of 3 ints, stride 5 */
    int bl[2] = {1, 1};
    MPI_Aint disp[2] = {0, 8};
    MPI_Datatype st[2] = {MPI_CHAR, MPI_DOUBLE};
    MPI_Type_create_struct(2, bl, disp, st, &s);                   /* char, 7-byte hole, double */
    int ibl[2] = {1, 3}, idisp[2] = {0, 5};
    MPI_Type_indexed(2, ibl, idisp, MPI_SHORT, &ix);
    MPI_Type_create_resized(MPI_INT, 0, 12, &rs);                  /* an int every 12 bytes */
    MPI_Datatype all[NTYPES] = {MPI_BYTE, MPI_INT, MPI_DOUBLE, v, s, ix, rs};
    for (int i = 3; i < NTYPES; i++) MPI_Type_commit(&all[i]);
    for (int i = 0; i < NTYPES; i++) describe(&types[i], all[i]);
}

/* One broadcast on comm with the choices drawn from rng (the same on every
 * member); returns the mismatching bytes seen here. */
static long one_bcast(MPI_Comm comm, uint64_t *rng, uint64_t id)
{
    int n, me;
    MPI_Comm_size(comm, &n);
    MPI_Comm_rank(comm, &me);
    int root = (int)(next(rng) % (uint64_t)n);
    uint64_t t = next(rng) % NTYPES, pick = next(rng) % 100, bytes;
    if (pick < 5) bytes = 0;
    else if (pick < 70) bytes = next(rng) % 4096;
    else if (pick < 92) bytes = next(rng) % (maxbytes < (1 << 20) ? (uint64_t)maxbytes : (1u << 20));
    else bytes = next(rng) % (uint64_t)maxbytes + 1;
    if (id == 0 && maxbytes > (1 << 20)) bytes = (uint64_t)maxbytes; /* the largest size, once */
    /* past 1 MiB only basic types: a type with gaps would take up to 3x the memory */
    const struct elem *e = &types[bytes > (1u << 20) ? t % 3 : t];
    int count = (int)(bytes / (uint64_t)e->size);
    size_t len = (size_t)count * (size_t)e->extent;
    unsigned char *buf = malloc(len ? len : 1);
    for (size_t i = 0; i < len; i++) buf[i] = pattern(id, me == root ? -1 : me, i);
    /* user traffic on the same communicator, wildcard receives pending across the broadcast */
    int token = (int)(id * 1000 + (uint64_t)me), got = -1;
    MPI_Request rq[2];
    MPI_Irecv(&got, 1, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, comm, &rq[0]);
    MPI_Isend(&token, 1, MPI_INT, (me + 1) % n, 7, comm, &rq[1]);
    MPI_Bcast(buf, count, e->type, root, comm);
    MPI_Status st[2];
    MPI_Waitall(2, rq, st);
    long bad = 0;
    for (size_t i = 0; i < len; i++) {
        int covered = e->mask[i % (size_t)e->extent] != 0;
        bad += buf[i] != pattern(id, covered || me == root ? -1 : me, i);
    }
    int prev = (me + n - 1) % n;
    if (got != (int)(id * 1000 + (uint64_t)prev) || st[0].MPI_SOURCE != prev || st[0].MPI_TAG != 7) bad++;
    free(buf);
    return bad;
}

struct job {
    MPI_Comm comm;
    uint64_t seed;
    int iters;
    long bad, done;
};

static void *thread_loop(void *arg)
{
    struct job *j = arg;
    uint64_t rng = j->seed;
    for (int i = 0; i < j->iters; i++, j->done++) j->bad += one_bcast(j->comm, &rng, (uint64_t)i);
    return NULL;
}

/* The main loop: the communicator changes with the draws; every 8
 * broadcasts one is made (a split with drawn colours) and the oldest made
 * one freed, while other broadcasts are under way on the rest. */
static void pool_loop(uint64_t seed, int iters, long *bad, long *done)
{
    MPI_Comm pool[POOL];
    uint64_t rng = seed;
    pool[0] = MPI_COMM_WORLD;
    MPI_Comm_dup(MPI_COMM_WORLD, &pool[1]);
    MPI_Comm_split(MPI_COMM_WORLD, world_rank % 2, world_rank, &pool[2]);
    MPI_Comm_split(MPI_COMM_WORLD, world_rank % 3 == 0, world_size - world_rank, &pool[3]);
    MPI_Comm_dup(pool[2], &pool[4]);
    for (int i = 0; i < iters; i++, (*done)++) {
        if (i % 8 == 7) {
            uint64_t colours = next(&rng) % 3 + 1;
            MPI_Comm made;
            MPI_Comm_split(MPI_COMM_WORLD, (int)((uint64_t)world_rank % colours), -world_rank, &made);
            MPI_Comm_free(&pool[4]);
            pool[4] = made;
        }
        *bad += one_bcast(pool[next(&rng) % POOL], &rng, (uint64_t)i);
    }
    for (int c = 1; c < POOL; c++) MPI_Comm_free(&pool[c]);
}

int main(int argc, char **argv)
{
    int provided;
    uint64_t seed = argc > 1 ? strtoull(argv[1], NULL, 0) : 1;
    int iters = argc > 2 ? atoi(argv[2]) : 100;
    if (argc > 3) maxbytes = atol(argv[3]);
    int nthreads = argc > 4 ? atoi(argv[4]) : 1;
    MPI_Init_thread(&argc, &argv, nthreads > 1 ? MPI_THREAD_MULTIPLE : MPI_THREAD_SINGLE, &provided);
    if (nthreads > 1 && provided < MPI_THREAD_MULTIPLE) {
        fprintf(stderr, "bcast_stress: MPI_THREAD_MULTIPLE not provided\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world_size);
    make_types();
    long bad = 0, done = 0;
    if (nthreads > 1) {
        struct job *jobs = calloc((size_t)nthreads, sizeof *jobs);
        pthread_t *th = malloc(sizeof(pthread_t) * (size_t)nthreads);
        for (int t = 0; t < nthreads; t++) {
            jobs[t] = (struct job){MPI_COMM_NULL, seed * 1000 + (uint64_t)t, iters, 0, 0};
            if (t % 2) MPI_Comm_split(MPI_COMM_WORLD, 0, world_size - world_rank, &jobs[t].comm);
            else MPI_Comm_dup(MPI_COMM_WORLD, &jobs[t].comm);
        }
        for (int t = 0; t < nthreads; t++) pthread_create(&th[t], NULL, thread_loop, &jobs[t]);
        for (int t = 0; t < nthreads; t++) {
            pthread_join(th[t], NULL);
            bad += jobs[t].bad;
            done += jobs[t].done;
            MPI_Comm_free(&jobs[t].comm);
        }
        free(jobs);
        free(th);
    } else {
        pool_loop(seed, iters, &bad, &done);
    }
    long total_bad = 0, total_done = 0;
    MPI_Reduce(&bad, &total_bad, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    MPI_Reduce(&done, &total_done, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    if (world_rank == 0) printf("bcast_stress: %ld broadcasts, %ld mismatches\n", total_done, total_bad);
    for (int i = 3; i < NTYPES; i++) MPI_Type_free(&types[i].type);
    MPI_Finalize();
    return total_bad ? 1 : 0;
}
