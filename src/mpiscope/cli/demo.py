"""The loop end to end on the embedded MPI: build a bundled example, record it, show its statistics.

  mpiscope demo [--out DIR] [-n 4]
"""

from __future__ import annotations

import argparse
from pathlib import Path

from mpiscope import output
from mpiscope.analysis.stats import summarize
from mpiscope.capture.run import run_traced
from mpiscope.cli.merge import report_merge
from mpiscope.cli.stats import render
from mpiscope.errors import MpiError
from mpiscope.mpi.build import compile_program
from mpiscope.mpi.find import find_launcher
from mpiscope.trace import open_trace
from mpiscope.trace.merge import merge_trace

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def prepare_parser(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", type=Path, default=Path("mpiscope-demo"), help="trace directory (replaced if it holds a demo)")
    p.add_argument("-n", "--ranks", type=int, default=4)


def run(args: argparse.Namespace) -> int:
    launcher = find_launcher()
    if not launcher:
        raise MpiError("no mpiexec found; run make setup (it installs the mpich wheel) or put your MPI on PATH")
    output.text(f"[bold]1. build[/bold] the halo-exchange example ({EXAMPLES / 'halo.c'})")
    prog = compile_program(EXAMPLES / "halo.c")
    cmd = [launcher, "-n", str(args.ranks), str(prog), "20", "128"]
    output.text(f"[bold]2. record[/bold] mpiscope run --out {args.out} -- {' '.join(cmd)}")
    force = (args.out / "manifest.json").is_file()
    result = run_traced(cmd, args.out, force=force)
    report_merge(merge_trace(result.trace_dir), result.trace_dir)
    output.text(f"[bold]3. statistics[/bold] mpiscope stats {args.out}")
    render(summarize(open_trace(args.out)))
    output.text(f"\nThe tables are Parquet files in {args.out}/ (events, messages, collectives, comms).")
    return result.exit_code
