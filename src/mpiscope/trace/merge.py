"""Per-rank raw files -> events / messages / collectives / comms Parquet tables.

The per-record work runs in C kernels (trace/native.py), the rest column-wise
in NumPy and Polars; no Python loop runs per event.
Tables are written through temporary files and renamed, so a failed merge
leaves any earlier tables intact.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from mpiscope import __version__
from mpiscope.capture.manifest import read_manifest, write_manifest
from mpiscope.errors import TraceCorrupt, UsageError
from mpiscope.trace import record as R
from mpiscope.trace.bcast import bcast_swaps
from mpiscope.trace.clocks import ShiftBounds, causality_shifts, clock_problem, shift_bounds
from mpiscope.trace.columns import FIRST_TABLE_ID, CallTable, Records, build_records
from mpiscope.trace.damaged import Window, gap_windows, match_around_gaps
from mpiscope.trace.match import P2P, p2p_sides, reorder_threads
from mpiscope.trace.outcomes import add_outcomes, failed_events
from mpiscope.trace.reader import RANK_FILE, RankFile, rank_files, read_rank_file
from mpiscope.trace.received import add_recv_bytes
from mpiscope.trace.requests import StartLinks, link_starts
from mpiscope.trace.tables import (
    Rows,
    collective_ids,
    collectives_table,
    event_rows,
    events_frame,
    messages_table,
    nullable,
    persistent_starts,
    shift_rows,
)


@dataclass
class MergeResult:
    events: int
    messages: int
    collectives: int
    unmatched_sends: int
    unmatched_recvs: int
    seconds: float
    warnings: list[str] = field(default_factory=list)


def _unfinished(files: list[RankFile]) -> list[str]:
    by_state: dict[str, list[int]] = {}
    for f in files:
        if f.cut_off:
            what = R.STATE_NAMES.get(f.state, "unknown state")
            if int(f.header["end_signal"]):
                what += f", signal {int(f.header['end_signal'])}"
            by_state.setdefault(what, []).append(f.rank)
    return [f"rank{'s' if len(r) > 1 else ''} {', '.join(map(str, r))}: recording ended early ({what}); "
            f"read up to the last record" for what, r in by_state.items()]


def _stuck_calls(rec: Records, calls: CallTable) -> dict[str, str]:
    """The call each rank (thread) was inside when its recording ended."""
    idx = np.flatnonzero((rec.t_leave < 0) & (rec.call >= FIRST_TABLE_ID))
    return {f"{rec.rank[i]}.{rec.thread[i]}": calls.names[rec.call[i]] for i in idx
            if calls.names[rec.call[i]] not in ("MPI_Finalize", "MPI_Session_finalize")}


@contextmanager
def _small_pages() -> Iterator[None]:
    """NumPy asks for transparent huge pages on large arrays; where the kernel
    then compacts memory on each first touch (defrag=madvise, common on VMs),
    that made the merge's fresh allocations ~6x slower (measured: 0.79 s vs
    0.13 s to copy 192 MB). The merge allocates and touches each array once."""
    multiarray = getattr(np, "_core", getattr(np, "core", None)).multiarray  # type: ignore[union-attr]
    setter = getattr(multiarray, "_set_madvise_hugepage", None)
    if setter is None:
        yield
        return
    previous = setter(False)
    try:
        yield
    finally:
        setter(previous)


def merge_trace(trace_dir: Path) -> MergeResult:
    with _small_pages():
        return _merge(Path(trace_dir))


# Peak memory of a merge per record: bench/merge_throughput.py measured 2.09 GiB
# of peak RSS for 10 M records (with the events' count, inside_ns and rc columns),
# of which ~0.2 GiB is the interpreter and libraries.
PEAK_BYTES_PER_RECORD = 210


def available_memory() -> int | None:
    """Bytes the merge can take without the kernel killing it (MemAvailable +
    SwapFree), None where /proc/meminfo does not say."""
    try:
        info = dict(line.split(":", 1) for line in Path("/proc/meminfo").read_text().splitlines() if ":" in line)
        return sum(int(info[k].split()[0]) * 1024 for k in ("MemAvailable", "SwapFree"))
    except (OSError, KeyError, ValueError):
        return None


def _check_memory(trace_dir: Path, records: int) -> None:
    """Refuse, in one sentence, a merge that would be killed for lack of memory."""
    need, have = records * PEAK_BYTES_PER_RECORD, available_memory()
    if have is not None and need > have:
        raise UsageError(f"merging the {records:,} records of {trace_dir} needs about {need / 2**30:.1f} GiB of "
                         f"memory and {have / 2**30:.1f} GiB is available; copy the trace directory to a machine "
                         f"with more memory and run mpiscope merge there, or record less (MPI_Pcontrol(0) and "
                         f"(1) around the phase of interest, or mpiscope run --paused)")


def _spawned(trace_dir: Path) -> list[str]:
    """The worlds MPI_Comm_spawn started, which the recorder leaves out (one byte each in raw/spawned)."""
    try:
        worlds = (trace_dir / "raw" / "spawned").stat().st_size
    except OSError:
        return []
    return [(f"{worlds} group(s) of processes started by MPI_Comm_spawn were not recorded; "
             f"the parents' calls with them are in events.parquet, their messages are not in messages.parquet")]


def _merge(trace_dir: Path) -> MergeResult:
    t0 = time.perf_counter()
    manifest = read_manifest(trace_dir)
    calls = CallTable.from_manifest(manifest["calls"])
    files, missing = _read_ranks(trace_dir, calls)
    _check_memory(trace_dir, sum(f.size for f in files))
    warnings = [w for f in files for w in f.warnings] + _unfinished(files) + _spawned(trace_dir)
    warnings += [f"rank {r}: not merged, {reason}" for r, reason in missing.items()]
    swaps, swap_warnings = bcast_swaps(trace_dir, files)
    warnings += swap_warnings
    rec, comms = build_records(files, calls)
    links = link_starts(rec)
    windows = gap_windows(files, rec, links)
    for f in files:  # the records are copied into rec: unmap the files (peak memory)
        f.blocks.clear()
    nranks = max(max(int(f.header["world_size"]) for f in files), max(f.rank for f in files) + 1,
                 max(missing, default=-1) + 1)
    stuck, clocks = _stuck_calls(rec, calls), rec.clocks
    starts = persistent_starts(rec, links, calls)
    recorded = all(int(f.header["version"]) >= R.RECV_BYTES_SINCE for f in files)
    with ThreadPoolExecutor(max_workers=2) as pool:
        # Two cores: matching runs beside the events kernel and the building
        # of the events table, which is written (the longest step) beside the
        # building and writing of the other tables. The events table is built
        # before matching has found the clock shifts, which are zero unless
        # offsets were mismeasured, and built again when they are not. The
        # kernels, NumPy, Polars and pyarrow release the GIL.
        matched = pool.submit(_match, rec, links, nranks, windows, shift_bounds(files, nranks))
        rows = event_rows(rec, links, calls)
        add_recv_bytes(rec, rows, starts, starts["record"], recorded)
        add_outcomes(rec, rows)
        ev, coll_id, start_id = _events(pool, rows, starts, calls, trace_dir)
        p2p, si, ri, shifts, feasible, refused = matched.result()
        del rec  # every table has its own columns now (peak memory)
        if shifts.any():
            shift_rows(rows, shifts)
            shift_rows(starts, shifts)
            ev, coll_id, start_id = _events(pool, rows, starts, calls, trace_dir)
        events_written = pool.submit(_write_one, trace_dir, "events", ev)
        colls = collectives_table([(rows, coll_id), (starts, start_id)], comms, calls)
        messages = messages_table(p2p, si, ri, shifts, feasible)
        for name, df in (("messages", messages), ("collectives", colls), ("comms", comms)):
            _write_one(trace_dir, name, df)
        events_written.result()
    if shifts.any():
        warnings.append(f"clock correction: {int((shifts > 0).sum())} rank(s) shifted by up to "
                        f"{int(shifts.max())} ns so that no message is received before it was sent")
    if refused:
        warnings.append(refused)
    elif not feasible:
        warnings.append("clock correction: some receive-before-send violations remain (cyclic); clamped")
    nevents = int(rows["event"].size)
    unmatched_s, unmatched_r = p2p.sends.size - si.size, p2p.recvs.size - ri.size
    lost = _lost_messages(p2p, si, ri, set(windows) | set(missing))
    if lost:
        warnings.append(lost)
    manifest.update({
        "merged": True,
        "merged_by": __version__,
        "ranks": nranks,
        "counts": {"events": nevents, "messages": messages.height, "collectives": colls.height,
                   "unmatched_sends": unmatched_s, "unmatched_recvs": unmatched_r,
                   "dropped": int(sum(int(f.header["dropped"]) for f in files))},
        "rank_states": {str(f.rank): R.STATE_NAMES.get(f.state, "unknown") for f in files},
        "truncated_ranks": [f.rank for f in files if f.cut_off],
        "unfinished_calls": stuck,
        "hosts": {str(f.rank): f.header["hostname"].decode(errors="replace") for f in files},
        "clock": {"kind": "tsc" if any(int(f.header["clock_kind"]) for f in files) else "monotonic",
                  "ranks": [c.to_dict() for c in clocks.values()],
                  "causality_shift_ns": shifts.tolist()},
        "t0_ns": int(rows["t_enter"].min()) if nevents else 0,
        "bcast": {**manifest.get("bcast", {"mode": "library"}), "swaps": swaps},
        "recv_bytes_recorded": recorded,
        "missing_ranks": {str(r): reason for r, reason in missing.items()},
        "dropped_blocks": {str(f.rank): f.damage.blocks for f in files if f.damage.blocks},
        "dropped_records": {str(f.rank): f.damage.records for f in files if f.damage.records},
        "damage": {str(f.rank): f.damage.to_dict() for f in files if f.damage},
        "warnings": warnings,
    })
    write_manifest(trace_dir, manifest)
    return MergeResult(nevents, messages.height, colls.height, unmatched_s, unmatched_r,
                       time.perf_counter() - t0, warnings)


def _read_ranks(trace_dir: Path, calls: CallTable) -> tuple[list[RankFile], dict[int, str]]:
    """The rank files that can be read, and why each other one cannot (by rank): a damaged
    rank file never stops the merge of the others."""
    files, missing = [], {}
    paths = rank_files(trace_dir)
    for path in paths:
        try:
            f = read_rank_file(path, calls.known())
        except TraceCorrupt as e:
            missing[int(RANK_FILE.search(path.name)[1])] = _reason(str(e), path)  # type: ignore[index]
            continue
        problem = clock_problem(f)
        if problem:
            missing[f.rank] = _reason(problem, path)
        else:
            files.append(f)
    if not files:
        raise TraceCorrupt(f"no rank file of {trace_dir} can be read ({'; '.join(sorted(set(missing.values())))}); "
                           f"record the program again with mpiscope run")
    return files, missing


def _reason(sentence: str, path: Path) -> str:
    """A reader's sentence about one file, as a reason beside its rank: without the path and
    the advice, which the warning gives once."""
    return sentence.replace(f"{path} ", "").replace(f"rank {path.stem.split('-')[-1]}'s file ", "").split(";")[0]


def _match(rec: Records, links: StartLinks, nranks: int, windows: dict[int, Window],
           bounds: ShiftBounds) -> tuple[P2P, np.ndarray, np.ndarray, np.ndarray, bool, str]:
    """Matched messages, and the clock shifts (whole ranks) that remove any receive-before-send;
    the last item names the messages whose shift was refused (too large: damage), or is empty."""
    p2p = p2p_sides(rec, links).without(failed_events(rec))
    si, ri = match_around_gaps(p2p.sends, p2p.recvs, windows)
    ri = reorder_threads(p2p, si, ri)
    done = p2p.recv_leave[ri] >= 0
    src, dst = p2p.sends.src[si][done], p2p.recvs.dst[ri][done]
    shifts, feasible, refused = causality_shifts(src, dst, p2p.sends.posted[si][done], p2p.recv_leave[ri][done],
                                                 nranks, bounds.between(src, dst), bounds.span)
    named = ""
    if refused.size:
        events = p2p.sends.event[si][done][refused]
        shown = ", ".join(f"rank {s} -> {d} (send event {e})" for s, d, e in
                          zip(src[refused][:3].tolist(), dst[refused][:3].tolist(), events[:3].tolist()))
        need = (p2p.sends.posted[si][done] - p2p.recv_leave[ri][done])[refused]
        named = (f"clock correction: {refused.size} message(s) were received before they were sent, by up to "
                 f"{int(need.max()):,} ns, more than the clocks allow (ranks on one host read one clock; across "
                 f"hosts, the offsets' measured uncertainty; never more than the run, {bounds.span / 1e9:.3g} s): "
                 f"no rank was shifted for them, their receive is clamped to their send "
                 f"({shown}{', ...' if refused.size > 3 else ''})")
    return p2p, si, ri, shifts, feasible, named


def _lost_messages(p2p: P2P, si: np.ndarray, ri: np.ndarray, damaged: set[int]) -> str:
    """One line on the messages of intact ranks left unmatched beside damaged or missing ones."""
    if not damaged:
        return ""
    bad = np.array(sorted(damaged))
    sent = np.ones(p2p.sends.size, bool)
    sent[si] = False
    got = np.ones(p2p.recvs.size, bool)
    got[ri] = False
    sends = int((sent & np.isin(p2p.sends.dst, bad) & ~np.isin(p2p.sends.src, bad)).sum())
    recvs = int((got & np.isin(p2p.recvs.src, bad) & ~np.isin(p2p.recvs.dst, bad)).sum())
    if not sends and not recvs:
        return ""
    return (f"{sends:,} send(s) to and {recvs:,} receive(s) from damaged or missing rank(s) "
            f"{', '.join(map(str, bad.tolist()))} stay unmatched (their other side is lost)")


def _events(pool: ThreadPoolExecutor, rows: Rows, starts: Rows, calls: CallTable,
            trace_dir: Path) -> tuple[pl.DataFrame, np.ndarray, np.ndarray]:
    """events.parquet and the collective instance of each of its rows and of each persistent
    start; the table's columns and those ids side by side."""
    frame = pool.submit(events_frame, rows, calls, trace_dir)
    coll_id, start_id = collective_ids(rows, starts)
    return frame.result().with_columns(nullable(coll_id, coll_id >= 0, "coll_id")), coll_id, start_id


