/* Replays per-rank action lists under SMPI: a recorded mpiscope trace, or a
 * communication pattern, run as real MPI calls on a simulated platform.
 *
 *   smpirun ... replay ACTIONS_DIR [--link-loads]
 *
 * ACTIONS_DIR (written by mpiscope.sim.replay) holds comms.txt, one line per
 * communicator that carries collectives ("ID SIZE WORLD_RANK..." in
 * communicator-rank order), and RANK.txt per rank: a header
 * "slots N sendbytes S recvbytes R" then one action per line:
 *   c FLOPS                       compute (a gap between MPI calls)
 *   s SLOT PEER TAG BYTES         MPI_Isend to world rank PEER
 *   r SLOT PEER TAG BYTES         MPI_Irecv from world rank PEER
 *   B OP COMM ROOT N COUNTS...    blocking collective (ROOT as communicator rank)
 *   C SLOT OP COMM ROOT N COUNTS...  nonblocking collective
 *   w N SLOT...                   MPI_Waitall on these slots
 * COUNTS are the bytes each communicator rank passed (the trace's bytes
 * column: the root's buffer for bcast and scatter, each rank's own part
 * otherwise), N = communicator size of them.
 * Point-to-point messages carry a tag unique within their (source,
 * destination) channel, so they match exactly as they did in the trace.
 *
 * Rank 0 prints "simulated_time_s T", "messages M", "bytes B" (delivered
 * point-to-point messages, counted from receive statuses) and, with
 * --link-loads, "link NAME BYTES" per used link.
 *
 * C++ (smpicxx) only for the link loads, which need S4U's time-advance signal.
 */
#include <mpi.h>
#include <simgrid/s4u.hpp>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_COMMS 4096

enum op { BARRIER, BCAST, REDUCE, ALLREDUCE, SCAN, EXSCAN, GATHERV, SCATTER, ALLGATHERV, ALLTOALLV,
          REDUCE_SCATTER, NOPS };
static const char *const op_names[NOPS] = {"barrier", "bcast", "reduce", "allreduce", "scan", "exscan",
                                           "gatherv", "scatter", "allgatherv", "alltoallv", "reduce_scatter"};

struct replay {
    FILE *in;
    MPI_Comm p2p;
    MPI_Comm comms[MAX_COMMS];      /* by trace communicator id; MPI_COMM_NULL if not a member */
    MPI_Request *req;
    MPI_Status *status;
    int *is_recv;                   /* slot holds a receive: its status counts a delivered message */
    char *sbuf, *rbuf;
    long long messages, bytes;
    int rank;
};

static void die(const struct replay *r, const char *what, const char *line)
{
    fprintf(stderr, "replay: rank %d: %s: %s\n", r->rank, what, line ? line : "");
    MPI_Abort(MPI_COMM_WORLD, 3);
}

static int op_of(const char *name)
{
    for (int i = 0; i < NOPS; i++)
        if (strcmp(name, op_names[i]) == 0)
            return i;
    return -1;
}

/* Communicators are created once, in file order, by every rank: a split of
 * MPI_COMM_WORLD keyed by the position of each member in the trace's list. */
static void read_comms(struct replay *r, const char *dir)
{
    char path[4096];
    for (int i = 0; i < MAX_COMMS; i++)
        r->comms[i] = MPI_COMM_NULL;
    r->comms[0] = MPI_COMM_WORLD;
    snprintf(path, sizeof path, "%s/comms.txt", dir);
    FILE *f = fopen(path, "r");
    if (!f)
        die(r, "cannot open", path);
    int id, size;
    while (fscanf(f, "%d %d", &id, &size) == 2) {
        int key = -1;
        for (int i = 0; i < size; i++) {
            int member;
            if (fscanf(f, "%d", &member) != 1)
                die(r, "truncated communicator list", path);
            if (member == r->rank)
                key = i;
        }
        if (id <= 0 || id >= MAX_COMMS)
            die(r, "communicator id out of range", path);
        MPI_Comm_split(MPI_COMM_WORLD, key >= 0 ? 0 : MPI_UNDEFINED, key, &r->comms[id]);
    }
    fclose(f);
}

