"""`roofline plot` and `roofline place`: the chart and the application points on it (part of cli/roofline.py)."""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

from mpiscope import output
from mpiscope.errors import MpiscopeError, UsageError
from mpiscope.output import fmt_bytes
from mpiscope.roofline import flops as perf_flops
from mpiscope.roofline import results
from mpiscope.roofline.chart import chart_data, overlay_data
from mpiscope.roofline.cpu import CPUINFO
from mpiscope.roofline.html import render_html
from mpiscope.roofline.machines import builtin, builtin_names, load_machine
from mpiscope.roofline.model import Machine


def _machine_args(p: argparse.ArgumentParser) -> None:
    g = p.add_mutually_exclusive_group()
    g.add_argument("--machine", type=Path, metavar="FILE", help=f"machine file (default: {results.MACHINE})")
    g.add_argument("--system", metavar="KEY", help=f"a built-in system: {', '.join(builtin_names())}")


def pick_machine(args: argparse.Namespace) -> Machine:
    if args.system:
        return builtin(args.system)
    path = args.machine or results.MACHINE
    if not path.is_file() and args.machine is None:
        raise UsageError(f"no machine file at {path}; measure this machine (mpiscope roofline measure), "
                         f"or give --machine FILE or --system KEY ({', '.join(builtin_names())})")
    return load_machine(path)


def prepare_plot(p: argparse.ArgumentParser) -> None:
    g = p.add_mutually_exclusive_group()
    g.add_argument("--machine", type=Path, metavar="FILE", help=f"machine file (default: {results.MACHINE})")
    g.add_argument("--system", metavar="KEY", action="append",
                   help=f"a built-in system ({', '.join(builtin_names())}); repeat it, or say 'all', to "
                   f"overlay several systems' roofs (004 Fig. 5)")
    p.add_argument("--network", metavar="LABEL", help="the machine's network level drawn as the roof "
                   "(default: the first; the others are drawn dashed)")
    p.add_argument("--bench", type=Path, help=f"benchmark results (default with the measured machine: {results.BENCH})")
    p.add_argument("--app", type=Path, action="append", default=[], metavar="FILE",
                   help="application point written by place --json FILE (repeatable)")
    p.add_argument("--out", type=Path, help=f"output path without suffix (default: {results.PLOT})")
    p.add_argument("--force", action="store_true", help="replace existing --out files")
    p.add_argument("--json", metavar="FILE", help="write the chart data as JSON (- for stdout)")


def _chart(args: argparse.Namespace) -> dict[str, Any]:
    keys = builtin_names() if args.system == ["all"] else (args.system or [])
    if len(keys) > 1:
        if args.bench or args.app:
            raise UsageError("several systems give an overlay of their roofs only; plot points with one "
                             "--system or --machine")
        return overlay_data([builtin(k) for k in keys])
    args.system = keys[0] if keys else None
    m = pick_machine(args)
    roof = m.network(args.network)
    m = replace(m, networks=(roof, *[n for n in m.networks if n is not roof]))
    # the default bench file belongs to the default machine file, not to a machine named on the command line
    default_machine = args.system is None and args.machine is None
    bench_path = args.bench or (results.BENCH if default_machine and results.BENCH.is_file() else None)
    hint = "run mpiscope roofline bench, or give the file it wrote with --bench"
    bench = results.load_json(bench_path, "benchmark file", "mpiscope.roofline/1", hint) if bench_path else None
    apps = [results.load_json(a, "application file", "mpiscope.roofline/1",
                              "write one with mpiscope roofline place DIR --json FILE") for a in args.app]
    return chart_data(m, bench, apps)


def run_plot(args: argparse.Namespace) -> int:
    # matplotlib takes seconds to import, and every `mpiscope` command builds this verb's parser
    from mpiscope.roofline.plot import render_png

    d = _chart(args)
    prefix = args.out or results.PLOT
    png, html = prefix.with_suffix(".png"), prefix.with_suffix(".html")
    default = args.out is None
    results.save(png, render_png(d), png if default else Path(), args.force)
    results.save(html, render_html(d), html if default else Path(), args.force)
    if args.json != "-":
        for r in d["ridges"]:
            name = r["label"] if d["overlay"] else d["machine"]["name"]
            output.text(f"{name}: ridge I = {r['intensity']:.3g} flop/B")
        n = sum(p["series"] == "benchmark" for p in d["points"])
        output.text(f"{n} benchmark point(s), {len(d['points']) - n} application point(s); wrote {png} and {html}")
        for note in d["notes"]:
            output.text(f"note: {note}")
    for e in d["errors"]:
        output.warn(f"{e}; re-measure the machine (mpiscope roofline measure) or check the inputs")
    output.emit_json({**d, "png": str(png), "html": str(html)}, args.json)
    return 0


def prepare_place(p: argparse.ArgumentParser) -> None:
    p.add_argument("trace_dir", type=Path, nargs="?", help="trace directory (from mpiscope run)")
    _machine_args(p)
    p.add_argument("--network", metavar="LABEL", help="the machine's network level to judge against (default: first)")
    p.add_argument("--flops", type=float, help="floating-point operations of the whole run (all ranks), when "
                   "hardware counters did not count them")
    p.add_argument("--intensity", type=float, help="place a known point instead of a trace: flop per byte")
    p.add_argument("--gflops", type=float, help="with --intensity: its achieved GF/s per node")
    p.add_argument("--comm-factor", type=float, action="append", default=[], metavar="F",
                   help="what-if: inter-node bytes x F (e.g. 0.25; repeatable)")
    p.add_argument("--ranks-as-nodes", action="store_true",
                   help="count each rank as a node (for a run on one host)")
    p.add_argument("--force", action="store_true", help="with --run: replace a trace in TRACE_DIR")
    p.add_argument("--json", metavar="FILE", help="write the point as JSON (- for stdout); plot --app reads it")
    p.add_argument("--run", dest="command", nargs=argparse.REMAINDER, default=[], metavar="CMD",
                   help="last option: mpiexec -n N ./app ... records that run into TRACE_DIR first, each rank "
                   "under perf stat when this machine can count flops")


