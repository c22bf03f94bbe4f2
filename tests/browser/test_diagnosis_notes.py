"""The report's diagnosis says, before its findings, that the run ended early: who called MPI_Abort
and where, so a reader of the findings knows they cover the run up to there (the page said only
"recording ended early (MPI_Abort)"); its notes (what the diagnosis assumed or left out) follow them."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from tests.browser.conftest import Recorded
from tests.conftest import MPICH, Mpi, mpiscope_cli


@pytest.mark.mpi(ranks=4)
def test_a_run_that_ended_early_is_said_under_the_findings(tmp_path: Path, example: Callable[[str, Mpi], Path],
                                                           browser_page: Recorded, artifacts: Path) -> None:
    out = tmp_path / "crash"
    done = mpiscope_cli(["run", "--out", str(out), "--", *MPICH.launch(4), str(example("crash", MPICH)), "10", "abort"],
                        env=MPICH.environ())
    assert (out / "events.parquet").exists() or (out / "events").is_dir(), done.stderr[-2000:]
    page = out / "report.html"
    assert mpiscope_cli(["report", str(out), "-o", str(page), "--force"]).returncode == 0
    browser_page.open(page.resolve().as_uri())
    notes = browser_page.page.evaluate("[...document.querySelectorAll('#diagnosis .note.warn')].map(n => n.textContent)")
    browser_page.page.locator("#sec-diagnosis").screenshot(path=str(artifacts / "diagnosis-ended-early.png"))
    assert browser_page.console_errors == []
    # before the findings, which it concerns, as the oversubscription is
    assert notes[0].startswith("The run ended early (exit code 3): rank 1 called MPI_Abort at main "
                               "(crash.c:"), notes
