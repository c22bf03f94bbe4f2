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

from dataclasses import dataclass

import numpy as np
import polars as pl


@dataclass
class Side:
    """One side (sends or receives) of point-to-point traffic, as arrays."""
    comm: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    tag: np.ndarray
    posted: np.ndarray   # ns: send entry, or receive posting
    event: np.ndarray    # event id: ties broken by recording order

    @property
    def size(self) -> int:
        return int(self.comm.size)


def match_messages(sends: Side, recvs: Side) -> tuple[np.ndarray, np.ndarray]:
    """Indices (into sends, into recvs) of the matched pairs, in envelope order."""
    n_s = sends.size

    def cat(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return np.concatenate([a, b])

    env = (cat(sends.comm, recvs.comm).astype(np.int64) << 40) | (cat(sends.src, recvs.src).astype(np.int64) << 20) \
        | cat(sends.dst, recvs.dst).astype(np.int64)
    df = pl.DataFrame({"env": env, "tag": cat(sends.tag, recvs.tag).astype(np.int64),
                       "side": np.r_[np.zeros(n_s, np.int8), np.ones(recvs.size, np.int8)],
                       "t": cat(sends.posted, recvs.posted), "ev": cat(sends.event, recvs.event),
                       "i": np.r_[np.arange(n_s), np.arange(recvs.size)]})
    s = df.sort("env", "tag", "side", "t", "ev")
    env_s, tag_s, side_s = s["env"].to_numpy(), s["tag"].to_numpy(), s["side"].to_numpy()
    idx_s = s["i"].to_numpy()
    n = env_s.size
    if n == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    new_group = np.r_[True, (env_s[1:] != env_s[:-1]) | (tag_s[1:] != tag_s[:-1])]
    group = np.cumsum(new_group) - 1
    new_run = new_group | np.r_[True, side_s[1:] != side_s[:-1]]
    run_start = np.maximum.accumulate(np.where(new_run, np.arange(n), 0))
    k = np.arange(n) - run_start
    n_groups = int(group[-1]) + 1
    sends_in = np.bincount(group, weights=(side_s == 0), minlength=n_groups).astype(np.int64)
    recvs_in = np.bincount(group, weights=(side_s == 1), minlength=n_groups).astype(np.int64)
    take_s = (side_s == 0) & (k < recvs_in[group])
    take_r = (side_s == 1) & (k < sends_in[group])
    # both selections are in (group, k) order, so they pair up elementwise
    return idx_s[take_s], idx_s[take_r]


def group_collectives(rows: pl.DataFrame, comm_sizes: pl.DataFrame) -> pl.DataFrame:
    """rows: event comm seq call root bytes t_enter_ns t_done_ns (one per rank and call).
    Returns one row per instance, numbered by first entry."""
    return (
        rows.with_columns((pl.col("comm") * (1 << 32) + pl.col("seq")).alias("key"))
        .group_by("key")
        .agg(
            pl.col("comm").first(), pl.col("seq").first(),
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
        .select("coll_id", "call", "comm", "seq", "root", "bytes", "ranks", "comm_size", "calls_seen",
                "t_first_enter_ns", "t_last_enter_ns", "t_first_leave_ns", "t_last_leave_ns")
    )
