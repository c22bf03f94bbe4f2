"""Merge at scale (issue 22): wall time, events per second and peak memory of
`mpiscope merge` on generated traces of 10 M, 100 M and 1,000 M events (64 and
1,024 ranks), for the one-process merge and for `--workers 2`, interleaved in
one run; then `mpiscope stats` on each merged trace.

Traces come from mpiscope.trace.synthetic.stream_halo_trace (nonblocking ring
exchange + allreduce), written rank by rank in a child process whose own peak
memory is printed too. A size the disk cannot hold (its raw files, plus
MERGE_DISK_BYTES_PER_RECORD for the merge's tables and spills) is skipped with
one line saying how much space it lacks. Every merge and stats runs in a child;
a thread samples the summed RSS of the child and all its descendants (the
merge's workers, or mpiexec's processes) every SAMPLE_S, and the child's
ru_maxrss (os.wait4) is a floor. Between runs everything the merge wrote is
deleted (NAME.parquet files, NAME/ datasets, spills) and the manifest restored;
the raw files stay. Progress goes to stderr, the table to stdout.

The workers column says "2 (ran 1)" (JSON: `processes_used`, and `pieces`) where the merge used
fewer processes than asked, as its manifest says: a merge in memory is one process, and a merge
in pieces one whose budget holds one rank's records only on fewer.

`--memory` and `--workers` are passed where `mpiscope merge --help` lists them
(--flags auto); with a merge that has no --workers, runs with more than one
worker are skipped with a line saying so. `--mpiexec N` adds a run under
`mpiexec -n N` (only for a merge that splits its work across MPI ranks).

`--verbs` runs other verbs on each merged trace after stats, in children sampled
the same way, and prints each one's time and peak memory, or its one-sentence
refusal (issue 22, item 3: a verb streams a trace of any size, or says it cannot
hold it): roofline (place), map (--trace, 5 s of annealing), export-otf2,
export-perfetto (their output deleted after), diagnose, rebalance, report, view
(the index its first start builds), sim (--trace).

Targets (issue 22, 2 cores, 24 GiB): peak <= the --memory budget at every size;
>= 5 M events/s at 10 M events and >= 3 M events/s at 1,000 M.

    python bench/merge_scale.py [--sizes 10M,100M,1000M] [--ranks 64,1024] [--workers 1,2]
        [--memory 4GiB] [--repeat 1] [--dir DIR] [--keep] [--flags auto|on|off] [--mpiexec N]
        [--no-stats] [--verbs roofline,map,export-otf2,export-perfetto,diagnose,rebalance,report,view,sim]
        [--json FILE|-]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from proctree import children  # bench/: the directory of the script is on sys.path

from mpiscope import __version__, output
from mpiscope.trace import record as R
from mpiscope.trace.merge import SPILL_BYTES_PER_RECORD, TABLE_BYTES_PER_RECORD
from mpiscope.trace.synthetic import HALO_PER_ITER

# Disk a size needs beside its raw files, per record: what the merge itself asks to find free
# before it starts (trace/merge.py, _check_disk: its tables, at most 12 B per record, and the
# sides and collective shares a merge in pieces spills, 40 B per record).
MERGE_DISK_BYTES_PER_RECORD = TABLE_BYTES_PER_RECORD + SPILL_BYTES_PER_RECORD
SAMPLE_S = 0.02
DELETE_RAW = False  # --delete-raw
TARGET_EVENTS_PER_S = {10_000_000: 5e6, 1_000_000_000: 3e6}  # by nominal size; none at 100 M
UNITS = {"": 1, "b": 1, "k": 2**10, "kib": 2**10, "m": 2**20, "mib": 2**20, "g": 2**30, "gib": 2**30,
         "t": 2**40, "tib": 2**40, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12}
COUNTS = {"": 1, "k": 10**3, "m": 10**6, "g": 10**9, "b": 10**9}
GENERATE = ("import sys; from pathlib import Path; from mpiscope.trace.synthetic import stream_halo_trace; "
            "print(stream_halo_trace(Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])))")
MPISCOPE = [sys.executable, "-m", "mpiscope"]
VERBS = ("roofline", "map", "export-otf2", "export-perfetto", "diagnose", "rebalance", "report", "view", "sim")


def parse_amount(text: str, units: dict[str, int]) -> int:
    m = re.fullmatch(r"\s*([0-9.]+)\s*([a-zA-Z]*)\s*", text)
    if not m or m.group(2).lower() not in units:
        raise argparse.ArgumentTypeError(f"cannot read {text!r} (e.g. 10M, 4GiB)")
    return int(float(m.group(1)) * units[m.group(2).lower()])


def rank_records(events: int, ranks: int) -> int:
    """Records of each rank of stream_halo_trace(ranks, events): whole iterations."""
    return max(1, events // (ranks * HALO_PER_ITER)) * HALO_PER_ITER


def raw_bytes_needed(events: int, ranks: int) -> int:
    """Disk the generated raw files take (synthetic.py: a header page before a hole, then
    whole blocks, the last one padded with zeros) plus a page of communicators per rank."""
    per_rank = rank_records(events, ranks)
    blocks = max(1, -(-per_rank // R.RECS_PER_BLOCK))
    return ranks * (R.HEADER_PAGE + blocks * R.BLOCK_BYTES + 4096)


def tree_rss(root: int) -> int:
    """Summed resident memory of `root` and all its descendants, now."""
    total, todo, page = 0, [root], os.sysconf("SC_PAGE_SIZE")
    while todo:
        pid = todo.pop()
        try:
            with open(f"/proc/{pid}/statm") as f:
                total += int(f.read().split()[1]) * page
        except (OSError, IndexError, ValueError):
            continue
        todo += children(pid)
    return total


@dataclass
class Run:
    seconds: float
    peak_rss_bytes: int      # max(sampled tree RSS, ru_maxrss)
    sampled_bytes: int
    maxrss_bytes: int
    cpu_s: float             # user + system of the child and the descendants it waited for
    error: str | None
    stdout: str = ""


def run_child(cmd: list[str], env: dict[str, str] | None = None, capture: bool = False) -> Run:
    """Run `cmd`, sampling its process tree's RSS in a thread until it exits."""
    with tempfile.TemporaryFile() as err, tempfile.TemporaryFile() as out:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out if capture else subprocess.DEVNULL, stderr=err, env=env)
        peak, done = [0], threading.Event()

        def sample() -> None:
            while not done.is_set():
                peak[0] = max(peak[0], tree_rss(proc.pid))
                done.wait(SAMPLE_S)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        done.set()
        sampler.join()
        err.seek(0)
        lines = err.read().decode(errors="replace").strip().splitlines()
        out.seek(0)
        error = None if proc.returncode == 0 else f"exit {proc.returncode}: {lines[-1] if lines else ''}"
        maxrss = usage.ru_maxrss * 1024
        return Run(seconds, max(peak[0], maxrss), peak[0], maxrss, usage.ru_utime + usage.ru_stime, error,
                   out.read().decode(errors="replace"))



