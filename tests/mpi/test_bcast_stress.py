"""Correctness before speed (SPEC §5): the seeded stress driver examples/bcast_stress.c
under the adaptive broadcast, with MPICH and Open MPI, 2 to 17 ranks: any root, sizes
from 0 up to 64 MiB, basic and derived datatypes with gaps, several communicators at
once (world, duplicates, splits, communicators made and freed while broadcasts run),
wildcard user receives pending on the same communicator, and MPI_THREAD_MULTIPLE
programs broadcasting on different communicators from different threads."""

from __future__ import annotations

import re

import pytest
from tests.conftest import MPICH, Mpi, mpiscope_cli

from mpiscope.trace import open_trace

pytestmark = pytest.mark.mpi(ranks=17)


def stress(mpi: Mpi, example, tmp_path, ranks: int, args: list[str], mode: str = "adaptive",
           record: bool = False, extra_env: dict[str, str] | None = None) -> int:
    """Run the driver; returns the number of broadcasts (asserting zero mismatches)."""
    out = tmp_path / f"t{ranks}"
    run = ["run", "--bcast", mode, "--out", str(out)] + ([] if record else ["--no-record"])
    done = mpiscope_cli([*run, "--", *mpi.launch(ranks), str(example("bcast_stress", mpi)), *args],
                        env=dict(mpi.environ(), **(extra_env or {})), cwd=tmp_path, timeout=240)
    found = re.search(r"bcast_stress: (\d+) broadcasts, (\d+) mismatches", done.stdout)
    assert done.returncode == 0 and found, (done.returncode, done.stdout[-500:], done.stderr[-3000:])
    assert found[2] == "0"
    return int(found[1])


@pytest.mark.parametrize("ranks, seed", [(2, 11), (3, 12), (5, 13), (8, 14), (12, 15), (17, 16)])
def test_stress_mpich(tmp_path, example, ranks, seed):
    assert stress(MPICH, example, tmp_path, ranks, [str(seed), "48"]) == 48 * ranks


def test_stress_binomial_and_send_reports(tmp_path, example):
    """The fixed tree, and reports by nonblocking message instead of MPI_Put."""
    assert stress(MPICH, example, tmp_path, 6, ["21", "40"], mode="binomial") == 240
    send = {"MPISCOPE_BCAST_REPORT": "send"}
    assert stress(MPICH, example, tmp_path, 7, ["22", "40"], extra_env=send) == 280
    assert stress(MPICH, example, tmp_path, 3, ["23", "30", "4096", "3"], extra_env=send) == 270


def test_stress_threads_mpich(tmp_path, example):
    assert stress(MPICH, example, tmp_path, 4, ["31", "40", "65536", "4"]) == 4 * 4 * 40


def test_stress_recorded(tmp_path, example):
    """Recorded at the same time: one MPI_Bcast event per rank and broadcast, and the
    user's own messages all matched (the tree's never among them)."""
    n = stress(MPICH, example, tmp_path, 5, ["41", "32"], record=True)
    t = open_trace(tmp_path / "t5")
    calls = t.events().collect()["call"].cast(str).value_counts()
    assert dict(zip(calls["call"], calls["count"]))["MPI_Bcast"] == n
    assert t.manifest["counts"]["unmatched_sends"] == t.manifest["counts"]["unmatched_recvs"] == 0
    assert t.messages().collect().height == n  # one user message per rank and broadcast


@pytest.mark.openmpi
@pytest.mark.parametrize("ranks, seed", [(2, 51), (6, 52), (17, 53)])
def test_stress_openmpi(tmp_path, example, openmpi, ranks, seed):
    assert stress(openmpi, example, tmp_path, ranks, [str(seed), "32"]) == 32 * ranks


@pytest.mark.openmpi
def test_stress_threads_openmpi(tmp_path, example, openmpi):
    assert stress(openmpi, example, tmp_path, 3, ["61", "30", "65536", "3"]) == 3 * 3 * 30


@pytest.mark.slow
@pytest.mark.parametrize("mpi_name", ["mpich", "openmpi"])
def test_stress_64mib(tmp_path, example, request, mpi_name):
    """The largest size, 64 MiB, once per run, among broadcasts of every size."""
    mpi = request.getfixturevalue(mpi_name)
    assert stress(mpi, example, tmp_path, 5, ["71", "12", str(64 << 20)]) == 60
