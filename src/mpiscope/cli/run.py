"""Run an MPI program under the recording library, then merge its trace.

  mpiscope run --out trace -- mpiexec -n 4 ./app args

The program is not recompiled: libmpiscope is preloaded (LD_PRELOAD). The
exit code is the program's, also when the merge fails. MPI_Pcontrol(0)/(1) in the program pauses and
resumes recording; --paused starts paused. --bcast adaptive replaces MPI_Bcast
by the adaptive broadcast (recorded as usual; --no-record: not recorded).
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from mpiscope import output
from mpiscope.capture.bcast import bcast_config
from mpiscope.capture.run import run_traced, run_unrecorded
from mpiscope.cli.merge import report_merge
from mpiscope.errors import MpiscopeError, UsageError
from mpiscope.trace.merge import merge_trace


def prepare_parser(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", "-o", type=Path, default=Path("mpiscope-trace"), help="trace directory (default: mpiscope-trace)")
    p.add_argument("--force", action="store_true", help="replace a trace already in --out")
    p.add_argument("--paused", action="store_true", help="start with recording paused (resume with MPI_Pcontrol(1))")
    p.add_argument("--no-merge", action="store_true", help="keep only the raw files; merge later with mpiscope merge")
    p.add_argument("--bcast", metavar="MODE",
                   help="MPI_Bcast: adaptive (000's virtual-rank tree, SPEC §5), binomial (the same tree, fixed) "
                        "or library (the MPI's own, the default); parameters from MPISCOPE_BCAST_* variables")
    p.add_argument("--no-record", action="store_true",
                   help="with --bcast: run the broadcast alone, without recording a trace")
    p.add_argument("command", nargs=argparse.REMAINDER, help="-- mpiexec -n N prog args...")


def run(args: argparse.Namespace) -> int:
    cmd = args.command[1:] if args.command[:1] == ["--"] else args.command
    bcast = bcast_config(args.bcast, os.environ)
    if args.no_record:
        if bcast is None:
            raise UsageError("--no-record runs the adaptive broadcast without recording, so it needs a broadcast; "
                             "add --bcast adaptive or --bcast binomial")
        return run_unrecorded(cmd, bcast)
    result = run_traced(cmd, args.out, force=args.force, paused=args.paused, bcast=bcast)
    if result.manifest.get("interrupted"):
        output.warn(f"the program was interrupted (Ctrl-C, exit code {result.exit_code}); merging what was recorded")
    elif result.exit_code != 0:
        output.warn(f"the program exited with code {result.exit_code}; merging what was recorded")
    if not args.no_merge:
        try:
            merged = merge_trace(result.trace_dir)
            report_merge(merged, result.trace_dir)
            if args.paused and merged.events == 0:
                output.warn(f"nothing was recorded: recording started paused (--paused) and the program never "
                            f"resumed it with MPI_Pcontrol(1); record again without --paused")
        except (MpiscopeError, MemoryError) as e:
            # the job's exit code is the program's, whatever the merge says (issue 23)
            output.error(f"{e if isinstance(e, MpiscopeError) else 'the merge ran out of memory'}; the raw files "
                         f"are kept: once that is fixed, mpiscope merge {result.trace_dir} will finish the merge")
    return result.exit_code
