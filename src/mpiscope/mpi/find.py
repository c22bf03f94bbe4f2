"""Which MPI: the one the native parts were built against, and the one found now.

Order for the compiler (as mpi4py's conf/mpiconfig.py): MPICC, then the mpicc
beside this Python (the `mpich` wheel in the venv), then PATH.
"""

from __future__ import annotations

import ctypes
import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import mpiscope
from mpiscope.errors import MpiError, NativeBuildError


@dataclass(frozen=True)
class MpiInfo:
    implementation: str   # "MPICH", "Open MPI", "Intel MPI", "MVAPICH", "unknown"
    version: str
    library_version: str
    libmpi: str
    compiler: str

    @property
    def label(self) -> str:
        return f"{self.implementation} {self.version}".strip()


def implementation_of(text: str) -> tuple[str, str]:
    """(implementation, version) from MPI_Get_library_version or `mpiexec --version`."""
    patterns = [
        ("Open MPI", r"Open MPI v?(\d[\w.]*)"),
        ("Open MPI", r"\(Open MPI\) (\d[\w.]*)"),
        ("Open MPI", r"\(OpenRTE\) (\d[\w.]*)"),  # Open MPI 4's mpiexec
        ("Intel MPI", r"Intel\(R\) MPI Library (\S+)"),
        ("MVAPICH", r"MVAPICH2? Version:\s*(\S+)"),
        ("MPICH", r"MPICH Version:\s*(\S+)"),
        ("MPICH", r"HYDRA build details:\s*\n\s*Version:\s*(\S+)"),
    ]
    for name, pat in patterns:
        m = re.search(pat, text)
        if m:
            return name, m.group(1)
    return "unknown", ""


def lib_dir() -> Path:
    """Directory of libmpiscope.so and mpiconfig.json (MPISCOPE_LIB_DIR overrides)."""
    env = os.environ.get("MPISCOPE_LIB_DIR")
    candidates = [Path(env)] if env else [Path(p) / "_lib" for p in mpiscope.__path__]
    for c in candidates:
        if (c / "libmpiscope.so").is_file():
            return c
    where = env or ", ".join(str(c) for c in candidates)
    raise NativeBuildError(f"libmpiscope.so is not built (looked in {where}); build it: "
                           f"mpiscope doctor --rebuild")


def load_kernel(name: str) -> ctypes.CDLL:
    """A compute kernel built with the native parts (lib<name>.so), for ctypes."""
    path = lib_dir() / f"lib{name}.so"
    if not path.is_file():
        raise NativeBuildError(f"{path} is not built; rebuild the native parts: mpiscope doctor --rebuild")
    return ctypes.CDLL(str(path))


def native_source_dir() -> Path:
    for p in mpiscope.__path__:
        if (Path(p) / "native" / "CMakeLists.txt").is_file():
            return Path(p) / "native"
    raise NativeBuildError("the native sources are missing from this installation; reinstall mpiscope")


def built_against(directory: Path | None = None) -> MpiInfo:
    path = (directory or lib_dir()) / "mpiconfig.json"
    try:
        cfg = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise NativeBuildError(f"{path} is missing or unreadable; rebuild: mpiscope doctor --rebuild") from e
    impl, version = implementation_of(cfg.get("library_version", ""))
    return MpiInfo(impl, version, cfg.get("library_version", ""), cfg.get("libmpi", ""), cfg.get("compiler", ""))


def find_mpicc() -> str | None:
    env = os.environ.get("MPICC")
    if env:
        return env
    beside = Path(sys.executable).parent / "mpicc"
    if beside.is_file():
        return str(beside)
    return shutil.which("mpicc")


def find_launcher(name: str = "mpiexec") -> str | None:
    """The launcher of the MPI the library was built for, else PATH's."""
    try:
        compiler = built_against().compiler
    except NativeBuildError:
        compiler = ""
    if compiler:
        beside = Path(compiler).parent / name
        if beside.is_file():
            return str(beside)
    beside = Path(sys.executable).parent / name
    if beside.is_file():
        return str(beside)
    return shutil.which(name)


def launcher_mpi(launcher: str) -> tuple[str, str]:
    """(implementation, version) of an mpiexec/mpirun, from its --version."""
    try:
        out = subprocess.run([launcher, "--version"], capture_output=True, text=True, timeout=30, check=False,
                             env=launcher_env(os.environ.copy())).stdout
    except (OSError, subprocess.TimeoutExpired) as e:
        raise MpiError(f"cannot run {launcher} --version ({e}); check the MPI installation") from e
    return implementation_of(out)


def launcher_env(env: dict[str, str]) -> dict[str, str]:
    """Settings every launch needs here: Open MPI refuses root without these."""
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        env.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
        env.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    return env
