"""How the merged tables are stored in Parquet, and read back as open_trace returns them.

`write_table` encodes a table as the merge built it; `decode` turns a scan of
one stored file back into the public columns (schema.py); `derived_scan` adds
the times a table takes from the events table. A table of any size is written
and read in pieces: nothing here joins across files.

Most of a table's bytes are its nanosecond times, and most of their entropy is
the clock's own, so each time is stored once and only what is new in it:

- events: a call's exit as its duration, a request's completion from the
  start's exit; its entry, as a merge in memory writes it, as its gap after
  the previous row's exit (its entry if it never returned; the file's first
  row: the time itself). The gaps are computation and the durations calls:
  small, byte-stream split and zstd. Reading adds them up from the file's first
  row (a running sum, which Polars streams), so a filter on such events reads
  every row group: 0.3 s for one rank of 6.7 M events. A merge in pieces, for
  traces too large for that, keeps the entry a timestamp with min/max
  statistics, and a query by rank and time range reads only its row groups.
- messages and collectives, as a merge in memory writes them: each time as its
  difference from the time the events give for it (a message's send entry is
  its send event's entry, an instance's first entry the least entry of its
  calls). The differences are zero but where the merge moved a time (a receive
  clamped to its send), so they take next to nothing; reading gathers the
  events' times by event id (16 bytes an event in memory, only for the readers
  that ask for these times). A merge in pieces does not hold the events beside
  the messages and stores their times as offsets from an earlier time of the
  same row ("PUBLIC-BASE", for instance "t_recv_enter_ns-t_recv_leave_ns").
- strings (calls, call sites) as Parquet dictionaries; as a merge in memory
  writes them, without the Arrow schema in the footer (a call Enum's ~400
  names were ~10 KB per file): reading casts them back (the manifest's calls).

bench/trace_size.py measures the bytes per event of each table beside the
writer of schema mpiscope.trace/3 and OTF2.
"""

from __future__ import annotations

import os
import shutil
from concurrent.futures import ThreadPoolExecutor
from collections.abc import Callable, Iterator
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
from polars.io.plugins import register_io_source

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


# events' entry: its gap after the previous row's exit, or after its entry where it never returned
# (encode); the first row of a file: the entry itself (decode adds them up per file)
ENTRY_GAP = f"t_enter_ns{SEPARATOR}previous_exit"
# Times a merge in memory stores as (public - derived), derived from the events: "PUBLIC@IDS", IDS the
# column that names the events (with_derived_times, derived_scan).
DERIVED = "@"
MESSAGE_TIMES = {  # public: (event id column, the event's time)
    "t_send_enter_ns": ("send_event", "t_enter_ns"),
    "t_send_leave_ns": ("send_event", "done_ns"),
    "t_recv_enter_ns": ("recv_event", "t_enter_ns"),
    "t_recv_leave_ns": ("recv_event", "done_ns"),
}
COLLECTIVE_TIMES = {  # public: (aggregate over the instance's events, the events' time)
    "t_first_enter_ns": ("min", "t_enter_ns"),
    "t_last_enter_ns": ("max", "t_enter_ns"),
    "t_first_leave_ns": ("min", "done_ns"),
    "t_last_leave_ns": ("max", "done_ns"),
}


def encode(df: pl.DataFrame, compact: bool = False) -> pl.DataFrame:
    """The columns as stored: the times of OFFSETS whose base is in the table as offsets, and where
    compact (write_table) events' entries as gaps, in place. Series arithmetic, in the calling
    thread: the merge writes the events table on a thread of its own while its main thread keeps
    Polars' pool busy (a select queued behind that work)."""
    def stored(n: str) -> pl.Series:
        if compact and n == "t_enter_ns" and "t_leave_ns" in df.columns:
            ended = df["t_leave_ns"].fill_null(df[n])
            return (df[n] - ended.shift(1, fill_value=0)).alias(ENTRY_GAP)
        if OFFSETS.get(n) in df.columns:
            return (df[n] - df[OFFSETS[n]].fill_null(0)).alias(f"{n}{SEPARATOR}{OFFSETS[n]}")
        return df[n]

    return pl.DataFrame([stored(n) for n in df.columns])


def event_times(events: pl.LazyFrame | pl.DataFrame) -> pl.DataFrame:
    """What messages derive their times from: every event's entry and its completion (of the request
    it started, else its exit; 0 where neither, as a derived null counts), by event id (= row: 16
    bytes an event in memory). Neither column holds a null: NumPy gathers from them in place."""
    times = events.select("t_enter_ns", pl.coalesce("t_complete_ns", "t_leave_ns").fill_null(0).alias("done_ns"))
    return times if isinstance(times, pl.DataFrame) else times.collect(engine="streaming").rechunk()


