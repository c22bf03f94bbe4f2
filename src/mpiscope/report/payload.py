"""The page's data (`DATA` of docs/report-protocol.md) but its tiles: meta, summary, statistics.

The figures are those of `mpiscope stats` (analysis.stats), plus what only the
page shows: time per call family and rank, the full communication matrix and
the message-size histogram.
"""

from __future__ import annotations

import logging
import math
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from mpiscope import __version__
from mpiscope.analysis.findings import short_site
from mpiscope.analysis.stats import RMA_GET_CALLS, RMA_PUT_CALLS, Stats
from mpiscope.capture.run import program_of
from mpiscope.errors import UsageError
from mpiscope.mpi.find import implementation_of
from mpiscope.report.bcast import bcast_section
from mpiscope.report.source import FAMILIES, Vocab
from mpiscope.trace import ENV_CALLS, Trace
from mpiscope.trace.placement import oversubscribed, oversubscribed_sentence

log = logging.getLogger(__name__)

SCHEMA = "mpiscope.report/1"
MATRIX_MAX = 256  # above this many ranks the matrix holds blocks of ranks
TOP_SUMMARY, TOP_CALLSITES = 3, 20
PER_RANK = [
    "rank",
    "app_time_ns",
    "mpi_time_ns",
    "outside_mpi_ns",
    "mpi_pct",
    "calls",
    "messages_sent",
    "bytes_sent",
    "messages_received",
    "bytes_received",
]


def jsonable(value: Any) -> Any:
    """JSON has no NaN or infinity (they become null) and no NumPy scalars."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return jsonable(value.tolist())
    if isinstance(value, np.generic):
        return jsonable(value.item())
    return value


def meta(trace: Trace, t0_ns: int, span_ns: float, mode: str) -> dict[str, Any]:
    m = trace.manifest
    counts = m.get("counts", {})
    mpi = m.get("mpi", {}) or {}
    placed = m.get("placement") or {}
    ran = placed.get("mpi_library") or []
    # the MPI that ran, where the rank files say it (the manifest's `mpi` is the one built for)
    impl, version = implementation_of(ran[0]) if ran else (mpi.get("implementation"), mpi.get("version"))
    command = [str(c) for c in m.get("command", [])]
    return {
        "run_id": str(m.get("run_id", "")),
        "command": command,
        "program": Path((program_of(command, m.get("cwd")) or command[0]) if command else "").name,
        "ranks": trace.ranks,
        "hosts": {str(k): v for k, v in (m.get("hosts") or {}).items()},
        "mpi": {"implementation": impl, "version": version},
        "host_cpus": {str(h): v.get("cpus") for h, v in (placed.get("hosts") or {}).items()},
        "t0_ns": t0_ns,
        "span_ns": span_ns,  # to the last stop where ranks were stopped by a signal (`stopped`)
        "stopped": bool(trace.stopped_ns),
        # the merge's counts; a table is counted only for a manifest without them
        **{name: int(counts[name]) if name in counts else int(getattr(trace, name)().select(pl.len()).collect().item())
           for name in ("events", "messages", "collectives")},
        "unmatched_sends": int(counts.get("unmatched_sends", 0)),
        "unmatched_recvs": int(counts.get("unmatched_recvs", 0)),
        "warnings": [str(w) for w in m.get("warnings", [])] + [
            oversubscribed_sentence(c.host, len(c.ranks), c.cpus) for c in oversubscribed(m)],
        "mode": mode,
        "generated_by": f"mpiscope {__version__}",
        "trace_dir": str(Path(trace.path).resolve()),
    }


def _short(site: pl.Expr) -> pl.Expr:
    """Call sites as the page names them: a C++ function without its return type, template arguments
    and parameters (short_site, as the findings name them), so that a table cell shows the function
    rather than the start of a 200-character demangled name ("miniFE::TypeTraits<miniFE::Vector<d...")."""
    return site.cast(pl.String).map_elements(short_site, return_dtype=pl.String, skip_nulls=True)


def _with_note(m: dict[str, Any], note: str) -> dict[str, Any]:
    """meta with a sentence of the statistics' among its warnings (a paused recording)."""
    return m | {"warnings": m["warnings"] + [note]} if note else m