static void open_actions(struct replay *r, const char *dir)
{
    char path[4096];
    int slots;
    long long sbytes, rbytes;
    snprintf(path, sizeof path, "%s/%d.txt", dir, r->rank);
    r->in = fopen(path, "r");
    if (!r->in || fscanf(r->in, "slots %d sendbytes %lld recvbytes %lld\n", &slots, &sbytes, &rbytes) != 3)
        die(r, "cannot read the action header of", path);
    r->req = (MPI_Request *)calloc((size_t)slots + 1, sizeof *r->req);
    r->status = (MPI_Status *)calloc((size_t)slots + 1, sizeof *r->status);
    r->is_recv = (int *)calloc((size_t)slots + 1, sizeof *r->is_recv);
    /* One shared buffer for all ranks (SMPI_SHARED_MALLOC): the simulation
     * needs sizes, not data, and 512 ranks x megabytes would not fit. */
    r->sbuf = (char *)SMPI_SHARED_MALLOC((size_t)sbytes + 1);
    r->rbuf = (char *)SMPI_SHARED_MALLOC((size_t)rbytes + 1);
    for (int i = 0; i <= slots; i++)
        r->req[i] = MPI_REQUEST_NULL;
}

static int *read_counts(struct replay *r, int n, char **cursor, const char *line)
{
    int *counts = (int *)calloc((size_t)n + 1, sizeof *counts);
    for (int i = 0; i < n; i++) {
        char *end;
        counts[i] = (int)strtol(*cursor, &end, 10);
        if (end == *cursor)
            die(r, "missing counts", line);
        *cursor = end;
    }
    return counts;
}

/* One collective; req == NULL runs the blocking call. Per-peer sizes the
 * trace does not hold (alltoallv, scatter, reduce_scatter) are split evenly. */
