"""Write one self-contained HTML page showing a trace: time-line, message detail, density view, statistics.

  mpiscope report trace                          # -> trace/report.html
  mpiscope report trace -o run.html --max-size 50
  mpiscope report after --baseline before        # the two runs' density views one above the other

The page opens offline in any browser (every script, style and datum inside).
When the single events of the whole run exceed --max-size, it holds the
time-line binned for the whole run and the single events of the busiest
windows; `mpiscope view trace` shows every event of any window.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from mpiscope import output
from mpiscope.errors import UsageError
from mpiscope.output import fmt_bytes, fmt_ns
from mpiscope.report.baseline import baseline, check_ranks
from mpiscope.report.build import MB, build_report, open_merged


def prepare_parser(p: argparse.ArgumentParser) -> None:
    p.add_argument("trace_dir", type=Path, metavar="TRACE")
    p.add_argument(
        "-o", "--output", type=Path, metavar="FILE.html", help="the page (default TRACE/report.html)"
    )
    p.add_argument("--force", action="store_true", help="replace an existing output file")
    p.add_argument(
        "--max-size",
        type=float,
        default=25.0,
        metavar="MB",
        help="largest page in MB (10^6 bytes; default 25)",
    )
    p.add_argument(
        "--baseline", type=Path, metavar="BEFORE", help="an earlier run of the same program to compare"
    )
    p.add_argument("--json", metavar="FILE", help="write what was written as JSON (- for stdout)")


def run(args: argparse.Namespace) -> int:
    trace = open_merged(args.trace_dir)
    out: Path = args.output or args.trace_dir / "report.html"
    if out.exists() and not args.force:
        raise UsageError(f"{out} exists; pass --force to replace it, or -o another file")
    if out.is_dir():
        raise UsageError(f"{out} is a directory; give a file name with -o, e.g. -o {out / 'report.html'}")
    if not args.max_size > 0:
        raise UsageError(
            f"--max-size {args.max_size} is not a size; give megabytes above 0, e.g. --max-size 25"
        )
    before = None
    if args.baseline is not None:
        before = open_merged(args.baseline, "baseline")
        check_ranks(before, trace)
    report = build_report(trace, int(args.max_size * MB), baseline(before) if before else None)
    data = report.html.encode()
    output.write_atomic(out, data)
    if report.complete:
        detail = "every single event"
    else:
        shown = sum(b - a for a, b in report.windows)
        detail = (
            f"single events of {report.event_tiles} of {report.event_tiles_total} windows "
            f"({fmt_ns(shown)} of {fmt_ns(report.payload['meta']['span_ns'])}); "
            f"every event: mpiscope view {args.trace_dir}"
        )
    output.info(f"report: {out} ({fmt_bytes(len(data))}, {report.seconds:.1f} s; {detail})")
    output.emit_json(
        {
            "schema": "mpiscope.report/1",
            "run_id": report.payload["meta"]["run_id"],
            "output": str(out),
            "html_bytes": len(data),
            "seconds": report.seconds,
            "complete": report.complete,
            "windows": report.windows,
            "event_level": report.event_level,
            "bin_levels": report.bin_levels,
            "event_tiles": report.event_tiles,
            "event_tiles_total": report.event_tiles_total,
        },
        args.json,
    )
    return 0
