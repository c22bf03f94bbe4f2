"""Point-to-point matching (in native/kernels/merge/match.c) and collective grouping.

Messages: MPI's non-overtaking rule says that two messages with the same
(communicator, source, destination, tag) are received in the order they were
sent, by the receives in the order they were posted. So the k-th send of an
envelope matches the k-th receive that delivered that envelope (its actual
source and tag, read from the status, which also resolves wildcards); a
receive is posted at Recv/Irecv entry, or at Mprobe entry for matched probes.

Collectives: members of a communicator call its collectives in the same
order (MPI-3.1 §5.12), so (communicator, per-rank sequence number) names
one instance on every rank; the recorder keeps that number even while
recording is paused.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import polars as pl

from mpiscope.trace import native
from mpiscope.trace.columns import ROLE, ROLES, Records
from mpiscope.trace.reader import RankFile
from mpiscope.trace.requests import StartLinks


@dataclass
class Side:
    """One side (sends or receives) of point-to-point traffic, as arrays."""
    comm: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    tag: np.ndarray
    posted: np.ndarray   # ns: send entry, or receive posting
    event: np.ndarray    # event id: ties broken by recording order
    thread: np.ndarray | None = None   # the thread that sent or posted it, where a rank has several

    @property
    def size(self) -> int:
        return int(self.comm.size)

    @classmethod
    def of(cls, columns: Mapping[str, np.ndarray]) -> Side:
        """A side from its columns by name (the kernel's, a spill's), its thread where they hold it."""
        return cls(*(columns[f] for f in SIDE_FIELDS), columns.get("thread"))

    def columns(self) -> dict[str, np.ndarray]:
        """Its columns by name, the thread where it has it."""
        held = {f: getattr(self, f) for f in SIDE_FIELDS}
        return held if self.thread is None else {**held, "thread": self.thread}

    def take(self, keep: np.ndarray) -> Side:
        """The rows `keep` (a mask or indices) selects."""
        return Side.of({f: values[keep] for f, values in self.columns().items()})


SIDE_FIELDS = ("comm", "src", "dst", "tag", "posted", "event")   # Side's, but the optional thread


@dataclass
class P2P:
    sends: Side
    send_bytes: np.ndarray
    send_leave: np.ndarray
    recvs: Side
    recv_bytes: np.ndarray
    recv_leave: np.ndarray

    def without(self, events: np.ndarray) -> P2P:
        """The sends and receives of other calls than `events` (calls that failed)."""
        if not events.size:
            return self
        s, r = ~np.isin(self.sends.event, events), ~np.isin(self.recvs.event, events)
        return P2P(self.sends.take(s), self.send_bytes[s], self.send_leave[s],
                   self.recvs.take(r), self.recv_bytes[r], self.recv_leave[r])


# merge.h's MSM_* bits: what each role is for point-to-point traffic
_P2P_KINDS = {1: ("send",), 2: ("isend", "psend", "isendrecv"), 4: ("recv", "recv_part"),
              8: ("irecv", "precv", "isendrecv"), 16: ("mprobe",), 32: ("mrecv",), 64: ("imrecv",)}


def p2p_sides(rec: Records, links: StartLinks, threads: bool = False) -> P2P:
    """The sends and receives of the records; with `threads` (a rank has several: threaded_ranks),
    the thread of each."""
    kind = np.zeros(len(ROLES), np.uint8)
    for bit, roles in _P2P_KINDS.items():
        kind[[ROLE[r] for r in roles]] |= bit
    s, r = native.p2p(rec.columns(), kind, links.columns())
    thread_of = None
    if threads:  # each event's thread, by event id (a call's sub-records share its event)
        has = rec.event >= 0
        thread_of = np.zeros(int(rec.event.max()) + 1 if has.any() else 0, np.uint16)
        thread_of[rec.event[has]] = rec.thread[has]
    return P2P(*(item for d in (s, r) for item in (
        Side.of(d if thread_of is None else {**d, "thread": thread_of[d["event"]]}), d["bytes"], d["leave"])))


def match_messages(sends: Side, recvs: Side) -> tuple[np.ndarray, np.ndarray]:
    """Indices (into sends, into recvs) of the matched pairs, in envelope order
    (communicator, source, destination, tag), then posting order (time, event)."""
    def side(s: Side) -> dict[str, np.ndarray]:
        return {"comm": s.comm, "src": s.src, "dst": s.dst, "tag": s.tag, "t": s.posted, "ev": s.event}

    return native.match(side(sends), side(recvs))


# collectives.parquet's columns, in order (the merge in memory and in pieces: instances.py)
COLLECTIVE_COLUMNS = ("coll_id", "call", "comm", "root", "bytes", "recv_bytes", "ranks", "comm_size", "calls_seen",
                      "t_first_enter_ns", "t_last_enter_ns", "t_first_leave_ns", "t_last_leave_ns")


def threaded_ranks(files: list[RankFile]) -> tuple[int, ...]:
    """The ranks whose calls were recorded from more than one thread."""
    return tuple(sorted(f.rank for f in files if len(set(f.block_thread)) > 1))


def ambiguous(p: P2P, si: np.ndarray, ri: np.ndarray, threaded: tuple[int, ...]) -> np.ndarray:
    """Which matched pairs (si, ri) reorder_threads would look at: a receive that completed
    before its send began, between ranks of which one has several threads (`threaded`)."""
    done = p.recv_leave[ri]
    late = (done >= 0) & (done < p.sends.posted[si])
    if late.any():
        ranks = np.array(threaded, np.int64)
        late[late] = np.isin(p.sends.src[si][late], ranks) | np.isin(p.recvs.dst[ri][late], ranks)
    return late


def reorder_threads(p: P2P, si: np.ndarray, ri: np.ndarray, threaded: tuple[int, ...]) -> np.ndarray:
    """The receive paired with each matched send (ri reordered), where threads made the order
    ambiguous (issue 23). MPI orders the messages of one envelope as they were sent, but sends
    (or receives) that overlap in time on different threads of a rank have no order between
    them. Pairs (in matching order) whose sends or receives overlap in time, directly or through
    others, form a cluster; in a cluster where the order taken pairs a receive with a send
    entered after that receive completed (which the true pairing never does), the sends by
    entry are paired with the receives by completion instead: that pairing keeps every receive
    after its send wherever any pairing of the cluster does. Only clusters of several threads:
    a thread orders its own calls, so where one thread sent a cluster's messages and one posted
    their receives (or neither rank has several: `threaded`), the order taken is the true one,
    and a receive before its send there is the clocks' error, which their correction removes (or
    clamps). Re-paired by completion, two receives that one thread posted and a Waitany reported
    the other way round would swap their messages. Without the sides' threads (Side.thread),
    every cluster of a rank of several threads is taken as one of several threads."""
    late = ambiguous(p, si, ri, threaded)
    if not late.any():  # the common case: nothing to reorder
        return ri
    order = np.lexsort((p.sends.event[si], p.sends.posted[si], p.sends.tag[si], p.sends.dst[si],
                        p.sends.src[si], p.sends.comm[si]))
    si, ri, late = si[order], ri[order], late[order]
    s, r = p.sends, p.recvs
    never = np.iinfo(np.int64).max
    env = np.stack([s.comm[si], s.src[si], s.dst[si], s.tag[si]])
    new_env = np.r_[True, (env[:, 1:] != env[:, :-1]).any(axis=0)]
    enter, posted, done = s.posted[si], r.posted[ri], p.recv_leave[ri]
    send_end = np.where(p.send_leave[si] >= 0, p.send_leave[si], never)
    recv_end = np.where(done >= 0, done, never)
    group = np.cumsum(new_env)
    # a cluster starts where neither side overlaps anything before it in its envelope
    send_reach = _running_max(send_end, group)
    recv_reach = _running_max(recv_end, group)
    apart = (enter[1:] > send_reach[:-1]) & (posted[1:] > recv_reach[:-1])
    cluster = np.cumsum(np.r_[True, new_env[1:] | apart])
    # every cluster with a late pair at once (one by one, a scan of all pairs per cluster took
    # quadratic time): its members by entry take the receives by completion; both orders list the
    # clusters in turn, each as many members long
    at = np.flatnonzero(np.isin(cluster, cluster[late]))
    if s.thread is not None and r.thread is not None and at.size:
        at = at[_of_several_threads(cluster[at], s.thread[si][at], r.thread[ri][at])]
    by_entry = at[np.lexsort((enter[at], cluster[at]))]
    by_done = at[np.lexsort((recv_end[at], cluster[at]))]
    out = ri.copy()
    out[by_entry] = ri[by_done]
    back = np.empty_like(out)
    back[order] = out
    return back


def _of_several_threads(cluster: np.ndarray, send_thread: np.ndarray, recv_thread: np.ndarray) -> np.ndarray:
    """Which members of the clusters (each contiguous) belong to a cluster whose sends more than
    one thread made, or whose receives more than one thread posted."""
    starts = np.flatnonzero(np.r_[True, cluster[1:] != cluster[:-1]])
    several = np.zeros(starts.size, bool)
    for t in (send_thread.astype(np.int64), recv_thread.astype(np.int64)):
        several |= np.maximum.reduceat(t, starts) != np.minimum.reduceat(t, starts)
    return np.repeat(several, np.diff(np.r_[starts, cluster.size]))


def _running_max(x: np.ndarray, group: np.ndarray) -> np.ndarray:
    """Running maximum of x within each run of equal group ids: one accumulate over keys that
    put each group above the ones before it (group, rank of the value)."""
    uniq, rank = np.unique(x, return_inverse=True)
    g = np.cumsum(np.r_[True, group[1:] != group[:-1]]) - 1
    width = np.int64(uniq.size + 1)
    acc = np.maximum.accumulate(g.astype(np.int64) * width + rank.reshape(-1))
    return uniq[acc - g * width]
