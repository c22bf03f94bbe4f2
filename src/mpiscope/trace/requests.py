"""Nonblocking starts tied to their completions, by (rank, request id).

A completion record (Wait/Test/Waitany/Testany, or a sub:complete of
Waitall & co) carries the id of the request it finished and, for receives,
the status envelope. Requests MPI returned as shared, already complete
objects are complete at their start.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

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
    parent_event = rec.parent_event
    done = np.flatnonzero((rec.role == ROLE["complete"]) & (rec.req != 0) & (rec.t_leave >= 0))
    dkey, first = np.unique(request_key(rec, done), return_index=True)
    done = done[first]
    late = np.unique(request_key(rec, np.flatnonzero(rec.role == ROLE["immediate"])))
    start = np.flatnonzero(rec.starts & (rec.req != 0) & (rec.t_leave >= 0))
    skey = request_key(rec, start)
    pos = np.minimum(np.searchsorted(dkey, skey), max(dkey.size - 1, 0))
    found = (dkey[pos] == skey) if dkey.size else np.zeros(start.size, bool)
    comp = np.where(found, done[pos] if dkey.size else 0, 0)
    immediate = rec.immediate[start] | np.isin(skey, late)
    t_complete = np.where(immediate, rec.t_leave[start], np.where(found, rec.t_leave[comp], -1))
    completed_by = np.where(immediate, parent_event[start], np.where(found, parent_event[comp], -1))
    missing = ~found
    peer = np.where(missing, -1, rec.peer[comp])
    return StartLinks(start, t_complete, completed_by, peer, np.where(missing, 0, rec.tag[comp]),
                      np.where(missing, 0, rec.bytes[comp]))
