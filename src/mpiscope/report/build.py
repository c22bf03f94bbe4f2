"""`mpiscope report`: one self-contained HTML page from a merged trace, within a size budget."""

from __future__ import annotations

import logging
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mpiscope.analysis.stats import summarize
from mpiscope.errors import UsageError
from mpiscope.machine import available_memory, require_memory
from mpiscope.report import budget, html, payload, tiles, timeline
from mpiscope.report.density import BINS, BinInput
from mpiscope.report.frame import b64
from mpiscope.report.source import Columns, load_columns
from mpiscope.trace import Trace, is_merged, open_trace

MB = 1_000_000
DIAGNOSIS_RESERVE = 1 * MB  # room kept for the diagnosis, which arrives last (~0.2 MB for 10 M calls)
log = logging.getLogger(__name__)


@dataclass
class Report:
    html: str
    payload: dict[str, Any]
    seconds: float
    bin_levels: int
    event_level: int
    complete: bool
    windows: list[list[float]] = field(default_factory=list)
    event_tiles: int = 0
    event_tiles_total: int = 0
    stages: dict[str, float] = field(default_factory=dict)

    @property
    def bytes(self) -> int:
        return len(self.html.encode())


def open_merged(path: Path, what: str = "trace") -> Trace:
    """A trace whose tables exist; never merges (a report must not write into the trace)."""
    trace = open_trace(path, merge=False)
    if not is_merged(Path(path), trace.manifest):
        raise UsageError(f"the {what} {path} has not been merged yet; merge it first: mpiscope merge {path}")
    return trace


def base_payload(trace: Trace, c: Columns, mode: str, with_diagnosis: bool = True) -> dict[str, Any]:
    return payload.build(
        trace, summarize(trace), c.vocab, c.events.lazy(), c.t0_ns, c.span_ns, mode, c.ranks, with_diagnosis
    )


class Stages:
    """Wall and CPU time of each step, logged (-v) and kept for benchmarks."""

    def __init__(self, what: str = "report") -> None:
        self.what = what
        self.times: dict[str, float] = {}
        self._wall, self._cpu = time.perf_counter(), time.process_time()

    def done(self, name: str) -> None:
        wall, cpu = time.perf_counter(), time.process_time()
        self.times[name] = wall - self._wall
        log.info("%s: %s %.2f s (CPU %.2f s)", self.what, name, wall - self._wall, cpu - self._cpu)
        self._wall, self._cpu = wall, cpu


@dataclass
class Plan:
    """The tiles a report embeds."""

    event_level: int
    bins: budget.Taken
    events: budget.Taken
    windows_total: int

    @property
    def complete(self) -> bool:
        return len(self.events.ids) == self.windows_total

    def tiles(self) -> dict[str, bytes]:
        return {**self.bins.tiles, **self.events.tiles}


def plan_tiles(c: Columns, room: int, tile_max: int, t: Stages) -> Plan:
    """Every event tile if they fit in `room` bytes (bins then only down to the event level),
    else bins (within PYRAMID_SHARE of room) and the busiest event tiles in the rest."""
    extent = timeline.extent_of(c.events, "events", c.span_ns)
    k_ev, counts = timeline.event_level(*extent, c.span_ns, tile_max)
    deepest = tiles.deepest_bin_level(c.ranks, c.span_ns, tiles.median_call_ns(c.events), None)
    order = budget.busiest(counts)
    ev = tiles.EventTiles(c, k_ev, extent)
    probe = ev.encode(order[:1])
    per_row = (
        budget.cost(tiles.event_key(k_ev, order[0]), probe[order[0]]) / max(1, int(counts[order[0]]))
        if order
        else 0.0
    )
    guess_all = per_row * float(counts.sum())
    t.done(f"event level {k_ev}")
    inp = BinInput.from_columns(c)

    def take_events(room_left: float) -> budget.Taken:
        return budget.take_tiles(order, lambda i: tiles.event_key(k_ev, i), ev.encode, int(room_left),
                                 per_row * float(counts.max()) if order else 1.0)

    if guess_all <= 0.9 * room:
        # Every event should fit: the event tiles first, then the bins above the event level in what
        # they leave. (Bins first, given room less the guess, lost the last tile whenever the guess,
        # made from one tile, was a little low: a report of every event came out incomplete.)
        events = take_events(room)
        if len(events.ids) == len(order):
            bins = budget.take_levels(tiles.bin_levels(inp, min(deepest, k_ev)), int(room - events.used))
            t.done(f"{len(events.ids)} event tiles, bin levels 0-{bins.deepest}")
            return Plan(k_ev, bins, events, len(order))
    # not every event fits: bins down to the deepest level within PYRAMID_SHARE, the busiest tiles in the rest
    bins = budget.take_levels(tiles.bin_levels(inp, deepest), int(budget.PYRAMID_SHARE * room))
    t.done(f"bin levels 0-{bins.deepest}")
    events = take_events(room - bins.used)
    t.done(f"{len(events.ids)} event tiles")
    return Plan(k_ev, bins, events, len(order))


