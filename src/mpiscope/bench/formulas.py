"""Overlap figures from raw per-rank timings: IMB-NBC's and OSU's definitions.

The benchmark programs report, for every rank, t_pure, t_ovrlp, t_cpu (time in
the CPU kernel), t_test (time inside MPI_Test calls during the kernel) and the
blocking collective's time. These functions turn them into the numbers the
Intel MPI Benchmarks and the OSU Micro-Benchmarks print, so that both can be
checked on synthetic timings.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


def imb_overlap_pct(t_pure: float, t_cpu: float, t_ovrlp: float) -> float:
    """IMB-NBC (src_c/IMB_output.c; 002): 100·max(0, min(1, (t_pure + t_CPU − t_ovrlp)/max(t_pure, t_CPU)))."""
    denominator = max(t_pure, t_cpu)
    if denominator <= 0.0:
        return 0.0
    return 100.0 * max(0.0, min(1.0, (t_pure + t_cpu - t_ovrlp) / denominator))


def osu_overlap_pct(overall: float, compute: float, test: float, pure: float) -> float:
    """OSU (osu_util.c, print_stats_nbc): max(0, 100 − 100·(overall − (compute − test))/pure).

    `compute` includes the MPI_Test calls made during the computation, which OSU
    counts as overhead and subtracts; the arguments are averages over ranks.
    OSU clips at 0 only.
    """
    if pure <= 0.0:
        return 0.0
    return max(0.0, 100.0 - 100.0 * (overall - (compute - test)) / pure)


def imb_rank(t_ovrlp: Sequence[float]) -> int:
    """The rank IMB-NBC reports: the first one with the largest t_ovrlp (IMB_calculate_times)."""
    best = 0
    for rank, value in enumerate(t_ovrlp):
        if value > t_ovrlp[best]:
            best = rank
    return best


def mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


@dataclass(frozen=True)
class OverlapPoint:
    """One operation at one size and progress setting, all times in µs."""

    rank: int                   # the rank IMB reports (largest t_ovrlp)
    t_pure_us: float
    t_cpu_us: float
    t_ovrlp_us: float
    t_test_us: float
    overlap_pct: float
    blocking_us: float          # IMB-MPI1-style blocking time, slowest rank (t_max)
    blocking_plus_cpu_us: float
    osu_overall_us: float       # OSU's columns: averages over ranks
    osu_compute_us: float
    osu_pure_us: float
    osu_overlap_pct: float

    @property
    def faster(self) -> str:
        """Which costs less for this computation: the nonblocking form overlapped, or blocking then compute."""
        return "nonblocking" if self.t_ovrlp_us <= self.blocking_plus_cpu_us else "blocking"


def overlap_point(t_pure: Sequence[float], t_ovrlp: Sequence[float], t_cpu: Sequence[float],
                  t_test: Sequence[float], t_blocking: Sequence[float]) -> OverlapPoint:
    """Per-rank seconds → the IMB row (from the rank with the largest t_ovrlp) and OSU's averages."""
    us = 1e6
    r = imb_rank(t_ovrlp)
    blocking = max(t_blocking) * us
    osu_overall, osu_compute = mean(t_ovrlp) * us, mean(t_cpu) * us
    osu_test, osu_pure = mean(t_test) * us, mean(t_pure) * us
    return OverlapPoint(
        rank=r, t_pure_us=t_pure[r] * us, t_cpu_us=t_cpu[r] * us, t_ovrlp_us=t_ovrlp[r] * us,
        t_test_us=t_test[r] * us,
        overlap_pct=imb_overlap_pct(t_pure[r], t_cpu[r], t_ovrlp[r]),
        blocking_us=blocking, blocking_plus_cpu_us=blocking + t_cpu[r] * us,
        osu_overall_us=osu_overall, osu_compute_us=osu_compute, osu_pure_us=osu_pure,
        osu_overlap_pct=osu_overlap_pct(osu_overall, osu_compute, osu_test, osu_pure))


def passive_ratio(t_pure: float, t_ovrlp: float) -> float:
    """Truly_passive_put: t_ovrlp/t_pure; ≈ 2 without passive progress, ≈ 1 with it (002)."""
    return t_ovrlp / t_pure if t_pure > 0.0 else float("nan")


def bandwidth_mb_s(size_bytes: int, t_us: float) -> float:
    """IMB's throughput column: bytes/µs = MB/s (10^6 bytes per second)."""
    return size_bytes / t_us if t_us > 0.0 else 0.0
