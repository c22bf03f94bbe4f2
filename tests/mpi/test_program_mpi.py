"""A program built with another MPI than libmpiscope's is refused before it runs: preloaded,
libmpiscope's libmpi would shadow the program's, so it would run on another MPI than its own
(NPB's Fortran kernels built with Debian's MPICH 4.0 ran 5-10 times faster on the wheel's 5.0)
or not start at all (a C program: a symbol lookup error in the wheel's transport)."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.conftest import EXAMPLES, MPICH, mpiscope_cli, require

from mpiscope.mpi.build import compile_program

DEBIAN_MPICC = Path("/usr/bin/mpicc.mpich")


@pytest.mark.mpi(ranks=2)
def test_program_of_another_mpi_is_refused(tmp_path):
    require(DEBIAN_MPICC.exists(), "Debian's MPICH", "apt-get install mpich libmpich-dev")
    prog = compile_program(EXAMPLES / "ring.c", mpicc=str(DEBIAN_MPICC), out_dir=tmp_path)
    out = tmp_path / "t"
    done = mpiscope_cli(["run", "--out", str(out), "--", *MPICH.launch(2), str(prog), "2", "8"],
                        env=MPICH.environ())
    assert done.returncode == 4 and "Traceback" not in done.stderr, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "is linked to" in lines[0] and "libmpich.so" in lines[0], lines
    assert f"python -m mpiscope.mpi.build --mpicc {DEBIAN_MPICC} --dest DIR" in lines[0] and not out.exists()
    # the program's own MPI's library: recorded as usual (the Debian recording tests do it at length)
    same = compile_program(EXAMPLES / "ring.c", mpicc=str(MPICH.mpicc), out_dir=tmp_path / "venv")
    ok = mpiscope_cli(["run", "--out", str(out), "--", *MPICH.launch(2), str(same), "2", "8"], env=MPICH.environ())
    assert ok.returncode == 0, ok.stderr[-2000:]
