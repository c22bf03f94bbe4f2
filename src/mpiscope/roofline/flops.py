"""Floating-point operation counts from hardware counters, through Linux `perf stat`.

`perf stat` (perf_event_open underneath) resolves the vendor's event names
for this CPU. Intel counts FP instructions by width (an FMA counts twice),
so flops = sum of count x lanes; AMD Zen counts flops directly. Each rank
runs under its own `perf stat`, which writes one CSV per process into the
trace directory; `place` sums them. Where the machine has no usable PMU
(most virtual machines, containers without perf access) the reason is
reported and the user gives `--flops`.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from mpiscope.capture.run import program_of
from mpiscope.errors import UsageError

DIR_NAME = "flops"
INTEL = [("fp_arith_inst_retired.scalar_double", 1), ("fp_arith_inst_retired.128b_packed_double", 2),
         ("fp_arith_inst_retired.256b_packed_double", 4), ("fp_arith_inst_retired.512b_packed_double", 8),
         ("fp_arith_inst_retired.scalar_single", 1), ("fp_arith_inst_retired.128b_packed_single", 4),
         ("fp_arith_inst_retired.256b_packed_single", 8), ("fp_arith_inst_retired.512b_packed_single", 16)]
AMD = [("fp_ret_sse_avx_ops.all", 1)]


@dataclass(frozen=True)
class FlopCount:
    flops: float
    files: int
    events: list[str]
    source: str


def flop_events(cpuinfo: str) -> list[tuple[str, int]]:
    if "GenuineIntel" in cpuinfo:
        return INTEL
    if "AuthenticAMD" in cpuinfo or "HygonGenuine" in cpuinfo:
        return AMD
    return []


def _event_list(events: list[tuple[str, int]]) -> str:
    # user-space only: flops happen there, and it needs the fewest permissions (perf_event_paranoid <= 2)
    return ",".join(f"{name}:u" for name, _ in events)


def probe(events: list[tuple[str, int]]) -> str | None:
    """None if perf can count these events here, else why not (one phrase)."""
    if not events:
        return "no floating-point counter is known for this CPU"
    perf = shutil.which("perf")
    if not perf:
        return "perf is not installed (apt-get install linux-perf)"
    try:
        done = subprocess.run([perf, "stat", "-x", ",", "-e", _event_list(events), "--", "true"],
                              capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"perf cannot run ({e})"
    if done.returncode != 0:
        first = (done.stderr.strip().splitlines() or ["unknown error"])[0]
        return f"perf cannot count {events[0][0]} here ({first.strip()}; no hardware PMU, e.g. a virtual machine?)"
    if "<not supported>" in done.stderr or "<not counted>" in done.stderr:
        return f"perf cannot count {events[0][0]} here (<not supported>: no hardware PMU, e.g. a virtual machine?)"
    return None


def wrap(cmd: list[str], out_dir: Path, events: list[tuple[str, int]]) -> list[str]:
    """Put each rank under `perf stat`, writing <host>.<pid>.csv into out_dir (in the trace directory,
    which every rank already writes to, so it is reachable from every node)."""
    prog = program_of(cmd)
    if prog is None:
        raise UsageError(f"{cmd[0]} is not an MPI launcher; give the command as mpiexec -n N ./app ... "
                         f"so that each rank can be counted")
    i = cmd.index(prog)
    script = 'mkdir -p "$0" && exec perf stat -x , -e "$1" -o "$0/$(hostname).$$.csv" -- "${@:2}"'
    return [*cmd[:i], "bash", "-c", script, str(out_dir.resolve()), _event_list(events), *cmd[i:]]


def parse_csv(text: str) -> tuple[float, set[str]]:
    """Sum count x lanes over the lines of one `perf stat -x ,` file; also the events seen."""
    weights = dict(INTEL + AMD)
    total, seen = 0.0, set()
    for line in text.splitlines():
        fields = line.split(",")
        if line.startswith("#") or len(fields) < 3:
            continue
        name = fields[2].split(":")[0]
        if name in weights and fields[0].strip().replace(".", "", 1).isdigit():
            total += float(fields[0]) * weights[name]
            seen.add(name)
    return total, seen


def read_counts(trace_dir: Path) -> FlopCount | None:
    """The flops of a run recorded with `place -- CMD`, or None if it was not counted."""
    files = sorted((Path(trace_dir) / DIR_NAME).glob("*.csv"))
    if not files:
        return None
    total, seen = 0.0, set()
    for f in files:
        flops, names = parse_csv(f.read_text(errors="replace"))
        total += flops
        seen |= names
    if not seen:
        return None
    return FlopCount(total, len(files), sorted(seen),
                     f"hardware counters: perf stat ({', '.join(sorted(seen))}) over {len(files)} processes")
