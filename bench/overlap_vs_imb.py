#!/usr/bin/env python3
"""mpiscope bench overlap|rma against the Intel MPI Benchmarks on the same MPI, ranks and sizes.

IMB is not part of mpiscope: build IMB-NBC and IMB-RMA from their public source
(https://github.com/intel/mpi-benchmarks) with the MPI mpiscope was built
against, outside this repository, e.g.

    git clone https://github.com/intel/mpi-benchmarks /tmp/imb && cd /tmp/imb
    PATH=$PWD/../mpiscope/.venv/bin:$PATH make IMB-NBC IMB-RMA CC=mpicc CXX=mpicxx

then, from the repository root:

    IMB_DIR=/tmp/imb .venv/bin/python bench/overlap_vs_imb.py -n 2 --rounds 3

Each round runs IMB and mpiscope back to back (the order alternates between
rounds), with the same -iter/-time policy and the same asynchronous-progress
setting. It prints, per operation and size, the median over rounds of both
tools' t_pure, t_ovrl and overlap, the ratio mpiscope/IMB and its spread
(min..max of the per-round ratios), the machine and the MPI; --json writes
the same figures.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

from mpiscope import output
from mpiscope.bench import catalog, runner
from mpiscope.bench.overlap import OverlapConfig, run_overlap
from mpiscope.bench.rma import RmaConfig, run_rma
from mpiscope.mpi.find import launcher_env

Table = dict[int, dict[str, float]]          # bytes -> column -> value
UNRATIOED = ("#repetitions", "overlap")     # compared side by side, without a ratio


def parse_imb(text: str) -> dict[str, Table]:
    """IMB's '# Benchmarking NAME' sections -> {NAME: {bytes: {column: value}}}."""
    sections: dict[str, Table] = {}
    name = ""
    columns: list[str] = []
    for line in text.splitlines():
        m = re.match(r"# Benchmarking (\S+)", line)
        if m:
            name, columns = m.group(1), []
            sections[name] = {}
        elif name and ("t_pure" in line or "t_ovrl" in line):
            columns = line.split()
        elif name and columns and re.match(r"^\s*\d", line):
            values = [float(v) for v in line.split()]
            row = dict(zip(columns, values))
            sections[name][int(row.get("#bytes", 0))] = row
        elif not line.strip():
            columns = []
    return sections


def run_imb(binary: Path, launcher: str, ranks: int, names: list[str], args: argparse.Namespace,
            env: dict[str, str]) -> dict[str, Table]:
    cmd = [launcher, "-n", str(ranks), str(binary), *names, "-npmin", str(ranks), "-msglog",
           f"{args.min_log}:{args.max_log}", "-iter", str(args.iter), "-time", str(args.time)]
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed: {done.stderr.strip()[-500:]}")
    return parse_imb(done.stdout)


def mpiscope_nbc(ops: list[str], sizes: list[int], ranks: int, args: argparse.Namespace) -> dict[str, Table]:
    cfg = OverlapConfig(ops=ops, ranks=ranks, sizes=sizes, async_progress=args.async_progress,
                        iterations=args.iter, time_per_size_s=args.time)
    out: dict[str, Table] = {}
    for r in run_overlap(cfg).rows:
        imb_name = catalog.NBC_BY_NAME[r.op].imb_name or r.op
        out.setdefault(imb_name, {})[r.bytes] = {"#repetitions": r.n_sample, "t_pure[usec]": r.point.t_pure_us,
                                                 "t_ovrl[usec]": r.point.t_ovrlp_us,
                                                 "t_CPU[usec]": r.point.t_cpu_us, "overlap[%]": r.point.overlap_pct}
    return out


def mpiscope_passive(sizes: list[int], args: argparse.Namespace) -> dict[str, Table]:
    cfg = RmaConfig(ops=["truly_passive_put"], sizes=sizes, async_progress=args.async_progress,
                    iterations=args.iter, time_per_size_s=args.time)
    return {"Truly_passive_put": {p.bytes: {"#repetitions": p.n_sample, "t_pure[usec]": p.t_pure_us,
                                            "t_ovrl[usec]": p.t_ovrlp_us}
                                  for p in run_rma(cfg).passive}}


def machine() -> dict[str, Any]:
    model = ""
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        model = next((ln.split(":", 1)[1].strip() for ln in cpuinfo.read_text().splitlines()
                      if ln.startswith("model name")), "")
    return {"cpu": model or platform.processor(), "cores": os.cpu_count(), "load_avg": os.getloadavg()}


def compare(rounds: list[tuple[dict[str, Table], dict[str, Table]]], name: str,
            columns: list[str]) -> list[dict[str, Any]]:
    """Per size: medians over rounds of both tools, median ratio mpiscope/IMB and its min..max."""
    sizes = sorted(set.intersection(*[set(imb.get(name, {})) & set(ms.get(name, {})) for imb, ms in rounds]))
    rows = []
    for size in sizes:
        row: dict[str, Any] = {"bytes": size}
        for col in columns:
            imb_v = [imb[name][size][col] for imb, _ in rounds]
            ms_v = [ms[name][size][col] for _, ms in rounds]
            ratios = [m / i for m, i in zip(ms_v, imb_v) if i > 0]
            key = col.split("[")[0]
            row[f"imb_{key}"] = statistics.median(imb_v)
            row[f"mpiscope_{key}"] = statistics.median(ms_v)
            if ratios and key not in UNRATIOED:
                row[f"ratio_{key}"] = statistics.median(ratios)
                row[f"ratio_{key}_spread"] = [min(ratios), max(ratios)]
        rows.append(row)
    return rows


