"""What an exporter writes for one rank, as time-ordered records, from what tables.py reads
(a few ranks at a time, so memory follows the longest ranks, not the trace).

Every record is hosted by one call (`host`, an event id): Enter and Leave of that call
and everything that happens inside it. A message's send is hosted by its send call;
a nonblocking send or receive also has a completion, hosted by the call that
completed it (Wait/Test, or the one whose exit is the message's completion time for
persistent requests). Sorting by (thread, host, phase, time) gives each location a
properly nested, time-ordered stream, whatever the order of equal timestamps.
Peers and roots stay world ranks here; OTF2 translates them to communicator ranks.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from mpiscope.export.tables import (
    Calls,
    RankData,
    as_int,
    call_names,
    calls_present,
    group_messages,
    iter_rank_data,
    iter_ranks,
    rank_events,
    rank_messages,
    rank_spans,
    thread_spans,
    with_instance_calls,
    with_recv_bytes,
)
from mpiscope.trace import Trace

__all__ = [  # the readers (tables.py) are used through this module too
    "Calls",
    "RankData",
    "as_int",
    "call_names",
    "calls_present",
    "group_messages",
    "iter_rank_data",
    "iter_ranks",
    "rank_events",
    "rank_messages",
    "rank_spans",
    "thread_spans",
    "with_recv_bytes",
]

# Record kinds (column `kind`); arguments a..f per kind are listed beside each.
# Every record also has `code`: the call code of the call it describes (-1 for messages).
ENTER, LEAVE = 0, 1  # -
SEND, ISEND, ISEND_DONE = 2, 3, 4  # peer, comm, tag, bytes, request | request
RECV, IRECV_REQ, IRECV = 5, 6, 7  # peer, comm, tag, bytes | request | peer, comm, tag, bytes, request
COLL_BEGIN, COLL_END = 8, 9  # - | comm, root, sent, received
NBC_REQ, NBC_DONE = 10, 11  # request | comm, root, sent, received, request
RMA_OP, RMA_DONE, RMA_DONE_REQ = 12, 13, 14  # win, peer, bytes, request | win, request
RMA_SYNC_BEGIN, RMA_SYNC_END = 15, 16  # - | win
RMA_LOCK, RMA_UNLOCK = 17, 18  # win, peer, lock type (tag as recorded)
RMA_WIN_CREATE, RMA_WIN_FREE = 19, 20  # win

# Phase of a record inside its host call (column `phase`).
_PHASE = {
    ENTER: 0,
    COLL_BEGIN: 1,
    RMA_SYNC_BEGIN: 1,
    SEND: 2,
    ISEND: 2,
    IRECV_REQ: 2,
    NBC_REQ: 2,
    RMA_OP: 2,
    RMA_LOCK: 2,
    RMA_WIN_FREE: 2,
    ISEND_DONE: 5,
    RECV: 5,
    IRECV: 5,
    NBC_DONE: 5,
    RMA_DONE: 5,
    RMA_DONE_REQ: 5,
    RMA_UNLOCK: 5,
    RMA_WIN_CREATE: 5,
    COLL_END: 7,
    RMA_SYNC_END: 7,
    LEAVE: 9,
}


CHUNK = 65_536  # calls encoded at a time by the Perfetto writer (its arrays of a chunk stay small)


# Request ids tying a start to its completion: unique in the whole trace, so the two
# halves of an Isendrecv or several requests of one Startall never collide.
def _req(base: pl.Expr, side: int) -> pl.Expr:
    return base * 4 + side


RECORD_COLUMNS = ["thread", "host", "phase", "t", "kind", "code", "a", "b", "c", "d", "e"]
SORT_KEYS = ("thread", "host", "phase", "t", "kind")  # a location's writing order
# Calls that end an RMA epoch or flush: they complete the puts, gets and atomics before them.
RMA_CLOSERS = (
    "MPI_Win_fence",
    "MPI_Win_complete",
    "MPI_Win_unlock",
    "MPI_Win_unlock_all",
    "MPI_Win_flush",
    "MPI_Win_flush_all",
    "MPI_Win_flush_local",
    "MPI_Win_flush_local_all",
    "MPI_Win_free",
)
RMA_COLLECTIVE = ("MPI_Win_fence",)
RMA_LOCKS = ("MPI_Win_lock",)
RMA_UNLOCKS = ("MPI_Win_unlock",)


def _rec(
    df: pl.LazyFrame, kind: int, host: str, t: str, *args: pl.Expr | None, code: bool = True
) -> pl.LazyFrame:
    """Records of `kind` from the rows of `df`; `code`: df has the call_code of the call."""
    cols = [
        pl.col("thread").cast(pl.Int32),
        pl.col(host).cast(pl.Int64).alias("host"),
        pl.lit(_PHASE[kind], pl.Int8).alias("phase"),
        pl.col(t).cast(pl.Int64).alias("t"),
        pl.lit(kind, pl.UInt8).alias("kind"),
        (pl.col("call_code") if code else pl.lit(-1)).cast(pl.Int64).alias("code"),
    ]
    for name, arg in zip("abcde", [*args, None, None, None, None, None]):
        cols.append((arg if arg is not None else pl.lit(0)).cast(pl.Int64).fill_null(-1).alias(name))
    return df.select(cols)


def completion_hosts(ev: pl.LazyFrame, side: pl.LazyFrame, event: str, done_t: str) -> pl.LazyFrame:
    """Join each message side to its call (`event`) and find the call that completed it:
    `completed_by` of the start, else the call of this rank that left at the completion time."""
    calls = ev.select(
        pl.col("event").alias(event),
        "thread",
        pl.col("t_enter_ns").alias("_enter"),
        pl.col("t_leave_ns").alias("_leave"),
        "completed_by",
    )
    thread_of = ev.select(pl.col("event").alias("completed_by"), pl.col("thread").alias("_cb_thread"))
    joined = (
        side.join(calls, on=event, how="inner")
        .join(thread_of, on="completed_by", how="left")
        .with_row_index("_row")
        .collect()
    )
    # Only a side without its completing call (blocking, persistent) looks for the call that left
    # at its completion time: grouping all the rank's calls by exit time cost more than the rest.
    need = pl.col("completed_by").is_null() | pl.col("_cb_thread").is_null()
    pending = joined.lazy().filter(need)
    times = pending.select(pl.col(done_t).alias("t_leave_ns")).unique()
    by_leave = (
        ev.join(times, on="t_leave_ns", how="semi")
        .group_by("t_leave_ns")
        .agg(pl.col("event").min().alias("_by_leave"), pl.col("thread").first().alias("_done_thread"))
    )
    found = pending.join(by_leave, left_on=done_t, right_on="t_leave_ns", how="left")
    out = pl.concat([joined.lazy().filter(~need), found], how="diagonal").sort("_row").drop("_row")
    # a side never completed (an MPI_Isend whose request was freed or dropped) has no completion
    # time: it is a nonblocking start without a completion, not neither kind of record
    blocking = (pl.col("completed_by").is_null() & (pl.col(done_t) == pl.col("_leave"))).fill_null(False)
    return out.with_columns(
        blocking.alias("_blocking"),
        pl.coalesce("completed_by", "_by_leave", event).alias("_done_host"),
        pl.coalesce("_cb_thread", "_done_thread", "thread").alias("_done_thr"),
        # a completion time outside its host (no such call recorded) is clamped into it
        pl.col(done_t).alias("_done_t"),
    )


def _p2p_records(ev: pl.LazyFrame, sends: pl.LazyFrame, recvs: pl.LazyFrame) -> list[pl.LazyFrame]:
    out: list[pl.LazyFrame] = []
    # each side's joins run once (collected), not once per kind of record made from it
    s = completion_hosts(ev, sends, "send_event", "t_send_leave_ns").collect().lazy()
    req = _req(pl.col("msg"), 1)
    env = (pl.col("dst"), pl.col("comm"), pl.col("tag"), pl.col("bytes"))
    out.append(_rec(s.filter("_blocking"), SEND, "send_event", "t_send_enter_ns", *env, code=False))
    nb = s.filter(~pl.col("_blocking"))
    out.append(_rec(nb, ISEND, "send_event", "t_send_enter_ns", *env, req, code=False))
    out.append(
        _rec(
            nb.filter(pl.col("_done_t").is_not_null()).with_columns(pl.col("_done_thr").alias("thread")),
            ISEND_DONE,
            "_done_host",
            "_done_t",
            req,
            code=False,
        )
    )
    r = completion_hosts(ev, recvs, "recv_event", "t_recv_leave_ns").collect().lazy()
    req = _req(pl.col("msg"), 2)
    env = (pl.col("src"), pl.col("comm"), pl.col("tag"), pl.col("recv_bytes"))
    out.append(_rec(r.filter("_blocking"), RECV, "recv_event", "t_recv_leave_ns", *env, code=False))
    nb = r.filter(~pl.col("_blocking"))
    out.append(_rec(nb, IRECV_REQ, "recv_event", "t_recv_enter_ns", req, code=False))
    out.append(
        _rec(
            nb.filter(pl.col("_done_t").is_not_null()).with_columns(pl.col("_done_thr").alias("thread")),
            IRECV,
            "_done_host",
            "_done_t",
            *env,
            req,
            code=False,
        )
    )
    return out


def _collective_records(trace: Trace, ev: pl.LazyFrame) -> list[pl.LazyFrame]:
    coll = with_recv_bytes(trace, ev.filter(pl.col("coll_id").is_not_null())).collect()
    coll = with_instance_calls(trace, coll).lazy()  # a persistent collective's op is its *_init call's
    args = (pl.col("comm"), pl.col("root"), pl.col("bytes"), pl.col("recv_bytes"))
    nonblocking = pl.col("completed_by").is_not_null() & pl.col("t_complete_ns").is_not_null()
    blk, nb = coll.filter(~nonblocking), coll.filter(nonblocking)
    done = nb.join(
        ev.select(pl.col("event").alias("completed_by"), pl.col("thread").alias("_t2")),
        on="completed_by",
        how="left",
    ).with_columns(pl.coalesce("_t2", "thread").alias("thread"))
    req = _req(pl.col("event"), 3)
    return [
        _rec(blk, COLL_BEGIN, "event", "t_enter_ns"),
        _rec(blk, COLL_END, "event", "t_leave_ns", *args),
        _rec(nb, NBC_REQ, "event", "t_enter_ns", req),
        _rec(done, NBC_DONE, "completed_by", "t_complete_ns", *args, req),
    ]


def _rma_records(calls: Calls, ev: pl.LazyFrame) -> list[pl.LazyFrame]:
    rma = calls.names("rma")
    ops = ev.filter(
        pl.col("call").is_in(rma)
        & pl.col("peer").is_not_null()
        & ~pl.col("call").is_in([*RMA_CLOSERS, *RMA_LOCKS, "MPI_Win_attach", "MPI_Win_detach"])
    )
    req = _req(pl.col("event"), 0)
    out = [_rec(ops, RMA_OP, "event", "t_enter_ns", pl.col("comm"), pl.col("peer"), pl.col("bytes"), req)]
    by_request = ops.filter(pl.col("completed_by").is_not_null())
    out.append(_rec(by_request, RMA_DONE_REQ, "completed_by", "t_complete_ns", pl.col("comm"), req))
    # Other operations complete at the next call that closes the epoch on that window (thread).
    closers = (
        ev.filter(pl.col("call").is_in(RMA_CLOSERS))
        .select("thread", "comm", pl.col("event").alias("_closer"), pl.col("t_leave_ns").alias("_close_t"))
        .sort("_closer")
    )
    blocking = ops.filter(pl.col("completed_by").is_null()).sort("event")
    done = blocking.join_asof(
        closers,
        left_on="event",
        right_on="_closer",
        by=["thread", "comm"],
        strategy="forward",
        check_sortedness=False,
    )
    done = done.with_columns(
        pl.coalesce("_closer", "event").alias("_closer"),
        pl.coalesce("_close_t", "t_leave_ns").alias("_close_t"),
    )
    out.append(_rec(done, RMA_DONE, "_closer", "_close_t", pl.col("comm"), req))
    fence = ev.filter(pl.col("call").is_in(RMA_COLLECTIVE))
    out += [
        _rec(fence, RMA_SYNC_BEGIN, "event", "t_enter_ns"),
        _rec(fence, RMA_SYNC_END, "event", "t_leave_ns", pl.col("comm")),
    ]
    lock = ev.filter(pl.col("call").is_in(RMA_LOCKS) & pl.col("peer").is_not_null())
    unlock = ev.filter(pl.col("call").is_in(RMA_UNLOCKS) & pl.col("peer").is_not_null())
    out += [
        _rec(lock, RMA_LOCK, "event", "t_leave_ns", pl.col("comm"), pl.col("peer"), pl.col("tag")),
        _rec(unlock, RMA_UNLOCK, "event", "t_leave_ns", pl.col("comm"), pl.col("peer")),
    ]
    return out


def window_records(windows: pl.DataFrame, ev: pl.LazyFrame, calls: Calls) -> list[pl.LazyFrame]:
    """RmaWinCreate/RmaWinFree: a window's creation is the creating call whose request names it
    (the merge writes the new window's id there); in a trace merged before that, the rank's creating
    call that comes before the window's first use. Its free is MPI_Win_free on it."""
    free = ev.filter(pl.col("call") == "MPI_Win_free")
    ids = windows["comm"].implode()
    creators = (
        ev.filter(pl.col("call").is_in(calls.names("create_win")))
        .select("thread", pl.col("event").alias("_creator"), pl.col("t_leave_ns").alias("_create_t"),
                pl.col("request").alias("comm"))
        .sort("_creator")
    )
    named = creators.filter(pl.col("comm").is_in(ids)).unique("comm", keep="first")
    first_use = (
        ev.filter(pl.col("comm").is_in(ids))
        .group_by("comm")
        .agg(pl.col("event").min().alias("_first"))
        .join(named.select("comm"), on="comm", how="anti")
        .sort("_first")
    )
    unnamed = first_use.join_asof(
        creators.filter(~pl.col("comm").is_in(ids)).drop("comm"), left_on="_first", right_on="_creator",
        strategy="backward", check_sortedness=False,
    )
    created = pl.concat([named.select("comm", "thread", "_creator", "_create_t"),
                         unnamed.filter(pl.col("_creator").is_not_null()).select("comm", "thread", "_creator",
                                                                                 "_create_t")])
    return [
        _rec(created, RMA_WIN_CREATE, "_creator", "_create_t", pl.col("comm"), code=False),
        _rec(
            free.filter(pl.col("comm").is_in(windows["comm"].implode())),
            RMA_WIN_FREE,
            "event",
            "t_enter_ns",
            pl.col("comm"),
        ),
    ]


def rank_records(trace: Trace, calls: Calls, data: RankData, windows: pl.DataFrame) -> pl.DataFrame:
    """Every record of one rank, sorted per location (thread) into writing order."""
    ev = data.events.lazy()
    sends, recvs = (m.lazy() for m in rank_messages(trace, data.rank, data.messages))
    parts = [
        _rec(ev, ENTER, "event", "t_enter_ns"),
        _rec(ev, LEAVE, "event", "t_leave_ns"),
        *_p2p_records(ev, sends, recvs),
        *_collective_records(trace, ev),
        *_rma_records(calls, ev),
        *window_records(windows, ev, calls),
    ]
    recs = pl.concat(parts, how="vertical").collect()
    # NumPy's stable sorts find the order ~10x faster than a sort by five columns: the parts
    # are runs already in order, which they merge.
    order = np.lexsort([recs[c].to_numpy() for c in reversed(SORT_KEYS)])
    # A location's clock never runs backwards in the output (OTF2 refuses it): a record that a
    # clock correction put before its predecessor keeps its predecessor's time.
    return recs.rechunk()[order].with_columns(pl.col("t").cum_max().over("thread"))
