"""Tiles by key: the bin pyramid level by level, and event tiles of chosen windows.

Keys are those of docs/report-protocol.md: `b/K/I` (bin tile) and `e/K/I`
(event tile). Both functions here yield encoded tiles (zlib frame files) so
that callers can count bytes as they go.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import polars as pl

from mpiscope.report import density, frame, timeline
from mpiscope.report.density import BINS, BinInput, Level
from mpiscope.report.source import Columns

# One level is computed in memory at up to this many rank-bins (48 bytes each);
# deeper levels are computed window by window.
LEVEL_BINS_MAX = 2**22
# The cached pyramid of `view` and the report's stop here: 2^24 rank-bins.
PYRAMID_BINS_MAX = 2**24
# Bin tiles are mostly zeros and repeats: in a report (size-bound) zlib's level 6 gives 0.37-0.61 of
# level 1's size (bench trace); the view's cache (time-bound, on local disk) takes level 1, which
# deflated the bench trace's level-6 tiles in 0.41 of level 6's CPU time.
BIN_ZLIB_LEVEL = 6
CACHE_ZLIB_LEVEL = 1


def bin_key(k: int, i: int) -> str:
    return f"b/{k}/{i}"


def event_key(k: int, i: int) -> str:
    return f"e/{k}/{i}"


def deepest_bin_level(ranks: int, span_ns: float, median_call_ns: float, event_level: int | None) -> int:
    """As deep as useful: until bins are finer than the median call, or event tiles take over,
    and no deeper than PYRAMID_BINS_MAX rank-bins."""
    cap = max(0, math.floor(math.log2(max(1.0, PYRAMID_BINS_MAX / (max(ranks, 1) * BINS)))))
    if median_call_ns > 0:
        calls = max(0, math.ceil(math.log2(max(1.0, span_ns / (BINS * median_call_ns)))))
    else:
        calls = cap
    deepest = min(cap, calls)
    return deepest if event_level is None else min(deepest, event_level)


def median_call_ns(events: pl.DataFrame | pl.LazyFrame) -> float:
    d = pl.col("t1") - pl.col("t0")
    got = events.lazy().select(d.filter(d > 0).median()).collect().item()
    return float(got) if got is not None else 0.0


def _encode_level(
    lv: Level, ranks: int, span_ns: float, first_tile: int = 0, zlib_level: int = BIN_ZLIB_LEVEL
) -> list[tuple[str, bytes]]:
    def one(j: int) -> tuple[str, bytes]:
        i = first_tile + j
        return bin_key(lv.k, i), frame.encode(
            {"bins": density.tile_table(lv, j)}, density.tile_attrs(lv.k, i, span_ns, ranks), zlib_level
        )

    # zlib releases the GIL: deflate the tiles of a level on every core
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        return list(pool.map(one, range(lv.fam_ns.shape[-1] // BINS)))


def bin_levels(
    inp: BinInput, deepest: int, zlib_level: int = BIN_ZLIB_LEVEL
) -> Iterator[list[tuple[str, bytes]]]:
    """The encoded tiles of levels 0, 1, ..., deepest, one whole level at a time (a caller
    may stop after any level)."""
    top = min(deepest, max(0, int(math.log2(max(1, LEVEL_BINS_MAX // (max(inp.ranks, 1) * BINS))))))
    levels = [density.compute_level(inp, top)]
    while levels[-1].k > 0:
        levels.append(levels[-1].coarser())
    for lv in reversed(levels):
        yield _encode_level(lv, inp.ranks, inp.span_ns, 0, zlib_level)
    del levels
    for k in range(top + 1, deepest + 1):
        per_window = 2**top  # tiles of level k per window: one in-memory level's worth of bins
        tiles: list[tuple[str, bytes]] = []
        for first in range(0, 2**k, per_window):
            w = inp.span_ns / 2**k
            lv = density.compute_level(inp, k, first * w, (first + per_window) * w)
            tiles.extend(_encode_level(lv, inp.ranks, inp.span_ns, first, zlib_level))
        yield tiles


class EventTiles:
    """The event tiles of level k of an in-memory trace, encoded on request."""

    def __init__(self, c: Columns, k: int, event_extent: tuple[np.ndarray, np.ndarray] | None = None) -> None:
        self.k, self.span_ns = k, c.span_ns
        self.splitters = {
            name: timeline.Splitter(
                getattr(c, name), name, k, c.span_ns, event_extent if name == "events" else None
            )
            for name in ("events", "messages", "colls")
        }

    def encode(self, wanted: list[int]) -> dict[int, bytes]:
        parts = {name: s.tiles(wanted) for name, s in self.splitters.items()}
        return {
            i: timeline.encode_tile(self.k, i, self.span_ns, {name: parts[name][i] for name in parts})
            for i in wanted
        }
