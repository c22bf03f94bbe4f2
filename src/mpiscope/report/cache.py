"""The view cache beside a trace (TRACE/.mpiscope/view/): what `mpiscope view` serves from.

Built once per version of the tables (their sizes and modification times are
its key) and replaced whole by a rename:
  meta.json     the key, the time origin and span, the event level, the long-call thresholds
  data.json     the page's payload (mode "view")
  bins.bin      every bin tile of the pyramid, back to back; bins.json: key -> [offset, length]
  events.parquet, messages.parquet   the event-tile columns sorted by start time in row groups
                of 16 Ki rows, so that a window reads only the row groups it overlaps;
  events_long.parquet, messages_long.parquet   the rows lasting longer than `long_ns`, which
                can start far before a window they overlap (read into memory once)
  colls.parquet the collective instances (read into memory once)
"""

from __future__ import annotations

import itertools
import json
import math
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import polars as pl

from mpiscope import __version__
from mpiscope.analysis.frames import BYTES_PER_EVENT as DIAGNOSIS_BYTES_PER_EVENT
from mpiscope.analysis.stats import summarize
from mpiscope.errors import UsageError
from mpiscope.machine import available_memory, require_memory
from mpiscope.report import payload, source, store, tiles, timeline
from mpiscope.report.build import Stages
from mpiscope.report.density import BINS, bin_input
from mpiscope.trace import TABLES, Trace, table_files

VERSION = 8  # 3: the events keep rbytes (collectives' received bytes) for the bins; 4: the payload has bcast;
# 5: a sixth family, file I/O (its share in the bins); 6: window creations carry no bytes (their size);
# 7: call sites named as the findings name them (short_site); 8: events carry polls and inside
DIR = Path(".mpiscope") / "view"
LONG_PER_TILE = 8  # a row is long when it lasts more than an event tile's width / 8
# Bin tiles below the cached pyramid are computed from the calls of their window when every
# such window holds at most this many calls (~0.1 s each on the bench trace).
ON_DEMAND_MAX = 150_000
CHUNK_ROWS = 8_000_000  # calls sorted in memory at once while writing the sorted copy
# The diagnosis holds ~200 bytes a call (2 GB for 10 M): above this many calls, or where it and the
# index do not fit the available memory together, it runs after the indexing.
DIAGNOSIS_BESIDE_MAX = 20_000_000
# The index holds the bins' columns of every call and the messages' tile columns while it bins
# them: a generated halo of 6.7 M calls peaked at 2.5 GB, one of 66.7 M calls at 8.5 GB (128
# bytes a call); with a margin.
INDEX_BYTES_PER_EVENT = 140


def key(trace: Trace) -> dict[str, Any]:
    """What the cache was built from: the tables' sizes and times, the versions."""
    files = {}
    for name in TABLES:
        stats = [p.stat() for p in table_files(Path(trace.path), name)]
        files[name] = [sum(st.st_size for st in stats), max((st.st_mtime_ns for st in stats), default=0)]
    st = (Path(trace.path) / "manifest.json").stat()
    files["manifest"] = [st.st_size, st.st_mtime_ns]
    return {"version": VERSION, "mpiscope": __version__, "files": files}


def cache_dir(trace: Trace) -> Path:
    return Path(trace.path) / DIR


def is_current(trace: Trace, where: Path | None = None) -> bool:
    meta = (where or cache_dir(trace)) / "meta.json"
    try:
        return bool(json.loads(meta.read_text()).get("key") == key(trace))
    except (OSError, ValueError):
        return False


def _time_chunks(
    events: Callable[[pl.Expr], pl.LazyFrame], t0_ns: int, span_ns: float, rows: int
) -> Iterator[pl.DataFrame]:
    """The calls in consecutive stretches of time of about CHUNK_ROWS calls each: one scan each
    (the table is in rank order, so a stretch of time is in every row group), filtered on the
    table's own t_enter_ns before anything else is computed (a third of the time)."""
    n = max(1, math.ceil(rows / CHUNK_ROWS))
    edges = [t0_ns + i * span_ns / n for i in range(n)] + [math.inf]
    for lo, hi in itertools.pairwise(edges):
        yield events((pl.col("t_enter_ns") >= lo) & (pl.col("t_enter_ns") < hi)).collect()