def reset(trace: Path, manifest: bytes) -> None:
    """Back to as generated: all but raw/ deleted (tables as NAME.parquet or NAME/ part
    files, temporary files, spills), the manifest as the generator wrote it."""
    for p in trace.iterdir():
        if p.name in ("raw", "manifest.json"):
            continue
        if p.is_dir() and not p.is_symlink():
            shutil.rmtree(p)
        else:
            p.unlink()
    (trace / "manifest.json").write_bytes(manifest)


def merged_sizes(trace: Path) -> tuple[int | None, int]:
    """(rows of the events table, bytes of all the merge wrote) of a merged trace."""
    import pyarrow.parquet as pq

    written = sum(f.stat().st_blocks * 512 for p in trace.iterdir() if p.name not in ("raw", "manifest.json")
                  for f in ([p] if p.is_file() else p.rglob("*")) if f.is_file())
    files = [trace / "events.parquet"] if (trace / "events.parquet").is_file() else \
        sorted((trace / "events").rglob("*.parquet"))
    try:
        return (sum(pq.read_metadata(f).num_rows for f in files) if files else None), written
    except OSError:
        return None, written


def merged_how(trace: Path) -> dict[str, Any]:
    """How the merge went, as its manifest says (pieces, buckets, the processes that merged: fewer
    than --workers asked where the budget holds one rank's records on fewer), {} if it does not."""
    try:
        return dict(json.loads((trace / "manifest.json").read_text()).get("merge") or {})
    except (OSError, ValueError):
        return {}


