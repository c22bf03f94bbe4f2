"""Tiles answered from the view cache (cache.py): bin tiles by offset, event tiles by time range.

An event tile reads only the Parquet row groups whose start times can overlap
its window: rows start at most `long_ns` before it (longer rows are in the
small *_long tables held in memory). Row-group bounds come from the file
footers, read once.
"""

from __future__ import annotations

import json
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pyarrow.parquet as pq

from mpiscope.report import density, frame, timeline

ROW_GROUP = 16384
CACHED_COLUMNS = {**timeline.COLUMNS, "events": [*timeline.COLUMNS["events"], "family", "rbytes"]}
HARD_LIMIT_FACTOR = 4  # an event tile above event_tile_max times this is cut (the page keeps its bins)
LRU_TILES = 256


def write_sorted(
    frames: Iterable[pl.DataFrame], table: str, long_ns: float, span_ns: float, dest: Path
) -> None:
    """TABLE.parquet: the rows sorted by start time in row groups of ROW_GROUP rows, with min/max
    statistics of the start; TABLE_long.parquet: the rows lasting longer than long_ns. `frames`
    are consecutive stretches of time (each is sorted here), so a large table never needs to be
    in memory at once."""
    start = timeline.SHAPES[table][0]
    cols = CACHED_COLUMNS[table]
    writer: pq.ParquetWriter | None = None
    longs = []
    try:
        for df in frames:
            df = df.sort(start)
            long = df.select(timeline.end_of(df, table, span_ns) - pl.col(start) > long_ns).to_series()
            main = df.filter(~long).select(cols).to_arrow()
            if writer is None:
                writer = pq.ParquetWriter(
                    dest / f"{table}.parquet", main.schema, compression="lz4", write_statistics=[start]
                )
            writer.write_table(main, row_group_size=ROW_GROUP)
            longs.append(df.filter(long).select(cols))
    finally:
        if writer is not None:
            writer.close()
    pl.concat(longs).sort(start).write_parquet(dest / f"{table}_long.parquet")


def write_bins(levels: Iterable[list[tuple[str, bytes]]], dest: Path) -> int:
    """bins.bin (the tiles back to back) and bins.json (key -> [offset, length]); the deepest level."""
    index: dict[str, list[int]] = {}
    offset, deepest = 0, -1
    with open(dest / "bins.bin", "wb") as f:
        for k, level in enumerate(levels):
            for name, blob in level:
                f.write(blob)
                index[name] = [offset, len(blob)]
                offset += len(blob)
            deepest = k
    (dest / "bins.json").write_text(json.dumps(index))
    return deepest


class SortedTable:
    """One table sorted by start time, queried by window."""

    def __init__(self, where: Path, table: str, long_ns: float, span_ns: float) -> None:
        self.path, self.table, self.long_ns, self.span_ns = (
            where / f"{table}.parquet",
            table,
            long_ns,
            span_ns,
        )
        self.start = timeline.SHAPES[table][0]
        self.meta = pq.ParquetFile(self.path).metadata
        col = self.meta.schema.to_arrow_schema().get_field_index(self.start)
        groups = [self.meta.row_group(g) for g in range(self.meta.num_row_groups)]
        self.lo = np.array([g.column(col).statistics.min for g in groups if g.num_rows], float)
        self.hi = np.array([g.column(col).statistics.max for g in groups if g.num_rows], float)
        self.long = pl.read_parquet(where / f"{table}_long.parquet")

    def count_upper(self, t_start: float, t_end: float) -> int:
        """At most this many rows overlap the window (whole row groups counted)."""
        g0, g1 = self._groups(t_start, t_end)
        return (
            (g1 - g0) * self.meta.row_group(0).num_rows + self.long.height
            if self.lo.size
            else self.long.height
        )

    def _groups(self, t_start: float, t_end: float) -> tuple[int, int]:
        return int(np.searchsorted(self.hi, t_start - self.long_ns, "left")), int(
            np.searchsorted(self.lo, t_end, "left")
        )

    def window(self, t_start: float, t_end: float) -> pl.DataFrame:
        g0, g1 = self._groups(t_start, t_end)
        parts = [timeline.window(self.long, self.table, t_start, t_end, self.span_ns)]
        if g1 > g0:
            f = pq.ParquetFile(self.path, metadata=self.meta)  # one per request: reads may run concurrently
            got = pl.from_arrow(f.read_row_groups(list(range(g0, g1)), use_threads=False))
            assert isinstance(got, pl.DataFrame)
            parts.append(timeline.window(got, self.table, t_start, t_end, self.span_ns))
        return pl.concat(parts).sort(timeline.SHAPES[self.table][3])


