"""ctypes binding of the merge kernels (native/kernels/merge/*.c, see merge.h).

The kernels write into arrays allocated here, in the dtypes trace/columns.py
documents, so everything downstream of them is unchanged NumPy/Polars.
"""

from __future__ import annotations

import ctypes
import os
from ctypes import POINTER, c_int32, c_int64, c_uint8, c_void_p
from functools import cache
from typing import Any

import numpy as np
import numpy.typing as npt

I64 = npt.NDArray[np.int64]

# Threads of the kernels that split their work; capped, since those passes
# are bound by memory (page faults on fresh output arrays) more than by cores.
WORKERS = min(4, os.cpu_count() or 1)

BLOCK_DTYPE = np.dtype([("recs", "<u8"), ("n", "<i8"), ("rank", "<i4"), ("thread", "<i4"), ("clock", "<i4"),
                        ("unused", "<i4")])
CLOCK_DTYPE = np.dtype([("tick_ref", "<i8"), ("ns_ref", "<i8"), ("ns_per_tick", "<f8"), ("offset_ns", "<f8"),
                        ("offset_at_ns", "<f8"), ("drift", "<f8")])

# struct msm_columns: name, dtype, in the struct's order
COLUMNS = [("rank", np.int32), ("thread", np.int32), ("call", np.int32), ("peer", np.int32), ("tag", np.int32),
           ("comm", np.int32), ("role", np.uint8), ("starts", np.bool_), ("immediate", np.bool_),
           ("req", np.uint32), ("t_enter", np.int64), ("t_leave", np.int64), ("bytes", np.int64),
           ("event", np.int64), ("callsite", np.uint64)]


class _Columns(ctypes.Structure):
    _fields_ = [(name, c_void_p) for name, _ in COLUMNS]


class _Tables(ctypes.Structure):
    _fields_ = [("role_of_call", c_void_p), ("starts_of_call", c_void_p), ("first_call_id", c_int64),
                ("comm_lut", c_void_p), ("comm_width", c_int64), ("lut_size", c_int64)]


# struct msm_events, in the struct's order
EVENT_COLUMNS = [("event", np.int64), ("t_enter", np.int64), ("t_leave", np.int64), ("comm", np.int64),
                 ("bytes", np.int64), ("req", np.int64), ("t_complete", np.int64), ("completed_by", np.int64),
                 ("rank", np.int32), ("thread", np.int32), ("peer", np.int32), ("tag", np.int32),
                 ("call", np.uint32), ("role", np.uint8), ("callsite", np.uint64)]


class _QuietTables(ctypes.Structure):
    _fields_ = [("role_of_call", c_void_p), ("starts_of_call", c_void_p), ("ncalls", c_int64),
                ("first_call_id", c_int64), ("role_create", c_uint8), ("role_create_win", c_uint8),
                ("release", c_uint8)]


class _Events(ctypes.Structure):
    _fields_ = [(name, c_void_p) for name, _ in EVENT_COLUMNS]


class _EventInputs(ctypes.Structure):
    _fields_ = [("nevents", c_int64), ("first_call_id", c_int64), ("call_code", c_void_p), ("link_index", c_void_p),
                ("link_t_complete", c_void_p), ("link_completed_by", c_void_p), ("nlinks", c_int64)]


# struct msm_side, in the struct's order
SIDE_COLUMNS = [("comm", np.int64), ("posted", np.int64), ("event", np.int64), ("bytes", np.int64),
                ("leave", np.int64), ("src", np.int32), ("dst", np.int32), ("tag", np.int32)]


# struct msm_envelopes, in the struct's order
_ENVELOPE = [("comm", np.int64), ("t", np.int64), ("ev", np.int64), ("src", np.int32), ("dst", np.int32),
             ("tag", np.int32)]


class _Envelopes(ctypes.Structure):
    _fields_ = [(name, c_void_p) for name, _ in _ENVELOPE] + [("n", c_int64)]


class _Side(ctypes.Structure):
    _fields_ = [(name, c_void_p) for name, _ in SIDE_COLUMNS]


class _Links(ctypes.Structure):
    _fields_ = [("index", c_void_p), ("t_complete", c_void_p), ("bytes", c_void_p), ("peer", c_void_p),
                ("tag", c_void_p), ("n", c_int64)]


