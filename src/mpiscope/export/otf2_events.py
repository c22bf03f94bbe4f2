"""OTF2 events: the records of streams.py as OTF2 events, written through the bundled
library's C event writer (OTF2_EvtWriter_*): the package's per-event objects cost ~10x more
than a ctypes call, and a ctypes call per record (~3 us) still made most of the export of
10^7 events. So a location's records go as columns to the mpiscope_export kernel
(native/kernels/export/otf2_events.c), which calls the library's writers, found here with
ctypes, in a C loop; only the rare one-sided records come back to Python (_write_rare)."""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from typing import Any

import _otf2
import numpy as np
import polars as pl
from otf2.enums import CollectiveOp, LockType, RmaAtomicType, RmaSyncLevel

from mpiscope.errors import UsageError
from mpiscope.export import streams as S
from mpiscope.export.regions import collective_op
from mpiscope.mpi.find import load_kernel

UNDEF32 = 0xFFFFFFFF


class EventWriters:
    """OTF2_EvtWriter_* of the bundled library, bound once with their C types."""

    def __init__(self) -> None:
        lib = ctypes.CDLL(_otf2.Config.lib_path())
        vp, u8, u32, u64 = ctypes.c_void_p, ctypes.c_uint8, ctypes.c_uint32, ctypes.c_uint64
        sig: dict[str, list[Any]] = {
            "Enter": [u32],
            "Leave": [u32],
            "MpiSend": [u32, u32, u32, u64],
            "MpiIsend": [u32, u32, u32, u64, u64],
            "MpiIsendComplete": [u64],
            "MpiIrecvRequest": [u64],
            "MpiRecv": [u32, u32, u32, u64],
            "MpiIrecv": [u32, u32, u32, u64, u64],
            "MpiCollectiveBegin": [],
            "MpiCollectiveEnd": [u8, u32, u32, u64, u64],
            "NonBlockingCollectiveRequest": [u64],
            "NonBlockingCollectiveComplete": [u8, u32, u32, u64, u64, u64],
            "RmaWinCreate": [u32],
            "RmaWinDestroy": [u32],
            "RmaCollectiveBegin": [],
            "RmaCollectiveEnd": [u8, u32, u32, u32, u64, u64],
            "RmaPut": [u32, u32, u64, u64],
            "RmaGet": [u32, u32, u64, u64],
            "RmaAtomic": [u32, u32, u8, u64, u64, u64],
            "RmaOpCompleteBlocking": [u32, u64],
            "RmaOpCompleteNonBlocking": [u32, u64],
            "RmaRequestLock": [u32, u32, u64, u8],
            "RmaReleaseLock": [u32, u32, u64],
        }
        self.fn: dict[str, Callable[..., int]] = {}
        for name, args in sig.items():
            f = getattr(lib, f"OTF2_EvtWriter_{name}")
            f.argtypes, f.restype = [vp, vp, u64, *args], ctypes.c_int
            self.fn[name] = f
        self.kernel = load_kernel("mpiscope_export").mse_otf2_write
        self.kernel.argtypes = [vp, ctypes.POINTER(_Writers), ctypes.POINTER(_Records), ctypes.c_int64, vp]
        self.kernel.restype = ctypes.c_int64
        self.writers = _Writers(
            *(ctypes.cast(getattr(lib, f"OTF2_EvtWriter_{n}"), vp) for n in _KERNEL_KINDS)
        )


# The writers the kernel calls, by record kind (streams.ENTER = 0 ... streams.NBC_DONE = 11).
_KERNEL_KINDS = [
    "Enter",
    "Leave",
    "MpiSend",
    "MpiIsend",
    "MpiIsendComplete",
    "MpiRecv",
    "MpiIrecvRequest",
    "MpiIrecv",
    "MpiCollectiveBegin",
    "MpiCollectiveEnd",
    "NonBlockingCollectiveRequest",
    "NonBlockingCollectiveComplete",
]


class _Writers(ctypes.Structure):
    _fields_ = [(n, ctypes.c_void_p) for n in _KERNEL_KINDS]


_COLUMNS = ("t", "kind", "x", "a", "b", "c", "d", "e")


