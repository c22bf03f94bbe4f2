"""Communication roofline (004): is a run limited by the node or by the network, and what would a change buy?

  mpiscope roofline systems [--json -]          the paper's five systems, ridge computed vs printed
  mpiscope roofline measure                     this machine/cluster -> mpiscope-roofline/machine.toml
  mpiscope roofline bench                       the 004 §4.2 benchmark -> mpiscope-roofline/bench.json
  mpiscope roofline plot                        -> mpiscope-roofline/roofline.png and .html
  mpiscope roofline place TRACE_DIR --flops N   an application's point, verdict and what-ifs
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from mpiscope import output
from mpiscope.cli import roofline_points
from mpiscope.errors import UsageError
from mpiscope.roofline import results
from mpiscope.roofline.bench import default_intensities, plan_points, run_bench
from mpiscope.roofline.cpu import read_cpu
from mpiscope.roofline.machines import builtin, builtin_names, load_machine, machine_to_toml, system_rows
from mpiscope.roofline.measure import Settings, measure, with_name
from mpiscope.roofline.model import CONVENTION, Machine
from mpiscope.roofline.native import make_launch


def _launch_options(p: argparse.ArgumentParser, repeat: int) -> None:
    p.add_argument("--ranks", type=int, help="ranks = nodes (default: the machine file's, else 2)")
    p.add_argument("--threads", type=int, help="BLAS threads per rank (default: the host's cores / ranks)")
    p.add_argument("--launcher", metavar="CMD", help="launch command without the program, one rank per node, "
                   "e.g. 'mpiexec -n 8 -ppn 1 -f hosts' (default: the MPI's mpiexec -n RANKS)")
    p.add_argument("--matrix", type=int, default=512, metavar="N", help="matrix size of the products (512)")
    p.add_argument("--msg-bytes", type=int, default=4 << 20, help="largest message size (4 MiB)")
    p.add_argument("--seconds", type=float, default=0.4, help="target time of each measurement (0.4)")
    p.add_argument("--repeat", type=int, default=repeat, help=f"repetitions; the best one counts ({repeat})")
    p.add_argument("--out", type=Path, help="output file")
    p.add_argument("--force", action="store_true", help="replace an existing --out file")
    p.add_argument("--json", metavar="FILE", help="write the figures as JSON (- for stdout)")


def _check_sizes(args: argparse.Namespace) -> None:
    limits = {"matrix": (1, 1 << 15), "msg_bytes": (1, 1 << 30), "repeat": (1, 1000), "points": (2, 1000),
              "fma_units": (1, 16)}
    for name, (lo, hi) in limits.items():
        value = getattr(args, name, None)
        if value is not None and not lo <= value <= hi:
            raise UsageError(f"--{name.replace('_', '-')} {value} is out of range; give a whole number "
                             f"from {lo} to {hi}")
    for name in ("seconds", "peak_gflops"):
        value = getattr(args, name, None)
        if value is not None and not value > 0:
            raise UsageError(f"--{name.replace('_', '-')} {value} must be greater than 0")


def prepare_parser(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    s = sub.add_parser("systems", help="list machine descriptions with computed and printed ridge points")
    s.add_argument("--machine", type=Path, action="append", default=[], metavar="FILE", help="add your own file")
    s.add_argument("--json", metavar="FILE", help="write the figures as JSON (- for stdout)")
    m = sub.add_parser("measure", help="measure this machine or cluster and write a machine file")
    _launch_options(m, repeat=5)
    m.add_argument("--peak-gflops", type=float, help="the true peak per node, if you know it")
    m.add_argument("--fma-units", type=int, default=2, help="FMA units per core for the peak estimate (2)")
    m.add_argument("--name", help="name of the machine in the file")
    b = sub.add_parser("bench", help="run the 004 §4.2 benchmark over a sweep of intensities")
    _launch_options(b, repeat=3)
    b.add_argument("--machine", type=Path, default=results.MACHINE, metavar="FILE",
                   help=f"machine file that sizes the sweep (default: {results.MACHINE})")
    b.add_argument("--points", type=int, default=15, help="points of the default sweep (15)")
    b.add_argument("--intensities", type=float, nargs="+", metavar="I", help="flop/byte values to run instead")
    roofline_points.prepare_plot(sub.add_parser("plot", help="draw the roofline as PNG and interactive HTML"))
    roofline_points.prepare_place(sub.add_parser("place", help="place a traced application on the roofline"))


def run(args: argparse.Namespace) -> int:
    handlers = {"systems": run_systems, "measure": run_measure, "bench": run_bench_cmd,
                "plot": roofline_points.run_plot, "place": roofline_points.run_place}
    return handlers[args.action](args)


def run_systems(args: argparse.Namespace) -> int:
    machines = [(k, builtin(k)) for k in builtin_names()] + [(str(f), load_machine(f)) for f in args.machine]
    rows = system_rows(machines)
    if args.json != "-":
        output.table("Communication roofline systems (004 Table 1)",
                     ["system", "network", "peak GF/s", "B_dir GB/s", "ridge", "paper", "check"],
                     [[r["system"], r["network"], f"{r['peak_gflops']:g}", f"{r['bw_gbps_per_direction']:g}",
                       f"{r['ridge']:.3g}", "-" if r["ridge_paper"] is None else f"{r['ridge_paper']:g}",
                       "FLAGGED" if r["flags"] else "ok"] for r in rows], justify_right_from=2)
        for r in rows:
            for f in r["flags"]:
                output.text(f"{r['name']}: {f}")
        output.text(CONVENTION)
    output.emit_json({"schema": "mpiscope.roofline/1", "command": "systems", "convention": CONVENTION,
                      "systems": rows}, args.json)
    return 0


def _host_cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def run_measure(args: argparse.Namespace) -> int:
    _check_sizes(args)
    cpu = read_cpu(args.fma_units)
    ranks = args.ranks or 2
    threads = args.threads or (max(1, min(cpu.cores, _host_cores()) // ranks) if not args.launcher else cpu.cores)
    launch = make_launch(ranks, threads, args.launcher)
    settings = Settings(args.matrix, args.msg_bytes, args.seconds, args.repeat)
    output.info(f"measuring {ranks} ranks x {threads} BLAS thread(s): DGEMM, ping-pong, pairwise and "
                f"all-neighbour exchange ...")
    meas = with_name(measure(launch, cpu, settings, args.peak_gflops), args.name)
    out = args.out or results.MACHINE
    kept = results.save(out, machine_to_toml(meas.machine), results.MACHINE, args.force)
    for w in meas.warnings:
        output.warn(w)
    if args.json != "-":
        m = meas.machine
        rows = [["peak (roof)", f"{m.peak_gflops:.2f} GF/s", m.peak_note],
                ["DGEMM (ceiling)", f"{meas.dgemm_gflops:.2f} GF/s", "all ranks computing at once"]]
        rows += [[f"bandwidth: {k}", f"{v:.2f} GB/s", "per direction"] for k, v in meas.bw_gbps.items()]
        rows.append(["network roof", f"{m.networks[0].bw_gbps_per_direction:.2f} GB/s", m.networks[0].label])
        rows.append(["ridge", f"{m.peak_gflops / (2 * m.networks[0].bw_gbps_per_direction):.3g} flop/B", CONVENTION])
        output.table(f"{m.name}: per node", ["", "value", "how"], rows)
        if m.shared_memory:
            output.text(f"All {ranks} ranks ran on one host ({meas.hosts[0]}): the bandwidths are shared-memory "
                        f"copies, not a network; each rank stands for a node with {threads} core(s).")
        output.text(f"wrote {out}" + (f" (the previous one is kept as {kept})" if kept else ""))
    output.emit_json({**meas.to_json(), "machine_file": str(out)}, args.json)
    return 0


def load_measured(path: Path) -> Machine:
    if path == results.MACHINE and not path.is_file():
        raise UsageError(f"no machine file at {path}; measure this machine first (mpiscope roofline measure) "
                         f"or give one with --machine FILE")
    return load_machine(path)


def run_bench_cmd(args: argparse.Namespace) -> int:
    _check_sizes(args)
    m = load_measured(args.machine)
    ranks = args.ranks or int(m.measured.get("ranks", 2))
    threads = args.threads or int(m.measured.get("threads_per_rank", 1))
    launch = make_launch(ranks, threads, args.launcher)
    intensities = args.intensities or default_intensities(m, args.points)
    plans = plan_points(m, intensities, ranks, args.matrix, args.msg_bytes, args.seconds)
    with output.progress("roofline bench", total=(len(plans) + 4) * args.repeat) as bar:
        res = run_bench(m, str(args.machine), launch, plans, args.matrix, args.repeat, advance=bar.advance)
    out = args.out or results.BENCH
    payload = res.to_json()
    kept = results.save(out, results.json_bytes(payload), results.BENCH, args.force)
    if args.json != "-":
        output.table(f"Roofline benchmark on {m.name}: {ranks} nodes, per node",
                     ["intensity", "GF/s", "roof", "% of roof", "compute s", "comm s", "flag"],
                     [[f"{p['intensity']:.3g}", f"{p['gflops']:.2f}", f"{p['roof_gflops']:.2f}",
                       f"{100 * p['fraction_of_roof']:.0f}", f"{p['compute_seconds']:.3f}",
                       f"{p['comm_seconds']:.3f}", "ABOVE ROOF" if p["above_roof"] else ""] for p in res.points])
        c = res.ceilings
        output.text(f"ceilings in the same run (004 §4.3): the products alone {c['dgemm_gflops']:.2f} GF/s, "
                    f"the exchange alone {c['exchange_gbps_per_direction']:.2f} GB/s per direction")
        for note in res.notes:
            output.text(f"note: {note}")
        output.text(f"wrote {out}" + (f" (the previous one is kept as {kept})" if kept else ""))
    for p in res.above_roof():
        output.warn(f"the point at I = {p['intensity']:.3g} reached {p['gflops']:.2f} GF/s, above the roof "
                    f"{p['roof_gflops']:.2f}: a measurement error (the machine file's roofs are too low, or the "
                    f"machine was busy while measuring); re-measure with mpiscope roofline measure")
    output.emit_json(payload, args.json)
    return 0