@cache
def _lib() -> ctypes.CDLL:
    from mpiscope.mpi.find import load_kernel

    lib = load_kernel("mpiscope_merge")
    lib.msm_columns.restype = ctypes.c_int
    lib.msm_columns.argtypes = [c_void_p, c_int64, c_void_p, POINTER(_Tables), c_int32, POINTER(_Columns)]
    lib.msm_link_starts.restype = ctypes.c_int
    lib.msm_link_starts.argtypes = [POINTER(_Columns), c_int64, c_uint8, c_uint8, c_void_p, c_int64, c_int32,
                                    c_void_p, c_void_p, c_void_p, c_void_p, c_void_p]
    lib.msm_match.restype = c_int64
    lib.msm_match.argtypes = [POINTER(_Envelopes), POINTER(_Envelopes), c_void_p, c_void_p]
    lib.msm_p2p.restype = ctypes.c_int
    lib.msm_p2p.argtypes = [POINTER(_Columns), c_int64, c_void_p, POINTER(_Links), c_void_p, POINTER(_Side),
                            POINTER(_Side)]
    lib.msm_events.restype = ctypes.c_int
    lib.msm_events.argtypes = [POINTER(_Columns), c_int64, POINTER(_EventInputs), c_int32, POINTER(_Events)]
    lib.msm_quiet_cuts.restype = c_int64
    lib.msm_quiet_cuts.argtypes = [c_void_p, c_int64, POINTER(_QuietTables), c_int64, c_void_p, c_int64]
    lib.msm_factorize.restype = c_int64
    lib.msm_factorize.argtypes = [c_void_p, c_void_p, c_int64, c_void_p, c_void_p]
    return lib


def _p(a: npt.NDArray[Any]) -> int:
    return int(a.ctypes.data)


def _out_of_memory(what: str) -> MemoryError:
    return MemoryError(f"out of memory in the merge kernel ({what})")


def _columns_struct(cols: dict[str, npt.NDArray[Any]]) -> _Columns:
    return _Columns(*(_p(cols[name]) for name, _ in COLUMNS))


def columns(blocks: npt.NDArray[np.void], clocks: npt.NDArray[np.void], role_of_call: npt.NDArray[np.uint8],
            starts_of_call: npt.NDArray[np.bool_], first_call_id: int,
            comm_lut: I64, comm_width: int) -> dict[str, npt.NDArray[Any]]:
    """Per-record columns of all blocks (BLOCK_DTYPE rows; their records must
    stay mapped during the call), in block order."""
    n = int(blocks["n"].sum())
    cols: dict[str, npt.NDArray[Any]] = {name: np.empty(n, dtype) for name, dtype in COLUMNS}
    role = np.ascontiguousarray(role_of_call, np.uint8)
    starts = np.ascontiguousarray(starts_of_call, np.uint8)
    lut = np.ascontiguousarray(comm_lut, np.int64)
    tables = _Tables(_p(role), _p(starts), first_call_id, _p(lut) if lut.size else None, comm_width, lut.size)
    if _lib().msm_columns(_p(blocks), blocks.size, _p(clocks), ctypes.byref(tables), WORKERS,
                          ctypes.byref(_columns_struct(cols))) != 0:
        raise _out_of_memory("numbering events")
    return cols


def link_starts(cols: dict[str, npt.NDArray[Any]], start: I64, role_complete: int,
                role_immediate: int) -> tuple[I64, I64, npt.NDArray[np.int32], npt.NDArray[np.int32], I64]:
    """(t_complete, completed_by, peer, tag, bytes) of each start (record indices)."""
    start = np.ascontiguousarray(start, np.int64)
    k = start.size
    t_complete, completed_by, nbytes = np.empty(k, np.int64), np.empty(k, np.int64), np.empty(k, np.int64)
    peer, tag = np.empty(k, np.int32), np.empty(k, np.int32)
    if _lib().msm_link_starts(ctypes.byref(_columns_struct(cols)), cols["call"].size, role_complete,
                              role_immediate, _p(start), k, WORKERS, _p(t_complete), _p(completed_by),
                              _p(peer), _p(tag), _p(nbytes)) != 0:
        raise _out_of_memory("linking requests")
    return t_complete, completed_by, peer, tag, nbytes


def match(send: dict[str, npt.NDArray[Any]], recv: dict[str, npt.NDArray[Any]]) -> tuple[I64, I64]:
    """Indices of matched (send, receive) pairs. Each side: comm, src, dst, tag (the
    envelope), t (posting time), ev (event id) by name."""
    sides = [{f: np.ascontiguousarray(side[f], dt) for f, dt in _ENVELOPE} for side in (send, recv)]
    m = min(side["t"].size for side in sides)
    si, ri = np.empty(m, np.int64), np.empty(m, np.int64)
    envs = [_Envelopes(*(_p(side[f]) for f, _ in _ENVELOPE), side["t"].size) for side in sides]
    got = _lib().msm_match(ctypes.byref(envs[0]), ctypes.byref(envs[1]), _p(si), _p(ri))
    if got < 0:
        raise _out_of_memory("matching messages")
    return si[:got], ri[:got]


