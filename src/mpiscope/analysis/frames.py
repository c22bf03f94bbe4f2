"""The columns of a trace that the diagnosis needs, in memory once, with event ids as row numbers.

Every diagnosis step (wait states, critical path, phases, hot spots) reads the same
few columns; loading them once and gathering by event id (events.parquet's `event`
is its row number) replaces joins on 10 M rows by array lookups.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import numpy.typing as npt
import polars as pl

from mpiscope.analysis.busy import union_by_rank
from mpiscope.errors import TraceCorrupt
from mpiscope.machine import require_memory
from mpiscope.trace import (ENV_CALLS, FINALIZE_CALLS, INIT_CALLS, START_CALLS, Trace, file_io_calls, file_io_waits,
                            unreadable)

EVENT_COLUMNS = ("event", "rank", "call", "t_enter_ns", "t_leave_ns", "completed_by", "coll_id", "root",
                 "callsite", "inside_ns")
# Read when the table has it (a test's made-up events may not): wait at fence groups fences by window.
OPTIONAL_EVENT_COLUMNS = ("comm", "thread")
MESSAGE_COLUMNS = ("src", "dst", "bytes", "t_send_enter_ns", "t_recv_enter_ns", "send_event", "recv_event")
# the receive's completion: where its start has no completing call (waitstates._Times.completing_call)
OPTIONAL_MESSAGE_COLUMNS = ("t_recv_leave_ns",)

I64 = npt.NDArray[np.int64]


@dataclass(frozen=True)
class Frames:
    """events (row = event id, `call` an Enum), messages, and the world size."""
    path: Path
    run_id: str
    ranks: int
    events: pl.DataFrame
    messages: pl.DataFrame
    # coll_id, call of the collective instances that persistent collectives' MPI_Start(all) rows
    # take part in (None: there are none, or made-up tables)
    started: pl.DataFrame | None = None
    # NumPy copies of columns, made once: every step reads the times, calls and ranks
    _arrays: dict[str, npt.NDArray[np.int64]] = field(default_factory=dict, repr=False, compare=False)

    @property
    def call_names(self) -> list[str]:
        """Call name of each code of the `call` column (its Enum categories)."""
        dtype = self.events.schema["call"]
        assert isinstance(dtype, pl.Enum)
        return list(dtype.categories.to_list())

    def call_codes(self) -> npt.NDArray[np.int64]:
        if "call" not in self._arrays:
            self._arrays["call"] = self.events["call"].to_physical().to_numpy().astype(np.int64)
        return self._arrays["call"]

    def collective_codes(self) -> npt.NDArray[np.int64]:
        """Per event, the code of the call that names its collective: its own call, but for the
        MPI_Start(all) of a persistent collective, that collective's *_init call (MPI_Allreduce_init
        is an allreduce, MPI_Start is not)."""
        if "collective" not in self._arrays:
            codes = self.call_codes()
            if self.started is not None and self.started.height:
                codes = codes.copy()
                starts = np.flatnonzero(self.code_table(START_CALLS)[codes] & (self.column("coll_id") >= 0))
                index = {n: i for i, n in enumerate(self.call_names)}
                by_id = dict(zip(self.started["coll_id"].to_list(), self.started["call"].to_list()))
                named = [index.get(by_id.get(int(c), ""), -1) for c in self.column("coll_id")[starts]]
                codes[starts] = np.where(np.array(named, np.int64) >= 0, named, codes[starts])
            codes.flags.writeable = False
            self._arrays["collective"] = codes
        return self._arrays["collective"]

    def code_table(self, names: set[str] | frozenset[str] | tuple[str, ...]) -> npt.NDArray[np.bool_]:
        """A lookup table over call codes: True where the call's name is in `names`."""
        return np.array([n in names for n in self.call_names] or [False], dtype=bool)

    def column(self, name: str) -> I64:
        """An events column as int64, nulls as -1 (read-only: it is shared)."""
        if name not in self._arrays:
            s = self.events[name]
            # without nulls an Int64 column is handed over without a copy (10 M rows: 80 MB each)
            a = (s.to_numpy() if s.null_count() == 0 else s.fill_null(-1).to_numpy()).astype(np.int64, copy=False)
            if a.flags.writeable:
                a.flags.writeable = False
            self._arrays[name] = a
        return self._arrays[name]

    def threads(self) -> tuple[I64, I64] | None:
        """Where a rank called MPI from several threads: the rows in (rank, thread) order, each thread's
        calls in time order, and each row's place in that order; None where every rank called from one
        thread (its rows are in that order already). A thread's calls follow one another; a rank's do
        not: another thread's call may be running."""
        if "by_thread" not in self._arrays:
            order = np.empty(0, np.int64)
            if self.threads_most() > 1:
                order = np.argsort(self.stream(), kind="stable")
                place = np.empty_like(order)
                place[order] = np.arange(order.size)
                self._arrays["thread_place"] = place
            self._arrays["by_thread"] = order
        order = self._arrays["by_thread"]
        return (order, self._arrays["thread_place"]) if order.size else None

    def stream(self) -> I64:
        """Per event, a key of its (rank, thread): the rank where no rank has several threads."""
        if "stream" not in self._arrays:
            rank, width = self.column("rank"), self.threads_most()
            self._arrays["stream"] = rank if width == 1 else rank * width + np.maximum(self.column("thread"), 0)
        return self._arrays["stream"]

    def threads_most(self) -> int:
        """1 + the highest thread number of any rank (1: every rank called MPI from one thread)."""
        most = self.events["thread"].max() if "thread" in self.events.columns and self.events.height else None
        return int(most) + 1 if most is not None and int(most) > 0 else 1  # type: ignore[arg-type]

    def thread_cumsum(self, values: I64) -> I64:
        """Per event, the sum of `values` over the calls of its thread before it (itself left out)."""
        threads = self.threads()
        if threads is None:
            return np.cumsum(values) - values
        order, place = threads
        return (np.cumsum(values[order]) - values[order])[place]

    def previous_in_thread(self, event: I64) -> I64:
        """The event before each event in the same thread of its rank, -1 for a thread's first event."""
        threads = self.threads()
        if threads is None:
            prev = event - 1
        else:
            order, place = threads
            pos = place[event]
            prev = np.where(pos > 0, order[np.maximum(pos - 1, 0)], -1)
        key = self.stream()
        return np.where((prev >= 0) & (key[np.maximum(prev, 0)] == key[event]), prev, -1)


