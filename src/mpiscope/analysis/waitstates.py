"""Wait states (Scalasca's patterns) and the late calls that caused them.

A wait state is time a rank spends blocked in an MPI call for another rank:
waiting = min(t_ready, leave of the waiting call) - entry of the waiting call, when
positive, where t_ready is when the other rank made progress possible:

* late_sender: a receive (Recv, the receive half of Sendrecv, the call that
  completed an Irecv, a matched probe MPI_Mprobe, or the blocking MPI_Probe right
  before the receive of the message it found) entered before its message's send:
  t_ready = send entry.
  late_sender_wrong_order: the same, while a message another send had already
  posted to this rank was waiting to be received (its receive was posted later).
  Such a wait is `reorderable` where the rank sent nothing and took part in no
  collective between the waiting call and the call that completed that later
  receive: the two receives follow each other, and their order is a choice. Where
  it sent in between, the later receive is most likely for a later step of the
  algorithm (NPB CG's stages: Irecv, Send, Wait, each stage).
* late_receiver: a send that blocks until its receive is posted (MPI_Ssend/Issend
  always, Send/Isend/Sendrecv at or above the eager limit) and left only after the
  receive was posted: t_ready = receive posting.
* wait_at_barrier, wait_at_nxn (all-to-all collectives): t_ready = last entry.
* late_broadcast (Bcast, Scatter(v); non-roots): t_ready = the root's entry.
* early_reduce (Reduce, Gather(v); the root): t_ready = the first non-root's entry.
* early_broadcast (Bcast, Scatter(v); the root, still inside when the last non-root entered):
  t_ready = that entry. An MPI may hold the root until its receivers join (Open MPI's
  broadcasts of a few KiB: PETSc's first one held rank 0 55 ms for a rank still starting up,
  which read as busy time: "communication-bound"); a root that left before it sent eagerly.
* wait_at_fence (MPI_Win_fence): t_ready = the last entry into the same fence, the k-th
  fence of a window on each of its ranks (Scalasca's Wait at Fence; a fence that
  closes an epoch completes the RMA operations of every rank, so it waits for all).
  Communicator creation over a whole communicator (MPI_Comm_split, _dup, _create,
  MPI_Cart_create, ...) is wait_at_nxn in the same way: the k-th such call on a parent
  communicator on each of its ranks is one instance (MPICH and Open MPI agree on the new
  context with an allreduce or allgather over the parent, so each waits for the last).
  So are window creation (MPI_Win_create/_allocate/_create_dynamic: an allgather of the
  ranks' window details over the communicator) and MPI_Win_free (a barrier over the
  window's ranks, so that no rank frees memory another still accesses): the k-th on a
  communicator, the free of a window.

Nonblocking operations wait in the call that completes them (events.completed_by).
One call can complete several operations (Waitall): its waiting is the largest of
theirs, never their sum, so a rank never waits longer than it spends in MPI.
Neighbourhood collectives are left out: the trace does not record the neighbours
their waiting depends on.

The cause of each wait is the late rank's call (send, receive posting, its entry
into the collective) and the computation before it: from its previous MPI call to
that call, whose length is compared to the waiting rank's own computation before
the wait (Scalasca's short-term delay cost: the wait is charged to that interval).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

from mpiscope.analysis.busy import union_by_rank
from mpiscope.analysis.frames import I64, Frames, file_io_rows, in_mpi_ns
from mpiscope.trace import INIT_CALLS, collective_file_io_calls

PATTERNS = ("late_sender", "late_sender_wrong_order", "late_receiver", "wait_at_barrier", "wait_at_nxn",
            "late_broadcast", "early_reduce", "wait_at_fence", "early_broadcast")
PATTERN = {name: code for code, name in enumerate(PATTERNS)}
PATTERN_ENUM = pl.Enum(PATTERNS)

# Messages of at least this many bytes are sent by rendezvous (the send waits for
# the receive). MPICH's shared-memory and network eager limits are 16-64 KiB,
# Open MPI's 4 KiB (shared memory) to 64 KiB (TCP); below the limit a late
# receiver can still show when the send left after the receive was posted, but
# then the send was not waiting for it, so those are not counted.
DEFAULT_EAGER_LIMIT = 64 * 1024

# Causes listed per wait-state row in the JSON (the largest; the seconds of all
# causes are in the row's `seconds`).
TOP_CAUSES = 10


def collective_variants(*names: str) -> frozenset[str]:
    """A blocking collective with its nonblocking, persistent and large-count variants."""
    out: set[str] = set()
    for n in names:
        nb = "MPI_I" + n[4].lower() + n[5:]
        out |= {n, n + "_c", nb, nb + "_c", n + "_init", n + "_init_c"}
    return frozenset(out)


BARRIER = frozenset({"MPI_Barrier", "MPI_Ibarrier", "MPI_Barrier_init"})
NXN = collective_variants("MPI_Allreduce", "MPI_Alltoall", "MPI_Alltoallv", "MPI_Alltoallw", "MPI_Allgather",
                "MPI_Allgatherv", "MPI_Reduce_scatter", "MPI_Reduce_scatter_block", "MPI_Scan", "MPI_Exscan")
BROADCAST = collective_variants("MPI_Bcast", "MPI_Scatter", "MPI_Scatterv")
REDUCE = collective_variants("MPI_Reduce", "MPI_Gather", "MPI_Gatherv")
FENCE = frozenset({"MPI_Win_fence"})
# Collective over every rank of the parent (not Comm_create_group, Intercomm_create: a group or two leaders)
COMM_CREATE = frozenset({"MPI_Comm_dup", "MPI_Comm_dup_with_info", "MPI_Comm_split", "MPI_Comm_split_type",
                         "MPI_Comm_create", "MPI_Cart_create", "MPI_Cart_sub", "MPI_Graph_create",
                         "MPI_Dist_graph_create", "MPI_Dist_graph_create_adjacent", "MPI_Intercomm_merge"})
# Window creation (keyed by the communicator) and freeing (by the window): no rank leaves before the last enters
WINDOW_NXN = frozenset({"MPI_Win_create", "MPI_Win_create_c", "MPI_Win_allocate", "MPI_Win_allocate_c",
                        "MPI_Win_allocate_shared", "MPI_Win_allocate_shared_c", "MPI_Win_create_dynamic",
                        "MPI_Win_free"})
SYNC_SENDS = frozenset({"MPI_Ssend", "MPI_Ssend_c", "MPI_Issend", "MPI_Issend_c"})
RENDEZVOUS_SENDS = frozenset({"MPI_Send", "MPI_Send_c", "MPI_Isend", "MPI_Isend_c", "MPI_Sendrecv",
                              "MPI_Sendrecv_c", "MPI_Sendrecv_replace", "MPI_Sendrecv_replace_c",
                              "MPI_Isendrecv", "MPI_Isendrecv_c", "MPI_Isendrecv_replace",
                              "MPI_Isendrecv_replace_c"})

# The sends that move nothing else: whether one was held until its receive came is the eager limit's
# evidence (a send-receive may have waited for its own receive).
SENDS_ONLY = frozenset({"MPI_Send", "MPI_Send_c", "MPI_Isend", "MPI_Isend_c"})

# Calls whose time is waiting for other ranks that no pattern here attributes: a polling loop waits
# for what it tests; post/start/complete/wait and lock acquisition wait for the other side of an
# epoch. Their time is not "busy" (diagnose's communication-bound finding leaves it out).
POLLING = frozenset({"MPI_Test", "MPI_Testany", "MPI_Testsome", "MPI_Testall", "MPI_Iprobe", "MPI_Improbe",
                     "MPI_Parrived"})
# polls whose success is followed by the call that completes the message (a receive, a wait)
PROBES = frozenset({"MPI_Iprobe", "MPI_Improbe", "MPI_Parrived"})
# Probes that block until a message has come: MPI_Mprobe is the message's receive (its posting:
# match.py), so it, not the MPI_Mrecv after it, waited; an MPI_Probe right before the receive of the
# message it found waited for it (mpi4py's recv() of a pickled object is MPI_Mprobe + MPI_Mrecv: a
# master's 410 ms in MPI_Mprobe, 79 % of the run's MPI time, read as no wait at all).
MATCHED_PROBES = frozenset({"MPI_Mprobe"})
BLOCKING_PROBES = frozenset({"MPI_Probe"})
# Flushes and unlocks count too: they return once the target has carried out the epoch's operations,
# which needs its progress (and MPICH grants a contended lock only then): a sweep's IMB-RMA spent
# 6.1 s in MPI_Win_flush while its targets sat in a barrier, and the run read as communication-bound.
RMA_SYNC = frozenset({"MPI_Win_post", "MPI_Win_start", "MPI_Win_complete", "MPI_Win_wait", "MPI_Win_test",
                      "MPI_Win_lock", "MPI_Win_lock_all", "MPI_Win_unlock", "MPI_Win_unlock_all",
                      "MPI_Win_flush", "MPI_Win_flush_all", "MPI_Win_flush_local", "MPI_Win_flush_local_all"})

_CANDIDATE = {"event": pl.Int64, "pattern": pl.UInt8, "ready_ns": pl.Int64, "cause_rank": pl.Int32,
              "cause_event": pl.Int64, "reorderable": pl.Boolean}


class _Times:
    """Entry, leave (-1: never left) and completing call of every event, as arrays."""

    def __init__(self, f: Frames) -> None:
        self.enter = f.column("t_enter_ns")
        self.leave = f.column("t_leave_ns")
        self.completed_by = f.column("completed_by")
        self.matched_probe = f.code_table(MATCHED_PROBES)[f.call_codes()]

    def waiting_call(self, start: I64) -> I64:
        """The call that waits for an operation: the one that completed it, else the call itself;
        a matched probe itself, which waited for its message before the MPI_Mrecv completed it."""
        cb = self.completed_by[start]
        return np.where((cb >= 0) & ~self.matched_probe[start], cb, start)

    def completing_call(self, f: Frames, start: I64, done: I64) -> I64:
        """The call that completed each message side started by `start` at time `done` (-1: never):
        waiting_call, or where the start has no completing call and did not itself leave at `done`
        (an MPI_Startall whose requests several calls completed: tachyon's receives, completed in
        MPI_Testsome, waited "in MPI_Startall"), the call of its rank that left at `done`."""
        w = self.waiting_call(start)
        lost = (self.completed_by[start] < 0) & ~self.matched_probe[start] & (done >= 0) & \
            (self.leave[start] != done)
        if not lost.any():
            return w
        rank = f.column("rank")
        calls = pl.DataFrame({"rank": rank, "t": self.leave, "call": np.arange(rank.size)})
        sides = pl.DataFrame({"rank": rank[start[lost]], "t": done[lost]})
        found = sides.join(calls.group_by("rank", "t").agg(pl.col("call").min()), on=["rank", "t"], how="left",
                           maintain_order="left")["call"].fill_null(-1).to_numpy()
        w = w.copy()
        w[np.flatnonzero(lost)[found >= 0]] = found[found >= 0]
        return w

    def wait(self, call: I64, ready: I64) -> I64:
        """min(ready, leave) - entry of `call`, at least 0 (0 for a call that never returned)."""
        leave = self.leave[call]
        w = np.minimum(ready, leave) - self.enter[call]
        return np.where(leave >= 0, np.maximum(w, 0), 0)


def _candidates(event: I64, pattern: Any, ready: I64, cause_rank: Any, cause_event: I64,
                reorderable: Any = False) -> pl.DataFrame:
    return pl.DataFrame({"event": event, "pattern": pattern, "ready_ns": ready, "cause_rank": cause_rank,
                         "cause_event": cause_event,
                         "reorderable": np.broadcast_to(np.asarray(reorderable, bool), np.shape(event))},
                        schema=_CANDIDATE)


def _wrong_order(m: pl.DataFrame, received_in: I64, dst: I64, wait_enter: I64) -> I64:
    """For each receive in thread `dst` (Frames.stream) that waited from wait_enter: the receive
    (event) of a message received in that thread, sent before wait_enter and still unreceived, its
    receive posted only after wait_enter; -1 where there is none. (The latest posting among the
    messages sent to that thread before t, by an as-of join, and the receive that posted it.) A
    message another thread of the rank receives is no other order this thread could have taken
    (threads each on a communicator of their own: 130 of 131 waits read "receive in another order").
    `received_in`: the thread of each message's receive."""
    sent = (m.select(pl.Series("dst", received_in), pl.col("t_send_enter_ns").alias("t"),
                     pl.col("t_recv_enter_ns").alias("posted"), pl.col("recv_event"))
            .sort("dst", "t").with_columns(pl.col("posted").cum_max().over("dst").alias("posted_max")))
    sent = sent.with_columns(pl.when(pl.col("posted") == pl.col("posted_max")).then(pl.col("recv_event"))
                             .forward_fill().over("dst").alias("latest_recv"))
    q = pl.DataFrame({"dst": dst, "t": wait_enter, "i": np.arange(len(wait_enter))},
                     schema={"dst": sent.schema["dst"], "t": pl.Int64, "i": pl.Int64}).sort("dst", "t")
    j = q.join_asof(sent.select("dst", "t", "posted_max", "latest_recv"), on="t", by="dst",
                    allow_exact_matches=False, check_sortedness=False).sort("i")
    wrong = (j["posted_max"] > j["t"]).fill_null(False)
    return j.select(pl.when(wrong).then(pl.col("latest_recv")).otherwise(-1)).to_series().fill_null(-1) \
        .to_numpy().astype(np.int64)


