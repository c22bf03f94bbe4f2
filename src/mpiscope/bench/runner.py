"""Launch a benchmark program under the MPI it was built for, and read its records.

The programs (native/bench/*.c, installed in mpiscope/_lib/bin) print one
`@mpiscope {json}` line per record from rank 0; everything else on stdout and
stderr is the MPI's own output. Asynchronous progress is switched per launch
through the MPI's environment knobs, so "off" and "on" are two launches of
the same program.
"""

from __future__ import annotations

import json
import logging
import os
import shlex
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mpiscope.errors import MpiError, NativeBuildError, UsageError
from mpiscope.mpi.find import MpiInfo, built_against, find_launcher, launcher_env, lib_dir

log = logging.getLogger(__name__)
PREFIX = "@mpiscope "
Record = dict[str, Any]


@dataclass(frozen=True)
class ProgressSetting:
    """One asynchronous-progress setting: the environment that selects it."""

    enabled: bool
    env: dict[str, str]
    note: str = ""               # what the knob does and does not cover
    progress_threads: int = 0    # extra threads per rank competing for the cores

    @property
    def name(self) -> str:
        return "on" if self.enabled else "off"


@dataclass(frozen=True)
class Host:
    name: str
    ranks: int
    cpus: int


@dataclass
class Run:
    """The records of one launch: the header, then one result per operation and size."""

    setting: ProgressSetting
    header: Record
    results: list[Record] = field(default_factory=list)

    @property
    def hosts(self) -> list[Host]:
        return [Host(str(h["name"]), int(h["ranks"]), int(h["cpus"])) for h in self.header.get("hosts", [])]

    @property
    def threads_per_rank(self) -> int:
        return 1 + self.setting.progress_threads

    @property
    def oversubscribed(self) -> bool:
        """Ranks (plus progress threads) outnumber the cores of a host: the times then measure the scheduler."""
        return any(h.ranks * self.threads_per_rank > h.cpus for h in self.hosts)

    def oversubscription_note(self) -> str:
        worst = max(self.hosts, key=lambda h: h.ranks * self.threads_per_rank / max(h.cpus, 1))
        extra = worst.ranks * self.setting.progress_threads
        threads = f" + {extra} progress threads" if extra else ""
        return (f"progress {self.setting.name}: {worst.ranks} ranks{threads} on {worst.cpus} cores of {worst.name}; "
                f"these times measure the OS scheduler more than the MPI")


def program(name: str) -> Path:
    """The installed benchmark program `mpiscope-bench-NAME`."""
    path = lib_dir() / "bin" / f"mpiscope-bench-{name}"
    if not path.is_file():
        raise NativeBuildError(f"the benchmark program {path} is not built; rebuild the native parts: "
                               f"mpiscope doctor --rebuild")
    return path


def mpi_in_use() -> tuple[MpiInfo, str]:
    """The MPI the programs were built against, and its launcher."""
    mpi = built_against()
    launcher = find_launcher()
    if not launcher:
        raise MpiError(f"no mpiexec found for {mpi.label}; put its bin directory on PATH or run make setup")
    return mpi, launcher


def busy_machine_warning() -> str | None:
    """Other processes already keep the cores busy: every time measured now includes waiting for them."""
    load = os.getloadavg()[0]
    cpus = os.cpu_count() or 1
    if load < cpus / 2:
        return None
    return (f"this machine is busy before the run (load average {load:.1f} on {cpus} cores); times include waiting "
            f"for other processes, so rerun on an idle machine before comparing")


def _open_mpi_params(launcher: str) -> set[str]:
    """MCA parameter names this Open MPI knows (from ompi_info beside its mpiexec)."""
    ompi_info = Path(launcher).with_name("ompi_info")
    try:
        out = subprocess.run([str(ompi_info), "--all", "--parsable"], capture_output=True, text=True, timeout=60,
                             env=launcher_env(os.environ.copy()), check=False).stdout
    except (OSError, subprocess.TimeoutExpired) as e:
        log.info("cannot run %s: %s", ompi_info, e)
        return set()
    names = set()
    for line in out.splitlines():
        parts = line.split(":")
        if len(parts) > 4 and parts[0] == "mca" and parts[3] == "param":
            names.add(parts[4])
    return names