def frames_from(events: pl.DataFrame, messages: pl.DataFrame, ranks: int, run_id: str = "",
                path: Path = Path(".")) -> Frames:
    """Frames from in-memory tables (the trace's, or made up by a test); `call` may be a string."""
    missing = [c for c in EVENT_COLUMNS if c not in events.columns] + \
        [c for c in MESSAGE_COLUMNS if c not in messages.columns]
    if missing:
        raise TraceCorrupt(f"the tables of {path} lack the columns {', '.join(missing)}; "
                           f"merge the trace again: mpiscope merge {path}")
    if not isinstance(events.schema["call"], pl.Enum):
        events = events.with_columns(pl.col("call").cast(pl.Enum(sorted(events["call"].unique().to_list()))))
    if not isinstance(events.schema["callsite"], pl.Categorical):
        events = events.with_columns(pl.col("callsite").cast(pl.Utf8).fill_null("").cast(pl.Categorical))
    n = events.height
    if n and not events["rank"].is_sorted():
        raise TraceCorrupt(f"the events of {path}/events.parquet are not in rank order; "
                           f"merge the trace again: mpiscope merge {path}")
    if n and (events["event"][0] != 0 or events["event"][n - 1] != n - 1
              or not bool((events["event"].diff().drop_nulls() == 1).all())):
        raise TraceCorrupt(f"the event ids of {path}/events.parquet are not its row numbers; "
                           f"merge the trace again: mpiscope merge {path}")
    world = max(ranks, int(events["rank"].cast(pl.Int64).max() or 0) + 1) if n else ranks  # type: ignore[arg-type]
    cols = EVENT_COLUMNS + tuple(c for c in OPTIONAL_EVENT_COLUMNS if c in events.columns)
    kept = MESSAGE_COLUMNS + tuple(c for c in OPTIONAL_MESSAGE_COLUMNS if c in messages.columns)
    return Frames(path, run_id, world, events.select(cols), messages.select(kept))


def _read(trace: Trace, name: str, columns: tuple[str, ...]) -> pl.DataFrame:
    scan = {"events": trace.events, "messages": trace.messages}[name]
    try:
        return scan().select(columns).collect()
    except (pl.exceptions.PolarsError, OSError) as e:
        raise unreadable(trace.path, name, e) from e


# The diagnosis holds ~200 bytes per call: 10 M calls 2 GB (report/cache.py), a generated halo of
# 66.7 M calls 14.2 GB (213 bytes a call); with a margin.
BYTES_PER_EVENT = 230


def load_frames(trace: Trace, what: str = "the diagnosis") -> Frames:
    """The diagnosis' columns of a trace (events, messages), in memory: said in one sentence
    (`what` holds them) when the machine cannot hold them, rather than killed for it."""
    require_memory(what, trace.event_count, BYTES_PER_EVENT, trace.path)
    f = frames_from(_read(trace, "events", EVENT_COLUMNS + OPTIONAL_EVENT_COLUMNS),
                    _read(trace, "messages", MESSAGE_COLUMNS + OPTIONAL_MESSAGE_COLUMNS),
                    trace.ranks, str(trace.manifest.get("run_id", "")), trace.path)
    started = f.events.filter(pl.col("call").cast(pl.Utf8).is_in(START_CALLS) & pl.col("coll_id").is_not_null())
    if not started.height:
        return f
    return replace(f, started=trace.init_calls(started["coll_id"]))


