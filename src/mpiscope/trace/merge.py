"""Per-rank raw files -> events / messages / collectives / comms Parquet tables.

The per-record work runs in C kernels (trace/native.py), the rest column-wise
in NumPy and Polars; no Python loop runs per event.
Tables are written through temporary files and renamed, so a failed merge
leaves any earlier tables intact.
"""

from __future__ import annotations

import dataclasses
import shutil
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from mpiscope import __version__
from mpiscope.capture.manifest import read_manifest, write_manifest
from mpiscope.errors import UsageError
from mpiscope.machine import KEPT_HEAP_BYTES, available_memory, released_heap, reused_heap, small_pages
from mpiscope.parallel import Tasks, mpi_size
from mpiscope.trace import is_merged
from mpiscope.trace import record as R
from mpiscope.trace.bcast import bcast_swaps
from mpiscope.trace.bounded import SPILL, Outcome, merge_in_pieces, most_records, plan, raw_records, remove_raw
from mpiscope.trace.buckets import lost_sentence, refused_sentence
from mpiscope.trace.clocks import RankClock, ShiftBounds, causality_shifts, rank_clocks, shift_bounds
from mpiscope.trace.columns import CallTable, Records, build_records, comm_table
from mpiscope.trace.damaged import Window, gap_windows, match_around_gaps
from mpiscope.trace.match import P2P, p2p_sides, reorder_threads, threaded_ranks
from mpiscope.trace.outcomes import add_outcomes, failed_events
from mpiscope.trace.pieces import Whole, stuck_calls, worker_setup
from mpiscope.trace.placement import placement
from mpiscope.trace.quiet import longest
from mpiscope.trace.ranks import read_ranks
from mpiscope.trace.reader import RankFile
from mpiscope.trace.received import add_completed_bytes, add_recv_bytes, overclaimed, take_back
from mpiscope.trace.requests import StartLinks, link_starts
from mpiscope.trace.storage import with_derived_times, write_one, writers
from mpiscope.trace.tables import (
    Rows,
    collective_ids,
    collectives_table,
    event_rows,
    events_frame,
    latest_entries,
    lift_persistent_starts,
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


DEFAULT_MEMORY = 4 << 30


def merge_trace(trace_dir: Path, memory: int | None = None, workers: int = 1,
                delete_raw: bool = False) -> MergeResult:
    """Merge the raw files of trace_dir into its tables within `memory` bytes (default 4 GiB, never
    more than the machine has available): in memory where the whole trace fits, else in pieces
    (bounded.py) on `workers` processes; always in pieces on the ranks of the MPI job this process
    is rank 0 of. delete_raw removes each rank's raw file once its events are written."""
    with small_pages():
        return _merge(Path(trace_dir), memory or DEFAULT_MEMORY, workers, delete_raw)


# Peak memory of a merge per record: bench/merge_throughput.py measured 2.09 GiB
# of peak RSS for 10 M records (with the events' count, inside_ns and rc columns),
# of which ~0.2 GiB is the interpreter and libraries.
PEAK_BYTES_PER_RECORD = 210
BASE_BYTES = 400 << 20      # a merging process before it reads a record (interpreter, Polars, pyarrow), with margin
# A piece of a merge in pieces peaks holding its records (~86 B each with the persistent starts and
# links, and the mapped rank file, 51 B, while they are read) beside its event rows (~115 B each with
# received bytes and outcomes). Measured on one rank of the generated halo (15.6 M records, 10.4 M
# events): 2.47 GiB above the interpreter in the survey, 2.39 when writing. A trace of blocking calls
# has an event per record: ~86 + 115 B, hence the bound per record below.
PIECE_BYTES_PER_RECORD = 210
SIDE_BYTES = 280
FULLEST_MARGIN = 64 << 20   # a matching bucket above its share by less is within BASE_BYTES' margin: not said
# Records of a piece whose arrays the heap kept for reuse holds (machine.reused_heap): a process
# that merges its pieces one after another then builds each after the first without fresh pages,
# which cost more than the work on them. Measured on the generated halo, 31.2 M records of 64 ranks,
# one process: 2 pieces of 15.6 M records 13.1 s (2.77 M page faults, peak 3.74 GB), 4 of 7.8 M
# 13.1 s (2.55 M faults), 6 of 5.2 M 9.7 s (0.43 M), 8 of 3.9 M 9.0 s (0.32 M, peak 1.51 GB). On
# 1,000 M records of 64 ranks, each cut in 4, the wall time stayed (571-581 s beside 579 s; a
# third read of every rank then found the cuts) with 10 % less CPU and a peak of 2.8 GiB, not 3.7.
# A piece frees and takes again ~200 B per record (5.2 M records fit 1 GiB, 7.8 M did not).
HEAP_BYTES_PER_RECORD = 256
# A smaller kept heap makes pieces too small to pay: 100 M records of 16 ranks peaked above a
# budget of 1 GiB with one of 189 MiB (1.05-1.14 GiB: the collectives, assembled by Polars after
# the matching, come on top of what the heap holds), where the arrays released peaked at 0.87-0.94.
SMALLEST_KEPT_HEAP = 320 << 20


def _kept_heap(budget: int) -> int:
    """The freed heap one process merging alone keeps for reuse (machine.reused_heap): up to
    KEPT_HEAP_BYTES, as much as four fifths of its share hold beside two pieces of the records that
    heap holds (one written while the next is built); 0 (the arrays released: machine.released_heap)
    where that is less than SMALLEST_KEPT_HEAP, below a budget of about 1.5 GiB. Released, every
    array is faulted in anew: 100 M records of 16 ranks at --memory 2GiB took 83-86 s, 43-45 s of
    it system time; with a heap of 499 MiB 55-60 s (5-6 s), peak 1.17-1.27 GiB instead of 1.11-1.12
    (at 1.5GiB, 344 MiB: 50-55 s instead of 79-83, peak 1.00-1.06 GiB instead of 0.92); 1,000 M
    records of 64 ranks at 2 GiB 500 s (76 s), peak 1.58 GiB; none kept, on a slower day, 1034 s (586 s)."""
    share = (budget - BASE_BYTES) * 4 // 5
    heap = min(KEPT_HEAP_BYTES, share * HEAP_BYTES_PER_RECORD // (HEAP_BYTES_PER_RECORD + 2 * PIECE_BYTES_PER_RECORD))
    return heap if heap >= SMALLEST_KEPT_HEAP else 0


# Disk a merge needs per record: its tables (bench/trace_size.py: 1-4 B per event on recorded traces,
# 0.5-1.2 on the generated halo) and what a merge in pieces spills (the sides of its messages, at most
# 52 B a side before lz4 compresses it: 5 B per record on the generated halo).
TABLE_BYTES_PER_RECORD = 6
SPILL_BYTES_PER_RECORD = 8


def _budget(memory: int) -> int:
    """The budget, within what the machine has available."""
    have = available_memory()
    return min(memory, have) if have is not None else memory


def _check_disk(trace_dir: Path, records: int, pieces: bool, delete_raw: bool) -> None:
    """Refuse, in one sentence, a merge that would fill the disk. With delete_raw, the events of a
    merge in pieces take the room of the raw files they replace."""
    need = records * ((0 if pieces and delete_raw else TABLE_BYTES_PER_RECORD)
                      + (SPILL_BYTES_PER_RECORD if pieces else 0))
    free = shutil.disk_usage(trace_dir).free
    if need > free:
        raise UsageError(f"merging the {records:,} records of {trace_dir} needs about {need / 2**30:.1f} GiB of "
                         f"free disk space there for its tables{' and temporary files' if pieces else ''}, and "
                         f"{free / 2**30:.1f} GiB is free; free {(need - free) / 2**30:.1f} GiB, or copy the trace "
                         f"directory to a larger disk and run mpiscope merge there")


def _spawned(trace_dir: Path) -> list[str]:
    """The worlds MPI_Comm_spawn started, which the recorder leaves out (one byte each in raw/spawned)."""
    try:
        worlds = (trace_dir / "raw" / "spawned").stat().st_size
    except OSError:
        return []
    return [(f"{worlds} group(s) of processes started by MPI_Comm_spawn were not recorded; "
             f"the parents' calls with them are in events.parquet, their messages are not in messages.parquet")]


def _merge(trace_dir: Path, memory: int, workers: int, delete_raw: bool) -> MergeResult:
    t0 = time.perf_counter()
    manifest = read_manifest(trace_dir)
    calls = CallTable.from_manifest(manifest["calls"])
    if is_merged(trace_dir, manifest) and not list((trace_dir / "raw").glob("rank-*.msc")):
        raise UsageError(f"{trace_dir} is merged and its raw files were removed (merge --delete-raw): its tables "
                         f"are all there is to open; record the program again to merge it anew")
    records = raw_records(trace_dir, R.REC_BYTES)
    budget = _budget(memory)

    def fits(records: dict[int, int]) -> bool:
        # a trace that fits is merged in one pass, which keeps two cores busy (bench/merge_scale.py, 10 M
        # records: 3.3 s, in pieces on 2 workers 5.3 s); an MPI job's ranks are there to merge pieces
        return mpi_size() <= 1 and BASE_BYTES + sum(records.values()) * PEAK_BYTES_PER_RECORD <= budget

    in_memory = fits(records)
    files: list[RankFile] = []  # a merge in pieces keeps what it needs of the whole trace (no records)
    missing: dict[int, str] = {}
    cuts: dict[int, list[int]] = {}
    heap = Heap(_kept_heap(budget), Tasks.count(workers), delete_raw)
    if not in_memory:
        # the files' sizes on disk overestimate (partly filled blocks): count their records, and
        # cut the ranks too large for a piece while each is read
        files, missing, cuts = read_ranks(trace_dir, calls, records, _most(records, budget, heap),
                                           _release_files(records, budget))
        in_memory = fits(records)
    _check_disk(trace_dir, sum(records.values()), not in_memory, delete_raw)
    if in_memory:
        with heap.allocator(alone=True):
            return _merge_in_memory(trace_dir, manifest, calls, delete_raw, t0)
    return _merge_pieces(trace_dir, manifest, calls, files, missing, records, cuts, budget, heap, t0)


def _merge_pieces(trace_dir: Path, manifest: dict[str, Any], calls: CallTable, files: list[RankFile],
                  missing: dict[int, str], records: dict[int, int], cuts: dict[int, list[int]], budget: int,
                  heap: Heap, t0: float) -> MergeResult:
    """A merge in pieces on up to heap.asked processes, as many as the budget holds."""
    asked, delete_raw = heap.asked, heap.delete_raw
    largest = longest(records, cuts)
    n = _processes(budget, largest, asked)
    if n == 0:
        n = asked if mpi_size() > 1 else 1
        need = BASE_BYTES + n * (largest * PIECE_BYTES_PER_RECORD + (BASE_BYTES if n > 1 else 0))
        raise UsageError(f"merging {trace_dir} needs at least {need / 2**30:.2f} GiB of memory ({largest:,} records "
                         f"of one rank that cannot be cut smaller, in one piece, on {n} "
                         f"process{'es' if n > 1 else ''}) and it may take {budget / 2**30:.2f} GiB (--memory, "
                         f"within what the machine has available); give a larger --memory"
                         f"{' or fewer MPI processes' if n > 1 else ''}, or merge on a machine with more memory")
    per_worker = _per_worker(budget, n)
    fewer = []
    if n < asked:
        fewer = [(f"merged on {n} process{'es' if n > 1 else ''} instead of {asked}: {largest:,} records of one "
                 f"rank, which cannot be cut smaller, take about {largest * PIECE_BYTES_PER_RECORD / 2**30:.1f} GiB, "
                 f"more than each of {asked} processes may take of the {budget / 2**30:.2f} GiB budget "
                 f"({_per_worker(budget, asked) / 2**30:.1f} GiB); give a larger --memory to use them all")]
    # Freed arrays are kept for reuse (reused_heap) where one process does all the work, in memory
    # (whatever --workers says) or its pieces one after the other, also when the budget left one
    # process of those asked for (1,000 M records of 64 ranks, --workers 2: 483 s without, 375 s
    # with); merging workers were slower with it (100 M records, 2 workers: 24.4 -> 26.4-28.8 s).
    # Below the budget that holds a kept heap (_kept_heap), one process releases its arrays (released_heap);
    # merging workers keep glibc's own way (100 M records of 16 ranks, --memory 2GiB, 2 workers:
    # 1.46 GiB in all, 69.1 s; 1.55 GiB, 74.9 s with their arrays released).
    alone = mpi_size() <= 1 and n == 1
    with heap.allocator(alone), Tasks(n, setup=worker_setup) as tasks:
        warnings = fewer + _file_warnings(trace_dir, files, missing)
        swaps, swap_warnings = bcast_swaps(trace_dir, files)
        nranks = _world(files, missing)
        dense, _, comms = comm_table(files)
        whole = Whole(trace_dir, trace_dir / SPILL, calls, rank_clocks(files), dense,
                      all(int(f.header["version"]) >= R.RECV_BYTES_SINCE for f in files), 1,
                      threaded=threaded_ranks(files))
        held = heap.kept if alone else 0
        p = plan({f.rank: records.get(f.rank, 0) for f in files}, per_worker, tasks.workers,
                 PIECE_BYTES_PER_RECORD, SIDE_BYTES, cuts, heap.records, heap.halved(n), held)
        # writes beside the next piece's work where this process merges the pieces in turn and its
        # share holds two pieces (one written, one built) beside the kept heap; not where a piece's
        # raw files are removed once written (they must be written first); the next piece built
        # beside this one where the share holds three (one written, one built, one read). At
        # --memory 1GiB, 100 M records of 16 ranks, pieces of 2.1 M records: 0.97 GiB without the
        # writes beside (89.9 s), 1.01 GiB with (81.6 s).
        largest_bytes = p.largest_piece * PIECE_BYTES_PER_RECORD
        behind = alone and not delete_raw and held + 2 * largest_bytes <= per_worker
        ahead = behind and held + 3 * largest_bytes <= per_worker
        whole = dataclasses.replace(whole, buckets=p.buckets, processes=tasks.workers, behind=behind, ahead=ahead)
        o = merge_in_pieces(whole, p, tasks, nranks, shift_bounds(files, nranks),
                            sorted({f.rank for f in files if f.gaps} | set(missing)), comms, delete_raw)
    if (o.largest_bucket - p.sides) * SIDE_BYTES > FULLEST_MARGIN:   # held more than the budget leaves
        warnings.append(_fullest_bucket(o.largest_bucket, budget))
    return _conclude(trace_dir, manifest, files, missing, nranks, o, swaps, warnings + swap_warnings,
                     {"pieces": len(p.pieces), "buckets": p.buckets, "largest_bucket": o.largest_bucket,
                      "workers": tasks.workers, "memory_budget": budget}, t0)


def _fullest_bucket(sides: int, budget: int) -> str:
    """The matching's one bound the merge cannot always keep: a bucket whose messages cannot be
    matched in windows (buckets._in_windows: messages of damaged ranks, or a receive that completed
    before its send began where threads' messages may need re-paired) is matched whole, and a
    window holds at least one piece's sides of its bucket."""
    return (f"the fullest matching bucket held {sides:,} sends and receives at once, about "
            f"{sides * SIDE_BYTES / 2**30:.1f} GiB, more than the {budget / 2**30:.2f} GiB of --memory left them (a "
            f"bucket with messages of damaged ranks, or of threads received before their send began, is matched "
            f"whole; another in windows of at least one piece's sides): the merge may have taken more; give a "
            f"larger --memory")


@dataclass(frozen=True)
class Heap:
    """What a merge does with the arrays it frees: one process merging alone keeps `kept` bytes of
    them for reuse (machine.reused_heap; _kept_heap), or where that is 0 releases them
    (machine.released_heap); merging workers keep glibc's own way."""
    kept: int
    asked: int          # processes asked for (Tasks.count)
    delete_raw: bool

    @property
    def records(self) -> int | None:
        """The records of a piece the kept heap holds where one process was asked to merge; None
        where the heap is not kept."""
        return self.kept // HEAP_BYTES_PER_RECORD if self.asked == 1 and mpi_size() <= 1 and self.kept else None

    def halved(self, processes: int) -> bool:
        """Whether a piece may take half a process's share: where one process merges alone without
        the kept heap and writes each piece beside the next one's work, which then holds two. 100 M
        records of 16 ranks, --memory 1.25GiB: pieces of 3.1 M records, one at a time, peaked at 1.13
        GiB (96.1 s), of 2.1 M, two at a time, at 1.11 GiB (87.3 s); --memory 2GiB: whole ranks of
        6.25 M records 1.21 GiB (111.8 s), halves 1.11 GiB (87.1 s)."""
        return processes == 1 and mpi_size() <= 1 and not self.kept and not self.delete_raw

    def allocator(self, alone: bool) -> AbstractContextManager[object]:
        """The heap's way for the merge, where this process does all its work (`alone`)."""
        if not alone:
            return nullcontext()
        return reused_heap(self.kept) if self.kept else released_heap()


def _most(records: dict[int, int], budget: int, heap: Heap) -> int | None:
    """The records of a piece, above which a rank is cut (quiet.py): for the processes asked for, or
    as many as have a share of the budget (half of it where Heap.halved), and on one process what
    its kept heap holds (Heap.records); None where no process has a share (the merge then says so).
    On this 2-core machine two processes merge no faster than one (1,000 M records of 64 ranks, each
    cut in 3 for --workers 2: 479 s, one process 484 s; 31.2 M of 2 ranks: 22.3 s, 22.5 s), but a
    rank no longer limits how many take part where there are cores for them."""
    for n in range(heap.asked, 0, -1):
        per_worker = _per_worker(budget, n)
        if per_worker > 0 or mpi_size() > 1:
            break
    if per_worker <= 0:
        return None
    return most_records(records, per_worker, n, PIECE_BYTES_PER_RECORD, heap.records, heap.halved(heap.asked))


def _per_worker(budget: int, n: int) -> int:
    """Bytes of the budget for the pieces of each of n processes (each but the merging one has its
    own interpreter and libraries)."""
    return (budget - BASE_BYTES) // n - (BASE_BYTES if n > 1 else 0)


def _processes(budget: int, largest: int, asked: int) -> int:
    """The most processes, up to `asked`, whose share of the budget holds the largest rank in one
    piece; 0 if none does. An MPI job's processes are its ranks, all of them or none."""
    fits = [n for n in range(asked, 0, -1) if largest * PIECE_BYTES_PER_RECORD <= _per_worker(budget, n)]
    if mpi_size() > 1:
        return asked if asked in fits else 0
    return fits[0] if fits else 0


def _file_warnings(trace_dir: Path, files: list[RankFile], missing: dict[int, str]) -> list[str]:
    warnings = [w for f in files for w in f.warnings] + _unfinished(files) + _spawned(trace_dir) + \
        _untracked(files)
    return warnings + [f"rank {r}: not merged, {reason}" for r, reason in missing.items()]


def _untracked(files: list[RankFile]) -> list[str]:
    """What the recorder's tables had no room for, said: it was only a count in the manifest (a coarray
    program that makes and frees a window each step runs out of the 65,534 communicator and window
    numbers, never reused, after as many steps; fences of different windows were then matched)."""
    lost = {f.rank: int(f.header["dropped"]) for f in files if int(f.header["dropped"])}
    if not lost:
        return []
    ranks = ", ".join(f"{r} ({n:,})" for r, n in sorted(lost.items())[:8]) + (", ..." if len(lost) > 8 else "")
    return [f"rank{'s' if len(lost) > 1 else ''} {ranks}: objects the recorder could not track (over "
            f"{R.COMM_UNKNOWN - 1:,} communicators and windows made in the run, over 1,024 threads in MPI, or a full request table); "
            f"calls on them have no communicator, peer or request, so their messages and collectives may be "
            f"unmatched or matched with others"]


def _world(files: list[RankFile], missing: dict[int, str]) -> int:
    return max(max(int(f.header["world_size"]) for f in files), max(f.rank for f in files) + 1,
               max(missing, default=-1) + 1)


def _clock_warnings(warnings: list[str], shifts: np.ndarray, feasible: bool, refused: str) -> None:
    if shifts.any():
        warnings.append(f"clock correction: {int((shifts > 0).sum())} rank(s) shifted by up to "
                        f"{int(shifts.max())} ns so that no message is received before it was sent")
    if refused:
        warnings.append(refused)
    elif not feasible:
        warnings.append("clock correction: some receive-before-send violations remain (cyclic); clamped")


def _merge_in_memory(trace_dir: Path, manifest: dict[str, Any], calls: CallTable, delete_raw: bool,
                     t0: float) -> MergeResult:
    files, missing, _ = read_ranks(trace_dir, calls)
    warnings = _file_warnings(trace_dir, files, missing)
    swaps, swap_warnings = bcast_swaps(trace_dir, files)
    warnings += swap_warnings
    rec, comms = build_records(files, calls)
    links = link_starts(rec)
    windows = gap_windows(files, rec, links)
    for f in files:  # the records are copied into rec: unmap the files (peak memory)
        f.blocks.clear()
    nranks = _world(files, missing)
    stuck = stuck_calls(rec, calls)
    starts = persistent_starts(rec, links, calls)
    recorded = all(int(f.header["version"]) >= R.RECV_BYTES_SINCE for f in files)
    with ThreadPoolExecutor(max_workers=2) as pool:
        # Two cores: matching runs beside the events kernel and the building
        # of the events table, which is written (the longest step) beside the
        # building and writing of the other tables. The events table is built
        # before matching has found the clock shifts, which are zero unless
        # offsets were mismeasured, and built again when they are not. The
        # kernels, NumPy, Polars and pyarrow release the GIL.
        matched = pool.submit(_match, rec, links, nranks, windows, shift_bounds(files, nranks), threaded_ranks(files))
        rows = event_rows(rec, links, calls)
        latest = latest_entries(rows)
        add_recv_bytes(rec, rows, starts, starts["record"], recorded)
        add_completed_bytes(rows, links)
        add_outcomes(rec, rows)
        starts = lift_persistent_starts(rec, rows, starts)
        ev, coll_id, start_id = _events(pool, rows, starts, calls, trace_dir)
        p2p, si, ri, shifts, feasible, refused = matched.result()
        del rec  # every table has its own columns now (peak memory)
        over, excess = overclaimed(p2p, si, ri)
        take_back(rows, over, excess)
        if shifts.any():
            shift_rows(rows, shifts)
            shift_rows(starts, shifts)
        if shifts.any() or over.size:
            ev, coll_id, start_id = _events(pool, rows, starts, calls, trace_dir)
        # a trace that fits in memory is stored for size (storage.py): its entries as gaps, its
        # messages' and collectives' times derived from the events
        events_written = pool.submit(write_one, trace_dir, "events", ev, writers(ev.height), compact=True)
        colls = collectives_table([(rows, coll_id), (starts, start_id)], comms, calls)
        messages = messages_table(p2p, si, ri, shifts, feasible)
        for name, df in (("messages", messages), ("collectives", colls), ("comms", comms)):
            write_one(trace_dir, name, with_derived_times(name, df, ev), compact=True)
        events_written.result()
    if delete_raw:
        for f in files:
            remove_raw(trace_dir, f.rank)
    nevents = int(rows["event"].size)
    o = Outcome(events=nevents, messages=messages.height, collectives=colls.height,
                unmatched_sends=p2p.sends.size - si.size, unmatched_recvs=p2p.recvs.size - ri.size,
                shifts=shifts, feasible=feasible, refused=refused,
                lost=_lost_messages(p2p, si, ri, set(windows) | set(missing)), stuck=stuck,
                t0_ns=int(rows["t_enter"].min()) if nevents else 0, latest=latest)
    return _conclude(trace_dir, manifest, files, missing, nranks, o, swaps, warnings,
                     {"pieces": 1, "buckets": 1, "workers": 1}, t0)


def _conclude(trace_dir: Path, manifest: dict[str, Any], files: list[RankFile], missing: dict[int, str],
              nranks: int, o: Outcome, swaps: list[dict[str, Any]], warnings: list[str], how: dict[str, int],
              t0: float) -> MergeResult:
    """What either merge found, in the manifest (with the clocks' and the lost messages' warnings
    after the others) and in the result."""
    _clock_warnings(warnings, o.shifts, o.feasible, o.refused)
    if o.lost:
        warnings.append(o.lost)
    _finish(trace_dir, manifest, files, missing, nranks, o, swaps, warnings, how)
    return MergeResult(o.events, o.messages, o.collectives, o.unmatched_sends, o.unmatched_recvs,
                       time.perf_counter() - t0, warnings)


def _finish(trace_dir: Path, manifest: dict[str, Any], files: list[RankFile], missing: dict[int, str], nranks: int,
            o: Outcome, swaps: list[dict[str, Any]], warnings: list[str], how: dict[str, int]) -> None:
    """The manifest of the merged trace."""
    clocks = rank_clocks(files)
    counts = {"events": o.events, "messages": o.messages, "collectives": o.collectives,
              "unmatched_sends": o.unmatched_sends, "unmatched_recvs": o.unmatched_recvs}
    manifest.update({
        "merged": True,
        "merged_by": __version__,
        "ranks": nranks,
        "counts": {**counts, "dropped": int(sum(int(f.header["dropped"]) for f in files))},
        "rank_states": {str(f.rank): R.STATE_NAMES.get(f.state, "unknown") for f in files},
        "truncated_ranks": [f.rank for f in files if f.cut_off],
        "unfinished_calls": o.stuck,
        "ended_ns": _ended(files, clocks, o.shifts, o.latest, manifest.get("interrupted_at")),
        "hosts": {str(f.rank): f.header["hostname"].decode(errors="replace") for f in files},
        "placement": placement({f.rank: f.header for f in files}),
        "clock": {"kind": "tsc" if any(int(f.header["clock_kind"]) for f in files) else "monotonic",
                  "ranks": [c.to_dict() for c in clocks.values()],
                  "causality_shift_ns": o.shifts.tolist()},
        "t0_ns": o.t0_ns,
        "bcast": {**manifest.get("bcast", {"mode": "library"}), "swaps": swaps},
        "recv_bytes_recorded": all(int(f.header["version"]) >= R.RECV_BYTES_SINCE for f in files),
        "missing_ranks": {str(r): reason for r, reason in missing.items()},
        "dropped_blocks": {str(f.rank): f.damage.blocks for f in files if f.damage.blocks},
        "dropped_records": {str(f.rank): f.damage.records for f in files if f.damage.records},
        "damage": {str(f.rank): f.damage.to_dict() for f in files if f.damage},
        "warnings": warnings,
        "merge": how,
    })
    write_manifest(trace_dir, manifest)


def _ended(files: list[RankFile], clocks: dict[int, RankClock], shifts: np.ndarray,
           latest: dict[int, int], interrupted_at: dict[str, Any] | None = None) -> dict[str, int]:
    """When each rank that did not finish was stopped (a fatal signal, MPI_Abort), on the trace's
    clock: a call it was inside lasted until then, which its record (no exit) cannot say. A rank
    killed by SIGKILL has no such time, but for the last signal its program handled and went on
    after (runtime/signals.c): it ran at least until then, and until its latest entry (`latest`,
    before the shifts). In a run stopped by Ctrl-C it also ran until the Ctrl-C (`interrupted_at`,
    capture/run.py): a launcher kills with SIGKILL the ranks whose SIGINT it had not yet seen act
    once one rank died of its own (MPICH's Hydra does, on a loaded machine often)."""
    interrupted = _interrupted_ns(files, clocks, shifts, interrupted_at)
    ended = {}
    for f in files:
        if not f.cut_off:
            continue
        ns, own = int(f.header["ns_end"]), int(f.header["tick_end"])
        stops = [clocks[f.rank].global_ns(ns) + _shift(shifts, f.rank)] if ns and own else []
        if interrupted is not None and f.state == R.STATE_RUNNING:
            stops.append(interrupted)
        if stops:
            ended[str(f.rank)] = max(*stops, latest.get(f.rank, 0) + _shift(shifts, f.rank))
    return ended


def _interrupted_ns(files: list[RankFile], clocks: dict[int, RankClock], shifts: np.ndarray,
                    interrupted_at: dict[str, Any] | None) -> int | None:
    """The Ctrl-C that stopped the run, on the trace's clock: through the clock of a rank that ran
    on the host (and boot) whose monotonic clock `mpiscope run` read then; None without one."""
    if not interrupted_at or not interrupted_at.get("boot_id"):
        return None
    for f in files:
        if f.header["boot_id"].decode(errors="replace") == interrupted_at["boot_id"]:
            return clocks[f.rank].global_ns(int(interrupted_at["monotonic_ns"])) + _shift(shifts, f.rank)
    return None


def _shift(shifts: np.ndarray, rank: int) -> int:
    """The causality shift of rank's times (0 for a rank beyond those shifted)."""
    return int(shifts[rank]) if rank < shifts.size else 0


def _release_files(records: dict[int, int], budget: int) -> bool:
    """Whether the count-and-cut read (ranks.read_ranks) releases each block of a rank file once read:
    where the two files it reads at once do not fit the budget beside the interpreter. Mapped
    whole, two rank files of 15.6 M records (750 MB each) peaked at 1.58 GiB under --memory 1GiB;
    released, their pages are faulted in again for each pass over them (the checksums, the
    quiet scan's three passes)."""
    return BASE_BYTES + 2 * max(records.values(), default=0) * R.REC_BYTES > budget


def _match(rec: Records, links: StartLinks, nranks: int, windows: dict[int, Window],
           bounds: ShiftBounds, threaded: tuple[int, ...]) -> tuple[P2P, np.ndarray, np.ndarray, np.ndarray, bool, str]:
    """Matched messages, and the clock shifts (whole ranks) that remove any receive-before-send;
    the last item names the messages whose shift was refused (too large: damage), or is empty."""
    p2p = p2p_sides(rec, links, bool(threaded)).without(failed_events(rec))
    si, ri = match_around_gaps(p2p.sends, p2p.recvs, windows)
    ri = reorder_threads(p2p, si, ri, threaded)
    done = p2p.recv_leave[ri] >= 0
    src, dst = p2p.sends.src[si][done], p2p.recvs.dst[ri][done]
    shifts, feasible, refused = causality_shifts(src, dst, p2p.sends.posted[si][done], p2p.recv_leave[ri][done],
                                                 nranks, bounds.between(src, dst), bounds.span)
    named = ""
    if refused.size:
        events = p2p.sends.event[si][done][refused]
        shown = [f"rank {s} -> {d} (send event {e})" for s, d, e in
                 zip(src[refused][:3].tolist(), dst[refused][:3].tolist(), events[:3].tolist())]
        need = (p2p.sends.posted[si][done] - p2p.recv_leave[ri][done])[refused]
        named = refused_sentence(int(refused.size), int(need.max()), shown, bounds.span)
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
    return lost_sentence(sends, recvs, sorted(damaged))


def _events(pool: ThreadPoolExecutor, rows: Rows, starts: Rows, calls: CallTable,
            trace_dir: Path) -> tuple[pl.DataFrame, np.ndarray, np.ndarray]:
    """events.parquet and the collective instance of each of its rows and of each persistent
    start; the table's columns and those ids side by side."""
    frame = pool.submit(events_frame, rows, calls, trace_dir)
    coll_id, start_id = collective_ids(rows, starts)
    return frame.result().with_columns(nullable(coll_id, coll_id >= 0, "coll_id")), coll_id, start_id
