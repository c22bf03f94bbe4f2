"""The critical path of a run: the chain of work that set its length.

Walked backwards from the rank that finishes last (entry into MPI_Finalize, else
its last leave): on the current rank, go back to the end of its latest wait state
before the current time; the time from there on was that rank's own work (on the
path); the wait was released by the late rank's call (the send, the receive
posting, the last entry into the collective), so the path jumps to that rank at
the entry of that call and goes on back from there, until it reaches the start of
a rank (its leave of MPI_Init). Each rank's share is the part of the path's length
spent on it. Each jump is one binary search in that rank's waits (NumPy): the
loop runs once per jump, not per event.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl


@dataclass(frozen=True)
class CriticalPath:
    t_start_ns: int
    t_end_ns: int
    end_rank: int
    ns_by_rank: list[int]
    jumps: int

    @property
    def seconds(self) -> float:
        return sum(self.ns_by_rank) / 1e9

    @property
    def share_by_rank(self) -> list[float]:
        total = sum(self.ns_by_rank)
        return [ns / total if total else 0.0 for ns in self.ns_by_rank]

    def to_json(self) -> dict[str, Any]:
        return {"seconds": self.seconds, "share_by_rank": self.share_by_rank,
                "seconds_by_rank": [ns / 1e9 for ns in self.ns_by_rank], "t_start_ns": self.t_start_ns,
                "t_end_ns": self.t_end_ns, "end_rank": self.end_rank, "jumps": self.jumps}


def critical_path(waits: pl.DataFrame, times: pl.DataFrame) -> CriticalPath:
    """waits: wait_events() rows (rank, release_ns, cause_rank, cause_time_ns);
    times: rank_times() (rank, t_start_ns, t_end_ns), one row per rank in rank order."""
    nranks = times.height
    start = times["t_start_ns"].fill_null(np.iinfo(np.int64).max).to_numpy()
    end = times["t_end_ns"].fill_null(np.iinfo(np.int64).min).to_numpy()
    ns_by_rank = np.zeros(nranks, np.int64)
    if nranks == 0 or (end == np.iinfo(np.int64).min).all():
        return CriticalPath(0, 0, 0, ns_by_rank.tolist(), 0)
    w = waits.select("rank", "release_ns", "cause_rank",
                     pl.min_horizontal("cause_time_ns", "release_ns").alias("jump_to")).sort("rank", "release_ns")
    rank = w["rank"].to_numpy()
    release, cause, jump_to = w["release_ns"].to_numpy(), w["cause_rank"].to_numpy(), w["jump_to"].to_numpy()
    first = np.searchsorted(rank, np.arange(nranks + 1))  # waits of rank r: first[r]:first[r+1]
    r = int(np.argmax(end))
    t_end = t = int(end[r])
    jumps = 0
    while True:
        lo, hi = first[r], first[r + 1]
        # the latest wait of rank r that ended before t (strictly: t falls at every jump)
        j = lo + int(np.searchsorted(release[lo:hi], t, side="left")) - 1
        if j < lo or release[j] <= start[r]:
            ns_by_rank[r] += max(t - int(start[r]), 0)
            t_start = min(t, int(start[r]))
            break
        ns_by_rank[r] += t - int(release[j])
        t, r = int(jump_to[j]), int(cause[j])
        jumps += 1
    return CriticalPath(t_start, t_end, int(np.argmax(end)), ns_by_rank.tolist(), jumps)