def mpi_ns_before(f: Frames) -> I64:
    """Time in MPI of all events before each event id (n + 1 values): each event counts its
    duration (a folded polling loop the time inside its calls), 0 for ENV_CALLS and calls that
    never returned. Made once per Frames."""
    if "mpi_before" not in f._arrays:
        before = np.zeros(f.events.height + 1, np.int64)
        np.cumsum(in_mpi_ns(f), out=before[1:])
        before.flags.writeable = False
        f._arrays["mpi_before"] = before
    return f._arrays["mpi_before"]


def in_mpi_ns(f: Frames) -> I64:
    """Each event's time in MPI: its duration (a folded polling loop the time inside its calls),
    0 for ENV_CALLS and calls that never returned."""
    enter, leave = f.column("t_enter_ns"), f.column("t_leave_ns")
    inside = f.column("inside_ns")
    env = f.code_table(ENV_CALLS)[f.call_codes()]
    in_mpi: I64 = np.where(env | (leave < 0), 0, np.where(inside >= 0, inside, leave - enter))
    return in_mpi


def file_io_rows(f: Frames) -> npt.NDArray[np.bool_]:
    """Per event: an MPI-IO call, or a wait or test that completed nonblocking file accesses and
    nothing else (MPI_File_iread_at ... MPI_Wait: the wait is the read's time, not communication;
    a wait that also completed a message stays communication). Made once per Frames."""
    if "file_io" not in f._arrays:
        names = file_io_calls(f.call_names)
        io = f.code_table(frozenset(names))[f.call_codes()]
        if io.any():  # event ids are row numbers here
            io[file_io_waits(f.events.lazy(), pl.col("call").is_in(names)).to_numpy()] = True
        io.flags.writeable = False
        f._arrays["file_io"] = io  # type: ignore[assignment]
    return f._arrays["file_io"]  # type: ignore[return-value]


def rank_times(f: Frames) -> pl.DataFrame:
    """Per rank: t_start_ns (leave of MPI_Init, else first entry), t_end_ns (entry of
    MPI_Finalize, else last leave), mpi_ns (wall time in calls other than ENV_CALLS, on any of
    its threads: busy.py), io_ns (the part of it in MPI-IO: file_io_rows) and app_ns, as stats.py counts
    them; null times for a rank without events."""
    enter, leave = f.column("t_enter_ns"), f.column("t_leave_ns")
    codes, rank = f.call_codes(), f.column("rank")
    bounds = np.searchsorted(rank, np.arange(f.ranks + 1))  # events are in rank order
    has = bounds[1:] > bounds[:-1]
    init, fin = f.code_table(INIT_CALLS)[codes], f.code_table(FINALIZE_CALLS)[codes]
    init_leave = np.full(f.ranks, np.iinfo(np.int64).max, np.int64)  # the first: a session may start again
    np.minimum.at(init_leave, rank[init], np.where(leave[init] >= 0, leave[init], np.iinfo(np.int64).max))
    init_leave[init_leave == np.iinfo(np.int64).max] = -1
    fin_enter = np.full(f.ranks, -1, np.int64)
    fin_enter[rank[fin][::-1]] = enter[fin][::-1]  # the first MPI_Finalize (MPI_Session_finalize) of each rank
    last_leave = np.full(f.ranks, -1, np.int64)
    if rank.size:
        last_leave[has] = np.maximum.reduceat(np.maximum(leave, enter), bounds[:-1][has])
    first_enter = enter[np.minimum(bounds[:-1], max(rank.size - 1, 0))] if rank.size else np.zeros(f.ranks, np.int64)
    start = np.where(init_leave >= 0, init_leave, first_enter)
    end = np.where(fin_enter >= 0, fin_enter, last_leave)
    # a folded polling loop's time inside its calls is counted from its entry (its calls' own times
    # are not kept)
    in_mpi = in_mpi_ns(f)
    mpi = union_by_rank(rank, enter, enter + in_mpi, f.ranks)
    io = file_io_rows(f)
    io_ns = (union_by_rank(rank, enter, enter + np.where(io, in_mpi, 0), f.ranks) if io.any()
             else np.zeros(f.ranks, np.int64))
    return pl.DataFrame({
        "rank": np.arange(f.ranks, dtype=np.int32), "t_start_ns": start, "t_end_ns": end,
        "mpi_ns": mpi, "io_ns": io_ns, "app_ns": np.where(has, np.maximum(end - start, 0), 0),
        "has": has,
    }).with_columns(pl.when(pl.col("has")).then(pl.col("t_start_ns", "t_end_ns"))).drop("has")