def _sends_or_collectives(f: Frames) -> I64:
    """Per event: how many calls of its thread before it sent or took part in a collective."""
    sends = f.code_table(frozenset(n for n in f.call_names if "send" in n.lower()))[f.call_codes()]
    return f.thread_cumsum((sends | (f.column("coll_id") >= 0)).astype(np.int64))  # coll_id: a part in an instance


def _late_sender(f: Frames, tm: _Times) -> pl.DataFrame:
    m = f.messages
    received = m["t_recv_leave_ns"].fill_null(-1).to_numpy() if "t_recv_leave_ns" in m.columns \
        else np.full(m.height, -1)
    w = tm.completing_call(f, m["recv_event"].to_numpy(), received)
    ready = m["t_send_enter_ns"].to_numpy()
    # a polling loop ended by the call that completed the receive waited in its calls too, and so
    # did a blocking probe right before it that returned once the message had been sent
    loop, k = _polling_loop_before(f, w)
    probe, j = _probe_before(f, tm, w, ready)
    looped = _candidates(np.r_[loop, probe], PATTERN["late_sender"], ready[np.r_[k, j]],
                         m["src"].to_numpy()[np.r_[k, j]], m["send_event"].to_numpy()[np.r_[k, j]])
    keep = tm.wait(w, ready) > 0
    m, w, ready = m.filter(pl.Series(keep)), w[keep], ready[keep]
    key = f.stream()
    early = _wrong_order(f.messages, key[f.messages["recv_event"].to_numpy()], key[w], tm.enter[w])
    wrong = early >= 0
    # the call that completes the later receive follows the waiting call with no send or collective
    # of the rank from the waiting call on (a stage's Irecv; Send; Wait puts a send before it, and a
    # waiting MPI_Sendrecv sends itself: CoMD's exchanges, one dimension after another, were told to
    # receive in another order)
    sent = _sends_or_collectives(f)  # sent[i]: sends and collectives of the thread's calls before row i
    done = np.where(wrong, tm.waiting_call(np.maximum(early, 0)), -1)
    later = np.maximum(done, w)
    reorderable = wrong & (done > w) & (key[later] == key[w]) & (sent[later] == sent[w])
    pattern = np.where(wrong, PATTERN["late_sender_wrong_order"], PATTERN["late_sender"])
    return pl.concat([_candidates(w, pattern, ready, m["src"], m["send_event"].to_numpy(), reorderable), looped])


