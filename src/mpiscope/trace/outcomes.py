"""What each call returned (`rc`) and how many polls a record stands for (`count`), from the
sub-records the recorder writes after a call (format 6 on, issue 23):

* sub:rc after a call that returned an error, its return code in `tag`. Such a call stays an
  event, but is no message and no part of a collective instance (the merge leaves it out of
  matching and grouping: a failed MPI_Bsend sent nothing).
* sub:count after the record of a polling loop's unsuccessful calls (MPI_Test, MPI_Testany,
  MPI_Testsome, MPI_Testall, MPI_Iprobe, MPI_Improbe, MPI_Parrived in a row from one call site, completing
  nothing): `bytes` calls, `callsite` ticks spent inside them. The record spans the first
  entry to the last exit; `inside_ns` says how much of that was inside MPI. Where 2 to 4 polls
  of different call sites took turns, each has its record and sub:count, and their spans
  overlap: spread_cycles lays them one after the other.
"""

from __future__ import annotations

import numpy as np

from mpiscope.trace.columns import ROLE, Records
from mpiscope.trace.tables import Rows


def failed_events(rec: Records) -> np.ndarray:
    """Event ids of the calls that returned an error."""
    ev = rec.event[rec.role == ROLE["rc"]]
    return np.unique(ev[ev >= 0])


def add_outcomes(rec: Records, rows: Rows) -> None:
    """rows["rc"] (0: success), rows["count"] (calls a row stands for) and rows["inside"]
    (ns inside MPI of a folded poll, -1 for every other row)."""
    n = rows["event"].size
    rows["rc"] = np.zeros(n, np.int32)
    idx = np.flatnonzero(rec.role == ROLE["rc"])
    ev = rec.event[idx]
    ok = ev >= 0
    rows["rc"][ev[ok]] = rec.tag[idx[ok]]
    rows["count"] = np.ones(n, np.int64)
    rows["inside"] = np.full(n, -1, np.int64)
    idx = np.flatnonzero(rec.role == ROLE["count"])
    ev = rec.event[idx]
    ok = ev >= 0
    idx, ev = idx[ok], ev[ok]
    rows["count"][ev] = rec.bytes[idx].astype(np.int64)
    rate = np.ones(int(rec.rank.max(initial=0)) + 1)
    for rank, clock in rec.clocks.items():
        if rank < rate.size:
            rate[rank] = clock.ns_per_tick
    rows["inside"][ev] = np.rint(rec.callsite[idx].astype(np.float64) * rate[rec.rank[idx]]).astype(np.int64)
    spread_cycles(rows, np.unique(ev))


def spread_cycles(rows: Rows, folded: np.ndarray) -> None:
    """The rows of a folded cycle of polls (k call sites polled in turn) each span from their
    first entry to their last exit, so they overlap. They are laid one after the other across
    the cycle's span, in their order, each row's share of it its share of the time inside the
    calls (the calls' own times are not kept; a row's span stays at least its time inside):
    a thread's rows then never overlap, as a time-line and OTF2 need. `folded`: the rows of folded
    polls, in event order."""
    if folded.size < 2:
        return
    folded = folded[np.lexsort((folded, rows["thread"][folded], rows["rank"][folded]))]
    rank, thread = rows["rank"][folded], rows["thread"][folded]
    enter, leave = rows["t_enter"][folded], rows["t_leave"][folded]
    same = (rank[1:] == rank[:-1]) & (thread[1:] == thread[:-1])
    joins = same & (enter[1:] < leave[:-1]) & (leave[:-1] >= 0)  # a row that starts inside the one before
    if not joins.any():
        return
    group = np.concatenate([[0], np.cumsum(~joins)])
    starts = np.flatnonzero(np.concatenate([[True], ~joins]))
    sizes = np.diff(np.append(starts, folded.size))
    cycle = sizes[group] > 1
    folded, group, enter, leave = folded[cycle], group[cycle], enter[cycle], leave[cycle]
    first = np.minimum.reduceat(enter, np.flatnonzero(np.r_[True, group[1:] != group[:-1]]))
    last = np.maximum.reduceat(leave, np.flatnonzero(np.r_[True, group[1:] != group[:-1]]))
    _, g = np.unique(group, return_inverse=True)
    inside = np.maximum(rows["inside"][folded], 0).astype(np.float64)
    if (np.bincount(g, weights=inside) == 0).any():  # no time inside measured: by the calls instead
        inside = np.where((np.bincount(g, weights=inside) == 0)[g], rows["count"][folded], inside)
    share = inside / np.bincount(g, weights=inside)[g]
    before = np.cumsum(share) - share  # shares of the cycle's rows before each row, cumulative
    before -= (np.cumsum(share) - share)[np.flatnonzero(np.r_[True, g[1:] != g[:-1]])][g]
    span = (last - first)[g].astype(np.float64)
    t0 = first[g] + np.floor(before * span).astype(np.int64)
    t1 = np.where(np.r_[g[1:] != g[:-1], True], last[g], np.r_[t0[1:], 0])
    rows["t_enter"][folded] = t0
    rows["t_leave"][folded] = t1

