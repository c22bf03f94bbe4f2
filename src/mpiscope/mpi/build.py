"""Build the native parts for an MPI, and compile MPI programs (cached).

`python -m mpiscope.mpi.build --mpicc PATH --dest DIR` builds libmpiscope and
its tools for another MPI into DIR (use it with MPISCOPE_LIB_DIR=DIR);
`mpiscope doctor --rebuild` does the same into the installed package.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from mpiscope.errors import MpiscopeError, NativeBuildError, UsageError
from mpiscope.mpi.find import built_against, find_mpicc, native_source_dir


def rebuild(mpicc: str, dest: Path, build_type: str = "Release", sanitize: str = "",
            recorder_only: bool = False) -> Path:
    """Configure, build and install the native parts with `mpicc` into `dest` (recorder_only: the
    recording library, libmpiscope, alone)."""
    if not shutil.which(mpicc):
        raise UsageError(f"MPI C compiler {mpicc} not found; give the path of your MPI's mpicc")
    cmake = shutil.which("cmake")
    if not cmake:
        raise NativeBuildError("cmake is not installed; install it (apt-get install cmake, or pip install cmake)")
    dest = Path(dest).resolve()
    with tempfile.TemporaryDirectory(prefix="mpiscope-build-") as build:
        env = dict(os.environ, MPICC=mpicc)
        env.pop("CC", None)
        steps = [
            [cmake, "-S", str(native_source_dir()), "-B", build, f"-DPython_EXECUTABLE={sys.executable}",
             f"-DCMAKE_BUILD_TYPE={build_type}", "-DMSC_INSTALL_DIR=.", f"-DCMAKE_INSTALL_PREFIX={dest}",
             f"-DMPISCOPE_SANITIZE={sanitize}", f"-DMSC_RECORDER_ONLY={'ON' if recorder_only else 'OFF'}"],
            [cmake, "--build", build, "--parallel"],
            [cmake, "--install", build],
        ]
        for step in steps:
            done = subprocess.run(step, env=env, capture_output=True, text=True, check=False)
            if done.returncode != 0:
                text = done.stdout + done.stderr
                lines = text.splitlines()
                # the compiler's or CMake's own words, not make's "*** [...] Error 2" (which said nothing)
                said = [ln.strip() for ln in lines if re.search(r"\berror\b", ln, re.I) and "***" not in ln]
                first = said[0] if said else (lines[-1].strip() if lines else "no output")
                log = Path(tempfile.gettempdir()) / f"mpiscope-build-{os.getpid()}.log"
                try:
                    log.write_text(f"$ {' '.join(map(str, step))}\n{text}")
                    where = f"; its output is in {log}"
                except OSError:
                    where = ""
                raise NativeBuildError(f"building the native parts with {mpicc} failed ({first}){where}; "
                                       f"check that {mpicc} compiles MPI programs")
    return dest


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "mpiscope" / "programs"


def compile_program(source: Path, mpicc: str | None = None, extra: list[str] | None = None,
                    out_dir: Path | None = None) -> Path:
    """Compile an MPI program (C, or Fortran with an mpif90) with debug info;
    cached by source, compiler and flags."""
    source = Path(source)
    if not source.is_file():
        raise UsageError(f"program source {source} not found; give the path of a source file")
    compiler = mpicc or _default_compiler()
    flags = ["-O2", "-g", "-fno-omit-frame-pointer"] + (extra or [])
    key = hashlib.sha256(source.read_bytes() + "\0".join([compiler] + flags).encode()).hexdigest()[:16]
    out = (out_dir or cache_dir()) / f"{source.stem}-{key}"
    if out.is_file():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + f".{os.getpid()}.tmp")
    libs = ["-lm", "-lpthread"] if source.suffix == ".c" else []
    # in a directory of its own: a Fortran compiler writes a .mod file per module where it runs
    with tempfile.TemporaryDirectory(dir=out.parent) as work:
        done = subprocess.run([compiler, *flags, str(source.absolute()), "-o", str(tmp.absolute()), *libs],
                              capture_output=True, text=True, check=False, cwd=work)
    if done.returncode != 0:
        tmp.unlink(missing_ok=True)
        first = next((ln for ln in done.stderr.splitlines() if "error" in ln), done.stderr.strip()[:200])
        raise UsageError(f"{source} does not compile with {compiler} ({first}); fix the program")
    tmp.replace(out)
    return out


def _default_compiler() -> str:
    try:
        compiler = built_against().compiler
    except MpiscopeError:
        compiler = ""
    if compiler and Path(compiler).is_file():
        return compiler
    found = find_mpicc()
    if not found:
        raise NativeBuildError("no MPI C compiler found; install one (pip install mpich) or set MPICC")
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mpicc", required=True)
    parser.add_argument("--dest", required=True, type=Path)
    parser.add_argument("--sanitize", default="")
    args = parser.parse_args()
    try:
        dest = rebuild(args.mpicc, args.dest, sanitize=args.sanitize)
    except MpiscopeError as e:
        print(f"error: {e}", file=sys.stderr)
        return e.exit_code
    print(dest)
    return 0


if __name__ == "__main__":
    sys.exit(main())
