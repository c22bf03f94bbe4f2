"""Raw ticks -> nanoseconds on rank 0's clock.

Step 1, ticks -> local CLOCK_MONOTONIC ns: a line through the rank's first
calibration pair (at MPI_Init) and its latest one (finalize, fatal signal, or
the last block started; the pair taken 2 ms after init if nothing later).
Step 2, local -> rank 0: subtract the offset measured against rank 0,
linearly interpolated between the init and finalize measurements (drift).
Step 3 (match.py feeds it): if a message still appears received before it
was sent, shift whole ranks by the least amounts that remove every such
violation (difference constraints, solved by Bellman-Ford on ranks).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mpiscope.errors import TraceCorrupt
from mpiscope.trace import record as R
from mpiscope.trace.reader import RankFile


@dataclass(frozen=True)
class RankClock:
    rank: int
    tick_ref: int
    ns_ref: int
    ns_per_tick: float
    offset_ns: float      # offset to rank 0 at local time offset_at_ns
    offset_at_ns: float
    drift: float          # d(offset)/d(local ns)

    def global_ns(self, local_ns: int) -> int:
        """A time of this rank's CLOCK_MONOTONIC (a header's ns_end) on rank 0's clock: step 2, as
        the column kernel does it for the records."""
        offset = self.offset_ns + (local_ns - self.offset_at_ns) * self.drift if self.drift else self.offset_ns
        return local_ns - round(offset)

    def to_dict(self) -> dict[str, float]:
        return {"rank": self.rank, "ns_per_tick": self.ns_per_tick, "offset_ns": self.offset_ns,
                "drift_ppm": self.drift * 1e6}


def _pairs(f: RankFile) -> list[tuple[int, int]]:
    """Every (tick, ns) calibration pair a rank file holds, by time."""
    h = f.header
    pairs = [(int(h["tick_init"]), int(h["ns_init"])), (int(h["tick_cal"]), int(h["ns_cal"])),
             (int(h["tick_end"]), int(h["ns_end"]))]
    pairs += list(zip(f.block_ticks.tolist(), f.block_ns.tolist()))
    return sorted(p for p in pairs if p[0] and p[1])


def _rate(pairs: list[tuple[int, int]]) -> tuple[float, int]:
    """ns per tick over the widest span, and that span in ns."""
    if len(pairs) < 2 or pairs[-1][0] <= pairs[0][0]:
        return 1.0, 0
    (t0, n0), (t1, n1) = pairs[0], pairs[-1]
    return (n1 - n0) / (t1 - t0), n1 - n0


def rank_clocks(files: list[RankFile]) -> dict[int, RankClock]:
    """Clock conversion of every rank.

    All ranks of one booted host read the same invariant TSC. A rank that
    finished measured the tick rate over the whole run and keeps its own; a
    rank that did not takes the host's rate measured over the longest span (a
    rank killed early has a short span, and a short span magnifies the jitter
    of its calibration pairs into a rate error of 1e-3 on loaded cores). A
    finished rank's times thus never depend on the other ranks' files, which
    may be damaged or missing."""
    measured: dict[bytes, list[tuple[float, int]]] = {}
    for f in files:
        if int(f.header["clock_kind"]) == R.CLOCK_TSC:
            measured.setdefault(bytes(f.header["hostname"]) + bytes(f.header["boot_id"]), []).append(_rate(_pairs(f)))
    best: dict[bytes, tuple[float, int]] = {}
    for host, rates in measured.items():
        # the longest span among the rates that agree with the host's median (a damaged
        # calibration pair of one rank must not set the rate of all)
        median = float(np.median([r for r, _ in rates]))
        agree = [x for x in rates if abs(x[0] - median) <= 1e-3 * median]
        best[host] = max(agree or rates, key=lambda x: x[1])
    clocks = {}
    for f in files:
        h = f.header
        if int(h["clock_kind"]) == R.CLOCK_TSC:
            tick_ref, ns_ref = _pairs(f)[0]
            own = int(h["state"]) == R.STATE_FINISHED and int(h["tick_end"]) and int(h["ns_end"])
            rate = _rate(_pairs(f))[0] if own else best[bytes(h["hostname"]) + bytes(h["boot_id"])][0]
        else:
            tick_ref, ns_ref, rate = 0, 0, 1.0
        off0, at0 = float(h["offset_init_ns"]), float(h["offset_init_at_ns"])
        off1, at1 = float(h["offset_end_ns"]), float(h["offset_end_at_ns"])
        drift = (off1 - off0) / (at1 - at0) if at1 > at0 else 0.0
        clock = RankClock(f.rank, tick_ref, ns_ref, rate, off0, at0, drift)
        _check(clock)
        clocks[f.rank] = clock
    return clocks


def _check(c: RankClock) -> None:
    """A damaged header must stop the merge with a sentence, not overflow in it."""
    # ns per tick: a TSC between 1 MHz and 1 THz; drift: ppm for real clocks, noisy offsets of a short
    # run stay far below 1
    if max(c.tick_ref, c.ns_ref, c.offset_at_ns) < 2**63 and abs(c.offset_ns) < 2**62 \
            and 1e-3 < c.ns_per_tick < 1e3 and abs(c.drift) < 1:
        return
    raise TraceCorrupt(f"rank {c.rank}'s file has damaged clock fields; remove raw/rank-{c.rank:06d}.msc "
                       f"(its events are lost) or record the program again with mpiscope run")


def clock_problem(f: RankFile) -> str | None:
    """Why a rank's clock fields cannot be used, or None."""
    try:
        rank_clocks([f])
    except TraceCorrupt as e:
        return str(e)
    return None


