"""The matrix-product loop of S-CAT (003 §4.2) end to end on the embedded MPI: record the mm example
with equal rows (003 Table 2's per-node profile replayed), take each rank's computation time from
the trace's phases, rebalance (`mpiscope rebalance`), record mm again with the new partition, and
compare the slowest rank's computation time and the whole run's time before and after, beside the
paper's 8.27 s -> 7.58 s (-8.3 %) on 16 nodes.

A first run calibrates mm's per-row cost C; then REPEAT pairs of runs (equal rows, new
partition), interleaved, all with the same per-row cost HEADROOM x C (mm --row-ms), so that the
pairs differ only in the partition; the first equal-rows run gives the times to rebalance. The
headroom keeps the real work inside each rank's compute interval when other jobs load the
machine: rank 0 has the most rows after rebalancing and the least slack (factor 1). Medians and
spreads over the pairs.

    python bench/rebalance_mm.py [--ranks 4] [--n 2048] [--repeat 3] [--headroom 1.5] [--json FILE]
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from mpiscope import output
from mpiscope.analysis.rebalance import Rebalance, format_partition, phase_times, rebalance
from mpiscope.mpi.build import compile_program
from mpiscope.mpi.find import find_launcher
from mpiscope.trace import Trace, open_trace

MM = Path(__file__).resolve().parent.parent / "src" / "mpiscope" / "examples" / "mm.c"
PAPER = {"before_s": 8.27, "after_s": 7.58, "gain_pct": 100 * (8.27 - 7.58) / 8.27, "nodes": 16}
ROW_COST = re.compile(r"a row costs factor x ([0-9.]+) ms")
TABLE2 = [4.99, 5.65, 6.34, 6.91, 7.11, 7.26, 7.74, 7.51, 7.59, 7.65, 7.70, 7.81, 8.04, 8.13, 8.21, 8.27]


def factors(ranks: int) -> list[float]:
    """mm's speed factors: 003 Table 2 interpolated to the ranks, relative to node 0 (as in mm.c)."""
    xs = [15.0 * r / (ranks - 1) if ranks > 1 else 0.0 for r in range(ranks)]
    return [float(np.interp(x, range(16), TABLE2)) / TABLE2[0] for x in xs]


def record(out: Path, launcher: str, prog: Path, ranks: int, args: list[str]) -> tuple[Trace, str, float]:
    """`mpiscope run` of mm: the trace, mm's output, the wall seconds of the whole command."""
    cmd = [sys.executable, "-m", "mpiscope", "run", "--out", str(out), "--", launcher, "-n", str(ranks),
           str(prog), *args]
    t0 = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - t0
    if done.returncode != 0:
        raise SystemExit(f"mm failed ({done.returncode}): {done.stderr.strip()[-500:]}")
    return open_trace(out), done.stdout, seconds


def figures(trace: Trace) -> dict[str, Any]:
    """Per-rank computation of the product phase, its slowest rank, and the run's span
    (earliest MPI_Init exit to latest MPI_Finalize entry)."""
    times, phase = phase_times(trace)
    call = pl.col("call").cast(pl.Utf8)
    span = trace.events().select(
        pl.col("t_leave_ns").filter(call.is_in(["MPI_Init", "MPI_Init_thread"])).min().alias("start"),
        pl.col("t_enter_ns").filter(call == "MPI_Finalize").max().alias("end"),
    ).collect()
    return {"phase": phase, "compute_s": times, "slowest_s": max(times),
            "critical_rank": times.index(max(times)), "run_s": (span["end"][0] - span["start"][0]) / 1e9}


def gain(before: float, after: float) -> float:
    return 100.0 * (before - after) / before


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--n", type=int, default=2048, help="matrix size (default 2048, as in 003)")
    ap.add_argument("--repeat", type=int, default=3, help="interleaved before/after pairs (default 3)")
    ap.add_argument("--granularity", type=int, default=4)
    ap.add_argument("--headroom", type=float, default=1.5, help="per-row cost of the pairs / calibrated (1.5)")
    ap.add_argument("--json", help="write the figures as JSON")
    args = ap.parse_args()
    launcher = find_launcher()
    if not launcher:
        raise SystemExit("no mpiexec found; run make setup")
    prog = compile_program(MM)
    work = Path(tempfile.mkdtemp(prefix="mpiscope-rebalance-bench-"))
    try:
        _, out, _ = record(work / "calibrate", launcher, prog, args.ranks, ["--n", str(args.n)])
        m = ROW_COST.search(out)
        if not m:
            raise SystemExit(f"mm did not print its per-row cost:\n{out}")
        row_ms = f"{float(m[1]) * args.headroom:.6f}"
        plan, runs = pairs(work, launcher, prog, args, row_ms)
        old = plan.old_shares
        f = factors(args.ranks)
        model = max(w * x for w, x in zip(plan.shares, f)) / max(w * x for w, x in zip(old, f))
        result = summarize(args, plan.shares, model, float(row_ms), runs)
        report(result)
        output.emit_json(result, args.json)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


