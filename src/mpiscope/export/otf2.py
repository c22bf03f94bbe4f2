"""OTF2 archive (Vampir, Scalasca, Score-P tools, Pipit) with the `otf2` package, which
bundles the OTF2 library.

Definitions as Score-P writes them (otf2_defs.py) with clock properties of 1 ns resolution
and the trace's first time as global offset; events rank by rank (streams.py, otf2_events.py).
Worker processes (pool.py) write the ranks' event files in parts of their own archive, which
join the main archive at the end.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import otf2
import polars as pl

from mpiscope.export import ExportResult, Progress, staged_output
from mpiscope.export import streams as S
from mpiscope.export.otf2_defs import comm_parents, comm_ranks, write_definitions
from mpiscope.export.otf2_events import EventWriters, code_values, translate, write_location
from mpiscope.export.pool import run_groups
from mpiscope.trace import Trace, open_trace

ARCHIVE = "traces"  # DIR/traces.otf2 is what Vampir opens
BYTES_PER_CALL = 1_400  # a worker's memory per call of its longest rank (pool.py)
CHUNK_BYTES = 256 * 1024  # OTF2's smallest chunk: an archive holds one per location it writes


class _Writer(otf2.writer.Writer):  # type: ignore[misc]
    """The package's writer with the trace's own clock: its default would stamp the
    export's wall-clock time as the realtime of the first event."""

    clock: tuple[int, int, int] = (0, 0, 0)  # global offset, length, realtime of the offset (ns)
    # A part (pool.py) writes event files only: its definitions are the main archive's, and
    # writing them would also make OTF2 write an empty event file for every location.
    part = False

    def _write_global_definitions(self) -> None:
        if self.part:
            return
        with otf2.definition_writer.DefinitionWriter(self) as w:
            w.write_clock_properties(1_000_000_000, *self.clock)
            self.definitions.write(w)


def _realtime_ns(trace: Trace) -> int:
    """Wall-clock time of the trace's start, from the manifest (OTF2 wants it; viewers show it)."""
    try:
        started = datetime.strptime(str(trace.manifest.get("started_at", "")), "%Y-%m-%dT%H:%M:%S%z")
    except ValueError:
        return 0
    return int(started.timestamp()) * 1_000_000_000


def _gather_parts(stage: Path, owned: list[set[int]]) -> None:
    """Move each part's files of the locations it wrote into the main archive, over the empty
    ones the main archive wrote for every location."""
    (stage / ARCHIVE).mkdir(exist_ok=True)
    for i, refs in enumerate(owned):
        part = stage / f".part-{i}"
        if (part / ARCHIVE).is_dir():
            for f in (part / ARCHIVE).iterdir():
                if f.stem.isdigit() and int(f.stem) in refs:
                    os.replace(f, stage / ARCHIVE / f.name)
        shutil.rmtree(part)


@dataclass(frozen=True)
class _Plan:
    """What every part writer needs to rebuild the same definitions (so the same refs)."""

    trace_dir: str
    names: list[str]
    used: list[int]
    threads: list[tuple[int, int]]
    clock: tuple[int, int, int]
    parents: dict[int, int]  # communicator -> parent (comm_parents: one scan, not one per part)


def _open(
    plan: _Plan, where: Path, part: bool = False
) -> tuple[_Writer, Trace, pl.DataFrame, pl.DataFrame, tuple[Any, ...]]:
    trace = open_trace(plan.trace_dir, merge=False)
    w = _Writer(
        str(where),
        archive_name=ARCHIVE,
        timer_resolution=1_000_000_000,
        chunk_size_events=CHUNK_BYTES,
        chunk_size_definitions=CHUNK_BYTES,
    )
    w.part = part
    w.clock = plan.clock
    w.creator = "mpiscope"
    w.description = " ".join(str(a) for a in trace.manifest.get("command", []))
    comms, local = comm_ranks(trace)
    threads = pl.DataFrame(plan.threads, schema={"rank": pl.Int32, "thread": pl.Int32}, orient="row")
    defs = write_definitions(w, trace, plan.names, plan.used, threads, comms, plan.parents)
    return w, trace, comms, local, defs


