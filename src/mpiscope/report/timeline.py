"""Event tiles: the single calls, messages and collective instances of a time window.

Tile (K, I) covers [I·W, (I+1)·W), W = span/2^K. A row belongs to the tiles its
interval [start, end] overlaps: from the tile of its start to the tile of its
end (an end exactly on a tile edge stays in the tile before, and a row of zero
length belongs to the tile of its start, so no row falls between two tiles).
An unknown end (a call that never returned, a collective some rank never
left) reaches the end of the run; a message never received ends at its send.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np
import polars as pl

from mpiscope.report import frame

EVENT_TILE_MAX = 20_000
MAX_EVENT_LEVEL = 22  # 4 M tiles; deeper, one instant holds more than a tile's worth of calls

EVENT_COLS = [
    "rank",
    "thread",
    "call",
    "t0",
    "t1",
    "bytes",
    "peer",
    "tag",
    "comm",
    "root",
    "callsite",
    "event",
    "coll",
    "polls",
    "inside",
]
MESSAGE_COLS = [
    "src",
    "dst",
    "ts",
    "tsl",
    "tr",
    "trl",
    "bytes",
    "tag",
    "comm",
    "send_event",
    "recv_event",
    "send_callsite",
    "recv_callsite",
]
COLL_COLS = [
    "coll",
    "call",
    "comm",
    "root",
    "first_enter",
    "last_enter",
    "first_leave",
    "last_leave",
    "ranks",
]
# (start, end, end when unknown: "span" = the run's end, "start" = the start itself, sort keys)
SHAPES = {
    "events": ("t0", "t1", "span", ["rank", "t0"]),
    "messages": ("ts", "trl", "start", ["ts", "src"]),
    "colls": ("first_enter", "last_leave", "span", ["first_enter", "coll"]),
}
COLUMNS = {"events": EVENT_COLS, "messages": MESSAGE_COLS, "colls": COLL_COLS}


def tile_width(k: int, span_ns: float) -> float:
    return float(span_ns) / float(2**k)


def end_of(df: pl.DataFrame | pl.LazyFrame, table: str, span_ns: float) -> pl.Expr:
    start, end, unknown, _ = SHAPES[table]
    fallback = pl.lit(span_ns) if unknown == "span" else pl.col(start)
    return (
        pl.when(pl.col(end).is_nan()).then(fallback).otherwise(pl.max_horizontal(pl.col(end), pl.col(start)))
    )


def extent_of(df: pl.DataFrame, table: str, span_ns: float) -> tuple[np.ndarray, np.ndarray]:
    """Start and end (unknown ends resolved) of every row."""
    return df[SHAPES[table][0]].to_numpy(), df.select(end_of(df, table, span_ns)).to_series().to_numpy()


def tile_range(start: np.ndarray, end: np.ndarray, k: int, span_ns: float) -> tuple[np.ndarray, np.ndarray]:
    """First and last tile of level k of each row [start, end] (NaN-free ends, 0 <= start <= end)."""
    w, last = tile_width(k, span_ns), 2**k - 1
    k0 = np.minimum((start / w).astype(np.int64), last)  # truncation is floor: times are >= 0
    k1 = np.minimum(np.ceil(end / w).astype(np.int64) - 1, last)
    np.maximum(k0, 0, out=k0)
    np.maximum(k1, k0, out=k1)
    return k0, k1


def tile_counts(start: np.ndarray, end: np.ndarray, k: int, span_ns: float) -> np.ndarray:
    """Rows overlapping each tile of level k: a difference array over the tile ranges."""
    k0, k1 = tile_range(start, end, k, span_ns)
    n = 2**k
    d = np.bincount(k0, minlength=n + 1) - np.bincount(k1 + 1, minlength=n + 1)
    counts: np.ndarray = np.cumsum(d)[:n]
    return counts


def event_level(
    start: np.ndarray, end: np.ndarray, span_ns: float, tile_max: int = EVENT_TILE_MAX
) -> tuple[int, np.ndarray]:
    """The shallowest level whose every tile holds at most tile_max calls (capped), and the
    calls of each of its tiles."""
    k = 0 if start.size <= tile_max else math.ceil(math.log2(start.size / tile_max))
    counts = tile_counts(start, end, k, span_ns)
    while k < MAX_EVENT_LEVEL and counts.max(initial=0) > tile_max:
        k += 1
        counts = tile_counts(start, end, k, span_ns)
    return k, counts


def window(df: pl.DataFrame, table: str, t_start: float, t_end: float, span_ns: float) -> pl.DataFrame:
    """The rows of `table` that belong to the window [t_start, t_end), in the tile's order."""
    start, _, _, order = SHAPES[table]
    s = pl.col(start)
    hit = (s < t_end) & ((end_of(df, table, span_ns) > t_start) | (s >= t_start))
    return df.filter(hit).sort(order)


