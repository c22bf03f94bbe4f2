"""Export time and peak memory of `mpiscope export` to OTF2 and Perfetto, on a generated
64-rank trace of 10 million records (nonblocking ring exchange + allreduce, merged first).
Targets (issue 20): <= 60 s per format for 10 million events, memory independent of the
trace's length. `--formats chrome` times the Chrome JSON export (1 M calls at most: give
`--events 1000000 --no-wide`).

Memory: the exporters stream rank by rank, so their peak follows the longest rank, not
the trace. Two more traces show it: "small" (64 ranks, 1/10 of the records: ranks ten
times shorter) and "wide" (640 ranks, as many records as the large one: ranks as long as
the small trace's). Each export runs in a child process; this process polls the peak RSS
(VmHWM) of it and of its worker processes every 0.1 s. Traces are generated and merged in
another child, so that this process stays small.

Baseline: with --baseline REF (a git ref of this repository, e.g. main), the exporters as
they are at REF export the large trace too, interleaved with the current ones (baseline,
current, per format), and the ratio current/baseline is printed. REF's export package is
copied out of git under another name (its imports of itself renamed), so both run on the
same installed rest of mpiscope.

    python bench/export_scale.py [--ranks 64] [--events 10000000] [--workers N] [--no-wide]
                                 [--baseline REF] [--formats otf2,perfetto,chrome] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from proctree import children  # bench/: the directory of the script is on sys.path

from mpiscope import output

GENERATE = """
import sys
from pathlib import Path
from mpiscope.trace.merge import merge_trace
from mpiscope.trace.synthetic import halo_trace
print(halo_trace(Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])))
merge_trace(Path(sys.argv[1]))
"""
EXPORT = """
import json, sys
from pathlib import Path
sys.path.insert(0, {path!r})
from mpiscope.trace import open_trace
from {package}.{fmt} import export_{fmt} as export
if __name__ == "__main__":
    w = int(sys.argv[3]) if sys.argv[3] != "-" else None
    r = export(open_trace(sys.argv[1], merge=False), Path(sys.argv[2]), **({{}} if {fmt!r} == "chrome" else {{"workers": w}}))
    print(json.dumps({{"events": r.events, "records": r.records}}))
"""
FORMATS = ("otf2", "perfetto")


def generate(where: Path, ranks: int, records: int) -> tuple[int, float]:
    t0 = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", GENERATE, str(where), str(ranks), str(records)],
        capture_output=True,
        text=True,
        check=True,
    )
    return int(done.stdout.split()[0]), time.perf_counter() - t0


def _hwm(pid: int) -> int:
    """Peak RSS (VmHWM) of a live process in bytes, 0 if it is gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            return next((int(line.split()[1]) * 1024 for line in f if line.startswith("VmHWM")), 0)
    except OSError:
        return 0


BASELINE_PACKAGE = "mpiscope_baseline_export"


def baseline_package(ref: str, where: Path) -> Path:
    """mpiscope/export as at git ref `ref`, as package BASELINE_PACKAGE under `where`."""
    repo = Path(__file__).resolve().parent.parent
    listing = subprocess.run(
        ["git", "-C", str(repo), "ls-tree", "--name-only", ref, "src/mpiscope/export/"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    package = where / BASELINE_PACKAGE
    package.mkdir(parents=True)
    for name in listing:
        if name.endswith(".py"):
            text = subprocess.run(
                ["git", "-C", str(repo), "show", f"{ref}:{name}"], capture_output=True, text=True, check=True
            ).stdout
            (package / Path(name).name).write_text(text.replace("mpiscope.export", BASELINE_PACKAGE))
    return where


def export_once(
    trace: Path, fmt: str, out: Path, workers: int | None, baseline: Path | None = None
) -> dict[str, float]:
    """Wall seconds, CPU seconds (all processes), peak RSS of the export process and of its
    largest worker, and output size of one export (by the baseline package, if given)."""
    script = out.parent / f"export_{fmt}{'_baseline' if baseline else ''}.py"
    package = BASELINE_PACKAGE if baseline else "mpiscope.export"
    script.write_text(EXPORT.format(fmt=fmt, package=package, path=str(baseline or "")))
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, str(script), str(trace), str(out), str(workers or "-")],
        stdout=subprocess.PIPE,
        text=True,
    )
    peaks: dict[int, int] = {}
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        for p in [proc.pid, *children(proc.pid)]:
            peaks[p] = max(peaks.get(p, 0), _hwm(p))
        time.sleep(0.1)
    seconds = time.perf_counter() - t0
    stdout = proc.stdout.read() if proc.stdout else ""
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"export {fmt} of {trace} failed with status {status}")
    figures = json.loads(stdout.strip().splitlines()[-1])
    size = (
        sum(p.stat().st_size for p in out.rglob("*") if p.is_file()) if out.is_dir() else out.stat().st_size
    )
    shutil.rmtree(out) if out.is_dir() else out.unlink()
    workers_peak = max((v for p, v in peaks.items() if p != proc.pid), default=0)
    return {
        "seconds": seconds,
        "cpu_s": usage.ru_utime + usage.ru_stime,
        "output_bytes": size,
        **figures,
        "main_rss_bytes": peaks.get(proc.pid, 0),
        "worker_rss_bytes": workers_peak,
        "peak_rss_bytes": max(peaks.values(), default=0),
    }


