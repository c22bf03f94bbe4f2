"""What each call returned (`rc`) and how many polls a record stands for (`count`), from the
sub-records the recorder writes after a call (format 6 on, issue 23):

* sub:rc after a call that returned an error, its return code in `tag`. Such a call stays an
  event, but is no message and no part of a collective instance (the merge leaves it out of
  matching and grouping: a failed MPI_Bsend sent nothing).
* sub:count after the record of a polling loop's unsuccessful calls (MPI_Test, MPI_Testany,
  MPI_Testsome, MPI_Testall, MPI_Iprobe, MPI_Improbe in a row from one call site, completing
  nothing): `bytes` calls, `callsite` ticks spent inside them. The record spans the first
  entry to the last exit; `inside_ns` says how much of that was inside MPI.
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
