"""A rank's time in MPI as wall time: the union of its calls' intervals.

Calls of one thread never overlap, so for a rank with one thread in MPI the
union is the sum of its calls' durations. Several threads of a rank can be in
MPI at once (MPI_THREAD_MULTIPLE): summing their calls counts that time twice,
and a rank waiting in MPI on two threads for 200 ms of a 205 ms run would show
400 ms in MPI, 195 % of its time. The union counts each moment once.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

I64 = npt.NDArray[np.int64]


def union_by_rank(rank: npt.NDArray[np.integer], enter: I64, end: I64, ranks: int) -> I64:
    """Per rank (index 0..ranks-1): the length of the union of the intervals [enter, end) of its
    rows. A row with end <= enter adds nothing (calls left out: pass end = enter)."""
    out = np.zeros(ranks, np.int64)
    if rank.size == 0:
        return out
    rank = rank.astype(np.int64, copy=False)
    origin = int(enter.min())
    # Ranks laid end to end on one time axis (each rank's times shifted by rank * span), so that
    # one running maximum over rows in (rank, enter) order never carries across ranks.
    span = int(np.maximum(end, enter).max()) - origin + 1
    if span * ranks >= 1 << 62:  # that axis would overflow: one rank at a time
        order = np.argsort(rank, kind="stable")
        bounds = np.searchsorted(rank[order], np.arange(ranks + 1))
        for r in np.flatnonzero(bounds[1:] > bounds[:-1]):
            rows = order[bounds[r]:bounds[r + 1]]
            out[r] = union_by_rank(np.zeros(rows.size, np.int64), enter[rows], end[rows], 1)[0]
        return out
    start = enter - origin + rank * span
    stop = np.maximum(end, enter) - origin + rank * span
    if np.any(np.diff(start) < 0):
        order = np.argsort(start, kind="stable")
        start, stop, rank = start[order], stop[order], rank[order]
    covered = np.empty_like(stop)
    covered[0] = start[0]
    np.maximum.accumulate(stop[:-1], out=covered[1:])
    np.maximum(covered, start, out=covered)  # where a row's own time begins, past what is counted
    added = np.maximum(stop - covered, 0)
    bounds = np.searchsorted(rank, np.arange(ranks + 1))  # rows are in rank order now
    has = bounds[1:] > bounds[:-1]
    out[has] = np.add.reduceat(added, bounds[:-1][has])
    return out
