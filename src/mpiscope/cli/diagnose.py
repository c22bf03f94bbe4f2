"""Diagnose a trace: wait states and their causes, load imbalance, hot spots, critical path.

  mpiscope diagnose trace                  # top findings and wait states in the terminal
  mpiscope diagnose trace --json -         # everything as JSON (schema mpiscope.diagnose/1)

Wait states as Scalasca names them (late sender, late receiver, wait at barrier
and at N×N collectives, late broadcast, early reduce), each with the rank that was
late and the computation before its late call; phases cut at the collectives all
ranks take part in, with each rank's computation; findings in plain words with
what to do.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.markup import escape

from mpiscope import output
from mpiscope.analysis.diagnose import Diagnosis, diagnose
from mpiscope.analysis.findings import fmt_s, short_site
from mpiscope.analysis.waitstates import DEFAULT_EAGER_LIMIT
from mpiscope.cli.units import parse_bytes
from mpiscope.errors import UsageError
from mpiscope.trace import open_trace


def prepare_parser(p: argparse.ArgumentParser) -> None:
    p.add_argument("trace_dir", type=Path, metavar="TRACE")
    p.add_argument("--json", metavar="FILE", help="write the whole diagnosis as JSON (- for stdout)")
    p.add_argument("--top", type=int, default=10, help="findings and wait-state rows shown (default 10)")
    p.add_argument("--eager-limit", default=None, metavar="BYTES",
                   help="MPI_Send/Isend/Sendrecv of at least this many bytes wait for their receive "
                        f"(rendezvous; default: what the trace's sends show where below {DEFAULT_EAGER_LIMIT // 1024}K, "
                        f"else on one host the MPI's shared-memory limit (Open MPI 4K, MPICH 8K), else "
                        f"{DEFAULT_EAGER_LIMIT // 1024}K); MPI_Ssend always does")


def render(d: Diagnosis, top: int) -> None:
    # facts of the run said before the findings, on the same stream (a warning on stderr left its
    # advice on stdout alone): the findings cover the run up to its end; every one of them holds the
    # time ranks waited for a CPU
    if d.ended_early:
        output.text(f"[yellow]{escape(d.ended_early)}[/yellow]")
    if d.oversubscribed:
        output.text(f"[yellow]{escape(d.oversubscribed.text)}[/yellow]")
        output.text(f"   [green]→ {escape(d.oversubscribed.suggestion)}[/green]")
    if not d.findings:
        output.text("No finding: no rank waited or computed noticeably longer than the others.")
    for i, f in enumerate(d.findings[:top], 1):
        output.text(f"[bold]{i}.[/bold] {escape(f.text)}")
        output.text(f"   [green]→ {escape(f.suggestion)}[/green]")
    rows = d.wait_states.head(top).to_dicts()
    if rows:
        output.table(f"Wait states (top {len(rows)} of {d.wait_states.height})",
                     ["pattern", "rank", "call", "call site", "times", "waited", "mostly for", "at"],
                     [[r["pattern"], r["rank"], r["call"], short_site(r["callsite"]), r["instances"],
                       fmt_s(r["seconds"]), f"rank {r['caused_by'][0]['rank']}",
                       short_site(r["caused_by"][0]["callsite"])] for r in rows],
                     justify_right_from=4)
    cp = d.critical_path
    shares = sorted(enumerate(cp.share_by_rank), key=lambda x: -x[1])[:5]
    output.text(f"critical path: {fmt_s(cp.seconds)}, by rank: "
                + ", ".join(f"{r} {100 * s:.0f} %" for r, s in shares if s > 0))
    if d.imbalance is not None:
        t = d.imbalance.totals()
        output.text(f"phases: {t['phase_count']}, imbalance {t['imbalance_pct']:.1f} % over the run, critical rank "
                    f"{t['critical_rank']}, up to {fmt_s(t['lost_seconds'])} lost")
    for note in d.notes:
        output.text(f"[dim]{escape(note)}[/dim]")


def run(args: argparse.Namespace) -> int:
    if args.top < 1:
        raise UsageError(f"--top {args.top} shows nothing; give a positive number, e.g. --top 10")
    eager_limit = parse_bytes(args.eager_limit, "--eager-limit") if args.eager_limit is not None else None
    d = diagnose(open_trace(args.trace_dir), eager_limit=eager_limit)
    output.show(lambda: render(d, args.top), d.to_json(), args.json)
    return 0