def progress_settings(mode: str, mpi: MpiInfo, launcher: str) -> tuple[list[ProgressSetting], list[str]]:
    """The settings to run for --async-progress off|on|both, and warnings about them."""
    warnings: list[str] = []
    if mpi.implementation == "Open MPI":
        params = _open_mpi_params(launcher)
        # opal_async_progress: the software progress thread of Open MPI >= 6 (open-mpi/ompi#13088);
        # btl_tcp_progress_thread: the TCP transport's own thread (between nodes only).
        knobs = [p for p in ("opal_async_progress", "btl_tcp_progress_thread") if p in params]
        off = ProgressSetting(False, {f"OMPI_MCA_{p}": "0" for p in knobs})
        on_note = "" if "opal_async_progress" in knobs else (
            "this Open MPI has no general progress thread (no opal_async_progress); only the TCP transport's "
            "thread is switched on, so ranks on one node get no asynchronous progress")
        threads = 1 if "opal_async_progress" in knobs else 0
        on = ProgressSetting(True, {f"OMPI_MCA_{p}": "1" for p in knobs}, on_note, threads) if knobs else None
    else:
        # MPICH and its derivatives; Intel MPI also reads I_MPI_ASYNC_PROGRESS (002: MPICH_ASYNC_PROGRESS=1)
        names = ["MPICH_ASYNC_PROGRESS"] + (["I_MPI_ASYNC_PROGRESS"] if mpi.implementation == "Intel MPI" else [])
        off = ProgressSetting(False, {n: "0" for n in names})
        # one progress thread per process (MPICH: MPIR_CVAR_ASYNC_PROGRESS)
        on = ProgressSetting(True, {n: "1" for n in names},
                             "needs a multi-threaded MPI library (002)" if mpi.implementation == "Intel MPI" else "", 1)
    settings = []
    if mode in ("off", "both"):
        settings.append(off)
    if mode in ("on", "both"):
        if on is None:
            warnings.append(f"{mpi.label} offers no asynchronous-progress knob (ompi_info lists neither "
                            f"opal_async_progress nor btl_tcp_progress_thread); measuring with progress off only")
            if mode == "on":
                settings.append(off)
        else:
            settings.append(on)
            if on.note:
                warnings.append(f"async progress on {mpi.label}: {on.note}")
    return settings, warnings


def launch_command(launcher: str, mpi: MpiInfo, ranks: int, extra: str, argv: list[str]) -> list[str]:
    try:
        cmd = [launcher, *shlex.split(extra or "")]
    except ValueError as e:
        raise UsageError(f"--launcher-args {extra!r} cannot be split into arguments ({e}); check its quotes") from e
    cpus = os.cpu_count() or 1
    if mpi.implementation == "Open MPI" and ranks > cpus and "--oversubscribe" not in cmd:
        cmd.append("--oversubscribe")     # Open MPI refuses more ranks than slots otherwise
    return [*cmd, "-n", str(ranks), *argv]


@dataclass
class Plan:
    """What a benchmark verb launches: the MPI, one command, one run per progress setting."""
    mpi: MpiInfo
    cmd: list[str]
    settings: list[ProgressSetting]
    warnings: list[str]


def plan(name: str, ranks: int, launcher_args: str, argv: list[str], async_progress: str) -> Plan:
    """The launch of benchmark program NAME for --async-progress off|on|both, with the warnings to show."""
    mpi, launcher = mpi_in_use()
    settings, warnings = progress_settings(async_progress, mpi, launcher)
    busy = busy_machine_warning()
    warnings += [busy] if busy else []
    cmd = launch_command(launcher, mpi, ranks, launcher_args, [str(program(name)), *argv])
    return Plan(mpi, cmd, settings, warnings)


def run_program(cmd: list[str], setting: ProgressSetting, on_result: Callable[[Record], None]) -> Run:
    """Run one launch; call on_result for each result as it arrives."""
    env = launcher_env(os.environ.copy())
    env.update(setting.env)
    log.info("running %s with %s", shlex.join(cmd), setting.env)
    run: Run | None = None
    with tempfile.TemporaryFile(mode="w+") as errors:
        try:
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=errors, text=True, env=env)
        except OSError as e:
            raise MpiError(f"cannot start {cmd[0]} ({e.strerror}); check the MPI installation") from e
        assert proc.stdout is not None
        done = False
        for line in proc.stdout:
            if not line.startswith(PREFIX):
                log.info("mpi: %s", line.rstrip())
                continue
            record: Record = json.loads(line[len(PREFIX):])
            if record["kind"] == "header":
                run = Run(setting, record)
            elif record["kind"] == "result" and run is not None:
                run.results.append(record)
                on_result(record)
            elif record["kind"] == "done":
                done = True
        code = proc.wait()
        errors.seek(0)
        tail = [ln for ln in errors.read().strip().splitlines() if ln.strip()][-3:]
    if code != 0 or run is None or not done:
        detail = " / ".join(tail) or f"exit code {code}"
        raise MpiError(f"the benchmark run `{shlex.join(cmd)}` failed ({detail}); "
                       f"check that the MPI launches programs: mpiscope doctor")
    return run
