/* The adaptive broadcast of Soga et al. (000; SPEC §5): a binomial tree over
 * a per-communicator table of virtual ranks, which the optimiser (rank 0 of
 * the communicator) reorders from the receive waits each process reports, so
 * that late processes move to the leaves.
 *
 * Built into libmpiscope (runtime/bcast.c turns MPI_Bcast into msc_bc_bcast
 * when MPISCOPE_BCAST asks for it) and, unchanged, into the experiment
 * program bench/bcast_exp.c, with the MPI's mpicc or with SimGrid's smpicc.
 * Only PMPI_ calls: nothing here is recorded, and the internal messages run
 * on a private duplicate of the user's communicator, so they never match the
 * user's. Times come from PMPI_Wtime, which SMPI simulates.
 *
 *   tree.c   the binomial tree over virtual positions, and the data phase
 *   vrank.c  per-communicator state: private duplicate, virtual-rank table,
 *            the optimiser's report slots; the window reports are put into
 *   adapt.c  profile (wait -> evaluation value -> report), optimise
 *            (which pair to swap, next interval), reconfigure, and the
 *            broadcast itself
 */
#ifndef MSC_BCAST_H
#define MSC_BCAST_H

#include <mpi.h>
#include <stdint.h>

enum msc_bc_mode { MSC_BC_LIBRARY = 0, MSC_BC_BINOMIAL = 1, MSC_BC_ADAPTIVE = 2 };
enum msc_bc_report { MSC_BC_REPORT_PUT = 0, MSC_BC_REPORT_SEND = 1 };
enum msc_bc_op { MSC_BC_NONE = 0, MSC_BC_SWAP = 1, MSC_BC_UNDO = 2 };

/* Tags on the private duplicate. */
enum { MSC_BC_TAG_DATA = 1, MSC_BC_TAG_RECONF = 2, MSC_BC_TAG_REPORT = 3 };

/* Every parameter of SPEC §5, with its environment variable (runtime/bcast.c
 * reads them; mpiscope run validates them and writes them to the manifest). */
struct msc_bc_params {
    int mode;            /* MPISCOPE_BCAST: library | binomial | adaptive */
    int weight;          /* MPISCOPE_BCAST_WEIGHT, i in NewVal = ((2^i-1)PreVal + Wait)/2^i; 1 */
    int stable;          /* MPISCOPE_BCAST_STABLE: 000 §5.2's mean of 3 agreeing measurements; 0 */
    double stable_tol;   /* MPISCOPE_BCAST_STABLE_TOL: they agree within this share; 0.0625 */
    double threshold;    /* MPISCOPE_BCAST_THRESHOLD: report on a change of this share; 0.5 */
    int interval;        /* MPISCOPE_BCAST_INTERVAL: first interval; 1 (max-effect) or 16 (sparse) */
    int interval_max;    /* MPISCOPE_BCAST_INTERVAL_MAX: cap on doubling, 0 none */
    double change;       /* MPISCOPE_BCAST_CHANGE: total-wait change that still doubles; 0.25 */
    int halve;           /* MPISCOPE_BCAST_HALVE: halve on a larger change (1), or keep (0); 1 */
    double eps_frac;     /* MPISCOPE_BCAST_EPS: zero wait is at most this share of W_max; 0.01 */
    double eps_min_s;    /* MPISCOPE_BCAST_EPS_MIN: ... and at most this many seconds; 1e-6 */
    int report;          /* MPISCOPE_BCAST_REPORT: put (000's MPI_Put) | send (nonblocking message) */
};

void msc_bc_default_params(struct msc_bc_params *p);

/* The virtual-rank table of a communicator of `size` ranks: vr[real rank] =
 * virtual rank, real[virtual rank] = real rank. */
struct msc_bc_table {
    int size;
    int *vr;
    int *real;
};

/* tree.c: positions are virtual ranks relative to the root's, mod size. */
int msc_bc_position(const struct msc_bc_table *t, int rank, int root);
int msc_bc_real_at(const struct msc_bc_table *t, int pos, int root);
int msc_bc_parent(int pos);
int msc_bc_first_child_step(int pos, int size);
int msc_bc_sends(int pos, int size);
int msc_bc_depth(int pos);
void msc_bc_table_swap(struct msc_bc_table *t, int a, int b);
/* The data phase: receive from the parent (Irecv, then the timed Wait: the
 * wait in seconds, -1 at the root), then send to the children in order. */
int msc_bc_tree(const struct msc_bc_table *t, int me, void *buf, int count, MPI_Datatype dt, int root,
                MPI_Comm comm, int tag, double *wait_s);