def report(fmt: str, runs: dict[str, dict[str, float]], ranks: dict[str, int]) -> None:
    mib = 2**20
    big = runs["large"]
    print(
        f"  {fmt:8s} {big['events']:,.0f} calls -> {big['records']:,.0f} records in {big['seconds']:.1f} s "
        f"(CPU {big['cpu_s']:.1f} s in all processes); target 60 s -> ratio {big['seconds'] / 60:.2f}; "
        f"output {big['output_bytes'] / mib:.0f} MiB"
    )
    if "baseline" in runs:
        base = runs["baseline"]
        print(
            f"  {'':8s} baseline {base['seconds']:.1f} s (CPU {base['cpu_s']:.1f} s, peak RSS "
            f"{base['peak_rss_bytes'] / mib:.0f} MiB, output {base['output_bytes'] / mib:.0f} MiB): "
            f"current/baseline wall {big['seconds'] / base['seconds']:.2f}, CPU {big['cpu_s'] / base['cpu_s']:.2f}"
        )
    for label, r in runs.items():
        if label == "baseline":
            continue
        per_rank = r["events"] / ranks[label]
        print(
            f"  {'':8s} {label:5s} {ranks[label]:4d} ranks x {per_rank:9,.0f} calls: peak RSS export process "
            f"{r['main_rss_bytes'] / mib:4.0f} MiB, largest worker {r['worker_rss_bytes'] / mib:4.0f} MiB "
            f"({r['seconds']:.1f} s)"
        )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ranks", type=int, default=64)
    ap.add_argument("--events", type=int, default=10_000_000)
    ap.add_argument("--workers", type=int, default=None, help="export processes (default: the usable cores)")
    ap.add_argument("--no-wide", action="store_true", help="skip the 10x-ranks trace")
    ap.add_argument(
        "--baseline", metavar="REF", help="also export the large trace with the exporters at git REF"
    )
    ap.add_argument("--formats", default=",".join(FORMATS), help="of otf2, perfetto, chrome (default: %(default)s)")
    ap.add_argument("--json", help="write the figures as JSON")
    args = ap.parse_args()
    shapes = {"small": (args.ranks, args.events // 10), "large": (args.ranks, args.events)}
    if not args.no_wide:
        shapes["wide"] = (args.ranks * 10, args.events)
    work = Path(tempfile.mkdtemp(prefix="mpiscope-export-bench-"))
    try:
        sizes = {label: generate(work / label, r, n) for label, (r, n) in shapes.items()}
        base = baseline_package(args.baseline, work / "baseline") if args.baseline else None
        load_before = os.getloadavg()[0]
        runs: dict[str, dict[str, dict[str, float]]] = {}
        for fmt in args.formats.split(","):
            runs[fmt] = {}
            if base:  # interleaved: the baseline, then the current exporters, per format
                runs[fmt]["baseline"] = export_once(
                    work / "large", fmt, work / f"out-base-{fmt}", args.workers, base
                )
            for label in shapes:
                runs[fmt][label] = export_once(work / label, fmt, work / f"out-{label}-{fmt}", args.workers)
        result = {
            "schema": "mpiscope.bench.export/1",
            "machine": platform.node(),
            "cpus": os.cpu_count(),
            "load_average_before": load_before,
            "load_average_after": os.getloadavg()[0],
            "workers": args.workers,
            "baseline": args.baseline,
            "shapes": {k: {"ranks": r, "records": sizes[k][0]} for k, (r, _) in shapes.items()},
            "generate_and_merge_s": {k: v[1] for k, v in sizes.items()},
            "exports": runs,
            "target_s": 60.0,
        }
        print(
            f"export of generated traces ({os.cpu_count()} CPUs, load average {load_before:.1f} before, "
            f"{os.getloadavg()[0]:.1f} after; workers: {args.workers or 'usable cores'})"
        )
        for fmt, r in runs.items():
            report(fmt, r, {k: v[0] for k, v in shapes.items()})
        output.emit_json(result, args.json)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