def merge_flags(mode: str) -> set[str]:
    """The options of issue 22 this `mpiscope merge` takes (--flags auto: from its --help)."""
    if mode != "auto":
        return {"--memory", "--workers"} if mode == "on" else set()
    text = subprocess.run([*MPISCOPE, "merge", "--help"], capture_output=True, text=True, check=False).stdout
    return {f for f in ("--memory", "--workers") if re.search(rf"(^|\s){f}\b", text)}



@dataclass
class Config:
    workers: int   # processes merging pieces: --workers N, or mpiexec -n N+1 (rank 0 leads)
    launcher: str  # "local" or "mpiexec"

    def command(self, trace: Path, memory: str, flags: set[str]) -> tuple[list[str], dict[str, str] | None]:
        cmd = [*MPISCOPE, "merge", str(trace)]
        if "--memory" in flags:
            cmd += ["--memory", memory]
        if self.launcher == "mpiexec":
            from mpiscope.mpi.find import find_launcher, launcher_env

            env = launcher_env(os.environ.copy())
            env.setdefault("HYDRA_LAUNCHER", "fork")
            return [find_launcher() or "mpiexec", "-n", str(self.workers + 1), *cmd], env
        cmd += ["--delete-raw"] if DELETE_RAW else []
        return cmd + (["--workers", str(self.workers)] if "--workers" in flags else []), None


@dataclass
class Size:
    nominal: int
    ranks: int
    trace: Path
    events: int = 0
    rows: list[dict[str, Any]] = field(default_factory=list)


def label(n: int) -> str:
    return f"{n // 10**6}M" if n % 10**6 == 0 else str(n)


def generate(size: Size) -> bytes:
    """Generate (or, kept from an earlier --keep run, reuse) the raw trace; its manifest."""
    manifest = size.trace / "manifest.json"
    if manifest.is_file() and (size.trace / "raw").is_dir():
        size.events = rank_records(size.nominal, size.ranks) * size.ranks
        output.info(f"  reusing {size.trace} ({size.events:,} records)")
        return manifest.read_bytes()
    shutil.rmtree(size.trace, ignore_errors=True)
    size.trace.mkdir(parents=True)
    g = run_child([sys.executable, "-c", GENERATE, str(size.trace), str(size.ranks), str(size.nominal)],
                  capture=True)
    if g.error:
        raise SystemExit(f"generating {size.trace} failed ({g.error})")
    size.events = int(g.stdout.split()[-1])
    output.info(f"  generated {size.events:,} records from {size.ranks} ranks in {g.seconds:.1f} s; "
                f"generator peak {g.peak_rss_bytes / 2**20:.0f} MiB")
    return manifest.read_bytes()


def row(size: Size, verb: str, runs: list[Run], workers: int, launcher: str, budget: int,
        extra: dict[str, Any]) -> dict[str, Any]:
    ok = [r for r in runs if r.error is None]
    secs = [r.seconds for r in ok]
    median = statistics.median(secs) if secs else None
    peak = max((r.peak_rss_bytes for r in runs), default=0)
    target = TARGET_EVENTS_PER_S.get(size.nominal) if verb == "merge" else None
    return {"verb": verb, "events": size.events, "nominal_events": size.nominal, "ranks": size.ranks,
            "workers": workers, "launcher": launcher, "seconds": median, "seconds_all": secs,
            "events_per_s": size.events / median if median else None, "peak_rss_bytes": peak,
            "peak_rss_sampled_bytes": max((r.sampled_bytes for r in runs), default=0),
            "maxrss_bytes": max((r.maxrss_bytes for r in runs), default=0),
            "cpu_s": [r.cpu_s for r in ok], "memory_budget_bytes": budget,
            "target_events_per_s": target, "within_budget": peak <= budget,
            "error": next((r.error for r in runs if r.error), None), **extra}


