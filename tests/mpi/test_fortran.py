"""Fortran programs are recorded, with Debian's Open MPI and MPICH and
gfortran (the pip wheels have no Fortran). Open MPI's Fortran bindings call
the C PMPI_ functions directly, so only wrapped Fortran symbols see them;
MPICH's `use mpi_f08` entry points have names of their own (mpi_send_f08ts_,
pmpir_..._f08_) and a status sentinel of their own."""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl
import pytest
from tests.conftest import EXAMPLES, mpiscope_cli, require

from mpiscope.mpi.build import compile_program, rebuild
from mpiscope.trace import Trace, open_trace


@dataclass(frozen=True)
class FortranMpi:
    name: str
    packages: str
    launch: tuple[str, ...]
    env: dict[str, str] = field(default_factory=dict)

    def tool(self, name: str) -> str:
        return f"/usr/bin/{name}.{self.name}"


DEBIAN_MPIS = [
    FortranMpi("openmpi", "libopenmpi-dev openmpi-bin", ("--oversubscribe",),
               {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
                "OMPI_MCA_btl": "self,vader,tcp", "OMPI_MCA_pml": "ob1"}),
    FortranMpi("mpich", "mpich libmpich-dev", ()),
]


@pytest.fixture(scope="module", params=DEBIAN_MPIS, ids=lambda m: m.name)
def fortran_mpi(request, tmp_path_factory) -> tuple[FortranMpi, Path]:
    """A Debian MPI with gfortran, and libmpiscope built for it."""
    mpi: FortranMpi = request.param
    tools = [mpi.tool(t) for t in ("mpif90", "mpicc", "mpiexec")]
    require(all(Path(p).exists() for p in tools) and shutil.which("gfortran") is not None,
            f"Debian's {mpi.name} with gfortran", f"apt-get install gfortran {mpi.packages}")
    if mpi.name == "mpich":  # the C recording tests' build for it
        return mpi, request.getfixturevalue("debian_mpich").lib_dir
    return mpi, rebuild(mpi.tool("mpicc"), tmp_path_factory.mktemp(f"{mpi.name}-fortran-lib"))


def record_program(name: str, ranks: int, tmp_path: Path, fortran_mpi: tuple[FortranMpi, Path]) -> Trace:
    """Compile tests/mpi/programs/NAME with a Debian MPI's mpif90 and record it on `ranks` ranks."""
    mpi, lib = fortran_mpi
    prog = compile_program(Path(__file__).parent / "programs" / name, mpicc=mpi.tool("mpif90"), out_dir=tmp_path)
    env = dict(os.environ, MPISCOPE_LIB_DIR=str(lib), **mpi.env)
    done = mpiscope_cli(["run", "--out", str(tmp_path / "t"), "--", mpi.tool("mpiexec"), *mpi.launch, "-n",
                         str(ranks), str(prog)], env=env)
    assert done.returncode == 0, done.stderr
    return open_trace(tmp_path / "t")


def record_example(name: str, tmp_path: Path, fortran_mpi: tuple[FortranMpi, Path]) -> Trace:
    """Compile a Fortran example with a Debian MPI and record it on 4 ranks (3 rounds)."""
    mpi, lib = fortran_mpi
    prog = compile_program(EXAMPLES / name, mpicc=mpi.tool("mpif90"), out_dir=tmp_path)
    env = dict(os.environ, MPISCOPE_LIB_DIR=str(lib), **mpi.env)
    done = mpiscope_cli(["run", "--out", str(tmp_path / "t"), "--", mpi.tool("mpiexec"), *mpi.launch, "-n", "4",
                         str(prog), "3"], env=env)
    assert done.returncode == 0, done.stderr
    return open_trace(tmp_path / "t")


@pytest.mark.mpi(ranks=4)
def test_fortran_ring_recorded(tmp_path, fortran_mpi):
    t = record_example("ring_f.f90", tmp_path, fortran_mpi)
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
    assert t.collectives().collect().height == 4
    assert any("ring_f.f90:" in s for s in ev["callsite"].cast(pl.Utf8).to_list())
    in_place_allgather(ev)


