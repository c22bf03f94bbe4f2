"""All records of all ranks as NumPy columns, with what the merge derives per
record: global times, role codes, dense communicator ids, and the event id
(in (rank, t_enter) order) of the call each record belongs to.

Records arrive grouped by rank, then thread, in recording order; the column
kernel (native/kernels/merge/columns.c) derives all of it in one pass over
that layout, straight from the mapped rank files.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from mpiscope.trace import native
from mpiscope.trace import record as R
from mpiscope.trace.clocks import RankClock, rank_clocks
from mpiscope.trace.reader import RankFile

FIRST_TABLE_ID = 16
ROLES = ["", "tool", "env", "send", "isend", "recv", "irecv", "probe", "mprobe", "mrecv", "imrecv",
         "isendrecv", "psend_init", "precv_init", "coll", "create", "create_win", "rma", "comm", "completion",
         "complete", "local", "recv_part", "psend", "precv", "pstart", "immediate", "pcoll_init", "pcoll",
         "coll_recv", "rc", "count"]
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

    def known(self) -> np.ndarray:
        """bool by call id: an id the recorder writes (the others can only be damage)."""
        return np.array([bool(n) for n in self.names], bool)

    def enum(self) -> pl.Enum:
        return pl.Enum(sorted({n for n in self.names if n.startswith("MPI_")}))

    def enum_codes(self) -> np.ndarray:
        """Index in enum() of each call id's name (0 for sub-records, which never become rows)."""
        index = {n: i for i, n in enumerate(self.enum().categories.to_list())}
        return np.array([index.get(n, 0) for n in self.names], np.uint32)

    def series(self, codes: np.ndarray, name: str = "call") -> pl.Series:
        """Calls by their enum_codes(), as the Enum column."""
        enum = self.enum()
        return pl.Series(name, enum.categories, dtype=enum).gather(pl.Series(codes))


@dataclass
class Records:
    """Every record of every rank, as the kernels take them (native.COLUMNS)."""
    rank: np.ndarray
    thread: np.ndarray
    call: np.ndarray
    peer: np.ndarray
    tag: np.ndarray
    comm: np.ndarray         # dense communicator id, -1 unknown
    role: np.ndarray
    starts: np.ndarray
    immediate: np.ndarray    # bool: MPI returned a shared, already complete request
    req: np.ndarray          # request id without the immediate flag
    t_enter: np.ndarray      # int64 ns, rank 0's clock
    t_leave: np.ndarray      # int64 ns; -1: the call never returned
    bytes: np.ndarray
    event: np.ndarray        # event id of the call a record belongs to (its own for calls), -1 if none
    callsite: np.ndarray
    clocks: dict[int, RankClock]

    def __len__(self) -> int:
        return int(self.call.size)

    def columns(self) -> dict[str, np.ndarray]:
        """The per-record arrays by name, as the kernels take them."""
        return {name: getattr(self, name) for name, _ in native.COLUMNS}


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


def _comm_lut(local: dict[tuple[int, int], int]) -> tuple[np.ndarray, int]:
    """(rank, local id) -> dense id as a flat table: lut[rank * width + local id]."""
    if not local:
        return np.zeros(0, np.int64), 0
    width = max(c for _, c in local) + 1
    lut = np.full((max(r for r, _ in local) + 1) * width, -1, np.int64)
    for (r, c), dense in local.items():
        lut[r * width + c] = dense
    return lut, width


def block_table(files: list[RankFile], clock_of: dict[int, int]) -> np.ndarray:
    """Every block of every file, in file order, for the column kernel."""
    # the kernel reads each block as packed records in place
    assert all(b.flags.c_contiguous and b.dtype == R.REC_DTYPE for f in files for b in f.blocks)
    rows = [(b.ctypes.data, b.size, f.rank, t, clock_of[f.rank], 0)
            for f in files for b, t in zip(f.blocks, f.block_thread)]
    return np.array(rows, native.BLOCK_DTYPE)


def build_records(files: list[RankFile], calls: CallTable, clocks: dict[int, RankClock] | None = None,
                  dense: dict[int, int] | None = None) -> tuple[Records, pl.DataFrame]:
    """Global times, role codes, dense communicator ids, parents and event ids of
    every record, computed by the column kernel in one pass over the mapped files.
    A merge in pieces (pieces.py) gives the clocks and the dense communicator ids
    (gid -> id) of the whole trace; event ids then start at 0 in the piece."""
    if clocks is None:
        clocks = rank_clocks(files)
    clocks = {f.rank: clocks[f.rank] for f in files}
    table = np.array([(c.tick_ref, c.ns_ref, c.ns_per_tick, c.offset_ns, c.offset_at_ns, c.drift)
                      for c in clocks.values()], native.CLOCK_DTYPE)
    if dense is None:
        _, local, comms = comm_table(files)
    else:
        local = {(f.rank, d.local_id): dense[d.gid] for f in files for d in f.comms}
        comms = pl.DataFrame()
    lut, width = _comm_lut(local)
    c = native.columns(block_table(files, {r: i for i, r in enumerate(clocks)}), table, calls.role, calls.starts,
                       FIRST_TABLE_ID, lut, width)
    _created_ids(c, calls, lut, width)
    return Records(clocks=clocks, **c), comms


def _created_ids(c: dict[str, np.ndarray], calls: CallTable, lut: np.ndarray, width: int) -> None:
    """A call that creates a communicator or window names the new one in its record by its rank-local
    id: the trace's id instead (comms.parquet's comm, as the later calls on it name it), so that the
    export puts each window's creation in the call that made it (two windows created before either
    was used both went into the second MPI_Win_create) and gives each communicator its parent.
    MPI_Comm_idup's record keeps its request id, which its completion names."""
    role = c["role"]  # by record: a compare over 10 M records, where a lookup by call id took 30 ms
    rows = np.flatnonzero((role == ROLE["create_win"]) | (role == ROLE["create"]))
    req, call = c["req"][rows], c["call"][rows].astype(np.int64)
    rows = rows[(req > 0) & (req < width)
                & (~calls.starts[np.minimum(call, calls.starts.size - 1)] | (call >= calls.starts.size))]
    if not rows.size or not lut.size:
        return
    at = c["rank"][rows].astype(np.int64) * width + c["req"][rows].astype(np.int64)
    dense = np.where(at < lut.size, lut[np.minimum(at, lut.size - 1)], -1)
    c["req"][rows] = np.maximum(dense, 0).astype(c["req"].dtype)  # 0: unknown (the events' request is null)
