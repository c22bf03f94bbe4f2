/* Communicators and windows: handles -> small ids, ranks -> world ranks.
 *
 * Handles are ints in MPICH and pointers in Open MPI; both become 64-bit keys
 * of one open-addressing table (comm and window handles never collide: they
 * are distinct objects). Entries are added under a mutex when a communicator
 * is created (rare); lookups on the event path are lock-free.
 *
 * Global ids: every member of a new communicator must name it the same way,
 * without extra communication. A collective creation is the k-th collective
 * call on its parent on every member, so (parent gid, k, world rank of the
 * new rank 0) identifies it; Comm_create_group, Comm_create_from_group and
 * Intercomm_create, which are not collective over a parent, use their tag and
 * member lists instead.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime.h"

#define HBITS 16
#define HSIZE (1u << HBITS)
#define COUNTERS 4096

struct hslot {
    uint64_t key;
    uint32_t id;
};

struct msc_comm msc_comms[65536];
int msc_comms_fd = -1;
static struct hslot htab[HSIZE];
static uint32_t next_id = 2; /* 0: MPI_COMM_WORLD, 1: MPI_COMM_SELF */
static pthread_mutex_t comm_lock = PTHREAD_MUTEX_INITIALIZER;
static MPI_Group world_group = MPI_GROUP_NULL;
static struct {
    uint64_t key;
    uint32_t count;
} counters[COUNTERS];

