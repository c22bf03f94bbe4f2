"""Annealing with worker processes vs one process, same wall time, same start (001 §5.3).

    .venv/bin/python bench/map_parallel.py [--workers 2] [--seconds 20] [--repeats 3] [--json -]

Each repeat runs mpiscope's annealing (default schedule spread over `--seconds` of wall time) from the
BISEM map of the pattern, once in one process and once with `--workers` processes (ProcessEngine),
in alternating order. Prints the median moves evaluated per wall second and the objective reached, and
their ratios, with the load of the machine. Other jobs share its cores, so it also prints moves per
second of the critical path: CPU time of one process; with workers, the master's CPU time plus, round
by round, the busiest worker's (what the wall time would be with a core per process).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import platform
import statistics
import sys
import time
from typing import Any

from mpiscope import output, parallel
from mpiscope.mapping import anneal as sa
from mpiscope.mapping.bisem import bisem, default_levels
from mpiscope.mapping.patterns import parse_pattern
from mpiscope.mapping.topology import parse_network


def one_run(problem: parallel.Problem, params: sa.AnnealParams, workers: int, seconds: float) -> dict[str, Any]:
    p = dataclasses.replace(params)
    engine: sa.Engine
    if workers > 1:
        engine = parallel.ProcessEngine(problem, workers, p.window, p.num_swaps, p.seed)
    else:
        engine = sa.LocalEngine(problem.kernel(p.seed), p)
    try:
        state = sa.start_state(engine.kernel, p, problem.node_of_rank)
        t, cpu = time.monotonic(), time.process_time()
        state = sa.anneal(engine, state, deadline=t + seconds)
        wall, cpu = time.monotonic() - t, time.process_time() - cpu
    finally:
        engine.close()
    if isinstance(engine, parallel.ProcessEngine):
        cpu += engine.master.worker_cpu_s
    return {"workers": workers, "wall_s": wall, "moves_per_s": state.evaluated / wall,
            "critical_path_s": cpu, "moves_per_critical_s": state.evaluated / cpu, "accepted": state.accepted,
            "best_objective": state.best_objective / engine.kernel.scale,
            "initial_objective": state.initial_objective / engine.kernel.scale}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--network", default="torus:16x16x16")
    ap.add_argument("--pattern", default="bruck:4096")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--json", help="write the figures as JSON (- for stdout)")
    a = ap.parse_args()
    net, pat = parse_network(a.network), parse_pattern(a.pattern)
    start, areas = bisem(net, pat, default_levels(net), seed=1)
    window = tuple(s + 1 for s in areas[0].size)
    src, dst, w = pat.pairs()
    problem = parallel.Problem(net, pat.nranks, src, dst, w, start, "eval", 1)
    params = sa.AnnealParams(window=window, seed=1)
    runs: dict[int, list[dict[str, Any]]] = {1: [], a.workers: []}
    load = [os.getloadavg()[0]]
    for rep in range(a.repeats):
        for n in ((1, a.workers) if rep % 2 == 0 else (a.workers, 1)):
            runs[n].append(one_run(problem, params, n, a.seconds))
            load.append(os.getloadavg()[0])

    def med(n: int, key: str) -> float:
        return statistics.median(r[key] for r in runs[n])

    one, par = 1, a.workers
    res = {"schema": "mpiscope.bench.map_parallel/1", "network": a.network, "pattern": a.pattern,
           "seconds": a.seconds, "workers": par, "runs": runs,
           "moves_per_s": {"1": med(one, "moves_per_s"), str(par): med(par, "moves_per_s")},
           "moves_per_critical_s": {"1": med(one, "moves_per_critical_s"), str(par): med(par, "moves_per_critical_s")},
           "ratio_moves_per_critical_s": med(par, "moves_per_critical_s") / med(one, "moves_per_critical_s"),
           "best_objective": {"1": med(one, "best_objective"), str(par): med(par, "best_objective")},
           "ratio_moves_per_s": med(par, "moves_per_s") / med(one, "moves_per_s"),
           "ratio_objective": med(par, "best_objective") / med(one, "best_objective"),
           "load_average": [min(load), max(load)], "cpus": os.cpu_count(),
           "machine": f"{platform.machine()} {platform.processor() or ''}".strip(), "python": sys.version.split()[0]}
    if a.json != "-":
        print(f"{a.pattern} on {a.network}, annealing {a.seconds:g} s wall from the BISEM map "
              f"({res['machine']}, {res['cpus']} CPUs, load average {min(load):.1f}..{max(load):.1f})")
        for n in (one, par):
            spread = [r["moves_per_s"] for r in runs[n]]
            print(f"{n} process{'es' if n > 1 else ''}: {med(n, 'moves_per_s'):,.0f} moves/s wall "
                  f"(spread {min(spread):,.0f}..{max(spread):,.0f}), {med(n, 'moves_per_critical_s'):,.0f} moves/s "
                  f"of critical path, best eval {med(n, 'best_objective'):.6g}")
        print(f"{par} workers / 1: moves/s wall {res['ratio_moves_per_s']:.2f}, of critical path "
              f"{res['ratio_moves_per_critical_s']:.2f}; best eval {res['ratio_objective']:.4f}")
    output.emit_json(res, a.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
