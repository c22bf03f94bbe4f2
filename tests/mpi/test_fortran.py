"""Fortran programs are recorded: Open MPI's Fortran bindings call the C PMPI_
functions directly, so only wrapped Fortran symbols see them. Runs with
Debian's Open MPI and gfortran (the pip wheels have no Fortran)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import polars as pl
import pytest
from tests.conftest import EXAMPLES, mpiscope_cli, require

from mpiscope.mpi.build import compile_program, rebuild
from mpiscope.trace import Trace, open_trace

MPIF90, MPICC, MPIEXEC = "/usr/bin/mpif90.openmpi", "/usr/bin/mpicc.openmpi", "/usr/bin/mpiexec.openmpi"


@pytest.fixture(scope="module")
def fortran_lib(tmp_path_factory) -> Path:
    require(all(Path(p).exists() for p in (MPIF90, MPICC, MPIEXEC)) and shutil.which("gfortran") is not None,
            "Debian's Open MPI with gfortran", "apt-get install gfortran libopenmpi-dev openmpi-bin")
    return rebuild(MPICC, tmp_path_factory.mktemp("ompi-fortran-lib"))


def record_example(name: str, tmp_path: Path, fortran_lib: Path) -> Trace:
    """Compile a Fortran example with Debian's Open MPI and record it on 4 ranks (3 rounds)."""
    prog = compile_program(EXAMPLES / name, mpicc=MPIF90, out_dir=tmp_path)
    env = dict(os.environ, MPISCOPE_LIB_DIR=str(fortran_lib), OMPI_ALLOW_RUN_AS_ROOT="1",
               OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMPI_MCA_btl="self,vader,tcp", OMPI_MCA_pml="ob1")
    done = mpiscope_cli(["run", "--out", str(tmp_path / "t"), "--", MPIEXEC, "--oversubscribe", "-n", "4",
                         str(prog), "3"], env=env)
    assert done.returncode == 0, done.stderr
    return open_trace(tmp_path / "t")


@pytest.mark.mpi(ranks=4)
def test_fortran_ring_recorded(tmp_path, fortran_lib):
    t = record_example("ring_f.f90", tmp_path, fortran_lib)
    ev = t.events().collect()
    calls = dict(ev.group_by(pl.col("call").cast(pl.Utf8)).len().iter_rows())
    assert calls["MPI_Init"] == 4 and calls["MPI_Finalize"] == 4
    assert calls["MPI_Irecv"] == calls["MPI_Send"] == calls["MPI_Waitall"] == calls["MPI_Allreduce"] == 12
    m = t.messages().collect()
    assert m.height == 12 and t.manifest["counts"]["unmatched_recvs"] == 0
    assert set(zip(m["src"], m["dst"])) == {(r, (r + 1) % 4) for r in range(4)}
    assert (m["bytes"] == 64).all() and sorted(set(m["tag"])) == [1, 2, 3]
    irecv = ev.filter(pl.col("call").cast(pl.Utf8) == "MPI_Irecv")
    assert irecv["completed_by"].is_not_null().all()  # tied to MPI_WAITALL through Fortran handles
    assert t.collectives().collect().height == 3
    assert any("ring_f.f90:" in s for s in ev["callsite"].cast(pl.Utf8).to_list())


@pytest.mark.mpi(ranks=4)
def test_fortran_2008_ring_recorded(tmp_path, fortran_lib):
    """`use mpi_f08`: Open MPI's entry points (mpi_send_f08_, ...) call its C
    implementation directly, so they are wrapped too; ierror may be left out."""
    t = record_example("ring_f08.f90", tmp_path, fortran_lib)
    ev = t.events().collect()
    calls = dict(ev.group_by(pl.col("call").cast(pl.Utf8)).len().iter_rows())
    assert calls["MPI_Init"] == calls["MPI_Finalize"] == calls["MPI_Bcast"] == 4
    assert calls["MPI_Irecv"] == calls["MPI_Send"] == calls["MPI_Waitall"] == calls["MPI_Sendrecv"] == 12
    m = t.messages().collect()
    assert m.height == 24 and t.manifest["counts"]["unmatched_recvs"] == 0
    ring, back = m.filter(pl.col("tag") < 100), m.filter(pl.col("tag") > 100)
    assert set(zip(ring["src"], ring["dst"])) == {(r, (r + 1) % 4) for r in range(4)}
    assert (ring["bytes"] == 64).all() and sorted(set(ring["tag"])) == [1, 2, 3]
    # the wildcard receive of MPI_Sendrecv is resolved from its f08 status
    assert set(zip(back["src"], back["dst"])) == {((r + 1) % 4, r) for r in range(4)} and (back["bytes"] == 32).all()
    irecv = ev.filter(pl.col("call").cast(pl.Utf8) == "MPI_Irecv")
    assert irecv["completed_by"].is_not_null().all()
    assert t.collectives().collect().height == 4
    assert any("ring_f08.f90:" in s for s in ev["callsite"].cast(pl.Utf8).to_list())