def summary(s: Stats) -> dict[str, Any]:
    calls = s.per_call.head(TOP_SUMMARY).select("call", "count", "total_ns", "pct_mpi")
    sites = s.callsites.head(TOP_SUMMARY).select(
        "call", _short(pl.col("callsite")).fill_null(""), "count", "total_ns", "pct_mpi"
    )
    return {
        "per_rank": s.per_rank.select(PER_RANK + s.one_sided_columns + s.file_io_columns).to_dicts(),
        "top_calls": calls.to_dicts(),
        "top_callsites": sites.to_dicts(),
    }


def per_family(events: pl.LazyFrame, ranks: int, call_names: list[str],
               stopped: dict[int, float] | None = None) -> list[list[float]]:
    """Per rank (list index), ns in each family (list index = family code), over the calls that
    count as MPI time in `stats` (not MPI_Init/Finalize/Pcontrol; a call that never returned until
    its rank was stopped, `stopped` on the events' clock, else left out), so that a rank's families
    add up to its mpi_time_ns (within_mpi_time: where its threads were in MPI at once)."""
    env = [i for i, n in enumerate(call_names) if n in ENV_CALLS]
    until = pl.col("t1")
    if stopped:
        until = (pl.when(until.is_nan()).then(pl.col("rank").cast(pl.Int64).replace_strict(
            stopped, default=float("nan"), return_dtype=pl.Float64)).otherwise(until))
    g = (
        events.with_columns(until.alias("t1")).filter(~pl.col("call").is_in(env) & pl.col("t1").is_not_nan())
        .group_by("rank", "family")
        .agg((pl.col("t1") - pl.col("t0")).sum().alias("ns"))
        .collect()
    )
    out = np.zeros((ranks, len(FAMILIES)))
    r, f = g["rank"].to_numpy().astype(np.int64), g["family"].to_numpy().astype(np.int64)
    ok = r < ranks
    out[r[ok], f[ok]] = g["ns"].to_numpy()[ok]
    rows: list[list[float]] = out.tolist()
    return rows


def threads(trace: Trace, ranks: int) -> list[int] | None:
    """Per rank, the threads its calls came from (highest index + 1): the time-line draws each
    thread of a rank on a lane of its own (one row hid one thread's calls under another's). None
    where every rank called MPI from one thread. A scan of two columns (the view's in-memory
    columns stay as they are)."""
    most = trace.events().group_by("rank").agg(pl.col("thread").max()).collect()
    if most.is_empty() or not most["thread"].max():
        return None
    out = np.ones(ranks, np.int64)
    r = most["rank"].to_numpy().astype(np.int64)
    ok = r < ranks
    out[r[ok]] = most["thread"].to_numpy().astype(np.int64)[ok] + 1
    return [int(x) for x in out]


def within_mpi_time(families: list[list[float]], per_rank: pl.DataFrame) -> list[list[float]]:
    """Each rank's families scaled to its MPI time where its threads were in MPI together (their
    calls' times add up to more than the rank's wall time in MPI, stats.py): the bars show how the
    rank's time divides, in the calls' proportions."""
    out = np.asarray(families, float)
    rank, mpi = per_rank["rank"].to_numpy().astype(np.int64), per_rank["mpi_time_ns"].to_numpy().astype(float)
    ok = rank < out.shape[0]
    rank, mpi = rank[ok], mpi[ok]
    summed = out[rank].sum(axis=1)
    over = summed > mpi
    out[rank[over]] *= (mpi[over] / summed[over])[:, None]
    rows: list[list[float]] = out.tolist()
    return rows


