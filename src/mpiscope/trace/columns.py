"""All records of all ranks as NumPy columns, with what the merge derives per
record: global times, role codes, dense communicator ids, the call each
sub-record belongs to, and event ids in (rank, t_enter) order.

Records arrive grouped by rank, then thread, in recording order; every
computation here is a vector operation over that layout.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from mpiscope.trace import record as R
from mpiscope.trace.clocks import RankClock, rank_clocks
from mpiscope.trace.reader import RankFile

FIRST_TABLE_ID = 16
ROLES = ["", "tool", "env", "send", "isend", "recv", "irecv", "probe", "mprobe", "mrecv", "imrecv",
         "isendrecv", "psend_init", "precv_init", "coll", "create", "create_win", "rma", "comm", "completion",
         "complete", "local", "recv_part", "psend", "precv", "pstart", "immediate"]
ROLE = {name: code for code, name in enumerate(ROLES)}


@dataclass
class CallTable:
    names: list[str]
    role: np.ndarray      # uint8 role code by call id
    starts: np.ndarray    # bool by call id: the call starts a request

    @classmethod
    def from_manifest(cls, calls: list[dict[str, Any]]) -> CallTable:
        n = max(c["id"] for c in calls) + 1
        names = [""] * n
        role = np.zeros(n, dtype=np.uint8)
        starts = np.zeros(n, dtype=bool)
        for c in calls:
            names[c["id"]] = c["name"]
            role[c["id"]] = ROLE.get(c["role"], 0)
            starts[c["id"]] = bool(c.get("starts_request"))
        return cls(names, role, starts)

    def enum(self) -> pl.Enum:
        return pl.Enum(sorted({n for n in self.names if n.startswith("MPI_")}))

    def series(self, ids: np.ndarray, name: str = "call") -> pl.Series:
        return pl.Series(name, self.names).gather(pl.Series(ids.astype(np.int64))).cast(self.enum())


@dataclass
class Records:
    rank: np.ndarray
    thread: np.ndarray
    call: np.ndarray
    role: np.ndarray
    starts: np.ndarray
    t_enter: np.ndarray      # int64 ns, rank 0's clock
    t_leave: np.ndarray      # int64 ns; -1: the call never returned
    bytes: np.ndarray
    callsite: np.ndarray
    req: np.ndarray          # int64 request id without the immediate flag
    immediate: np.ndarray    # bool: MPI returned a shared, already complete request
    peer: np.ndarray
    tag: np.ndarray
    comm: np.ndarray         # dense communicator id, -1 unknown
    parent: np.ndarray       # index of the call record a record belongs to (itself for calls)
    event: np.ndarray        # event id of call records, -1 for sub-records
    clocks: dict[int, RankClock]

    def __len__(self) -> int:
        return int(self.call.size)

    @property
    def parent_event(self) -> np.ndarray:
        return np.where(self.parent >= 0, self.event[np.maximum(self.parent, 0)], -1)

    def shift(self, shifts: np.ndarray) -> None:
        """Add a per-rank clock shift (ns) to every time."""
        if not shifts.any():
            return
        s = shifts[self.rank]
        self.t_enter += s
        self.t_leave[:] = np.where(self.t_leave >= 0, self.t_leave + s, -1)


def _global_times(ticks: np.ndarray, rank: np.ndarray, clocks: dict[int, RankClock]) -> np.ndarray:
    """Ticks -> ns on rank 0's clock, rank by rank (records are grouped by rank)."""
    out = np.empty(ticks.size, np.int64)
    bounds = np.flatnonzero(np.r_[True, rank[1:] != rank[:-1], True]) if rank.size else np.zeros(1, np.int64)
    for a, b in itertools.pairwise(bounds):
        c = clocks[int(rank[a])]
        t = ticks[a:b].astype(np.int64)
        local = c.ns_ref + np.rint((t - c.tick_ref) * c.ns_per_tick).astype(np.int64)
        offset = c.offset_ns + (local - c.offset_at_ns) * c.drift if c.drift else np.float64(c.offset_ns)
        out[a:b] = local - np.rint(offset).astype(np.int64)
    return out


def _parents(call: np.ndarray, rank: np.ndarray, thread: np.ndarray) -> np.ndarray:
    """Sub-records follow their call in the same thread's stream (a block
    marker may sit in between; it is a sub-record too and is skipped)."""
    if call.size == 0:
        return np.zeros(0, np.int64)
    idx = np.arange(call.size)
    last = np.maximum.accumulate(np.where(call >= FIRST_TABLE_ID, idx, -1))
    seg_start = np.r_[True, (rank[1:] != rank[:-1]) | (thread[1:] != thread[:-1])]
    first_of_seg = np.maximum.accumulate(np.where(seg_start, idx, 0))
    return np.where(last >= first_of_seg, last, -1)


