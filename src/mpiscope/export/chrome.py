"""Chrome trace-event JSON (ui.perfetto.dev, chrome://tracing, speedscope) for small traces:
JSON costs ~150 bytes and a parse per event, so above CHROME_MAX_EVENTS calls the export is
refused in favour of Perfetto's protobuf format, which streams.

Complete events ("X") per call on a (pid = rank, tid = thread) track with the call's
arguments, flows ("s"/"f") from each send to the call that delivered the message, and
nonblocking operations as async events ("b"/"e"). Times are microseconds with ns decimals.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
import numpy as np
import polars as pl

from mpiscope.errors import UsageError
from mpiscope.export import ExportResult, Progress, staged_output
from mpiscope.export import streams as S
from mpiscope.export.perfetto import ARGS, with_flows
from mpiscope.trace import Trace

CHROME_MAX_EVENTS = 1_000_000


def _us(ns: pl.Series, t0: int | pl.Series) -> pl.Series:
    """Microseconds since t0, divided by NumPy: Polars multiplies a column by the inverse of its
    divisor (881992.6730000001 for 881992.673)."""
    return pl.Series(np.true_divide((ns - t0).to_numpy(), 1000.0))


# An argument the call does not have is left out (json_encode writes it as null).
_NULL_ARG = re.compile(r'"(?:%s)":null,?' % "|".join((*ARGS, "callsite")))


def _rank_events(trace: Trace, rank: int, t0: int) -> list[str]:
    """The rank's records as JSON objects, in order: each call ("X"), then the flows leaving it ("s")
    and ending in it ("f"), then its nonblocking operation ("b", "e"). Built as columns and encoded by
    Polars: a json.dumps per record took 26 s of 252 k calls (meep)."""
    ev = S.rank_events(trace, rank)
    sends, recvs = S.rank_messages(trace, rank)
    ev = with_flows(ev, sends, recvs).with_row_index("_i")
    ev = ev.with_columns(_us(ev["t_enter_ns"], t0).alias("_ts"), _us(ev["t_leave_ns"], t0).alias("_tl"),
                         _us(ev["t_leave_ns"], ev["t_enter_ns"]).alias("_dur"),
                         _us(ev["t_complete_ns"].fill_null(t0), t0).alias("_tc"))
    ts, tid = pl.col("_ts"), pl.col("thread")
    ph = {"name": pl.col("call"), "pid": pl.lit(rank), "tid": tid}

    def rec(df: pl.DataFrame, order: int, **fields: pl.Expr) -> pl.DataFrame:
        return df.select("_i", pl.lit(order).alias("_k"), pl.struct(**fields).struct.json_encode().alias("json"))

    args = pl.struct(*(pl.col(a) for a in ARGS),
                     pl.when(pl.col("callsite") != "").then(pl.col("callsite")).alias("callsite"))
    calls = rec(ev, 0, **ph, cat=pl.lit("mpi"), ph=pl.lit("X"), ts=ts,
                dur=pl.col("_dur"), args=args)
    calls = calls.with_columns(pl.col("json").str.replace_all(_NULL_ARG.pattern, "").str.replace(",}}", "}}",
                                                                                              literal=True))
    flows = []
    for order, column, phase, at in ((1, "fo", "s", ts), (2, "fi", "f", pl.col("_tl"))):
        one = ev.select("_i", "thread", pl.col(column).alias("_id"), at.alias("_t")).explode("_id").drop_nulls("_id")
        fields = {"name": pl.lit("message"), "cat": pl.lit("message"), "ph": pl.lit(phase)} | \
            ({"bp": pl.lit("e")} if phase == "f" else {})
        flows.append(rec(one, order, **fields, id=pl.col("_id"), pid=pl.lit(rank), tid=tid, ts=pl.col("_t")))
    later = ev.filter(pl.col("t_complete_ns").is_not_null() & (pl.col("t_complete_ns") > pl.col("t_leave_ns")))
    aid = pl.struct(pl.format("{}:{}", pl.lit(rank), pl.col("event")).alias("local"))
    spans = [rec(later, order, **ph, cat=pl.lit("nonblocking"), ph=pl.lit(phase), id2=aid, ts=at)
             for order, phase, at in ((3, "b", ts), (4, "e", pl.col("_tc")))]
    out = pl.concat([calls, *flows, *spans]).sort("_i", "_k", maintain_order=True)
    return out["json"].to_list()


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
            meta = {"name": "process_name", "ph": "M", "pid": rank, "args": {"name": f"MPI rank {rank}"}}
            items = [json.dumps(meta, separators=(",", ":")), *_rank_events(trace, rank, t0)]
            f.write(("" if first else ",\n") + ",\n".join(items))
            first = False
            records += len(items)
            if progress:
                progress(n)
        f.write("\n]}\n")
    return ExportResult("chrome-json", out, events, records, time.perf_counter() - t_start)
