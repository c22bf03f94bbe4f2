"""Merge a trace's per-rank raw files into Parquet tables (run does it itself).

  mpiscope merge trace [--memory 4GiB] [--workers 2] [--delete-raw]
  mpiexec -n 3 mpiscope merge trace      (rank 0 leads, the other ranks merge pieces)
"""

from __future__ import annotations

import argparse
from pathlib import Path

from mpiscope import output
from mpiscope.capture.manifest import read_manifest
from mpiscope.cli.units import parse_bytes
from mpiscope.errors import UsageError
from mpiscope.parallel import mpi_rank, mpi_size, serve_tasks
from mpiscope.trace.merge import DEFAULT_MEMORY, MergeResult, merge_trace
from mpiscope.trace.placement import oversubscribed, oversubscribed_sentence


def prepare_parser(p: argparse.ArgumentParser) -> None:
    p.add_argument("trace_dir", type=Path)
    p.add_argument("--memory", default=f"{DEFAULT_MEMORY >> 30}GiB", metavar="SIZE",
                   help="the most memory the merge takes, all processes together (default 4GiB); a trace "
                        "that does not fit is merged in pieces")
    p.add_argument("--workers", type=int, default=1, metavar="N",
                   help="merge pieces on N processes of this machine (default 1); under mpiexec, the "
                        "job's ranks other than 0 are the workers")
    p.add_argument("--delete-raw", action="store_true",
                   help="remove each rank's raw records once its events are in the tables (when the disk "
                        "cannot hold the raw files and the tables at once)")


def report_merge(r: MergeResult, trace_dir: Path) -> None:
    for w in r.warnings:
        output.warn(w)
    output.info(f"merged {r.events} events, {r.messages} messages, {r.collectives} collectives "
                f"({r.unmatched_sends + r.unmatched_recvs} unmatched) in {r.seconds:.2f} s -> {trace_dir}")
    # said once the run is over, since it colours every time the trace holds
    for c in oversubscribed(read_manifest(trace_dir)):
        output.warn(oversubscribed_sentence(c.host, len(c.ranks), c.cpus))


def run(args: argparse.Namespace) -> int:
    if mpi_size() > 1 and mpi_rank() != 0:
        serve_tasks()
        return 0
    if args.workers < 1:
        raise UsageError(f"--workers {args.workers} is not a number of processes; give 1 or more")
    memory = parse_bytes(args.memory, "--memory")
    report_merge(merge_trace(args.trace_dir, memory, args.workers, args.delete_raw), args.trace_dir)
    return 0