def bench_size(size: Size, configs: list[Config], args: argparse.Namespace, flags: set[str]) -> None:
    manifest = generate(size)
    raw = sum(f.stat().st_blocks * 512 for f in (size.trace / "raw").iterdir())
    runs: dict[int, list[Run]] = {i: [] for i in range(len(configs))}
    merged: dict[int, tuple[int | None, int]] = {}
    how: dict[int, dict[str, Any]] = {}
    for rep in range(args.repeat):
        order = list(range(len(configs)))
        for i in order if rep % 2 == 0 else order[::-1]:  # ABBA: neither always goes first
            reset(size.trace, manifest)
            cmd, env = configs[i].command(size.trace, args.memory, flags)
            r = run_child(cmd, env)
            runs[i].append(r)
            merged[i] = merged_sizes(size.trace) if r.error is None else (None, 0)
            how[i] = merged_how(size.trace) if r.error is None else {}
            c = configs[i]
            workers = workers_label(c.workers, how[i].get("workers")) if c.launcher == "local" else c.workers
            output.info(f"  merge {c.launcher} workers={workers}: {r.seconds:.1f} s, "
                        f"{size.events / r.seconds / 1e6:.2f} M events/s, peak {r.peak_rss_bytes / 2**30:.2f} GiB"
                        + (f"  FAILED {r.error}" if r.error else ""))
    for i, c in enumerate(configs):
        rows, written = merged.get(i, (None, 0))
        size.rows.append(row(size, "merge", runs[i], c.workers, c.launcher, args.memory_bytes,
                             {"raw_bytes": raw, "event_rows": rows, "output_bytes": written,
                              "processes_used": how.get(i, {}).get("workers"), "pieces": how.get(i, {}).get("pieces")}))
    last = (order if args.repeat % 2 == 1 else order[::-1])[-1]  # the merge whose tables are there now
    if not args.no_stats and runs[last][-1].error is None:
        s = run_child([*MPISCOPE, "stats", str(size.trace), "--json", "-"])
        output.info(f"  stats: {s.seconds:.1f} s, peak {s.peak_rss_bytes / 2**30:.2f} GiB"
                    + (f"  FAILED {s.error}" if s.error else ""))
        size.rows.append(row(size, "stats", [s], 1, "local", args.memory_bytes,
                             {"merged_by_workers": configs[last].workers}))
    if runs[last][-1].error is None:
        run_verbs(size, args.verb_list, args.memory_bytes)
    reset(size.trace, manifest)


def workers_label(asked: int, used: int | None) -> int | str:
    """The workers asked for, and those the merge used where it used fewer (its manifest says)."""
    return asked if used in (None, 0, asked) else f"{asked} (ran {used})"


def torus_for(ranks: int) -> str:
    """A 3-D torus of at least `ranks` nodes, as cubic as powers of two make it."""
    dims = [1, 1, 1]
    while dims[0] * dims[1] * dims[2] < ranks:
        dims[dims.index(min(dims))] *= 2
    return "torus:" + "x".join(map(str, sorted(dims)))


def verb_command(verb: str, trace: Path, ranks: int, out: Path) -> list[str]:
    """The command line of one of --verbs on a merged trace; `out`: where its output may go."""
    network = ["--network", torus_for(ranks)]
    view = ("import sys; from pathlib import Path; from mpiscope.report import cache; "
            "from mpiscope.trace import open_trace; from mpiscope.errors import UsageError\n"
            "try: cache.build(open_trace(Path(sys.argv[1])))\n"
            "except UsageError as e: sys.exit(f'error: {e}')")
    return {
        "roofline": [*MPISCOPE, "roofline", "place", str(trace), "--flops", "1e12", "--system", "fx10"],
        "map": [*MPISCOPE, "map", *network, "--trace", str(trace), "--time-limit", "5"],
        "export-otf2": [*MPISCOPE, "export", str(trace), "--format", "otf2", "-o", str(out), "--force"],
        "export-perfetto": [*MPISCOPE, "export", str(trace), "--format", "perfetto", "-o", str(out), "--force"],
        "diagnose": [*MPISCOPE, "diagnose", str(trace)],
        "rebalance": [*MPISCOPE, "rebalance", str(trace), "--shares", f"64x{ranks}"],
        "report": [*MPISCOPE, "report", str(trace), "-o", str(out), "--force"],
        "view": [sys.executable, "-c", view, str(trace)],
        "sim": [*MPISCOPE, "sim", *network, "--bandwidth", "5GBps", "--latency", "1us", "--trace", str(trace)],
    }[verb]