def in_place_allgather(ev: pl.DataFrame) -> None:
    """MPI_IN_PLACE from Fortran is recognised: each rank contributes its one
    INTEGER of the receive buffer, not the ignored 7 DOUBLE PRECISION."""
    gather = ev.filter(pl.col("call").cast(pl.Utf8) == "MPI_Allgather")
    assert gather.height == 4 and (gather["bytes"] == 4).all(), gather["bytes"].to_list()
    # and receives the other three ranks' INTEGERs, its own being in place already
    assert (gather["recv_bytes"] == 3 * 4).all(), gather["recv_bytes"].to_list()


@pytest.mark.mpi(ranks=4)
def test_fortran_2008_ring_recorded(tmp_path, fortran_mpi):
    """`use mpi_f08`: Open MPI's entry points (mpi_send_f08_, ...) call its C
    implementation directly, MPICH's (mpi_send_f08ts_, ...) call its Fortran
    profiling ones (pmpir_send_f08ts_), so they are wrapped too; ierror may be
    left out, and MPI_STATUS_IGNORE is the f08 module's own."""
    t = record_example("ring_f08.f90", tmp_path, fortran_mpi)
    ev = t.events().collect()
    calls = dict(ev.group_by(pl.col("call").cast(pl.Utf8)).len().iter_rows())
    assert calls["MPI_Init"] == calls["MPI_Finalize"] == calls["MPI_Bcast"] == 4
    assert calls["MPI_Irecv"] == calls["MPI_Waitall"] == calls["MPI_Sendrecv"] == 12
    assert calls["MPI_Send"] == 13 and calls["MPI_Recv"] == 1
    m = t.messages().collect()
    assert m.height == 25 and t.manifest["counts"]["unmatched_recvs"] == 0
    ring, back = m.filter(pl.col("tag") < 100), m.filter(pl.col("tag").is_between(101, 199))
    assert set(zip(ring["src"], ring["dst"])) == {(r, (r + 1) % 4) for r in range(4)}
    assert (ring["bytes"] == 64).all() and sorted(set(ring["tag"])) == [1, 2, 3]
    # the wildcard receive of MPI_Sendrecv is resolved from its f08 status
    assert set(zip(back["src"], back["dst"])) == {((r + 1) % 4, r) for r in range(4)} and (back["bytes"] == 32).all()
    # and the one of MPI_Recv, whose program passed MPI_STATUS_IGNORE, from the status the recorder supplied
    last = m.filter(pl.col("tag") == 200)
    assert list(zip(last["src"], last["dst"], last["bytes"])) == [(0, 3, 8)]
    irecv = ev.filter(pl.col("call").cast(pl.Utf8) == "MPI_Irecv")
    assert irecv["completed_by"].is_not_null().all()
    assert t.collectives().collect().height == 5
    in_place_allgather(ev)
    # every call is seen at the program's line, not inside the MPI's Fortran library
    sites = ev.filter(pl.col("call").cast(pl.Utf8).is_in(["MPI_Send", "MPI_Irecv", "MPI_Sendrecv", "MPI_Allreduce",
                                                          "MPI_Waitall", "MPI_Recv", "MPI_Bcast"]))["callsite"]
    assert sites.cast(pl.Utf8).str.contains("ring_f08.f90:", literal=True).all(), sites.unique().to_list()