def _probe_before(f: Frames, tm: _Times, done: I64, ready: I64) -> tuple[I64, I64]:
    """The blocking probes (MPI_Probe) that found the messages whose receives `done` completed: the
    call right before the receive in its thread, left before the receive was entered and after the
    message was sent (the probe of another message may have left before). Returns those rows and,
    for each, its i."""
    before = np.maximum(done - 1, 0)
    key = f.stream()
    probe = f.code_table(BLOCKING_PROBES)[f.call_codes()[before]]
    found = (done > 0) & probe & (key[before] == key[done]) & (tm.leave[before] >= ready) & \
        (tm.leave[before] <= tm.enter[done])
    i = np.flatnonzero(found)
    return before[i].astype(np.int64), i.astype(np.int64)


def _polling_loop_before(f: Frames, done: I64) -> tuple[I64, I64]:
    """The rows of the polling loop that ended when a message came: where `done[i]`, the call
    that completed its receive, is a poll (MPI_Test & co.) or a receive right after a successful
    probe (MPI_Iprobe, MPI_Improbe), and the row before that poll on its rank is a folded loop of
    unsuccessful polls (inside_ns set) that left before it, that row and the folded rows laid out
    right before it (a cycle of call sites: outcomes.py) waited for the message. Returns those
    rows and, for each, its i."""
    codes, rank = f.call_codes(), f.column("rank")
    before = np.maximum(done - 1, 0)
    probed = (done > 0) & f.code_table(PROBES)[codes[before]] & (rank[before] == rank[done])
    ended = np.where(f.code_table(POLLING)[codes[done]], done, np.where(probed, before, -1))
    prev = ended - 1
    inside = f.column("inside_ns")
    enter, leave = f.column("t_enter_ns"), f.column("t_leave_ns")
    p = np.maximum(prev, 0)
    ok = (ended >= 0) & (prev >= 0) & (rank[p] == rank[done]) & (inside[p] >= 0) & (leave[p] >= 0) & \
        (leave[p] <= enter[np.maximum(ended, 0)])
    if not ok.any():
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    folded = np.flatnonzero(inside >= 0)
    # a folded row that begins where the folded row before it ended is laid out with it (one cycle)
    joined = np.zeros(folded.size, bool)
    joined[1:] = (folded[1:] == folded[:-1] + 1) & (rank[folded[1:]] == rank[folded[:-1]]) & \
        (enter[folded[1:]] == leave[folded[:-1]])
    first = folded[np.maximum.accumulate(np.where(joined, 0, np.arange(folded.size)))]
    idx = np.flatnonzero(ok)
    last = prev[idx]
    start = first[np.searchsorted(folded, last)]
    counts = last - start + 1
    k = np.repeat(idx, counts)
    rows = np.repeat(start - np.cumsum(np.r_[0, counts[:-1]]), counts) + np.arange(counts.sum())
    return rows.astype(np.int64), k.astype(np.int64)


