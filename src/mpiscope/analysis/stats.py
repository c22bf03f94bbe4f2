"""Exact per-rank, per-call, per-call-site and per-pair statistics (mpiP's views).

Application time per rank runs from the exit of MPI_Init to the entry of
MPI_Finalize (mpiP's convention); for a rank that never finalized, to its
last recorded event. MPI time is the time inside the other MPI calls: wall time, where several
threads of a rank were in MPI at once counted once (the per-call and per-call-site tables add
up each call's own time, and their shares are of that sum). Bytes: a message's once at its sender
and once at its receiver; a collective call's `bytes` as sent and `recv_bytes` as received
by its rank (events.parquet).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl

from mpiscope.analysis.busy import union_by_rank
from mpiscope.analysis.findings import fmt_s
from mpiscope.trace import (ENV_CALLS, FINALIZE_CALLS, INIT_CALLS, ONE_SIDED_GETS, ONE_SIDED_PUTS, START_CALLS, Trace,
                            file_io_calls, file_io_waits)
from mpiscope.trace.placement import oversubscribed

# One-sided operations by the way their origin's data goes (a call's `bytes` is its origin buffer):
# to the target (puts, accumulates, atomics), or from it (gets).
RMA_PUT_CALLS = [*ONE_SIDED_PUTS, *(n + "_c" for n in ONE_SIDED_PUTS)]
RMA_GET_CALLS = [*ONE_SIDED_GETS, *(n + "_c" for n in ONE_SIDED_GETS)]
# Receives whose row holds the buffer as posted (events.parquet's `bytes`), not the message that
# arrived, which the completing call's row holds: Quicksilver posted 123 GiB of MPI_Irecv buffers
# for 8.78 GiB of messages.
_POSTED = ("MPI_Irecv", "MPI_Imrecv", "MPI_Recv_init", "MPI_Precv_init")
POSTED_RECV_CALLS = [*_POSTED, *(n + "_c" for n in _POSTED)]
# Persistent sends: their row holds the buffer once, at init; the messages each start sends have no
# row of their own (the MPI_Start/MPI_Startall rows hold no point-to-point bytes): AMG's MPI_Startall
# started 3.5 MB of messages and showed 0 B.
_PERSISTENT_SENDS = ("MPI_Send_init", "MPI_Bsend_init", "MPI_Rsend_init", "MPI_Ssend_init", "MPI_Psend_init")
PERSISTENT_SEND_CALLS = [*_PERSISTENT_SENDS, *(n + "_c" for n in _PERSISTENT_SENDS)]
# Window creation: its row holds the window's size (IMB-EXT's Window benchmark: 504 KiB of them).
_WINDOW_SIZE = ("MPI_Win_create", "MPI_Win_allocate", "MPI_Win_allocate_shared", "MPI_Win_attach")
WINDOW_SIZE_CALLS = frozenset([*_WINDOW_SIZE, *(n + "_c" for n in _WINDOW_SIZE)])


@dataclass(frozen=True)
class Stats:
    run_id: str
    ranks: int
    per_rank: pl.DataFrame
    per_call: pl.DataFrame
    callsites: pl.DataFrame
    pairs: pl.DataFrame
    unmatched_sends: int
    unmatched_recvs: int
    truncated_ranks: list[int] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    bcast_mode: str = "library"
    bcast_swaps: list[dict[str, Any]] = field(default_factory=list)  # the adaptive broadcast's (SPEC §5)
    # what the merge dropped from damaged raw files (issue 21), by rank
    damage: dict[str, Any] = field(default_factory=dict)
    # hosts that ran more ranks than CPUs (trace/placement.py): their times include waiting for one
    oversubscribed: list[dict[str, Any]] = field(default_factory=list)

    @property
    def one_sided_columns(self) -> list[str]:
        """The per-rank one-sided byte columns, where the run moved data that way (else none): the
        views show them only then."""
        cols = ["rma_bytes_put", "rma_bytes_get"]
        moved = self.per_rank.height and self.per_rank.select(pl.sum_horizontal(cols)).to_series().sum()
        return cols if moved else []

    @property
    def file_io_columns(self) -> list[str]:
        """The per-rank MPI-IO columns, where the run called MPI-IO (else none): the views show them
        only then."""
        cols = ["io_time_ns", "io_bytes_read", "io_bytes_written"]
        return cols if self.per_rank.height and self.per_rank["io_time_ns"].sum() else []

    @property
    def posted_note(self) -> str:
        """What the bytes of the run's nonblocking receives and persistent sends are (sentences, or ""
        without any)."""
        calls = self.per_call["call"].to_list()
        posted = [c for c in calls if c in POSTED_RECV_CALLS]
        inits = [c for c in calls if c in PERSISTENT_SEND_CALLS]
        notes = []
        if posted:
            notes.append(f"{', '.join(posted)}: bytes of the buffers posted; the messages that arrived count at the "
                         f"calls that completed them (MPI_Wait*, MPI_Test*) and in the per-rank received bytes")
        if inits:
            notes.append(f"{', '.join(inits)}: bytes of the buffer, once per request; the messages each MPI_Start "
                         f"and MPI_Startall sent count in the per-rank sent bytes")
        windows = [c for c in calls if c in WINDOW_SIZE_CALLS]
        if windows:
            notes.append(f"{', '.join(windows)}: the size of the window, which no data crossed")
        return ". ".join(notes)

    @property
    def paused_note(self) -> str:
        """Where recording was paused (MPI_Pcontrol, run --paused): how long, and what that means for
        the tables ("" where it never was)."""
        if "paused_ns" not in self.per_rank.columns:
            return ""
        paused = self.per_rank.filter((pl.col("paused_ns") > 0) | pl.col("paused_open"))
        if not paused.height:
            return ""
        each = ", ".join(f"rank {r['rank']} {fmt_s(r['paused_ns'] / 1e9)}"
                         for r in paused.head(4).iter_rows(named=True)) + (", ..." if paused.height > 4 else "")
        note = (f"recording was paused (MPI_Pcontrol) for {each}: the MPI calls made then are not in the trace, "
                f"and that time counts as outside MPI")
        still = paused.filter("paused_open")["rank"].to_list()
        if still:
            note += (f"; {'ranks' if len(still) > 1 else 'rank'} {', '.join(map(str, still[:8]))} "
                     f"{'were' if len(still) > 1 else 'was'} still paused at the end: "
                     f"{'their' if len(still) > 1 else 'its'} time ends at the last MPI_Pcontrol")
        return note

    @property
    def unmatched_messages(self) -> int:
        return self.unmatched_sends + self.unmatched_recvs

    def to_json(self) -> dict[str, Any]:
        app = int(self.per_rank["app_time_ns"].sum())
        mpi = int(self.per_rank["mpi_time_ns"].sum())
        return {
            "schema": "mpiscope.stats/1",
            "run_id": self.run_id,
            "ranks": self.ranks,
            "app_time_ns": app,
            "mpi_time_ns": mpi,
            "mpi_pct": 100.0 * mpi / app if app else 0.0,
            "per_rank": self.per_rank.to_dicts(),
            "per_call": self.per_call.to_dicts(),
            "callsites": self.callsites.to_dicts(),
            "pairs": self.pairs.to_dicts(),
            "unmatched_messages": self.unmatched_messages,
            "unmatched_sends": self.unmatched_sends,
            "unmatched_recvs": self.unmatched_recvs,
            "truncated_ranks": self.truncated_ranks,
            "warnings": self.warnings,
            "bcast_mode": self.bcast_mode,
            "bcast_swaps": self.bcast_swaps,
            "oversubscribed": self.oversubscribed,
            "missing_ranks": self.damage.get("missing_ranks", {}),
            "dropped_blocks": self.damage.get("dropped_blocks", {}),
            "dropped_records": self.damage.get("dropped_records", {}),
            "damage": self.damage.get("damage", {}),
        }


# Calls that send and receive at once: their `bytes` are what they sent; what they received is their message's.
SENDRECV_CALLS = ("MPI_Sendrecv", "MPI_Sendrecv_c", "MPI_Sendrecv_replace", "MPI_Sendrecv_replace_c")


def _sendrecv_received(per_call: pl.DataFrame, trace: Trace, calls_in: Any) -> pl.DataFrame:
    """The per-call table's received bytes of send-receives, from the messages they received (the
    column was blank for them: a halo of MPI_Sendrecv showed what it sent only)."""
    present = [c for c in SENDRECV_CALLS if c in set(per_call["call"].to_list())]
    if not present:
        return per_call
    calls = trace.events().filter(calls_in(present)).select("event", pl.col("call").cast(pl.Utf8))
    got = (trace.messages().select("recv_event", "bytes").join(calls, left_on="recv_event", right_on="event")
           .group_by("call").agg(pl.col("bytes").sum().alias("got")).collect(engine="streaming"))
    return (per_call.join(got, on="call", how="left")
            .with_columns(pl.coalesce("got", "recv_bytes").alias("recv_bytes")).drop("got"))


def summarize(trace: Trace, top: int = 20) -> Stats:
    # Calls are compared by their Enum codes: casting 10 M call names to strings took most of the time.
    names = [str(c) for c in getattr(trace.events().collect_schema()["call"], "categories", [])]
    code = {n: i for i, n in enumerate(names)}

    def calls_in(wanted: list[str]) -> pl.Expr:
        return pl.col("call").to_physical().is_in([code[n] for n in wanted if n in code])

    # A folded polling loop (count > 1) is one row spanning its calls: its time in MPI is
    # inside_ns, and its longest call is taken as its mean one (the calls' own times are not kept).
    # A run stopped by a signal: a call that never returned lasted until its rank was stopped (a hung
    # MPI_Recv took the 4.5 s the run hung, not 0), and so did the rank.
    stopped = trace.stopped_ns
    ended = (pl.col("rank").replace_strict(stopped, default=None, return_dtype=pl.Int64) if stopped
             else pl.lit(None, pl.Int64))
    ev = trace.events().select(
        "event", "rank", "thread", "call", "t_enter_ns",
        pl.coalesce("t_leave_ns", ended).alias("t_leave_ns"), "bytes", "recv_bytes", "coll_id", "callsite",
        "count", "inside_ns", "completed_by").with_columns(
        pl.coalesce("inside_ns", pl.col("t_leave_ns") - pl.col("t_enter_ns")).alias("dur_ns"),
        calls_in(list(ENV_CALLS)).alias("env")).with_columns((pl.col("dur_ns") / pl.col("count")).alias("per_call_ns"))
    msgs = trace.messages().select("src", "dst", "bytes")
    collective = pl.col("coll_id").is_not_null() | calls_in(list(START_CALLS))
    span = ev.group_by("rank").agg(
        pl.col("t_leave_ns").filter(calls_in(list(INIT_CALLS))).min().alias("t_start"),
        pl.col("t_enter_ns").filter(calls_in(list(FINALIZE_CALLS))).min().alias("t_fin"),
        pl.col("t_enter_ns").min().alias("t_first"),
        pl.max_horizontal(pl.col("t_leave_ns").max(), ended.max()).alias("t_last"),  # stopped outside MPI
        pl.col("dur_ns").filter(~pl.col("env")).sum().alias("mpi_time_ns"),
        pl.col("dur_ns").filter(calls_in(file_io_calls(names))).sum().alias("io_time_ns"),  # in mpi_time_ns
        pl.col("bytes").filter(calls_in(file_io_calls(names, "read"))).sum().alias("io_bytes_read"),
        pl.col("bytes").filter(calls_in(file_io_calls(names, "write"))).sum().alias("io_bytes_written"),
        pl.col("count").filter(~pl.col("env")).sum().alias("calls"),  # as the per-call table counts them
        # a Startall of several persistent collectives has no coll_id but their bytes (merge.py)
        pl.col("bytes").filter(collective).sum().alias("collective_bytes_sent"),
        # recv_bytes: what each collective call received (null in traces that did not record it)
        pl.col("recv_bytes").filter(collective).sum().alias("collective_bytes_received"),
        pl.col("bytes").filter(calls_in(RMA_PUT_CALLS)).sum().alias("rma_bytes_put"),
        pl.col("bytes").filter(calls_in(RMA_GET_CALLS)).sum().alias("rma_bytes_get"),
        calls_in(["MPI_Pcontrol"]).sum().alias("pcontrols"),  # _paused scans again only where there are any
    )
    sent = msgs.group_by(pl.col("src").alias("rank")).agg(
        pl.len().alias("messages_sent"), pl.col("bytes").sum().alias("bytes_sent"))
    recv = msgs.group_by(pl.col("dst").alias("rank")).agg(
        pl.len().alias("messages_received"), pl.col("bytes").sum().alias("bytes_received"))
    # distinct values counted as groups: Polars' streaming n_unique in a group-by holds every value
    # (1,000 M events: killed at 24 GB), a group per (rank, thread) is one row
    threads = (ev.filter(~pl.col("env")).group_by("rank", "thread").agg()
               .group_by("rank").agg(pl.len().cast(pl.UInt32).alias("threads")))
    per_rank_q = (
        span.join(threads, on="rank", how="left").join(sent, on="rank", how="left").join(recv, on="rank", how="left")
        .with_columns(
            (pl.coalesce("t_fin", "t_last") - pl.coalesce("t_start", "t_first")).alias("app_time_ns"))
        .with_columns((pl.col("app_time_ns") - pl.col("mpi_time_ns")).clip(lower_bound=0).alias("outside_mpi_ns"),
                      _mpi_pct())
        .select("rank", "app_time_ns", "mpi_time_ns", "io_time_ns", "io_bytes_read", "io_bytes_written",
                "outside_mpi_ns", "mpi_pct", "calls",
                pl.col("threads").fill_null(0),
                *[pl.col(c).fill_null(0) for c in ("messages_sent", "bytes_sent", "messages_received",
                                                   "bytes_received", "collective_bytes_sent",
                                                   "collective_bytes_received", "rma_bytes_put",
                                                   "rma_bytes_get", "pcontrols")])
        .sort("rank")
    )
    mpi_calls = ev.filter(~pl.col("env"))
    per_call_q = (
        mpi_calls.group_by("call")
        .agg(pl.col("count").sum().alias("count"), pl.col("dur_ns").sum().alias("total_ns"),
             (pl.col("dur_ns").sum() / pl.col("count").sum()).alias("mean_ns"),
             pl.col("per_call_ns").max().alias("max_ns"),
             pl.col("bytes").sum().alias("bytes"), (pl.col("bytes").sum() / pl.col("count").sum()).alias("mean_bytes"),
             pl.col("recv_bytes").sum().alias("recv_bytes"))
        .with_columns(pl.col("call").cast(pl.Utf8))
        .sort(["total_ns", "call"], descending=[True, False])  # ties in a fixed order, run after run
    )
    callsites_q = (
        mpi_calls.group_by("call", "callsite", "rank")
        .agg(pl.col("count").sum(), pl.col("dur_ns").sum(), pl.col("per_call_ns").max(), pl.col("bytes").sum())
        .group_by("call", "callsite")
        .agg(pl.col("count").sum().alias("count"), pl.len().cast(pl.UInt32).alias("ranks"),
             pl.col("dur_ns").sum().alias("total_ns"), (pl.col("dur_ns").sum() / pl.col("count").sum()).alias("mean_ns"),
             pl.col("per_call_ns").max().alias("max_ns"), pl.col("bytes").sum().alias("bytes"))
        .with_columns(pl.col("call").cast(pl.Utf8))
        .sort([pl.col("total_ns"), pl.col("call"), pl.col("callsite").cast(pl.Utf8)],
              descending=[True, False, False], nulls_last=True).head(top)
    )
    pairs_q = (
        msgs.group_by("src", "dst").agg(pl.len().alias("messages"), pl.col("bytes").sum().alias("bytes"))
        .sort(["bytes", "messages", "src", "dst"], descending=[True, True, False, False]).head(top)
    )
    # streaming: a table of any size is aggregated in bounded memory (issue 22); a scan shared by
    # the queries would be held in memory whole (10 M events: 0.67 instead of 0.24 GB)
    per_rank, per_call, callsites, pairs = pl.collect_all(
        [per_rank_q, per_call_q, callsites_q, pairs_q], engine="streaming",
        optimizations=pl.QueryOptFlags(comm_subplan_elim=False))
    per_rank = _paused(_every_rank(_threads_in_mpi_once(per_rank, ev), trace.ranks), trace, calls_in)
    if per_rank["io_time_ns"].sum():
        per_rank = _waits_for_file_io(per_rank, ev, calls_in, names)
    per_call = _sendrecv_received(per_call, trace, calls_in)
    # shares of the calls' time (threads of one rank in MPI at once each count theirs)
    mpi_total = max(int(per_call["total_ns"].sum()), 1)
    pct = (100.0 * pl.col("total_ns") / mpi_total).alias("pct_mpi")
    per_call, callsites = per_call.with_columns(pct), callsites.with_columns(pct)
    counts = trace.manifest.get("counts", {})
    return Stats(
        run_id=str(trace.manifest.get("run_id", "")), ranks=trace.ranks, per_rank=per_rank,
        per_call=per_call, callsites=callsites, pairs=pairs,
        unmatched_sends=int(counts.get("unmatched_sends", 0)),
        unmatched_recvs=int(counts.get("unmatched_recvs", 0)),
        truncated_ranks=list(trace.manifest.get("truncated_ranks", [])),
        warnings=list(trace.manifest.get("warnings", [])),
        bcast_mode=str(trace.manifest.get("bcast", {}).get("mode", "library")),
        bcast_swaps=list(trace.manifest.get("bcast", {}).get("swaps", [])),
        damage={key: trace.manifest.get(key, {}) for key in ("missing_ranks", "dropped_blocks", "dropped_records",
                                                              "damage")},
        oversubscribed=[{"host": c.host, "ranks": len(c.ranks), "cpus": c.cpus, "threads": c.threads}
                        for c in oversubscribed(trace.manifest, dict(zip(per_rank["rank"].to_list(),
                                                                         per_rank["threads"].fill_null(1).to_list())))],
    )


def _paused(per_rank: pl.DataFrame, trace: Trace, calls_in: Callable[[list[str]], pl.Expr]) -> pl.DataFrame:
    """paused_ns: a rank's time with recording paused (from MPI_Pcontrol(0), or from MPI_Init under
    `run --paused`, to the next MPI_Pcontrol(1)); its MPI calls then are not in the trace, so that time
    counts as outside MPI, which the table must say (miniFE's paused set-up read as computation).
    A rank paused at its end has paused_open set: its time ends at its last MPI_Pcontrol."""
    pcontrols = int(per_rank["pcontrols"].sum() or 0)
    per_rank = per_rank.drop("pcontrols")
    if not pcontrols and not trace.manifest.get("started_paused"):  # no scan of the calls then
        return per_rank.with_columns(pl.lit(0, pl.Int64).alias("paused_ns"), pl.lit(False).alias("paused_open"))
    rows = (trace.events().filter(calls_in(["MPI_Pcontrol", *INIT_CALLS]))
            .select("rank", "t_enter_ns", "t_leave_ns", "tag", pl.col("call").cast(pl.Utf8))
            .sort("rank", "t_enter_ns").collect(engine="streaming"))
    paused, still = {}, {}
    for (rank,), r in rows.partition_by("rank", as_dict=True).items():
        since = None
        total = 0
        for call, enter, leave, level in r.select("call", "t_enter_ns", "t_leave_ns", "tag").iter_rows():
            if call != "MPI_Pcontrol":
                since = leave if trace.manifest.get("started_paused") else None
            elif level == 0 and since is None:
                since = leave
            elif level != 0 and since is not None:
                total += max(enter - since, 0)
                since = None
        paused[rank], still[rank] = total, since is not None
    return per_rank.with_columns(
        pl.col("rank").replace_strict(paused, default=0, return_dtype=pl.Int64).alias("paused_ns"),
        pl.col("rank").replace_strict(still, default=False, return_dtype=pl.Boolean).alias("paused_open"))


def _mpi_pct() -> pl.Expr:
    """Time in MPI as a share of the application time; null where a rank has none (it died in MPI_Init)."""
    return (pl.when(pl.col("app_time_ns") > 0).then(100.0 * pl.col("mpi_time_ns") / pl.col("app_time_ns"))
            .alias("mpi_pct"))


def _every_rank(per_rank: pl.DataFrame, ranks: int) -> pl.DataFrame:
    """A row for each rank of the run, also one that recorded no event (killed before its MPI_Init
    returned): its counts 0, its times null, rather than a rank missing from the table."""
    if per_rank.height >= ranks:
        return per_rank
    every = pl.DataFrame({"rank": pl.Series(range(ranks), dtype=per_rank.schema["rank"])})
    counts = [c for c, t in per_rank.schema.items() if c != "rank" and not c.endswith("_ns") and c != "mpi_pct"]
    return every.join(per_rank, on="rank", how="left").with_columns(pl.col(counts).fill_null(0))


def _waits_for_file_io(per_rank: pl.DataFrame, ev: pl.LazyFrame, calls_in: Callable[[list[str]], pl.Expr],
                       names: list[str]) -> pl.DataFrame:
    """io_time_ns with the time of the waits and tests that completed nonblocking file accesses
    and nothing else (file_io_waits), as the diagnosis counts it. Only for a trace with MPI-IO."""
    only_io = file_io_waits(ev, calls_in(file_io_calls(names)))
    if not only_io.len():
        return per_rank
    waited = (ev.filter(pl.col("event").is_in(only_io.implode())).group_by("rank")
              .agg(pl.col("dur_ns").sum().alias("waited")).collect(engine="streaming"))
    return per_rank.join(waited, on="rank", how="left").with_columns(
        (pl.col("io_time_ns") + pl.col("waited").fill_null(0)).alias("io_time_ns")).drop("waited")


def _threads_in_mpi_once(per_rank: pl.DataFrame, ev: pl.LazyFrame) -> pl.DataFrame:
    """A rank's MPI time as wall time: where several of its threads called MPI, the union of their
    calls (busy.py) rather than their sum, which counts the moments they were in MPI together twice
    (a rank can not spend more than its time in MPI). One rank at a time: memory stays bounded by
    the largest rank's calls; the scan reads only its row groups."""
    threaded = per_rank.filter(pl.col("threads") > 1)["rank"].to_list()
    if not threaded:
        return per_rank
    union = {}
    for rank in threaded:
        rows = ev.filter((pl.col("rank") == rank) & ~pl.col("env") & pl.col("dur_ns").is_not_null()).select(
            "t_enter_ns", (pl.col("t_enter_ns") + pl.col("dur_ns")).alias("end")).collect()
        enter = rows["t_enter_ns"].to_numpy()
        union[rank] = int(union_by_rank(np.zeros(enter.size, np.int64), enter, rows["end"].to_numpy(), 1)[0])
    mpi = pl.col("rank").replace_strict(union, default=pl.col("mpi_time_ns"), return_dtype=pl.Int64)
    return per_rank.with_columns(mpi.alias("mpi_time_ns")).with_columns(
        (pl.col("app_time_ns") - pl.col("mpi_time_ns")).clip(lower_bound=0).alias("outside_mpi_ns"),
        _mpi_pct())
