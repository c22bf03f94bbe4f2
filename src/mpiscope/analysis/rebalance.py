"""New work shares from measured compute times (S-CAT 003 §4.2; SPEC §2 "Rebalance").

Rank i computed its w_i rows in t_i seconds; its new share is w_i * mean(t) / t_i, rescaled to
the same total and rounded to multiples of a granularity G by largest remainder, so the total is
kept exactly. The mean cancels in the rescaling, so the shares are proportional to w_i / t_i,
i.e. to each rank's measured speed. For 003 Table 2 (16 x 128 rows, 4.99 ... 8.27 s) and G = 4:
[184, 164, 144, 132, 128, 128, 120, 124, 120, 120, 120, 116, 112, 112, 112, 112].

Partition files (what `mpiscope rebalance -o` writes and the `mm` example reads): blank lines and
lines starting with '#' are ignored; every other line, one per rank in rank order, is either ROWS
or START END (the half-open row range [START, END), ranges following each other from row 0).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from mpiscope.analysis.imbalance import compute_phases, done_alone
from mpiscope.errors import UsageError
from mpiscope.trace import Trace

SCHEMA = "mpiscope.rebalance/1"
DEFAULT_GRANULARITY = 4  # SPEC §2: the granularity visible in 003 Table 3 (the paper does not state one)


@dataclass(frozen=True)
class Rebalance:
    times_s: list[float]
    old_shares: list[int]
    shares: list[int]
    granularity: int
    phase: int | str | None = None  # the trace phase the times come from ("all": summed; None: times given)
    run_id: str | None = None

    @property
    def rows(self) -> list[tuple[int, int]]:
        """Half-open row range [start, end) of each rank."""
        ends = [sum(self.shares[: i + 1]) for i in range(len(self.shares))]
        return [(end - share, end) for share, end in zip(self.shares, ends, strict=True)]

    @property
    def predicted_times_s(self) -> list[float]:
        """Each rank's time if it keeps its measured seconds per row."""
        return [t * new / old for t, new, old in zip(self.times_s, self.shares, self.old_shares, strict=True)]

    def to_json(self) -> dict[str, Any]:
        before, after = max(self.times_s), max(self.predicted_times_s)
        return {
            "schema": SCHEMA,
            "run_id": self.run_id,
            "phase": self.phase,
            "granularity": self.granularity,
            "total": sum(self.shares),
            "times_s": self.times_s,
            "old_shares": self.old_shares,
            "shares": self.shares,
            "rows": [list(r) for r in self.rows],
            "predicted_times_s": self.predicted_times_s,
            "max_time_s": before,
            "predicted_max_time_s": after,
            "predicted_gain_pct": 100.0 * (before - after) / before,
        }


def new_shares(times_s: Sequence[float], shares: Sequence[int], granularity: int = DEFAULT_GRANULARITY) -> list[int]:
    """Shares proportional to w_i / t_i, multiples of `granularity`, with the same total."""
    _check(times_s, shares, granularity)
    units = sum(shares) // granularity
    # exact rationals: floors and remainders are exact, so the leftover units are never negative
    speed = [Fraction(w) / Fraction(t) for w, t in zip(shares, times_s, strict=True)]
    total_speed = sum(speed, Fraction(0))
    exact = [units * s / total_speed for s in speed]
    floors = [math.floor(x) for x in exact]
    left = units - sum(floors)
    # largest remainder first; equal remainders go to the lower rank
    for i in sorted(range(len(exact)), key=lambda i: (-(exact[i] - floors[i]), i))[:left]:
        floors[i] += 1
    return [f * granularity for f in floors]


def rebalance(times_s: Sequence[float], shares: Sequence[int], granularity: int = DEFAULT_GRANULARITY,
              phase: int | str | None = None, run_id: str | None = None) -> Rebalance:
    return Rebalance(times_s=[float(t) for t in times_s], old_shares=[int(w) for w in shares],
                     shares=new_shares(times_s, shares, granularity), granularity=granularity,
                     phase=phase, run_id=run_id)


def _check(times_s: Sequence[float], shares: Sequence[int], granularity: int) -> None:
    if len(times_s) != len(shares):
        raise UsageError(f"{len(times_s)} times for {len(shares)} shares; give one time and one share per rank")
    if not shares:
        raise UsageError("no ranks to rebalance; give one time and one share per rank")
    if granularity < 1:
        raise UsageError(f"granularity {granularity} is not a positive number of rows; use --granularity 1 or more")
    for rank, (t, w) in enumerate(zip(times_s, shares, strict=True)):
        if not (math.isfinite(t) and t > 0):
            raise UsageError(f"rank {rank}'s time {t} s is not a positive number; "
                             f"give every rank's compute time (choose another --phase if it did not compute)")
        if w < granularity:
            raise UsageError(f"granularity {granularity} rows is larger than rank {rank}'s share of {w} rows; "
                             f"use --granularity {max(w, 1)} or give every rank at least {granularity} rows")
    total = sum(shares)
    if total % granularity:
        raise UsageError(f"the total of {total} rows is not a multiple of granularity {granularity}; "
                         f"choose a --granularity that divides {total}")