def _event_ids(call: np.ndarray, rank: np.ndarray, thread: np.ndarray, t_enter: np.ndarray) -> np.ndarray:
    is_call = np.flatnonzero(call >= FIRST_TABLE_ID)
    event = np.full(call.size, -1, dtype=np.int64)
    if not thread.any():
        # One thread per rank: recording order is already (rank, t_enter) order.
        event[is_call] = np.arange(is_call.size)
        return event
    order = is_call[np.lexsort((is_call, t_enter[is_call], rank[is_call]))]
    event[order] = np.arange(order.size)
    return event


def comm_table(files: list[RankFile]) -> tuple[dict[int, int], dict[tuple[int, int], int], pl.DataFrame]:
    """gid -> dense id (world = 0), (rank, local id) -> dense id, and comms.parquet."""
    first: dict[int, tuple[int, Any]] = {}
    local: dict[tuple[int, int], int] = {}
    for f in files:
        for d in f.comms:
            first.setdefault(d.gid, (f.rank, d))
    dense = {1: 0} | {g: i + 1 for i, g in enumerate(sorted(set(first) - {1}))}
    for f in files:
        for d in f.comms:
            local[(f.rank, d.local_id)] = dense[d.gid]
    rows = sorted(first.items(), key=lambda kv: dense[kv[0]])
    table = pl.DataFrame({
        "comm": [dense[g] for g, _ in rows],
        "gid": [g for g, _ in rows],
        "kind": [R.COMM_KIND_NAMES.get(d.kind, "?") for _, (_, d) in rows],
        # an intercommunicator's collectives involve both groups
        "comm_size": [int(d.ranks.size + d.remote.size) for _, (_, d) in rows],
        "ranks": [d.ranks.tolist() for _, (_, d) in rows],
        "remote_ranks": [d.remote.tolist() for _, (_, d) in rows],
    }, schema={"comm": pl.Int64, "gid": pl.UInt64, "kind": pl.Utf8, "comm_size": pl.Int64,
               "ranks": pl.List(pl.Int32), "remote_ranks": pl.List(pl.Int32)})
    return dense, local, table


def _dense_comms(rank: np.ndarray, comm_local: np.ndarray, local: dict[tuple[int, int], int]) -> np.ndarray:
    """Rank-local communicator ids -> dense ids, through a (rank, local id) table."""
    if not local:
        return np.full(rank.size, -1, np.int64)
    width = max(c for _, c in local) + 1
    lut = np.full((max(r for r, _ in local) + 1) * width, -1, np.int64)
    for (r, c), dense in local.items():
        lut[r * width + c] = dense
    known = (comm_local < width) & (rank.astype(np.int64) * width < lut.size)
    flat = np.where(known, rank.astype(np.int64) * width + np.where(known, comm_local, 0), 0)
    return np.where(known, lut[flat], -1)


def _split(files: list[RankFile]) -> dict[str, np.ndarray]:
    """Fields of all records as contiguous arrays, copied once from the mapped
    files: each 48-byte record is six 64-bit words, transposed into place."""
    total = sum(f.size for f in files)
    words = np.empty((6, total), np.uint64)
    pos = 0
    for f in files:
        for b in f.blocks:
            words[:, pos: pos + b.size] = np.ascontiguousarray(b).view(np.uint64).reshape(-1, 6).T
            pos += b.size
    w4, w5 = words[4], words[5]
    return {"t_enter": words[0], "t_leave": words[1], "bytes": words[2].view(np.int64), "callsite": words[3],
            "req": (w4 & 0xFFFFFFFF), "peer": (w4 >> 32).astype(np.uint32).view(np.int32),
            "tag": (w5 & 0xFFFFFFFF).astype(np.uint32).view(np.int32),
            "comm": ((w5 >> 32) & 0xFFFF).astype(np.int64), "call": (w5 >> 48).astype(np.int32)}


def build_records(files: list[RankFile], calls: CallTable) -> tuple[Records, pl.DataFrame]:
    clocks = rank_clocks(files)
    f = _split(files)
    rank = np.concatenate([np.full(f.size, f.rank, np.int32) for f in files]) if files else np.zeros(0, np.int32)
    thread = np.concatenate([f.thread for f in files]).astype(np.int32) if files else np.zeros(0, np.int32)
    call = f["call"]
    t_enter = _global_times(f["t_enter"], rank, clocks)
    t_leave = _global_times(f["t_leave"], rank, clocks)
    t_leave[f["t_leave"] == 0] = -1
    _, local, comms = comm_table(files)
    rec = Records(
        rank=rank, thread=thread, call=call, role=calls.role[call], starts=calls.starts[call],
        t_enter=t_enter, t_leave=t_leave, bytes=f["bytes"], callsite=f["callsite"],
        req=(f["req"] & 0x7FFFFFFF).astype(np.int64), immediate=(f["req"] & 0x80000000) != 0,
        peer=f["peer"], tag=f["tag"], comm=_dense_comms(rank, f["comm"], local),
        parent=_parents(call, rank, thread), event=_event_ids(call, rank, thread, t_enter), clocks=clocks)
    return rec, comms
