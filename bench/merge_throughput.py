"""Merge throughput: events merged per second and peak memory, on a generated
trace (default 10 million records, 64 ranks: nonblocking ring exchange +
allreduce), merged in a child process so its peak RSS is the merge's own.
Target (issue 3): >= 2 million events/s on 2 cores.

    python bench/merge_throughput.py [--ranks 64] [--events 10000000] [--repeat 3] [--json FILE]
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from mpiscope import output
from mpiscope.trace import TABLES, table_files
from mpiscope.trace.synthetic import halo_trace

MERGE = "from pathlib import Path; import sys; from mpiscope.trace.merge import merge_trace; merge_trace(Path(sys.argv[1]))"


def merge_once(trace: Path) -> tuple[float, int, float]:
    """(wall seconds, peak RSS in bytes, CPU seconds) of one merge in a child process."""
    for name in TABLES:  # either layout (a large events table is a dataset of part files)
        (trace / f"{name}.parquet").unlink(missing_ok=True)
        shutil.rmtree(trace / name, ignore_errors=True)
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", MERGE, str(trace)])
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - t0
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"merge failed with status {status}")
    return seconds, usage.ru_maxrss * 1024, usage.ru_utime + usage.ru_stime


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ranks", type=int, default=64)
    ap.add_argument("--events", type=int, default=10_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", help="write the figures as JSON")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="mpiscope-merge-bench-"))
    try:
        t0 = time.perf_counter()
        records = halo_trace(work, args.ranks, args.events)
        gen = time.perf_counter() - t0
        raw_bytes = sum(p.stat().st_size for p in (work / "raw").iterdir())
        runs = [merge_once(work) for _ in range(args.repeat)]
        secs = [s for s, _, _ in runs]
        cpu = [c for _, _, c in runs]
        best, median = min(secs), statistics.median(secs)
        peak = max(m for _, m, _ in runs)
        parquet = sum(f.stat().st_size for n in TABLES for f in table_files(work, n))
        result = {
            "schema": "mpiscope.bench.merge/1", "machine": platform.node(), "cpus": os.cpu_count(),
            "ranks": args.ranks, "records": records, "generate_s": gen, "merge_s": secs, "cpu_s": cpu,
            "events_per_s_median": records / median, "events_per_s_best": records / best,
            "peak_rss_bytes": peak, "raw_bytes": raw_bytes, "parquet_bytes": parquet,
            "parquet_bytes_per_record": parquet / records,
        }
        print(f"merge of {records:,} records from {args.ranks} ranks (generated in {gen:.1f} s)")
        print(f"  wall per merge: median {median:.2f} s, min {best:.2f} s, max {max(secs):.2f} s")
        print(f"  events merged per second: {records / median / 1e6:.2f} M/s (median), "
              f"{records / best / 1e6:.2f} M/s (best); target >= 2 M/s -> ratio {records / median / 2e6:.2f}")
        print(f"  CPU time per merge (all threads): median {statistics.median(cpu):.2f} s "
              f"({records / statistics.median(cpu) / 1e6:.2f} M events per CPU-second); "
              f"load average before: {os.getloadavg()[0]:.1f}")
        print(f"  peak memory of the merge: {peak / 2**30:.2f} GiB; raw {raw_bytes / 2**20:.0f} MiB -> "
              f"Parquet {parquet / 2**20:.0f} MiB ({parquet / records:.1f} B/record)")
        output.emit_json(result, args.json)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
