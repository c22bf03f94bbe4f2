"""Report and view at scale (issue 17): a generated 64-rank trace of 10 million calls
(mpiscope.trace.synthetic.halo_trace, merged as `mpiscope run` merges).

  report: build time of `mpiscope report` in a child process (target <= 30 s on 2 cores),
          and the page's size (target <= 25 MB);
  view:   indexing time (once per trace), time to the first tile of a fresh server, and the
          latency of the tiles 200 random zooms ask for, over HTTP on one keep-alive connection
          like a browser's (targets: median <= 100 ms, 95th percentile <= 250 ms).
Add --big-events 50000000 for the same on a 50-million-call trace: the 10-million-call trace
repeated five times one after the other (tables written directly: merging 75 M records would
need ~15 GiB of memory).

  page:   the report file and the view's page in Debian's chromium (bench/page_timing.py):
          first paint, and the redraw times of pans and zooms at every level (target: the 95th
          percentile <= 50 ms); --no-browser leaves them out.

    python bench/report_scale.py [--ranks 64] [--events 10000000] [--zooms 200] [--keep DIR] [--json FILE]
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from mpiscope import output
from mpiscope.trace import open_trace, table_files
from mpiscope.trace.merge import merge_trace
from mpiscope.trace.synthetic import halo_trace

HERE = Path(__file__).resolve().parent


def trace_of(root: Path, ranks: int, events: int) -> Path:
    """A merged halo trace with about `events` calls (4 of its 6 records per iteration are calls)."""
    path = root / f"halo-{ranks}x{events}"
    if not table_files(path, "events"):
        path.mkdir(parents=True, exist_ok=True)
        halo_trace(path, ranks, events * 3 // 2)
        merge_trace(path)
    return path


def repeated_trace(base: Path, root: Path, times: int) -> Path:
    """The merged tables of `base` `times` times one after the other, as one trace in the
    merge's order (rank, then time; event id = row): a large trace without a merge that size."""
    path = root / f"{base.name}-x{times}"
    if (path / "events.parquet").is_file():
        return path
    path.mkdir(parents=True, exist_ok=True)
    manifest = json.loads((base / "manifest.json").read_text())
    counts = manifest["counts"]
    trace = open_trace(base, merge=False)
    ev = trace.events()
    span = ev.select(pl.col("t_leave_ns").max() - pl.col("t_enter_ns").min()).collect().item() + 1000
    per_rank = ev.group_by("rank").agg(pl.col("event").min().alias("off"), pl.len().alias("cnt")).collect()

    def new_id(col: str, rank: str, k: int) -> pl.Expr:
        """Copy k of event `col` (of rank `rank`): after the copies of earlier ranks and k earlier copies."""
        return pl.col(col) + pl.col(f"_off_{rank}") * (times - 1) + k * pl.col(f"_cnt_{rank}")

    def with_rank(lf: pl.LazyFrame, rank: str) -> pl.LazyFrame:
        table = per_rank.lazy().select(
            pl.col("rank").cast(pl.Int32).alias(rank),
            pl.col("off").alias(f"_off_{rank}"),
            pl.col("cnt").cast(pl.Int64).alias(f"_cnt_{rank}"),
        )
        return lf.join(table, on=rank, how="left", maintain_order="left")

    def copies(
        name: str, ns: list[str], ids: dict[str, str], other: dict[str, int], order: list[str]
    ) -> None:
        lf = getattr(trace, name)()
        for rank in set(ids.values()):
            lf = with_rank(lf, rank)
        parts = [
            lf.with_columns(
                *[pl.col(c) + k * span for c in ns],
                *[new_id(c, rank, k) for c, rank in ids.items()],
                *[pl.col(c) + k * step for c, step in other.items()],
            )
            for k in range(times)
        ]
        out = pl.concat(parts).drop(pl.selectors.starts_with("_"))
        out = out.sort(order, maintain_order=True) if order else out
        out.sink_parquet(path / f"{name}.parquet", row_group_size=1 << 20)

    n_coll = counts["collectives"]
    copies(
        "events",
        ["t_enter_ns", "t_leave_ns", "t_complete_ns"],
        {"event": "rank", "completed_by": "rank"},
        {"coll_id": n_coll},
        ["rank", "t_enter_ns"],
    )
    copies(
        "messages",
        ["t_send_enter_ns", "t_send_leave_ns", "t_recv_enter_ns", "t_recv_leave_ns"],
        {"send_event": "src", "recv_event": "dst"},
        {},
        ["t_send_enter_ns", "send_event"],
    )
    copies(
        "collectives",
        ["t_first_enter_ns", "t_last_enter_ns", "t_first_leave_ns", "t_last_leave_ns"],
        {},
        {"coll_id": n_coll},
        [],
    )
    shutil.copy(base / "comms.parquet", path / "comms.parquet")
    manifest["counts"] = {k: v * times for k, v in counts.items()}
    manifest["run_id"] = f"{manifest.get('run_id', '')}-x{times}"
    (path / "manifest.json").write_text(json.dumps(manifest))
    return path