def parse_times(text: str) -> list[float]:
    """'4.99,5.65,...' -> seconds per rank."""
    try:
        times = [float(x) for x in text.replace(" ", "").split(",")]
    except ValueError:
        raise UsageError(f"--times {text!r} is not a comma-separated list of seconds; "
                         f"give one per rank, e.g. --times 4.99,5.65,6.34") from None
    if not all(math.isfinite(t) and t > 0 for t in times):
        raise UsageError(f"--times {text!r} holds a time that is not a positive number of seconds; "
                         f"give each rank's compute seconds")
    return times


SHARES_RE = re.compile(r"^\s*(\d+)\s*[xX]\s*(\d+)\s*$")


def parse_shares(text: str) -> list[int] | None:
    """'128x16' (rows x ranks) or '184,164,...'; None if `text` is neither (it may be a file)."""
    if m := SHARES_RE.match(text):
        return [int(m[1])] * int(m[2])
    if re.fullmatch(r"\s*\d+\s*(,\s*\d+\s*)+", text):
        return [int(x) for x in text.split(",")]
    return None


def parse_partition(text: str, source: str) -> list[int]:
    """Rows per rank from a partition file's text (format in the module docstring)."""
    shares: list[int] = []
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        fields = line.split()
        if len(fields) not in (1, 2) or not all(f.isdigit() for f in fields):
            raise UsageError(f"{source} line {number} ({line!r}) is not ROWS or START END; "
                             f"write one line per rank, e.g. '128' or '0 128'")
        values = [int(f) for f in fields]
        if len(values) == 2:
            if values[0] != sum(shares) or values[1] < values[0]:
                raise UsageError(f"{source} line {number}: rows {values[0]}-{values[1]} do not follow row "
                                 f"{sum(shares)}; write START END ranges that follow each other from row 0")
            values = [values[1] - values[0]]
        shares.append(values[0])
    if not shares:
        raise UsageError(f"{source} has no rank lines; write one line per rank (ROWS or START END)")
    return shares


def format_partition(result: Rebalance, note: str = "") -> str:
    """The partition file for `mm --partition`: START END per rank."""
    head = [
        "# mpiscope rebalance: one line per rank, START END = its rows [START, END)",
        f"# from shares {','.join(map(str, result.old_shares))}, granularity {result.granularity}"
        + (f", {note}" if note else ""),
    ]
    return "\n".join(head + [f"{start} {end}" for start, end in result.rows]) + "\n"


ALL_PHASES = "all"
# Below this the ranks computed nothing to share: the shares of 2.3 and 1.2 µs (a threaded run whose
# threads were always in MPI) predicted a 30 % gain.
MIN_WORK_S = 1e-3


def _some_work(times: list[float], where: str) -> None:
    if max(times, default=0.0) < MIN_WORK_S:
        raise UsageError(f"in {where} the ranks computed next to nothing (at most {max(times, default=0.0) * 1e6:.1f} µs "
                         f"each), so there is no work to share out; choose another --phase, or give --times")


def phase_times(trace: Trace, phase: int | str | None = None) -> tuple[list[float], int | str]:
    """Per-rank compute seconds of a phase of the trace, and that phase's index.

    Default: the phase whose slowest rank computed longest (for mm, the product). "all": the
    computation summed over every phase, the share of an iterative program's steps as a whole (one
    step of two is noise: a LAMMPS phase of two time steps gave its slow rank 8 of 240 rows, and the
    run computed 7 times longer on the other)."""
    phases = compute_phases(trace).phases
    if not phases:
        raise UsageError(f"{trace.path} has no phase to cut (no collective that every rank takes part in), "
                         f"so it gives no compute times; give them with --times")
    if phase == ALL_PHASES:
        totals = [sum(p.compute_ns[r] for p in phases) / 1e9 for r in range(len(phases[0].compute_ns))]
        _some_work(totals, f"the run of {trace.path}")
        if done_alone(totals):
            raise UsageError(f"over the run of {trace.path} one rank did nearly all the computation: its work was not "
                             f"shared out by rows, so new shares cannot balance it; give --times")
        return totals, ALL_PHASES
    if phase is None:
        chosen = max(phases, key=lambda p: (max(p.compute_ns), -p.index))
    else:
        found = [p for p in phases if p.index == phase]
        if not found:
            raise UsageError(f"{trace.path} has no phase {phase}; choose --phase from "
                             f"{min(p.index for p in phases)} to {max(p.index for p in phases)}")
        chosen = found[0]
    times = [ns / 1e9 for ns in chosen.compute_ns]
    _some_work(times, f"phase {chosen.index} of {trace.path}")
    if done_alone(times):
        slow, fast = max(range(len(times)), key=times.__getitem__), min(range(len(times)), key=times.__getitem__)
        raise UsageError(f"in phase {chosen.index} of {trace.path} rank {slow} computed {times[slow]:.4g} s and rank "
                         f"{fast} {times[fast]:.2g} s: its work was not shared out by rows, so new shares cannot "
                         f"balance it; choose a --phase in which every rank computed its part, or give --times")
    return times, chosen.index