def tile_tables(tables: dict[str, pl.DataFrame]) -> dict[str, dict[str, np.ndarray]]:
    return {name: {c: df[c].to_numpy() for c in COLUMNS[name]} for name, df in tables.items()}


def tile_attrs(k: int, i: int, span_ns: float, truncated: bool = False) -> dict[str, float | int | bool]:
    w = tile_width(k, span_ns)
    return {"k": k, "i": i, "t_start": i * w, "t_end": (i + 1) * w, "truncated": truncated}


def encode_tile(
    k: int, i: int, span_ns: float, tables: dict[str, pl.DataFrame], truncated: bool = False
) -> bytes:
    return frame.encode(tile_tables(tables), tile_attrs(k, i, span_ns, truncated))


class Splitter:
    """Cuts one table into the tiles of level k. The tile range of every row is computed once
    and the rows sorted by first tile, so a request costs about the rows of the tiles asked for."""

    def __init__(
        self,
        df: pl.DataFrame,
        table: str,
        k: int,
        span_ns: float,
        extent: tuple[np.ndarray, np.ndarray] | None = None,
    ) -> None:
        self.df, self.table, self.k, self.span_ns = df, table, k, span_ns
        start, end = extent or extent_of(df, table, span_ns)
        self.k0, self.k1 = tile_range(start, end, k, span_ns)
        self.order = np.argsort(self.k0, kind="stable")  # rows by first tile
        self.first = self.k0[self.order]
        self.spanning = np.flatnonzero(self.k1 > self.k0)

    def tiles(self, wanted_ids: Iterable[int]) -> dict[int, pl.DataFrame]:
        """The rows of each wanted tile, in the tile's order (rows spanning tiles repeated)."""
        wanted = np.unique(np.fromiter(wanted_ids, np.int64))
        if wanted.size == 0:
            return {}
        lo, hi = np.searchsorted(self.first, wanted, "left"), np.searchsorted(self.first, wanted, "right")
        starting = [self.order[a:b] for a, b in zip(lo, hi)]
        # rows that start before a wanted tile and reach it
        k0, k1 = self.k0[self.spanning], self.k1[self.spanning]
        nxt = np.searchsorted(wanted, k0, "right")
        reach = (nxt < wanted.size) & (wanted[np.minimum(nxt, wanted.size - 1)] <= k1)
        hit = np.zeros(self.k0.size, bool)  # rows both starting in one wanted tile and reaching another: once
        hit[np.concatenate([*starting, self.spanning[reach]])] = True
        idx = np.flatnonzero(hit)
        # each row once per wanted tile within its range (not per tile of its range: a call
        # that never returned reaches every later tile)
        lo = np.searchsorted(wanted, self.k0[idx], "left")
        cnt = np.searchsorted(wanted, self.k1[idx], "right") - lo
        within = np.arange(int(cnt.sum())) - np.repeat(np.cumsum(cnt) - cnt, cnt)
        sub = self.df[np.repeat(idx, cnt)].with_columns(
            pl.Series("_tile", wanted[np.repeat(lo, cnt) + within])
        )
        parts = sub.sort(["_tile", *SHAPES[self.table][3]]).partition_by(
            "_tile", as_dict=True, include_key=False
        )
        out = {int(key[0]): part for key, part in parts.items()}
        return {int(i): out.get(int(i), self.df.clear()) for i in wanted}


def split(
    df: pl.DataFrame, table: str, k: int, span_ns: float, tiles: Iterable[int]
) -> dict[int, pl.DataFrame]:
    """The rows of each wanted tile of level k (one-off; see Splitter for repeated requests)."""
    return Splitter(df, table, k, span_ns).tiles(tiles)