def page_bytes(data: dict[str, Any], plan: Plan) -> int:
    """The page's size with the plan's tiles, without rendering them."""
    return len(html.render({**data, "tiles": {}}).encode()) + plan.bins.used + plan.events.used


# Peak memory of a report per event, its diagnosis beside it: the generated halo's 6.7 M events
# 3.13 GB, 20 M events 8.32 GB
BYTES_PER_EVENT = 450
# The events and messages held in memory once (Trace.hold) where that fits beside it: their ~10
# reads then decode nothing (6.7 M events: wall 11.9 -> 9.9 s, peak +490 MiB; 20 M: 28.5 -> 26.8 s,
# +1.1 GB)
HELD_BYTES_PER_EVENT = 80


def build_report(
    trace: Trace,
    max_bytes: int = 25 * MB,
    baseline: dict[str, Any] | None = None,
    tile_max: int = timeline.EVENT_TILE_MAX,
    with_diagnosis: bool = True,
) -> Report:
    require_memory("the report", trace.event_count, BYTES_PER_EVENT, trace.path)
    start, t = time.perf_counter(), Stages()
    have = available_memory()
    if have is None or trace.event_count * (BYTES_PER_EVENT + HELD_BYTES_PER_EVENT) <= have:
        trace.hold("events", "messages")
        t.done("tables held in memory")
    # The diagnosis (Polars) runs beside the binning (NumPy): both release the GIL.
    with ThreadPoolExecutor(max_workers=1) as pool:
        diagnosis = pool.submit(payload.diagnosis, trace) if with_diagnosis else None
        c = load_columns(trace)
        t.done("tables read")
        data = base_payload(trace, c, "report", with_diagnosis=False)
        data["baseline"] = baseline
        t.done("statistics")
        data["pyramid"] = {"bins": BINS, "levels": 0, "event_level": 0, "event_tile_max": tile_max}
        data["detail"] = {"windows": [], "complete": False}
        data["tiles"] = {}
        reserve = DIAGNOSIS_RESERVE if diagnosis else 0
        plan = plan_tiles(c, max_bytes - reserve - len(html.render(data).encode()), tile_max, t)
        data["diagnosis"] = diagnosis.result() if diagnosis else None
        t.done("diagnosis (the rest of it)")
        # A small page (--max-size of a few MB) felt the reserve: the diagnosis takes ~0.2 MB, so a 2 MB
        # page held 2 of 8 windows where all fitted. Planned again with the room really left.
        if reserve > max_bytes // 10 and not plan.complete and max_bytes - page_bytes(data, plan) > reserve // 2:
            plan = plan_tiles(c, max_bytes - len(html.render(data).encode()), tile_max, t)
    while page_bytes(data, plan) > max_bytes and plan.events.ids:  # a diagnosis above its reserve
        plan.events.drop_last()
    windows = (
        [[0.0, c.span_ns]] if plan.complete else budget.windows(plan.events.ids, plan.event_level, c.span_ns)
    )
    data["pyramid"].update(levels=plan.bins.deepest, event_level=plan.event_level)
    data["detail"] = {"windows": windows, "complete": plan.complete}
    data["tiles"] = {key: b64(blob) for key, blob in plan.tiles().items()}
    page = html.render(data)
    t.done("page")
    return Report(
        page,
        data,
        time.perf_counter() - start,
        plan.bins.deepest,
        plan.event_level,
        plan.complete,
        windows,
        len(plan.events.ids),
        plan.windows_total,
        t.times,
    )