static uint64_t mix(uint64_t a, uint64_t b)
{
    /* splitmix64 finaliser over a combination: well spread 64-bit ids */
    uint64_t z = a * 0x9e3779b97f4a7c15ull + b + 0x632be59bd9b4e019ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static inline uint32_t slot_of(uint64_t key)
{
    return (uint32_t)((key * 0x9e3779b97f4a7c15ull) >> (64 - HBITS));
}

uint16_t msc_handle_lookup(uint64_t key)
{
    for (uint32_t i = 0, s = slot_of(key); i < HSIZE; i++, s = (s + 1) & (HSIZE - 1)) {
        uint64_t k = __atomic_load_n(&htab[s].key, __ATOMIC_ACQUIRE);
        if (k == key) return (uint16_t)__atomic_load_n(&htab[s].id, __ATOMIC_ACQUIRE);
        if (k == 0) break;
    }
    return MSC_COMM_UNKNOWN;
}

uint16_t msc_comm_known(MPI_Comm comm)
{
    if (comm == MPI_COMM_WORLD) return 0;
    if (comm == MPI_COMM_SELF) return 1;
    return msc_handle_lookup(MSC_KEY(comm));
}

uint16_t msc_win_known(MPI_Win win)
{
    return msc_handle_lookup(MSC_KEY(win));
}

/* Caller holds comm_lock. */
static void handle_set(uint64_t key, uint32_t id)
{
    for (uint32_t i = 0, s = slot_of(key); i < HSIZE; i++, s = (s + 1) & (HSIZE - 1)) {
        uint64_t k = htab[s].key;
        if (k == key || k == 0) {
            __atomic_store_n(&htab[s].id, id, __ATOMIC_RELEASE);
            __atomic_store_n(&htab[s].key, key, __ATOMIC_RELEASE);
            return;
        }
    }
}

void msc_comm_forget(MPI_Comm comm)
{
    if (comm == MPI_COMM_NULL || comm == MPI_COMM_WORLD || comm == MPI_COMM_SELF) return;
    pthread_mutex_lock(&comm_lock);
    if (msc_handle_lookup(MSC_KEY(comm)) != MSC_COMM_UNKNOWN) handle_set(MSC_KEY(comm), MSC_COMM_UNKNOWN);
    pthread_mutex_unlock(&comm_lock);
}

void msc_win_forget(MPI_Win win)
{
    if (win == MPI_WIN_NULL) return;
    pthread_mutex_lock(&comm_lock);
    if (msc_handle_lookup(MSC_KEY(win)) != MSC_COMM_UNKNOWN) handle_set(MSC_KEY(win), MSC_COMM_UNKNOWN);
    pthread_mutex_unlock(&comm_lock);
}

static uint32_t counter_next(uint64_t key)
{
    for (uint32_t i = 0, s = (uint32_t)(key % COUNTERS); i < COUNTERS; i++, s = (s + 1) % COUNTERS) {
        if (counters[s].key == key || counters[s].key == 0) {
            counters[s].key = key;
            return counters[s].count++;
        }
    }
    return 0;
}

static int32_t *translate(MPI_Group group, int32_t *n)
{
    int size = 0;
    PMPI_Group_size(group, &size);
    *n = size;
    int32_t *out = malloc(sizeof(int32_t) * (size_t)(size > 0 ? size : 1));
    int *in = malloc(sizeof(int) * (size_t)(size > 0 ? size : 1));
    if (!out || !in) {
        free(out);
        free(in);
        *n = 0;
        return NULL;
    }
    for (int i = 0; i < size; i++) in[i] = i;
    PMPI_Group_translate_ranks(group, size, in, world_group, out);
    for (int i = 0; i < size; i++)
        if (out[i] == MPI_UNDEFINED) out[i] = MSC_PEER_UNKNOWN;
    free(in);
    return out;
}

static uint64_t hash_ranks(const int32_t *ranks, int32_t n, uint64_t h)
{
    for (int32_t i = 0; i < n; i++) h = mix(h, (uint64_t)(uint32_t)ranks[i]);
    return h;
}

static void write_def(uint16_t id)
{
    const struct msc_comm *m = &msc_comms[id];
    if (msc_comms_fd < 0) return;
    size_t n = (size_t)m->size + (size_t)m->remote_size;
    size_t bytes = sizeof(struct msc_commdef) + n * sizeof(int32_t);
    char *buf = malloc(bytes);
    if (!buf) return;
    struct msc_commdef d = {MSC_COMMDEF_MAGIC, id, (uint16_t)m->kind, m->gid, (uint32_t)m->size,
                            (uint32_t)m->remote_size, m->my_rank, 0};
    memcpy(buf, &d, sizeof d);
    int32_t *ranks = (int32_t *)(buf + sizeof d);
    for (int32_t i = 0; i < m->size; i++) ranks[i] = m->ranks ? m->ranks[i] : i;
    if (m->remote_size) memcpy(ranks + m->size, m->remote, sizeof(int32_t) * (size_t)m->remote_size);
    d.crc = msc_crc32c(0, buf, bytes); /* over the definition with crc = 0 */
    memcpy(buf, &d, sizeof d);
    ssize_t w = write(msc_comms_fd, buf, bytes); /* O_APPEND: one record, whole */
    (void)w;
    free(buf);
}

/* Fill entry `id` from the groups of `comm`; caller holds comm_lock. */
static void describe(uint16_t id, MPI_Comm comm)
{
    struct msc_comm *m = &msc_comms[id];
    MPI_Group g;
    int inter = 0, topo = MPI_UNDEFINED;
    PMPI_Comm_test_inter(comm, &inter);
    PMPI_Comm_rank(comm, &m->my_rank);
    PMPI_Comm_group(comm, &g);
    m->ranks = translate(g, &m->size);
    PMPI_Group_free(&g);
    m->kind = inter ? MSC_COMM_INTER : MSC_COMM_INTRA;
    m->remote = NULL;
    m->remote_size = 0;
    if (inter) {
        PMPI_Comm_remote_group(comm, &g);
        m->remote = translate(g, &m->remote_size);
        PMPI_Group_free(&g);
    }
    m->outdeg = m->indeg = 0;
    m->null_nbrs = 0;
    if (!inter) PMPI_Topo_test(comm, &topo);
    if (topo == MPI_CART) {
        /* MPI-3.1 §7.6: per dimension the neighbour in the negative, then in the
         * positive direction, for sources and destinations alike; MPI_PROC_NULL
         * past a non-periodic border */
        int ndims = 0;
        PMPI_Cartdim_get(comm, &ndims);
        m->outdeg = m->indeg = 2 * ndims;
        for (int d = 0; d < ndims && 2 * d + 1 < 64; d++) {
            int below = MPI_PROC_NULL, above = MPI_PROC_NULL;
            PMPI_Cart_shift(comm, d, 1, &below, &above);
            m->null_nbrs |= (uint64_t)(below == MPI_PROC_NULL) << (2 * d) |
                            (uint64_t)(above == MPI_PROC_NULL) << (2 * d + 1);
        }
    } else if (topo == MPI_GRAPH) {
        PMPI_Graph_neighbors_count(comm, m->my_rank, &m->outdeg);
        m->indeg = m->outdeg; /* graph edges go both ways */
    } else if (topo == MPI_DIST_GRAPH) {
        int weighted = 0;
        PMPI_Dist_graph_neighbors_count(comm, &m->indeg, &m->outdeg, &weighted);
    }
}

static uint16_t new_id(void)
{
    if (next_id >= MSC_COMM_UNKNOWN) {
        __atomic_fetch_add(&msc_hdr->dropped, 1, __ATOMIC_RELAXED);
        return MSC_COMM_UNKNOWN;
    }
    uint16_t id = (uint16_t)next_id++;
    msc_comms[id].seq = 0;
    msc_comms[id].create_count = 0;
    return id;
}

static uint16_t publish(uint16_t id, uint64_t key)
{
    handle_set(key, id);
    write_def(id);
    return id;
}

void msc_comms_init(int rank, int size, MPI_Group world)
{
    world_group = world;
    struct msc_comm *w = &msc_comms[0], *s = &msc_comms[1];
    *w = (struct msc_comm){.gid = 1, .size = size, .my_rank = rank, .kind = MSC_COMM_INTRA};
    static int32_t self_rank;
    self_rank = rank;
    *s = (struct msc_comm){.gid = mix(2, (uint64_t)rank), .ranks = &self_rank, .size = 1,
                           .kind = MSC_COMM_INTRA};
    write_def(0);
    write_def(1);
}

/* The id of a communicator created inside another wrapped call that created it too, or
 * MSC_COMM_UNKNOWN: MPICH's Fortran MPI_CART_CREATE calls the C MPI_Cart_create, and both wrappers
 * see the new handle (a second entry, of a communicator no call used). A live handle names one
 * communicator (msc_comm_forget unbinds it when MPI_Comm_free is called); its members are compared
 * too, in case a handle was freed where no wrapper saw it (PMPI_Comm_free) and handed out again.
 * Caller holds comm_lock. */
static uint16_t seen(MPI_Comm newcomm, int pending)
{
    uint16_t id = msc_handle_lookup(MSC_KEY(newcomm));
    if (id == MSC_COMM_UNKNOWN || id < 2) return MSC_COMM_UNKNOWN;
    if (pending) return id; /* Comm_idup: not to be used before its request completes */
    const struct msc_comm *m = &msc_comms[id];
    int inter = 0;
    MPI_Group g;
    PMPI_Comm_test_inter(newcomm, &inter);
    if ((inter ? MSC_COMM_INTER : MSC_COMM_INTRA) != m->kind) return MSC_COMM_UNKNOWN;
    PMPI_Comm_group(newcomm, &g);
    int32_t n = 0;
    int32_t *ranks = translate(g, &n);
    PMPI_Group_free(&g);
    int same = ranks && m->ranks && n == m->size && memcmp(ranks, m->ranks, sizeof(int32_t) * (size_t)n) == 0;
    free(ranks);
    return same ? id : MSC_COMM_UNKNOWN;
}

uint16_t msc_comm_created(uint16_t parent, int32_t seq, MPI_Comm newcomm, int same_group)
{
    if (newcomm == MPI_COMM_NULL) return MSC_COMM_UNKNOWN;
    pthread_mutex_lock(&comm_lock);
    uint16_t id = seen(newcomm, same_group);
    if (id != MSC_COMM_UNKNOWN) {
        pthread_mutex_unlock(&comm_lock);
        return id;
    }
    id = new_id();
    if (id != MSC_COMM_UNKNOWN) {
        struct msc_comm *m = &msc_comms[id];
        const struct msc_comm *p = parent == MSC_COMM_UNKNOWN ? NULL : &msc_comms[parent];
        if (same_group && p) {
            /* Comm_idup: the new communicator may not be usable before the
             * request completes, but its group is the parent's. */
            size_t n = (size_t)p->size;
            m->ranks = malloc(sizeof(int32_t) * (n ? n : 1));
            for (size_t i = 0; m->ranks && i < n; i++) m->ranks[i] = p->ranks ? p->ranks[i] : (int32_t)i;
            m->size = p->size;
            m->my_rank = p->my_rank;
            m->kind = p->kind;
            m->remote = NULL;
            m->remote_size = 0;
            if (p->remote_size) {
                m->remote = malloc(sizeof(int32_t) * (size_t)p->remote_size);
                if (m->remote) memcpy(m->remote, p->remote, sizeof(int32_t) * (size_t)p->remote_size);
                m->remote_size = m->remote ? p->remote_size : 0;
            }
            m->outdeg = p->outdeg;
            m->indeg = p->indeg;
            m->null_nbrs = p->null_nbrs;
        } else {
            describe(id, newcomm);
        }
        /* The leader tells apart the communicators one call makes (Comm_split's
         * colours). The two sides of an intercommunicator must name it alike,
         * so there it is both groups' leaders, ordered. */
        int32_t leader = m->size > 0 && m->ranks ? m->ranks[0] : -1;
        uint64_t leaders = (uint64_t)(uint32_t)leader;
        if (m->kind == MSC_COMM_INTER && m->remote_size > 0 && m->remote) {
            int32_t other = m->remote[0];
            leaders = mix((uint64_t)(uint32_t)(leader < other ? leader : other),
                          (uint64_t)(uint32_t)(leader < other ? other : leader));
        }
        m->gid = mix(mix(p ? p->gid : 0, (uint64_t)(uint32_t)seq), leaders);
        publish(id, MSC_KEY(newcomm));
    }
    pthread_mutex_unlock(&comm_lock);
    return id;
}

/* A communicator whose members name it by what they all see of it (the key
 * key_of makes of its entry and seed) and by how often that key came before:
 * members create communicators with the same key in the same order. */
static uint16_t created_counted(MPI_Comm newcomm, uint64_t (*key_of)(const struct msc_comm *, uint64_t),
                                uint64_t seed)
{
    if (newcomm == MPI_COMM_NULL) return MSC_COMM_UNKNOWN;
    pthread_mutex_lock(&comm_lock);
    uint16_t id = seen(newcomm, 0);
    if (id != MSC_COMM_UNKNOWN) {
        pthread_mutex_unlock(&comm_lock);
        return id;
    }
    id = new_id();
    if (id != MSC_COMM_UNKNOWN) {
        describe(id, newcomm);
        uint64_t key = key_of(&msc_comms[id], seed);
        msc_comms[id].gid = mix(key, counter_next(key));
        publish(id, MSC_KEY(newcomm));
    }
    pthread_mutex_unlock(&comm_lock);
    return id;
}

static uint64_t members_key(const struct msc_comm *m, uint64_t seed)
{
    return hash_ranks(m->ranks, m->size, seed);
}

/* Both sides of an intercommunicator see the same two groups, in swapped
 * roles: order them. */
static uint64_t both_groups_key(const struct msc_comm *m, uint64_t tag)
{
    uint64_t a = hash_ranks(m->ranks, m->size, 0x1c), b = hash_ranks(m->remote, m->remote_size, 0x1c);
    return mix(mix(a < b ? a : b, a < b ? b : a), tag);
}

uint16_t msc_comm_created_group(uint16_t parent, int tag, MPI_Comm newcomm)
{
    uint64_t base = parent == MSC_COMM_UNKNOWN ? 0 : msc_comms[parent].gid;
    return created_counted(newcomm, members_key, mix(mix(base, 0xc6), (uint64_t)(uint32_t)tag));
}

/* MPI-4 Comm_create_from_group: collective over the group's members with the
 * same string tag. */
uint16_t msc_comm_created_from_group(const char *stringtag, MPI_Comm newcomm)
{
    uint64_t seed = 0xf6;
    for (const char *c = stringtag ? stringtag : ""; *c; c++) seed = mix(seed, (uint64_t)(unsigned char)*c);
    return created_counted(newcomm, members_key, seed);
}

/* MPI-4.1 Intercomm_create_from_groups: both groups call it with the same string tag. */
uint16_t msc_intercomm_created_from_groups(const char *stringtag, MPI_Comm newcomm)
{
    uint64_t seed = 0x1f6;
    for (const char *c = stringtag ? stringtag : ""; *c; c++) seed = mix(seed, (uint64_t)(unsigned char)*c);
    return created_counted(newcomm, both_groups_key, seed);
}

uint16_t msc_intercomm_created(MPI_Comm local, int local_leader, MPI_Comm peer_comm,
                               int remote_leader, int tag, MPI_Comm newcomm)
{
    (void)local;
    (void)local_leader;
    (void)peer_comm;
    (void)remote_leader;
    return created_counted(newcomm, both_groups_key, (uint64_t)(uint32_t)tag);
}

uint16_t msc_win_created(uint16_t comm, int32_t seq, MPI_Win win)
{
    if (win == MPI_WIN_NULL) return MSC_COMM_UNKNOWN;
    pthread_mutex_lock(&comm_lock);
    uint16_t id = new_id();
    if (id != MSC_COMM_UNKNOWN) {
        struct msc_comm *m = &msc_comms[id];
        MPI_Group g;
        PMPI_Win_get_group(win, &g);
        m->ranks = translate(g, &m->size);
        PMPI_Group_rank(g, &m->my_rank);
        PMPI_Group_free(&g);
        m->remote = NULL;
        m->remote_size = 0;
        m->outdeg = m->indeg = 0;
        m->null_nbrs = 0;
        m->kind = MSC_COMM_WIN;
        uint64_t base = comm == MSC_COMM_UNKNOWN ? 0 : msc_comms[comm].gid;
        m->gid = mix(mix(base, (uint64_t)(uint32_t)seq), 0x57494e);
        publish(id, MSC_KEY(win));
    }
    pthread_mutex_unlock(&comm_lock);
    return id;
}

/* A communicator created outside the wrapped calls (dynamic processes:
 * MPI_Comm_accept/connect, join, spawn; or a library that keeps its own),
 * registered at its first use: named by its members (both sides of an
 * intercommunicator see its two groups in swapped roles, so they are ordered,
 * as both_groups_key does) and by how often such a communicator came before,
 * as created_counted does: without the count, three accept/connect rounds
 * between the same ranks were one communicator whose collectives collided. */
uint16_t msc_comm_register_unknown(MPI_Comm comm)
{
    if (comm == MPI_COMM_NULL || !msc_tracking) return MSC_COMM_UNKNOWN;
    pthread_mutex_lock(&comm_lock);
    uint16_t id = msc_handle_lookup(MSC_KEY(comm));
    if (id == MSC_COMM_UNKNOWN && (id = new_id()) != MSC_COMM_UNKNOWN) {
        describe(id, comm);
        struct msc_comm *m = &msc_comms[id];
        uint64_t key = m->remote_size > 0 ? both_groups_key(m, 0xfeed) : members_key(m, 0xfeed);
        m->gid = mix(key, counter_next(key));
        publish(id, MSC_KEY(comm));
    }
    pthread_mutex_unlock(&comm_lock);
    return id;
}

uint16_t msc_win_register_unknown(MPI_Win win)
{
    if (win == MPI_WIN_NULL || !msc_tracking) return MSC_COMM_UNKNOWN;
    return msc_win_created(MSC_COMM_UNKNOWN, -1, win);
}
