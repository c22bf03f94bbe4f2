"""What the exporters read from a trace, a few ranks at a time (events are stored in
(rank, t_enter) order, messages in time order): memory follows the longest ranks, not the
trace. Whole-trace summaries go through Polars' streaming engine."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import polars as pl

from mpiscope.trace import START_CALLS, Trace

EVENT_COLUMNS = [
    "event",
    "rank",
    "thread",
    "call",
    "t_enter_ns",
    "t_leave_ns",
    "comm",
    "peer",
    "tag",
    "bytes",
    "root",
    "request",
    "t_complete_ns",
    "completed_by",
    "coll_id",
    "callsite",
    "recv_bytes",  # collectives' received bytes, in traces that record them (issue 20, item 1)
]


@dataclass(frozen=True)
class Calls:
    """The call table of the trace (manifest), by name: role and family."""

    role: dict[str, str]
    family: dict[str, str]

    @classmethod
    def of(cls, trace: Trace) -> Calls:
        calls: list[dict[str, Any]] = list(trace.manifest.get("calls", []))
        return cls(
            {c["name"]: str(c.get("role", "")) for c in calls},
            {c["name"]: str(c.get("family", "")) for c in calls},
        )

    def names(self, *roles: str) -> list[str]:
        return [n for n, r in self.role.items() if r in roles]


def as_int(value: object) -> int:
    """A Polars scalar (min, max, sum) as an int; 0 for an empty column's null."""
    return int(value) if isinstance(value, (int, float)) else 0


def rank_spans(trace: Trace) -> pl.DataFrame:
    """(rank, first event id, events) per rank, in rank order."""
    return (
        trace.events()
        .group_by("rank")
        .agg(pl.col("event").min().alias("first"), pl.len().alias("events"))
        .sort("rank")
        .collect(engine="streaming")
    )


def thread_spans(trace: Trace) -> pl.DataFrame:
    """(rank, thread, n calls, t0 first entry, t1 last exit) per location; the streaming
    engine reads the whole events table in pieces, so memory does not follow its length."""
    return (
        trace.events()
        .group_by("rank", "thread")
        .agg(
            pl.len().alias("n"),
            pl.col("t_enter_ns").min().alias("t0"),
            pl.col("t_leave_ns").max().alias("t1"),
        )
        .sort("rank", "thread")
        .collect(engine="streaming")
    )


def calls_present(trace: Trace) -> list[str]:
    return [
        str(c)
        for c in trace.events()
        .select(pl.col("call").cast(pl.Utf8).unique())
        .collect(engine="streaming")
        .to_series()
        .to_list()
    ]


def rank_events(trace: Trace, rank: int | list[int]) -> pl.DataFrame:
    """The calls of one rank (or of a few), with `call_code`: the call's index in call_names()."""
    schema = trace.events().collect_schema()
    cols = [c for c in EVENT_COLUMNS if c in schema.names()]
    call = pl.col("call")
    if not isinstance(schema["call"], pl.Enum):  # the tables make it an Enum; anything else gets one
        call = call.cast(pl.Utf8).cast(pl.Enum(call_names(trace)))
    which = pl.col("rank").is_in(rank) if isinstance(rank, list) else pl.col("rank") == rank
    ev = trace.events().filter(which).select(cols).collect()
    # An unfinished call (rank killed inside it) ends where it began.
    return ev.with_columns(
        pl.col("t_leave_ns").fill_null(pl.col("t_enter_ns")),
        call.to_physical().cast(pl.Int64).alias("call_code"),
        pl.col("call").cast(pl.Utf8),
    )


def call_names(trace: Trace) -> list[str]:
    """Call names by `call_code` (the events' call column is an Enum of the call table)."""
    dtype = trace.events().collect_schema()["call"]
    if isinstance(dtype, pl.Enum):
        return [str(c) for c in dtype.categories]
    return sorted(calls_present(trace))


def group_messages(trace: Trace, ranks: list[int]) -> pl.DataFrame:
    """Messages sent or received by `ranks`, with their row number (message id): read once for
    a group of ranks, since the table is in time order and every rank's messages are spread
    over all of it."""
    m = trace.messages().with_row_index("msg").filter(pl.col("src").is_in(ranks) | pl.col("dst").is_in(ranks))
    if "recv_bytes" not in m.collect_schema().names():
        m = m.with_columns(pl.col("bytes").alias("recv_bytes"))
    # streaming: the row index makes every row group read, and the in-memory engine would hold
    # the whole table before filtering it (16.7 M messages: 1.9 GB; streaming 0.75 GB, any size)
    return m.collect(engine="streaming")


