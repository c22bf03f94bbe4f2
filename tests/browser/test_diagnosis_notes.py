"""The report's diagnosis says, before its findings, that the run ended early: who called MPI_Abort
and where, so a reader of the findings knows they cover the run up to there (the page said only
"recording ended early (MPI_Abort)"); its notes (what the diagnosis assumed or left out) follow them."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import polars as pl
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


FOLDED = """() => {
  const o = mpiscope.timeline.object;
  for (const tile of o.frame.tiles || []) {
    const c = tile.tables.events.cols;
    for (let i = 0; i < tile.tables.events.rows; i++) {
      if (c.polls[i] > 1) { const it = o.eventItem(tile, i); o.detail.show(it, false);
        return [it.polls, it.inside, it.t1 - it.t0, document.getElementById("detail").innerText]; }
    }
  }
  return null;
}"""


@pytest.mark.mpi(ranks=2)
def test_a_folded_polling_loop_says_its_calls_and_time_inside(tmp_path: Path, build_dir: Path,
                                                               browser_page: Recorded) -> None:
    """A polling loop folded into one row spans its calls and what ran between them: the detail of
    that row says how many calls it holds and their time inside MPI (it showed the span alone, which
    read as one MPI_Test lasting 200 ms)."""
    from mpiscope.mpi.build import compile_program
    from mpiscope.trace import open_trace

    exe = compile_program(Path(__file__).parent.parent / "mpi" / "programs" / "polling.c", mpicc=str(MPICH.mpicc),
                          out_dir=build_dir / "polling")
    out = tmp_path / "poll"
    done = mpiscope_cli(["run", "--out", str(out), "--", *MPICH.launch(2), str(exe), "test", "0.2"],
                        env=MPICH.environ())
    assert done.returncode == 0, done.stderr[-2000:]
    folded = open_trace(out).events().filter(pl.col("count") > 1).collect()
    assert folded.height >= 1
    page = out / "report.html"
    assert mpiscope_cli(["report", str(out), "-o", str(page), "--force"]).returncode == 0
    browser_page.open(page.resolve().as_uri())
    assert browser_page.page.evaluate("mpiscope.timeline.view()")["mode"] == "events"
    polls, inside, span, text = browser_page.page.evaluate(FOLDED)
    row = folded.row(0, named=True)
    assert polls == row["count"] and inside == pytest.approx(row["inside_ns"])
    assert f"{polls:,} (a polling loop, one row)" in text and "inside MPI" in text, text
    assert browser_page.console_errors == []
