"""ctypes binding of the incremental annealing kernel (native/kernels/*.c, see anneal.h).

The kernel holds one map and its link loads and evaluates moves (a
permutation of the places of a few ranks) incrementally. Bytes go to it as
int64 so incremental and full evaluation agree exactly; a pattern with
fractional byte counts is scaled to integers first (`scale`).
"""

from __future__ import annotations

import ctypes
from ctypes import POINTER, c_double, c_int, c_int32, c_int64, c_uint8, c_uint64, c_void_p
from dataclasses import dataclass
from functools import cache

import numpy as np
import numpy.typing as npt

from mpiscope.errors import NativeBuildError
from mpiscope.mapping.topology import Network

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]

OBJECTIVES = {"eval": 0, "hopbytes": 1, "maxlink": 2}


class _Metrics(ctypes.Structure):
    _fields_ = [("hop_sum", c_int64), ("hop_bytes", c_int64), ("maxlink", c_int64)]


_I32P = POINTER(c_int32)
_I64P = POINTER(c_int64)


class _Log(ctypes.Structure):
    """search.c's msa_log: the moves a worker accepted."""
    _fields_ = [("cap", c_int64), ("n", c_int64), ("k", _I32P), ("ranks", _I32P), ("perm", _I32P),
                ("thr", POINTER(c_double))]


@dataclass
class MoveLog:
    """Moves accepted by a worker, in order: move i puts ranks[i, j] in the place of ranks[i, perm[i, j]]
    (j < k[i]); thr[i] is the largest objective change it would still be accepted with."""
    k: npt.NDArray[np.int32]
    ranks: npt.NDArray[np.int32]
    perm: npt.NDArray[np.int32]
    thr: FloatArray

    @staticmethod
    def empty(n: int, k: int) -> MoveLog:
        return MoveLog(np.zeros(n, np.int32), np.zeros((n, k), np.int32), np.zeros((n, k), np.int32),
                       np.zeros(n, np.float64))

    def __len__(self) -> int:
        return int(self.k.size)

    def take(self, idx: npt.NDArray[np.int64]) -> MoveLog:
        return MoveLog(self.k[idx], self.ranks[idx], self.perm[idx], self.thr[idx])

    @staticmethod
    def concat(logs: list[MoveLog]) -> MoveLog:
        return MoveLog(*(np.concatenate([getattr(g, f) for g in logs]) for f in ("k", "ranks", "perm", "thr")))


@cache
def _lib() -> ctypes.CDLL:
    from mpiscope.mpi.find import load_kernel

    lib = load_kernel("mpiscope_anneal")
    lib.msa_create.restype = c_void_p
    lib.msa_create.argtypes = [c_int, _I32P, c_int, c_int, c_int64, c_int64, _I32P, _I32P, POINTER(c_int64), _I32P]
    lib.msa_free.argtypes = [c_void_p]
    lib.msa_recompute.argtypes = [c_void_p]
    lib.msa_set_map.argtypes = [c_void_p, _I32P]
    lib.msa_metrics_now.argtypes = [c_void_p, POINTER(_Metrics)]
    lib.msa_get_map.argtypes = [c_void_p, _I32P, c_int]
    lib.msa_get_loads.argtypes = [c_void_p, POINTER(c_int64)]
    lib.msa_eval.argtypes = [c_void_p, c_int, _I32P, _I32P, POINTER(_Metrics)]
    lib.msa_apply.argtypes = [c_void_p, c_int, _I32P, _I32P]
    lib.msa_anneal.argtypes = [c_void_p, c_int64, _I32P, c_int, c_int, c_double, c_int, POINTER(c_uint64),
                               _I64P, POINTER(_Log)]
    lib.msa_use_bound.argtypes = [c_void_p, c_int]
    lib.msa_bound.restype = c_double
    lib.msa_bound.argtypes = [c_void_p, c_int, _I32P, _I32P, c_int]
    lib.msa_merge.argtypes = [c_void_p, c_int64, c_int, _I32P, _I32P, _I32P, POINTER(c_double), c_int, _I64P,
                              POINTER(c_uint8)]
    lib.msa_apply_list.argtypes = [c_void_p, c_int64, c_int, _I32P, _I32P, _I32P]
    lib.msa_snapshot.argtypes = [c_void_p]
    lib.msa_restore.restype = c_int
    lib.msa_restore.argtypes = [c_void_p]
    lib.msa_best_objective.restype = c_double
    lib.msa_best_objective.argtypes = [c_void_p]
    lib.msa_offer_best.argtypes = [c_void_p, c_int]
    lib.msa_reset_best.argtypes = [c_void_p]
    lib.msa_sample.argtypes = [c_void_p, c_int64, _I32P, c_int, c_int, POINTER(c_uint64), POINTER(c_double),
                               POINTER(c_double)]
    return lib


