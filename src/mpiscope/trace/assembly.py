"""collectives of a merge in pieces, from the pieces' shares (instances.py), in bounded memory.

The shares are spilled one file per piece, rows in packed-key order (comm,
seq, call) with the key as a column. Where the instances do not fit the room
the merge leaves them, they are assembled in key ranges, one at a time: each
range's rows are read from every share (only the row groups that hold them:
the key's min/max statistics), added up (instances.summed) and made one row
per instance, which is spilled. What every instance keeps in memory is its key
and the time that numbers it (coll_id: by first entry, then communicator, then
sequence number, as tables.collective_ids), then its key and id for the events
(pieces.write_events): 16 bytes. The table is written as a dataset of parts in
coll_id order: each range's rows go to the part their ids fall in, and each part
is sorted on its own.

How many instances a range holds is not known before it is read: a
communicator's are at most its largest sequence number plus one (the recorder
numbers a communicator's collectives from 0), which the survey reports per piece.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow.ipc as ipc
import pyarrow.parquet as pq

from mpiscope.trace.columns import CallTable
from mpiscope.trace.instances import KEY, pack, summed
from mpiscope.trace.match import COLLECTIVE_COLUMNS
from mpiscope.trace.storage import write_table

# Bytes an instance takes while its range is added up, made one row and numbered (its shares' sums,
# its row, the table's columns), with a margin. Measured on the 2.6 M instances of the generated
# halo of 1,000 M records on 64 ranks (704 shares), arrays released (machine.released_heap): in one
# range 0.89 GiB above the interpreter (367 B each), 50 s; in 3 ranges of a 0.6 GiB room 0.51 GiB, 42 s.
INSTANCE_BYTES = 600
SHARE_ROWS = 1 << 14   # rows of a share's row group: a range reads little beyond its own rows

_EMPTY = {"comm": pl.Int64, "seq": pl.Int64, "call": pl.UInt32, "first": pl.Int64, "root": pl.Int32,
          "root_first": pl.Int64, "bytes": pl.Int64, "recv_count": pl.UInt32, "recv_bytes": pl.Int64,
          "ranks": pl.UInt32, "t_first_enter_ns": pl.Int64, "t_last_enter_ns": pl.Int64,
          "t_first_leave_ns": pl.Int64, "t_last_leave_ns": pl.Int64}


@dataclass
class Assembled:
    table: Path         # collectives.parquet, or the directory of its parts
    instances: int
    keys: np.ndarray    # (comm << 32) + seq of each instance, sorted
    ids: np.ndarray     # and its coll_id


def spill_share(share: pl.DataFrame, path: Path) -> None:
    """A piece's share, in row groups a key range can pick."""
    share.write_parquet(path, row_group_size=SHARE_ROWS, statistics=True)


def key_ranges(seqs: dict[int, int] | None, most: int) -> list[tuple[int, int]]:
    """Packed-key ranges [lo, hi) of at most `most` instances each, from each communicator's count
    of sequence numbers (seqs); one range of all keys where seqs is None (keys that do not pack)."""
    whole = (0, 1 << 64)
    if not seqs:
        return [whole]
    bounds, held = [0], 0
    for comm in sorted(seqs):
        seq = 0
        while seq < seqs[comm]:
            take = min(seqs[comm] - seq, most - held)
            seq, held = seq + take, held + take
            if held == most:
                bounds.append(pack(comm, seq))
                held = 0
    if bounds[-1] == pack(max(seqs), seqs[max(seqs)]):
        bounds.pop()
    return list(zip(bounds, bounds[1:] + [whole[1]]))


class _Shares:
    """The share files, with each row group's key range, to read one key range at a time. Each
    file's footer is read once (a range's reads reuse it: 704 shares, 3 ranges at --memory 1GiB)."""

    def __init__(self, paths: list[Path]) -> None:
        self.paths = paths
        self.footers: list[pq.FileMetaData] = []
        self.groups: list[tuple[np.ndarray, np.ndarray]] = []
        for path in paths:
            meta = pq.ParquetFile(path).metadata
            self.footers.append(meta)
            column = meta.schema.names.index(KEY) if KEY in meta.schema.names else -1
            stats = [meta.row_group(g).column(column).statistics if column >= 0 else None
                     for g in range(meta.num_row_groups)]
            self.groups.append((np.array([s.min if s else 0 for s in stats], np.uint64),
                                np.array([s.max if s else (1 << 64) - 1 for s in stats], np.uint64)))

    def within(self, lo: int, hi: int) -> Iterator[pl.DataFrame]:
        """Each share's rows whose key is in [lo, hi)."""
        for path, meta, (low, high) in zip(self.paths, self.footers, self.groups):
            overlaps = high >= np.uint64(lo)
            if hi < 1 << 64:
                overlaps &= low < np.uint64(hi)
            picked = np.flatnonzero(overlaps)
            if not picked.size:
                continue
            share = pl.from_arrow(pq.ParquetFile(path, metadata=meta).read_row_groups(picked.tolist()))
            assert isinstance(share, pl.DataFrame)
            if KEY in share.columns:
                key = share[KEY].to_numpy()
                first = int(np.searchsorted(key, np.uint64(lo)))
                last = int(np.searchsorted(key, np.uint64(hi))) if hi < 1 << 64 else key.size
                share = share.slice(first, last - first)
            if share.height:
                yield share