class _Records(ctypes.Structure):
    _fields_ = [*((c, ctypes.c_void_p) for c in _COLUMNS), ("n", ctypes.c_int64)]


_PEER_KINDS = [S.SEND, S.ISEND, S.RECV, S.IRECV]
_ROOT_KINDS = [S.COLL_END, S.NBC_DONE]
_RMA_PEER_KINDS = [S.RMA_OP, S.RMA_LOCK, S.RMA_UNLOCK]
_WIN_KINDS = [
    S.RMA_OP,
    S.RMA_DONE,
    S.RMA_DONE_REQ,
    S.RMA_SYNC_END,
    S.RMA_LOCK,
    S.RMA_UNLOCK,
    S.RMA_WIN_CREATE,
    S.RMA_WIN_FREE,
]
# x for RMA_OP: 0 put, 1 get, else 2 + the OTF2 atomic type
_RMA_KIND = {
    "Put": 0,
    "Rput": 0,
    "Get": 1,
    "Rget": 1,
    "Accumulate": 2 + RmaAtomicType.ACCUMULATE.value,
    "Raccumulate": 2 + RmaAtomicType.ACCUMULATE.value,
    "Get_accumulate": 2 + RmaAtomicType.FETCH_AND_ACCUMULATE.value,
    "Rget_accumulate": 2 + RmaAtomicType.FETCH_AND_ACCUMULATE.value,
    "Fetch_and_op": 2 + RmaAtomicType.FETCH_AND_ACCUMULATE.value,
    "Compare_and_swap": 2 + RmaAtomicType.COMPARE_AND_SWAP.value,
}
# MPI_LOCK_SHARED as MPICH (235) and Open MPI (2) define it; anything else is exclusive
_SHARED_LOCK_TAGS = (235, 2)


def code_values(calls: list[str]) -> tuple[dict[int, int], dict[int, int]]:
    """Per call code: the collective op (COLL_END/NBC_DONE) and the RMA kind (RMA_OP)."""
    ops = {i: int(collective_op(c).value) for i, c in enumerate(calls)}
    rma = {i: _RMA_KIND.get(c.removeprefix("MPI_").removesuffix("_c"), 0) for i, c in enumerate(calls)}
    return ops, rma


def translate(
    recs: pl.DataFrame,
    local: pl.DataFrame,
    regions: dict[int, int],
    comm_refs: dict[int, int],
    win_refs: dict[int, int],
    ops: dict[int, int],
    rma: dict[int, int],
) -> pl.DataFrame:
    """World ranks to communicator ranks, trace ids to definition refs, call codes to regions."""
    k = pl.col("kind")
    peer, root = k.is_in(_PEER_KINDS), k.is_in(_ROOT_KINDS) | k.is_in(_RMA_PEER_KINDS)
    recs = recs.with_columns(
        pl.when(peer).then(pl.col("b")).otherwise(pl.col("a")).alias("_c"),
        pl.when(peer).then(pl.col("a")).when(root).then(pl.col("b")).alias("_w"),
    )
    recs = recs.join(
        local, left_on=["_c", "_w"], right_on=["comm", "world"], how="left", maintain_order="left"
    )
    rank = pl.col("local").fill_null(UNDEF32)

    def ref(col: str, refs: dict[int, int]) -> pl.Expr:
        return pl.col(col).replace_strict(refs, default=UNDEF32, return_dtype=pl.Int64)

    code = pl.col("code")
    return recs.select(
        "thread",
        "t",
        "kind",
        pl.when(k.is_in([S.ENTER, S.LEAVE]))
        .then(code.replace_strict(regions, default=0, return_dtype=pl.Int64))
        .when(k.is_in(_ROOT_KINDS))
        .then(code.replace_strict(ops, default=0, return_dtype=pl.Int64))
        .when(k == S.RMA_OP)
        .then(code.replace_strict(rma, default=0, return_dtype=pl.Int64))
        .otherwise(0)
        .alias("x"),
        pl.when(peer)
        .then(rank)
        .when(k.is_in(_ROOT_KINDS))
        .then(ref("a", comm_refs))
        .when(k.is_in(_WIN_KINDS))
        .then(ref("a", win_refs))
        .otherwise(pl.col("a"))
        .alias("a"),
        pl.when(peer).then(ref("b", comm_refs)).when(root).then(rank).otherwise(pl.col("b")).alias("b"),
        *collective_bytes(k),
        "e",
    )


