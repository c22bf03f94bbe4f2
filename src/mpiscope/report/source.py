"""The trace's tables as the page sees them: relative times, codes instead of names.

Every time becomes float64 nanoseconds since the run's first event (t0), the
call an index into `calls` (the events table's Enum order), the call site an
index into `callsites`, null a sentinel (-1, or NaN for times), with the dtypes
of the event tiles of docs/report-protocol.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from mpiscope.analysis.stats import WINDOW_SIZE_CALLS
from mpiscope.errors import UsageError
from mpiscope.trace import Trace, no_calls

FAMILIES = ["p2p", "collective", "one-sided", "wait/test", "other", "file I/O"]
# The manifest's call families (calls.toml) -> the page's six; anything else is "other".
FAMILY_CODE = {"p2p": 0, "coll": 1, "nbc": 1, "pcoll": 1, "neighbor": 1, "rma": 2, "completion": 3, "io": 5}
OTHER = 4


@dataclass(frozen=True)
class Vocab:
    calls: list[str]
    call_family: np.ndarray  # u8, family code of each entry of calls
    callsites: list[str]


@dataclass(frozen=True)
class Columns:
    t0_ns: int
    span_ns: float
    ranks: int
    vocab: Vocab
    events: pl.DataFrame  # event-tile columns, in (rank, t0) order, plus `family` (u8)
    messages: pl.DataFrame  # message-tile columns
    colls: pl.DataFrame  # collective-instance columns


def call_vocab(trace: Trace) -> tuple[list[str], np.ndarray]:
    """The events table's call names (its Enum order: an event's call code) and their family codes."""
    dtype = trace.events().collect_schema()["call"]
    names = [str(c) for c in getattr(dtype, "categories", [])]
    family = {str(c["name"]): str(c.get("family", "")) for c in trace.manifest.get("calls", [])}
    codes = np.array([FAMILY_CODE.get(family.get(n, ""), OTHER) for n in names], np.uint8)
    return names, codes


def time_origin(trace: Trace) -> tuple[int, float]:
    """(t0_ns, span_ns): the first entry, and the last leave (or entry) after it; in a run stopped by a
    signal, the last stop (a hung run lasted until then, its blocked calls drawn to the end)."""
    row = (
        trace.events()
        .select(
            pl.col("t_enter_ns").min().alias("a"),
            pl.max_horizontal(pl.col("t_leave_ns").max(), pl.col("t_enter_ns").max()).alias("b"),
        )
        .collect()
    )
    if row["a"][0] is None:
        raise UsageError(no_calls(trace))
    t0, t1 = int(row["a"][0]), max([int(row["b"][0]), *trace.stopped_ns.values()])
    return t0, float(max(t1 - t0, 1))


def _rel(col: str, t0: int) -> pl.Expr:
    return (pl.col(col) - t0).cast(pl.Float64).fill_null(float("nan"))


def _code(col: str, dtype: Any) -> pl.Expr:
    return pl.col(col).fill_null(-1).cast(dtype)


def callsite_vocab(trace: Trace) -> tuple[pl.Series, list[str]]:
    """The Categorical call-site codes present and their labels; index 0 is "" (unknown),
    code j of the first list is label j + 1."""
    uniq = (
        trace.events()
        .select(pl.col("callsite").to_physical().alias("c"), pl.col("callsite").cast(pl.String).alias("s"))
        .drop_nulls("c")
        .group_by("c")
        .agg(pl.col("s").first())
        .collect()
        .sort("c")
    )
    return uniq["c"], [""] + [s or "" for s in uniq["s"].to_list()]


def vocab(trace: Trace) -> tuple[Vocab, pl.Series]:
    calls, call_family = call_vocab(trace)
    codes, callsites = callsite_vocab(trace)
    return Vocab(calls, call_family, callsites), codes


def event_frame(
    trace: Trace, t0: int, v: Vocab, site_codes: pl.Series, where: pl.Expr | None = None
) -> pl.LazyFrame:
    """Event-tile columns plus `family` (u8) and `rbytes` (f64: the bytes a collective call
    received, 0 where unknown), in the table's (rank, t_enter) order."""
    site = (
        pl.col("callsite")
        .to_physical()
        .replace_strict(
            site_codes,
            pl.Series(np.arange(1, site_codes.len() + 1, dtype=np.uint32)),
            default=0,
            return_dtype=pl.UInt32,
        )
    )
    call = pl.col("call").to_physical().cast(pl.UInt16)
    family = call.replace_strict(
        pl.Series(np.arange(len(v.calls), dtype=np.uint16)),
        pl.Series(v.call_family, dtype=pl.UInt8),
        default=OTHER,
        return_dtype=pl.UInt8,
    )
    events = (
        trace.events() if where is None else trace.events().filter(where)
    )  # where: on the table's columns
    # a window's creation holds the window's size, which no data crossed: no bytes in the density
    # (50 windows of 1 MiB drew 4 MiB per bin for a run that moved nothing)
    sized = [i for i, n in enumerate(v.calls) if n in WINDOW_SIZE_CALLS]
    return events.select(
        pl.col("rank").cast(pl.UInt32),
        pl.col("thread").cast(pl.UInt16),
        call,
        _rel("t_enter_ns", t0).alias("t0"),
        _rel("t_leave_ns", t0).alias("t1"),
        pl.when(call.is_in(sized)).then(0.0).otherwise(pl.col("bytes").cast(pl.Float64).fill_null(0.0)).alias("bytes"),
        pl.col("recv_bytes").cast(pl.Float64).fill_null(0.0).alias("rbytes"),
        _code("peer", pl.Int32),
        _code("tag", pl.Int32),
        _code("comm", pl.Int32),
        _code("root", pl.Int32),
        site,
        pl.col("event").cast(pl.Float64),
        pl.col("coll_id").fill_null(-1).cast(pl.Float64).alias("coll"),
        # a polling loop folded into one row: its calls and their time inside MPI (its span is the loop's)
        pl.col("count").fill_null(1).cast(pl.UInt32).alias("polls"),
        pl.col("inside_ns").cast(pl.Float64).fill_null(float("nan")).alias("inside"),
        family.alias("family"),
    )


