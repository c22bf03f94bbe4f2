"""Which MPI the native parts were built against, which is found now, and SimGrid.

  mpiscope doctor [--json -]
  mpiscope doctor --rebuild [--mpicc /path/to/mpicc]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from mpiscope import __version__, output
from mpiscope.capture.run import linked_libmpi, record_with
from mpiscope.errors import MpiscopeError, UsageError
from mpiscope.mpi.build import compile_program, rebuild
from mpiscope.mpi.find import built_against, find_launcher, find_mpicc, launcher_mpi, lib_dir


def prepare_parser(p: argparse.ArgumentParser) -> None:
    p.add_argument("--rebuild", action="store_true", help="rebuild the native parts for the MPI found now")
    p.add_argument("--mpicc", help="MPI C compiler for --rebuild (default: MPICC, venv, PATH)")
    p.add_argument("--json", metavar="FILE", help="write the findings as JSON (- for stdout)")


def _simgrid() -> dict[str, Any]:
    smpirun = shutil.which("smpirun")
    version = ""
    if smpirun:
        try:
            out = subprocess.run([smpirun, "-version"], capture_output=True, text=True, timeout=30, check=False)
            version = (out.stdout + out.stderr).strip().splitlines()[0] if (out.stdout + out.stderr).strip() else ""
        except (OSError, subprocess.TimeoutExpired):
            version = ""
    return {"smpirun": smpirun, "smpicc": shutil.which("smpicc"), "version": version,
            "fix": None if smpirun else "apt-get install libsimgrid-dev  (Debian/Ubuntu, as root)"}


def diagnose() -> dict[str, Any]:
    report: dict[str, Any] = {"schema": "mpiscope.doctor/1", "mpiscope_version": __version__, "problems": []}
    try:
        d = lib_dir()
        b = built_against(d)
        report["built_against"] = {"implementation": b.implementation, "version": b.version, "libmpi": b.libmpi,
                                   "compiler": b.compiler, "lib_dir": str(d),
                                   # programs built with mpicc -mpi-abi are recorded by this build
                                   "abi_lib_dir": str(d / "abi") if (d / "abi" / "libmpiscope.so").is_file() else None}
        if b.libmpi and not Path(b.libmpi).exists():
            report["problems"].append({"problem": f"the libmpi the library was built against ({b.libmpi}) is gone",
                                       "fix": "mpiscope doctor --rebuild"})
    except MpiscopeError as e:
        b = None
        report["built_against"] = None
        report["problems"].append({"problem": str(e), "fix": "mpiscope doctor --rebuild"})
    # What the user will type: mpiexec on PATH, else the built-against MPI's own.
    mpicc, launcher = find_mpicc(), shutil.which("mpiexec") or find_launcher()
    found: dict[str, Any] = {"mpicc": mpicc, "mpiexec": launcher}
    if launcher:
        impl, version = launcher_mpi(launcher)
        found.update({"implementation": impl, "version": version})
        if b and impl != "unknown" and (impl, version) != (b.implementation, b.version):
            # the compiler of the MPI found (its mpicc beside its mpiexec), not the one built for: that
            # advice rebuilt for the same MPI again
            theirs = Path(launcher).parent / "mpicc"
            own = find_launcher()
            report["problems"].append({
                "problem": f"mpiexec found now is {impl} {version}, the library was built for {b.label}",
                "fix": (f"launch with the MPI it was built for ({own}), or rebuild it for the one found: "
                        f"mpiscope doctor --rebuild --mpicc {theirs if theirs.is_file() else '/path/to/mpicc'}")
                if own and Path(own).resolve() != Path(launcher).resolve() else
                f"mpiscope doctor --rebuild --mpicc {theirs if theirs.is_file() else '/path/to/mpicc'}"})
    else:
        report["problems"].append({"problem": "no mpiexec found", "fix": "pip install mpich, or put your MPI on PATH"})
    links = _libmpi_of_compiler(mpicc) if mpicc and b and b.libmpi else None
    found["mpicc_links"] = links
    if links and b and os.path.realpath(links) != os.path.realpath(b.libmpi):
        # mpiexec may be the right one while the compiler found is another MPI's: its programs are refused
        report["problems"].append({
            "problem": f"mpicc found now ({mpicc}) links programs to {links}, the library was built for "
                       f"{b.libmpi}: mpiscope run refuses what it compiles",
            "fix": f"compile with {b.compiler or 'the MPI it was built for'}, or {record_with(mpicc)}"})
    report["found_now"] = found
    report["simgrid"] = _simgrid()
    report["ok"] = not report["problems"]
    return report


def _libmpi_of_compiler(mpicc: str) -> str | None:
    """The libmpi a program compiled by `mpicc` loads; None where it does not compile one."""
    with tempfile.TemporaryDirectory(prefix="mpiscope-doctor-") as tmp:
        source = Path(tmp) / "hello.c"
        source.write_text("#include <mpi.h>\nint main(int c, char **v) { MPI_Init(&c, &v); return MPI_Finalize(); }\n")
        try:
            return linked_libmpi(str(compile_program(source, mpicc=mpicc, out_dir=Path(tmp))))
        except (UsageError, OSError):
            return None


def run(args: argparse.Namespace) -> int:
    if args.rebuild:
        mpicc = args.mpicc or find_mpicc()
        if not mpicc:
            raise UsageError("no MPI C compiler found; give one: mpiscope doctor --rebuild --mpicc /path/to/mpicc")
        try:
            dest = lib_dir()
        except MpiscopeError:
            import mpiscope

            dest = Path(mpiscope.__path__[0]) / "_lib"
        output.info(f"rebuilding the native parts with {mpicc} into {dest} ...")
        rebuild(mpicc, dest)
    report = diagnose()
    if args.json != "-":
        b = report["built_against"] or {}
        f = report["found_now"]
        sg = report["simgrid"]
        output.table("mpiscope doctor", ["item", "value"], [
            ["built against", f"{b.get('implementation', '?')} {b.get('version', '')}"],
            ["  libmpi", b.get("libmpi", "?")],
            ["  compiler", b.get("compiler", "?")],
            ["  native parts", b.get("lib_dir", "?")],
            ["  MPI ABI programs", "recorded (abi/ build beside it)" if b.get("abi_lib_dir")
             else "not recorded (this MPI has no mpicc_abi)"],
            ["found now: mpiexec", f"{f.get('mpiexec')} ({f.get('implementation', '?')} {f.get('version', '')})"],
            ["found now: mpicc", str(f.get("mpicc"))],
            ["SimGrid SMPI", sg["version"] or ("installed" if sg["smpirun"] else "not installed")],
        ], justify_right_from=9)
        for p in report["problems"]:
            output.warn(f"{p['problem']}; fix: {p['fix']}")
        if not sg["smpirun"]:
            output.text(f"SimGrid is needed by mpiscope sim; install: {sg['fix']}")
        if report["ok"]:
            output.text("ok: the MPI found now is the one the native parts were built against")
    output.emit_json(report, args.json)
    return 0 if report["ok"] else 1