def _i32(a: npt.ArrayLike) -> npt.NDArray[np.int32]:
    return np.ascontiguousarray(a, dtype=np.int32)


def _p32(a: npt.NDArray[np.int32]) -> ctypes._Pointer[c_int32]:
    return a.ctypes.data_as(_I32P)


def fill_slots(network: Network, node_of_rank: IntArray) -> IntArray:
    """Extend a map with one empty-slot pseudo-rank per free slot, so every move is a permutation."""
    free = network.ranks_per_node - np.bincount(node_of_rank, minlength=network.nodes)
    extra = np.repeat(np.arange(network.nodes, dtype=np.int64), free)
    return np.concatenate((np.asarray(node_of_rank, dtype=np.int64), extra))


def integer_bytes(nbytes: FloatArray) -> tuple[npt.NDArray[np.int64], float]:
    """Byte counts as int64 and the factor applied (1 when they are whole numbers already)."""
    b = np.asarray(nbytes, dtype=np.float64)
    if b.size == 0 or (np.all(b == np.round(b)) and b.sum() < 2.0**52):
        return b.astype(np.int64), 1.0
    scale = 2.0**40 / float(b.sum())      # keep every sum of loads well inside int64 and exact
    return np.maximum(np.round(b * scale), 1).astype(np.int64), scale


