"""The size budget of a report (`--max-size`): which tiles it embeds.

All single events when they fit; else the pyramid of bins for the whole run
(whole levels, coarse to fine, within a share of the budget) plus the event
tiles of the busiest windows (most calls first) until the budget is used.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import numpy as np

PYRAMID_SHARE = 0.4  # of the budget left after the page itself, when not every event fits
BATCH = 32  # event tiles split and encoded per pass


def b64_len(n: int) -> int:
    return 4 * ((n + 2) // 3)


def cost(key: str, blob: bytes) -> int:
    """Bytes a tile adds to the page: `"key":"base64",`."""
    return len(key) + 6 + b64_len(len(blob))


@dataclass
class Taken:
    tiles: dict[str, bytes] = field(default_factory=dict)
    used: int = 0
    deepest: int = -1  # bin levels: the last whole level taken
    ids: list[int] = field(default_factory=list)  # event tiles: the windows taken

    def add(self, key: str, blob: bytes) -> None:
        self.tiles[key] = blob
        self.used += cost(key, blob)

    def drop_last(self) -> None:
        """Give back the last tile taken (event tiles)."""
        key = next(reversed(self.tiles))
        self.used -= cost(key, self.tiles.pop(key))
        self.ids.pop()


def take_levels(levels: Iterable[list[tuple[str, bytes]]], budget: int, growth: float = 2.0) -> Taken:
    """Whole levels while they fit; level 0 always (the page needs the whole run). A level is
    not even computed when the last one times `growth` (a level has twice the bins of the
    one above it) would not fit."""
    taken = Taken()
    last = 0
    it = iter(levels)
    for k in itertools.count():
        if k > 0 and taken.used + growth * last > budget:
            break
        tiles = next(it, None)
        if tiles is None:
            break
        size = sum(cost(key, blob) for key, blob in tiles)
        if k > 0 and taken.used + size > budget:
            break
        for key, blob in tiles:
            taken.add(key, blob)
        taken.deepest, last = k, size
    return taken


def busiest(counts: np.ndarray, tolerance: float = 0.05) -> list[int]:
    """Non-empty windows, most calls first, in bands of `tolerance` down from the busiest window:
    within a band the earlier window comes first, so that a steady run gets stretches of detail
    rather than windows scattered by jitter."""
    nonempty = np.flatnonzero(counts > 0)
    band = np.floor(np.log(counts.max(initial=1) / counts[nonempty]) / np.log1p(tolerance))
    order = np.lexsort((nonempty, band))
    return [int(i) for i in nonempty[order]]


def take_tiles(
    order: list[int],
    key: Callable[[int], str],
    encode: Callable[[list[int]], dict[int, bytes]],
    budget: int,
    per_tile_guess: float,
) -> Taken:
    """Event tiles in `order` while they fit, encoding up to BATCH at a time (a tile that does
    not fit is skipped, a smaller one later may; a batch of which none fits ends the search)."""
    taken = Taken()
    pos = 0
    guess = max(per_tile_guess, 1.0)
    while pos < len(order) and budget - taken.used > 0:
        room = budget - taken.used
        n = int(min(BATCH, max(1, room // guess * 1.2)))
        batch = order[pos : pos + n]
        pos += n
        blobs = encode(batch)
        before = len(taken.ids)
        for i in batch:
            c = cost(key(i), blobs[i])
            if taken.used + c <= budget:
                taken.add(key(i), blobs[i])
                taken.ids.append(i)
        if len(taken.ids) == before:  # nothing of a whole batch fitted: the rest is no smaller
            break
        guess = max(1.0, float(np.mean([cost(key(i), blobs[i]) for i in batch])))
    return taken


def windows(ids: Iterable[int], k: int, span_ns: float) -> list[list[float]]:
    """Tiles of level k as merged [t_start, t_end) ranges (relative ns), in time order."""
    out: list[list[float]] = []
    w = span_ns / 2**k
    for i in sorted(set(ids)):
        if out and out[-1][1] == i * w:
            out[-1][1] = (i + 1) * w
        else:
            out.append([i * w, (i + 1) * w])
    return out
