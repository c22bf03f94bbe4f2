"""Bytes per event of the merged tables (issue 22, "smaller on disk"): today's
writer (trace/storage.py) beside the writer before issue 22 (storage.write_table_v3,
the baseline), writing the same frames (the new writer as a merge in memory
writes them: messages' and collectives' times derived from the events), beside OTF2's figure
for the same trace (`mpiscope export --format otf2`: its directory's bytes).

Examples are recorded with the venv's MPICH through `mpiscope run`, 4 ranks, a
few seconds each, in shapes real traces have: a 2-D halo exchange (halo.c),
many small messages (ring.c), collectives in an FFT's manner (alltoall.c), the
call pattern of IMB-MPI1's default run (imb_like.c) and of HPCG's multigrid CG
(hpcg_like.c). Per example and table: bytes per event (the table's bytes over
the trace's events) with each writer, and in all; "data" leaves out the
Parquet footers, a fixed ~10 KB per file (the call Enum's names) that small
examples feel and large traces do not (the new writer stores no Arrow
schema: ~1 KB). Each table read back from each writer's files with open_trace
must equal the frame written (else the bench stops).

Then the write time (the merge's longest step is writing the events table):
merges of a generated trace (synthetic.halo_trace, default 10 M records on 64
ranks) with each writer, interleaved, in child processes: the merge's wall
time, and the wall and CPU time of writing its events table; then what reading
the merged trace costs (stats' summary, every message with its times, one
rank's events); medians and the median of the per-pair ratios, and the fastest
runs (the machine is shared: compare within a run; CPU seconds are the least
exposed to other work).

Goal (issue 22): <= 4 bytes per event across all tables on HPCG- and IMB-like
traces; the merge no slower than with the old writer.

    python bench/trace_size.py [--examples halo,ring,alltoall,imb,hpcg] [--scale 1] [--ranks 4]
        [--records 10000000] [--repeat 3] [--no-write-time] [--keep DIR] [--json FILE|-]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow.parquet as pq
from polars.testing import assert_frame_equal

from mpiscope import output
from mpiscope.mpi.build import compile_program
from mpiscope.mpi.find import built_against, find_launcher, launcher_env
from mpiscope.trace import open_trace
from mpiscope.trace.storage import with_derived_times, write_table, write_table_v3

HERE = Path(__file__).resolve().parent
EXAMPLES_DIR = HERE.parent / "src" / "mpiscope" / "examples"
TABLES = ("events", "messages", "collectives", "comms")
# name: (source, arguments at --scale 1); about 5-10 s each on 2 shared cores with 4 ranks
EXAMPLES = {
    "halo": (EXAMPLES_DIR / "halo.c", ["800", "16"]),
    "ring": (EXAMPLES_DIR / "ring.c", ["20000", "8"]),
    "alltoall": (HERE / "programs" / "alltoall.c", ["800", "64"]),
    "imb": (HERE / "programs" / "imb_like.c", ["20", "4096"]),
    "hpcg": (HERE / "programs" / "hpcg_like.c", ["100", "16"]),
}
GOAL_BYTES_PER_EVENT = 4.0


def record(name: str, out: Path, ranks: int, scale: float, env: dict[str, str]) -> float:
    """Record example `name` into out with mpiscope run; its wall seconds."""
    source, args = EXAMPLES[name]
    prog = compile_program(source, out_dir=out.parent / "programs")
    first = [str(max(1, round(int(args[0]) * scale)))] + args[1:]
    mpiexec = find_launcher() or "mpiexec"
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "mpiscope", "run", "--force", "--out", str(out), "--",
                           mpiexec, "-n", str(ranks), str(prog), *first],
                          env=env, capture_output=True, text=True, timeout=900, check=False)
    if done.returncode != 0:
        raise SystemExit(f"recording {name} failed ({done.returncode}): {done.stderr.strip()[-500:]}")
    return time.perf_counter() - t0


def table_sizes(trace: Path, work: Path) -> dict[str, dict[str, int]]:
    """Per table: rows, and the file and footer bytes of each writer, for the same frames (the new
    writer's messages and collectives derive their times from its events, as a merge in memory
    writes them)."""
    t = open_trace(trace, merge=False)
    frames = {name: getattr(t, name)().collect() for name in TABLES}
    sizes = {}
    for label in ("old", "new"):
        out = work / f"{label}-{trace.name}"
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir(parents=True)
        shutil.copy(trace / "manifest.json", out / "manifest.json")
        for name, frame in frames.items():
            path = out / f"{name}.parquet"
            if label == "old":
                write_table_v3(frame, path)
            else:
                write_table(with_derived_times(name, frame, frames["events"]), path, compact=True)
            row = sizes.setdefault(name, {"rows": frame.height})
            row[f"{label}_bytes"] = path.stat().st_size
            row[f"{label}_footer_bytes"] = pq.ParquetFile(path).metadata.serialized_size + 8
        written = open_trace(out, merge=False)
        for name, frame in frames.items():
            assert_frame_equal(getattr(written, name)().collect(), frame)
    return sizes


def otf2_bytes(trace: Path, out: Path) -> int:
    done = subprocess.run([sys.executable, "-m", "mpiscope", "export", str(trace), "--format", "otf2", "-o",
                           str(out), "--force"], capture_output=True, text=True, timeout=900, check=False)
    if done.returncode != 0:
        raise SystemExit(f"OTF2 export of {trace} failed: {done.stderr.strip()[-300:]}")
    return sum(p.stat().st_size for p in out.rglob("*") if p.is_file())


MERGE = """
import json, resource, sys, time
from pathlib import Path
sys.path.insert(0, sys.argv[3])
import mpiscope.trace.storage as storage
if sys.argv[2] == "old":
    storage.write_table = lambda df, path, compact=False: storage.write_table_v3(df, path)
