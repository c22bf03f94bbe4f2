"""Runs the benchmark program `roofline_mm` (native/bench/roofline_mm.c) as an MPI job.

One rank per node: on a cluster, the launch command must place one rank on
each node (e.g. `mpiexec -n 8 -ppn 1`, `srun --ntasks-per-node=1`); on one
host the ranks share its memory, which is then the "network".
"""

from __future__ import annotations

import json
import logging
import os
import shlex
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mpiscope.errors import MpiError, NativeBuildError, UsageError
from mpiscope.mpi.find import find_launcher, launcher_env, lib_dir

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Launch:
    """How to start `ranks` ranks, one per node, each with `threads` BLAS threads."""
    ranks: int
    threads: int
    command: tuple[str, ...] = ()       # launcher and its options, without the program
    timeout_s: float = 900.0

    def argv(self, program: Path, args: list[str]) -> list[str]:
        if self.command:
            return [*self.command, str(program), *args]
        launcher = find_launcher()
        if not launcher:
            raise MpiError("no mpiexec found; run make setup (it installs the mpich wheel) or put your MPI on PATH")
        return [launcher, "-n", str(self.ranks), str(program), *args]


def make_launch(ranks: int, threads: int, launcher: str | None, timeout_s: float = 900.0) -> Launch:
    if ranks < 2:
        raise UsageError(f"--ranks {ranks}: the roofline needs at least 2 nodes (ranks) to communicate; "
                         f"give --ranks 2 or more")
    if threads < 1:
        raise UsageError(f"--threads {threads}: give at least 1 BLAS thread per rank")
    return Launch(ranks, threads, tuple(shlex.split(launcher)) if launcher else (), timeout_s)


def program() -> Path:
    path = lib_dir() / "bin" / "roofline_mm"
    if not path.is_file():
        raise NativeBuildError(f"{path} is not built (no CBLAS was found at build time); install OpenBLAS "
                               f"(apt-get install libopenblas-dev) and rebuild: mpiscope doctor --rebuild")
    return path


def run_program(launch: Launch, args: list[str],
                on_line: Callable[[dict[str, Any]], None] | None = None) -> tuple[list[str], list[dict[str, Any]]]:
    """Run roofline_mm with ARGS; return the ranks' host names and the result lines as they come."""
    argv = launch.argv(program(), args)
    env = launcher_env(dict(os.environ))
    # One BLAS thread pool per rank, sized to the cores a rank owns (oversubscription would lower the ceiling).
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "BLIS_NUM_THREADS"):
        env[var] = str(launch.threads)
    log.info("running %s", shlex.join(argv))
    lines: list[dict[str, Any]] = []
    deadline = time.monotonic() + launch.timeout_s
    with tempfile.TemporaryFile(mode="w+") as err:
        try:
            proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=err, text=True, env=env)
        except OSError as e:
            raise MpiError(f"cannot start {argv[0]} ({e.strerror}); check the launch command") from e
        with proc:
            assert proc.stdout is not None
            timer = threading.Timer(launch.timeout_s, proc.kill)
            timer.start()
            try:
                for ln in proc.stdout:
                    if ln.startswith("{"):
                        lines.append(json.loads(ln))
                        if on_line and len(lines) > 1:
                            on_line(lines[-1])
                code = proc.wait()
            finally:
                timer.cancel()
        if time.monotonic() > deadline:
            raise MpiError(f"{shlex.join(argv[:4])} ... did not finish in {launch.timeout_s:.0f} s; check the "
                           f"launch command (one rank per node) or lower --seconds")
        err.seek(0)
        stderr = err.read()
    if code != 0 or not lines:
        why = next((ln for ln in stderr.splitlines() if "roofline_mm:" in ln),
                   (stderr.strip().splitlines() or ["no output"])[-1])
        raise MpiError(f"the benchmark failed ({why.strip()}); check the launch command: {shlex.join(argv[:6])}")
    hosts = [str(h) for h in lines[0].get("hosts", [])]
    return hosts, lines[1:]


def one_host(hosts: list[str]) -> bool:
    return len(set(hosts)) <= 1