def assemble(shares: list[Path], seqs: dict[int, int] | None, comms: pl.DataFrame, calls: CallTable,
             room: int, spill: Path) -> Assembled:
    """collectives, from every piece's shares (files), in ranges of at most room // INSTANCE_BYTES
    instances; the table written in spill (collectives.parquet, or collectives/ in parts)."""
    files = _Shares(shares)
    ranges = key_ranges(seqs, max(1, room // INSTANCE_BYTES))
    made: list[pl.DataFrame | Path] = []
    keys, times = [], []
    for b, (lo, hi) in enumerate(ranges):
        rows = _instances(summed(files.within(lo, hi)))
        keys.append(((rows["comm"].to_numpy() << 32) + (rows["seq"].to_numpy() & 0xffffffff)).view(np.uint64))
        times.append(rows["t_first_enter_ns"].to_numpy())
        if len(ranges) == 1:
            made.append(rows)
        else:
            path = spill / f"instances-{b:06d}.arrow"
            rows.write_ipc(path)
            made.append(path)
        del rows
    key, sizes = np.concatenate(keys), [k.size for k in keys]
    del keys
    # by first entry, ties in key order (comm, seq): the ranges are in key order, each sorted by it
    order = np.argsort(np.concatenate(times), kind="stable")
    del times
    ids = np.empty(key.size, np.int64)
    ids[order] = np.arange(key.size, dtype=np.int64)
    del order
    if len(ranges) == 1:
        assert isinstance(made[0], pl.DataFrame)
        table = spill / "collectives.parquet"
        write_table(_table(made[0].with_columns(pl.Series("coll_id", ids)), comms, calls), table)
    else:
        table = _write_parts([p for p in made if isinstance(p, Path)], sizes, ids, comms, calls, spill)
    if not np.all(key[1:] > key[:-1]):   # keys that do not pack: one range, in no key order
        at = np.argsort(key)
        key, ids = key[at], ids[at]
    return Assembled(table, int(key.size), key, ids)


def _instances(total: pl.DataFrame | None) -> pl.DataFrame:
    """One row per (comm, seq) in that order, from the sums by (comm, seq, call)."""
    if total is None:
        total = pl.DataFrame(schema=_EMPTY)
    return total.group_by("comm", "seq").agg(
        pl.col("call").sort_by("first").first(),
        pl.col("call").n_unique().alias("calls_seen"),
        pl.col("root").sort_by("root_first", nulls_last=True).first(),
        pl.col("bytes").sum(),
        pl.when(pl.col("recv_count").sum() > 0).then(pl.col("recv_bytes").sum()).alias("recv_bytes"),
        pl.col("ranks").sum().cast(pl.UInt32),
        pl.col("t_first_enter_ns").min(), pl.col("t_last_enter_ns").max(),
        pl.col("t_first_leave_ns").min(), pl.col("t_last_leave_ns").max(),
    ).sort("comm", "seq")


def _table(rows: pl.DataFrame, comms: pl.DataFrame, calls: CallTable) -> pl.DataFrame:
    """collectives.parquet's columns, rows in coll_id order."""
    return (rows.with_columns(calls.series(rows["call"].to_numpy()), pl.col("calls_seen").cast(pl.UInt32))
            .join(comms.select("comm", "comm_size"), on="comm", how="left")
            .select(COLLECTIVE_COLUMNS)
            .sort("coll_id"))


def _write_parts(ranges: list[Path], sizes: list[int], ids: np.ndarray, comms: pl.DataFrame, calls: CallTable,
                 spill: Path) -> Path:
    """The parts of collectives/, one per range's worth of coll_ids: each range's rows sent to the
    parts their ids fall in, then each part sorted and written."""
    parts, total = len(ranges), ids.size
    out = spill / "collectives"
    out.mkdir()
    chunks = [spill / f"coll-ids-{j:06d}.arrow" for j in range(parts)]
    writers: list[ipc.RecordBatchFileWriter | None] = [None] * parts
    start = 0
    try:
        for path, size in zip(ranges, sizes):
            mine = ids[start:start + size]
            rows = pl.read_ipc(path).with_columns(pl.Series("coll_id", mine))
            part = mine * parts // max(total, 1)
            for j in np.unique(part).tolist():
                table = rows.filter(pl.Series(part == j)).to_arrow()
                writer = writers[j]
                if writer is None:
                    writer = writers[j] = ipc.new_file(chunks[j], table.schema)
                writer.write_table(table)
            del rows
            path.unlink()
            start += size
    finally:
        for w in writers:
            if w is not None:
                w.close()
    for j, chunk in enumerate(chunks):
        if writers[j] is None:
            continue
        write_table(_table(pl.read_ipc(chunk), comms, calls), out / f"part-{j:06d}.parquet")
        chunk.unlink()
    return out