def child(args: list[str]) -> tuple[float, float, subprocess.Popen[bytes]]:
    """(wall s, CPU s of the child and its threads) of `python -m mpiscope ARGS`."""
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "mpiscope", *args], stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"mpiscope {' '.join(args)} failed with status {status}")
    return time.perf_counter() - t0, usage.ru_utime + usage.ru_stime, proc


def bench_report(trace: Path, work: Path) -> dict[str, Any]:
    html = work / f"{trace.name}.html"
    wall, cpu, _ = child(["report", str(trace), "-o", str(html), "--force"])
    return {
        "report_seconds": wall,
        "report_cpu_seconds": cpu,
        "html_bytes": html.stat().st_size,
        "html_path": str(html),
    }


class ViewServer:
    def __init__(self, trace: Path, verbose: bool = False) -> None:
        self.t_start = time.perf_counter()
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "mpiscope",
                *(["-v"] if verbose else []),
                "view",
                str(trace),
                "--no-browser",
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        line = self.proc.stdout.readline() if self.proc.stdout else ""
        m = re.search(r"http://127\.0\.0\.1:(\d+)/\?token=(\S+)", line)
        if not m:
            raise SystemExit(f"mpiscope view printed no URL: {line!r}")
        self.url, self.port, self.token = m[0], int(m[1]), m[2]
        self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)

    def get(self, path: str) -> tuple[float, bytes]:
        t0 = time.perf_counter()
        self.conn.request("GET", f"{path}?token={self.token}")
        r = self.conn.getresponse()
        body = r.read()
        if r.status != 200:
            raise SystemExit(f"GET {path}: HTTP {r.status}")
        return (time.perf_counter() - t0) * 1e3, body

    def stop(self) -> None:
        self.conn.close()
        self.proc.terminate()
        self.proc.wait(timeout=30)


def zoom_requests(data: dict[str, Any], zooms: int, seed: int = 0) -> list[str]:
    """The tiles a page asks for on `zooms` random zooms: a random level (whole run down to four
    levels below the event level) and centre; the bin tiles of the view (two at most), and from
    the event level on, the event tiles of the view."""
    rng = np.random.default_rng(seed)
    p = data["pyramid"]
    out = []
    for _ in range(zooms):
        k = int(rng.integers(0, p["event_level"] + 5))
        centre = float(rng.uniform(0, 1))
        lo, hi = max(0.0, centre - 0.5 / 2**k), min(1.0, centre + 0.5 / 2**k)
        if k >= p["event_level"]:
            e = p["event_level"]
            out += [f"/tile/e/{e}/{i}" for i in range(int(lo * 2**e), min(2**e - 1, int(hi * 2**e)) + 1)]
        kb = min(k, p["levels"])
        out += [f"/tile/b/{kb}/{i}" for i in range(int(lo * 2**kb), min(2**kb - 1, int(hi * 2**kb)) + 1)]
    return out


def bench_view(trace: Path, zooms: int, browser: Any, html: Path) -> dict[str, Any]:
    shutil.rmtree(trace / ".mpiscope", ignore_errors=True)
    cold = ViewServer(trace, verbose=True)  # indexes the trace (its steps on stderr), then serves
    cold.get("/tile/b/0/0")
    index_s = time.perf_counter() - cold.t_start
    cold.stop()
    view = ViewServer(trace)
    ms, _ = view.get("/tile/b/0/0")
    first_tile_ms = (time.perf_counter() - view.t_start) * 1e3
    _, body = view.get("/data.json")
    data = json.loads(body)
    lat: dict[str, list[float]] = {"b": [], "e": []}
    for path in zoom_requests(data, zooms):
        ms, _ = view.get(path)
        lat[path.split("/")[2]].append(ms)
    extra = browser.measure(html, view.url) if browser else {}
    view.stop()
    every = np.array(lat["b"] + lat["e"])
    ev = np.array(lat["e"] or [np.nan])
    return {
        "view_index_seconds": index_s,
        "first_tile_ms": first_tile_ms,
        "tiles": int(every.size),
        "tile_ms_p50": float(np.percentile(every, 50)),
        "tile_ms_p95": float(np.percentile(every, 95)),
        "event_tiles": len(lat["e"]),
        "event_tile_ms_p50": float(np.percentile(ev, 50)),
        "event_tile_ms_p95": float(np.percentile(ev, 95)),
        "event_level": data["pyramid"]["event_level"],
        "bin_levels": data["pyramid"]["levels"],
        **extra,
    }