def instance_times(events: pl.LazyFrame | pl.DataFrame) -> pl.DataFrame:
    """What collectives derive their times from: per instance (coll_id), the least and greatest
    entry and completion (the completion of a request the call started, else its exit) of its
    events; aggregated streaming (memory by instances)."""
    done = pl.coalesce("t_complete_ns", "t_leave_ns")
    return (events.lazy().filter(pl.col("coll_id").is_not_null()).group_by("coll_id")
            .agg(getattr(pl.col("t_enter_ns") if of == "t_enter_ns" else done, how)().alias(c)
                 for c, (how, of) in COLLECTIVE_TIMES.items()).collect(engine="streaming"))


def _derived_values(name: str, df: pl.DataFrame, source: pl.DataFrame, wanted: list[str]) -> pl.DataFrame:
    """The derived value of each public time in `wanted` for df's rows (null or 0 where the events
    give none), from `source`: event_times for messages (a message's times are its send and receive
    events' entries and completions), instance_times for collectives."""
    if name == "messages":  # gathered by NumPy: 1.7 M messages of 6.7 M events 0.2 s, by Polars 0.5-0.7
        times = {t: source[t].to_numpy() for t in ("t_enter_ns", "done_ns")}
        return pl.DataFrame({c: times[MESSAGE_TIMES[c][1]][df[MESSAGE_TIMES[c][0]].fill_null(0).to_numpy()]
                             for c in wanted})
    return (df.select("coll_id").join(source.select("coll_id", *wanted), on="coll_id", how="left",
                                      maintain_order="left").drop("coll_id"))


def _derivable(name: str) -> dict[str, tuple[str, str]]:
    return MESSAGE_TIMES if name == "messages" else COLLECTIVE_TIMES if name == "collectives" else {}


def _ids(name: str, column: str) -> str:
    return MESSAGE_TIMES[column][0] if name == "messages" else "coll_id"


def with_derived_times(name: str, df: pl.DataFrame, events: pl.DataFrame) -> pl.DataFrame:
    """messages or collectives as a merge in memory stores them: each time as its difference
    from the time the events (the table as written) give for it, "PUBLIC@IDS" in place; null
    where the time is null. Other tables as they are."""
    times = _derivable(name)
    if not times:
        return df
    source = event_times(events) if name == "messages" else instance_times(events)
    derived = _derived_values(name, df, source, [c for c in df.columns if c in times])
    return pl.DataFrame([(df[c] - derived[c].fill_null(0)).alias(f"{c}{DERIVED}{_ids(name, c)}")
                         if c in times else df[c] for c in df.columns])


def derived_scan(name: str, stored: pl.LazyFrame, source: Callable[[], pl.DataFrame]) -> pl.LazyFrame:
    """The table `name` with its public columns, from a scan of its stored files that holds times
    derived from the events: a Polars IO source that reads the events' times (`source`: event_times
    or instance_times) only when a query reads a derived time (the counts and matrices of stats read
    none), and filters as it is told: in the scan where the filter reads no derived time."""
    columns = stored.collect_schema()
    public = {c.split(DERIVED)[0]: c for c in columns}
    schema = {p: (pl.Int64 if DERIVED in c else columns[c]) for p, c in public.items()}

    def batches(with_columns: list[str] | None, predicate: pl.Expr | None, n_rows: int | None,
                batch_size: int | None) -> Iterator[pl.DataFrame]:
        names = with_columns or list(schema)
        need = set(names) | (set(predicate.meta.root_names()) if predicate is not None else set())
        times = [p for p in schema if p in need and DERIVED in public[p]]
        read = [c for p, c in public.items() if p in need or (times and c in {_ids(name, t) for t in times})]
        scan = stored.select(read)
        if predicate is not None and not times:  # the stored columns it reads are the public ones
            scan, predicate = scan.filter(predicate), None
        df = scan.collect(engine="streaming")
        if times:
            derived = _derived_values(name, df, source(), times)
            df = df.with_columns((derived[t].fill_null(0) + df[public[t]]).alias(public[t]) for t in times)
        df = df.rename({c: p for p, c in public.items() if c in df.columns and c != p})
        if predicate is not None:
            df = df.filter(predicate)
        if n_rows is not None:
            df = df.head(n_rows)
        step = max(batch_size or df.height, 1)
        for start in range(0, max(df.height, 1), step):
            yield df.slice(start, step).select(names)

    return register_io_source(batches, schema=schema, explain_name=f"mpiscope {name}")


def write_table(df: pl.DataFrame, path: Path, compact: bool = False) -> None:
    """Delta encoding for the sorted integers (event ids, the timestamps a merge in pieces keeps in
    messages and collectives): the differences of neighbouring rows are small. Byte-stream split for
    the gaps, offsets, derived times and message sizes: their high bytes are zero, which zstd then
    stores in next to nothing. zstd (level 1) only on the columns where it pays (times, tags,
    strings, sizes, event ids of messages), snappy elsewhere: zstd cost ~10 ms more per column of
    the 10M-record bench trace even where it saved nothing. Min/max statistics only on the columns
    readers filter row groups by (ranks, calls, communicators, timestamps): on all 17 columns of
    that events table they took 0.18 of its 1.6 s of writing.

    compact: the layout of a trace merged in memory, smallest on disk: events' entries as gaps, no
    Arrow schema (decode casts the strings back: 18 ms more per 6.7 M calls read, the name Enum
    ~10 KB less per file). Else the layout of a merge in pieces, whose large tables are read by
    rank and time range: entries timestamps with statistics, calls an Enum read as one."""
    table = _required(encode(df, compact).to_arrow())
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
                   column_encoding=encoding, write_batch_size=8192, store_schema=not compact)