def events(cols: dict[str, npt.NDArray[Any]], nevents: int, first_call_id: int, call_code: npt.NDArray[np.uint32],
           link_index: I64,
           link_t_complete: I64, link_completed_by: I64) -> dict[str, npt.NDArray[Any]]:
    """The events table's rows (one per call record, row = event id) as arrays;
    t_complete and completed_by are -1 where the row is no linked start."""
    out = {name: np.empty(nevents, dtype) for name, dtype in EVENT_COLUMNS}
    code = np.ascontiguousarray(call_code, np.uint32)
    links = [np.ascontiguousarray(a, np.int64) for a in (link_index, link_t_complete, link_completed_by)]
    inputs = _EventInputs(nevents, first_call_id, _p(code), *(_p(a) for a in links), links[0].size)
    if _lib().msm_events(ctypes.byref(_columns_struct(cols)), cols["call"].size, ctypes.byref(inputs), WORKERS,
                         ctypes.byref(_Events(*(_p(out[name]) for name, _ in EVENT_COLUMNS)))) != 0:
        raise ValueError("event ids are not dense; the column kernel and the events kernel disagree")
    return out


def factorize(value: npt.NDArray[np.uint64], rank: npt.NDArray[np.int32] | None = None) -> tuple[
        npt.NDArray[np.int32], I64]:
    """(code of each key, first row of each code), codes by first appearance. The key is
    value, or with rank the call site (rank, address): rank << 48 | low 48 bits of value."""
    value = np.ascontiguousarray(value, np.uint64)
    ranks = None if rank is None else np.ascontiguousarray(rank, np.int32)
    code, first = np.empty(value.size, np.int32), np.empty(value.size, np.int64)
    distinct = _lib().msm_factorize(None if ranks is None else _p(ranks), _p(value), value.size, _p(code),
                                    _p(first))
    if distinct < 0:
        raise _out_of_memory("factorising keys")
    return code, first[:distinct]


Sides = tuple[dict[str, npt.NDArray[Any]], dict[str, npt.NDArray[Any]]]


def p2p(cols: dict[str, npt.NDArray[Any]], kind_of_role: npt.NDArray[np.uint8],
        links: dict[str, npt.NDArray[Any]]) -> Sides:
    """(sends, receives) as SIDE_COLUMNS arrays; kind_of_role holds merge.h's MSM_* bits."""
    kind = np.ascontiguousarray(kind_of_role, np.uint8)
    ln = _Links(*(_p(links[f]) for f in ("index", "t_complete", "bytes", "peer", "tag")), links["index"].size)
    rec, n = ctypes.byref(_columns_struct(cols)), cols["call"].size
    counts = np.zeros(2, np.int64)
    _lib().msm_p2p(rec, n, _p(kind), ctypes.byref(ln), _p(counts), None, None)
    sides = [{name: np.empty(int(c), dtype) for name, dtype in SIDE_COLUMNS} for c in counts]
    structs = [_Side(*(_p(side[name]) for name, _ in SIDE_COLUMNS)) for side in sides]
    if _lib().msm_p2p(rec, n, _p(kind), ctypes.byref(ln), _p(counts), ctypes.byref(structs[0]),
                      ctypes.byref(structs[1])) != 0:
        raise _out_of_memory("collecting sends and receives")
    return sides[0], sides[1]


def quiet_cuts(blocks: npt.NDArray[np.void], role_of_call: npt.NDArray[np.uint8],
               starts_of_call: npt.NDArray[np.bool_], first_call_id: int, role_create: int, role_create_win: int,
               most: int, release: bool = False) -> I64:
    """Where one single-threaded rank's records (BLOCK_DTYPE rows, mapped during the call) are
    cut into pieces of at most `most` records, as far as its quiet points allow (quiet.py); with
    `release` (every block a view of a mapped file), each block's pages leave the process once
    read."""
    role = np.ascontiguousarray(role_of_call, np.uint8)
    starts = np.ascontiguousarray(starts_of_call, np.uint8)
    tables = _QuietTables(_p(role), _p(starts), min(role.size, starts.size), first_call_id, role_create,
                          role_create_win, int(release))
    total = int(blocks["n"].sum())
    cuts = np.empty(2 * (total // max(most, 1)) + 4, np.int64)
    got = _lib().msm_quiet_cuts(_p(blocks), blocks.size, ctypes.byref(tables), most, _p(cuts), cuts.size)
    if got < 0:
        raise _out_of_memory("finding where a rank's records can be cut")
    return cuts[:got]