FILTER_COLUMNS = {"rank", "src", "dst", "call", "comm"}


def _write_parquet(df: pl.DataFrame, path: Path) -> None:
    """Integers delta-encoded: times, ids and ranks grow slowly along the rows, so
    this is smaller than plain encoding and skips the dictionary trial Polars' writer
    makes on every column (on the 10M-record bench trace: events.parquet 79 -> 8 MiB
    with zstd, about 30% less CPU). Snappy rather than zstd: in 3 interleaved merges
    of that trace, 0.1-0.4 s less wall each (perf: zstd's context set-up alone took
    1.7% of the CPU) for tables of 33.4 instead of 25.5 MiB. Strings stay
    dictionary-encoded. Min/max statistics only on the columns readers filter
    row groups by (ranks, calls, communicators, times): on all 17 columns of
    the bench's events table they took 0.18 of its 1.6 s of writing."""
    table = df.to_arrow()
    ints = [f.name for f in table.schema if pa.types.is_integer(f.type)]
    filtered = [n for n in table.column_names if n in FILTER_COLUMNS or n.endswith("_ns")]
    pq.write_table(table, path, compression="snappy", write_statistics=filtered,
                   use_dictionary=[n for n in table.column_names if n not in ints],
                   column_encoding={n: "DELTA_BINARY_PACKED" for n in ints})


def _write_one(trace_dir: Path, name: str, df: pl.DataFrame) -> None:
    path = trace_dir / f"{name}.parquet"
    tmp = trace_dir / f".{name}.parquet.tmp"
    try:
        _write_parquet(df, tmp)
        tmp.replace(path)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise UsageError(f"cannot write {path} ({e.strerror}); free space or make {trace_dir} "
                         f"writable, then run: mpiscope merge {trace_dir}") from e
