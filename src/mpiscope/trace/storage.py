"""How the merged tables are stored in Parquet, and read back as open_trace returns them.

`write_table` encodes a table as the merge built it; `decode` turns a scan of the
stored files back into the public columns (schema.py). Both work row by row
(no join across tables or rows), so that a table of any size is written and
read in pieces.

Most of a table's bytes are its nanosecond times. Each table keeps one time
as a real timestamp, delta-encoded along the rows it is sorted by, with the
min/max statistics that let a query by time range skip row groups
(events' t_enter_ns, messages' t_send_enter_ns, collectives' t_first_enter_ns).
Its other times are stored as their distance from an earlier time of the same
row, in a column named "PUBLIC-BASE" (for instance "t_leave_ns-t_enter_ns"),
which decode adds back: on bench/trace_size.py's recorded examples a
delta-encoded exit time took 2.9-3.2 bytes per event, the call's duration,
byte-stream split and zstd-compressed, takes 1.8-2.1 (its high bytes are zero).
Everything else is small already: ids and envelopes delta- or
dictionary-encoded, strings dictionary-encoded. All tables together: 0.66-0.90
of the bytes of the writer before (HPCG-like 11.8 -> 8.4 bytes per event,
IMB-like 13.1 -> 8.7); the rest is mostly the entropy of the times.
"""

from __future__ import annotations

import os
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from mpiscope.errors import UsageError

FILTER_COLUMNS = {"rank", "src", "dst", "call", "comm"}

# Times stored as (public - base), base an earlier time of the same row. The
# bases are never null where the time is not (entries are always recorded), but
# null bases count as 0, so any row decodes exactly (encode, decode). Bases chosen
# on recorded traces (bench/trace_size.py's examples): a receive's exit from its
# send's entry and its entry from its exit made messages 2-7% smaller than its
# entry from the send's entry and its exit from its entry.
OFFSETS = {
    "t_leave_ns": "t_enter_ns",                 # events: the call's duration
    "t_complete_ns": "t_leave_ns",              # events: the request's life after its start returned
    "t_send_leave_ns": "t_send_enter_ns",       # messages
    "t_recv_enter_ns": "t_recv_leave_ns",
    "t_recv_leave_ns": "t_send_enter_ns",
    "t_last_enter_ns": "t_first_enter_ns",      # collectives
    "t_first_leave_ns": "t_last_enter_ns",
    "t_last_leave_ns": "t_first_leave_ns",
}
SEPARATOR = "-"

# Integers of few distinct values (ranks, communicators, error codes, polls
# folded into a row): dictionary indices, bit-packed and run-length encoded, are
# smaller than delta encoding where the rows alternate (peers) and ~20% cheaper
# to write. Not tags or sizes: a program may use thousands (ring.c's tag is the
# iteration), and a dictionary that outgrows its page falls back to plain values.
DICTIONARY_INTS = {"rank", "thread", "peer", "root", "rc", "src", "dst", "comm", "count"}
# Integers whose high bytes are zero and which vary from row to row: message sizes.
SPLIT_INTS = {"bytes", "recv_bytes"}


def encode(df: pl.DataFrame) -> pl.DataFrame:
    """The columns as stored: the times of OFFSETS whose base is in the table as offsets, in place.
    Series arithmetic, in the calling thread: the merge writes the events table on a thread of
    its own while its main thread keeps Polars' pool busy (a select queued behind that work)."""
    return pl.DataFrame([(df[n] - df[OFFSETS[n]].fill_null(0)).alias(f"{n}{SEPARATOR}{OFFSETS[n]}")
                         if OFFSETS.get(n) in df.columns else df[n] for n in df.columns])


def write_table(df: pl.DataFrame, path: Path) -> None:
    """Delta encoding for the sorted integers (the timestamp that keeps statistics, event ids):
    the differences of neighbouring rows are small. Byte-stream split for the offsets and
    message sizes: their high bytes are zero, which zstd then stores in next to nothing.
    zstd (level 1) only on the columns where it pays (times, tags, strings, sizes, event ids
    of messages), snappy elsewhere: zstd cost ~10 ms more per column of the 10M-record bench
    trace even where it saved nothing. Min/max statistics only on the columns readers filter
    row groups by (ranks, calls, communicators, timestamps): on all 17 columns of that
    events table they took 0.18 of its 1.6 s of writing. In the merge, writing that events
    table now takes 0.97-0.98 of the time it took before (wall and CPU, bench/trace_size.py),
    for 3.2 MB instead of 14.0."""
    table = encode(df).to_arrow()
    encoding: dict[str, str] = {}
    compression: dict[str, str] = {}
    for field in table.schema:
        kind, codec = _layout(field)
        if kind != "DICTIONARY":
            encoding[field.name] = kind
        compression.update((leaf, codec) for leaf in _leaves(field))
    statistics = [n for n in table.column_names
                  if SEPARATOR not in n and (n in FILTER_COLUMNS or n.endswith("_ns"))]
    # Batches of 8192 rows rather than 1024: the statistics of a dictionary column (call) are
    # computed over its dictionary once per batch; 45 ms less CPU on the bench's events table,
    # the same pages and bytes.
    pq.write_table(table, path, compression=compression, write_statistics=statistics,
                   compression_level={n: 1 for n, c in compression.items() if c == "zstd"},
                   use_dictionary=[n for n in table.column_names if n not in encoding],
                   column_encoding=encoding, write_batch_size=8192)