class Browser:
    """The page's own timings in chromium: the report file, then the view's page."""

    def measure(self, html: Path, url: str) -> dict[str, Any]:
        from page_timing import measure_page  # bench/ is sys.path[0] when run as a script

        out: dict[str, Any] = {}
        for prefix, target in (("", html), ("view_", url)):
            if prefix == "" and not Path(target).is_file():
                continue
            m = measure_page(target)
            for k in ("first_paint_ms", "redraw_ms_p50", "redraw_ms_p95", "redraw_ms_max", "redraws"):
                out[prefix + k] = m[k]
            print(f"  page ({'report' if not prefix else 'view'}): first paint {m['first_paint_ms']:.0f} ms, "
                  f"{m['redraws']} redraws at {len(m['levels'])} zoom levels: median {m['redraw_ms_p50']:.1f} ms, "
                  f"p95 {m['redraw_ms_p95']:.1f} ms (target <= 50: ratio {m['redraw_ms_p95'] / 50:.2f}), "
                  f"max {m['redraw_ms_max']:.1f} ms", flush=True)
        return out


def run_one(
    root: Path, work: Path, ranks: int, events: int, zooms: int, browser: Any, repeat: int = 1
) -> dict[str, Any]:
    """The report (not for a repeated trace: a page holds a window of it anyway) and the view."""
    t0 = time.perf_counter()
    trace = trace_of(root, ranks, events)
    if repeat > 1:
        trace = repeated_trace(trace, root, repeat)
        events *= repeat
    r: dict[str, Any] = {"ranks": ranks, "events": events, "generate_seconds": time.perf_counter() - t0}
    print(f"{ranks} ranks, {events:,} calls (load average {os.getloadavg()[0]:.1f}):", flush=True)
    html = work / "none.html"
    if repeat == 1:
        r.update(bench_report(trace, work))
        html = Path(r["html_path"])
        print(
            f"  report: {r['report_seconds']:.1f} s wall, {r['report_cpu_seconds']:.1f} s CPU "
            f"(target <= 30 s: ratio {r['report_seconds'] / 30:.2f}); "
            f"page {r['html_bytes'] / 1e6:.1f} MB (target <= 25 MB)",
            flush=True,
        )
    r.update(bench_view(trace, zooms, browser, html))
    print(
        f"  view: indexed once in {r['view_index_seconds']:.1f} s; "
        f"first tile of a warm server {r['first_tile_ms']:.0f} ms after its start"
    )
    print(
        f"  tiles of {zooms} random zooms ({r['tiles']}, {r['event_tiles']} of them event tiles): "
        f"median {r['tile_ms_p50']:.1f} ms (target <= 100: ratio {r['tile_ms_p50'] / 100:.2f}), "
        f"p95 {r['tile_ms_p95']:.1f} ms (target <= 250: ratio {r['tile_ms_p95'] / 250:.2f})"
    )
    print(
        f"  event tiles alone: median {r['event_tile_ms_p50']:.1f} ms, p95 {r['event_tile_ms_p95']:.1f} ms; "
        f"load average {os.getloadavg()[0]:.1f}",
        flush=True,
    )
    return r


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ranks", type=int, default=64)
    ap.add_argument("--events", type=int, default=10_000_000, help="calls in the trace (default 10 M)")
    ap.add_argument(
        "--big-events", type=int, default=0, help="also a trace of this many calls (e.g. 50000000)"
    )
    ap.add_argument("--zooms", type=int, default=200)
    ap.add_argument("--keep", type=Path, help="generate the traces here and keep them (reused when present)")
    ap.add_argument("--json", help="write the figures as JSON")
    ap.add_argument("--no-browser", action="store_true", help="leave out the page's timings in chromium")
    args = ap.parse_args()
    root = args.keep or Path(tempfile.mkdtemp(prefix="mpiscope-report-bench-"))
    work = Path(tempfile.mkdtemp(prefix="mpiscope-report-pages-"))
    browser = None if args.no_browser else Browser()
    try:
        result: dict[str, Any] = {
            "schema": "mpiscope.bench.report/1",
            "machine": platform.node(),
            "cpus": os.cpu_count(),
            "browser": bool(browser),
        }
        result.update(run_one(root, work, args.ranks, args.events, args.zooms, browser))
        if args.big_events:
            times = max(1, round(args.big_events / args.events))
            result["big"] = run_one(root, work, args.ranks, args.events, args.zooms, browser, times)
        output.emit_json(result, args.json)
    finally:
        shutil.rmtree(work, ignore_errors=True)
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
