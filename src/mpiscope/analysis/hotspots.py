"""Hot spots: ranks through which far more point-to-point traffic passes than through the others.

S-CAT (003 §5) saw it in N-queens: the master receives most messages and the
workers queue behind it. A rank is a hot spot for a measure (messages received,
messages sent, bytes received, bytes sent) when its value is at least
HOT_SPOT_RATIO times the mean over all ranks. Only in runs of MIN_RANKS ranks or
more: with two ranks every one-way exchange would qualify.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from mpiscope.analysis.frames import Frames

HOT_SPOT_RATIO = 2.0
MIN_RANKS = 3
MEASURES = ("messages_received", "messages_sent", "bytes_received", "bytes_sent")


@dataclass(frozen=True)
class HotSpot:
    rank: int
    measure: str
    value: int
    mean: float
    total: int

    @property
    def ratio(self) -> float:
        return self.value / self.mean if self.mean else 0.0

    @property
    def share(self) -> float:
        return self.value / self.total if self.total else 0.0

    def to_json(self) -> dict[str, Any]:
        return {"rank": self.rank, "measure": self.measure, "value": self.value, "mean": self.mean,
                "ratio": self.ratio, "share": self.share, "total": self.total}


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


def hot_spots(f: Frames) -> list[HotSpot]:
    """The hot spots, largest ratio first."""
    if f.ranks < MIN_RANKS or f.messages.height == 0:
        return []
    t = traffic(f)
    found = []
    for measure in MEASURES:  # four measures, not per event
        values = t[measure].to_numpy()
        mean = float(values.mean())
        for r in np.flatnonzero(values >= HOT_SPOT_RATIO * mean if mean > 0 else np.zeros(0, bool)):
            found.append(HotSpot(int(r), measure, int(values[r]), mean, int(values.sum())))
    return sorted(found, key=lambda h: (-h.ratio, h.rank, MEASURES.index(h.measure)))
