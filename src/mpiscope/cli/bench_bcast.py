"""000's adaptive-broadcast experiments: max-effect, random loads, sparse product.

  mpiscope bench bcast max-effect --simulate --ranks 128 --json -     # 000 Tables 1-2, SimGrid SMPI
  mpiscope bench bcast max-effect --ranks 8 --sizes 1K --load-set captions --iters 30
  mpiscope bench bcast random --simulate --patterns 200 --jobs 2 --plot random.png
  mpiscope bench bcast sparse --simulate --procs 8,16,32,64 --n 4000

Each runs the adaptive broadcast (Opt) beside the fixed binomial tree over the
identity table (Ori), the best static table (Ide) and the MPI's own MPI_Bcast,
in the same run, with real MPI (--ranks, this machine) or simulated at 000's
scale in SimGrid (--simulate: the workload is simulated computation, results
are deterministic). Tables follow 000's layout with its values beside ours.
The adaptive broadcast's parameters come from the MPISCOPE_BCAST_* variables.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from mpiscope import output
from mpiscope.bench import bcast_paper as paper
from mpiscope.bench.bcast import SimSetup
from mpiscope.bench.bcast_plan import (
    DEFAULT_VARIANTS,
    EXPERIMENTS,
    VARIANTS,
    Options,
    experiment_params,
    load_sets,
    measure,
)
from mpiscope.bench.bcast_plot import plot_bcast
from mpiscope.bench.bcast_results import (
    BcastResult,
    max_effect_table,
    paper_cell,
    random_summary,
    sparse_rows,
)
from mpiscope.bench.catalog import parse_sizes
from mpiscope.capture.bcast import PARAMS, bcast_config
from mpiscope.cli.bench_options import check_outputs, write_outputs
from mpiscope.errors import UsageError
from mpiscope.sim.native import simgrid_version
from mpiscope.sim.platform import parse_quantity

DEFAULT_SIZES = {"max-effect": "1,1K,16K,32K,128K,1M,8M,16M", "random": "1,1M", "sparse": "1"}


def prepare_parser(p: argparse.ArgumentParser) -> None:
    p.add_argument("experiment", choices=EXPERIMENTS, help="000 §5.1 max-effect, §5.1 random loads, §5.2 sparse")
    p.add_argument("--simulate", action="store_true", help="run in SimGrid SMPI (default: real MPI on this machine)")
    p.add_argument("-n", "--ranks", type=int, help="processes (default 128 simulated, 8 real)")
    p.add_argument("--sizes", metavar="LIST", help="message sizes, e.g. 1,1K,1M (default: the paper's)")
    p.add_argument("--load-set", choices=["headers", "captions", "both"], default="both",
                   help="max-effect loads N: 000's column headers 0/30/40/80/160, captions 0/60/80/160/240, "
                        "or both (default)")
    p.add_argument("--loads", metavar="LIST", help="max-effect: your own matrix orders N instead")
    p.add_argument("--iters", type=int, default=100, help="broadcasts per measurement (default 100, as 000)")
    p.add_argument("--variants", metavar="LIST", help=f"of {','.join(VARIANTS)} (default: all the experiment uses)")
    p.add_argument("--patterns", type=int, default=200, help="random: load patterns (default 200, as 000)")
    p.add_argument("--first-pattern", type=int, default=0, help="random: first pattern number (default 0)")
    p.add_argument("--n", type=int, default=4000, help="sparse: matrix order N (000: 4000 or 14000)")
    p.add_argument("--density", type=float, default=0.1, help="sparse: non-zero ratio R (000: 0.1, 0.05, 0.01)")
    p.add_argument("--slope", type=float, default=0.2, help="sparse: column slope C (000: 0.2, 0.6)")
    p.add_argument("--runs", type=int, help="sparse: runs per condition (default 1 simulated, 3 real; 000: 50)")
    p.add_argument("--seed", type=int, default=1, help="sparse: matrix seed (default 1)")
    p.add_argument("--procs", metavar="LIST", help="sparse: process counts (default 8,16,32,64 simulated, "
                                                    "--ranks real)")
    p.add_argument("--jobs", type=int, default=1, help="simulations run at once (default 1)")
    sim = p.add_argument_group("simulated platform (defaults fitted to 000's RSCC figures)")
    sim.add_argument("--latency", default="158us", help="host to host (default 158us)")
    sim.add_argument("--send-bandwidth", default="320MBps", help="bytes a sender puts out per second (default 320MBps)")
    sim.add_argument("--node-speed", default="45.6Mf", help="host speed (default 45.6Mf)")
    p.add_argument("--launcher-args", default="", metavar="ARGS", help="extra mpiexec arguments")
    p.add_argument("--json", metavar="FILE", help="write every figure as JSON (- for stdout)")
    p.add_argument("--plot", type=Path, metavar="FILE", help="write 000's figures (.png, .svg or .pdf)")
    p.add_argument("--force", action="store_true", help="overwrite existing --json/--plot files")
    p.set_defaults(csv=None)


def _ints(text: str, what: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise UsageError(f"{what} {text!r} is not a list of whole numbers; write e.g. 0,30,40") from None


def options(args: argparse.Namespace) -> Options:
    exp = args.experiment
    variants = tuple(v.strip() for v in (args.variants.split(",") if args.variants else DEFAULT_VARIANTS[exp]))
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown or not variants:
        raise UsageError(f"--variants {args.variants} names {', '.join(unknown) or 'nothing'}; give some of "
                         f"{', '.join(VARIANTS)}")
    config = bcast_config("adaptive", os.environ)
    assert config is not None
    explicit = {p.name for p in PARAMS if os.environ.get(p.env)}
    ranks = args.ranks or (paper.RANKS if args.simulate else 8)
    procs = _ints(args.procs, "--procs") if args.procs else ([8, 16, 32, 64] if args.simulate else [ranks])
    return Options(exp, args.simulate, ranks, parse_sizes(args.sizes or DEFAULT_SIZES[exp]),
                   load_sets(args.load_set, _ints(args.loads, "--loads") if args.loads else None), args.iters,
                   variants, args.patterns, args.first_pattern, args.n, args.density, args.slope,
                   args.runs or (1 if args.simulate else 3), args.seed, procs, max(1, args.jobs),
                   experiment_params(exp, config, explicit))


def _fmt(v: float | None) -> str:
    if v is None:
        return "-"
    return f"{v:.4g}" if v < 1 else f"{v:.4g}" if v < 1000 else f"{v:.0f}"


def render_max_effect(r: BcastResult) -> None:
    rows = r.rows()
    for name in r.load_sets():
        loads = sorted({(int(x["column"]), int(x["load"])) for x in rows if x.get("load_set") == name})
        for what, title in (("overall_s", "Table 1, overall time"), ("average_s", "Table 2, average time")):
            head = f"{'size':>7}" + "".join(f"  {f'L{c} (N={n})':<22}" for c, n in loads)
            lines = [f"{title} (ms), {r.ranks} processes, loads {name}: Ori/Opt/Ide; 000's values below ours",
                     head]
            for size, cells in max_effect_table(rows, name, what):
                lines.append(f"{paper.size_label(size):>7}" + "".join(
                    f"  {'/'.join(_fmt(v) for v in c[:3]):<22}" for c in cells))
                ref = [paper_cell(size, c, what) if name in paper.LOAD_SETS else None for c, _ in loads]
                if any(ref):
                    lines.append(f"{'000':>7}" + "".join(
                        f"  {'/'.join(_fmt(v) for v in x) if x else '-':<22}" for x in ref))
                if any(c[3] is not None for c in cells):
                    lines.append(f"{'library':>7}" + "".join(f"  {_fmt(c[3]):<22}" for c in cells))
            output.preformatted("\n".join(lines))
        s = r.summary()[name]
        p = paper.KEY_RESULTS
        output.text(
            f"loads {name}: average time cut at the heaviest load, sizes <= 128 KB: at least "
            f"{_pct(s['average_cut_heaviest_min_le_128k_pct'])} (000: up to {p['average_cut_max_pct']} %); overall "
            f"cut at the heaviest load, 8 MB: {_pct(s['overall_cut_heaviest_8mb_pct'])} (000: {p['overall_cut_max_pct']}"
            f" %); no load, Opt against Ori: within {_pct(s['no_load_max_deviation_pct'])} (000: ~2 %); Opt/Ide "
            f"overall at most {_fmt(s['opt_over_ide_overall_max'])} (000: ~1.03)")


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{v:.1f} %"


def render_random(r: BcastResult) -> None:
    rows = []
    for key, v in random_summary(r.rows()).items():
        ref = ", ".join(f"{k} {100 * x:.1f} %" for k, x in v["paper"].items()) or "-"
        rows.append([key, v["patterns"], f"{100 * v['le_0.95']:.1f}", f"{100 * v['ge_1.05']:.1f}",
                     f"{100 * v['within_5pct']:.1f}", f"{v['median']:.3f}", f"{v['best']:.3f}", f"{v['worst']:.3f}",
                     ref])
    output.table(f"Random loads, Opt/Ori over patterns ({r.ranks} processes; 000 Figs. 13-14)",
                 ["size/time", "patterns", "<=0.95 %", ">=1.05 %", "within %", "median", "best", "worst", "000"],
                 rows)


def render_sparse(r: BcastResult) -> None:
    rows: list[list[Any]] = []
    table = sparse_rows(r.rows())
    for row in table:
        ori = next((x for x in table if x["variant"] == "binomial" and x["ranks"] == row["ranks"]
                    and x["n"] == row["n"]), None)
        cells = [f"{1e6 * row[w]:.1f}" + (f" ({row[w] / ori[w]:.3f})" if ori and row is not ori else "")
                 for w in ("work_s", "bcast_s", "total_s")]
        ref = row.get("paper_us")
        rows.append([f"{row['n']}/{row['density']:g}/{row['slope']:g}", row["ranks"], row["variant"], *cells,
                     " / ".join(_fmt(ref[k]) for k in ("work", "bcast", "total")) if ref else "-"])
    output.table("Sparse product, us per row (x/Ori); 000 Table 3 beside (work / bcast / total)",
                 ["N/R/C", "p", "variant", "work", "bcast", "total", "000"], rows)


def run(args: argparse.Namespace) -> int:
    o = options(args)
    check_outputs(args)
    if o.simulate:
        simgrid_version()  # one sentence naming the package when SimGrid is missing
    setup = SimSetup(parse_quantity(args.latency, "latency"), parse_quantity(args.send_bandwidth, "bandwidth"),
                     parse_quantity(args.node_speed, "node speed"))
    result = measure(o, setup, args.launcher_args)
    if args.json != "-":
        {"max-effect": render_max_effect, "random": render_random, "sparse": render_sparse}[o.experiment](result)
    for note in result.notes:
        output.warn(note)
    write_outputs(args, result.to_json(), "", lambda path: plot_bcast(result, path))
    return 0
