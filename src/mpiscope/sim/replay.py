"""Action lists for the SMPI replay program (native/sim/replay.cpp).

A recorded trace becomes, per rank and in the rank's order of calls: the gaps
between MPI calls as computation, each matched message as an Isend on the
sender and an Irecv on the receiver posted by the call that posted it in the
trace and waited for by the call that completed it, and each collective as
the same collective on the same communicator with the bytes each rank
passed. A pattern becomes the same kind of list with no computation.

What a trace does not say is chosen as follows (and reported as notes):
a nonblocking operation whose completing call was not recorded completes at
the rank's next MPI_Wait* call; per-peer sizes of alltoallv/w, scatterv and
reduce_scatter are split evenly; one-sided and neighbourhood calls, messages
that were never matched, and collectives on inter-communicators are not
replayed.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

from mpiscope.errors import SimError
from mpiscope.machine import require_memory
from mpiscope.mapping.patterns import Pattern
from mpiscope.trace import (FILE_IO_PREFIX, FINALIZE_CALLS, INIT_CALLS, START_CALLS, Trace, file_io_waits,
                            no_calls)

MAX_TAG = 32768           # the MPI standard's smallest allowed MPI_TAG_UB
MAX_COMMS = 4096          # MAX_COMMS in replay.cpp
MAX_BYTES = 2**31 - 1     # replay.cpp passes byte counts as int
# The actions of a trace, as text lines, with the frames they come from: 0.67 M events of a
# generated halo peaked at 0.51 GB, 2.67 M at 1.26 GB (375 bytes an event above the base).
REPLAY_BYTES_PER_EVENT = 400

# Calls that post a message or collective and return before it completes (a message matched by
# MPI_Improbe completes at the MPI_Imrecv's wait).
NONBLOCKING = ["MPI_Isend", "MPI_Ibsend", "MPI_Issend", "MPI_Irsend", "MPI_Irecv", "MPI_Imrecv",
               "MPI_Improbe", "MPI_Start", "MPI_Startall"]
WAITS = ["MPI_Wait", "MPI_Waitall", "MPI_Waitany", "MPI_Waitsome"]
# Trace call -> replay.cpp operation.
COLLECTIVES = {
    "MPI_Barrier": "barrier", "MPI_Bcast": "bcast", "MPI_Reduce": "reduce", "MPI_Allreduce": "allreduce",
    "MPI_Scan": "scan", "MPI_Exscan": "exscan", "MPI_Gather": "gatherv", "MPI_Gatherv": "gatherv",
    "MPI_Scatter": "scatter", "MPI_Scatterv": "scatter", "MPI_Allgather": "allgatherv",
    "MPI_Allgatherv": "allgatherv", "MPI_Alltoall": "alltoallv", "MPI_Alltoallv": "alltoallv",
    "MPI_Alltoallw": "alltoallv", "MPI_Reduce_scatter": "reduce_scatter",
    "MPI_Reduce_scatter_block": "reduce_scatter",
}
# A persistent collective replays as its nonblocking form: MPI_Allreduce_init(_c) -> MPI_Iallreduce
AS_NONBLOCKING = {k + "_init" + c: "MPI_I" + k[4:].lower() for k in COLLECTIVES for c in ("", "_c")}
LARGE_COUNT = r"_c$"  # MPI-4's large-count variants: the recorder names them so (wrapgen/gen.py)
COLLECTIVES.update({"MPI_I" + k[4:].lower(): v for k, v in COLLECTIVES.items()})
NONBLOCKING += [k for k in COLLECTIVES if k.startswith("MPI_I")]
# One-sided communication: the operations and every MPI_Win_* call (creation, fences, locks, PSCW).
_RMA_OPS = ("MPI_Put", "MPI_Get", "MPI_Accumulate", "MPI_Get_accumulate", "MPI_Fetch_and_op",
            "MPI_Compare_and_swap", "MPI_Rput", "MPI_Rget", "MPI_Raccumulate", "MPI_Rget_accumulate")
NOT_REPLAYED = pl.col("call").is_in(_RMA_OPS) | pl.col("call").str.starts_with("MPI_Win_")
NEIGHBOURHOOD = pl.col("call").str.contains("eighbor_")  # MPI_Neighbor_*, MPI_Ineighbor_*, *_init



@dataclass(frozen=True)
class Actions:
    """Per-rank action lines (rank, key, sub, text) in replay order, and what else replay.cpp needs."""

    nranks: int
    lines: pl.DataFrame
    comms: list[str]
    messages: int
    bytes: int
    notes: tuple[str, ...] = ()

    def write(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "comms.txt").write_text("".join(line + "\n" for line in self.comms))
        buf = max(int(self.lines.select(pl.col("buffer").max()).item() or 0), 1)
        per_rank = {int(k[0]): part for k, part in self.lines.partition_by("rank", as_dict=True).items()}
        for rank in range(self.nranks):
            part = per_rank.get(rank)
            slots = int(part.select(pl.col("slot").max()).item() or 0) + 1 if part is not None else 0
            body = "\n".join(part["text"].to_list()) + "\n" if part is not None else ""
            (directory / f"{rank}.txt").write_text(f"slots {slots} sendbytes {buf} recvbytes {buf}\n{body}")


def _posts_and_waits(posts: pl.DataFrame) -> pl.DataFrame:
    """Number the posted requests per rank (slots) and add one MPI_Waitall line per completing call.

    `posts` has rank, key (posting call), sub, done (completing call), text_head, text_tail: the line
    is text_head + slot + text_tail.
    """
    posts = posts.sort("rank", "key", "sub", "order").with_columns(
        slot=pl.int_range(pl.len(), dtype=pl.Int64).over("rank"))
    post_lines = posts.select("rank", "key", "sub", "slot", "buffer",
                              text=pl.format("{}{}{}", "text_head", "slot", "text_tail"))
    waits = (posts.group_by("rank", "done").agg(pl.col("slot").sort())
             .select("rank", key=pl.col("done"), sub=pl.lit(3, pl.Int8), slot=pl.col("slot").list.max(),
                     buffer=pl.lit(0, pl.Int64),
                     text=pl.format("w {} {}", pl.col("slot").list.len(),
                                    pl.col("slot").list.eval(pl.element().cast(pl.Utf8)).list.join(" "))))
    return pl.concat([post_lines, waits])


def _message_posts(m: pl.DataFrame) -> pl.DataFrame:
    """Isend on the sender, Irecv on the receiver; m has src, dst, bytes, tag, send/recv keys and dones."""
    sends = _post_columns(m, "src", "send_key", 1, "send_done", "seq", "bytes", pl.lit("s "),
                          pl.format(" {} {} {}", "dst", "tag", "bytes"))
    recvs = _post_columns(m, "dst", "recv_key", 1, "recv_done", "seq", "bytes", pl.lit("r "),
                          pl.format(" {} {} {}", "src", "tag", "bytes"))
    return pl.concat([sends, recvs])


def _post_columns(df: pl.DataFrame, rank: str, key: str, sub: int, done: str, order: str, buffer: str,
                  head: pl.Expr, tail: pl.Expr) -> pl.DataFrame:
    """The columns every posted request has, in one order and type (see _posts_and_waits)."""
    return df.select(rank=pl.col(rank).cast(pl.Int32), key=pl.col(key).cast(pl.Int64),
                     sub=pl.lit(sub, pl.Int8), done=pl.col(done).cast(pl.Int64),
                     order=pl.col(order).cast(pl.Int64),
                     buffer=pl.col(buffer).cast(pl.Int64), text_head=head, text_tail=tail)


def _channel_tags(m: pl.DataFrame, order: str) -> pl.DataFrame:
    """A tag unique within each (src, dst) channel: messages then match exactly as recorded."""
    return m.with_columns(seq=pl.int_range(pl.len(), dtype=pl.Int64)).with_columns(
        tag=(pl.int_range(pl.len(), dtype=pl.Int64).over(["src", "dst"], order_by=order) % MAX_TAG))


def pattern_actions(pattern: Pattern, steps: bool) -> Actions:
    """All messages posted at once and waited for together (one-step), or step after step."""
    step = np.asarray(pattern.step, dtype=np.int64) if steps else np.zeros(len(pattern.src), dtype=np.int64)
    m = pl.DataFrame({"src": np.asarray(pattern.src, dtype=np.int32),
                      "dst": np.asarray(pattern.dst, dtype=np.int32),
                      "bytes": np.asarray(pattern.bytes, dtype=np.int64), "step": step})
    _check_sizes(m)
    # Each step posts at key 2k and waits at 2k+1.
    post, done = 2 * pl.col("step"), 2 * pl.col("step") + 1
    m = _channel_tags(m, "step").with_columns(send_key=post, recv_key=post, send_done=done, recv_done=done)
    lines = _posts_and_waits(_message_posts(m)).sort("rank", "key", "sub", "slot")
    return Actions(pattern.nranks, lines, [], m.height, int(m["bytes"].sum()))


def _check_sizes(m: pl.DataFrame, what: str = "messages", cure: str = "simulate this pattern through S4U "
                 "(without --smpi)") -> None:
    big = m.filter(pl.col("bytes") > MAX_BYTES)
    if big.height:
        raise SimError(f"{big.height} {what} exceed {MAX_BYTES} bytes, which the SMPI replay cannot post; {cure}")


# a trace replays through SMPI only: nothing else can post its messages and collectives
TRACE_TOO_BIG = "a trace replays through SMPI only: record the run with smaller messages to simulate it"


def trace_actions(trace: Trace, ref_flops: float = 1e9) -> Actions:
    """The trace as replay actions; compute gaps become ref_flops per second of recorded time."""
    require_memory("the replay", trace.event_count, REPLAY_BYTES_PER_EVENT, trace.path)
    ev = trace.events().select("event", "rank", "thread", pl.col("call").cast(pl.Utf8), "t_enter_ns", "t_leave_ns",
                               "comm", "root", "bytes", "coll_id", "completed_by", "inside_ns").collect()
    if not ev.height:
        raise SimError(no_calls(trace))
    _one_thread_per_rank(ev, trace)
    # A large-count variant (MPI_Isend_c, MPI_Bcast_c: every call of mpi4py 4) replays as its call: named
    # so, a nonblocking one replayed as blocking and deadlocked, and collectives were left out unsaid.
    ev = ev.with_columns(pl.col("call").str.replace(LARGE_COUNT, ""))
    ev = _persistent_as_nonblocking(trace, ev.drop("thread").sort("rank", "event"))
    notes: list[str] = []
    # File I/O is not simulated: an MPI-IO call's time stays in the gap around it, local time of its rank,
    # and so does that of a wait or test that completed nonblocking file accesses only
    io = pl.col("call").str.starts_with(FILE_IO_PREFIX)
    n_io = ev.filter(io).height
    if n_io:
        waits = file_io_waits(ev.lazy(), io)
        ev = ev.filter(~io & ~pl.col("event").is_in(waits.implode()))
        notes.append(f"{n_io} MPI-IO calls" + (f" and {waits.len()} waits for them" if waits.len() else "")
                     + " are replayed as the time they took, as computation of their rank (file I/O is not "
                       "simulated)")
    # Time outside MPI before each call: the rank's computation (threads overlap: use the latest exit).
    # A polling loop folded into one row (inside_ns: its time inside its calls) computed for the rest
    # of its span: replayed as computation before the call, then its completion (stats counts that
    # time as computation too; the replay lost it: AMG's ranks ran 1.16 s outside MPI, 0.37 s simulated).
    before = pl.col("t_enter_ns") - pl.col("t_leave_ns").cum_max().shift(1).over("rank")
    in_loop = pl.col("t_leave_ns") - pl.col("t_enter_ns") - pl.col("inside_ns")
    local = (pl.when(before > 0).then(before).otherwise(0)
             + pl.when(in_loop > 0).then(in_loop).otherwise(0))
    gaps = (ev.with_columns(local=local).filter(pl.col("local") > 0)
            .select("rank", key=pl.col("event"), sub=pl.lit(0, pl.Int8), slot=pl.lit(None, pl.Int64),
                    buffer=pl.lit(0, pl.Int64), text=pl.format("c {}", pl.col("local") * (ref_flops * 1e-9))))
    done = _completions(ev)
    m = trace.messages().select("src", "dst", "bytes", "send_event", "recv_event").collect()
    _check_sizes(m, cure=TRACE_TOO_BIG)
    _check_sizes(ev.filter(pl.col("coll_id").is_not_null()), "collective calls", TRACE_TOO_BIG)
    m = (_channel_tags(m, "send_event")
         .join(done.rename({"event": "send_event", "done": "send_done"}), on="send_event", how="left")
         .join(done.rename({"event": "recv_event", "done": "recv_done"}), on="recv_event", how="left")
         .with_columns(send_key=pl.col("send_event"), recv_key=pl.col("recv_event")))
    colls, blocking, comms = _collectives(ev, trace, done, notes)
    lines = pl.concat([gaps, blocking, _posts_and_waits(pl.concat([_message_posts(m), colls]))])
    unmatched = int(trace.manifest.get("counts", {}).get("unmatched_sends", 0) or 0) + \
        int(trace.manifest.get("counts", {}).get("unmatched_recvs", 0) or 0)
    if unmatched:
        notes.append(f"{unmatched} unmatched sends/receives of the trace are not replayed")
    rma = ev.filter(NOT_REPLAYED).height
    if rma:
        notes.append(f"{rma} one-sided (RMA) calls are not replayed, neither their data nor their time "
                     f"(puts, gets, accumulates, window creation, fences, locks, post/start/complete/wait)")
    neighbours = ev.filter(NEIGHBOURHOOD)
    if neighbours.height:
        notes.append(f"{neighbours.height} neighbourhood collective calls (MPI_Neighbor_*, "
                     f"{int(neighbours['bytes'].sum() or 0):,} bytes sent) are not replayed, neither their data "
                     f"nor their time: the trace does not hold the topology's neighbours")
    return Actions(trace.ranks, lines.sort("rank", "key", "sub", "slot"), comms, m.height,
                   int(m["bytes"].sum() or 0), tuple(notes))


def _one_thread_per_rank(ev: pl.DataFrame, trace: Trace) -> None:
    """Refuse a trace whose ranks had several threads in MPI at once: a rank's calls replay as one
    sequence, so one thread's blocking receive would wait for a send its other thread makes after
    it (osu_latency_mt: SimGrid's deadlock detector stopped the replay). Threads that took turns
    (MPI_THREAD_SERIALIZED, FUNNELED) replay as the sequence they made."""
    calls = ev.filter(~pl.col("call").is_in([*INIT_CALLS, *FINALIZE_CALLS]))
    overlapping = (calls.sort("rank", "t_enter_ns")
                   .with_columns(before=pl.col("t_leave_ns").cum_max().shift(1).over("rank"))
                   .filter(pl.col("thread").n_unique().over("rank") > 1, pl.col("t_enter_ns") < pl.col("before"))
                   .group_by("rank").agg(pl.len().alias("n"), pl.col("thread").n_unique().alias("threads"))
                   .sort("rank"))
    if overlapping.height:
        first = overlapping.row(0, named=True)
        raise SimError(f"rank {first['rank']} of {trace.path} had several threads in MPI at once ({first['n']} calls "
                       f"began inside another's; {overlapping.height} rank(s) did), and the trace replay runs each "
                       f"rank's calls in one sequence, which would deadlock or reorder them; record a run in which one "
                       f"thread per rank calls MPI at a time to replay it")


def _persistent_as_nonblocking(trace: Trace, ev: pl.DataFrame) -> pl.DataFrame:
    """The MPI_Start(all) of a persistent collective as the nonblocking collective it replays as
    (its instance's MPI_Allreduce_init: MPI_Iallreduce), completed where the trace completed it."""
    return trace.with_init_calls(ev, "call", pl.col("call").is_in(START_CALLS), AS_NONBLOCKING, pl.Utf8)


def _completions(ev: pl.DataFrame) -> pl.DataFrame:
    """event -> the event that completed it: itself if blocking, else its recorded completion, else the
    rank's next MPI_Wait* call, else the rank's last call."""
    waits = ev.filter(pl.col("call").is_in(WAITS)).select("rank", wait=pl.col("event"))
    last = ev.group_by("rank").agg(last=pl.col("event").max())
    nb = (ev.filter(pl.col("call").is_in(NONBLOCKING))
          .select("rank", "event", "completed_by").sort("event")
          .join_asof(waits.sort("wait"), left_on="event", right_on="wait", by="rank", strategy="forward",
                     allow_exact_matches=False, check_sortedness=False)
          .join(last, on="rank", how="left")
          .select("event", nb_done=pl.coalesce("completed_by", "wait", "last")))
    return (ev.select("event").join(nb, on="event", how="left")
            .select("event", done=pl.coalesce("nb_done", "event")))


def _collectives(ev: pl.DataFrame, trace: Trace, done: pl.DataFrame,
                 notes: list[str]) -> tuple[pl.DataFrame, pl.DataFrame, list[str]]:
    """Nonblocking collectives as posts (with slots), blocking ones as lines, and the communicators used."""
    comms = trace.comms().collect().filter(pl.col("kind") == "intra")
    members = (comms.select("comm", "comm_size", rank=pl.col("ranks"))
               .with_columns(comm_rank=pl.int_ranges(0, pl.col("rank").list.len()))
               .explode("rank", "comm_rank"))
    c = (ev.filter(pl.col("coll_id").is_not_null() & pl.col("call").is_in(list(COLLECTIVES)))
         .with_columns(op=pl.col("call").replace_strict(COLLECTIVES))
         .join(members, on=["comm", "rank"], how="inner")
         .join(members.select("comm", root=pl.col("rank"), root_rank=pl.col("comm_rank")),
               on=["comm", "root"], how="left")
         .join(done, on="event", how="left"))
    # Only whole instances on communicators with more than one rank carry traffic and cannot deadlock.
    counts = (c.sort("comm_rank").group_by("coll_id")
              .agg(pl.len().alias("seen"), pl.col("comm_size").first(),
                   counts=pl.col("bytes").cast(pl.Utf8).str.join(" "), total=pl.col("bytes").sum()))
    skipped = counts.filter((pl.col("seen") != pl.col("comm_size")) | (pl.col("comm_size") < 2))
    partial = skipped.filter(pl.col("comm_size") >= 2).height
    if partial:
        notes.append(f"{partial} collectives not seen on every rank of their communicator are not replayed")
    c = c.join(counts.filter(pl.col("seen") == pl.col("comm_size"), pl.col("comm_size") >= 2)
               .select("coll_id", "counts", "total"), on="coll_id", how="inner")
    # The replay's communicators are numbered afresh, the world's 0 kept: the trace numbers windows
    # with them, so a program of 11 communicators and many windows (PETSc's window scatters) used id 5008.
    used = sorted(set(c["comm"].to_list()) - {0})
    if len(used) >= MAX_COMMS:
        raise SimError(f"the trace's collectives use {len(used):,} communicators, beyond the {MAX_COMMS - 1:,} the "
                       f"replay supports; record a run that creates fewer communicators")
    number = {old: new for new, old in enumerate(used, start=1)}
    c = c.with_columns(pl.col("comm").replace_strict(number, default=pl.col("comm"), return_dtype=c.schema["comm"]))
    spec = pl.format("{} {} {} {} {}", "op", "comm", pl.col("root_rank").fill_null(0), "comm_size", "counts")
    is_nb = pl.col("call").str.starts_with("MPI_I")
    blocking = c.filter(~is_nb).select("rank", key=pl.col("event"), sub=pl.lit(2, pl.Int8),
                                       slot=pl.lit(None, pl.Int64), buffer=pl.col("total"),
                                       text=pl.format("B {}", spec))
    posts = _post_columns(c.filter(is_nb), "rank", "event", 2, "done", "event", "total", pl.lit("C "),
                          pl.format(" {}", spec))
    lines = [f"{number[r['comm']]} {r['comm_size']} {' '.join(map(str, r['ranks']))}"
             for r in comms.filter(pl.col("comm").is_in(used)).sort("comm").iter_rows(named=True)]
    return posts, blocking, lines
