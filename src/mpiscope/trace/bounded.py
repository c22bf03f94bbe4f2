"""A merge in pieces, in bounded memory, on worker processes or the ranks of an MPI job (issue 22).

The ranks are split into pieces whose records fit the memory budget (a rank
too large for one is cut at quiet points: quiet.py), the messages into
envelope buckets that do. Every step works on one piece or one
bucket at a time, with today's kernels, and spills what the next step needs
to the trace directory (.merge-spill/, removed at the end):

1. survey each piece (pieces.survey): its events counted, its sides of
   point-to-point traffic spilled by bucket, its share of each collective;
2. match each bucket (buckets.match_bucket; one too large for the budget in
   windows of its pieces' sides, in time order), write its messages; solve the
   clock correction from the buckets' strongest constraints; shift the
   messages (and survey the collectives again) where a rank moved;
3. add up the collective instances (assembly.assemble: in key ranges where they do not fit);
4. write each piece's events, with event ids, shifts and collective ids
   (pieces.write_events); with delete_raw, remove its rank files then.

Where one process merges the pieces in turn, each piece's files are read from
disk while the piece before is worked on (reader.readahead), and its writes run
beside the next piece's work (behind.py). The ranks are counted and cut in one
read of their files before the survey (ranks.read_ranks); each piece's files
are read twice after it, in the survey and to write its events. Measured on the
bench's 1,000 M records of 64 ranks (45 GB of raw files, ~1.1 GB/s from disk),
one process: 679 s with a separate read to cut the ranks, nothing read ahead and
the collective shares added up as DataFrames; 516 s cut while counted and read
ahead; 457 s with the shares added up in place and the writes beside; 439 s
(peak 3.64 GiB, not 3.13) with each next piece's records built on a thread of
its own where the budget holds two pieces (pieces.read).

The tables are datasets: events/ and messages/ hold one part per piece and per
bucket (events in (rank, time) order across the parts, messages sorted by send
time within a part), beside collectives (a file, or parts where the instances
were added up in key ranges: assembly.py) and comms.parquet. Their rows
and values are those of the in-memory merge (merge.py).
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

from mpiscope.errors import UsageError
from mpiscope.machine import trim_heap
from mpiscope.parallel import Tasks
from mpiscope.trace.assembly import assemble
from mpiscope.trace.behind import WRITES
from mpiscope.trace.buckets import (
    Matched,
    lost_sentence,
    match_bucket,
    refused_sentence,
    shift_messages,
    shifts_of,
)
from mpiscope.trace.clocks import ShiftBounds
from mpiscope.trace.pieces import Piece, Survey, Whole, batches_of, drop_built, survey, write_events
from mpiscope.trace.quiet import spans
from mpiscope.trace.reader import RANK_FILE, rank_files
from mpiscope.trace.storage import install_dataset, install_file, write_one

SPILL = ".merge-spill"


@dataclass
class Plan:
    pieces: list[Piece]   # in rank order, a cut rank's in record order
    buckets: int
    largest_piece: int = 0   # its records
    room: int = 0            # bytes the collectives may take where they are added up (assembly.py)
    sides: int = 1 << 62     # sends and receives the matching of a bucket may hold at once (buckets.py)


@dataclass
class Outcome:
    """What a merge found, in memory or in pieces, for the manifest (merge.py)."""
    events: int
    messages: int
    collectives: int
    unmatched_sends: int
    unmatched_recvs: int
    shifts: np.ndarray
    feasible: bool
    refused: str
    lost: str
    stuck: dict[str, str]
    t0_ns: int
    latest: dict[int, int]
    largest_bucket: int = 0     # sends and receives the fullest matching bucket held at once


def most_records(records: dict[int, int], per_worker: int, workers: int, piece_bytes: int,
                 kept: int | None = None, halved: bool = False) -> int:
    """The records a piece may hold: per_worker bytes at piece_bytes each (half of them where
    `halved`: two pieces held at once), on several workers at most half a worker's share (the last
    pieces then finish together), and at most `kept`, the records whose arrays the heap kept for
    reuse holds (merge._kept_heap)."""
    total = sum(records.values())
    share = per_worker // 2 if halved else per_worker
    return max(1, min(share // piece_bytes, -(-total // (2 * workers)) if workers > 1 else total, kept or total))


def plan(records: dict[int, int], per_worker: int, workers: int, piece_bytes: int, side_bytes: int,
         cuts: dict[int, list[int]], kept: int | None = None, halved: bool = False, held: int = 0) -> Plan:
    """Contiguous rank ranges of at most most_records, a rank cut (cuts: quiet.quiet_cuts) one
    piece per span, and enough buckets for the sides (at most one per record) to fit per_worker at
    side_bytes each, beside the `held` bytes of heap that one process keeps (merge._kept_heap):
    the matching holds its sides in Arrow's pool, which does not take it (1,000 M records of 64
    ranks, --memory 2GiB, 499 MiB kept: the buckets of the whole share peaked at 2.27 GiB)."""
    total = sum(records.values())
    most = most_records(records, per_worker, workers, piece_bytes, kept, halved)
    pieces: list[Piece] = []
    size = 0
    for rank in sorted(records):
        if cuts.get(rank):
            pieces += [Piece((rank,), span) for span in spans(records[rank], cuts[rank])]
            size = most
        elif pieces and size + records[rank] <= most:
            pieces[-1] = Piece((*pieces[-1].ranks, rank))
            size += records[rank]
        else:
            pieces.append(Piece((rank,)))
            size = records[rank]
    buckets = max(workers, -(-total * side_bytes // (per_worker - held)), 1)
    return Plan(pieces, int(buckets), max((_records_of(piece, records) for piece in pieces), default=0),
                per_worker - held, max(1, (per_worker - held) // side_bytes))


def _records_of(piece: Piece, records: dict[int, int]) -> int:
    if piece.records is not None:
        return piece.records[1] - piece.records[0]
    return sum(records[r] for r in piece.ranks)


def merge_in_pieces(whole: Whole, p: Plan, tasks: Tasks, nranks: int, bounds: ShiftBounds,
                    damaged: list[int], comms: pl.DataFrame, delete_raw: bool) -> Outcome:
    trace_dir, spill = whole.trace_dir, whole.spill
    try:
        shutil.rmtree(spill, ignore_errors=True)
        spill.mkdir()
        return _merge(whole, p, tasks, nranks, bounds, damaged, comms, delete_raw)
    except OSError as e:  # a full disk: the earlier tables and the raw files stay
        WRITES.settle()
        if delete_raw:  # some raw files may be gone: their events are only in the parts written
            raise UsageError(f"cannot write the tables of {trace_dir} ({e.strerror or e}); the events of the "
                             f"ranks whose raw files were removed are in {trace_dir}/.events.tmp: free space "
                             f"and keep that directory") from e
        for temporary in (".events.tmp", ".messages.tmp"):
            shutil.rmtree(trace_dir / temporary, ignore_errors=True)
        raise UsageError(f"cannot write the tables of {trace_dir} ({e.strerror or e}); free space or make it "
                         f"writable, then run: mpiscope merge {trace_dir}") from e
    finally:
        WRITES.settle()  # before what a write writes into is removed
        drop_built()
        shutil.rmtree(spill, ignore_errors=True)


def _merge(whole: Whole, p: Plan, tasks: Tasks, nranks: int, bounds: ShiftBounds, damaged: list[int],
           comms: pl.DataFrame, delete_raw: bool) -> Outcome:
    trace_dir, spill = whole.trace_dir, whole.spill
    # each piece's files are read ahead (and where whole.ahead, its records built) while the one
    # before it is worked on; the last survey has the files of the first piece to write read
    surveyed_next = p.pieces[1:] + p.pieces[:1]
    last = len(p.pieces) - 1
    surveys: list[Survey] = tasks.map(survey, [(whole, i, piece, None, surveyed_next[i], i < last)
                                               for i, piece in enumerate(p.pieces)])
    WRITES.wait()  # every piece's spills are written: the buckets read them
    counts = np.array([s.events for s in surveys], np.int64)
    offsets = np.r_[0, np.cumsum(counts)[:-1]].astype(np.int64)
    windows = {r: w for s in surveys for r, w in s.windows.items()}
    messages_dir = _fresh(trace_dir / ".messages.tmp")
    parts = [messages_dir / f"part-{b:06d}.parquet" for b in range(p.buckets)]
    sides = np.stack([s.sides for s in surveys if s.sides is not None])   # piece, side, bucket
    held = batches_of(sides)
    entered = np.array([s.first for s in surveys], np.int64)   # each piece's first entry, as surveyed
    for i in range(1, len(p.pieces)):  # a cut rank's pieces in their order, whatever their first entries
        if p.pieces[i].records is not None and p.pieces[i].ranks == p.pieces[i - 1].ranks:
            entered[i] = max(entered[i], entered[i - 1])
    matched: list[Matched] = tasks.map(match_bucket, [(whole, offsets, held[b], windows, bounds, damaged, parts[b],
                                                       sides[:, :, b], entered, p.sides) for b in range(p.buckets)])
    WRITES.wait()
    for name in ("sends", "recvs"):  # the sides are matched: give their disk space back
        for f in spill.glob(f"{name}-*.arrow"):
            f.unlink()
    shifts, feasible = shifts_of(matched, nranks, bounds.span)
    if shifts.any():
        tasks.map(survey, [(whole, i, piece, shifts, surveyed_next[i], i < last)
                           for i, piece in enumerate(p.pieces)])
        WRITES.wait()
    if shifts.any() or not feasible:
        tasks.map(shift_messages, [(part, shifts, feasible) for m in matched for part in m.parts])
    # the collectives are assembled by Polars, whose allocator takes neither what the matching
    # freed in the heap nor in Arrow's pool (1,000 M records of 64 ranks, 2 GiB: 1.06 -> 0.47 GiB
    # resident before the collectives)
    trim_heap()
    # written now and installed with the other tables: the events are written without it in memory
    # (1 M instances, 100 M records of 16 ranks: 0.2 GiB of the peak at --memory 1GiB)
    colls = assemble(sorted(spill.glob("colls-*.parquet")), _seqs(surveys), comms, whole.calls, p.room, spill)
    keys, ids = colls.keys, colls.ids
    events_dir = _fresh(trace_dir / ".events.tmp")
    over = np.concatenate([m.over_event for m in matched]), np.concatenate([m.over_bytes for m in matched])

    def of_piece(i: int) -> tuple[np.ndarray, np.ndarray]:
        mine = (over[0] >= offsets[i]) & (over[0] < offsets[i] + counts[i])
        return over[0][mine], over[1][mine]

    written_next = [*p.pieces[1:], None]
    firsts = tasks.map(_write_piece, [(whole, piece, int(offsets[i]), shifts, keys, ids, of_piece(i),
                                       events_dir, f"part-{i:06d}", delete_raw and piece.records is None,
                                       written_next[i])
                                      for i, piece in enumerate(p.pieces)])
    WRITES.wait()
    if delete_raw:  # a cut rank's file, once all its pieces are written
        for rank in sorted({piece.ranks[0] for piece in p.pieces if piece.records is not None}):
            remove_raw(trace_dir, rank)
    _install(trace_dir, {"events": events_dir, "messages": messages_dir}, colls.table, comms)
    return Outcome(
        events=int(counts.sum()), messages=sum(m.messages for m in matched), collectives=colls.instances,
        unmatched_sends=sum(m.unmatched_sends for m in matched),
        unmatched_recvs=sum(m.unmatched_recvs for m in matched), shifts=shifts, feasible=feasible,
        refused=_refused(matched, bounds), lost=_lost(matched, damaged),
        stuck={k: v for s in surveys for k, v in s.stuck.items()},
        t0_ns=min(firsts) if counts.sum() else 0,
        latest=_latest(surveys), largest_bucket=max((m.held for m in matched), default=0))


def _seqs(surveys: list[Survey]) -> dict[int, int] | None:
    """Each communicator's sequence numbers, over the pieces; None where a share's keys do not pack."""
    seqs: dict[int, int] = {}
    for s in surveys:
        if s.seqs is None:
            return None
        for comm, n in s.seqs.items():
            seqs[comm] = max(n, seqs.get(comm, n))
    return seqs


def _latest(surveys: list[Survey]) -> dict[int, int]:
    """Each rank's latest entry, over its pieces."""
    latest: dict[int, int] = {}
    for s in surveys:
        for r, ns in s.latest.items():
            latest[r] = max(ns, latest.get(r, ns))
    return latest


