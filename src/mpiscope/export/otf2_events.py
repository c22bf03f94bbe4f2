"""OTF2 events: the records of streams.py as OTF2 events, written through the bundled
library's C event writer (OTF2_EvtWriter_*), bound once with ctypes: the package's
per-event objects cost ~10x more, too much for 10^7 events."""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from typing import Any

import _otf2
import polars as pl
from otf2.enums import CollectiveOp, LockType, RmaAtomicType, RmaSyncLevel

from mpiscope.errors import UsageError
from mpiscope.export import streams as S
from mpiscope.export.regions import collective_op

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
        "c",
        "d",
        "e",
    )


def write_location(ev: EventWriters, h: int, cols: list[list[int]]) -> None:
    """One location's records, in order: the hot loop, one C call per record. Kinds are
    literals here (streams.ENTER == 0, ...): a module attribute per comparison costs more."""
    f = ev.fn
    Enter, Leave, Send, Isend, IsendDone = (
        f["Enter"],
        f["Leave"],
        f["MpiSend"],
        f["MpiIsend"],
        f["MpiIsendComplete"],
    )
    Recv, IrecvReq, Irecv = f["MpiRecv"], f["MpiIrecvRequest"], f["MpiIrecv"]
    CollBegin, CollEnd = f["MpiCollectiveBegin"], f["MpiCollectiveEnd"]
    for t, k, x, a, b, c, d, e in zip(*cols):
        if k == 0:
            rc = Enter(h, None, t, x)
        elif k == 1:
            rc = Leave(h, None, t, x)
        elif k == 3:
            rc = Isend(h, None, t, a, b, c & 0xFFFFFFFF, d, e)
        elif k == 7:
            rc = Irecv(h, None, t, a, b, c & 0xFFFFFFFF, d, e)
        elif k == 4:
            rc = IsendDone(h, None, t, a)
        elif k == 6:
            rc = IrecvReq(h, None, t, a)
        elif k == 2:
            rc = Send(h, None, t, a, b, c & 0xFFFFFFFF, d)
        elif k == 5:
            rc = Recv(h, None, t, a, b, c & 0xFFFFFFFF, d)
        elif k == 8:
            rc = CollBegin(h, None, t)
        elif k == 9:
            rc = CollEnd(h, None, t, x, a, b, max(0, c), max(0, d))
        else:
            rc = _write_rare(ev, h, t, k, x, a, b, c, d, e)
        if rc:
            raise UsageError(
                f"the OTF2 library refused an event at {t} ns (error {rc}); "
                f"report this trace to the mpiscope developers"
            )


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