def _required(table: pa.Table) -> pa.Table:
    """The table with each flat column that holds no null stored as a required column: an optional
    column's definition levels cost as much to encode as its values to compress (8 columns of 6.7 M
    int64, no nulls: 0.85 -> 0.60 CPU-s). Readers see the same columns; a dataset's parts may differ
    in this, which Polars and Arrow datasets read as one optional column."""
    fields = [f.with_nullable(False) if f.nullable and not pa.types.is_nested(f.type) and not column.null_count
              else f for f, column in zip(table.schema, table.columns)]
    return pa.Table.from_arrays(table.columns, schema=pa.schema(fields, table.schema.metadata))


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
    if SEPARATOR in name or DERIVED in name or name in SPLIT_INTS:
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


def decode(name: str, stored: pl.LazyFrame, calls: pl.Enum | None = None) -> pl.LazyFrame:
    """The table `name` with its public columns, from a scan of one stored file: each offset plus
    its base, the entries of events added up from their gaps, in their places; `call` of the
    Enum `calls` (the manifest's: CallTable.enum), call sites categorical. Derived times
    (derived_scan) stay as they are. Tables written before offsets (or without the base) pass
    as they are; the plain columns stay plain, so filters on them still reach the scan."""
    schema = stored.collect_schema()
    columns = schema.names()
    strings = [pl.col("call").cast(calls)] if calls is not None and schema.get("call") == pl.String else []
    if schema.get("callsite") == pl.String:
        strings.append(pl.col("callsite").cast(pl.Categorical))
    if strings:
        stored = stored.with_columns(strings)
    if not any(SEPARATOR in c for c in columns):
        return stored
    stored_as = {c.split(SEPARATOR)[0]: c for c in columns}

    def public(column: str) -> pl.Expr:
        kept = stored_as[column]
        if kept == column:
            return pl.col(column)
        if kept == ENTRY_GAP:  # t_enter[i] = t_enter[i-1] + duration[i-1] + gap[i]
            took = pl.col(stored_as["t_leave_ns"]).fill_null(0).shift(1, fill_value=0)
            return (pl.col(kept) + took).cum_sum()
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


def write_parts(df: pl.DataFrame, directory: Path, stem: str, parts: int, compact: bool = False) -> None:
    """df's rows in order as STEM-0.parquet ... STEM-(parts-1).parquet in `directory`, in parallel."""
    bounds = [df.height * j // parts for j in range(parts + 1)]

    def one(j: int) -> None:
        write_table(df.slice(bounds[j], bounds[j + 1] - bounds[j]), directory / f"{stem}-{j}.parquet", compact)

    with ThreadPoolExecutor(parts) as pool:
        list(pool.map(one, range(parts)))


def write_one(trace_dir: Path, name: str, df: pl.DataFrame, parts: int = 1, compact: bool = False) -> None:
    """NAME.parquet in trace_dir, or with parts > 1 the dataset NAME/ of that many part files, through
    a temporary file or directory: an earlier table of either layout stays if this fails."""
    path = trace_dir / f"{name}.parquet"
    tmp = trace_dir / (f".{name}.tmp" if parts > 1 else f".{name}.parquet.tmp")
    try:
        if parts > 1:
            shutil.rmtree(tmp, ignore_errors=True)
            tmp.mkdir()
            write_parts(df, tmp, "part-000000", parts, compact)
            install_dataset(trace_dir, name, tmp)
        else:
            write_table(df, tmp, compact)
            install_file(trace_dir, name, tmp)
    except OSError as e:
        if tmp.is_dir():
            shutil.rmtree(tmp, ignore_errors=True)
        tmp.unlink(missing_ok=True)
        raise UsageError(f"cannot write {path} ({e.strerror}); free space or make {trace_dir} "
                         f"writable, then run: mpiscope merge {trace_dir}") from e


def install_file(trace_dir: Path, name: str, made: Path) -> None:
    """The Parquet file `made` as the table NAME.parquet, in place of an earlier table of either layout."""
    made.replace(trace_dir / f"{name}.parquet")
    shutil.rmtree(trace_dir / name, ignore_errors=True)  # the dataset of an earlier merge


def install_dataset(trace_dir: Path, name: str, made: Path) -> None:
    """The dataset directory `made` as the table NAME, in place of an earlier table of either layout."""
    old = trace_dir / f".{name}.old"
    shutil.rmtree(old, ignore_errors=True)
    if (trace_dir / name).exists():
        (trace_dir / name).rename(old)
    made.rename(trace_dir / name)
    (trace_dir / f"{name}.parquet").unlink(missing_ok=True)
    shutil.rmtree(old, ignore_errors=True)