@dataclass(frozen=True)
class RankData:
    """What an exporter reads for one rank: its calls, and the messages of its batch."""

    rank: int
    events: pl.DataFrame
    messages: pl.DataFrame


ROWS_PER_BATCH = 262_144  # calls read at once: several short ranks, or one long rank
# Calls whose ranks' messages are read at once (one rank at least): a read decodes the whole
# (time-ordered) messages table, ~0.14 s CPU for 1.7 M messages, so ranks share it; their
# messages take ~50 MB per million calls (MESSAGE_BYTES_PER_CALL with a margin). A batch of
# 1 M calls read the 16.7 M messages of 66.7 M calls 64 times (64 of an OTF2 export's 91 s).
MESSAGE_BATCH = 8_388_608
MESSAGE_BYTES_PER_CALL = 60


def _batches(ranks: list[int], sizes: dict[int, int], limit: int) -> list[list[int]]:
    """Consecutive ranks in batches of at most `limit` calls, one rank at least."""
    out: list[list[int]] = []
    total = 0
    for rank in ranks:
        n = sizes.get(rank, 0)
        if not out or total + n > limit:
            out.append([])
            total = 0
        out[-1].append(rank)
        total += n
    return out


def iter_rank_data(trace: Trace, ranks: list[int]) -> Iterator[RankData]:
    """RankData for each rank: its calls read once per batch of ranks of about ROWS_PER_BATCH
    calls (one rank at least), since short ranks share Parquet row groups; the messages once
    per batch of about MESSAGE_BATCH calls, since a rank's messages are spread over the whole
    table. Memory holds a batch at a time, whatever the trace's length."""
    sizes = dict(
        trace.events()
        .filter(pl.col("rank").is_in(ranks))
        .group_by("rank")
        .len()
        .collect(engine="streaming")
        .iter_rows()
    )
    for outer in _batches(ranks, sizes, MESSAGE_BATCH):
        messages = group_messages(trace, outer)
        for batch in _batches(outer, sizes, ROWS_PER_BATCH):
            events = rank_events(trace, batch)
            by_rank = events.partition_by("rank", as_dict=True)
            for r in batch:
                yield RankData(r, by_rank.get((r,), events.clear()), messages)


def rank_messages(
    trace: Trace, rank: int, group: pl.DataFrame | None = None
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Messages this rank sent and received (from its group's, when given)."""
    m = group_messages(trace, [rank]) if group is None else group
    return m.filter(pl.col("src") == rank), m.filter(pl.col("dst") == rank)


def with_recv_bytes(trace: Trace, ev: pl.LazyFrame) -> pl.LazyFrame:
    """`ev` with `recv_bytes`: what each collective call received. The events' own column when
    the trace records it (raw format 4 on); before that, what the tables tell: a broadcast's
    non-root receives the root's bytes of its instance, every other call 0."""
    if trace.manifest.get("recv_bytes_recorded") and "recv_bytes" in ev.collect_schema().names():
        return ev.with_columns(pl.col("recv_bytes").fill_null(0))
    ids = ev.filter(pl.col("coll_id").is_not_null()).select("coll_id").unique()
    inst = (
        trace.collectives()
        .join(ids, on="coll_id", how="semi")
        .select("coll_id", pl.col("bytes").alias("_inst_bytes"))
    )
    is_bcast = pl.col("call").str.contains(r"^MPI_I?[Bb]cast")
    return (
        ev.join(inst, on="coll_id", how="left", maintain_order="left")
        .with_columns(
            pl.when(is_bcast & pl.col("root").is_not_null() & (pl.col("rank") != pl.col("root")))
            .then(pl.col("_inst_bytes"))
            .otherwise(0)
            .fill_null(0)
            .alias("recv_bytes")
        )
        .drop("_inst_bytes")
    )


def with_instance_calls(trace: Trace, coll: pl.DataFrame) -> pl.DataFrame:
    """Collective rows (coll_id, call_code) with the call_code of the call that names their
    collective: a persistent collective's MPI_Start(all) is its *_init call, whose operation
    regions.collective_op knows (MPI_Allreduce_init: an allreduce)."""
    names = call_names(trace)
    starts = [names.index(n) for n in START_CALLS if n in names]
    return trace.with_init_calls(coll, "call_code", pl.col("call_code").is_in(starts),
                                 {n: i for i, n in enumerate(names)}, pl.Int64)


def iter_ranks(trace: Trace) -> Iterator[tuple[int, int]]:
    """(rank, events) in rank order."""
    for row in rank_spans(trace).iter_rows(named=True):
        yield int(row["rank"]), int(row["events"])