static void collective(struct replay *r, int op, MPI_Comm comm, int root, int n, const int *counts,
                       MPI_Request *req)
{
    int me, size;
    MPI_Comm_rank(comm, &me);
    MPI_Comm_size(comm, &size);
    int *rc = (int *)calloc((size_t)size + 1, sizeof *rc), *sc = (int *)calloc((size_t)size + 1, sizeof *sc);
    int *rd = (int *)calloc((size_t)size + 1, sizeof *rd), *sd = (int *)calloc((size_t)size + 1, sizeof *sd);
    int mine = n > me ? counts[me] : 0, all = n > root && root >= 0 ? counts[root] : 0;
    for (int i = 0, off = 0, soff = 0; i < size && i < n; i++) {
        rc[i] = op == ALLTOALLV ? counts[i] / size : counts[i];
        sc[i] = op == ALLTOALLV ? mine / size : 0;
        rd[i] = off;
        sd[i] = soff;
        off += rc[i];
        soff += sc[i];
    }
    switch (op) {
    case BARRIER: req ? MPI_Ibarrier(comm, req) : MPI_Barrier(comm); break;
    case BCAST: req ? MPI_Ibcast(r->rbuf, all, MPI_BYTE, root, comm, req)
                    : MPI_Bcast(r->rbuf, all, MPI_BYTE, root, comm); break;
    case REDUCE: req ? MPI_Ireduce(r->sbuf, r->rbuf, mine, MPI_BYTE, MPI_BOR, root, comm, req)
                     : MPI_Reduce(r->sbuf, r->rbuf, mine, MPI_BYTE, MPI_BOR, root, comm); break;
    case ALLREDUCE: req ? MPI_Iallreduce(r->sbuf, r->rbuf, mine, MPI_BYTE, MPI_BOR, comm, req)
                        : MPI_Allreduce(r->sbuf, r->rbuf, mine, MPI_BYTE, MPI_BOR, comm); break;
    case SCAN: req ? MPI_Iscan(r->sbuf, r->rbuf, mine, MPI_BYTE, MPI_BOR, comm, req)
                   : MPI_Scan(r->sbuf, r->rbuf, mine, MPI_BYTE, MPI_BOR, comm); break;
    case EXSCAN: req ? MPI_Iexscan(r->sbuf, r->rbuf, mine, MPI_BYTE, MPI_BOR, comm, req)
                     : MPI_Exscan(r->sbuf, r->rbuf, mine, MPI_BYTE, MPI_BOR, comm); break;
    case GATHERV: req ? MPI_Igatherv(r->sbuf, mine, MPI_BYTE, r->rbuf, rc, rd, MPI_BYTE, root, comm, req)
                      : MPI_Gatherv(r->sbuf, mine, MPI_BYTE, r->rbuf, rc, rd, MPI_BYTE, root, comm); break;
    case SCATTER: req ? MPI_Iscatter(r->sbuf, all / size, MPI_BYTE, r->rbuf, all / size, MPI_BYTE, root, comm, req)
                      : MPI_Scatter(r->sbuf, all / size, MPI_BYTE, r->rbuf, all / size, MPI_BYTE, root, comm);
        break;
    case ALLGATHERV: req ? MPI_Iallgatherv(r->sbuf, mine, MPI_BYTE, r->rbuf, rc, rd, MPI_BYTE, comm, req)
                         : MPI_Allgatherv(r->sbuf, mine, MPI_BYTE, r->rbuf, rc, rd, MPI_BYTE, comm); break;
    case ALLTOALLV: req ? MPI_Ialltoallv(r->sbuf, sc, sd, MPI_BYTE, r->rbuf, rc, rd, MPI_BYTE, comm, req)
                        : MPI_Alltoallv(r->sbuf, sc, sd, MPI_BYTE, r->rbuf, rc, rd, MPI_BYTE, comm); break;
    case REDUCE_SCATTER: req ? MPI_Ireduce_scatter_block(r->sbuf, r->rbuf, mine / size, MPI_BYTE, MPI_BOR, comm, req)
                             : MPI_Reduce_scatter_block(r->sbuf, r->rbuf, mine / size, MPI_BYTE, MPI_BOR, comm);
        break;
    default: break;
    }
    free(rc);
    free(sc);
    free(rd);
    free(sd);
}

static void wait_slots(struct replay *r, int n, char *cursor, const char *line)
{
    int *slots = read_counts(r, n, &cursor, line);
    MPI_Request *reqs = (MPI_Request *)calloc((size_t)n + 1, sizeof *reqs);
    MPI_Status *st = (MPI_Status *)calloc((size_t)n + 1, sizeof *st);
    for (int i = 0; i < n; i++)
        reqs[i] = r->req[slots[i]];
    MPI_Waitall(n, reqs, st);
    for (int i = 0; i < n; i++) {
        if (r->is_recv[slots[i]]) {
            int got = 0;
            MPI_Get_count(&st[i], MPI_BYTE, &got);
            r->messages++;
            r->bytes += got;
            r->is_recv[slots[i]] = 0;
        }
        r->req[slots[i]] = MPI_REQUEST_NULL;
    }
    free(slots);
    free(reqs);
    free(st);
}