class Kernel:
    """One map under incremental evaluation. Ranks ≥ nranks are empty slots."""

    def __init__(self, network: Network, nranks: int, src: IntArray, dst: IntArray, nbytes: FloatArray,
                 node_of_rank: IntArray, seed: int = 0) -> None:
        self.network, self.nranks = network, nranks
        self.lib = _lib()
        ib, self.scale = integer_bytes(nbytes)
        full = _i32(fill_slots(network, node_of_rank))
        self.nslots = full.size
        self._keep = (_i32(network.dims), _i32(src), _i32(dst), np.ascontiguousarray(ib, dtype=np.int64))
        dims, s, d, b = self._keep
        self.handle = self.lib.msa_create(network.ndim, _p32(dims), int(network.wraps), network.ranks_per_node,
                                          self.nslots, s.size, _p32(s), _p32(d),
                                          b.ctypes.data_as(POINTER(c_int64)), _p32(full))
        if not self.handle:
            raise NativeBuildError(f"the annealing kernel handles at most 8 dimensions, not {network.ndim}")
        self.rng = c_uint64(seed * 0x9E3779B97F4A7C15 % 2**64 or 1)
        self.rejected_early = 0

    def __del__(self) -> None:
        if getattr(self, "handle", None):
            self.lib.msa_free(self.handle)
            self.handle = None

    def set_map(self, node_of_rank: IntArray) -> None:
        self.lib.msa_set_map(self.handle, _p32(_i32(fill_slots(self.network, node_of_rank))))

    def map(self, best: bool = False, slots: bool = False) -> IntArray:
        out = np.empty(self.nslots, dtype=np.int32)
        self.lib.msa_get_map(self.handle, _p32(out), int(best))
        return out.astype(np.int64) if slots else out[: self.nranks].astype(np.int64)

    def raw_metrics(self) -> tuple[int, int, int]:
        m = _Metrics()
        self.lib.msa_metrics_now(self.handle, ctypes.byref(m))
        return m.hop_sum, m.hop_bytes, m.maxlink

    def objective(self, kind: str) -> float:
        """The current objective in kernel units (bytes × scale)."""
        hs, hb, ml = self.raw_metrics()
        return float(hs) * ml if kind == "eval" else float(hb) if kind == "hopbytes" else float(ml)

    def loads(self) -> npt.NDArray[np.int64]:
        out = np.empty(self.network.links, dtype=np.int64)
        self.lib.msa_get_loads(self.handle, out.ctypes.data_as(POINTER(c_int64)))
        return out

    def recompute(self) -> None:
        """Full re-evaluation of the current map (the baseline the incremental moves are measured against)."""
        self.lib.msa_recompute(self.handle)

    def eval_move(self, ranks: npt.ArrayLike, perm: npt.ArrayLike) -> tuple[int, int, int]:
        """(hop_sum, hop_bytes, maxlink) if ranks[i] took the place of ranks[perm[i]]; nothing applied."""
        r, p = _i32(ranks), _i32(perm)
        m = _Metrics()
        self.lib.msa_eval(self.handle, r.size, _p32(r), _p32(p), ctypes.byref(m))
        return m.hop_sum, m.hop_bytes, m.maxlink

    def bound(self, ranks: npt.ArrayLike, perm: npt.ArrayLike, kind: str) -> float:
        """A lower bound of the objective after the move (exact for hop-bytes); nothing applied."""
        r, p = _i32(ranks), _i32(perm)
        return float(self.lib.msa_bound(self.handle, r.size, _p32(r), _p32(p), OBJECTIVES[kind]))

    def apply_move(self, ranks: npt.ArrayLike, perm: npt.ArrayLike) -> None:
        r, p = _i32(ranks), _i32(perm)
        self.lib.msa_apply(self.handle, r.size, _p32(r), _p32(p))

    def anneal(self, rounds: int, window: tuple[int, ...], k: int, tries: int, temperature: float,
               kind: str, log: MoveLog | None = None) -> tuple[int, int, int]:
        """`rounds` SA rounds in C: (moves evaluated, accepted, new bests). With a log (as long as
        `rounds`, k columns), the accepted moves are written to it and the log is cut to them.
        rejected_early counts the moves decided on the lower bound alone."""
        stats = np.zeros(4, dtype=np.int64)
        w = _i32(window)
        clog = None
        if log is not None:
            clog = _Log(len(log), 0, _p32(log.k), _p32(log.ranks), _p32(log.perm),
                        log.thr.ctypes.data_as(POINTER(c_double)))
        self.lib.msa_anneal(self.handle, rounds, _p32(w), k, tries, temperature, OBJECTIVES[kind],
                            ctypes.byref(self.rng), stats.ctypes.data_as(_I64P),
                            ctypes.byref(clog) if clog is not None else None)
        if log is not None and clog is not None:
            n = clog.n
            log.k, log.ranks, log.perm, log.thr = log.k[:n], log.ranks[:n], log.perm[:n], log.thr[:n]
        self.rejected_early += int(stats[3])
        return int(stats[0]), int(stats[1]), int(stats[2])

    def early_rejection(self, on: bool) -> None:
        """Whether rounds reject moves on bound.c's lower bound first (same decisions either way)."""
        self.lib.msa_use_bound(self.handle, int(on))

    def merge(self, log: MoveLog, kind: str) -> tuple[MoveLog, int]:
        """Replay workers' accepted moves on this map, each kept if its change here is within its
        threshold (001 §5.3 update): (the moves kept, new bests)."""
        stats = np.zeros(2, dtype=np.int64)
        kept = np.zeros(len(log), dtype=np.uint8)
        k, r, p = _i32(log.k), _i32(log.ranks), _i32(log.perm)
        thr = np.ascontiguousarray(log.thr, dtype=np.float64)
        self.lib.msa_merge(self.handle, len(log), r.shape[1], _p32(k), _p32(r), _p32(p),
                           thr.ctypes.data_as(POINTER(c_double)), OBJECTIVES[kind], stats.ctypes.data_as(_I64P),
                           kept.ctypes.data_as(POINTER(c_uint8)))
        return log.take(np.flatnonzero(kept)), int(stats[1])

    def apply_moves(self, log: MoveLog) -> None:
        k, r, p = _i32(log.k), _i32(log.ranks), _i32(log.perm)
        self.lib.msa_apply_list(self.handle, len(log), r.shape[1], _p32(k), _p32(r), _p32(p))

    def snapshot(self) -> None:
        """Remember the map and its loads (one snapshot), for restore()."""
        self.lib.msa_snapshot(self.handle)

    def restore(self) -> bool:
        """Back to the last snapshot; False if there is none to go back to."""
        return bool(self.lib.msa_restore(self.handle))

    def best_objective(self) -> float:
        """Objective of the best map msa_anneal/offer_best has seen (inf before any)."""
        return float(self.lib.msa_best_objective(self.handle))

    def offer_best(self, kind: str) -> None:
        self.lib.msa_offer_best(self.handle, OBJECTIVES[kind])

    def reset_best(self) -> None:
        self.lib.msa_reset_best(self.handle)

    def sample(self, n: int, window: tuple[int, ...], k: int, kind: str) -> tuple[FloatArray, FloatArray]:
        """Objective and maxlink changes of n random moves (not applied)."""
        out, dmax = np.empty(n, dtype=np.float64), np.empty(n, dtype=np.float64)
        w = _i32(window)
        self.lib.msa_sample(self.handle, n, _p32(w), k, OBJECTIVES[kind], ctypes.byref(self.rng),
                            out.ctypes.data_as(POINTER(c_double)), dmax.ctypes.data_as(POINTER(c_double)))
        return out, dmax