real, timings = storage.write_table, {}
def timed(df, path, compact=False):
    t0, c0 = time.perf_counter(), time.thread_time()
    real(df, path, compact)
    timings[str(path)] = [time.perf_counter() - t0, time.thread_time() - c0]  # events: also .events.tmp/part-*
storage.write_table = timed  # before the merge modules bind it
import mpiscope.trace.merge as merge
if sys.argv[2] == "old":  # messages and collectives with their own times
    merge.with_derived_times = lambda name, df, events: df
t0 = time.perf_counter()
merge.merge_trace(Path(sys.argv[1]))
wall, usage = time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({"wall": wall, "cpu": usage.ru_utime + usage.ru_stime, "tables": timings}))
"""
# What reading costs, on the trace just merged: stats' summary (counts and matrices: no derived
# time), every message with its times (derived from the events), and one rank's events (no longer
# skipped to at the scan).
READ = """
import json, sys, time
import polars as pl
from mpiscope.analysis.stats import summarize
from mpiscope.trace import open_trace
t = open_trace(sys.argv[1], merge=False)
out = {}
for key, work in (("stats_s", lambda: summarize(t)), ("messages_s", lambda: t.messages().collect()),
                  ("rank_events_s", lambda: t.events().filter(pl.col("rank") == 1).collect())):
    t0 = time.perf_counter()
    work()
    out[key] = time.perf_counter() - t0
