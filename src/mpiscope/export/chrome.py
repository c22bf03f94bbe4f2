"""Chrome trace-event JSON (ui.perfetto.dev, chrome://tracing, speedscope) for small traces:
JSON costs ~150 bytes and a parse per event, so above CHROME_MAX_EVENTS calls the export is
refused in favour of Perfetto's protobuf format, which streams.

Complete events ("X") per call on a (pid = rank, tid = thread) track with the call's
arguments, flows ("s"/"f") from each send to the call that delivered the message, and
nonblocking operations as async events ("b"/"e"). Times are microseconds with ns decimals.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from mpiscope.errors import UsageError
from mpiscope.export import ExportResult, Progress, staged_output
from mpiscope.export import streams as S
from mpiscope.export.perfetto import ARGS, with_flows
from mpiscope.trace import Trace

CHROME_MAX_EVENTS = 1_000_000


def _us(ns: int, t0: int) -> float:
    return (ns - t0) / 1000.0


def _rank_events(trace: Trace, rank: int, t0: int) -> list[dict[str, Any]]:
    ev = S.rank_events(trace, rank)
    sends, recvs = S.rank_messages(trace, rank)
    ev = with_flows(ev, sends, recvs)
    out: list[dict[str, Any]] = []
    for row in ev.iter_rows(named=True):
        ts, tid = _us(row["t_enter_ns"], t0), row["thread"]
        args = {k: row[k] for k in ARGS if row[k] is not None}
        if row["callsite"]:
            args["callsite"] = row["callsite"]
        out.append(
            {
                "name": row["call"],
                "cat": "mpi",
                "ph": "X",
                "pid": rank,
                "tid": tid,
                "ts": ts,
                "dur": _us(row["t_leave_ns"], row["t_enter_ns"]),
                "args": args,
            }
        )
        for f in row["fo"] or []:
            out.append(
                {"name": "message", "cat": "message", "ph": "s", "id": f, "pid": rank, "tid": tid, "ts": ts}
            )
        for f in row["fi"] or []:
            out.append(
                {
                    "name": "message",
                    "cat": "message",
                    "ph": "f",
                    "bp": "e",
                    "id": f,
                    "pid": rank,
                    "tid": tid,
                    "ts": _us(row["t_leave_ns"], t0),
                }
            )
        if row["t_complete_ns"] is not None and row["t_complete_ns"] > row["t_leave_ns"]:
            aid = f"{rank}:{row['event']}"
            out.append(
                {
                    "name": row["call"],
                    "cat": "nonblocking",
                    "ph": "b",
                    "id2": {"local": aid},
                    "pid": rank,
                    "tid": tid,
                    "ts": ts,
                }
            )
            out.append(
                {
                    "name": row["call"],
                    "cat": "nonblocking",
                    "ph": "e",
                    "id2": {"local": aid},
                    "pid": rank,
                    "tid": tid,
                    "ts": _us(row["t_complete_ns"], t0),
                }
            )
    return out


def export_chrome(
    trace: Trace, out: Path, force: bool = False, progress: Progress | None = None
) -> ExportResult:
    """Write the trace as Chrome trace-event JSON `out`; refused above CHROME_MAX_EVENTS calls."""
    t_start = time.perf_counter()
    spans = S.rank_spans(trace)
    events = S.as_int(spans["events"].sum())
    if events > CHROME_MAX_EVENTS:
        raise UsageError(
            f"{trace.path} has {events:,} calls, more than Chrome JSON's limit of "
            f"{CHROME_MAX_EVENTS:,}; export it with --format perfetto, which streams any size"
        )
    t0 = S.as_int(S.thread_spans(trace)["t0"].min())
    records = 0
    with staged_output(out, force, is_dir=False) as stage, open(stage, "w") as f:
        f.write('{"displayTimeUnit": "ns", "otherData": ')
        json.dump({"run_id": trace.manifest.get("run_id"), "t0_ns": t0}, f)
        f.write(', "traceEvents": [\n')
        first = True
        for rank, n in spans.select("rank", "events").iter_rows():
            meta = [{"name": "process_name", "ph": "M", "pid": rank, "args": {"name": f"MPI rank {rank}"}}]
            for item in meta + _rank_events(trace, rank, t0):
                f.write(("" if first else ",\n") + json.dumps(item, separators=(",", ":")))
                first = False
                records += 1
            if progress:
                progress(n)
        f.write("\n]}\n")
    return ExportResult("chrome-json", out, events, records, time.perf_counter() - t_start)
