"""Run 000's broadcast experiments (native/bench/bcast_exp.c): with the MPI the
native parts were built for (mpiscope-bench-bcast under mpiexec), or simulated
in SimGrid's SMPI, the same C code (experiment and broadcast) compiled with
smpicc, with the workload as simulated computation.

The simulated platform stands for the paper's (RIKEN RSCC, one process per node,
000 §5), fitted to its own figures: a crossbar (SimGrid's one-level fat-tree:
every pair of hosts equally far, 000 §1's homogeneous network), 158 us from
host to host (Table 1, 1 B, no load: 1.11 ms over the tree's 7 steps), sends
that occupy the sender 1/320 MB/s per byte (16 MB, no load: 404.9 ms), and
hosts computing a matrix product at 45.6 Mflop/s (N = 160 takes the ~179.5 ms
that Table 1's heaviest 1-byte column adds). Every send is eager and detached,
as 000 §5.2 says its MPI's were (a late receiver finds its message waiting).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import queue
import shlex
import signal
import subprocess
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import numpy as np

from mpiscope import output
from mpiscope.bench.runner import busy_machine_warning, launch_command, mpi_in_use, program
from mpiscope.errors import MpiError, SimError
from mpiscope.mpi.build import cache_dir
from mpiscope.mpi.find import launcher_env, native_source_dir
from mpiscope.sim.native import simgrid_version, smpi_tool
from mpiscope.sim.platform import Platform
from mpiscope.sim.runner import first_error

log = logging.getLogger(__name__)
PREFIX = "@mpiscope "
Record = dict[str, Any]
SOURCES = ("bench/bcast_exp.c", "bench/sparse.c", "bcast/tree.c", "bcast/vrank.c", "bcast/adapt.c")
HEADERS = ("bench/bcast_exp.h", "bcast/bcast.h")
# Above the largest size any experiment sends: every send is eager and detached.
EAGER_BYTES = (64 << 20) + 1


@dataclass(frozen=True)
class SimSetup:
    """The simulated cluster (defaults fitted to 000's RSCC figures, see the module docstring)."""
    latency_s: float = 158e-6          # host to host: two links of the crossbar
    send_Bps: float = 320e6            # a send occupies its sender size / send_Bps
    speed_flops: float = 45.6e6

    def platform(self, ranks: int) -> Platform:
        # Links 10x faster than a sender: the sender's occupation is the cost, not the wire.
        return Platform("fat-tree", (), 1, 10 * self.send_Bps, self.latency_s / 2, self.speed_flops,
                        fat_tree=((1,), (ranks,), (1,), (1,)))

    def cfg(self) -> list[str]:
        # smpi/host-speed: smpi_execute(seconds) runs seconds x this many flops (the sparse product's work)
        return ["--cfg=smpi/simulate-computation:no", f"--cfg=smpi/host-speed:{self.speed_flops!r}f",
                "--cfg=network/model:CM02",
                f"--cfg=smpi/send-is-detached-thresh:{EAGER_BYTES}", f"--cfg=smpi/async-small-thresh:{EAGER_BYTES}",
                f"--cfg=smpi/os:0:0:{1 / self.send_Bps!r}", "--cfg=surf/precision:1e-9",
                # the broadcast's MPI_Test on arrival costs no simulated time (SMPI's default is 0.1 ms)
                "--cfg=smpi/test:0",
                "--log=root.thres:warning", "--log=smpi_config.thres:error"]

    def to_json(self) -> dict[str, Any]:
        return {"topology": "crossbar (fat-tree:1)", "latency_s": self.latency_s, "send_Bps": self.send_Bps,
                "speed_flops": self.speed_flops, "eager_bytes": EAGER_BYTES}


def sim_program() -> Path:
    """bcast_exp.c and the broadcast compiled with smpicc (-DMSC_SIMULATED), cached by sources and SimGrid."""
    smpicc = smpi_tool("smpicc")
    src = native_source_dir()
    flags = ["-O2", "-std=gnu11", "-DMSC_SIMULATED", f"-I{src / 'bcast'}", f"-I{src / 'bench'}"]
    digest = hashlib.sha256("\0".join([smpicc, simgrid_version(), *flags]).encode())
    for name in SOURCES + HEADERS:
        digest.update((src / name).read_bytes())
    out = cache_dir() / "smpi" / f"bcast_exp-{digest.hexdigest()[:16]}"
    if out.is_file():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f"{out.name}.{os.getpid()}.tmp")
    done = subprocess.run([smpicc, *flags, *(str(src / s) for s in SOURCES), "-o", str(tmp), "-lm"],
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        tmp.unlink(missing_ok=True)
        first = next((ln for ln in done.stderr.splitlines() if "error" in ln), done.stderr.strip()[:200])
        raise SimError(f"building the broadcast experiment with smpicc failed ({first}); "
                       f"check SimGrid's installation: mpiscope doctor")
    tmp.replace(out)
    return out


@dataclass
class Job:
    """One launch of the experiment program."""
    cmd: list[str]
    env: dict[str, str]
    cwd: Path | None = None
    annotate: dict[str, Any] = field(default_factory=dict)  # added to each of its records
    proc: subprocess.Popen[str] | None = None
    records: list[Record] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    stderr: IO[str] | None = None


Spec = tuple[list[str], int, dict[str, Any]]  # program arguments, ranks, keys added to its records


def sim_jobs(specs: list[Spec], setup: SimSetup, work: Path) -> list[Job]:
    """smpirun commands on simulated hosts, one per spec (platform files in work)."""
    prog = sim_program()
    jobs = []
    for ranks in sorted({r for _, r, _ in specs}):
        platform = setup.platform(ranks)
        xml, hosts = work / f"platform-{ranks}.xml", work / f"hosts-{ranks}.txt"
        xml.write_text(platform.xml())
        hosts.write_text("".join(f"{h}\n" for h in platform.host_names(np.arange(ranks))))
        base = [smpi_tool("smpirun"), "-np", str(ranks), "-platform", str(xml), "-hostfile", str(hosts),
                *setup.cfg(), f"--cfg=smpi/tmpdir:{work}", str(prog)]
        jobs += [Job([*base, *argv], dict(os.environ), work, {**note, "ranks": ranks})
                 for argv, r, note in specs if r == ranks]
    return jobs


def oversubscribed_env(mpi_impl: str, ranks: int) -> tuple[dict[str, str], str | None]:
    """MPICH ranks spin while they wait: with more ranks than cores, let waiting ranks sleep a little
    (MPICH's progress throttle), or a rank that wakes from its workload waits long for a core."""
    cpus = os.cpu_count() or 1
    if ranks <= cpus:
        return {}, None
    note = f"{ranks} ranks on {cpus} cores: times include waiting for a core"
    if mpi_impl == "MPICH":
        return ({"MPIR_CVAR_CH4_PROGRESS_THROTTLE": "1", "MPIR_CVAR_CH4_PROGRESS_THROTTLE_NO_PROGRESS_COUNT": "16"},
                note + " (MPICH's progress throttle is on, so that waiting ranks yield them)")
    return {}, note


def real_jobs(specs: list[Spec], launcher_args: str) -> tuple[list[Job], list[str]]:
    """mpiexec commands of mpiscope-bench-bcast, and notes about the machine."""
    mpi, launcher = mpi_in_use()
    jobs, notes = [], [n for n in [busy_machine_warning()] if n]
    for argv, ranks, note in specs:
        cmd = launch_command(launcher, mpi, ranks, launcher_args, [str(program("bcast")), *argv])
        extra, crowded = oversubscribed_env(mpi.implementation, ranks)
        env = launcher_env(os.environ.copy()) | extra
        env.pop("LD_PRELOAD", None)  # the experiment links the broadcast itself
        jobs.append(Job(cmd, env, None, {**note, "ranks": ranks}))
        notes += [crowded] if crowded and crowded not in notes else []
    return jobs, notes


def _read(job: Job, lines: queue.Queue[tuple[Job, str | None]]) -> None:
    assert job.proc is not None and job.proc.stdout is not None
    for line in job.proc.stdout:
        lines.put((job, line))
    lines.put((job, None))


def _kill(job: Job) -> None:
    if job.proc is not None and job.proc.poll() is None:
        try:
            os.killpg(job.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def run_jobs(jobs: list[Job], parallel: int, description: str, expected: int) -> list[Record]:
    """Run the jobs, `parallel` at a time, with a progress bar over the `expected` records; every job's
    records in job order. Ctrl-C stops every process started."""
    pending, running, done = list(jobs), 0, 0
    lines: queue.Queue[tuple[Job, str | None]] = queue.Queue()
    with output.progress(description, total=expected) as bar:
        try:
            while done < len(jobs):
                while pending and running < max(1, parallel):
                    job = pending.pop(0)
                    err = tempfile.TemporaryFile(mode="w+")  # noqa: SIM115 (closed when the job ends)
                    job.proc = subprocess.Popen(job.cmd, stdout=subprocess.PIPE, stderr=err, text=True,
                                                env=job.env, cwd=job.cwd, start_new_session=True)
                    job.stderr = err
                    threading.Thread(target=_read, args=(job, lines), daemon=True).start()
                    running += 1
                job, line = lines.get()
                if line is None:
                    assert job.proc is not None and job.stderr is not None
                    job.proc.wait()
                    job.stderr.seek(0)
                    job.errors = [ln for ln in job.stderr.read().splitlines() if ln.strip()]
                    job.stderr.close()
                    running, done = running - 1, done + 1
                    if job.proc.returncode != 0 or not job.records:
                        raise _failed(job)
                elif line.startswith(PREFIX):
                    job.records.append({**json.loads(line[len(PREFIX):]), **job.annotate})
                    bar.advance(0 if job.records[-1].get("header") else 1)
        finally:
            for job in jobs:
                _kill(job)
                if job.stderr is not None and not job.stderr.closed:
                    job.stderr.close()
    return [r for job in jobs for r in job.records]


def _failed(job: Job) -> Exception:
    detail = first_error(job.errors[-40:]) if job.errors else f"exit code {job.proc.returncode if job.proc else '?'}"
    if "smpirun" in Path(job.cmd[0]).name:
        return SimError(f"the simulated broadcast experiment failed ({detail}); rerun with -v to see the command")
    return MpiError(f"the broadcast experiment `{shlex.join(job.cmd)}` failed ({detail}); "
                    f"check that the MPI launches programs: mpiscope doctor")
