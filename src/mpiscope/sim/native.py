"""SimGrid itself, and the programs mpiscope runs on it, built at first use.

The S4U pattern driver and the SMPI replay program (C++) ship as sources
in mpiscope/native/sim/ and are compiled against the SimGrid found now, not at
install time: SimGrid installed after mpiscope still works. Builds are cached
under mpi.build.cache_dir(), keyed by source, compiler and SimGrid version.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

from mpiscope.errors import SimError, UsageError
from mpiscope.mpi.build import cache_dir, compile_program
from mpiscope.mpi.find import native_source_dir

INSTALL = "apt-get install libsimgrid-dev (Debian/Ubuntu, as root)"


def simgrid_version() -> str:
    """SimGrid's version from pkg-config; raises SimError naming the package when it is missing."""
    pkg_config = shutil.which("pkg-config")
    done = (subprocess.run([pkg_config, "--modversion", "simgrid"], capture_output=True, text=True,
                           check=False) if pkg_config else None)
    if done is None or done.returncode != 0 or not shutil.which("smpirun"):
        raise SimError(f"SimGrid is not installed (mpiscope sim needs its library, smpicc and smpirun); "
                       f"install it: {INSTALL}")
    return done.stdout.strip()


def smpi_tool(name: str) -> str:
    path = shutil.which(name)
    if not path:
        raise SimError(f"{name} is not on PATH; install SimGrid: {INSTALL}")
    return path


def s4u_driver() -> Path:
    """The S4U pattern driver (native/sim/pattern_sim.cpp), compiled with g++ once per SimGrid version."""
    version = simgrid_version()
    source = native_source_dir() / "sim" / "pattern_sim.cpp"
    cxx = os.environ.get("CXX") or shutil.which("g++") or shutil.which("c++")
    if not cxx:
        raise SimError("no C++ compiler found to build the SimGrid driver; install one: apt-get install g++")
    flags = subprocess.run(["pkg-config", "--cflags", "--libs", "simgrid"], capture_output=True, text=True,
                           check=False).stdout.split()
    key = hashlib.sha256(source.read_bytes() + "\0".join([cxx, version, *flags]).encode()).hexdigest()[:16]
    out = cache_dir() / "sim" / f"pattern_sim-{key}"
    if out.is_file():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f"{out.name}.{os.getpid()}.tmp")
    # Libraries after the source: Debian links with --as-needed.
    done = subprocess.run([cxx, "-O2", "-std=c++17", str(source), "-o", str(tmp), *flags],
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        tmp.unlink(missing_ok=True)
        first = next((ln for ln in done.stderr.splitlines() if "error" in ln), done.stderr.strip()[:200])
        raise SimError(f"building the SimGrid driver with {cxx} failed ({first}); "
                       f"check that SimGrid's headers are installed: {INSTALL}")
    tmp.replace(out)
    return out


def smpi_program(source: Path) -> Path:
    """A C MPI program compiled with smpicc (cached); one sentence if it does not compile."""
    smpicc = smpi_tool("smpicc")
    source = Path(source)
    if source.suffix != ".c":
        raise UsageError(f"{source} is not a C source file; give the program as a .c file: "
                         f"mpiscope sim --network torus:4x4x4 -- ./app.c")
    return compile_program(source, mpicc=smpicc, extra=[f"-DSIMGRID_VERSION_KEY={simgrid_version()}"],
                           out_dir=cache_dir() / "smpi")


def replay_program() -> Path:
    """The SMPI replay program (native/sim/replay.cpp) for traces and patterns, compiled with smpicxx (cached)."""
    return compile_program(native_source_dir() / "sim" / "replay.cpp", mpicc=smpi_tool("smpicxx"),
                           extra=["-std=c++17", f"-DSIMGRID_VERSION_KEY={simgrid_version()}"],
                           out_dir=cache_dir() / "smpi")
