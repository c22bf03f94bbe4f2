"""One piece of a merge in pieces (bounded.py): a range of ranks, or a span of one rank's
records cut at quiet points (quiet.py), merged on its own.

A piece reads its ranks' files and builds their records and event rows with
today's kernels, given what only the whole trace knows (Whole: clocks, dense
communicator ids). Two passes run over every piece: `survey` spills the
piece's point-to-point sides (by envelope bucket) and its share of every
collective instance, and counts its events; `write_events` builds the rows
again (the kernels are cheaper than spilling every row to disk and reading
it back), now with the event ids, clock shifts and collective ids that the
whole trace decided, and writes the piece's part of events/.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from mpiscope.machine import small_pages
from mpiscope.trace import FINALIZE_CALLS
from mpiscope.trace.assembly import spill_share
from mpiscope.trace.behind import WRITES
from mpiscope.trace.clocks import RankClock
from mpiscope.trace.columns import FIRST_TABLE_ID, ROLE, CallTable, Records, build_records
from mpiscope.trace.damaged import Window, gap_windows
from mpiscope.trace.instances import coll_rows, partials, seqs_of
from mpiscope.trace.match import P2P, p2p_sides
from mpiscope.trace.outcomes import add_outcomes, failed_events
from mpiscope.trace.reader import RankFile, read_rank_file, readahead
from mpiscope.trace.received import add_completed_bytes, add_recv_bytes, take_back
from mpiscope.trace.requests import StartLinks, link_starts
from mpiscope.trace.storage import write_parts, writers
from mpiscope.trace.tables import (Rows, event_rows, events_frame, latest_entries, lift_persistent_starts, nullable,
                                   persistent_starts, shift_rows)


def worker_setup() -> None:
    """A merging worker process, once at its start: its imports (this module's: Polars, pyarrow,
    the kernels, ~0.5 s) are done; NumPy's huge pages off for good (machine.small_pages)."""
    import mpiscope.trace.buckets  # noqa: F401

    small_pages().__enter__()


@dataclass(frozen=True)
class Whole:
    """What every piece needs to know of the whole trace (small: sent to each worker)."""
    trace_dir: Path
    spill: Path
    calls: CallTable
    clocks: dict[int, RankClock]
    dense: dict[int, int]       # communicator gid -> dense id
    recorded: bool              # every rank file records received bytes
    buckets: int                # envelope buckets of the matching
    threaded: tuple[int, ...] = ()   # the ranks of several threads (match.reorder_threads)
    processes: int = 1          # merging at once: a piece writes its events in parallel with the cores left
    behind: bool = False        # writes run beside the next piece's work (behind.py): one process, in turn
    ahead: bool = False         # and the next piece is read and built beside this one's (three fit the budget)


@dataclass(frozen=True)
class Piece:
    ranks: tuple[int, ...]
    records: tuple[int, int] | None = None   # its one rank's records [first, last), where the rank was cut


@dataclass
class Survey:
    """What the first pass learned of one piece."""
    events: int
    sends: int
    recvs: int
    stuck: dict[str, str]
    windows: dict[int, Window]
    latest: dict[int, int]      # rank -> its latest entry (ns, before clock shifts)
    seqs: dict[int, int] | None  # communicator -> its largest sequence number in a share + 1 (instances.seqs_of)
    sides: np.ndarray | None = None   # sends, receives spilled to each matching bucket (2 x buckets)
    first: int = np.iinfo(np.int64).max   # its first entry (ns, before clock shifts): where its sides are in time


@dataclass
class Read:
    """A piece's records, with what the rows and the sides are built from."""
    rec: Records
    links: StartLinks
    starts: Rows
    windows: dict[int, Window]


def read(whole: Whole, piece: Piece, following: Piece | None = None, build: bool = True) -> Read:
    """The records and persistent starts of a piece (event ids from 0); its files unmapped. The
    `following` piece is meanwhile read and built on a thread of its own where whole.ahead and
    `build` (the next task of the same pass), else its files are read from disk (reader.readahead)."""
    made = _BUILT.pop(piece, None)
    _BUILT.clear()  # a piece built for a pass that went otherwise (a failure)
    if following is not None and whole.ahead and build:
        _BUILT[following] = _BUILDER.submit(_read, whole, following)
    elif following is not None:
        threading.Thread(target=_read_ahead, args=(whole.trace_dir, following), daemon=True).start()
    return made.result() if made is not None else _read(whole, piece)


# The piece built ahead (read's `following`), by piece, on the building thread: while one piece's
# rows are built and its sides spilled, or its events, the next one's records are.
_BUILDER = ThreadPoolExecutor(1, thread_name_prefix="mpiscope-build")
_BUILT: dict[Piece, Future[Read]] = {}


def drop_built() -> None:
    """Forget a piece built ahead that no task will take (the merge failed): its records."""
    _BUILT.clear()