# The fewest sends on each side of an eager limit the trace must show (held from it on, not below),
# and the largest share of them that may contradict it.
OBSERVED_SENDS = 3
# A send counts as held only if its receive came this long after the send began.
HELD_EVIDENCE_NS = 20_000
CONTRADICTING_SHARE = 0.2


def observed_eager_limit(f: Frames) -> int | None:
    """The smallest message size from which the run's MPI_Send/Isend/Sendrecv waited for their
    receive, from the trace itself, or None where it does not show one. Among the sends whose receive
    was posted while the sending (or completing) call was running, those still inside it then were held
    (rendezvous), the others had returned (eager): the limit is the held size that best splits them,
    held from it on and not below, with OBSERVED_SENDS on each side and at most CONTRADICTING_SHARE of
    each side contradicting it. MPICH 5.0's wheel waits from 8 KiB, below the 64 KiB default: late receivers
    of 8-56 KiB went unseen."""
    m = f.messages
    if not m.height:
        return None
    tm = _Times(f)
    send = m["send_event"].to_numpy()
    ok = f.code_table(SENDS_ONLY)[f.call_codes()[send]]
    w = tm.waiting_call(send)
    # a call that completed something else besides may have waited for that: an MPI_Waitall of a 1 KiB
    # MPI_Isend and the MPI_Irecv of a late message read "eager limit 1,024 B" on MPIs that send up to
    # 4 and 8 KiB eagerly (and PETSc's scatters 308 B, with 10 false late receivers)
    by = tm.completed_by[tm.completed_by >= 0]
    alone = np.bincount(by, minlength=tm.enter.size)[w] == 1
    ready = m["t_recv_enter_ns"].to_numpy()
    ok &= ((w == send) | alone) & (tm.enter[w] < ready) & (tm.leave[w] >= 0) & (ready >= 0)
    # a receive posted within the first microseconds of an eager send still finds it inside the call:
    # no evidence either way (LAMMPS' small sends read "eager limit 4 B")
    ok &= (tm.leave[w] <= ready) | (ready - tm.enter[w] >= HELD_EVIDENCE_NS)
    nbytes = m["bytes"].to_numpy()[ok]
    held = tm.leave[w[ok]] > ready[ok]
    if held.sum() < OBSERVED_SENDS or (~held).sum() < OBSERVED_SENDS:
        return None
    order = np.argsort(nbytes, kind="stable")
    nbytes, held = nbytes[order], held[order]
    sizes = np.unique(nbytes[held])
    first = np.searchsorted(nbytes, sizes)          # messages below each candidate limit
    held_below = np.cumsum(held)[np.maximum(first - 1, 0)] * (first > 0)
    not_held_from = (~held).sum() - (first - held_below)
    above = nbytes.size - first
    # each side on its own: many small eager sends outweighed the sizes above a limit at 4,896 B where
    # 1 of 75 sends had waited (NPB MG on MPICH, whose sends wait from 8 KiB)
    agrees = ((first >= OBSERVED_SENDS) & (above >= OBSERVED_SENDS)
              & (held_below <= CONTRADICTING_SHARE * first) & (not_held_from <= CONTRADICTING_SHARE * above))
    if not agrees.any():
        return None
    wrong = np.where(agrees, held_below + not_held_from, np.iinfo(np.int64).max)
    return int(sizes[int(np.argmin(wrong))])