def bin_columns(events: pl.LazyFrame) -> pl.LazyFrame:
    """Only what the bins and the per-family times need (a third of the event-tile columns):
    `pbytes` is the bytes counted at the call's entry (a collective's sent and received ones,
    a one-sided call's)."""
    return events.select(
        "rank",
        "family",
        "call",
        "t0",
        "t1",
        pl.when(pl.col("coll") >= 0)
        .then(pl.col("bytes") + pl.col("rbytes"))
        .when(pl.col("family") == 2)
        .then(pl.col("bytes"))
        .otherwise(0.0)
        .alias("pbytes"),
    )


def event_sites(events: pl.DataFrame | pl.LazyFrame) -> np.ndarray:
    """The call-site code of each event id (event id = row of the events table)."""
    df = events.lazy().select("event", "callsite").collect()
    ids = df["event"].to_numpy().astype(np.int64)
    sites = np.zeros(int(ids.max()) + 1 if ids.size else 0, np.uint32)
    sites[ids] = df["callsite"].to_numpy()
    return sites


def message_frame(trace: Trace, t0: int, event_sites: np.ndarray) -> pl.DataFrame:
    """Message-tile columns; both call sites looked up by event id (= row of the events table)."""
    m = (
        trace.messages()
        .select(
            pl.col("src").cast(pl.UInt32),
            pl.col("dst").cast(pl.UInt32),
            _rel("t_send_enter_ns", t0).alias("ts"),
            _rel("t_send_leave_ns", t0).alias("tsl"),
            _rel("t_recv_enter_ns", t0).alias("tr"),
            _rel("t_recv_leave_ns", t0).alias("trl"),
            pl.col("bytes").cast(pl.Float64).fill_null(0.0),
            _code("tag", pl.Int32),
            _code("comm", pl.Int32),
            pl.col("send_event"),
            pl.col("recv_event"),
        )
        .collect()
    )

    def site(ids: pl.Series) -> pl.Series:
        i = ids.fill_null(-1).to_numpy()
        ok = (i >= 0) & (i < event_sites.size)
        return pl.Series(ids.name, np.where(ok, event_sites[np.where(ok, i, 0)], 0), pl.UInt32)

    return m.with_columns(
        pl.col("send_event").cast(pl.Float64),
        pl.col("recv_event").cast(pl.Float64),
        site(m["send_event"]).alias("send_callsite"),
        site(m["recv_event"]).alias("recv_callsite"),
    )


def load_columns(trace: Trace) -> Columns:
    """Everything a report needs, in memory."""
    v, codes = vocab(trace)
    t0, span = time_origin(trace)
    events = event_frame(trace, t0, v, codes).collect()
    if not events["rank"].is_sorted():  # the merge writes (rank, t_enter) order; keep to it
        events = events.sort("rank", "t0", maintain_order=True)
    sites = event_sites(events)
    highest = events["rank"].max()
    ranks = max(trace.ranks, int(highest) + 1 if isinstance(highest, int) else 0)
    return Columns(t0, span, ranks, v, events, message_frame(trace, t0, sites), coll_frame(trace, t0))


def coll_frame(trace: Trace, t0: int) -> pl.DataFrame:
    return (
        trace.collectives()
        .select(
            pl.col("coll_id").cast(pl.Float64).alias("coll"),
            pl.col("call").to_physical().cast(pl.UInt16),
            _code("comm", pl.Int32),
            _code("root", pl.Int32),
            _rel("t_first_enter_ns", t0).alias("first_enter"),
            _rel("t_last_enter_ns", t0).alias("last_enter"),
            _rel("t_first_leave_ns", t0).alias("first_leave"),
            _rel("t_last_leave_ns", t0).alias("last_leave"),
            pl.col("ranks").cast(pl.UInt32),
        )
        .collect()
    )