def pairs(work: Path, launcher: str, prog: Path, args: argparse.Namespace,
          row_ms: str) -> tuple[Rebalance, dict[str, list[dict[str, Any]]]]:
    """REPEAT interleaved pairs (equal rows, rebalanced rows); the first equal-rows run is rebalanced."""
    old = [args.n // args.ranks + (r < args.n % args.ranks) for r in range(args.ranks)]
    partition = work / "mm.part"
    runs: dict[str, list[dict[str, Any]]] = {"before": [], "after": []}
    plan: Rebalance | None = None
    for i in range(args.repeat):
        for label, extra in (("before", []), ("after", ["--partition", str(partition)])):
            t, _, wall = record(work / f"{label}-{i}", launcher, prog, args.ranks,
                                ["--n", str(args.n), "--row-ms", row_ms, *extra])
            runs[label].append({**figures(t), "command_s": wall})
            if plan is None:   # what `mpiscope rebalance TRACE --shares 512x4 -o mm.part` does
                first = runs["before"][0]
                plan = rebalance(first["compute_s"], old, args.granularity, phase=first["phase"])
                partition.write_text(format_partition(plan, f"times from {t.path} phase {first['phase']}"))
            shutil.rmtree(t.path, ignore_errors=True)
    assert plan is not None
    return plan, runs


def summarize(args: argparse.Namespace, shares: list[int], model_ratio: float,
              row_ms: float, runs: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    med = {k: {f: statistics.median(r[f] for r in v) for f in ("slowest_s", "run_s")} for k, v in runs.items()}
    return {
        "schema": "mpiscope.bench.rebalance_mm/1", "machine": platform.node(), "cpus": os.cpu_count(),
        "load_average": os.getloadavg()[0], "ranks": args.ranks, "n": args.n, "granularity": args.granularity,
        "row_ms": row_ms, "headroom": args.headroom, "repeat": args.repeat,
        "shares_before": [args.n // args.ranks + (r < args.n % args.ranks) for r in range(args.ranks)],
        "shares_after": shares, "model_ratio": model_ratio, "runs": runs,
        "slowest_before_s": med["before"]["slowest_s"], "slowest_after_s": med["after"]["slowest_s"],
        "run_before_s": med["before"]["run_s"], "run_after_s": med["after"]["run_s"],
        "gain_slowest_pct": gain(med["before"]["slowest_s"], med["after"]["slowest_s"]),
        "gain_run_pct": gain(med["before"]["run_s"], med["after"]["run_s"]),
        "paper": PAPER,
    }


def report(r: dict[str, Any]) -> None:
    def spread(label: str, field: str) -> str:
        values = [x[field] for x in r["runs"][label]]
        return f"{min(values):.3f}-{max(values):.3f}"

    print(f"mm {r['n']}x{r['n']} doubles on {r['ranks']} ranks ({r['cpus']} cores, load average "
          f"{r['load_average']:.1f}); 003 Table 2 replayed, a row costs factor x {r['row_ms']:.3f} ms "
          f"({r['headroom']} x calibrated)")
    c = r["runs"]["before"][0]
    print(f"first run with equal rows: computation per rank {', '.join(f'{t:.3f}' for t in c['compute_s'])} s "
          f"(phase {c['phase']}, critical rank {c['critical_rank']})")
    print(f"rebalance (granularity {r['granularity']}): {r['shares_before']} -> {r['shares_after']}, "
          f"the replayed profile predicts after/before = {r['model_ratio']:.3f} for the slowest rank")
    print(f"medians over {r['repeat']} interleaved pairs    before      after     gain   (min-max before | after)")
    for name, key in (("slowest rank's computation", "slowest"), ("whole run (Init to Finalize)", "run")):
        b, a = r[f"{key}_before_s"], r[f"{key}_after_s"]
        print(f"  {name:<30} {b:8.3f} s {a:8.3f} s {-gain(b, a):+7.1f} %   "
              f"({spread('before', f'{key}_s')} | {spread('after', f'{key}_s')})")
    p = r["paper"]
    print(f"  {'S-CAT 003, 16 nodes (slowest)':<30} {p['before_s']:8.3f} s {p['after_s']:8.3f} s "
          f"{-p['gain_pct']:+7.1f} %")
    print(f"ratio after/before: slowest {r['slowest_after_s'] / r['slowest_before_s']:.3f} "
          f"(predicted {r['model_ratio']:.3f}), run {r['run_after_s'] / r['run_before_s']:.3f} "
          f"(paper {p['after_s'] / p['before_s']:.3f})")


if __name__ == "__main__":
    sys.exit(main())