def _late_receiver(f: Frames, tm: _Times, eager_limit: int) -> pl.DataFrame:
    m = f.messages
    send = m["send_event"].to_numpy()
    codes = f.call_codes()[send]
    blocking = f.code_table(SYNC_SENDS)[codes] | (f.code_table(RENDEZVOUS_SENDS)[codes]
                                                  & (m["bytes"].to_numpy() >= eager_limit))
    w = tm.waiting_call(send)
    ready = m["t_recv_enter_ns"].to_numpy()
    # only a send that was still inside its (completion) call when the receive was posted waited for it
    keep = blocking & (tm.leave[w] > ready) & (tm.wait(w, ready) > 0)
    m = m.filter(pl.Series(keep))
    return _candidates(w[keep], PATTERN["late_receiver"], ready[keep], m["dst"], m["recv_event"].to_numpy())


def _by_instance(coll: I64, t: I64) -> tuple[I64, I64, I64]:
    """Rows sorted by (instance, entry), each row's instance number, and the first sorted
    position of each instance."""
    order = np.lexsort((t, coll))
    sc = coll[order]
    new = np.ones(sc.size, bool)
    new[1:] = sc[1:] != sc[:-1]
    group = np.empty(coll.size, np.int64)
    group[order] = np.cumsum(new) - 1
    return order, group, np.flatnonzero(new)


