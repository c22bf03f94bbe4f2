"""Per-rank, per-call, per-call-site and per-pair statistics of a trace.

  mpiscope stats trace [--json -]
"""

from __future__ import annotations

import argparse
from pathlib import Path

from mpiscope import output
from mpiscope.analysis.stats import Stats, summarize
from mpiscope.output import fmt_bytes, fmt_ns
from mpiscope.trace import open_trace
from mpiscope.trace.placement import oversubscribed_sentence


def prepare_parser(p: argparse.ArgumentParser) -> None:
    p.add_argument("trace_dir", type=Path)
    p.add_argument("--json", metavar="FILE", help="write the figures as JSON (- for stdout)")
    p.add_argument("--top", type=int, default=20, help="rows of the call-site and pair tables (default 20)")


def render(s: Stats) -> None:
    rma = bool(s.one_sided_columns)
    io = bool(s.file_io_columns)
    output.table(
        f"Per rank ({s.ranks} ranks)",
        ["rank", "app time", "MPI time", "MPI %", *(["of it MPI-IO"] if io else []), "outside MPI", "calls", "sent",
         "received", "coll. sent", "coll. received", *(["one-sided put", "one-sided get"] if rma else []),
         *(["file read", "file written"] if io else [])],
        [[r["rank"], fmt_ns(r["app_time_ns"]), fmt_ns(r["mpi_time_ns"]), f"{r['mpi_pct']:.1f}" if r["mpi_pct"] is not None else "-",
          *([fmt_ns(r["io_time_ns"])] if io else []), fmt_ns(r["outside_mpi_ns"]), r["calls"],
          fmt_bytes(r["bytes_sent"]), fmt_bytes(r["bytes_received"]),
          fmt_bytes(r["collective_bytes_sent"]), fmt_bytes(r["collective_bytes_received"]),
          *([fmt_bytes(r["rma_bytes_put"]), fmt_bytes(r["rma_bytes_get"])] if rma else []),
          *([fmt_bytes(r["io_bytes_read"]), fmt_bytes(r["io_bytes_written"])] if io else [])]
         for r in s.per_rank.iter_rows(named=True)])
    if s.paused_note:
        output.text(s.paused_note)
    output.table(
        "Per call", ["call", "count", "total", "mean", "max", "% MPI", "bytes", "received"],
        [[r["call"], r["count"], fmt_ns(r["total_ns"]), fmt_ns(r["mean_ns"]), fmt_ns(r["max_ns"]),
          f"{r['pct_mpi']:.1f}", fmt_bytes(r["bytes"]), fmt_bytes(r["recv_bytes"]) if r["recv_bytes"] else ""]
         for r in s.per_call.iter_rows(named=True)])
    if s.posted_note:
        output.text(s.posted_note)
    output.table(
        "Top call sites by time", ["call", "call site", "ranks", "count", "total", "mean", "% MPI"],
        [[r["call"], r["callsite"] or "?", r["ranks"], r["count"], fmt_ns(r["total_ns"]), fmt_ns(r["mean_ns"]),
          f"{r['pct_mpi']:.1f}"] for r in s.callsites.iter_rows(named=True)])
    output.table(
        "Top communicating pairs", ["src", "dst", "messages", "bytes"],
        [[r["src"], r["dst"], r["messages"], fmt_bytes(r["bytes"])] for r in s.pairs.iter_rows(named=True)])
    threaded = s.per_rank.filter(s.per_rank["threads"] > 1)["rank"].to_list()
    if threaded:
        output.text(f"rank{'s' if len(threaded) > 1 else ''} {', '.join(map(str, threaded[:8]))}"
                    f"{', ...' if len(threaded) > 8 else ''}: several threads in MPI; a rank's MPI time counts "
                    f"the moments they were in MPI together once, the call tables each call's own time")
    for o in s.oversubscribed:
        output.warn(oversubscribed_sentence(o["host"], o["ranks"], o["cpus"], o["threads"]))
    output.text(f"unmatched messages: {s.unmatched_messages} "
                f"({s.unmatched_sends} sends, {s.unmatched_recvs} receives)")
    if s.bcast_mode != "library":
        undone = sum(1 for w in s.bcast_swaps if w["op"] == "undo")
        output.text(f"MPI_Bcast: {s.bcast_mode}, {len(s.bcast_swaps) - undone} swap(s) of virtual ranks, "
                    f"{undone} undone")
    if s.truncated_ranks:
        output.warn(f"ranks that did not finish: {s.truncated_ranks}")


def run(args: argparse.Namespace) -> int:
    s = summarize(open_trace(args.trace_dir), top=args.top)
    output.show(lambda: render(s), s.to_json(), args.json)
    return 0
