"""Where the ranks ran (trace/placement.py): the rank files name each rank's CPUs and the MPI
that ran it, the manifest sums them per host, and a run of more ranks than CPUs is told so
before the findings. The CPUs are restricted with the launcher's affinity mask (inherited by the ranks), so
the test does not depend on the machine's size."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest
from tests.conftest import MPICH, Mpi, mpiscope_cli

from mpiscope.trace import open_trace

pytestmark = pytest.mark.mpi(ranks=3)


def _record(tmp_path: Path, example: Callable[[str, Mpi], Path], ranks: int,
            cpus: set[int] | None) -> tuple[Path, str]:
    out = tmp_path / f"ring-{ranks}"
    before = os.sched_getaffinity(0)
    try:
        if cpus is not None:  # the launcher and its ranks inherit this process's mask
            os.sched_setaffinity(0, cpus)
        ring = str(example("ring", MPICH))
        done = mpiscope_cli(["run", "--out", str(out), "--", *MPICH.launch(ranks), ring], env=MPICH.environ())
    finally:
        os.sched_setaffinity(0, before)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-3000:]
    return out, done.stderr


def _diagnosis(trace: Path) -> dict:
    done = mpiscope_cli(["diagnose", str(trace), "--json", "-"])
    assert done.returncode == 0, done.stderr[-3000:]
    return dict(json.loads(done.stdout))


def test_more_ranks_than_cpus_is_said_before_the_findings(tmp_path: Path,
                                                   example: Callable[[str, Mpi], Path]) -> None:
    cpu = min(os.sched_getaffinity(0))
    trace, said = _record(tmp_path, example, 3, {cpu})
    assert "warning: 3 ranks ran on the 1 CPU of host" in said, said  # run says so once merged
    m = open_trace(trace).manifest
    (host, seen), = m["placement"]["hosts"].items()
    assert seen == {"ranks": 3, "cpus": 1, "cpus_online": os.cpu_count()}, seen
    assert m["placement"]["mpi_library"] and m["placement"]["mpi_library"][0].startswith("MPICH Version:")
    d = _diagnosis(trace)
    first = d["oversubscribed"]  # said apart from the findings: it is inside every one of them
    assert first["kind"] == "oversubscribed" and first["ranks"] == [0, 1, 2], first
    assert not [f for f in d["findings"] if f["kind"] == "oversubscribed"]
    assert first["hosts"] == [{"host": host, "ranks": 3, "cpus": 1, "cpus_online": os.cpu_count()}]
    if os.cpu_count() != 1:  # the mask left CPUs out: widening it is the first cure
        assert "(of its" in first["text"] and "use every CPU of their hosts" in first["suggestion"]
    assert "3 ranks on the 1 CPU of host" in first["text"]
    assert "at most 1 rank per host" in first["suggestion"]
    # each rank had the CPU for a third of its time at most: two thirds of the ranks' time summed
    app = sum(r["app_seconds"] for r in _diagnosis(trace)["per_rank"])
    assert first["seconds"] == pytest.approx(app * 2 / 3, rel=1e-6)
    stats = mpiscope_cli(["stats", str(trace), "--json", "-"])
    assert json.loads(stats.stdout)["oversubscribed"] == [{"host": host, "ranks": 3, "cpus": 1, "threads": 0}]
    assert "3 ranks ran on the 1 CPU of host" in mpiscope_cli(["stats", str(trace)]).stderr
    # the terminal says it before the findings with its advice, both on stdout (the warning went to
    # stderr, its advice to stdout: `diagnose | head` showed an orphaned advice)
    said = mpiscope_cli(["diagnose", str(trace)]).stdout
    assert said.index("3 ranks on the 1 CPU of host") < said.index("→ ") < said.index("at most 1 rank per host")


def test_as_many_cpus_as_ranks_is_no_finding(tmp_path: Path, example: Callable[[str, Mpi], Path]) -> None:
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        pytest.fail("this test needs a machine of 2 CPUs or more")
    trace, said = _record(tmp_path, example, 2, set(cpus[:2]))
    assert "CPU of host" not in said and "CPUs of host" not in said, said
    (seen,) = open_trace(trace).manifest["placement"]["hosts"].values()
    assert seen["ranks"] == 2 and seen["cpus"] == 2, seen
    assert _diagnosis(trace)["oversubscribed"] is None