def _collectives(f: Frames, tm: _Times) -> pl.DataFrame:
    kind_of = np.zeros(len(f.call_names), np.uint8)
    for code, names in ((1, BARRIER), (2, NXN), (3, BROADCAST), (4, REDUCE)):
        kind_of |= f.code_table(names).astype(np.uint8) * code
    coll = f.column("coll_id")
    idx = np.flatnonzero(coll >= 0)
    kind = kind_of[f.collective_codes()[idx]]
    idx, kind = idx[kind > 0], kind[kind > 0]
    if idx.size == 0:
        return pl.DataFrame(schema=_CANDIDATE)
    rank, t, root = f.column("rank")[idx], tm.enter[idx], f.column("root")[idx]
    order, group, first = _by_instance(coll[idx], t)
    n = first.size
    last = order[np.append(first[1:], idx.size) - 1]   # the latest entry of each instance
    is_root = rank == root
    root_row = np.full(n, -1, np.int64)
    root_row[group[is_root]] = np.flatnonzero(is_root)
    contrib = order[(~is_root & (root >= 0))[order]]          # non-roots of rooted instances, by entry
    first_row = np.full(n, -1, np.int64)
    seen, at = np.unique(group[contrib], return_index=True)
    first_row[seen] = contrib[at]
    last_row = np.full(n, -1, np.int64)  # the last non-root to enter
    seen, at = np.unique(group[contrib][::-1], return_index=True)
    last_row[seen] = contrib[::-1][at]
    held = np.zeros(idx.size, bool)      # a broadcast's root still inside when its last receiver came
    roots = np.flatnonzero((kind == 3) & is_root & (last_row[group] >= 0))
    held[roots] = tm.leave[idx[roots]] > t[last_row[group[roots]]]
    # the row each waiting row waited for: the last to enter, the root, the first contributor
    waited_for = np.select([kind <= 2, (kind == 3) & ~is_root, (kind == 4) & is_root, held],
                           [last[group], root_row[group], first_row[group], last_row[group]], -1)
    ok = waited_for >= 0
    pattern_of_kind = np.array([0, PATTERN["wait_at_barrier"], PATTERN["wait_at_nxn"], PATTERN["late_broadcast"],
                                PATTERN["early_reduce"]], np.uint8)
    pattern = np.where(held, PATTERN["early_broadcast"], pattern_of_kind[kind])
    src = waited_for[ok]
    return _candidates(tm.waiting_call(idx[ok]), pattern[ok], t[src], rank[src].astype(np.int32), idx[src])


def _kth_calls(f: Frames, tm: _Times, names: frozenset[str], pattern: str) -> pl.DataFrame:
    """Wait at fence (and at communicator creation): the k-th of these calls on a window (a parent
    communicator) on each rank is one instance (a rank's events are in time order); every rank in it
    waits for the last to enter."""
    idx = np.flatnonzero(f.code_table(names)[f.call_codes()])
    if idx.size == 0 or "comm" not in f.events.columns:
        return pl.DataFrame(schema=_CANDIDATE)
    rank = f.column("rank")[idx]
    inst = (pl.DataFrame({"rank": rank, "win": f.column("comm")[idx]})
            .select(pl.struct("win", pl.int_range(pl.len()).over("rank", "win").alias("k")).rank("dense"))
            .to_series().to_numpy().astype(np.int64))
    t = tm.enter[idx]
    order, group, first = _by_instance(inst, t)
    last = order[np.append(first[1:], idx.size) - 1][group]
    return _candidates(idx, PATTERN[pattern], t[last], rank[last].astype(np.int32), idx[last])