def collective_bytes(k: pl.Expr) -> tuple[pl.Expr, pl.Expr]:
    """Columns c and d. For MpiCollectiveEnd and NonBlockingCollectiveComplete they are the
    bytes the call sent and received (streams._collective_records: `bytes`, `recv_bytes`),
    the one place that sets what OTF2 gets; an unknown (null, -1) count is 0."""
    coll = k.is_in(_ROOT_KINDS)
    sent = pl.when(coll).then(pl.col("c").clip(lower_bound=0)).otherwise(pl.col("c"))
    received = pl.when(coll).then(pl.col("d").clip(lower_bound=0)).otherwise(pl.col("d"))
    return sent.alias("c"), received.alias("d")


def write_location(ev: EventWriters, h: int, recs: pl.DataFrame) -> None:
    """One location's records (translate()'s columns), in order: the kernel writes them and
    stops at each rare (one-sided) record, which Python writes."""
    cols = [
        np.ascontiguousarray(recs[c].to_numpy(), dtype=np.uint8 if c == "kind" else np.int64)
        for c in _COLUMNS
    ]
    table = _Records(*(a.ctypes.data for a in cols), recs.height)
    err = ctypes.c_int(0)
    i = 0
    while i < recs.height:
        i = int(ev.kernel(h, ctypes.byref(ev.writers), ctypes.byref(table), i, ctypes.byref(err)))
        if i < recs.height:
            rc = err.value or _write_rare(ev, h, *(int(v[i]) for v in cols))
            if rc:
                raise UsageError(
                    f"the OTF2 library refused an event at {int(cols[0][i])} ns (error {rc}); "
                    f"report this trace to the mpiscope developers"
                )
            i += 1


def _write_rare(
    ev: EventWriters, h: int, t: int, k: int, x: int, a: int, b: int, c: int, d: int, e: int
) -> int:
    f, sync = ev.fn, RmaSyncLevel.PROCESS.value | RmaSyncLevel.MEMORY.value
    if k == S.NBC_REQ:
        return int(f["NonBlockingCollectiveRequest"](h, None, t, a))
    if k == S.NBC_DONE:
        return int(f["NonBlockingCollectiveComplete"](h, None, t, x, a, b, max(c, 0), max(d, 0), e))
    if k == S.RMA_OP:
        if x == 0:
            return int(f["RmaPut"](h, None, t, a, b, max(c, 0), d))
        if x == 1:
            return int(f["RmaGet"](h, None, t, a, b, max(c, 0), d))
        fetched = max(c, 0) if x - 2 != RmaAtomicType.ACCUMULATE.value else 0  # Accumulate returns nothing
        return int(f["RmaAtomic"](h, None, t, a, b, x - 2, max(c, 0), fetched, d))
    if k == S.RMA_DONE:
        return int(f["RmaOpCompleteBlocking"](h, None, t, a, b))
    if k == S.RMA_DONE_REQ:
        return int(f["RmaOpCompleteNonBlocking"](h, None, t, a, b))
    if k == S.RMA_SYNC_BEGIN:
        return int(f["RmaCollectiveBegin"](h, None, t))
    if k == S.RMA_SYNC_END:
        return int(f["RmaCollectiveEnd"](h, None, t, CollectiveOp.BARRIER.value, sync, a, UNDEF32, 0, 0))
    if k == S.RMA_LOCK:
        kind = LockType.SHARED if c in _SHARED_LOCK_TAGS else LockType.EXCLUSIVE
        return int(f["RmaRequestLock"](h, None, t, a, b, b, kind.value))
    if k == S.RMA_UNLOCK:
        return int(f["RmaReleaseLock"](h, None, t, a, b, b))
    if k == S.RMA_WIN_CREATE:
        return int(f["RmaWinCreate"](h, None, t, a))
    if k == S.RMA_WIN_FREE:
        return int(f["RmaWinDestroy"](h, None, t, a))
    return 0
