"""Export a trace for the tools people already use: OTF2, Perfetto, Chrome JSON, CSV.

  mpiscope export trace --format otf2 -o trace-otf2          # Vampir/Scalasca: trace-otf2/traces.otf2
  mpiscope export trace --format perfetto -o trace.pftrace   # ui.perfetto.dev, trace_processor
  mpiscope export trace --format chrome-json -o trace.json   # small traces: chrome://tracing too
  mpiscope export trace --format csv -o trace-csv            # one CSV per table

The output appears only when the export is complete (an interrupted export leaves
nothing); an existing output is replaced only with --force.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from mpiscope import output
from mpiscope.errors import UsageError
from mpiscope.export import DIRECTORY_FORMATS, FORMATS, ExportResult, Progress, check_output, check_room
from mpiscope.trace import Trace, open_trace


def prepare_parser(p: argparse.ArgumentParser) -> None:
    p.add_argument("trace_dir", type=Path)
    p.add_argument("--format", "-f", required=True, metavar="FORMAT", help=f"one of: {', '.join(FORMATS)}")
    p.add_argument(
        "-o",
        "--out",
        required=True,
        type=Path,
        help="output: a directory for otf2 and csv, a file for perfetto and chrome-json",
    )
    p.add_argument("--force", action="store_true", help="replace an existing output")
    p.add_argument(
        "--workers",
        type=int,
        default=None,
        help="processes for otf2 and perfetto (default: the usable cores)",
    )
    p.add_argument("--json", metavar="FILE", help="write what was exported as JSON (- for stdout)")


def run(args: argparse.Namespace) -> int:
    if args.format not in FORMATS:
        raise UsageError(f"unknown export format {args.format!r}; choose one of {', '.join(FORMATS)}")
    check_output(args.out, args.force, args.format in DIRECTORY_FORMATS)  # before a merge, not after
    trace = open_trace(args.trace_dir)
    events = trace.event_count or None
    check_room(args.out, args.format, events or 0)
    with output.progress(f"export {args.format}", total=events) as bar:

        def advance(n: int) -> None:
            bar.advance(n)

        result = _export(args, trace, advance)
    what = {
        "otf2": f"open {result.path / 'traces.otf2'} in Vampir or Scalasca",
        "perfetto": "open it in ui.perfetto.dev",
        "chrome-json": "open it in ui.perfetto.dev or chrome://tracing",
        "csv": ", ".join(result.files),
    }[result.format]
    output.info(
        f"exported {result.events:,} calls ({result.records:,} records) to {result.path} "
        f"in {result.seconds:.1f} s; {what}"
    )
    output.emit_json(result.to_json(str(trace.manifest.get("run_id", ""))), args.json)
    return 0


def _export(args: argparse.Namespace, trace: Trace, advance: Progress) -> ExportResult:
    # each format's module loads its own library (otf2, perfetto's protos) only when asked for
    if args.format == "otf2":
        from mpiscope.export.otf2 import export_otf2

        return export_otf2(trace, args.out, args.force, advance, args.workers)
    if args.format == "perfetto":
        from mpiscope.export.perfetto import export_perfetto

        return export_perfetto(trace, args.out, args.force, advance, args.workers)
    if args.format == "chrome-json":
        from mpiscope.export.chrome import export_chrome

        return export_chrome(trace, args.out, args.force, advance)
    from mpiscope.export.tabular import export_csv

    return export_csv(trace, args.out, args.force, advance)