def matrix(trace: Trace, ranks: int) -> dict[str, Any]:
    """Bytes and messages from each rank (row) to each rank (column); blocks of ranks above 256.
    With `one_sided` (where the run has one-sided calls, as stats counts them): the bytes that
    puts, accumulates and atomics carried from origin to target and gets from target to origin."""
    block = max(1, math.ceil(ranks / MATRIX_MAX))
    n = max(1, math.ceil(ranks / block))

    def cells(pairs: pl.LazyFrame, *values: str) -> list[np.ndarray]:
        g = (pairs.group_by((pl.col("src") // block).alias("s"), (pl.col("dst") // block).alias("d"))
             .agg(pl.len().alias("m"), pl.col("bytes").sum().alias("b")).collect())
        s, d = g["s"].to_numpy().astype(np.int64), g["d"].to_numpy().astype(np.int64)
        ok = (s < n) & (d < n)
        out = []
        for v in values:
            a = np.zeros((n, n), np.int64 if v == "m" else np.float64)
            a[s[ok], d[ok]] = g[v].to_numpy()[ok]
            out.append(a)
        return out

    b, m = cells(trace.messages().select("src", "dst", "bytes"), "b", "m")
    out: dict[str, Any] = {"ranks": n, "block": block, "bytes": b.tolist(), "messages": m.tolist()}
    ev = trace.events().select("rank", "peer", "call", "bytes").filter(pl.col("peer").is_not_null())
    name = pl.col("call").cast(pl.Utf8)
    put = ev.filter(name.is_in(RMA_PUT_CALLS)).select(pl.col("rank").alias("src"), pl.col("peer").alias("dst"),
                                                       "bytes")
    get = ev.filter(name.is_in(RMA_GET_CALLS)).select(pl.col("peer").alias("src"), pl.col("rank").alias("dst"),
                                                       "bytes")
    (one_sided,) = cells(pl.concat([put, get]), "b")
    if one_sided.any():
        out["one_sided"] = one_sided.tolist()
    return out


def size_hist(trace: Trace) -> list[dict[str, int]]:
    """Point-to-point message sizes in power-of-two bins [2^k, 2^(k+1)); 0 bytes in [0, 1)."""
    k = (
        pl.when(pl.col("bytes") > 0)
        .then(pl.col("bytes").cast(pl.Float64).log(2).floor().cast(pl.Int64) + 1)
        .otherwise(0)
        .alias("k")
    )
    g = (
        trace.messages()
        .group_by(k)
        .agg(pl.len().alias("count"), pl.col("bytes").sum().alias("bytes"))
        .sort("k")
        .collect()
    )
    return [
        {"lo_bytes": 0 if i == 0 else 2 ** (i - 1), "hi_bytes": 2**i if i else 1, "count": c, "bytes": b}
        for i, c, b in zip(g["k"].to_list(), g["count"].to_list(), g["bytes"].to_list())
    ]


def build(
    trace: Trace,
    s: Stats,
    v: Vocab,
    events: pl.LazyFrame,
    t0_ns: int,
    span_ns: float,
    mode: str,
    ranks: int,
    with_diagnosis: bool = True,
) -> dict[str, Any]:
    """The payload without `pyramid`, `detail` and `tiles` (the tile sources add those)."""
    return {
        "schema": SCHEMA,
        "meta": _with_note(meta(trace, t0_ns, span_ns, mode) | {"ranks": ranks}, s.paused_note),
        "summary": summary(s),
        "stats": {
            "per_call": s.per_call.to_dicts(),
            "posted_note": s.posted_note,
            "callsites": s.callsites.head(TOP_CALLSITES).with_columns(_short(pl.col("callsite"))).to_dicts(),
            "per_family": within_mpi_time(per_family(events, ranks, v.calls, {
                r: float(ns - t0_ns) for r, ns in trace.stopped_ns.items()}), s.per_rank),
            "matrix": matrix(trace, ranks),
            "size_hist": size_hist(trace),
        },
        "families": FAMILIES,
        "calls": v.calls,
        "call_family": v.call_family.tolist(),
        "callsites": [short_site(c) if c else c for c in v.callsites],
        "threads": threads(trace, ranks),
        "diagnosis": diagnosis(trace) if with_diagnosis else None,
        "bcast": bcast_section(trace),
        "baseline": None,
    }


def diagnosis(trace: Trace) -> dict[str, Any] | None:
    """`mpiscope diagnose --json`'s object; None where the trace has nothing to diagnose."""
    from mpiscope.analysis.diagnose import diagnose

    try:
        return diagnose(trace).to_json()
    except UsageError as e:
        log.info("no diagnosis in the report: %s", e)
        return None