@contextmanager
def _stdout_to_stderr(active: bool) -> Iterator[None]:
    """With --json -, the program's own output goes to stderr so that stdout stays one JSON document."""
    if not active:
        yield
        return
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    try:
        yield
    finally:
        os.dup2(saved, 1)
        os.close(saved)


def _record(trace_dir: Path, cmd: list[str], force: bool, quiet_stdout: bool) -> str | None:
    """Record `cmd` into trace_dir, each rank under perf stat if this machine can count flops."""
    from mpiscope.capture.run import run_traced

    events = perf_flops.flop_events(CPUINFO.read_text() if CPUINFO.is_file() else "")
    why_not = perf_flops.probe(events)
    counts = trace_dir / perf_flops.DIR_NAME
    run_cmd = cmd if why_not else perf_flops.wrap(cmd, counts, events)
    with tempfile.TemporaryDirectory(prefix="mpiscope-flops-") as old:
        # counts of a trace being replaced (--force) must not add to the new run's, nor be lost if it fails
        if counts.is_dir() and force:
            shutil.move(str(counts), old)
        try:
            with _stdout_to_stderr(quiet_stdout):
                result = run_traced(run_cmd, trace_dir, force=force)
        except MpiscopeError:
            if Path(old, perf_flops.DIR_NAME).is_dir() and not counts.exists():
                shutil.move(str(Path(old, perf_flops.DIR_NAME)), str(counts))
            raise
    if result.exit_code != 0:
        output.warn(f"the program exited with code {result.exit_code}; its point may be incomplete")
    return why_not


def run_place(args: argparse.Namespace) -> int:
    from mpiscope.roofline.place import Placement, place_trace  # Polars: imported only when placing
    from mpiscope.trace import open_trace

    m = pick_machine(args)
    net = m.network(args.network)
    factors = args.comm_factor
    for f in factors:
        if not f > 0:
            raise UsageError(f"--comm-factor {f}: give a factor greater than 0 (0.25 = a quarter of the bytes)")
    cmd = args.command[1:] if args.command[:1] == ["--"] else args.command
    why_not = None
    if args.trace_dir is None:
        if args.intensity is None or args.intensity <= 0:
            raise UsageError("give a trace directory (mpiscope roofline place TRACE_DIR) or a point with "
                             "--intensity I (> 0) [--gflops G]")
        pl = Placement(f"I = {args.intensity:g}", m, net, args.intensity, args.gflops, None, "given", None, factors)
    else:
        why_not = _record(args.trace_dir, cmd, args.force, args.json == "-") if cmd else None
        counted = perf_flops.read_counts(args.trace_dir)
        if counted:
            flops, source = counted.flops, counted.source
        elif args.flops and args.flops > 0:
            flops, source = args.flops, "given with --flops"
        else:
            why = why_not or ("this trace was not recorded with flop counting "
                              f"(mpiscope roofline place {args.trace_dir} --run mpiexec ...)")
            raise UsageError(f"no flop count for {args.trace_dir}: {why}; give the run's total with --flops N")
        pl = place_trace(open_trace(args.trace_dir), m, net, flops, source, args.ranks_as_nodes, factors)
    data = pl.to_json()
    if cmd and why_not:
        data["notes"].append(f"flops were not counted by hardware: {why_not}")
    if args.json != "-":
        render_place(data)
    output.emit_json(data, args.json)
    return 0


def render_place(d: dict[str, Any]) -> None:
    rows: list[list[Any]] = []
    if d["nodes"] is not None:
        kind = "ranks counted as nodes" if d["ranks_as_nodes"] else ("one host" if d["one_host"] else "hosts")
        rows += [["nodes", d["nodes"], kind],
                 ["inter-node bytes per node", fmt_bytes(d["inter_node_bytes_per_node"]), "sent + received, mean"],
                 ["intra-node bytes (point-to-point)", fmt_bytes(d["p2p_intra_node_bytes"]), "not on the network"],
                 ["flops", f"{d['flops']:.4g}", d["flops_source"]],
                 ["wall time", f"{d['wall_seconds']:.4g} s", "MPI_Init to MPI_Finalize"]]
    if d["intensity"] is not None:
        rows.append(["intensity", f"{d['intensity']:.4g} flop/B", "flops per inter-node byte"])
    if d["gflops"] is not None:
        rows.append(["achieved", f"{d['gflops']:.4g} GF/s per node", ""])
    rows.append(["roof here", f"{d['roof_gflops']:.4g} GF/s", f"{d['machine']}, {d['network']}"])
    output.table(f"Roofline point: {d['label']}", ["", "value", ""], rows)
    v = d["verdict"]
    if v:
        output.text(f"verdict: {v['advice']} ({100 * v['fraction']:.0f} % of {v['line']})")
    elif d["gflops"] is not None:
        output.text(f"verdict: no inter-node traffic, so only the node limits this run: "
                    f"{100 * d['gflops'] / d['peak_gflops']:.0f} % of the peak")
    for w in d["what_ifs"]:
        output.text(f"what-if: inter-node bytes x {w['comm_factor']:g} -> I = {w['intensity']:.4g}, attainable "
                    f"{w['attainable_gflops']:.4g} GF/s per node (now {w['attainable_before_gflops']:.4g})")
    for n in d["notes"]:
        output.text(f"note: {n}")
