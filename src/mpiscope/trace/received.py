"""What calls received: each collective's `recv_bytes`, and the `bytes` of a call that
completed several requests (Waitall & co), from the records.

From format 4 on (record.RECV_BYTES_SINCE) the recorder follows a collective's
record, or a persistent collective's start (sub:pcoll), with a sub:recv_bytes
record where what it received differs from what it sent; a collective without
one received what it sent (an allreduce, a barrier). Between the two records
there may be a block marker (sub:block) and a request found shared at the
start (sub:immediate). Older traces did not record it: their recv_bytes are null.
"""

from __future__ import annotations

import numpy as np

from mpiscope.trace.columns import FIRST_TABLE_ID, ROLE, Records
from mpiscope.trace.match import P2P
from mpiscope.trace.requests import StartLinks
from mpiscope.trace.tables import Rows, role_is

MAX_BETWEEN = 2  # records that may sit between a collective and its sub:recv_bytes


def _owners(rec: Records) -> tuple[np.ndarray, np.ndarray]:
    """(owner record, bytes) of each sub:recv_bytes record: the nearest call or persistent
    collective start before it in its thread's stream; owner -1 where there is none."""
    sub = np.flatnonzero(rec.role == ROLE["coll_recv"])
    owner = sub - 1
    for _ in range(MAX_BETWEEN + 1):
        at = np.maximum(owner, 0)
        hit = (rec.call[at] >= FIRST_TABLE_ID) | (rec.role[at] == ROLE["pcoll"])
        step = (owner >= 0) & ~hit
        if not step.any():
            break
        owner[step] -= 1
    at = np.maximum(owner, 0)
    same = (owner >= 0) & (rec.rank[at] == rec.rank[sub]) & (rec.thread[at] == rec.thread[sub])
    ok = same & ((rec.call[at] >= FIRST_TABLE_ID) | (rec.role[at] == ROLE["pcoll"]))
    return np.where(ok, owner, -1), rec.bytes[sub]


def add_recv_bytes(rec: Records, rows: Rows, starts: Rows, start_index: np.ndarray, recorded: bool) -> None:
    """rows["recv_bytes"] for the event rows, starts["recv_bytes"] for the persistent collective
    starts (their records are `start_index`), each with a validity mask `recv_valid`: set on the
    collective calls, the *_init calls of persistent collectives (one instance's bytes, as their
    `bytes`) and the starts, when the trace records received bytes."""
    coll = role_is(rows["role"], "coll", "pcoll_init")
    rows["recv_bytes"] = rows["bytes"].copy()
    rows["recv_valid"] = coll & recorded
    starts["recv_bytes"] = starts["bytes"].copy()
    starts["recv_valid"] = np.full(starts["bytes"].size, recorded)
    if not recorded:
        return
    owner, nbytes = _owners(rec)
    found = owner >= 0
    owner, nbytes = owner[found], nbytes[found]
    is_start = rec.role[owner] == ROLE["pcoll"]
    event = rec.event[owner[~is_start]]
    rows["recv_bytes"][event] = nbytes[~is_start]
    pos = np.searchsorted(start_index, owner[is_start])
    starts["recv_bytes"][pos] = nbytes[is_start]


def add_completed_bytes(rows: Rows, links: StartLinks) -> None:
    """rows["bytes"] of the calls that complete several requests (Waitall, Waitsome, Testall,
    Testsome): what the receives they completed received, from each request's sub:complete
    record, as an MPI_Wait's own record holds what its receive received. Sends add nothing."""
    by = links.completed_by
    done = by >= 0
    if not done.any():
        return
    multi = role_is(rows["role"], "completion")
    ev, nbytes = by[done], links.bytes[done]
    take = multi[ev] & (nbytes > 0)
    if not take.any():
        return
    # in place on the rows that get bytes (a bincount over every row took 0.14 s of 10 M records' merge)
    np.add.at(rows["bytes"], ev[take], nbytes[take].astype(rows["bytes"].dtype))


def overclaimed(p2p: P2P, si: np.ndarray, ri: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(receive event, bytes too many) of the matched receives whose completion recorded more than
    their message held: a message holds what its send sent, and a receive whose status the recorder
    could not take (MPICH 5.0's MPI_Isendrecv: its status names another tag and count) recorded the
    size of its buffer (800 bytes for an 8-byte message)."""
    excess = p2p.recv_bytes[ri] - p2p.send_bytes[si]
    over = excess > 0
    return p2p.recvs.event[ri][over], excess[over]


def take_back(rows: Rows, events: np.ndarray, excess: np.ndarray, offset: int = 0) -> None:
    """Take `excess` off the `bytes` of the calls that completed the nonblocking receives `events`
    (global ids; the rows' ids start at `offset`), where they are rows of `rows`: an MPI_Wait's or a
    Waitall's bytes are what its receives received."""
    idx = events - offset
    here = (idx >= 0) & (idx < rows["event"].size)
    idx, excess = idx[here], excess[here]
    by = rows["completed_by"][idx] - offset
    done = (rows["completed_by"][idx] >= 0) & (by >= 0) & (by < rows["event"].size)
    np.subtract.at(rows["bytes"], by[done], excess[done].astype(rows["bytes"].dtype))
