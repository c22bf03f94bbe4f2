"""What the adaptive broadcast costs when there is nothing to adapt to (SPEC §5, issue 19):
per message size, its time against the MPI's own MPI_Bcast and against the plain
binomial tree over the identity table, with no load imbalance, measured in the same
run (bcast_exp.c's max-effect loop at N = 0: barrier, broadcast; the three
broadcasts take turns at every size, on fresh communicators), over several rounds.

Prints per size the median over rounds of the overall time (first start to last end)
and of the average per-process time, and the ratios adaptive/library and
adaptive/binomial (median, and the spread of the per-round ratios). 000 §5.1 found
its optimisation within ~2 % (overall) and ~4 % (average) of no optimisation at
N = 0; the binomial/library ratio shows how the tree itself compares with the MPI's
own algorithms. Ranks default to the cores, so that no rank waits for a core.

    python bench/bcast_overhead.py [--ranks 2] [--rounds 5] [--iters 200] [--sizes 1,1K,64K,1M,8M] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys

from mpiscope import output
from mpiscope.bench.bcast import oversubscribed_env
from mpiscope.bench.bcast_paper import size_label
from mpiscope.bench.catalog import parse_sizes
from mpiscope.bench.runner import launch_command, mpi_in_use, program
from mpiscope.mpi.find import launcher_env

VARIANTS = ("library", "binomial", "adaptive")


def one_round(cmd: list[str], env: dict[str, str]) -> dict[tuple[str, int], dict[str, float]]:
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True, timeout=1800).stdout
    recs = [json.loads(line[len("@mpiscope "):]) for line in out.splitlines() if line.startswith("@mpiscope ")]
    return {(r["variant"], int(r["bytes"])): r for r in recs if not r.get("header")}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ranks", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--iters", type=int, default=200)
    ap.add_argument("--sizes", default="1,1K,64K,1M,8M")
    ap.add_argument("--json")
    args = ap.parse_args()
    sizes = parse_sizes(args.sizes)
    mpi, launcher = mpi_in_use()
    argv = [str(program("bcast")), "max-effect", "--loads", "0", "--sizes", ",".join(map(str, sizes)),
            "--iters", str(args.iters), "--variants", ",".join(VARIANTS)]
    cmd = launch_command(launcher, mpi, args.ranks, "", argv)
    extra, note = oversubscribed_env(mpi.implementation, args.ranks)
    env = launcher_env(dict(os.environ)) | extra
    env.pop("LD_PRELOAD", None)
    rounds = [one_round(cmd, env) for _ in range(args.rounds)]
    print(f"machine: {platform.node()} {platform.machine()}, {os.cpu_count()} cores; MPI: {mpi.label}; "
          f"{args.ranks} ranks, {args.iters} broadcasts per size and variant, {args.rounds} rounds")
    if note:
        print(f"note: {note}")
    rows, payload = [], []
    for size in sizes:
        entry = {"bytes": size}
        for what in ("overall_s", "average_s"):
            t = {v: [r[(v, size)][what] for r in rounds] for v in VARIANTS}
            med = {v: statistics.median(x) for v, x in t.items()}
            for base in ("library", "binomial"):
                per_round = [a / b for a, b in zip(t["adaptive"], t[base]) if b]
                entry[f"{what[:-2]}_adaptive_over_{base}"] = statistics.median(per_round)
                entry[f"{what[:-2]}_adaptive_over_{base}_spread"] = [min(per_round), max(per_round)]
            entry[f"{what[:-2]}_binomial_over_library"] = med["binomial"] / med["library"]
            entry[f"{what[:-2]}_median_s"] = med
        payload.append(entry)
        rows.append([size_label(size), *(f"{1e6 * entry['overall_median_s'][v]:.1f}" for v in VARIANTS),
                     f"{entry['overall_adaptive_over_library']:.3f}", f"{entry['overall_adaptive_over_binomial']:.3f}",
                     "{:.3f}-{:.3f}".format(*entry["overall_adaptive_over_binomial_spread"]),
                     f"{entry['average_adaptive_over_library']:.3f}",
                     f"{entry['average_adaptive_over_binomial']:.3f}"])
    output.table("adaptive (a) without imbalance against the library (lib) and binomial (bin): overall time in us, "
                 "medians over rounds; ratios of overall and average time",
                 ["size", "lib", "bin", "a", "a/lib", "a/bin", "a/bin range", "avg a/lib", "avg a/bin"], rows)
    if args.json:
        output.emit_json({"schema": "mpiscope.bench.bcast_overhead/1", "mpi": mpi.label, "ranks": args.ranks,
                          "rounds": args.rounds, "iters": args.iters, "machine": platform.node(), "sizes": payload,
                          "notes": [note] if note else []}, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
