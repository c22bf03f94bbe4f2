"""IMB-compatible benchmarks: overlap of nonblocking collectives with computation, one-sided progress.

  mpiscope bench overlap [--ops ialltoall,ibcast] [-n 4] [--sizes 0:4M] [--async-progress both]
  mpiscope bench rma [--ops put,truly_passive_put] [--sizes 0:4M]
  mpiscope bench bcast max-effect|random|sparse [--simulate] [--ranks 128]

Each benchmark is a sub-command; add one by adding a line to BENCHMARKS.
"""

from __future__ import annotations

import argparse
import importlib

from mpiscope.errors import UsageError

# benchmark -> module in mpiscope.cli with prepare_parser(p) and run(args) -> int
BENCHMARKS = {
    "overlap": "bench_overlap",
    "rma": "bench_rma",
    "bcast": "bench_bcast",
}


def prepare_parser(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="benchmark", metavar="BENCHMARK")
    for name, module in BENCHMARKS.items():
        mod = importlib.import_module(f"mpiscope.cli.{module}")
        doc = mod.__doc__ or ""
        sp = sub.add_parser(name, help=doc.strip().splitlines()[0] if doc else None, description=doc,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
        mod.prepare_parser(sp)
        sp.set_defaults(bench_handler=mod.run)


def run(args: argparse.Namespace) -> int:
    handler = getattr(args, "bench_handler", None)
    if handler is None:
        raise UsageError(f"name a benchmark to run: mpiscope bench {'|'.join(BENCHMARKS)} (see mpiscope bench -h)")
    return int(handler(args))