@pytest.mark.mpi(ranks=4)
@pytest.mark.parametrize("source", ["io_f.f90", "io_f08.f90"])
def test_fortran_mpi_io_recorded(tmp_path, fortran_mpi, source):
    """MPI-IO from Fortran (tests/mpi/programs/io_f*.f90, `use mpi` and `use mpi_f08`): the file handle
    through PMPI_File_f2c, the offset an INTEGER(KIND=MPI_OFFSET_KIND) by reference; the program checks
    what it reads back."""
    mpi, lib = fortran_mpi
    prog = compile_program(Path(__file__).parent / "programs" / source, mpicc=mpi.tool("mpif90"),
                           out_dir=tmp_path)
    env = dict(os.environ, MPISCOPE_LIB_DIR=str(lib), **mpi.env)
    done = mpiscope_cli(["run", "--out", str(tmp_path / "t"), "--", mpi.tool("mpiexec"), *mpi.launch, "-n", "4",
                         str(prog), "3", str(tmp_path / "io_f.dat")], env=env)
    assert done.returncode == 0, done.stderr
    ev = open_trace(tmp_path / "t").events().with_columns(pl.col("call").cast(pl.Utf8)).collect()
    calls = dict(ev.group_by("call").len().iter_rows())
    assert calls["MPI_File_write_at_all"] == 12 and calls["MPI_File_read_at"] == 4 and calls["MPI_File_close"] == 4
    if source == "io_f.f90":
        assert calls["MPI_File_get_size"] == 4
    if source == "io_f.f90":  # a file name is a CHARACTER with a hidden length, handed on (mpi_f08: not wrapped)
        assert calls["MPI_File_open"] == calls["MPI_File_set_view"] == 4 and calls["MPI_File_delete"] == 1
    moved = ev.filter(pl.col("call").is_in(["MPI_File_write_at_all", "MPI_File_read_at"]))
    assert (moved["bytes"] == 1024 * 4).all()
    assert any(f"{source}:" in s for s in moved["callsite"].cast(pl.Utf8).to_list())


@pytest.mark.mpi(ranks=4)
def test_fortran_cart_create_makes_one_communicator(tmp_path, fortran_mpi):
    """MPICH's Fortran MPI_CART_CREATE calls the C MPI_Cart_create: both wrappers saw the new handle,
    and the trace had a second 4-rank communicator that no call used. Call sites in a module
    procedure and an external one are named as the source names them."""
    t = record_program("cart_f.f90", 4, tmp_path, fortran_mpi)
    comms = t.comms().collect()
    four = comms.filter(pl.col("comm_size") == 4)
    ev = t.events().with_columns(pl.col("call").cast(pl.Utf8)).collect()
    cart = ev.filter(pl.col("call") == "MPI_Allreduce")["comm"].unique().to_list()
    assert len(cart) == 1 and cart[0] != 0
    assert sorted(four["comm"].to_list()) == [0, cart[0]], comms
    assert t.collectives().collect().filter(pl.col("comm") == cart[0]).height == 1
    # gfortran's symbols (__cart_ops_MOD_reduce, release_) read as the source names the procedures
    sites = dict(ev.select("call", pl.col("callsite").cast(pl.Utf8)).unique().iter_rows())
    assert sites["MPI_Allreduce"].startswith("cart_ops::reduce (cart_f.f90:"), sites
    assert sites["MPI_Comm_free"].startswith("release (cart_f.f90:"), sites


@pytest.mark.mpi(ranks=2)
def test_fortran_polling_folds_and_failed_calls_carry_their_code(tmp_path, fortran_mpi):
    """Fortran wrappers end as the C ones do: an MPI_IPROBE that found nothing folds into its loop's
    record (a Fortran loop left a record per call: 1.5 million for a 2 ms wait, and no late-sender
    wait), and a call that failed carries its error code, so a failed MPI_SEND is no message (it was
    an unmatched send)."""
    t = record_program("probe_fail_f.f90", 2, tmp_path, fortran_mpi)
    ev = t.events().with_columns(pl.col("call").cast(pl.Utf8)).collect()
    probes = ev.filter(pl.col("call") == "MPI_Iprobe")
    assert probes.height <= 2 * 5 and probes["count"].sum() > 5 * 10, probes  # folded: one or two rows a round
    failed = ev.filter((pl.col("call") == "MPI_Send") & (pl.col("tag") == 99))
    assert failed.height == 1 and failed["rc"][0] not in (None, 0), failed
    assert t.manifest["counts"]["unmatched_sends"] == 0 and t.messages().collect().height == 5
    from mpiscope.analysis.diagnose import diagnose
    late = diagnose(t).wait_states.filter((pl.col("pattern").cast(pl.Utf8) == "late_sender")
                                          & (pl.col("call").cast(pl.Utf8) == "MPI_Iprobe"))
    # five rounds of 20 ms; the first may be short by as much (the ranks start apart)
    assert late.height == 1 and late["seconds"][0] > 4 * 0.015, late
