"""Launchers by any of their names: Debian installs each MPI's as mpiexec.openmpi, mpirun.mpich, ..."""

from __future__ import annotations

import pytest

from mpiscope.capture.run import launcher_name, program_of


@pytest.mark.parametrize("path, name", [
    ("/usr/bin/mpiexec.openmpi", "mpiexec"), ("mpirun.mpich", "mpirun"), ("/usr/bin/mpiexec.mpich", "mpiexec"),
    ("mpiexec.hydra", "mpiexec.hydra"), ("/opt/x/bin/mpirun", "mpirun"), ("./app.openmpi", "app.openmpi"),
])
def test_launcher_name(path, name):
    assert launcher_name(path) == name


def test_program_found_behind_any_launcher_name():
    assert program_of(["/usr/bin/mpiexec.openmpi", "-n", "4", "./app", "x"]) == "./app"
    assert program_of(["mpirun.mpich", "-np", "2", "app"]) == "app"
    assert program_of(["./app", "-n", "4"]) is None
