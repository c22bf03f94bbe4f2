"""Merge a trace's per-rank raw files into Parquet tables (run does it itself).

  mpiscope merge trace
"""

from __future__ import annotations

import argparse
from pathlib import Path

from mpiscope import output
from mpiscope.trace.merge import MergeResult, merge_trace


def prepare_parser(p: argparse.ArgumentParser) -> None:
    p.add_argument("trace_dir", type=Path)


def report_merge(r: MergeResult, trace_dir: Path) -> None:
    for w in r.warnings:
        output.warn(w)
    output.info(f"merged {r.events} events, {r.messages} messages, {r.collectives} collectives "
                f"({r.unmatched_sends + r.unmatched_recvs} unmatched) in {r.seconds:.2f} s -> {trace_dir}")


def run(args: argparse.Namespace) -> int:
    report_merge(merge_trace(args.trace_dir), args.trace_dir)
    return 0
