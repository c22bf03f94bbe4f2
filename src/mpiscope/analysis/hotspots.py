"""Hot spots: ranks through which far more point-to-point traffic passes than through the others.

S-CAT (003 §5) saw it in N-queens: the master receives most messages and the
workers queue behind it. A rank is a hot spot for a measure (messages received,
messages sent, bytes received, bytes sent) when its value is at least
HOT_SPOT_RATIO times the mean over all ranks, and HOT_SPOT_RATIO times the mean
over the ranks at the other end of its messages: a master serves ranks that
handle little themselves, whereas ranks that only exchange with each other are
equals (PRK's MPISHM transpose on 4 ranks, 2 per shared-memory domain: the two
domain leaders each received half the messages, 2.0x the mean of the ranks, and
were called masters); and with MIN_PEERS ranks or more, as a master serves several
(PRK's MPISHM pipeline: the last rank alone sent bytes, 88 to rank 0). Only in runs
of MIN_RANKS ranks or more: with two ranks every one-way exchange would qualify.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from mpiscope.analysis.frames import Frames

HOT_SPOT_RATIO = 2.0
MIN_RANKS = 3
MIN_PEERS = 2
MEASURES = ("messages_received", "messages_sent", "bytes_received", "bytes_sent")


@dataclass(frozen=True)
class HotSpot:
    rank: int
    measure: str
    value: int
    mean: float
    total: int
    peers_mean: float = 0.0  # the measure's mean over the ranks at the other end of its messages

    @property
    def ratio(self) -> float:
        return self.value / self.mean if self.mean else 0.0

    @property
    def share(self) -> float:
        return self.value / self.total if self.total else 0.0

    def to_json(self) -> dict[str, Any]:
        return {"rank": self.rank, "measure": self.measure, "value": self.value, "mean": self.mean,
                "ratio": self.ratio, "share": self.share, "total": self.total, "peers_mean": self.peers_mean}


def traffic(f: Frames) -> pl.DataFrame:
    """Per rank: messages and bytes sent and received (point-to-point, matched)."""
    m = f.messages
    src, dst = m["src"].to_numpy(), m["dst"].to_numpy()
    nbytes = m["bytes"].fill_null(0).to_numpy()
    return pl.DataFrame({
        "rank": np.arange(f.ranks, dtype=np.int32),
        "messages_received": np.bincount(dst, minlength=f.ranks)[: f.ranks],
        "messages_sent": np.bincount(src, minlength=f.ranks)[: f.ranks],
        "bytes_received": np.bincount(dst, weights=nbytes, minlength=f.ranks)[: f.ranks].astype(np.int64),
        "bytes_sent": np.bincount(src, weights=nbytes, minlength=f.ranks)[: f.ranks].astype(np.int64),
    })


def peers_mean(values: np.ndarray, mine: np.ndarray, theirs: np.ndarray) -> np.ndarray:
    """Per rank: the mean of `values` over the ranks at the other end of its messages (`mine` the
    rank of each message at this end, `theirs` at the other), each message counted once; 0 for a
    rank without messages."""
    n = np.bincount(mine, minlength=values.size)[: values.size]
    total = np.bincount(mine, weights=values[theirs], minlength=values.size)[: values.size]
    return np.divide(total, n, out=np.zeros(values.size), where=n > 0)


def distinct_peers(ranks: np.ndarray, mine: np.ndarray, theirs: np.ndarray, world: int) -> np.ndarray:
    """How many different ranks each of `ranks` has at the other end of its messages."""
    asked = np.zeros(world, bool)
    asked[ranks] = True
    keep = asked[mine]
    pairs = np.unique(mine[keep].astype(np.int64) * world + theirs[keep])
    return np.bincount(pairs // world, minlength=world)[ranks]


def hot_spots(f: Frames) -> list[HotSpot]:
    """The hot spots, largest ratio first."""
    if f.ranks < MIN_RANKS or f.messages.height == 0:
        return []
    t = traffic(f)
    src, dst = f.messages["src"].to_numpy(), f.messages["dst"].to_numpy()
    found = []
    for measure in MEASURES:  # four measures, not per event
        values = t[measure].to_numpy()
        mean = float(values.mean())
        if mean <= 0:
            continue
        mine, theirs = (dst, src) if measure.endswith("received") else (src, dst)
        peers = peers_mean(values.astype(np.float64), mine, theirs)
        hot = np.flatnonzero((values >= HOT_SPOT_RATIO * mean) & (values >= HOT_SPOT_RATIO * peers))
        for r in hot[distinct_peers(hot, mine, theirs, values.size) >= MIN_PEERS]:
            found.append(HotSpot(int(r), measure, int(values[r]), mean, int(values.sum()), float(peers[r])))
    return sorted(found, key=lambda h: (-h.ratio, h.rank, MEASURES.index(h.measure)))
