"""Run an MPI program under the recording library, then merge its trace.

  mpiscope run --out trace -- mpiexec -n 4 ./app args

The program is not recompiled: libmpiscope is preloaded (LD_PRELOAD). The
exit code is the program's. MPI_Pcontrol(0)/(1) in the program pauses and
resumes recording; --paused starts paused.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from mpiscope import output
from mpiscope.capture.run import run_traced
from mpiscope.cli.merge import report_merge
from mpiscope.trace.merge import merge_trace


def prepare_parser(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", "-o", type=Path, default=Path("mpiscope-trace"), help="trace directory (default: mpiscope-trace)")
    p.add_argument("--force", action="store_true", help="replace a trace already in --out")
    p.add_argument("--paused", action="store_true", help="start with recording paused (resume with MPI_Pcontrol(1))")
    p.add_argument("--no-merge", action="store_true", help="keep only the raw files; merge later with mpiscope merge")
    p.add_argument("command", nargs=argparse.REMAINDER, help="-- mpiexec -n N prog args...")


def run(args: argparse.Namespace) -> int:
    cmd = args.command[1:] if args.command[:1] == ["--"] else args.command
    result = run_traced(cmd, args.out, force=args.force, paused=args.paused)
    if result.exit_code != 0:
        output.warn(f"the program exited with code {result.exit_code}; merging what was recorded")
    if not args.no_merge:
        report_merge(merge_trace(result.trace_dir), result.trace_dir)
    return result.exit_code
