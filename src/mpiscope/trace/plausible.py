"""Which records of an unsealed block can be true (issue 21).

Blocks the recorder sealed carry a CRC-32C and are kept or dropped whole.
Blocks without one (still in a ring when a rank died, or written before
format 5) are checked record by record: a record that no recorder could
have written is dropped. Damage that happens to leave a plausible record
(a changed tag, a few low bits of a time) cannot be told from data; the
checks bound what it can do (no time outside the rank's clock window, no
peer outside the world), which is what keeps one damaged file from
spoiling the clock correction of every rank.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass

import numpy as np

from mpiscope.trace import record as R

# No call moves more than this many bytes (256 TiB): a larger count is damage.
MAX_BYTES = 1 << 48
# Request ids are numbered from 1 by the rank; an id beyond what its records could have numbered is damage.
ID_MASK = 0x7FFFFFFF
SUB_BLOCK = 4  # gen.py's sub:block: the block switch, timed when it happened, before its block's first record


@dataclass(frozen=True)
class Limits:
    """What a rank's records may hold."""
    known_call: np.ndarray     # bool by call id
    world_size: int
    tick_lo: int               # the rank's clock window, in ticks
    tick_hi: int
    comms: np.ndarray          # bool by local communicator id: registered (or the table is damaged there)
    max_request: int


def reasons(recs: np.ndarray, lim: Limits) -> np.ndarray:
    """A code per record: 0 plausible, else the first check it fails (REASONS)."""
    call = recs["call"].astype(np.int64)
    t_enter, t_leave = recs["t_enter"], recs["t_leave"]
    code = np.zeros(recs.size, np.uint8)

    def fail(mask: np.ndarray, reason: int) -> None:
        code[(code == 0) & mask] = reason

    fail(~lim.known_call[np.minimum(call, lim.known_call.size - 1)] | (call >= lim.known_call.size), 1)
    outside = (t_enter < lim.tick_lo) | (t_enter > lim.tick_hi) | \
        ((t_leave != 0) & ((t_leave < t_enter) | (t_leave > lim.tick_hi)))
    fail(outside, 2)
    fail((recs["peer"] < R.PEER_CANCELLED) | (recs["peer"] >= lim.world_size), 3)
    comm = recs["comm"].astype(np.int64)
    fail((comm != R.COMM_UNKNOWN) & ~lim.comms[np.minimum(comm, lim.comms.size - 1)], 4)
    fail((recs["req"] & ID_MASK) > lim.max_request, 5)
    fail(recs["bytes"] >= MAX_BYTES, 6)
    timed = (code == 0) & (call != SUB_BLOCK)
    fail(timed & ~_in_order(t_enter, timed), 2)
    return code


REASONS = {1: "unknown call id", 2: "time outside the rank's clock or out of order", 3: "peer outside the world",
           4: "unregistered communicator", 5: "request id never issued", 6: "impossible byte count"}


def _in_order(t: np.ndarray, considered: np.ndarray) -> np.ndarray:
    """True for the considered records that belong to the longest run of
    non-decreasing entry times (a thread enters its calls in time order; a
    sub-record has its call's entry time); the others broke that order."""
    keep = considered.copy()
    idx = np.flatnonzero(considered)
    values = t[idx]
    if values.size < 2 or bool((values[1:] >= values[:-1]).all()):
        return keep
    # longest non-decreasing subsequence, patience sorting (damage is rare: this runs on damaged blocks only)
    tails: list[int] = []
    tail_pos: list[int] = []
    parent = np.full(values.size, -1, np.int64)
    for i, v in enumerate(values.tolist()):
        k = bisect_right(tails, v)
        if k == len(tails):
            tails.append(v)
            tail_pos.append(i)
        else:
            tails[k] = v
            tail_pos[k] = i
        parent[i] = tail_pos[k - 1] if k else -1
    chain = np.zeros(values.size, bool)
    i = tail_pos[-1]
    while i >= 0:
        chain[i] = True
        i = int(parent[i])
    keep[idx] = chain
    return keep
