"""New work shares from per-rank compute times (S-CAT 003 §4.2), as a table, JSON or a partition file.

  mpiscope rebalance TRACE --shares 512x4 [--phase K] -o mm.part     (times from the trace's phases)
  mpiscope rebalance --times 4.99,5.65,6.34,6.91,7.11,7.26,7.74,7.51,7.59,7.65,7.70,7.81,8.04,8.13,8.21,8.27 \\
      --shares 128x16 --json -

Rank i computed its w_i rows in t_i seconds; its new share is w_i * mean(t) / t_i, rescaled to the
same total and rounded to multiples of --granularity rows (default 4) by largest remainder. With a
TRACE, t_i is rank i's computation time in the phase whose slowest rank computed longest (or
--phase K, or --phase all: summed over every phase). --shares is ROWSxRANKS, a comma list, or a partition file (one line per rank: ROWS, or
START END). -o writes the new partition as START END lines, the file the mm example reads
(mm --partition FILE).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import polars as pl

from mpiscope import output
from mpiscope.analysis.rebalance import (
    ALL_PHASES,
    DEFAULT_GRANULARITY,
    Rebalance,
    format_partition,
    parse_partition,
    parse_shares,
    parse_times,
    phase_times,
    rebalance,
)
from mpiscope.errors import UsageError
from mpiscope.trace import open_trace


def prepare_parser(p: argparse.ArgumentParser) -> None:
    p.add_argument("trace_dir", nargs="?", type=Path, metavar="TRACE", help="trace to take the compute times from")
    p.add_argument("--times", metavar="T0,T1,...", help="compute seconds per rank, instead of a TRACE")
    p.add_argument("--shares", required=True, metavar="ROWSxRANKS|LIST|FILE",
                   help="current rows per rank: 128x16, 184,164,..., or a partition file")
    p.add_argument("--phase", type=_phase, metavar="K|all",
                   help="trace phase to use, or all: the computation summed over every phase (an iterative "
                        "program's steps); default: the phase whose slowest rank computed longest")
    p.add_argument("--granularity", type=int, default=DEFAULT_GRANULARITY, metavar="G",
                   help=f"new shares are multiples of G rows (default {DEFAULT_GRANULARITY})")
    p.add_argument("--json", metavar="FILE", help="write the result as JSON (- for stdout)")
    p.add_argument("-o", "--out", type=Path, metavar="PARTITION", help="write the new partition file (START END lines)")
    p.add_argument("--force", action="store_true", help="replace an existing -o file")


def read_shares(text: str) -> list[int]:
    shares = parse_shares(text)
    if shares is not None:
        return shares
    path = Path(text)
    if not path.is_file():
        raise UsageError(f"--shares {text!r} is neither ROWSxRANKS (e.g. 128x16), a comma list of rows, nor a "
                         f"partition file; give one of these")
    try:
        content = path.read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise UsageError(f"cannot read partition file {path} ({e}); give a readable text file") from e
    return parse_partition(content, str(path))


def _phase(text: str) -> int | str:
    if text == ALL_PHASES:
        return text
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is neither a phase number nor 'all'") from None


def compute(args: argparse.Namespace) -> tuple[Rebalance, str]:
    """The result, and a note on where its times come from."""
    if (args.trace_dir is None) == (args.times is None):
        raise UsageError("give either a TRACE or --times (not both); "
                         "e.g. mpiscope rebalance --times 4.99,5.65 --shares 128x2")
    shares = read_shares(args.shares)
    if args.times is not None:
        if args.phase is not None:
            raise UsageError("--phase needs a TRACE; leave it out with --times")
        return rebalance(parse_times(args.times), shares, args.granularity), "times given"
    trace = open_trace(args.trace_dir)
    if len(shares) != trace.ranks:
        raise UsageError(f"--shares gives {len(shares)} ranks but {args.trace_dir} has {trace.ranks}; "
                         f"give one share per rank (e.g. --shares {sum(shares) // max(trace.ranks, 1)}x{trace.ranks})")
    times, phase = phase_times(trace, args.phase)
    if trace.events().select(pl.col("thread").max()).collect().item():
        output.warn(f"the ranks of {args.trace_dir} called MPI from several threads: a rank's computation here is "
                    f"the time none of its threads was in MPI, and new shares move the rank's work as a whole")
    result = rebalance(times, shares, args.granularity, phase=phase, run_id=str(trace.manifest.get("run_id", "")))
    return result, f"times from {args.trace_dir} " + ("summed over all phases" if phase == ALL_PHASES else f"phase {phase}")


def render(r: Rebalance, note: str) -> None:
    predicted = r.predicted_times_s
    output.table(
        f"Rebalance ({note}, granularity {r.granularity})",
        ["rank", "rows", "compute", "new rows", "[start, end)", "predicted"],
        [[i, old, f"{t:.3f} s", new, f"{start}-{end}", f"{p:.3f} s"]
         for i, (old, t, new, (start, end), p) in enumerate(zip(r.old_shares, r.times_s, r.shares, r.rows,
                                                                  predicted, strict=True))])
    j = r.to_json()
    output.text(f"slowest rank: {j['max_time_s']:.3f} s -> predicted {j['predicted_max_time_s']:.3f} s "
                f"({-j['predicted_gain_pct']:+.1f} %)")


def run(args: argparse.Namespace) -> int:
    if args.out is not None and args.out.exists() and not args.force:
        raise UsageError(f"{args.out} exists; add --force to replace it, or choose another -o")
    result, note = compute(args)
    if args.out is not None:
        output.write_atomic(args.out, format_partition(result, note).encode())
        output.info(f"partition written to {args.out} (use it with: mm --partition {args.out})")
    output.show(lambda: render(result, note), result.to_json(), args.json)
    return 0
