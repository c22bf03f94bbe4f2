"""Call sites in a library without debug information: addr2line names the nearest symbol before an
address however far it is, so a call in an internal function of a stripped library was named after
the exported function before it (PETSc's VecMDot as VecView_MPI, 924 ms of its run). A function is
named only where its extent in the symbol tables holds the call."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from tests.conftest import MPICH, mpiscope_cli

LIBRARY = """
#include <mpi.h>
int tiny_exported(int x) { return x + 1; }
__attribute__((visibility("hidden"), noinline)) double hidden_dot(double v) {
  double s; MPI_Allreduce(&v, &s, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD); return s; }
__attribute__((noinline)) double exported_sum(double v) {
  double s; MPI_Reduce(&v, &s, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD); return s; }
double solve(int n) { double t = 0; for (int i = 0; i < n; i++) t += hidden_dot(i) + exported_sum(i); return t; }
"""
MAIN = """
#include <mpi.h>
double solve(int n);
int main(int c, char **v) { MPI_Init(&c, &v); solve(20); MPI_Finalize(); return 0; }
"""


@pytest.mark.mpi(ranks=2)
def test_call_sites_in_a_stripped_library(tmp_path: Path) -> None:
    (tmp_path / "lib.c").write_text(LIBRARY)
    (tmp_path / "main.c").write_text(MAIN)
    mpicc = str(MPICH.mpicc)
    subprocess.run([mpicc, "-O2", "-shared", "-fPIC", "-o", "libsolver.so", "lib.c"], cwd=tmp_path, check=True)
    subprocess.run(["strip", "--strip-unneeded", "libsolver.so"], cwd=tmp_path, check=True)  # .dynsym only
    subprocess.run([mpicc, "-O2", "-o", "app", "main.c", "-L.", "-lsolver"], cwd=tmp_path, check=True)
    env = MPICH.environ() | {"LD_LIBRARY_PATH": f"{tmp_path}:{os.environ.get('LD_LIBRARY_PATH', '')}"}
    done = mpiscope_cli(["run", "--out", str(tmp_path / "t"), "--", *MPICH.launch(2), str(tmp_path / "app")], env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    sites = {c["call"]: c["callsite"] for c in
             json.loads(mpiscope_cli(["stats", str(tmp_path / "t"), "--json", "-"]).stdout)["callsites"]}
    assert sites["MPI_Allreduce"].startswith("libsolver.so+0x"), sites  # not "tiny_exported (...)"
    assert sites["MPI_Reduce"].startswith("exported_sum (libsolver.so+0x"), sites
