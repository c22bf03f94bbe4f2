"""Simulation wall time and peak memory by scale: patterns through S4U, and through SMPI.

    .venv/bin/python bench/sim_scale.py [--json -] [--skip-16384]

One-step Bruck allgather (001 §7.2: every step at once, 2048 B · 2^k), identity map, 5 GBps, 120 ns,
SimGrid CM02, measured in this run:
  * S4U at 512 (torus:8x8x8), 1024 (16x8x8), 4096 (16x16x16) and 16,384 ranks (32x32x16);
  * SMPI at 512 ranks: the same messages as Isend/Irecv/Waitall in the replay program (smpicc);
  * the event-time precision mpiscope uses by default (1/250 of the busiest link's bytes over its
    bandwidth) against SimGrid's 1 ns, on a random 512-rank map, where it matters: the speed-up and
    the change of the simulated time.
Wall time and the simulator's peak resident memory come from the process itself (wait4). Issue 7's
figures (Python S4U, an smpicc Bruck program with SimGrid's default models) are printed beside.
"""

from __future__ import annotations

import argparse
import platform as host
import sys
from typing import Any

from mpiscope import output
from mpiscope.mapping.patterns import parse_pattern
from mpiscope.sim import replay, s4u, smpi
from mpiscope.sim.native import simgrid_version
from mpiscope.sim.placement import make_platform, resolve_map
from mpiscope.sim.result import SimResult

# Issue 7, "Measured on this kind of machine": wall seconds.
ISSUE = {("s4u", 512): 0.3, ("s4u", 1024): 1.6, ("s4u", 4096): 108.0, ("smpi", 512): 4.4}
SCALES = [(512, "torus:8x8x8"), (1024, "torus:16x8x8"), (4096, "torus:16x16x16"), (16384, "torus:32x32x16")]


def run(engine: str, ranks: int, network: str, map_spec: str = "identity",
        precision_s: float | None = None) -> SimResult:
    platform = make_platform(network)
    pattern = parse_pattern(f"bruck:{ranks}")
    node, name = resolve_map(platform, map_spec, ranks)
    if engine == "smpi":
        return smpi.run_actions(platform, replay.pattern_actions(pattern, steps=False), node, name,
                                f"pattern {pattern.name}", precision_s=precision_s)
    return s4u.run_pattern(platform, pattern, node, name, precision_s=precision_s)


def row(engine: str, ranks: int, network: str, r: SimResult, map_spec: str = "identity") -> dict[str, Any]:
    return {"engine": engine, "ranks": ranks, "network": network, "map": map_spec,
            "time_precision_s": r.extra["time_precision_s"], "wall_s": r.wall_s,
            "peak_memory_bytes": r.peak_memory_bytes, "simulated_time_s": r.simulated_time_s,
            "issue_wall_s": ISSUE.get((engine, ranks)) if map_spec == "identity" else None}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--skip-16384", action="store_true", help="leave out the largest S4U run")
    ap.add_argument("--json", help="write the figures as JSON (- for stdout)")
    a = ap.parse_args()
    rows = []
    for ranks, network in SCALES:
        if ranks == 16384 and a.skip_16384:
            continue
        rows.append(row("s4u", ranks, network, run("s4u", ranks, network)))
    rows.append(row("smpi", 512, "torus:8x8x8", run("smpi", 512, "torus:8x8x8")))
    exact = run("s4u", 512, "torus:8x8x8", "random:1", precision_s=1e-9)
    coarse = run("s4u", 512, "torus:8x8x8", "random:1")
    rows += [row("s4u", 512, "torus:8x8x8", r, "random:1") for r in (exact, coarse)]
    s4u512 = next(r for r in rows if r["engine"] == "s4u" and r["ranks"] == 512)
    smpi512 = next(r for r in rows if r["engine"] == "smpi")
    res = {
        "schema": "mpiscope.bench.sim_scale/1", "simgrid": simgrid_version(), "model": "CM02",
        "pattern": "one-step bruck, 2048 B base", "bandwidth": "5GBps", "latency": "120ns", "runs": rows,
        "ratio_smpi_vs_s4u_wall_512": smpi512["wall_s"] / s4u512["wall_s"],
        "ratio_smpi_vs_s4u_simulated_512": smpi512["simulated_time_s"] / s4u512["simulated_time_s"],
        "precision_speedup_random_512": exact.wall_s / coarse.wall_s,
        "precision_change_random_512": coarse.simulated_time_s / exact.simulated_time_s - 1,
        "machine": f"{host.machine()} {host.processor() or ''}".strip(), "python": sys.version.split()[0],
    }
    if a.json != "-":
        print(f"one-step Bruck, 5 GBps, 120 ns, SimGrid {res['simgrid']} CM02 ({res['machine']})")
        print(f"{'engine':6} {'ranks':>6} {'network':16} {'map':9} {'precision':>9} {'wall':>9} {'issue':>8} "
              f"{'peak mem':>9} {'simulated':>11}")
        for r in rows:
            issue = f"{r['issue_wall_s']:.1f} s" if r["issue_wall_s"] else "-"
            print(f"{r['engine']:6} {r['ranks']:>6} {r['network']:16} {r['map']:9} "
                  f"{r['time_precision_s'] * 1e9:>7g}ns {r['wall_s']:>7.2f} s {issue:>8} "
                  f"{r['peak_memory_bytes'] / 2**20:>6.0f} MiB {r['simulated_time_s'] * 1e3:>8.4f} ms")
        print(f"SMPI/S4U at 512 ranks: wall {res['ratio_smpi_vs_s4u_wall_512']:.2f}, "
              f"simulated time {res['ratio_smpi_vs_s4u_simulated_512']:.4f}")
        print(f"default precision vs 1 ns, random 512-rank map: {res['precision_speedup_random_512']:.1f}x "
              f"faster, simulated time {100 * res['precision_change_random_512']:+.4f} %")
    output.emit_json(res, a.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