def _read(whole: Whole, piece: Piece) -> Read:
    files = [read_rank_file(whole.trace_dir / "raw" / f"rank-{r:06d}.msc", whole.calls.known(), piece.records)
             for r in piece.ranks]
    rec, _ = build_records(files, whole.calls, whole.clocks, whole.dense)
    links = link_starts(rec)
    windows = gap_windows(files, rec, links)
    _release(files)
    return Read(rec, links, persistent_starts(rec, links, whole.calls), windows)


def _read_ahead(trace_dir: Path, piece: Piece) -> None:
    for r in piece.ranks:
        readahead(trace_dir / "raw" / f"rank-{r:06d}.msc", piece.records)


def rows_of(whole: Whole, r: Read) -> Rows:
    """The event rows of a piece, with received bytes and outcomes (the starts get theirs); the
    persistent collectives' starts that a row now holds leave r.starts."""
    rows = event_rows(r.rec, r.links, whole.calls)
    add_recv_bytes(r.rec, rows, r.starts, r.starts["record"], whole.recorded)
    add_completed_bytes(rows, r.links)
    add_outcomes(r.rec, rows)
    r.starts = lift_persistent_starts(r.rec, rows, r.starts)
    return rows


def write(whole: Whole, fn: Callable[..., Any], *args: Any) -> None:
    """fn(*args), on the writing thread where the pieces are merged in turn by this process."""
    if whole.behind:
        WRITES.run(fn, *args)
    else:
        fn(*args)


def _release(files: list[RankFile]) -> None:
    for f in files:  # the records are copied into rec: unmap the files (peak memory)
        f.blocks.clear()


def survey(whole: Whole, index: int, piece: Piece, shifts: np.ndarray | None,
           following: Piece | None = None, build: bool = True) -> Survey:
    """First pass: spill the piece's sides and collective shares; with `shifts` (a second
    survey after the clock correction moved ranks), the collective shares only. What is spilled
    leaves memory before the next step builds: a piece peaks with its records and its rows (one
    rank of the generated 1,000 M-record halo on 64 ranks, 15.6 M records: 2.56 GiB, 3.26 when
    the sides and the records stayed to the end)."""
    r = read(whole, piece, following, build)
    sends = recvs = 0
    sides = None
    if shifts is None:
        p2p = p2p_sides(r.rec, r.links, bool(whole.threaded)).without(failed_events(r.rec))
        sends, recvs = p2p.sends.size, p2p.recvs.size
        where = [bucket_of(s.comm, s.src, s.dst, whole.buckets).astype(np.intp) for s in (p2p.sends, p2p.recvs)]
        sides = np.stack([np.bincount(w, minlength=whole.buckets) for w in where])
        write(whole, _spill_sides, whole, index, p2p, where)
        del p2p, where
    stuck = stuck_calls(r.rec, whole.calls)
    rows = rows_of(whole, r)
    latest = latest_entries(rows)
    starts, windows = r.starts, r.windows
    del r  # the records: the rows are all the shares need
    if shifts is not None:
        shift_rows(rows, shifts)
        shift_rows(starts, shifts)
    share = partials(coll_rows(rows, starts), index)
    write(whole, spill_share, share, whole.spill / f"colls-{index:06d}.parquet")
    first = int(rows["t_enter"].min()) if rows["t_enter"].size else np.iinfo(np.int64).max
    return Survey(int(rows["event"].size), sends, recvs, stuck, windows, latest, seqs_of(share), sides, first)


def stuck_calls(rec: Records, calls: CallTable) -> dict[str, str]:
    """The call each rank (thread) was inside when its recording ended."""
    idx = np.flatnonzero((rec.t_leave < 0) & (rec.call >= FIRST_TABLE_ID))
    return {f"{rec.rank[i]}.{rec.thread[i]}": calls.names[rec.call[i]] for i in idx
            if calls.names[rec.call[i]] not in FINALIZE_CALLS}


def bucket_of(comm: np.ndarray, src: np.ndarray, dst: np.ndarray, buckets: int) -> np.ndarray:
    """The matching bucket of each envelope: every message of one (comm, src, dst) in one bucket."""
    key: np.ndarray = (comm.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)) \
        ^ (src.astype(np.uint64) << np.uint64(21)) ^ dst.astype(np.uint64)
    key = (key ^ (key >> np.uint64(29))) * np.uint64(0xBF58476D1CE4E5B9)
    bucket: np.ndarray = (key >> np.uint64(32)) % np.uint64(buckets)
    return bucket