static void run_actions(struct replay *r)
{
    char line[1 << 16];
    while (fgets(line, sizeof line, r->in)) {
        char kind[4], opname[32];
        int slot, peer, tag, comm, root, n, used;
        long long bytes;
        double flops;
        if (line[0] == 'c' && sscanf(line, "c %lf", &flops) == 1) {
            smpi_execute_flops(flops);
        } else if ((line[0] == 's' || line[0] == 'r') &&
                   sscanf(line, "%3s %d %d %d %lld", kind, &slot, &peer, &tag, &bytes) == 5) {
            if (line[0] == 's') {
                MPI_Isend(r->sbuf, (int)bytes, MPI_BYTE, peer, tag, r->p2p, &r->req[slot]);
            } else {
                MPI_Irecv(r->rbuf, (int)bytes, MPI_BYTE, peer, tag, r->p2p, &r->req[slot]);
                r->is_recv[slot] = 1;
            }
        } else if (line[0] == 'B' && sscanf(line, "B %31s %d %d %d%n", opname, &comm, &root, &n, &used) == 4) {
            char *cursor = line + used;
            int *counts = read_counts(r, n, &cursor, line);
            if (op_of(opname) < 0 || comm < 0 || comm >= MAX_COMMS || r->comms[comm] == MPI_COMM_NULL)
                die(r, "bad collective", line);
            collective(r, op_of(opname), r->comms[comm], root, n, counts, NULL);
            free(counts);
        } else if (line[0] == 'C' &&
                   sscanf(line, "C %d %31s %d %d %d%n", &slot, opname, &comm, &root, &n, &used) == 5) {
            char *cursor = line + used;
            int *counts = read_counts(r, n, &cursor, line);
            if (op_of(opname) < 0 || comm < 0 || comm >= MAX_COMMS || r->comms[comm] == MPI_COMM_NULL)
                die(r, "bad collective", line);
            collective(r, op_of(opname), r->comms[comm], root, n, counts, &r->req[slot]);
            free(counts);
        } else if (line[0] == 'w' && sscanf(line, "w %d%n", &n, &used) == 1) {
            wait_slots(r, n, line + used, line);
        } else if (line[0] != '\n') {
            die(r, "unknown action", line);
        }
    }
}

/* Bytes per link: each link's usage (bytes/s) integrated over the simulated
 * time. At a time advance the usages are those the solver set at the start of
 * the interval, so each interval counts what flowed in it. SimGrid's
 * link_load plugin integrates only at the start and end of communications,
 * so it counted a message's latency as if its bytes were flowing then:
 * latency x bandwidth too much per message and link (600 B per message at
 * 120 ns and 5 GB/s, 3x the bytes of 200-B messages). The accumulators live
 * on the heap, shared by all ranks (SMPI privatizes globals per rank). */
struct link_loads {
    std::vector<simgrid::s4u::Link *> links;
    std::vector<double> bytes;
};

static link_loads *track_links(void)
{
    auto *loads = new link_loads{simgrid::s4u::Engine::get_instance()->get_all_links(), {}};
    loads->bytes.assign(loads->links.size(), 0.0);
    simgrid::s4u::Engine::on_time_advance_cb([loads](double elapsed) {
        for (size_t i = 0; i < loads->links.size(); i++)
            loads->bytes[i] += loads->links[i]->get_usage() * elapsed;
    });
    return loads;
}

static void print_links(const link_loads *loads)
{
    for (size_t i = 0; i < loads->links.size(); i++)
        if (loads->bytes[i] > 0)
            printf("link %s %.17g\n", loads->links[i]->get_cname(), loads->bytes[i]);
}

int main(int argc, char **argv)
{
    struct replay r = {0};
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &r.rank);
    if (argc < 2)
        die(&r, "usage", "replay ACTIONS_DIR [--link-loads]");
    int link_loads_on = argc > 2 && strcmp(argv[2], "--link-loads") == 0;
    read_comms(&r, argv[1]);
    MPI_Comm_dup(MPI_COMM_WORLD, &r.p2p);
    open_actions(&r, argv[1]);
    /* Count link bytes from here: the set-up above is not the trace's traffic
     * (the barrier below sends empty messages). */
    link_loads *loads = link_loads_on && r.rank == 0 ? track_links() : nullptr;
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    run_actions(&r);
    double t1 = MPI_Wtime(), span = t1 - t0, span_max = 0;
    long long counts[2] = {r.messages, r.bytes}, total[2] = {0, 0};
    MPI_Reduce(&span, &span_max, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    MPI_Reduce(counts, total, 2, MPI_LONG_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    if (r.rank == 0) {
        printf("simulated_time_s %.17g\nmessages %lld\nbytes %lld\n", span_max, total[0], total[1]);
        if (loads)
            print_links(loads);
        fflush(stdout);
    }
    fclose(r.in);
    MPI_Finalize();
    return 0;
}
