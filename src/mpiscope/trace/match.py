"""Point-to-point matching (in native/kernels/merge/match.c) and collective grouping.

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

from mpiscope.trace import native
from mpiscope.trace.columns import ROLE, ROLES, Records
from mpiscope.trace.requests import StartLinks


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


@dataclass
class P2P:
    sends: Side
    send_bytes: np.ndarray
    send_leave: np.ndarray
    recvs: Side
    recv_bytes: np.ndarray
    recv_leave: np.ndarray


# merge.h's MSM_* bits: what each role is for point-to-point traffic
_P2P_KINDS = {1: ("send",), 2: ("isend", "psend", "isendrecv"), 4: ("recv", "recv_part"),
              8: ("irecv", "precv", "isendrecv"), 16: ("mprobe",), 32: ("mrecv",), 64: ("imrecv",)}


def p2p_sides(rec: Records, links: StartLinks) -> P2P:
    kind = np.zeros(len(ROLES), np.uint8)
    for bit, roles in _P2P_KINDS.items():
        kind[[ROLE[r] for r in roles]] |= bit
    s, r = native.p2p(rec.columns(), kind, links.columns())
    return P2P(Side(s["comm"], s["src"], s["dst"], s["tag"], s["posted"], s["event"]), s["bytes"], s["leave"],
               Side(r["comm"], r["src"], r["dst"], r["tag"], r["posted"], r["event"]), r["bytes"], r["leave"])


def match_messages(sends: Side, recvs: Side) -> tuple[np.ndarray, np.ndarray]:
    """Indices (into sends, into recvs) of the matched pairs, in envelope order
    (communicator, source, destination, tag), then posting order (time, event)."""
    def side(s: Side) -> dict[str, np.ndarray]:
        return {"comm": s.comm, "src": s.src, "dst": s.dst, "tag": s.tag, "t": s.posted, "ev": s.event}

    return native.match(side(sends), side(recvs))


def group_collectives(rows: pl.DataFrame, comm_sizes: pl.DataFrame) -> pl.DataFrame:
    """rows: coll_id comm call root bytes recv_bytes t_enter_ns t_done_ns, one per rank and
    call of each instance (coll_id). Returns one row per instance; its recv_bytes are null
    where the trace does not record them."""
    return (
        rows.group_by("coll_id")
        .agg(
            pl.col("comm").first(),
            pl.col("call").first(),
            pl.col("call").n_unique().alias("calls_seen"),
            pl.col("root").drop_nulls().first(),
            pl.col("bytes").sum(),
            pl.when(pl.col("recv_bytes").count() > 0).then(pl.col("recv_bytes").sum()).alias("recv_bytes"),
            pl.len().alias("ranks"),
            pl.col("t_enter_ns").min().alias("t_first_enter_ns"),
            pl.col("t_enter_ns").max().alias("t_last_enter_ns"),
            pl.col("t_done_ns").min().alias("t_first_leave_ns"),
            pl.col("t_done_ns").max().alias("t_last_leave_ns"),
        )
        .sort("coll_id")
        .join(comm_sizes, on="comm", how="left")
        .select("coll_id", "call", "comm", "root", "bytes", "recv_bytes", "ranks", "comm_size", "calls_seen",
                "t_first_enter_ns", "t_last_enter_ns", "t_first_leave_ns", "t_last_leave_ns")
    )
