"""Incremental move evaluation vs full re-evaluation of a rank map (001 §7.3: one evaluation took 0.18 s).

    .venv/bin/python bench/map_speed.py [--network torus:16x16x16] [--pattern bruck:4096] [--json -]

Measured in this run on the same map (the BISEM map of the pattern), interleaved over `--repeats`
rounds, in CPU time of one core:
  annealing  rounds of the annealer itself (one 2-swap in a RANGE window each, Metropolis decision),
             over mpiscope's schedule with a time limit: T0 by the 50 % rule, then x0.95 for 180
             steps of equal time down to T0/10^4 (`--seconds` of CPU time in all). Most moves are
             decided on the exact lower bound of bound.c (hop sums, links at the maximum); the
             others, and every accepted one, get the exact change. The decisions are those of the
             exact change (tests/unit/test_mapping_kernel.py).
  exact      the exact objective and maxlink change of every move, none applied (msa_sample).
  full       the kernel recomputing every route and link load of the map.
Prints the median rate of each, the spread (min..max) and the ratios to full re-evaluation.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time

import numpy as np
import numpy.typing as npt

from mpiscope import output
from mpiscope.mapping.anneal import COOLING_STEPS, AnnealParams, initial_temperature
from mpiscope.mapping.bisem import bisem, default_levels
from mpiscope.mapping.kernel import Kernel
from mpiscope.mapping.patterns import parse_pattern
from mpiscope.mapping.topology import parse_network
from mpiscope.mpi.find import built_against


def schedule_rate(k: Kernel, start: npt.NDArray[np.int64], window: tuple[int, ...], t0: float,
                  seconds: float) -> float:
    """Rounds per CPU second over the schedule, each step given the same CPU time, from the start map."""
    k.set_map(start)
    k.reset_best()
    rounds, per_step = 0, seconds / COOLING_STEPS
    t_start = time.process_time()
    for step in range(COOLING_STEPS):
        end = t_start + (step + 1) * per_step
        while time.process_time() < end:
            k.anneal(1000, window, 2, 1, t0 * 0.95**step, "eval")
            rounds += 1000
    return rounds / (time.process_time() - t_start)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--network", default="torus:16x16x16")
    ap.add_argument("--pattern", default="bruck:4096")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--moves", type=int, default=100_000, help="exact evaluations per repeat")
    ap.add_argument("--seconds", type=float, default=9.0, help="CPU seconds of annealing per repeat")
    ap.add_argument("--full", type=int, default=50, help="full evaluations per repeat")
    ap.add_argument("--json", help="write the figures as JSON (- for stdout)")
    a = ap.parse_args()
    net, pat = parse_network(a.network), parse_pattern(a.pattern)
    start, areas = bisem(net, pat, default_levels(net), seed=1)
    window = tuple(s + 1 for s in areas[0].size)
    k = Kernel(net, pat.nranks, *pat.pairs(), start, seed=1)
    t0 = initial_temperature(k, AnnealParams(window=window))
    ann: list[float] = []
    inc: list[float] = []
    full: list[float] = []
    for _ in range(a.repeats):
        ann.append(schedule_rate(k, start, window, t0, a.seconds))
        k.set_map(start)
        t = time.process_time()
        k.sample(a.moves, window, 2, "eval")            # evaluated, never applied: the map stays put
        inc.append(a.moves / (time.process_time() - t))
        t = time.process_time()
        for _ in range(a.full):
            k.recompute()
        full.append(a.full / (time.process_time() - t))
    f = statistics.median(full)
    res = {"schema": "mpiscope.bench.map_speed/2", "network": a.network, "pattern": a.pattern,
           "window": list(window), "annealing_seconds": a.seconds, "annealing_moves_per_s": statistics.median(ann),
           "annealing_spread": [min(ann), max(ann)], "incremental_moves_per_s": statistics.median(inc),
           "incremental_spread": [min(inc), max(inc)], "full_evaluations_per_s": f,
           "full_spread": [min(full), max(full)], "full_evaluation_s": 1 / f,
           "ratio_annealing_vs_full": statistics.median(ann) / f,
           "ratio_incremental_vs_full": statistics.median(inc) / f,
           "target_moves_per_s": 1_000_000, "paper_full_evaluation_s": 0.18,
           "machine": f"{platform.machine()} {platform.processor() or ''}".strip(),
           "python": sys.version.split()[0], "mpi": built_against().label, "clock": "process CPU time, one core"}
    if a.json != "-":
        print(f"{a.pattern} on {a.network}, BISEM map, 2-swaps in a {'x'.join(map(str, window))} window "
              f"({res['machine']}, {res['mpi']}; CPU time of one core)")
        print(f"annealing:   {res['annealing_moves_per_s']:,.0f} moves/s over a {a.seconds:g} s schedule "
              f"(spread {min(ann):,.0f}..{max(ann):,.0f}; target 1,000,000)")
        print(f"exact:       {res['incremental_moves_per_s']:,.0f} moves/s, exact change of each "
              f"(spread {min(inc):,.0f}..{max(inc):,.0f})")
        print(f"full:        {f:,.1f} evaluations/s = {res['full_evaluation_s'] * 1e3:.2f} ms "
              f"each (spread {min(full):,.1f}..{max(full):,.1f}; RMATT: 180 ms)")
        print(f"annealing/full: {res['ratio_annealing_vs_full']:,.0f}   "
              f"exact/full: {res['ratio_incremental_vs_full']:,.0f}")
    output.emit_json(res, a.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