def wait_events(f: Frames, eager_limit: int = DEFAULT_EAGER_LIMIT) -> pl.DataFrame:
    """One row per call that waited: event, rank, call, callsite, pattern, wait_ns,
    release_ns (when the wait ended), and its cause: cause_rank, cause_event,
    cause_call, cause_callsite, cause_from_callsite (the late rank's previous call),
    cause_time_ns, cause_compute_ns (computation before the late call), delay_ns
    (that computation minus the waiting rank's own before its wait), reorderable (wrong order
    only: the later receive follows with no send between), in_init_ns (how much of the wait the late
    rank was still inside MPI_Init)."""
    tm = _Times(f)
    c = pl.concat([_late_sender(f, tm), _late_receiver(f, tm, eager_limit), _collectives(f, tm),
                   _kth_calls(f, tm, FENCE, "wait_at_fence"), _kth_calls(f, tm, COMM_CREATE | WINDOW_NXN, "wait_at_nxn")])
    wait = tm.wait(c["event"].to_numpy(), c["ready_ns"].to_numpy())
    c = (c.with_columns(pl.Series("wait_ns", wait)).filter(pl.col("wait_ns") > 0)
         .sort("wait_ns", descending=True).unique("event", keep="first").sort("event"))
    w, cause = c["event"].to_numpy(), c["cause_event"].to_numpy()
    ev = f.events
    prev_cause = f.previous_in_thread(cause)
    compute_before = _compute_before(f, tm)
    cause_compute = compute_before(cause)
    # Ranks leave MPI_Init at different times (the MPI's start-up: 57 ms apart in a CloverLeaf run);
    # what a rank waits for another still inside it is no wait the program made
    codes, rank = f.call_codes(), f.column("rank")
    init = f.code_table(INIT_CALLS)[codes]
    init_leave = np.full(f.ranks, -1, np.int64)
    np.maximum.at(init_leave, rank[init], tm.leave[init])
    in_init = np.clip(init_leave[rank[cause]] - tm.enter[w], 0, c["wait_ns"].to_numpy())
    return pl.DataFrame([
        c["event"], ev["rank"].gather(w), ev["call"].gather(w), ev["callsite"].gather(w),
        pl.Series("pattern", PATTERNS, dtype=PATTERN_ENUM).gather(c["pattern"]),
        c["wait_ns"], pl.Series("release_ns", tm.enter[w] + c["wait_ns"].to_numpy()),
        c["cause_rank"], c["cause_event"], ev["call"].gather(cause).alias("cause_call"),
        ev["callsite"].gather(cause).alias("cause_callsite"),
        ev["callsite"].gather(pl.Series(prev_cause).replace(-1, None)).alias("cause_from_callsite"),
        pl.Series("cause_time_ns", tm.enter[cause]), pl.Series("cause_compute_ns", cause_compute),
        pl.Series("delay_ns", cause_compute - compute_before(w)), c["reorderable"],
        pl.Series("in_init_ns", in_init),
    ])


# Calls that return without waiting for another rank: nonblocking starts, one-sided operations, frees,
# MPI_Pcontrol. The computation before a late call runs back over them to the rank's previous call that
# could have waited (Graph500's rank 0 generated the graph for 285 ms, freed a communicator, then joined
# the allreduce the others waited in: "did not compute noticeably longer" counted only the last 5 µs).
NEVER_WAITS = frozenset(
    {"MPI_Isend", "MPI_Ibsend", "MPI_Issend", "MPI_Irsend", "MPI_Irecv", "MPI_Imrecv", "MPI_Iprobe", "MPI_Improbe",
     "MPI_Isendrecv", "MPI_Isendrecv_replace", "MPI_Start", "MPI_Startall", "MPI_Send_init", "MPI_Bsend_init",
     "MPI_Ssend_init", "MPI_Rsend_init", "MPI_Recv_init", "MPI_Psend_init", "MPI_Precv_init", "MPI_Pready",
     "MPI_Pready_range", "MPI_Parrived", "MPI_Put", "MPI_Get", "MPI_Accumulate", "MPI_Get_accumulate",
     "MPI_Fetch_and_op", "MPI_Compare_and_swap", "MPI_Rput", "MPI_Rget", "MPI_Raccumulate", "MPI_Rget_accumulate",
     "MPI_Win_attach", "MPI_Win_detach", "MPI_Comm_free", "MPI_Request_free", "MPI_Cancel", "MPI_Pcontrol",
     "MPI_Reduce_local"}) | frozenset(n for n in NXN | BROADCAST | REDUCE | BARRIER if n.startswith("MPI_I"))


def _compute_before(f: Frames, tm: _Times) -> Any:
    """event ids -> the computation of their thread since its previous call that could wait for
    another rank (NEVER_WAITS are passed over, their time in MPI left out); 0 for a first call. Per
    thread: the rank's previous call may be another thread's, still running (a thread that computed
    150 ms before its send read as having computed 0 next to a thread waiting in MPI_Recv)."""
    never = f.code_table(NEVER_WAITS | frozenset(n + "_c" for n in NEVER_WAITS))[f.call_codes()]
    # a collective no other rank takes part in (on MPI_COMM_SELF, or a partition of one rank: LAMMPS'
    # replicas) waits for no one: rank 2's 1.8 s between the world's collectives, in 4,150 such calls,
    # read "did not compute noticeably longer ... held up earlier"
    coll = f.column("coll_id")
    if coll.size and coll.max() >= 0:
        members = np.bincount(coll[coll >= 0])
        never = never | ((coll >= 0) & (members[np.maximum(coll, 0)] == 1))
    # a rank's own file reads and writes are its work, as computation is (the late rank wrote an HDF5 file
    # alone while the others waited in a barrier: "did not compute noticeably longer"); collective ones
    # wait for the others and stay calls that could wait
    own_io = file_io_rows(f) & ~f.code_table(frozenset(collective_file_io_calls(f.call_names)))[f.call_codes()]
    n = never.size
    key = f.stream()
    threads = f.threads()
    order, place = threads if threads is not None else (None, None)
    # in the threads' order (rows are in rank, time order; threads interleaved where a rank has several)
    passes = never | own_io
    seq = passes if order is None else passes[order]
    last_waiting = np.maximum.accumulate(np.where(seq, -1, np.arange(n)))  # last place that could wait
    passed = np.where(never, np.maximum(tm.leave - tm.enter, 0), 0)  # not own_io: its time is work
    in_mpi = (passed if order is None else passed[order]).cumsum()  # time in passed-over calls

    def compute(e: I64) -> I64:
        pos = e if place is None else place[e]
        p = np.where(pos > 0, last_waiting[np.maximum(pos - 1, 0)], -1)
        row = np.maximum(p, 0) if order is None else order[np.maximum(p, 0)]
        ok = (p >= 0) & (key[row] == key[e]) & (tm.leave[row] >= 0)
        between = in_mpi[np.maximum(pos - 1, 0)] - in_mpi[np.maximum(p, 0)]
        return np.where(ok, np.maximum(tm.enter[e] - tm.leave[row] - between, 0), 0)

    return compute


