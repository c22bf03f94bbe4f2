"""Diagnosis at scale: seconds and peak memory of `mpiscope diagnose` on a generated
64-rank trace of 10 million events (nonblocking ring exchange + allreduce per
iteration, trace.synthetic.halo_trace, merged first), run in a child process so
that its peak RSS is the diagnosis' own. Target (issue 18): <= 30 s on 2 cores.

    python bench/diagnose_scale.py [--ranks 64] [--events 10000000] [--repeat 3] [--json FILE]

halo_trace writes 6 records per rank and iteration, of which 4 become events
(the Waitall's two completions are folded into it); --events counts events.
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

from mpiscope import output
from mpiscope.trace.merge import merge_trace
from mpiscope.trace.synthetic import halo_trace

DIAGNOSE = """
import json, sys, time
t0 = time.perf_counter()
from mpiscope.analysis.diagnose import diagnose
from mpiscope.trace import open_trace
t1 = time.perf_counter()
d = diagnose(open_trace(sys.argv[1]))
text = json.dumps(d.to_json())
t2 = time.perf_counter()
print(json.dumps({"import_s": t1 - t0, "diagnose_s": t2 - t1, "json_bytes": len(text),
                  "wait_states": d.wait_states.height, "findings": len(d.findings),
                  "phases": len(d.imbalance.phases) if d.imbalance else 0,
                  "critical_path_jumps": d.critical_path.jumps}))
"""


def diagnose_once(trace: Path) -> dict[str, float]:
    """Wall seconds, CPU seconds and peak RSS of one diagnosis in a child process, with its own figures."""
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", DIAGNOSE, str(trace)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"diagnosis failed with status {status}")
    return {"wall_s": wall, "cpu_s": usage.ru_utime + usage.ru_stime, "peak_rss_bytes": usage.ru_maxrss * 1024,
            **json.loads(out)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ranks", type=int, default=64)
    ap.add_argument("--events", type=int, default=10_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", help="write the figures as JSON")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="mpiscope-diagnose-bench-"))
    try:
        t0 = time.perf_counter()
        records = halo_trace(work, args.ranks, args.events * 3 // 2)
        merged = merge_trace(work)
        prep = time.perf_counter() - t0
        runs = [diagnose_once(work) for _ in range(args.repeat)]
        wall = [r["wall_s"] for r in runs]
        inner = [r["diagnose_s"] for r in runs]
        peak = max(r["peak_rss_bytes"] for r in runs)
        result = {
            "schema": "mpiscope.bench.diagnose/1", "machine": platform.node(), "cpus": os.cpu_count(),
            "ranks": args.ranks, "records": records, "events": merged.events, "messages": merged.messages,
            "collectives": merged.collectives, "prepare_s": prep, "runs": runs,
            "wall_s_median": statistics.median(wall), "diagnose_s_median": statistics.median(inner),
            "peak_rss_bytes": peak, "target_s": 30.0, "ratio_to_target": statistics.median(wall) / 30.0,
        }
        r0 = runs[0]
        print(f"diagnosis of {merged.events:,} events ({merged.messages:,} messages, {merged.collectives:,} "
              f"collective instances) from {args.ranks} ranks (generated and merged in {prep:.1f} s)")
        print(f"  wall per run (child process, imports included): median {statistics.median(wall):.2f} s, "
              f"min {min(wall):.2f} s, max {max(wall):.2f} s; target <= 30 s -> ratio "
              f"{statistics.median(wall) / 30:.2f}")
        print(f"  diagnose() + to_json(): median {statistics.median(inner):.2f} s; CPU per run (all threads) "
              f"median {statistics.median(r['cpu_s'] for r in runs):.2f} s; load average before: "
              f"{os.getloadavg()[0]:.1f}")
        print(f"  peak memory (RSS high-water mark) of the diagnosis: {peak / 2**30:.2f} GiB")
        print(f"  found: {r0['wait_states']} wait-state rows, {r0['phases']:,} phases, {r0['findings']} findings, "
              f"critical path of {r0['critical_path_jumps']:,} jumps; JSON {r0['json_bytes'] / 1024:.0f} KiB")
        output.emit_json(result, args.json)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