def _index(trace: Trace, dest: Path, tile_max: int, rows: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """Bins, sorted tables and payload into dest; (meta, payload without diagnosis). Only the
    columns the bins need are held for every call (31 bytes a call)."""
    t = Stages("view index")
    v, codes = source.vocab(trace)
    t0, span = source.time_origin(trace)
    events = source.event_frame(trace, t0, v, codes)
    narrow = source.bin_columns(events).collect()
    messages = source.message_frame(trace, t0, source.event_sites(events))
    t.done("tables read")
    highest = narrow["rank"].max()
    ranks = max(trace.ranks, int(highest) + 1 if isinstance(highest, int) else 0)
    extent = timeline.extent_of(narrow, "events", span)
    k_ev, _ = timeline.event_level(*extent, span, tile_max)
    # no bins below the event level: from there on every window has its single events
    deepest = tiles.deepest_bin_level(ranks, span, tiles.median_call_ns(narrow), k_ev)
    inp = bin_input(narrow, messages, ranks, span)
    cached = store.write_bins(tiles.bin_levels(inp, deepest, tiles.CACHE_ZLIB_LEVEL), dest)
    t.done(f"bin levels 0-{cached}")
    on_demand = cached + 1 < k_ev and timeline.tile_counts(*extent, cached + 1, span).max() <= ON_DEMAND_MAX
    data = payload.build(trace, summarize(trace), v, narrow.lazy(), t0, span, "view", ranks, False)
    del narrow, extent
    t.done("statistics")
    long_ns = timeline.tile_width(k_ev, span) / LONG_PER_TILE
    chunks = _time_chunks(
        lambda where: source.event_frame(trace, t0, v, codes, where).select(store.CACHED_COLUMNS["events"]),
        t0,
        span,
        rows,
    )
    store.write_sorted(chunks, "events", long_ns, span, dest)
    store.write_sorted([messages], "messages", long_ns, span, dest)
    source.coll_frame(trace, t0).write_parquet(dest / "colls.parquet")
    t.done("sorted tables")
    levels = k_ev - 1 if on_demand else cached
    data["pyramid"] = {"bins": BINS, "levels": levels, "event_level": k_ev, "event_tile_max": tile_max}
    data["detail"] = {"windows": [[0.0, span]], "complete": True}
    data["tiles"] = {}
    meta = {
        "t0_ns": t0,
        "span_ns": span,
        "ranks": ranks,
        "event_level": k_ev,
        "bin_levels": cached,
        "levels": levels,
        "event_tile_max": tile_max,
        "long_ns": long_ns,
    }
    return meta, data


def build(trace: Trace, tile_max: int = timeline.EVENT_TILE_MAX) -> dict[str, Any]:
    """Write the cache (into a temporary directory beside it, then renamed); returns its meta."""
    final = cache_dir(trace)
    require_memory("the view's index", trace.event_count, INDEX_BYTES_PER_EVENT, trace.path)
    try:
        final.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=".view-", dir=final.parent))
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o777 & ~umask)  # mkdtemp's 0700 would outlive the rename
    except OSError as e:
        raise _unwritable(trace, final, e) from e
    try:
        the_key = key(trace)  # before reading: a table replaced meanwhile makes the cache stale, not wrong
        rows = int(trace.events().select(pl.len()).collect().item())
        # The diagnosis (Polars) runs beside the binning (NumPy) when both fit in memory together.
        have = available_memory()
        together = rows <= DIAGNOSIS_BESIDE_MAX and (
            have is None or rows * (INDEX_BYTES_PER_EVENT + DIAGNOSIS_BYTES_PER_EVENT) <= have)
        with ThreadPoolExecutor(max_workers=1) as pool:
            beside = pool.submit(payload.diagnosis, trace) if together else None
            meta, data = _index(trace, tmp, tile_max, rows)
            data["diagnosis"] = beside.result() if beside else payload.diagnosis(trace)
        (tmp / "data.json").write_text(json.dumps(payload.jsonable(data), allow_nan=False))
        meta["key"] = the_key
        (tmp / "meta.json").write_text(json.dumps(meta))
        if final.exists():
            old = final.with_name(f".old-{tmp.name}")
            final.rename(old)
            shutil.rmtree(old, ignore_errors=True)
        tmp.rename(final)
        return meta
    except OSError as e:
        raise _unwritable(trace, final, e) from e
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _unwritable(trace: Trace, where: Path, e: OSError) -> UsageError:
    return UsageError(
        f"cannot write the view cache {where} ({e.strerror}); make {trace.path} writable "
        f"or free space, then run mpiscope view again"
    )


def read_meta(trace: Trace) -> dict[str, Any]:
    meta: dict[str, Any] = json.loads((cache_dir(trace) / "meta.json").read_text())
    return meta
