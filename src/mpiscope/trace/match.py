"""Point-to-point matching and collective grouping, vectorised.

Messages: MPI's non-overtaking rule says that two messages with the same
(communicator, source, destination, tag) are received in the order they were
sent, by the receives in the order they were posted. So the k-th send of an
envelope matches the k-th receive that delivered that envelope (its actual
source and tag, read from the status, which also resolves wildcards); a
receive is posted at Recv/Irecv entry, or at Mprobe entry for matched probes.

Collectives: members of a communicator call its collectives in the same
order (MPI-3.1 §5.12), so (communicator, per-rank sequence number) names
one instance on every rank; the recorder keeps that number even while
recording is paused.
"""

from __future__ import annotations

import polars as pl

ENVELOPE = ["comm", "src", "dst", "tag"]


def _numbered(df: pl.DataFrame, order: list[str]) -> pl.DataFrame:
    return df.sort(order).with_columns(pl.int_range(pl.len(), dtype=pl.Int64).over(ENVELOPE).alias("k"))


def match_messages(sends: pl.DataFrame, recvs: pl.DataFrame) -> tuple[pl.DataFrame, int, int]:
    """sends: comm src dst tag bytes t_send_enter_ns t_send_leave_ns send_event;
    recvs: comm src dst tag t_recv_enter_ns t_recv_leave_ns recv_event.
    Returns (messages, unmatched sends, unmatched receives)."""
    s = _numbered(sends, ["t_send_enter_ns", "send_event"])
    r = _numbered(recvs, ["t_recv_enter_ns", "recv_event"])
    keys = ENVELOPE + ["k"]
    messages = s.join(r, on=keys, how="inner").drop("k")
    unmatched_sends = s.height - messages.height
    unmatched_recvs = r.height - messages.height
    return messages.sort("t_send_enter_ns", "send_event"), unmatched_sends, unmatched_recvs


def group_collectives(rows: pl.DataFrame, comm_sizes: pl.DataFrame) -> pl.DataFrame:
    """rows: event comm seq call root bytes t_enter_ns t_done_ns (one per rank and call).
    Returns one row per instance, with coll_id, and the event -> coll_id map."""
    inst = (
        rows.group_by("comm", "seq")
        .agg(
            pl.col("call").first(),
            pl.col("call").n_unique().alias("calls_seen"),
            pl.col("root").drop_nulls().first(),
            pl.col("bytes").sum(),
            pl.len().alias("ranks"),
            pl.col("t_enter_ns").min().alias("t_first_enter_ns"),
            pl.col("t_enter_ns").max().alias("t_last_enter_ns"),
            pl.col("t_done_ns").min().alias("t_first_leave_ns"),
            pl.col("t_done_ns").max().alias("t_last_leave_ns"),
        )
        .sort("t_first_enter_ns", "comm", "seq")
        .with_columns(pl.int_range(pl.len(), dtype=pl.Int64).alias("coll_id"))
        .join(comm_sizes, on="comm", how="left")
    )
    return inst.select("coll_id", "call", "comm", "seq", "root", "bytes", "ranks", "comm_size",
                       "calls_seen", "t_first_enter_ns", "t_last_enter_ns", "t_first_leave_ns",
                       "t_last_leave_ns")
