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

    def columns(self) -> dict[str, np.ndarray]:
        """The arrays by name, as the kernels take them."""
        return {"index": self.index, "t_complete": self.t_complete, "completed_by": self.completed_by,
                "peer": self.peer, "tag": self.tag, "bytes": self.bytes}


def link_starts(rec: Records) -> StartLinks:
    start = np.flatnonzero(rec.starts & (rec.req != 0) & (rec.t_leave >= 0))
    t_complete, completed_by, peer, tag, nbytes = native.link_starts(
        rec.columns(), start, ROLE["complete"], ROLE["immediate"])
    return StartLinks(start, t_complete, completed_by, peer, tag, nbytes)