def write_table_v3(df: pl.DataFrame, path: Path) -> None:
    """A table as schema mpiscope.trace/3 stored it (every time a timestamp, integers delta-encoded,
    snappy): what bench/trace_size.py compares the layout against, and how tests write tables of
    traces merged by earlier versions."""
    table = df.to_arrow()
    ints = [f.name for f in table.schema if pa.types.is_integer(f.type)]
    filtered = [n for n in table.column_names if n in FILTER_COLUMNS or n.endswith("_ns")]
    pq.write_table(table, path, compression="snappy", write_statistics=filtered,
                   use_dictionary=[n for n in table.column_names if n not in ints],
                   column_encoding={n: "DELTA_BINARY_PACKED" for n in ints})


def _layout(field: pa.Field) -> tuple[str, str]:
    """(encoding, codec) of one stored column."""
    name = field.name
    if SEPARATOR in name or name in SPLIT_INTS:
        return "BYTE_STREAM_SPLIT", "zstd"
    if not pa.types.is_integer(field.type):
        return "DICTIONARY", "zstd"          # strings, calls, call sites, lists
    if name in DICTIONARY_INTS:
        return "DICTIONARY", "snappy"
    # inside_ns: mostly null, nothing for zstd to find
    squeezed = name.endswith(("_ns", "_event")) and name != "inside_ns" or name == "tag"
    return "DELTA_BINARY_PACKED", "zstd" if squeezed else "snappy"


def _leaves(field: pa.Field) -> list[str]:
    """The Parquet column paths of an Arrow field (a list's values are NAME.list.element)."""
    if pa.types.is_list(field.type) or pa.types.is_large_list(field.type):
        return [f"{field.name}.list.{leaf}" for leaf in _leaves(field.type.value_field)]
    return [field.name]


def decode(name: str, stored: pl.LazyFrame) -> pl.LazyFrame:
    """The table `name` with its public columns, from a scan of its stored files: each offset
    plus its base, in its place. Tables written before offsets (or without the base) pass as
    they are; the plain columns stay plain, so filters on them still reach the scan."""
    columns = stored.collect_schema().names()
    if not any(SEPARATOR in c for c in columns):
        return stored
    stored_as = {c.split(SEPARATOR)[0]: c for c in columns}

    def public(column: str) -> pl.Expr:
        kept = stored_as[column]
        if kept == column:
            return pl.col(column)
        return public(kept.split(SEPARATOR)[1]).fill_null(0) + pl.col(kept)

    return stored.select(public(c).alias(c) for c in stored_as)


def read_table(path: Path, name: str) -> pl.DataFrame:
    """One stored file of table `name` with its public columns (to rewrite a part of a dataset)."""
    return decode(name, pl.scan_parquet(path)).collect()


# Rows a part file is worth writing beside another: pyarrow encodes and compresses a file on one
# thread, so a large table is written as parts, one thread each. The 10 M-record bench trace's events
# (6.7 M rows) took 2.1 s as one file and 1.1 s as two parts on two cores.
PART_ROWS = 1 << 20
MOST_PARTS = 8


def writers(rows: int, processes: int = 1) -> int:
    """The part files, one per thread, that `rows` are worth writing as, for each of `processes`."""
    return max(1, min(MOST_PARTS, (os.cpu_count() or 1) // processes, rows // PART_ROWS))


def write_parts(df: pl.DataFrame, directory: Path, stem: str, parts: int) -> None:
    """df's rows in order as STEM-0.parquet ... STEM-(parts-1).parquet in `directory`, in parallel."""
    bounds = [df.height * j // parts for j in range(parts + 1)]

    def one(j: int) -> None:
        write_table(df.slice(bounds[j], bounds[j + 1] - bounds[j]), directory / f"{stem}-{j}.parquet")

    with ThreadPoolExecutor(parts) as pool:
        list(pool.map(one, range(parts)))


def write_one(trace_dir: Path, name: str, df: pl.DataFrame, parts: int = 1) -> None:
    """NAME.parquet in trace_dir, or with parts > 1 the dataset NAME/ of that many part files, through
    a temporary file or directory: an earlier table of either layout stays if this fails."""
    path = trace_dir / f"{name}.parquet"
    tmp = trace_dir / (f".{name}.tmp" if parts > 1 else f".{name}.parquet.tmp")
    try:
        if parts > 1:
            shutil.rmtree(tmp, ignore_errors=True)
            tmp.mkdir()
            write_parts(df, tmp, "part-000000", parts)
            install_dataset(trace_dir, name, tmp)
        else:
            write_table(df, tmp)
            tmp.replace(path)
            shutil.rmtree(trace_dir / name, ignore_errors=True)  # the dataset of an earlier merge
    except OSError as e:
        if tmp.is_dir():
            shutil.rmtree(tmp, ignore_errors=True)
        tmp.unlink(missing_ok=True)
        raise UsageError(f"cannot write {path} ({e.strerror}); free space or make {trace_dir} "
                         f"writable, then run: mpiscope merge {trace_dir}") from e


def install_dataset(trace_dir: Path, name: str, made: Path) -> None:
    """The dataset directory `made` as the table NAME, in place of an earlier table of either layout."""
    old = trace_dir / f".{name}.old"
    shutil.rmtree(old, ignore_errors=True)
    if (trace_dir / name).exists():
        (trace_dir / name).rename(old)
    made.rename(trace_dir / name)
    (trace_dir / f"{name}.parquet").unlink(missing_ok=True)
    shutil.rmtree(old, ignore_errors=True)
