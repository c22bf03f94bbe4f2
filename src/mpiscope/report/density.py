"""The pyramid of bins: what each rank did in each time bin, at every zoom level.

Level K cuts the run into 1024·2^K equal bins; bin tile (K, I) holds bins
I·1024 .. (I+1)·1024 of every rank (docs/report-protocol.md, "Bin tile").
Time shares are exact: the overlap of each call with each bin, computed for
all calls at once with bincount (a call inside one bin adds its duration
there; a call across bins adds its partial first and last bins and, through a
difference array, whole middle bins). The threads of a rank are summed, then
clipped to the bin's width. A coarser level is the pairwise sum of a finer one.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from mpiscope.report.source import FAMILIES, Columns

BINS = 1024
NFAM = len(FAMILIES)
COLLECTIVE, ONE_SIDED = 1, 2


@dataclass(frozen=True)
class Points:
    """Quantities counted at an instant (a send's entry, a receive's completion, a call's entry),
    grouped by rank: rows off[r]..off[r+1] are rank r's."""

    off: np.ndarray  # i64 [ranks+1]
    t: np.ndarray  # f64 relative ns
    bytes: np.ndarray  # f64
    msgs: float  # messages per row (0 or 1)
    starts: float  # call entries per row (0 or 1)


@dataclass(frozen=True)
class BinInput:
    """Calls as intervals grouped by rank, and the point quantities."""

    ranks: int
    span_ns: float
    iv_off: np.ndarray  # i64 [ranks+1]
    fam: np.ndarray  # u8
    a: np.ndarray  # f64 relative ns: entry
    b: np.ndarray  # f64 relative ns: leave (run end if the call never returned)
    points: list[Points]

    @staticmethod
    def from_columns(c: Columns) -> BinInput:
        return bin_input(c.events, c.messages, c.ranks, c.span_ns)


def _offsets(rank: np.ndarray, ranks: int) -> np.ndarray:
    return np.searchsorted(rank, np.arange(ranks + 1)).astype(np.int64)


def _by_rank(
    rank: np.ndarray, t: np.ndarray, nbytes: np.ndarray, ranks: int, msgs: float, starts: float
) -> Points:
    order = np.argsort(rank, kind="stable")
    return Points(_offsets(rank[order], ranks), t[order], nbytes[order], msgs, starts)


def bin_input(events: pl.DataFrame, messages: pl.DataFrame, ranks: int, span_ns: float) -> BinInput:
    """From event-tile columns (with `family` and, where known, `rbytes`; or with `pbytes` for
    `bytes`, `rbytes` and `coll`, see source.bin_columns) and message-tile columns. Sends count at
    the send's entry, receives at their completion, collectives' bytes sent and received and
    one-sided calls' bytes at their entry."""
    if not events["rank"].is_sorted():
        events = events.sort("rank", maintain_order=True)
    rank = events["rank"].to_numpy()
    fam = events["family"].to_numpy()
    a = events["t0"].to_numpy()
    b = events["t1"].to_numpy()
    b = np.where(np.isnan(b), span_ns, np.maximum(b, a))
    if "pbytes" in events.columns:  # already the bytes that count at the call's entry
        pbytes = events["pbytes"].to_numpy()
    else:
        coll = events["coll"].to_numpy() >= 0
        pbytes = np.where(coll | (fam == ONE_SIDED), events["bytes"].to_numpy(), 0.0)
        if "rbytes" in events.columns:
            pbytes += np.where(coll, events["rbytes"].to_numpy(), 0.0)
    off = _offsets(rank, ranks)
    calls = Points(off, a, pbytes, 0.0, 1.0)
    nbytes = messages["bytes"].to_numpy()
    sends = _by_rank(messages["src"].to_numpy(), messages["ts"].to_numpy(), nbytes, ranks, 1.0, 0.0)
    trl = messages["trl"].to_numpy()
    done = ~np.isnan(trl)
    recvs = _by_rank(messages["dst"].to_numpy()[done], trl[done], nbytes[done], ranks, 1.0, 0.0)
    return BinInput(ranks, span_ns, off, fam, a, b, [calls, sends, recvs])


def busy_ns(fam: np.ndarray, a: np.ndarray, b: np.ndarray, w: float, nb: int) -> np.ndarray:
    """[NFAM, nb] ns each family spends in each bin of width w, from intervals [a, b) within
    [0, nb·w) (summed over threads, not clipped)."""
    i0 = np.minimum((a / w).astype(np.int64), nb - 1)
    i1 = np.maximum(np.minimum((b / w).astype(np.int64), nb - 1), i0)
    key = fam.astype(np.int64) * nb
    same = i0 == i1
    ns: np.ndarray = np.asarray(
        np.bincount(key + i0, np.where(same, b - a, (i0 + 1) * w - a), NFAM * nb), np.float64
    )
    span = ~same
    ns += np.bincount(key[span] + i1[span], b[span] - i1[span] * w, NFAM * nb)
    mid = span & (i1 > i0 + 1)
    if mid.any():  # whole bins between the first and the last: a difference array
        k2 = fam[mid].astype(np.int64) * (nb + 1)
        d = np.bincount(k2 + i0[mid] + 1, None, NFAM * (nb + 1)) - np.bincount(
            k2 + i1[mid], None, NFAM * (nb + 1)
        )
        ns += (np.cumsum(d.reshape(NFAM, nb + 1), axis=1)[:, :nb] * w).ravel()
    return ns.reshape(NFAM, nb)


@dataclass
class Level:
    """One level's bins for all ranks: time in ns (clipped) and point sums, [ranks, nb]."""

    k: int
    width_ns: float
    fam_ns: np.ndarray  # f32 [NFAM, ranks, nb]
    mpi_ns: np.ndarray  # f32 [ranks, nb]
    bytes: np.ndarray
    msgs: np.ndarray
    starts: np.ndarray

    def coarser(self) -> Level:
        def half(x: np.ndarray) -> np.ndarray:
            s: np.ndarray = x[..., 0::2] + x[..., 1::2]
            return s

        return Level(
            self.k - 1,
            self.width_ns * 2,
            half(self.fam_ns),
            half(self.mpi_ns),
            half(self.bytes),
            half(self.msgs),
            half(self.starts),
        )


def compute_level(inp: BinInput, k: int, t_start: float = 0.0, t_end: float | None = None) -> Level:
    """Level k's bins over [t_start, t_end) (default the whole run; a window must be whole tiles
    of level k), one rank at a time so memory stays at one rank's bins."""
    t_end = inp.span_ns if t_end is None else t_end
    w = inp.span_ns / (BINS * 2**k)
    nb = max(1, round((t_end - t_start) / w))
    # Times in f32 (shares are quantised to 1/255 anyway), point sums in f64 (bytes add up).
    lv = Level(
        k,
        w,
        np.zeros((NFAM, inp.ranks, nb), np.float32),
        np.zeros((inp.ranks, nb), np.float32),
        np.zeros((inp.ranks, nb)),
        np.zeros((inp.ranks, nb)),
        np.zeros((inp.ranks, nb)),
    )
    for r in range(inp.ranks):
        _add_times(inp, r, lv, t_start, nb)
        _add_points(inp, r, lv, t_start, nb)
    return lv


def _add_times(inp: BinInput, r: int, lv: Level, t_start: float, nb: int) -> None:
    """Rank r's calls in the window [t_start, t_start + nb·w): time per family, then clipped."""
    s, e = inp.iv_off[r], inp.iv_off[r + 1]
    if e == s:
        return
    w, end = lv.width_ns, nb * lv.width_ns
    a, b = inp.a[s:e] - t_start, inp.b[s:e] - t_start
    keep = (b > 0) & (a < end)
    ns = busy_ns(inp.fam[s:e][keep], np.clip(a[keep], 0, end), np.clip(b[keep], 0, end), w, nb)
    lv.fam_ns[:, r] = np.minimum(ns, w)
    lv.mpi_ns[r] = np.minimum(ns.sum(axis=0), w)


def _add_points(inp: BinInput, r: int, lv: Level, t_start: float, nb: int) -> None:
    """Rank r's bytes, messages and call entries in the window."""
    for p in inp.points:
        s, e = p.off[r], p.off[r + 1]
        if e == s:
            continue
        t = p.t[s:e] - t_start
        keep = (t >= 0) & (t < nb * lv.width_ns)
        idx = np.minimum((t[keep] / lv.width_ns).astype(np.int64), nb - 1)
        if p.starts or p.msgs:
            n = np.bincount(idx, None, nb)
            lv.starts[r] += p.starts * n
            lv.msgs[r] += p.msgs * n
        lv.bytes[r] += np.bincount(idx, p.bytes[s:e][keep], nb)


def _u8(ns: np.ndarray, w: float) -> np.ndarray:
    return np.clip(np.rint(ns * (255.0 / w)), 0, 255).astype(np.uint8)


def tile_table(lv: Level, i: int) -> dict[str, np.ndarray]:
    """The `bins` table of bin tile (lv.k, i) relative to the level's first bin: row = rank·1024 + bin."""
    sl = slice(i * BINS, (i + 1) * BINS)
    table = {f"share{f}": _u8(lv.fam_ns[f, :, sl], lv.width_ns).ravel() for f in range(NFAM)}
    table["bytes"] = lv.bytes[:, sl].astype(np.float32).ravel()
    table["msgs"] = lv.msgs[:, sl].astype(np.float32).ravel()
    table["starts"] = lv.starts[:, sl].astype(np.uint32).ravel()
    table["mpi"] = _u8(lv.mpi_ns[:, sl], lv.width_ns).ravel()
    return table


def tile_attrs(k: int, i: int, span_ns: float, ranks: int) -> dict[str, float | int]:
    return {
        "k": k,
        "i": i,
        "t_start": i * span_ns / 2**k,
        "t_end": (i + 1) * span_ns / 2**k,
        "ranks": ranks,
        "bins": BINS,
    }