print(json.dumps(out))
"""


def merge_once(trace: Path, writer: str) -> dict[str, float]:
    """One merge of trace in a child with `writer` ("old" or "new"): its wall seconds, the CPU
    seconds of the whole child (all threads, from the start of the interpreter), and the wall
    and CPU seconds of writing its events table; then, in another child, the seconds of READ's
    reads of it."""
    for name in TABLES:
        (trace / f"{name}.parquet").unlink(missing_ok=True)
        shutil.rmtree(trace / name, ignore_errors=True)
    done = subprocess.run([sys.executable, "-c", MERGE, str(trace), writer, str(HERE)],
                          capture_output=True, text=True, timeout=1800, check=False)
    if done.returncode != 0:
        raise SystemExit(f"merge with the {writer} writer failed: {done.stderr.strip()[-500:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    events = [v for k, v in result["tables"].items() if "events" in k]
    read = subprocess.run([sys.executable, "-c", READ, str(trace)], capture_output=True, text=True, timeout=1800,
                          check=False)
    if read.returncode != 0:
        raise SystemExit(f"reading the trace merged with the {writer} writer failed: {read.stderr.strip()[-500:]}")
    return {"merge_s": result["wall"], "merge_cpu_s": result["cpu"],
            "events_write_s": sum(v[0] for v in events),
            "events_write_cpu_s": sum(v[1] for v in events),
            **json.loads(read.stdout.strip().splitlines()[-1])}


def write_times(work: Path, ranks: int, records: int, repeat: int) -> dict[str, Any]:
    from mpiscope.trace.synthetic import halo_trace

    trace = work / "synthetic"
    made = halo_trace(trace, ranks, records)
    runs: dict[str, list[dict[str, float]]] = {"old": [], "new": []}
    for i in range(repeat):  # interleaved, the order alternating
        for writer in (("old", "new") if i % 2 == 0 else ("new", "old")):
            runs[writer].append(merge_once(trace, writer))
            seconds = runs[writer][-1]["merge_s"]
            output.info(f"  merge {i + 1}/{repeat} with the {writer} writer: {seconds:.2f} s")
    keys = ("merge_s", "merge_cpu_s", "events_write_s", "events_write_cpu_s", "stats_s", "messages_s", "rank_events_s")
    return {
        "ranks": ranks, "records": made, "runs": runs,
        "median": {w: {k: statistics.median(r[k] for r in rs) for k in keys} for w, rs in runs.items()},
        "min": {w: {k: min(r[k] for r in rs) for k in keys} for w, rs in runs.items()},
        "pair_ratio_median": {k: statistics.median(n[k] / o[k] for o, n in zip(runs["old"], runs["new"]))
                              for k in keys},
    }


def per_event(sizes: dict[str, dict[str, int]], events: int, label: str,
              data: bool = False) -> dict[str, float]:
    out = {n: (s[f"{label}_bytes"] - (s[f"{label}_footer_bytes"] if data else 0)) / max(events, 1)
           for n, s in sizes.items()}
    out["all"] = sum(out.values())
    return out


def show(examples: list[dict[str, Any]]) -> None:
    rows = []
    for e in examples:
        old, new = e["old_bytes_per_event"], e["new_bytes_per_event"]
        for name in (*TABLES, "all"):
            rows.append([e["name"] if name == "events" else "", name,
                         f"{e['tables'][name]['rows']:,}" if name in TABLES else "",
                         f"{old[name]:.2f}", f"{new[name]:.2f}",
                         f"{new[name] / old[name]:.2f}" if old[name] else "-",
                         f"{e['otf2_bytes_per_event']:.2f}" if name == "all" else ""])
    output.table("bytes per event of each table: old writer, new writer, OTF2",
                 ["example", "table", "rows", "old B/ev", "new B/ev", "new/old", "OTF2 B/ev"], rows, 2)
    output.table("in all, with and without the Parquet footers (fixed ~10 KB per file)",
                 ["example", "events", "old", "new", "new/old", "old data", "new data", "new data/old data",
                  "OTF2", "goal"],
                 [[e["name"], f"{e['events']:,}", f"{e['old_bytes_per_event']['all']:.2f}",
                   f"{e['new_bytes_per_event']['all']:.2f}",
                   f"{e['new_bytes_per_event']['all'] / e['old_bytes_per_event']['all']:.2f}",
                   f"{e['old_data_bytes_per_event']['all']:.2f}",
                   f"{e['new_data_bytes_per_event']['all']:.2f}",
                   f"{e['new_data_bytes_per_event']['all'] / e['old_data_bytes_per_event']['all']:.2f}",
                   f"{e['otf2_bytes_per_event']:.2f}",
                   "met" if e["new_bytes_per_event"]["all"] <= GOAL_BYTES_PER_EVENT else "not met"]
                  for e in examples])


def show_times(w: dict[str, Any]) -> None:
    med, low, ratio = w["median"], w["min"], w["pair_ratio_median"]
    output.table(f"merge of a generated trace ({w['records']:,} records, {w['ranks']} ranks), "
                 f"{len(w['runs']['old'])} interleaved runs per writer",
                 ["seconds", "old (median)", "new (median)", "new/old (median of pairs)", "old (min)",
                  "new (min)", "new/old (min)"],
                 [[label, f"{med['old'][k]:.3f}", f"{med['new'][k]:.3f}", f"{ratio[k]:.3f}",
                   f"{low['old'][k]:.3f}", f"{low['new'][k]:.3f}", f"{low['new'][k] / low['old'][k]:.3f}"]
                  for label, k in (("merge, wall", "merge_s"), ("merge, CPU", "merge_cpu_s"),
                                   ("events table write, wall", "events_write_s"),
                                   ("events table write, CPU", "events_write_cpu_s"),
                                   ("stats' summary, wall", "stats_s"), ("all messages, wall", "messages_s"),
                                   ("one rank's events, wall", "rank_events_s"))])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--examples", default=",".join(EXAMPLES),
                    help="comma-separated, of: " + ", ".join(EXAMPLES) + " (empty: only the write time)")
    ap.add_argument("--scale", type=float, default=1.0, help="multiply the examples' iterations")
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--records", type=int, default=10_000_000, help="records of the generated trace")
    ap.add_argument("--repeat", type=int, default=3, help="merges per writer of the generated trace")
    ap.add_argument("--no-write-time", action="store_true", help="skip the merges of the generated trace")
    ap.add_argument("--keep", type=Path, help="record into DIR and keep it (default: a temporary directory)")
    ap.add_argument("--json", help="write the figures as JSON (- for stdout)")
    args = ap.parse_args()
    names = [n for n in args.examples.split(",") if n]
    unknown = [n for n in names if n not in EXAMPLES]
    if unknown:
        raise SystemExit(f"unknown example(s) {', '.join(unknown)}; choose from {', '.join(EXAMPLES)}")
    work = args.keep or Path(tempfile.mkdtemp(prefix="mpiscope-size-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    env = launcher_env(dict(os.environ, HYDRA_LAUNCHER="fork", MPIEXEC_TIMEOUT="600"))
    try:
        examples = []
        for name in names:
            trace = work / name
            seconds = record(name, trace, args.ranks, args.scale, env)
            sizes = table_sizes(trace, work)
            events = sizes["events"]["rows"]
            otf2 = otf2_bytes(trace, work / f"{name}-otf2")
            examples.append({
                "name": name, "record_s": seconds, "events": events, "tables": sizes,
                "old_bytes_per_event": per_event(sizes, events, "old"),
                "new_bytes_per_event": per_event(sizes, events, "new"),
                "old_data_bytes_per_event": per_event(sizes, events, "old", data=True),
                "new_data_bytes_per_event": per_event(sizes, events, "new", data=True),
                "otf2_bytes": otf2, "otf2_bytes_per_event": otf2 / max(events, 1),
            })
            output.info(f"{name}: {events:,} events recorded in {seconds:.1f} s")
        load = os.getloadavg()[0]
        timing = None if args.no_write_time else write_times(work, 64, args.records, args.repeat)
        try:
            mpi = built_against().label
        except Exception:  # noqa: BLE001 - the figures stand without it
            mpi = "unknown"
        result = {"schema": "mpiscope.bench.trace_size/1", "machine": platform.node(), "cpus": os.cpu_count(),
                  "mpi": mpi, "ranks": args.ranks, "scale": args.scale, "load_average": load,
                  "goal_bytes_per_event": GOAL_BYTES_PER_EVENT, "examples": examples, "write_time": timing}
        if args.json != "-":
            output.text(f"trace size ({os.cpu_count()} CPUs, load average {load:.1f}; {mpi}; "
                        f"{args.ranks} ranks)")
            if examples:
                show(examples)
            if timing:
                show_times(timing)
        output.emit_json(result, args.json)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