def _spill_sides(whole: Whole, piece: int, p: P2P, where: list[np.ndarray]) -> None:
    """Each side's rows by bucket (`where`, bucket_of's): a record batch per bucket that holds any,
    in bucket order, in one Arrow file per piece. An empty batch costs as much to write as a full
    one: 428 buckets, 4 of them with rows, took 99 ms a file with the others written empty, 33 without."""
    for (name, side, nbytes, leave), bucket in zip((("sends", p.sends, p.send_bytes, p.send_leave),
                                                    ("recvs", p.recvs, p.recv_bytes, p.recv_leave)), where):
        order = np.argsort(bucket, kind="stable")
        table = pa.table({**side.take(order).columns(), "bytes": nbytes[order], "leave": leave[order]})
        bounds = np.searchsorted(bucket[order], np.arange(whole.buckets + 1))
        path = whole.spill / f"{name}-{piece:06d}.arrow"
        with pa.OSFile(str(path), "wb") as sink, \
                pa.ipc.new_file(sink, table.schema, options=pa.ipc.IpcWriteOptions(compression="lz4")) as w:
            for i in np.flatnonzero(bounds[1:] > bounds[:-1]).tolist():
                w.write_batch(table.slice(int(bounds[i]), int(bounds[i + 1] - bounds[i])).to_batches(
                    max_chunksize=None)[0])


def batches_of(sides: np.ndarray) -> list[list[tuple[np.ndarray, np.ndarray]]]:
    """For each bucket and side, the pieces that spilled rows to it and the index of that batch in
    their files, from the survey's counts (piece, side, bucket)."""
    held = sides > 0
    index = np.cumsum(held, axis=2) - 1   # the batches of the buckets before it
    return [[(np.flatnonzero(held[:, k, b]), index[held[:, k, b], k, b]) for k in range(sides.shape[1])]
            for b in range(sides.shape[2])]


def read_bucket(whole: Whole, name: str, event_offsets: np.ndarray, pieces: np.ndarray,
                batches: np.ndarray) -> pa.Table:
    """One bucket's rows of one side, from the spills of the `pieces` that hold any (batches_of),
    in piece order, with the event ids of the whole trace (a piece's ids start at 0:
    event_offsets holds each piece's first). Only those: the halo's 1,000 M records of 64 ranks
    in 704 pieces have 64 envelopes (comm, src, dst), each from the 11 pieces of its sender."""
    read = []
    for piece, batch in zip(pieces.tolist(), batches.tolist()):
        with pa.memory_map(str(whole.spill / f"{name}-{piece:06d}.arrow")) as source:
            read.append(pa.ipc.open_file(source).get_batch(batch))
    if not read:
        with pa.memory_map(str(whole.spill / f"{name}-{0:06d}.arrow")) as source:
            return pa.ipc.open_file(source).schema.empty_table()
    table = pa.Table.from_batches(read).combine_chunks()
    event = table["event"].to_numpy() + np.repeat(event_offsets[pieces], [b.num_rows for b in read])
    return table.set_column(table.schema.get_field_index("event"), "event", pa.array(event))


def write_events(whole: Whole, piece: Piece, offset: int, shifts: np.ndarray, coll_keys: np.ndarray,
                 coll_ids: np.ndarray, over: tuple[np.ndarray, np.ndarray], directory: Path,
                 stem: str, following: Piece | None = None) -> int:
    """Second pass: the piece's part files of events/ (STEM-*.parquet in `directory`), with event
    ids from `offset`, clock shifts, collective ids and the bytes its receives recorded too many
    (`over`: received.overclaimed's); returns its first entry time (ns; max int64 without events)."""
    rows = rows_of(whole, read(whole, piece, following))
    rows["event"] += offset
    rows["completed_by"] = np.where(rows["completed_by"] >= 0, rows["completed_by"] + offset, -1)
    take_back(rows, *over, offset=offset)
    shift_rows(rows, shifts)
    coll_id = _coll_ids(rows, coll_keys, coll_ids)
    frame = events_frame(rows, whole.calls, whole.trace_dir).with_columns(
        nullable(coll_id, coll_id >= 0, "coll_id"))
    write(whole, write_parts, frame, directory, stem, writers(frame.height, whole.processes))
    return int(rows["t_enter"].min()) if rows["t_enter"].size else np.iinfo(np.int64).max


def _coll_ids(rows: Rows, keys: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """The instance of each collective row: (comm, sequence number) looked up in the sorted keys."""
    idx = np.flatnonzero((rows["role"] == ROLE["coll"]) & (rows["comm"] >= 0) & (rows["rc"] == 0))
    key = ((rows["comm"][idx].astype(np.int64) << 32) + (rows["tag"][idx].astype(np.int64) & 0xffffffff)).view(
        np.uint64)
    pos = np.minimum(np.searchsorted(keys, key), max(keys.size - 1, 0))
    coll_id = np.full(rows["event"].size, -1, np.int64)
    if keys.size:
        found = keys[pos] == key
        coll_id[idx[found]] = ids[pos[found]]
    return coll_id