@dataclass(frozen=True)
class ShiftBounds:
    """How far the clock correction may move one rank against another (issue 23): ranks of one
    booted host whose offsets were not measured read one clock and are never moved against
    each other; ranks whose offsets to rank 0 were measured by a round trip, by at most half
    their round trips (the offsets' uncertainty) plus 10 us and 10 ppm of the run for the drift
    between the two measurements; any other pair (offsets given without a round trip), by at
    most the run's duration, which only damage exceeds."""
    host: np.ndarray       # host (and boot) number of each rank, -1 unknown
    one_clock: np.ndarray  # bool: the rank reads its host's clock as it is (no offset measured)
    rtt: np.ndarray        # ns: the best round trip of its offset measurements, -1 none
    span: int              # the run's duration, ns

    def between(self, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
        same = (self.host[src] == self.host[dst]) & (self.host[src] >= 0) & self.one_clock[src] & self.one_clock[dst]
        measured = (self.rtt[src] >= 0) & (self.rtt[dst] >= 0)
        uncertain = (self.rtt[src] + self.rtt[dst]) // 2 + 10_000 + self.span // 100_000
        return np.where(same, 0, np.where(measured, np.minimum(uncertain, self.span), self.span))


def shift_bounds(files: list[RankFile], nranks: int) -> ShiftBounds:
    host = np.full(nranks, -1, np.int64)
    one_clock = np.zeros(nranks, bool)
    rtt = np.full(nranks, -1, np.int64)
    hosts: dict[bytes, int] = {}
    for f in files:
        h = f.header
        host[f.rank] = hosts.setdefault(bytes(h["hostname"]) + bytes(h["boot_id"]), len(hosts))
        trip = max(int(h["sync_rtt_init_ns"]), int(h["sync_rtt_end_ns"]))
        no_offset = int(h["offset_init_ns"]) == 0 and int(h["offset_end_ns"]) == 0
        one_clock[f.rank] = no_offset and trip <= 0
        if trip > 0 or f.rank == 0:  # rank 0 is the reference: its offset is 0 by definition
            rtt[f.rank] = max(trip, 0)
    return ShiftBounds(host, one_clock, rtt, run_span_ns(files))


def run_span_ns(files: list[RankFile]) -> int:
    """How long the run lasted (ns, at least 1 ms): the widest span of any rank's calibration pairs."""
    spans = [p[-1][1] - p[0][1] for p in map(_pairs, files) if len(p) >= 2]
    return max([1_000_000, *spans])


def causality_shifts(src: np.ndarray, dst: np.ndarray, send_enter: np.ndarray, recv_leave: np.ndarray,
                     nranks: int, bound_ns: int | np.ndarray | None = None,
                     cap_ns: int | None = None) -> tuple[np.ndarray, bool, np.ndarray]:
    """Per-rank shifts (ns, >= 0) so that recv_leave + s[dst] >= send_enter + s[src].

    Returns (shifts, feasible, refused). Infeasible means a cycle of violations no
    constant shift can remove; the caller clamps what remains. A message that asks
    for more than bound_ns (one bound, or one per message: ShiftBounds) is left out and
    its index returned in refused; a rank whose shift would still exceed cap_ns (default:
    the bound, where it is one number) is not shifted. Either makes the result infeasible.
    """
    if cap_ns is None and bound_ns is not None and np.ndim(bound_ns) == 0:
        cap_ns = int(bound_ns)
    need = send_enter - recv_leave  # > 0: a violation of that size
    shifts = np.zeros(nranks, dtype=np.int64)
    refused = np.flatnonzero(need > bound_ns) if bound_ns is not None else np.zeros(0, np.int64)
    if refused.size:
        keep = ~np.isin(np.arange(need.size), refused)
        src, dst, need = src[keep], dst[keep], need[keep]
    if need.size == 0 or need.max() <= 0:
        return shifts, not refused.size, refused
    shifts, feasible = _bellman_ford(src, dst, need, nranks)
    if cap_ns is not None and (shifts > cap_ns).any():
        shifts[shifts > cap_ns] = 0
        feasible = False
    return shifts, feasible and not refused.size, refused


def _bellman_ford(src: np.ndarray, dst: np.ndarray, need: np.ndarray, nranks: int) -> tuple[np.ndarray, bool]:
    shifts = np.zeros(nranks, dtype=np.int64)
    # Strongest constraint per ordered pair of ranks.
    key = src.astype(np.int64) * nranks + dst
    order = np.argsort(key, kind="stable")
    key_s, need_s = key[order], need[order]
    starts = np.flatnonzero(np.r_[True, key_s[1:] != key_s[:-1]])
    w = np.maximum.reduceat(need_s, starts)
    es, ed = key_s[starts] // nranks, key_s[starts] % nranks
    for _ in range(nranks):
        cand = shifts[es] + w
        new = shifts.copy()
        np.maximum.at(new, ed, cand)
        if np.array_equal(new, shifts):
            return shifts, True
        shifts = new
    return shifts, False
