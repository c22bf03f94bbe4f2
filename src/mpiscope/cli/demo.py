"""The loop end to end on the embedded MPI: S-CAT's gallery recorded, diagnosed and shown.

  mpiscope demo [--out DIR] [-n 4] [--only mm,ep]

Builds the five programs of S-CAT's gallery (003 §4-5: mm, lu, sor, ep, nqueens), records each
with mpiscope run, prints its statistics and its first finding, and writes its report
(DIR/NAME/report.html). Each takes a few seconds on 4 ranks.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from mpiscope import output
from mpiscope.analysis.stats import summarize
from mpiscope.capture.run import run_traced
from mpiscope.cli.merge import report_merge
from mpiscope.errors import MpiError, UsageError
from mpiscope.mpi.build import compile_program
from mpiscope.mpi.find import find_launcher
from mpiscope.output import fmt_bytes, fmt_ns
from mpiscope.report.build import build_report
from mpiscope.trace import open_trace
from mpiscope.trace.merge import merge_trace

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


@dataclass(frozen=True)
class Example:
    name: str
    args: tuple[str, ...]
    shows: str  # what its density view shows (003 Figs. 5, 8-11)


GALLERY = (
    Example("mm", ("--n", "1024"), "low ranks finish their rows early and sit idle until the gather (003 Fig. 5)"),
    Example("lu", ("--n", "768"), "one pivot-row broadcast per step: thin, even traffic, no idle rank (Fig. 8)"),
    Example("sor", ("--sweeps", "100"), "halo rows and a barrier every sweep: dense all over (Fig. 9)"),
    Example("ep", ("--seconds", "2"), "independent work, one reduction: blank but for the very end (Fig. 10)"),
    Example("nqueens", ("--n", "13"), "a task farm: the master receives most messages, a hot spot (Fig. 11)"),
)


def prepare_parser(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", type=Path, default=Path("mpiscope-demo"),
                   help="directory of the traces, one per example (default mpiscope-demo; earlier demo traces "
                        "in it are replaced)")
    p.add_argument("-n", "--ranks", type=int, default=4)
    p.add_argument("--only", metavar="NAMES", help="comma-separated examples to run (default: all five)")


def chosen(only: str | None) -> list[Example]:
    if not only:
        return list(GALLERY)
    names = [n.strip() for n in only.split(",") if n.strip()]
    known = {e.name: e for e in GALLERY}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise UsageError(f"--only {only}: no example named {', '.join(unknown)}; choose from {', '.join(known)}")
    return [known[n] for n in names]


def run_one(ex: Example, launcher: str, ranks: int, out: Path) -> tuple[Path, int]:
    prog = compile_program(EXAMPLES / f"{ex.name}.c")
    cmd = [launcher, "-n", str(ranks), str(prog), *ex.args]
    output.text(f"\n[bold]{ex.name}[/bold]: mpiscope run --out {out} -- {' '.join(cmd)}")
    result = run_traced(cmd, out, force=(out / "manifest.json").is_file())
    report_merge(merge_trace(out), out)
    trace = open_trace(out)
    s = summarize(trace)
    app, mpi = int(s.per_rank["app_time_ns"].sum()), int(s.per_rank["mpi_time_ns"].sum())
    sent = int(s.per_rank.select(pl.col("bytes_sent").sum() + pl.col("collective_bytes_sent").sum()).item())
    output.text(f"  {trace.manifest.get('counts', {}).get('events', 0):,} calls, {fmt_bytes(sent)} sent, "
                f"{100 * mpi / max(app, 1):.0f} % of the ranks' time in MPI over {fmt_ns(app / max(s.ranks, 1))}")
    built = build_report(trace)
    findings = (built.payload.get("diagnosis") or {}).get("findings") or []
    if findings:
        output.text(f"  finding: {findings[0]['text']}")
    report = out / "report.html"
    output.write_atomic(report, built.html.encode())
    output.text(f"  its density view: {ex.shows}")
    return report, result.exit_code


def run(args: argparse.Namespace) -> int:
    examples = chosen(args.only)
    launcher = find_launcher()
    if not launcher:
        raise MpiError("no mpiexec found; run make setup (it installs the mpich wheel) or put your MPI on PATH")
    output.text(f"S-CAT's gallery on {args.ranks} ranks: record, diagnose, report ({EXAMPLES})")
    reports, worst = [], 0
    for ex in examples:
        report, code = run_one(ex, launcher, args.ranks, args.out / ex.name)
        reports.append((ex.name, report))
        worst = worst or code
    output.text("\n[bold]Reports[/bold] (open in a browser; mpiscope view DIR serves every call of a trace "
                "too big for one page):")
    for name, report in reports:
        output.text(f"  {name:8s} {report.resolve()}")
    return worst
