"""Nonblocking starts tied to their completions, by (rank, request id).

A completion record (Wait/Test/Waitany/Testany, or a sub:complete of
Waitall & co) carries the id of the request it finished and, for receives,
the status envelope. Requests MPI returned as shared, already complete
objects are complete at their start. The first completion of a (rank,
request id) finishes it; the kernel (native/kernels/merge/links.c) finds it
through a hash table.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mpiscope.trace import native
from mpiscope.trace.columns import ROLE, Records


@dataclass
class StartLinks:
    index: np.ndarray        # record index of each nonblocking start
    t_complete: np.ndarray   # ns, -1 if never completed
    completed_by: np.ndarray # event id of the completing call, -1 if none
    peer: np.ndarray         # status envelope of the completion (receives)
    tag: np.ndarray
    bytes: np.ndarray

    def select(self, mask: np.ndarray) -> StartLinks:
        return StartLinks(*(a[mask] for a in (self.index, self.t_complete, self.completed_by, self.peer,
                                               self.tag, self.bytes)))


def request_key(rec: Records, idx: np.ndarray) -> np.ndarray:
    """(rank, request id) of records as one int64: request ids are rank-local."""
    return np.asarray(rec.rank[idx].astype(np.int64) << 32 | rec.req[idx])


def link_starts(rec: Records) -> StartLinks:
    start = np.flatnonzero(rec.starts & (rec.req != 0) & (rec.t_leave >= 0))
    t_complete, completed_by, peer, tag, nbytes = native.link_starts(
        rec.columns(), start, ROLE["complete"], ROLE["immediate"])
    return StartLinks(start, t_complete, completed_by, peer, tag, nbytes)
