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


def test_program_found_behind_options_of_any_kind(tmp_path):
    """Options not in VALUE_OPTIONS: their value was taken for the program (`--timeout 5`: "program 5
    not found"), unless it is no program while a later word is."""
    app = tmp_path / "app"
    app.write_text("#!/bin/sh\n")
    app.chmod(0o755)
    for options in (["--timeout", "5"], ["--np", "2"], ["-H", "localhost:2"], ["-wd", "/tmp"],
                    ["--cpus-per-proc", "1"], ["--some-new-option", "7"], ["--oversubscribe"],
                    ["-n", "2", "--tag-output", "--report-bindings"], ["--mca", "btl", "self,vader"]):
        assert program_of(["mpiexec.openmpi", *options, "./app", "-n", "3"], cwd=str(tmp_path)) == "./app", options
    # a program that does not exist is still named (run says it is not found)
    assert program_of(["mpiexec", "--oversubscribe", "./missing"], cwd=str(tmp_path)) == "./missing"
    assert program_of(["mpiexec", "-n", "2", "python3", "x.py"]) == "python3"