def run_verbs(size: Size, verbs: list[str], budget: int) -> None:
    for verb in verbs:
        out = size.trace.parent / f".{size.trace.name}-{verb}-out"
        r = run_child(verb_command(verb, size.trace, size.ranks, out))
        shutil.rmtree(out, ignore_errors=True) if out.is_dir() else out.unlink(missing_ok=True)
        shutil.rmtree(size.trace / ".mpiscope", ignore_errors=True)
        output.info(f"  {verb}: {r.seconds:.1f} s, peak {r.peak_rss_bytes / 2**30:.2f} GiB"
                    + (f"  refused or failed: {r.error}" if r.error else ""))
        size.rows.append(row(size, verb, [r], 1, "local", budget, {}))


def print_verbs(rows: list[dict[str, Any]]) -> None:
    shown = [r for r in rows if r["verb"] not in ("merge", "stats")]
    if shown:
        output.table("other verbs on the merged traces (issue 22, item 3)",
                     ["verb", "events", "ranks", "s", "peak GiB", "outcome"],
                     [[r["verb"], f"{r['events']:,}", r["ranks"], f"{r['seconds_all'][0]:.1f}" if r["seconds_all"]
                       else "-", f"{r['peak_rss_bytes'] / 2**30:.2f}", r["error"] or "ok"] for r in shown])


def disk_short(size: Size) -> tuple[int, int, int]:
    """(bytes needed, bytes free, bytes short) for generating and merging `size` where it goes."""
    kept = (size.trace / "manifest.json").is_file()
    per_record = SPILL_BYTES_PER_RECORD if DELETE_RAW else MERGE_DISK_BYTES_PER_RECORD  # tables replace raw
    need = (0 if kept else raw_bytes_needed(size.nominal, size.ranks)) + \
        rank_records(size.nominal, size.ranks) * size.ranks * per_record
    free = shutil.disk_usage(size.trace.parent).free
    return need, free, max(0, need - free)



def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="10M,100M,1000M", help="events per trace, comma-separated (10M, 1G)")
    ap.add_argument("--ranks", default="64,1024", help="ranks per trace, comma-separated")
    ap.add_argument("--workers", default="1,2", help="merge configurations: worker processes, comma-separated")
    ap.add_argument("--mpiexec", type=int, metavar="N", help="also merge under mpiexec -n N (N >= 2)")
    ap.add_argument("--memory", default="4GiB", help="the merge's memory budget (default 4GiB)")
    ap.add_argument("--repeat", type=int, default=1, help="merges per configuration and size (interleaved)")
    ap.add_argument("--dir", type=Path, help="where traces go (default: a temporary directory)")
    ap.add_argument("--keep", action="store_true", help="keep the raw traces (reused by a later run)")
    ap.add_argument("--flags", choices=("auto", "on", "off"), default="auto",
                    help="pass --memory/--workers to merge: if its --help lists them (auto), always, never")
    ap.add_argument("--no-stats", action="store_true", help="skip mpiscope stats on the merged traces")
    ap.add_argument("--verbs", default="", help=f"other verbs run on each merged trace, comma-separated: "
                    f"{', '.join(VERBS)}")
    ap.add_argument("--delete-raw", action="store_true",
                    help="merge with --delete-raw (for a size whose raw files and tables do not fit the disk "
                         "together): one merge per size, with the first --workers value")
    ap.add_argument("--json", metavar="FILE", help="write the figures as JSON (- for stdout)")
    args = ap.parse_args()
    try:
        args.size_list = [parse_amount(s, COUNTS) for s in args.sizes.split(",")]
        args.memory_bytes = parse_amount(args.memory, UNITS)
    except argparse.ArgumentTypeError as e:
        ap.error(str(e))
    args.rank_list = [int(r) for r in args.ranks.split(",")]
    args.verb_list = [v for v in args.verbs.split(",") if v]
    if set(args.verb_list) - set(VERBS):
        ap.error(f"--verbs: unknown {', '.join(sorted(set(args.verb_list) - set(VERBS)))}; choose from {', '.join(VERBS)}")
    args.worker_list = [int(w) for w in args.workers.split(",")]
    if args.repeat < 1 or (args.mpiexec is not None and args.mpiexec < 2):
        ap.error("--repeat must be >= 1 and --mpiexec >= 2")
    if args.delete_raw:  # the raw files are gone after one merge
        global DELETE_RAW
        DELETE_RAW, args.worker_list, args.repeat, args.mpiexec = True, args.worker_list[:1], 1, None
    return args


