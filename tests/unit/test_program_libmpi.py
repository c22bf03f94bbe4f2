"""A program linked to another libmpi than libmpiscope's is refused before anything runs."""

from __future__ import annotations

import pytest

from mpiscope.capture import run as capture_run
from mpiscope.errors import MpiError
from mpiscope.mpi.find import MpiInfo

BUILT = MpiInfo("MPICH", "5.0.2", "", "/venv/lib/libmpi.so.12", "/venv/bin/mpicc")
LDD_DEBIAN = """\tlinux-vdso.so.1 (0x00007ffd)
\tlibmpichfort.so.12 => /lib/x86_64-linux-gnu/libmpichfort.so.12 (0x00007f)
\tlibmpich.so.12 => /lib/x86_64-linux-gnu/libmpich.so.12 (0x00007f)
"""


def test_ldd_line_gives_the_library():
    m = capture_run.LIBMPI_LINE.match("\tlibmpich.so.12 => /lib/x86_64-linux-gnu/libmpich.so.12 (0x7f)")
    assert m and m.group(1) == "/lib/x86_64-linux-gnu/libmpich.so.12"
    assert capture_run.LIBMPI_LINE.match("\tlibmpi_abi.so.0 => /x/libmpi_abi.so.0 (0x7f)") is None
    assert capture_run.LIBMPI_LINE.match("\tlibmpi.so.40 => /usr/lib/libmpi.so.40 (0x7f)")


def test_other_libmpi_is_refused(monkeypatch):
    monkeypatch.setattr(capture_run, "linked_libmpi", lambda prog: "/lib/x86_64-linux-gnu/libmpich.so.12")
    with pytest.raises(MpiError, match="linked to /lib/x86_64-linux-gnu/libmpich.so.12.*python -m mpiscope.mpi.build "
                                       "--mpicc .*mpicc.* --dest DIR, then MPISCOPE_LIB_DIR=DIR mpiscope run"):
        capture_run._check_program_mpi(["mpiexec.mpich", "-n", "4", "./cg.S.x"], BUILT)


def test_same_or_unknown_libmpi_passes(monkeypatch):
    monkeypatch.setattr(capture_run, "linked_libmpi", lambda prog: BUILT.libmpi)
    capture_run._check_program_mpi(["mpiexec", "-n", "2", "./app"], BUILT)
    monkeypatch.setattr(capture_run, "linked_libmpi", lambda prog: None)  # python app.py, a script
    capture_run._check_program_mpi(["mpiexec", "-n", "2", "python", "app.py"], BUILT)