def show(name: str, rows: list[dict[str, Any]], columns: list[str]) -> None:
    keys = [c.split("[")[0] for c in columns]
    labels: list[tuple[str, str]] = [("#bytes", "bytes")]
    for k in keys:
        labels += [(f"IMB {k}", f"imb_{k}"), (f"mpiscope {k}", f"mpiscope_{k}")]
        labels += [] if k in UNRATIOED else [("ratio", f"ratio_{k}"), ("spread", f"ratio_{k}_spread")]
    widths = [max(len(label) + 2, 14 if label == "spread" else 10) for label, _ in labels]
    print(f"\n# {name}\n" + "".join(f"{label:>{w}}" for (label, _), w in zip(labels, widths)))
    for r in rows:
        cells = []
        for (_, key), w in zip(labels, widths):
            v = r[key]
            text = (f"{v[0]:.2f}..{v[1]:.2f}" if isinstance(v, list) else f"{v:.0f}" if key in ("bytes",)
                    or "repetitions" in key else f"{v:.3f}" if key.startswith("ratio") else f"{v:.2f}")
            cells.append(f"{text:>{w}}")
        print("".join(cells))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--imb-dir", type=Path, default=os.environ.get("IMB_DIR"),
                   help="directory with IMB-NBC and IMB-RMA (default: $IMB_DIR)")
    p.add_argument("-n", "--ranks", type=int, default=2)
    p.add_argument("--ops", default="ialltoall,ibcast,iallreduce")
    p.add_argument("--min-log", type=int, default=0)
    p.add_argument("--max-log", type=int, default=22)
    p.add_argument("--iter", type=int, default=1000)
    p.add_argument("--time", type=float, default=10.0)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--async-progress", choices=["off", "on"], default="off")
    p.add_argument("--no-rma", action="store_true", help="skip Truly_passive_put")
    p.add_argument("--json", help="write the figures as JSON (- for stdout)")
    args = p.parse_args()
    if not args.imb_dir or not (Path(args.imb_dir) / "IMB-NBC").is_file():
        sys.exit("give the directory of IMB-NBC/IMB-RMA: IMB_DIR=/path or --imb-dir /path (see this file's header)")
    imb_dir = Path(args.imb_dir)
    ops = catalog.select_ops([args.ops], catalog.NBC_BY_NAME, {}, "overlap")
    imb_names = [str(catalog.NBC_BY_NAME[o].imb_name) for o in ops if catalog.NBC_BY_NAME[o].imb_name]
    sizes = [0] + [1 << i for i in range(args.min_log, args.max_log + 1)]
    mpi, launcher = runner.mpi_in_use()
    setting = next(s for s in runner.progress_settings(args.async_progress, mpi, launcher)[0])
    env = launcher_env(os.environ.copy())
    env.update(setting.env)
    info = {"machine": machine(), "mpi": mpi.label, "ranks": args.ranks, "async_progress": args.async_progress,
            "iter": args.iter, "time": args.time, "rounds": args.rounds}
    print(f"# {info['machine']['cpu']}, {info['machine']['cores']} cores, load {info['machine']['load_avg']}; "
          f"{mpi.label}; {args.ranks} ranks; async progress {args.async_progress}; {args.rounds} rounds")
    nbc_rounds, rma_rounds = [], []
    for k in range(args.rounds):
        order = [0, 1] if k % 2 == 0 else [1, 0]
        got: dict[int, dict[str, Table]] = {}
        for who in order:
            print(f"round {k + 1}: {'IMB-NBC' if who == 0 else 'mpiscope bench overlap'}", file=sys.stderr)
            got[who] = (run_imb(imb_dir / "IMB-NBC", launcher, args.ranks, imb_names, args, env) if who == 0
                        else mpiscope_nbc(ops, sizes, args.ranks, args))
        nbc_rounds.append((got[0], got[1]))
        if not args.no_rma:
            for who in order:
                print(f"round {k + 1}: {'IMB-RMA' if who == 0 else 'mpiscope bench rma'}", file=sys.stderr)
                got[who] = (run_imb(imb_dir / "IMB-RMA", launcher, 2, ["Truly_passive_put"], args, env) if who == 0
                            else mpiscope_passive(sizes, args))
            rma_rounds.append((got[0], got[1]))
    nbc_cols = ["#repetitions", "t_pure[usec]", "t_ovrl[usec]", "t_CPU[usec]", "overlap[%]"]
    result: dict[str, Any] = {"schema": "mpiscope.bench.overlap_vs_imb/1", **info, "tables": {}}
    for name in imb_names:
        rows = compare(nbc_rounds, name, nbc_cols)
        result["tables"][name] = rows
        show(name, rows, nbc_cols)
    if rma_rounds:
        rma_cols = ["#repetitions", "t_pure[usec]", "t_ovrl[usec]"]
        rows = compare(rma_rounds, "Truly_passive_put", rma_cols)
        result["tables"]["Truly_passive_put"] = rows
        show("Truly_passive_put", rows, rma_cols)
    result["load_avg_end"] = os.getloadavg()
    print(f"\n# load average at the end: {result['load_avg_end']}")
    output.emit_json(result, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