def _write_part(
    plan: _Plan, stage: str, ranks: list[int], part: int, progress: Progress | None = None
) -> tuple[dict[tuple[int, int], int], int]:
    """Write the events of `ranks` into an archive of their own under the stage; returns
    events per location and records written. Its definitions are the main archive's."""
    where = Path(stage) / f".part-{part}"
    w, trace, comms, local, (locations, regions, comm_refs, win_refs) = _open(plan, where, part=True)
    calls, fast = S.Calls.of(trace), EventWriters()
    ops, rma = code_values(plan.names)
    windows = comms.filter(pl.col("kind") == "window").select("comm")
    written: dict[tuple[int, int], int] = {}
    try:
        for data in S.iter_rank_data(trace, ranks):
            rank = data.rank
            recs = S.rank_records(trace, calls, data, windows)
            recs = translate(recs, local, regions, comm_refs, win_refs, ops, rma)
            for (thread,), rows in recs.partition_by("thread", as_dict=True, maintain_order=True).items():
                location = locations[rank, int(thread)]
                writer = w.event_writer_from_location(location)
                h = int(ctypes.cast(writer.handle, ctypes.c_void_p).value or 0)
                write_location(fast, h, rows)
                written[rank, int(thread)] = written.get((rank, int(thread)), 0) + rows.height
                # OTF2 (without memory callbacks) holds a location's events in memory until its
                # writer closes: closed now, not with the archive, memory follows one rank
                # (64 ranks of 1 M calls on one process: 4.4 GB at the archive's close before)
                del w._event_writers[location._ref]
                writer.close()
            if progress:
                progress(int(recs.filter(pl.col("kind") == S.ENTER).height))
    finally:
        w.close()
    return written, sum(written.values())


def export_otf2(
    trace: Trace, out: Path, force: bool = False, progress: Progress | None = None, workers: int | None = None
) -> ExportResult:
    """Write the trace as an OTF2 archive in directory `out` (open out/traces.otf2)."""
    t_start = time.perf_counter()
    spans = S.thread_spans(trace)
    names = S.call_names(trace)
    used = sorted(names.index(c) for c in S.calls_present(trace))
    first = S.as_int(spans["t0"].min())
    t0 = min(first, int(trace.manifest.get("t0_ns") or first))
    t1 = max(S.as_int(spans["t1"].max()), t0)
    plan = _Plan(
        str(trace.path),
        names,
        used,
        [(int(r), int(t)) for r, t in spans.select("rank", "thread").iter_rows()],
        (t0, t1 - t0, _realtime_ns(trace)),
        comm_parents(trace, trace.comms().collect()),
    )
    per_rank = spans.group_by("rank").agg(pl.col("n").sum()).sort("rank")
    with staged_output(out, force, is_dir=True) as stage:
        w, _, _, _, (locations, *_) = _open(plan, stage)
        try:
            parts = run_groups(_write_part, (plan, str(stage)), list(per_rank.iter_rows()), progress, workers,
                               "the OTF2 export", BYTES_PER_CALL)
            for written, _ in parts:
                for key, n in written.items():
                    locations[key]._number_of_events_written = n
        finally:
            # the main archive's close writes its definitions (with the parts' event counts)
            # and an empty event file per location, which the parts' files then replace
            w.close()
        _gather_parts(stage, [{int(locations[k]._ref) for k in written} for written, _ in parts])
    return ExportResult(
        "otf2",
        out,
        S.as_int(spans["n"].sum()),
        sum(r for _, r in parts),
        time.perf_counter() - t_start,
        files=[f"{ARCHIVE}.otf2", f"{ARCHIVE}.def", f"{ARCHIVE}/"],
    )