def configurations(args: argparse.Namespace, flags: set[str]) -> list[Config]:
    configs = []
    for w in args.worker_list:
        if w > 1 and "--workers" not in flags:
            output.info(f"skipped: merge --workers {w} (this mpiscope merge has no --workers option)")
        else:
            configs.append(Config(w, "local"))
    if args.mpiexec:
        configs.append(Config(args.mpiexec - 1, "mpiexec"))
    return configs


def print_table(rows: list[dict[str, Any]], skipped: list[dict[str, Any]]) -> None:
    def gib(n: float) -> str:
        return f"{n / 2**30:.2f}"

    def meets(r: dict[str, Any]) -> str:
        if r["error"]:
            return "failed"
        fast = r["target_events_per_s"] is None or r["events_per_s"] >= r["target_events_per_s"]
        return "yes" if fast and r["within_budget"] else "no"

    output.table("merge at scale (targets: issue 22)",
                 ["verb", "events", "ranks", "workers", "s", "M events/s", "target", "peak GiB", "budget GiB",
                  "meets"],
                 [[r["verb"], f"{r['events']:,}", r["ranks"],
                   workers_label(r["workers"], r.get("processes_used")) if r["launcher"] == "local"
                   else f"mpiexec -n {r['workers'] + 1}",
                   f"{r['seconds']:.2f}" if r["seconds"] else "-",
                   f"{r['events_per_s'] / 1e6:.2f}" if r["events_per_s"] else "-",
                   f">= {r['target_events_per_s'] / 1e6:.0f}" if r["target_events_per_s"] else "-",
                   gib(r["peak_rss_bytes"]), gib(r["memory_budget_bytes"]), meets(r)] for r in rows]
                 + [["merge", f"{s['nominal_events']:,}", s["ranks"], "-", "-", "-",
                     f">= {TARGET_EVENTS_PER_S[s['nominal_events']] / 1e6:.0f}"
                     if s["nominal_events"] in TARGET_EVENTS_PER_S else "-", "-", "-",
                     f"skipped: disk {s['short_bytes'] / 1e9:.0f} GB short"] for s in skipped])


def main() -> int:
    args = parse_args()
    flags = merge_flags(args.flags)
    base = args.dir or Path(tempfile.mkdtemp(prefix="mpiscope-merge-scale-"))
    base.mkdir(parents=True, exist_ok=True)
    output.info(f"{platform.node()}: {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}, mpiscope {__version__}; "
                f"merge options passed: {' '.join(sorted(flags)) or 'none'}; budget {args.memory}; traces in {base}")
    configs = configurations(args, flags)
    rows: list[dict[str, Any]] = []
    skipped: list[dict[str, Any]] = []
    try:
        for nominal in args.size_list:
            for ranks in args.rank_list:
                size = Size(nominal, ranks, base / f"halo-{label(nominal)}-{ranks}r")
                need, free, short = disk_short(size)
                if short:
                    output.info(f"skipped {label(nominal)} events x {ranks} ranks: needs {need / 1e9:.1f} GB of disk "
                                f"(raw files, the merge's tables and spills), {free / 1e9:.1f} GB free: "
                                f"{short / 1e9:.1f} GB short")
                    skipped.append({"nominal_events": nominal, "ranks": ranks, "need_bytes": need,
                                    "free_bytes": free, "short_bytes": short})
                    continue
                output.info(f"{label(nominal)} events x {ranks} ranks ({size.trace}):")
                try:
                    bench_size(size, configs, args, flags)
                finally:
                    rows += size.rows
                    if not args.keep:
                        shutil.rmtree(size.trace, ignore_errors=True)
    finally:
        if not args.keep and args.dir is None:
            shutil.rmtree(base, ignore_errors=True)
    if args.json != "-":  # stdout is the JSON's
        print_table([r for r in rows if r["verb"] in ("merge", "stats")], skipped)
        print_verbs(rows)
    output.emit_json({"schema": "mpiscope.bench.merge_scale/1", "machine": platform.node(),
                      "cpus": os.cpu_count(), "mpiscope": __version__, "merge_options": sorted(flags),
                      "merge_disk_bytes_per_record": MERGE_DISK_BYTES_PER_RECORD, "rows": rows, "skipped": skipped}, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
