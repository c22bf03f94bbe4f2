"""The merge in pieces on recorded traces: with a small budget, and as an MPI job
(mpiexec -n 3 mpiscope merge: rank 0 leads, ranks 1 and 2 merge pieces), the tables are
those of the one-process, in-memory merge."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from tests.conftest import MPICH
from tests.unit.test_merge_pieces import assert_same_merge, budget_for, copy, cut_everywhere, in_pieces_only

from mpiscope.trace.merge import merge_trace


@pytest.mark.parametrize("name,ranks,args", [("halo", 4, []), ("nbc", 4, []), ("threads", 2, []),
                                            ("persistent", 4, []), ("p2pmodes", 2, []), ("rma", 4, [])])
@pytest.mark.parametrize("cut", [False, True], ids=["whole-ranks", "ranks-cut"])
def test_recorded_pieces_equal_in_memory(run_traced, tmp_path, name, ranks, args, cut, monkeypatch) -> None:
    """ranks-cut: every rank cut at each of its quiet points (quiet.py), its pieces merged apart."""
    whole = run_traced(name, ranks, args=args).path
    pieces = copy(whole, tmp_path / "pieces")
    in_pieces_only(monkeypatch)
    if cut:
        cut_everywhere(monkeypatch)
    merge_trace(pieces, memory=budget_for(pieces))
    how = json.loads((pieces / "manifest.json").read_text())["merge"]
    assert how["pieces"] >= (ranks + 1 if cut and name != "threads" else 2), how
    assert_same_merge(whole, pieces)


def test_merge_as_mpi_job(run_traced, tmp_path) -> None:
    whole = run_traced("sor", 4).path
    job = copy(whole, tmp_path / "job")
    done = subprocess.run([*MPICH.launch(3), sys.executable, "-m", "mpiscope", "merge", str(job)],
                          capture_output=True, text=True, env=MPICH.environ(), timeout=300, check=False)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    how = json.loads((job / "manifest.json").read_text())["merge"]
    assert how["workers"] == 2 and how["pieces"] >= 2, how
    assert_same_merge(whole, job)