def _write_piece(whole: Whole, piece: Piece, offset: int, shifts: np.ndarray, keys: np.ndarray,
                 ids: np.ndarray, over: tuple[np.ndarray, np.ndarray], directory: Path, stem: str,
                 delete_raw: bool, following: Piece | None) -> int:
    first = write_events(whole, piece, offset, shifts, keys, ids, over, directory, stem, following)
    if delete_raw:
        for rank in piece.ranks:
            remove_raw(whole.trace_dir, rank)
    return first


def remove_raw(trace_dir: Path, rank: int) -> None:
    """A rank's raw files (records, communicators; the maps stay: callsites are resolved later)."""
    for suffix in (".msc", ".comms"):
        (trace_dir / "raw" / f"rank-{rank:06d}{suffix}").unlink(missing_ok=True)


def _fresh(path: Path) -> Path:
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir()
    return path


def _install(trace_dir: Path, datasets: dict[str, Path], collectives: Path, comms: pl.DataFrame) -> None:
    """Put the new tables in place of any earlier ones (of either layout)."""
    write_one(trace_dir, "comms", comms)
    if collectives.is_dir():  # in parts, where the instances were added up in ranges (assembly.py)
        install_dataset(trace_dir, "collectives", collectives)
    else:
        install_file(trace_dir, "collectives", collectives)
    for name, made in datasets.items():
        install_dataset(trace_dir, name, made)


def _refused(matched: list[Matched], bounds: ShiftBounds) -> str:
    count = sum(m.refused for m in matched)
    if not count:
        return ""
    shown = [s for m in matched for s in m.refused_shown][:3]
    return refused_sentence(count, max(m.refused_need for m in matched), shown, bounds.span)


def _lost(matched: list[Matched], damaged: list[int]) -> str:
    return lost_sentence(sum(m.lost_sends for m in matched), sum(m.lost_recvs for m in matched), damaged)


def raw_records(trace_dir: Path, record_bytes: int) -> dict[int, int]:
    """Records of each rank file, from the bytes it takes on disk (an upper bound: the recorder's
    unused ring slots are holes, but block headers and partly filled blocks count)."""
    out = {}
    for path in rank_files(trace_dir):
        m = RANK_FILE.search(path.name)
        if m and path.suffix == ".msc":
            st = path.stat()
            out[int(m[1])] = min(st.st_size, st.st_blocks * 512) // record_bytes
    return out
