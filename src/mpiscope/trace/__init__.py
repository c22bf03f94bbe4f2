"""Trace directories: raw per-rank files, a manifest, and merged Parquet tables.

    from mpiscope.trace import open_trace
    t = open_trace("trace-dir")          # merges first if needed
    t.messages().filter(...).collect()    # lazy Polars frames
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from mpiscope.capture.manifest import read_manifest
from mpiscope.errors import TraceCorrupt
from mpiscope.trace.columns import CallTable
from mpiscope.trace.storage import DERIVED, ENTRY_GAP, decode, derived_scan, event_times, instance_times

TABLES = ("events", "messages", "collectives", "comms")
# The calls that start persistent requests. One that starts a persistent collective is that rank's
# part in its instance (coll_id), named in collectives.parquet by its *_init call.
START_CALLS = ("MPI_Start", "MPI_Startall")
# The calls that start and end a process's MPI, the world model's and the sessions' (a sessions program's
# MPI_Session_init counted as MPI time: "communication-bound, mostly in MPI_Session_init"), and with
# MPI_Pcontrol those whose time is neither computation nor communication.
INIT_CALLS = ("MPI_Init", "MPI_Init_thread", "MPI_Session_init")
FINALIZE_CALLS = ("MPI_Finalize", "MPI_Session_finalize")
ENV_CALLS = (*INIT_CALLS, *FINALIZE_CALLS, "MPI_Pcontrol")
# One-sided transfers by the way their bytes go: origin to target (puts, accumulates, atomics), target to origin.
ONE_SIDED_PUTS = ("MPI_Put", "MPI_Rput", "MPI_Accumulate", "MPI_Raccumulate", "MPI_Get_accumulate",
                  "MPI_Rget_accumulate", "MPI_Fetch_and_op", "MPI_Compare_and_swap")
ONE_SIDED_GETS = ("MPI_Get", "MPI_Rget")
# MPI-IO: every function of the standard's chapter 14 and no other is named so. Their time is file
# I/O, neither computation nor communication.
FILE_IO_PREFIX = "MPI_File_"


def file_io_calls(names: list[str], moving: str = "") -> list[str]:
    """The MPI-IO calls among `names`; with moving="read" or "write" those that read or write data
    (MPI_File_read_at_all, MPI_File_iread, ..._begin), else all."""
    stems = (f"{FILE_IO_PREFIX}{moving}", f"{FILE_IO_PREFIX}i{moving}") if moving else (FILE_IO_PREFIX,)
    return [n for n in names if n.startswith(stems)]


# MPI-IO calls all ranks of a file call together, which wait for each other: the collective and split
# collective reads and writes, the ordered ones, and the calls that open, shape and close a file.
_COLLECTIVE_FILE_IO_ENDS = ("_all", "_all_c", "_all_begin", "_all_begin_c", "_ordered", "_ordered_c",
                            "_ordered_begin", "_ordered_begin_c")
_COLLECTIVE_FILE_CALLS = frozenset({"MPI_File_open", "MPI_File_close", "MPI_File_set_view", "MPI_File_set_size",
                                    "MPI_File_preallocate", "MPI_File_sync", "MPI_File_set_atomicity",
                                    "MPI_File_set_info"})


def collective_file_io_calls(names: list[str], moving: bool = False) -> list[str]:
    """The collective MPI-IO calls among `names`; with moving=True its reads and writes only."""
    io = file_io_calls(names, "read") + file_io_calls(names, "write") if moving else file_io_calls(names)
    return [n for n in io if n.endswith(_COLLECTIVE_FILE_IO_ENDS) or (not moving and n in _COLLECTIVE_FILE_CALLS)]


def no_calls(trace: Trace) -> str:
    """The sentence for a trace that holds no MPI call, with what to do (every verb that needs calls
    says the same)."""
    if trace.manifest.get("started_paused"):
        return (f"{trace.path} holds no MPI calls: recording started paused (run --paused) and the program never "
                f"resumed it with MPI_Pcontrol(1); record again without --paused")
    return (f"{trace.path} holds no MPI calls; record a run that calls MPI: "
            f"mpiscope run --out {trace.path} --force -- mpiexec -n 4 ./app")


def unreadable(path: Path, table: str | None, error: Exception) -> TraceCorrupt:
    """The error for a table of the trace at `path` that cannot be read (truncated, overwritten);
    table None: one of its tables, found damaged only when its rows were read."""
    first = (str(error).strip().splitlines() or [type(error).__name__])[0]
    what = f"{path / table}.parquet" if table else f"a table of {path}"
    return TraceCorrupt(f"{what} cannot be read ({first}); merge the trace again: mpiscope merge {path}")


def file_io_waits(events: pl.LazyFrame, io: pl.Expr) -> pl.Series:
    """The events (ids) that are waits or tests which completed nonblocking file accesses (rows where
    `io`) and nothing else: MPI_File_iwrite_at ... MPI_Wait is the write's time, file I/O; a wait that
    also completed a message stays communication. Two streaming scans of the few rows they select,
    so a trace of any size takes little memory."""
    waits = (events.filter(io & pl.col("completed_by").is_not_null())
             .select(pl.col("completed_by").alias("event")).unique().collect(engine="streaming"))["event"]
    if not waits.len():
        return waits
    also_other = (events.filter(~io & pl.col("completed_by").is_in(waits.implode()))
                  .select("completed_by").unique().collect(engine="streaming"))["completed_by"]
    return waits.filter(~waits.is_in(also_other.implode())).sort()


@dataclass(frozen=True)
class Trace:
    path: Path
    manifest: dict[str, Any]
    # what messages and collectives derive their times from, read once per Trace (storage.py): a
    # report reads them three times
    _derivation_sources: dict[str, pl.DataFrame] = field(default_factory=dict, init=False, compare=False, repr=False)
    # each table's scan, planned once per Trace (its files listed, schema read, calls' Enum built:
    # ~1 ms a table, and a report asks for the events ~10 times)
    _scans: dict[str, pl.LazyFrame] = field(default_factory=dict, init=False, compare=False, repr=False)

    def _derivation_source(self, name: str) -> pl.DataFrame:
        if name not in self._derivation_sources:
            events = self.events()
            self._derivation_sources[name] = event_times(events) if name == "messages" else instance_times(events)
        return self._derivation_sources[name]

    def _scan(self, name: str) -> pl.LazyFrame:
        if name not in self._scans:
            self._scans[name] = self._planned_scan(name)
        return self._scans[name]

    def _planned_scan(self, name: str) -> pl.LazyFrame:
        files = table_files(self.path, name)
        if not files:
            raise TraceCorrupt(f"{self.path / name}.parquet is missing; merge the trace again: "
                               f"mpiscope merge {self.path}")
        calls = CallTable.from_manifest(self.manifest["calls"]).enum() if self.manifest.get("calls") else None
        try:
            whole = pl.scan_parquet(files)
            if name != "events" or len(files) == 1 or ENTRY_GAP not in whole.collect_schema().names():
                stored = decode(name, whole, calls)
            else:  # each part's entries add up from its own first row
                stored = pl.concat([decode(name, pl.scan_parquet(f), calls) for f in files])
            if any(DERIVED in c for c in stored.collect_schema().names()):
                return derived_scan(name, stored, lambda: self._derivation_source(name))
            return stored
        except (pl.exceptions.PolarsError, OSError) as e:
            raise unreadable(self.path, name, e) from e

    def hold(self, *names: str) -> None:
        """Read tables into memory once, for a verb that holds all their rows anyway: its queries
        then read the rows in memory, where each lazy scan decoded the Parquet files again (a
        report reads the events ~10 times; messages derive their times from the events each time)."""
        for name in names:
            try:
                self._scans[name] = self._scan(name).collect().lazy()
            except (pl.exceptions.PolarsError, OSError) as e:
                raise unreadable(self.path, name, e) from e

    def events(self) -> pl.LazyFrame:
        return _with_outcomes(_with_recv_bytes(self._scan("events")))

    def messages(self) -> pl.LazyFrame:
        return self._scan("messages")

    def collectives(self) -> pl.LazyFrame:
        return _with_recv_bytes(self._scan("collectives"))

    def comms(self) -> pl.LazyFrame:
        return self._scan("comms")

    def init_calls(self, coll_ids: pl.Series) -> pl.DataFrame:
        """coll_id, call (Utf8) of the instances `coll_ids` name: for the MPI_Start(all) rows of
        persistent collectives, the *_init call that names their collective (MPI_Allreduce_init is
        an allreduce, MPI_Start is none)."""
        ids = pl.DataFrame({"coll_id": coll_ids.unique()})
        try:
            return (self.collectives().select("coll_id", pl.col("call").cast(pl.Utf8))
                    .join(ids.lazy(), on="coll_id", how="semi").collect())
        except (pl.exceptions.PolarsError, OSError) as e:
            raise unreadable(self.path, "collectives", e) from e

    def with_init_calls(self, rows: pl.DataFrame, column: str, started: pl.Expr, name_of: Mapping[str, Any],
                        dtype: pl.DataType) -> pl.DataFrame:
        """`rows` (with coll_id) whose `column`, where `started` holds (the MPI_Start(all) rows of
        persistent collectives), says name_of[its instance's *_init call] instead (as it was
        where name_of has none): the exports name the collective, the replay its nonblocking form."""
        ids = rows.filter(started & pl.col("coll_id").is_not_null())["coll_id"]
        if not ids.len():
            return rows
        named = self.init_calls(ids).select(
            "coll_id", pl.col("call").replace_strict(name_of, default=None, return_dtype=dtype).alias("_named"))
        return (rows.join(named, on="coll_id", how="left", maintain_order="left")
                .with_columns(pl.when(started).then(pl.coalesce("_named", column)).otherwise(pl.col(column))
                              .alias(column)).drop("_named"))

    @property
    def stopped_ns(self) -> dict[int, int]:
        """When each rank stopped by a signal was stopped (manifest ended_ns), on the trace's clock. A
        rank killed by SIGKILL has no stop time: the launcher kills the rest of a job right after the
        first rank dies of the signal all were sent, so it stopped when the last of the others did."""
        ended = {int(r): int(ns) for r, ns in (self.manifest.get("ended_ns") or {}).items()}
        if ended:
            last = max(ended.values())
            ended.update({int(r): last for r, s in (self.manifest.get("rank_states") or {}).items()
                          if s == "cut off" and int(r) not in ended})
        return ended

    @property
    def event_count(self) -> int:
        """Calls in the events table, as the merge counted them (0 in a manifest without counts)."""
        return int(self.manifest.get("counts", {}).get("events", 0))

    @property
    def ranks(self) -> int:
        return int(self.manifest.get("ranks", 0))


def table_files(path: Path, name: str) -> list[Path]:
    """The Parquet files of one merged table: NAME.parquet, or the parts of the dataset NAME/
    (a merge in pieces, merge.py), in row order."""
    single = path / f"{name}.parquet"
    if single.is_file():
        return [single]
    return sorted((path / name).glob("part-*.parquet"))


def is_merged(path: Path, manifest: dict[str, Any]) -> bool:
    """The manifest says merged and every table is there."""
    return bool(manifest.get("merged")) and all(table_files(path, t) for t in TABLES)


def _with_recv_bytes(frame: pl.LazyFrame) -> pl.LazyFrame:
    """Tables merged before schema mpiscope.trace/2 have no recv_bytes: null there, as in the
    tables merged now from raw files that did not record it, so that readers need no test."""
    if "recv_bytes" in frame.collect_schema().names():
        return frame
    return frame.with_columns(pl.lit(None, pl.Int64).alias("recv_bytes"))


def _with_outcomes(frame: pl.LazyFrame) -> pl.LazyFrame:
    """Tables merged before schema mpiscope.trace/3 have no count, inside_ns, rc: every row one
    call that succeeded, as the recorder then wrote them."""
    if "count" in frame.collect_schema().names():
        return frame
    return frame.with_columns(pl.lit(1, pl.Int64).alias("count"), pl.lit(None, pl.Int64).alias("inside_ns"),
                              pl.lit(None, pl.Int32).alias("rc"))


def open_trace(path: str | Path, merge: bool = True) -> Trace:
    """Open a trace directory, merging its raw files first if that was not done."""
    path = Path(path)
    manifest = read_manifest(path)
    if merge and not is_merged(path, manifest):
        from mpiscope.trace.merge import merge_trace

        merge_trace(path)
        manifest = read_manifest(path)
    return Trace(path, manifest)
