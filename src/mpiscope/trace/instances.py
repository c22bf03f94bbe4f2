"""Collective instances of a merge in pieces: each piece's share, then the whole.

(communicator, sequence number) names an instance (match.py). A piece sums up
its ranks' part of every instance (partials); the whole trace adds the parts
up, numbers the instances as tables.collective_ids does (by first entry, then
communicator, then sequence number) and builds collectives.parquet with the
values tables.collectives_table gives. "First" (the instance's call and root)
means first in that table's row order: event rows (by event id, so by piece)
before persistent starts.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl

from mpiscope.trace.columns import ROLE, CallTable
from mpiscope.trace.match import COLLECTIVE_COLUMNS
from mpiscope.trace.tables import Rows, nullable

_KIND_BIT, _PIECE_BIT = 62, 40  # a row's place in that order: kind (0 rows, 1 starts), piece, position


def coll_rows(rows: Rows, starts: Rows) -> pl.DataFrame:
    """The rows of a piece that take part in collective instances (tables.collective_ids)."""
    frames = []
    for kind, e, idx in ((0, rows, np.flatnonzero((rows["role"] == ROLE["coll"]) & (rows["comm"] >= 0)
                                                  & (rows["rc"] == 0))),
                         (1, starts, np.flatnonzero((starts["comm"] >= 0) & (starts["call"] > 0)))):
        peer, t_complete, t_leave = e["peer"][idx], e["t_complete"][idx], e["t_leave"][idx]
        t_done = np.where(t_complete >= 0, t_complete, t_leave)
        frames.append(pl.DataFrame([
            pl.Series("order", (np.int64(kind) << _KIND_BIT) + idx.astype(np.int64)),
            pl.Series("comm", e["comm"][idx].astype(np.int64)), pl.Series("seq", e["tag"][idx].astype(np.int64)),
            pl.Series("call", e["call"][idx].astype(np.uint32)), nullable(peer, peer >= 0, "root"),
            pl.Series("bytes", e["bytes"][idx].astype(np.int64)),
            nullable(e["recv_bytes"][idx].astype(np.int64), e["recv_valid"][idx], "recv_bytes"),
            pl.Series("t_enter_ns", e["t_enter"][idx].astype(np.int64)),
            nullable(t_done.astype(np.int64), t_done >= 0, "t_done_ns"),
        ]))
    return pl.concat(frames)


def partials(rows: pl.DataFrame, piece: int) -> pl.DataFrame:
    """One piece's share of each instance, by (comm, seq, call)."""
    order = pl.col("order") + (piece << _PIECE_BIT)
    return rows.group_by("comm", "seq", "call").agg(
        order.min().alias("first"),
        pl.col("root").sort_by(order).drop_nulls().first(),
        order.filter(pl.col("root").is_not_null()).min().alias("root_first"),
        pl.col("bytes").sum(),
        pl.col("recv_bytes").count().alias("recv_count"),
        pl.col("recv_bytes").sum(),
        pl.len().alias("ranks"),
        pl.col("t_enter_ns").min().alias("t_first_enter_ns"),
        pl.col("t_enter_ns").max().alias("t_last_enter_ns"),
        pl.col("t_done_ns").min().alias("t_first_leave_ns"),
        pl.col("t_done_ns").max().alias("t_last_leave_ns"),
    )


def _add_up(shares: pl.DataFrame) -> pl.DataFrame:
    """Shares of the same (comm, seq, call) added up into one (partials' columns)."""
    return shares.group_by("comm", "seq", "call").agg(
        pl.col("first").min(),
        pl.col("root").sort_by("root_first", nulls_last=True).first(),
        pl.col("root_first").min(),
        pl.col("bytes").sum(), pl.col("recv_count").sum(), pl.col("recv_bytes").sum(), pl.col("ranks").sum(),
        pl.col("t_first_enter_ns").min(), pl.col("t_last_enter_ns").max(),
        pl.col("t_first_leave_ns").min(), pl.col("t_last_leave_ns").max(),
    )


def assemble(shares: list[Path], comms: pl.DataFrame, calls: CallTable) -> tuple[pl.DataFrame, np.ndarray,
                                                                                 np.ndarray]:
    """collectives.parquet from every piece's shares (files), and the lookup of coll_id by
    (comm << 32) + seq: the sorted keys and their ids. The shares are added up a piece at a
    time: every piece may share in every instance (a collective over all ranks), so all of them
    at once would take pieces x instances rows (1,000 M records of 64 ranks: 167 M rows, 19 GB)
    where the sum takes one row per instance and call."""
    total: pl.DataFrame | None = None
    for path in shares:
        share = pl.read_parquet(path)
        total = share if total is None else _add_up(pl.concat([total, share]))
    if total is None:
        total = pl.DataFrame(schema={"comm": pl.Int64, "seq": pl.Int64, "call": pl.UInt32, "first": pl.Int64,
                                     "root": pl.Int32, "root_first": pl.Int64, "bytes": pl.Int64,
                                     "recv_count": pl.UInt32, "recv_bytes": pl.Int64, "ranks": pl.UInt32,
                                     "t_first_enter_ns": pl.Int64, "t_last_enter_ns": pl.Int64,
                                     "t_first_leave_ns": pl.Int64, "t_last_leave_ns": pl.Int64})
    whole = total.group_by("comm", "seq").agg(
        pl.col("call").sort_by("first").first(),
        pl.col("call").n_unique().alias("calls_seen"),
        pl.col("root").sort_by("root_first", nulls_last=True).first(),
        pl.col("bytes").sum(),
        pl.when(pl.col("recv_count").sum() > 0).then(pl.col("recv_bytes").sum()).alias("recv_bytes"),
        pl.col("ranks").sum().cast(pl.UInt32),
        pl.col("t_first_enter_ns").min(), pl.col("t_last_enter_ns").max(),
        pl.col("t_first_leave_ns").min(), pl.col("t_last_leave_ns").max(),
    )
    whole = whole.sort("t_first_enter_ns", "comm", "seq").with_row_index("coll_id").with_columns(
        pl.col("coll_id").cast(pl.Int64))
    key = ((whole["comm"].to_numpy().astype(np.int64) << 32)
           + (whole["seq"].to_numpy().astype(np.int64) & 0xffffffff)).view(np.uint64)
    order = np.argsort(key)
    table = (whole.with_columns(calls.series(whole["call"].to_numpy()), pl.col("calls_seen").cast(pl.UInt32))
             .join(comms.select("comm", "comm_size"), on="comm", how="left")
             .select(COLLECTIVE_COLUMNS)
             .sort("coll_id"))
    return table, key[order], whole["coll_id"].to_numpy()[order]
