"""Incremental move evaluation vs full re-evaluation of a rank map (001 §7.3: one evaluation took 0.18 s).

    .venv/bin/python bench/map_speed.py [--network torus:16x16x16] [--pattern bruck:4096] [--json -]

Both are measured in this run on the same map (the BISEM map of the pattern), interleaved over
`--repeats` rounds: incremental = random 2-swaps in a RANGE window evaluated (not applied) by the
C kernel; full = the kernel recomputing every route and link load of the map. Prints the median
rate of each, the spread (min..max) and their ratio.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time

from mpiscope.mapping.bisem import bisem, default_levels
from mpiscope.mapping.kernel import Kernel
from mpiscope.mapping.patterns import parse_pattern
from mpiscope.mapping.topology import parse_network
from mpiscope.mpi.find import built_against


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--network", default="torus:16x16x16")
    ap.add_argument("--pattern", default="bruck:4096")
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--moves", type=int, default=200_000, help="incremental moves per repeat")
    ap.add_argument("--full", type=int, default=50, help="full evaluations per repeat")
    ap.add_argument("--json", help="write the figures as JSON (- for stdout)")
    a = ap.parse_args()
    net, pat = parse_network(a.network), parse_pattern(a.pattern)
    start, areas = bisem(net, pat, default_levels(net), seed=1)
    window = tuple(s + 1 for s in areas[0].size)
    k = Kernel(net, pat.nranks, *pat.pairs(), start, seed=1)
    inc, full = [], []
    for _ in range(a.repeats):
        t = time.process_time()
        k.sample(a.moves, window, 2, "eval")            # evaluated, never applied: the map stays put
        inc.append(a.moves / (time.process_time() - t))
        t = time.process_time()
        for _ in range(a.full):
            k.recompute()
        full.append(a.full / (time.process_time() - t))
    res = {"schema": "mpiscope.bench.map_speed/1", "network": a.network, "pattern": a.pattern,
           "window": list(window), "incremental_moves_per_s": statistics.median(inc),
           "incremental_spread": [min(inc), max(inc)], "full_evaluations_per_s": statistics.median(full),
           "full_spread": [min(full), max(full)], "full_evaluation_s": 1 / statistics.median(full),
           "ratio_incremental_vs_full": statistics.median(inc) / statistics.median(full),
           "target_moves_per_s": 1_000_000, "paper_full_evaluation_s": 0.18,
           "machine": f"{platform.machine()} {platform.processor() or ''}".strip(),
           "python": sys.version.split()[0], "mpi": built_against().label, "clock": "process CPU time, one core"}
    if a.json != "-":
        print(f"{a.pattern} on {a.network}, BISEM map, 2-swaps in a {'x'.join(map(str, window))} window "
              f"({res['machine']}, {res['mpi']}; CPU time of one core)")
        print(f"incremental: {res['incremental_moves_per_s']:,.0f} moves/s "
              f"(spread {min(inc):,.0f}..{max(inc):,.0f}; target 1,000,000)")
        print(f"full:        {res['full_evaluations_per_s']:,.1f} evaluations/s = {res['full_evaluation_s'] * 1e3:.2f} ms "
              f"each (spread {min(full):,.1f}..{max(full):,.1f}; RMATT: 180 ms)")
        print(f"incremental/full: {res['ratio_incremental_vs_full']:,.0f}")
    if a.json:
        text = json.dumps(res, indent=2)
        if a.json == "-":
            print(text)
        else:
            with open(a.json, "w") as f:
                f.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