class Store:
    """The view cache opened for serving."""

    def __init__(self, where: Path) -> None:
        self.where = where
        self.meta: dict[str, Any] = json.loads((where / "meta.json").read_text())
        self.span_ns = float(self.meta["span_ns"])
        self.data_json = (where / "data.json").read_bytes()
        self.bin_index: dict[str, list[int]] = json.loads((where / "bins.json").read_text())
        self._bins_fd = os.open(where / "bins.bin", os.O_RDONLY)
        long_ns = float(self.meta["long_ns"])
        self.events = SortedTable(where, "events", long_ns, self.span_ns)
        self.messages = SortedTable(where, "messages", long_ns, self.span_ns)
        self.colls = pl.read_parquet(where / "colls.parquet")
        self.hard_limit = HARD_LIMIT_FACTOR * int(self.meta["event_tile_max"])
        self._lru: OrderedDict[str, bytes] = OrderedDict()
        self._lock = threading.Lock()

    def close(self) -> None:
        os.close(self._bins_fd)

    def bin_tile(self, k: int, i: int) -> bytes | None:
        at = self.bin_index.get(f"b/{k}/{i}")
        if at:
            return os.pread(self._bins_fd, at[1], at[0])
        if self.meta["bin_levels"] < k <= self.meta["levels"] and 0 <= i < 2**k:
            return self._cached(f"b/{k}/{i}", lambda: self._bins_of_window(k, i))
        return None

    def _bins_of_window(self, k: int, i: int) -> bytes:
        """A bin tile below the cached pyramid, from the calls and messages of its window."""
        w = timeline.tile_width(k, self.span_ns)
        ev, msgs = self.events.window(i * w, (i + 1) * w), self.messages.window(i * w, (i + 1) * w)
        inp = density.bin_input(ev, msgs, int(self.meta["ranks"]), self.span_ns)
        lv = density.compute_level(inp, k, i * w, (i + 1) * w)
        return frame.encode(
            {"bins": density.tile_table(lv, 0)},
            density.tile_attrs(k, i, self.span_ns, int(self.meta["ranks"])),
        )

    def _cached(self, name: str, make: Callable[[], bytes]) -> bytes:
        with self._lock:
            if name in self._lru:
                self._lru.move_to_end(name)
                return self._lru[name]
        blob = make()
        with self._lock:
            self._lru[name] = blob
            while len(self._lru) > LRU_TILES:
                self._lru.popitem(last=False)
        return blob

    def event_tile(self, k: int, i: int) -> bytes | None:
        if not (0 <= k <= timeline.MAX_EVENT_LEVEL and 0 <= i < 2**k):
            return None
        return self._cached(f"e/{k}/{i}", lambda: self._event_tile(k, i))

    def _event_tile(self, k: int, i: int) -> bytes:
        w = timeline.tile_width(k, self.span_ns)
        a, b = i * w, (i + 1) * w
        ev = None
        if k >= self.meta["event_level"] or self.events.count_upper(a, b) <= self.hard_limit:
            ev = self.events.window(a, b)
        if ev is None or ev.height > self.hard_limit:  # too many to draw: the page keeps drawing bins
            empty = {
                "events": self.events.long.clear(),
                "messages": self.messages.long.clear(),
                "colls": self.colls.clear(),
            }
            return timeline.encode_tile(k, i, self.span_ns, empty, truncated=True)
        tables = {
            "events": ev,
            "messages": self.messages.window(a, b),
            "colls": timeline.window(self.colls, "colls", a, b, self.span_ns),
        }
        return timeline.encode_tile(k, i, self.span_ns, tables)