def wait_state_rows(waits: pl.DataFrame, top_causes: int = TOP_CAUSES) -> pl.DataFrame:
    """Per (pattern, rank, call, callsite): instances, seconds and caused_by (the late
    ranks and call sites, largest first: rank, callsite, seconds, instances,
    from_callsite, excess_compute_seconds), largest first."""
    keys = ["pattern", "rank", "call", "callsite"]
    rows = waits.group_by(keys).agg(pl.len().alias("instances"), (pl.col("wait_ns").sum() / 1e9).alias("seconds"))
    causes = (
        waits.group_by(keys + ["cause_rank", "cause_callsite"])
        .agg((pl.col("wait_ns").sum() / 1e9).alias("seconds"), pl.len().alias("instances"),
             pl.col("cause_from_callsite").drop_nulls().first().alias("from_callsite"),
             (pl.col("delay_ns").clip(lower_bound=0).sum() / 1e9).alias("excess_compute_seconds"))
        .sort("seconds", descending=True)
        .group_by(keys, maintain_order=True)
        .agg(pl.struct(pl.col("cause_rank").alias("rank"), pl.col("cause_callsite").cast(pl.Utf8).alias("callsite"),
                       "seconds", "instances", pl.col("from_callsite").cast(pl.Utf8),
                       "excess_compute_seconds").head(top_causes).alias("caused_by"))
    )
    return (rows.join(causes, on=keys, how="left", nulls_equal=True)
            .with_columns(pl.col("pattern").cast(pl.Utf8), pl.col("call").cast(pl.Utf8),
                          pl.col("callsite").cast(pl.Utf8))
            .sort(["seconds", "rank"], descending=[True, False]))


def waited_by_rank(waits: pl.DataFrame, ranks: int) -> I64:
    """Per rank: the wall time in which any of its threads waited (busy.py: the union of the waits'
    [entry, release] intervals; the sum where the rank has one thread in MPI)."""
    release, wait = waits["release_ns"].to_numpy(), waits["wait_ns"].to_numpy()
    return union_by_rank(waits["rank"].to_numpy(), release - wait, release, ranks)


def _not_waited_ns(f: Frames, waits: pl.DataFrame) -> I64:
    """Each event's time in MPI less the wait a pattern found in it (a fresh array: callers zero parts)."""
    ns = in_mpi_ns(f).copy()
    ns[waits["event"].to_numpy()] -= waits["wait_ns"].to_numpy()
    return ns


def busy_calls(f: Frames, waits: pl.DataFrame, top: int = 3) -> list[tuple[str, int]]:
    """The calls whose time in MPI went to moving data rather than waiting (their time less their
    waits; not polling, one-sided synchronisation or MPI-IO), summed over the ranks, most first:
    what a communication-bound run spends its time in."""
    busy = _not_waited_ns(f, waits)
    codes = f.call_codes()
    busy[f.code_table(POLLING | RMA_SYNC)[codes] | file_io_rows(f)] = 0
    per_code = np.bincount(codes, weights=np.maximum(busy, 0), minlength=len(f.call_names))
    order = np.argsort(-per_code, kind="stable")[:top]
    return [(f.call_names[c], int(per_code[c])) for c in order if per_code[c] > 0]


def unattributed_ns(f: Frames, waits: pl.DataFrame) -> dict[str, int]:
    """Time in polling calls and in one-sided synchronisation (POLLING, RMA_SYNC), summed over
    the ranks, less the waits the patterns already found in those calls."""
    in_mpi = _not_waited_ns(f, waits)
    codes = f.call_codes()
    # a test that completed file accesses only is MPI-IO time (rank_times' io_ns), not waiting for a rank
    polling = f.code_table(POLLING)[codes] & ~file_io_rows(f)
    return {"polling": int(np.maximum(in_mpi[polling], 0).sum()),
            "one-sided synchronisation": int(np.maximum(in_mpi[f.code_table(RMA_SYNC)[codes]], 0).sum())}