/* One decision of the optimiser (adapt.c), broadcast to every process. */
struct msc_bc_decision {
    int32_t interval;    /* broadcasts until the next optimisation */
    int32_t op;          /* enum msc_bc_op */
    int32_t a, b;        /* ranks (in the communicator) whose virtual ranks swap; -1 none */
};

/* The optimiser's memory between optimisations (SPEC §5 steps 1-5). */
struct msc_bc_optimiser {
    int phase;           /* 0 search, 1 a swap on trial, 2 a trial undone: try the next candidate */
    int a, b;            /* the pair on trial */
    int wmax;            /* the process with the largest wait of the current search */
    int *cands;          /* its zero-wait candidates, best first */
    int ncands, next;
    double base_total;   /* total wait before the trial */
    double *base;        /* each process's value measured on the table before the trial */
    uint64_t base_since; /* first broadcast on the trial's table (of the first candidate) */
    double prev_total;   /* total wait at the previous optimisation */
    int have_prev;
    uint64_t since;      /* first broadcast on the table of the last operation */
    int held;            /* optimisations since then without the values to judge it */
    int tabu;            /* a process whose candidates all failed; -1 none */
    double tabu_total;
    int interval;
    uint64_t swaps, undos;
};

int msc_bc_optimiser_init(struct msc_bc_optimiser *o, int size, const struct msc_bc_params *p);
void msc_bc_optimiser_free(struct msc_bc_optimiser *o);
/* vals[r]: evaluation value of rank r in seconds (0: none reported); when[r]:
 * the broadcast it was measured at (NULL: all current); next: the first
 * broadcast the decision applies to. The caller applies the decision to the
 * table and broadcasts it to the others. */
void msc_bc_decide(struct msc_bc_optimiser *o, const double *vals, const uint64_t *when, struct msc_bc_table *t,
                   int root, uint64_t next, const struct msc_bc_params *p, struct msc_bc_decision *d,
                   double *total_s);

/* The state of one communicator (vrank.c). */
struct msc_bc_state {
    MPI_Comm comm;            /* private duplicate of the user's communicator */
    int size, rank;
    struct msc_bc_table tab;
    uint64_t count;           /* broadcasts so far */
    uint64_t next_reconf;     /* the broadcast that starts with an optimisation */
    int interval;
    int report;               /* how this communicator reports (put needs the world window) */
    int byes_done;            /* reports by message: the last one is sent (or all received) */
    /* profile */
    int measured;
    double val, sent, hist[3];
    int nhist;
    int64_t report_buf[2];    /* value in ns, the broadcast it was measured at */
    MPI_Request report_req;
    int opt_world;            /* the optimiser's rank in the report window */
    MPI_Aint opt_disp;        /* where its slots are */
    /* optimiser (rank 0 only) */
    int64_t *slots;           /* (value in ns, broadcast) of each rank, written by reports */
    double *vals;
    uint64_t *when;
    struct msc_bc_optimiser *opt;
    uint64_t swaps;
    struct msc_bc_state *next_state;
};

/* What happened at one optimisation, for the recorder and the benchmarks. */
struct msc_bc_event {
    uint64_t bcast;           /* the broadcast (1-based count on the communicator) it applies to */
    int op, a, b;             /* enum msc_bc_op and ranks in the communicator */
    int interval;
    double total_wait_s;
};
typedef void (*msc_bc_event_fn)(MPI_Comm user_comm, const struct msc_bc_event *e);

/* vrank.c */
int msc_bc_setup(MPI_Comm world, const struct msc_bc_params *p);  /* after MPI_Init: the report window */
void msc_bc_teardown(void);                                        /* before MPI_Finalize */
struct msc_bc_state *msc_bc_state_of(MPI_Comm comm, const struct msc_bc_params *p, int *fallback);
extern msc_bc_event_fn msc_bc_on_event;

/* adapt.c: MPI_Bcast over the adaptive (or fixed) tree. *fallback is set
 * when this communicator cannot use it (an intercommunicator): the caller
 * then runs the library's broadcast. */
int msc_bc_bcast(void *buf, int count, MPI_Datatype dt, int root, MPI_Comm comm, const struct msc_bc_params *p,
                 int *fallback);
void msc_bc_profile(struct msc_bc_state *s, double wait_s, const struct msc_bc_params *p);
int msc_bc_reconfigure(struct msc_bc_state *s, int root, MPI_Comm user_comm, const struct msc_bc_params *p);

/* Used by vrank.c and adapt.c only. */
extern MPI_Win msc_bc_win;
extern int msc_bc_world_rank;

#endif
