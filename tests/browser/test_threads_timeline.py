"""The time-line of a rank with threads in chromium: a long call of one thread among many short ones of
another is drawn wherever the view starts (the search for the first call still running stepped back 8
rows only: thread 0's MPI_Recv of a second vanished under 600 calls of thread 1)."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from tests.browser.conftest import Recorded
from tests.conftest import MPICH, mpiscope_cli

from mpiscope.mpi.build import compile_program
from mpiscope.trace import open_trace

PROGRAM = Path(__file__).parents[1] / "mpi" / "programs" / "thread_long_call.c"
# Every row of rank 0 still running at the view's start lies at or after the row the search returns.
MISSED = """() => {
  const tl = mpiscope.timeline.object, out = [];
  for (const tile of tl.frame.tiles) {
    const ev = tile.tables.events.cols, first = MS.paint.firstEventAt(tile, 0, tl.vs);
    for (let i = tile.rankStart[0]; i < first; i++) if (!(ev.t1[i] < tl.vs)) out.push(i);
  }
  return out;
}"""


@pytest.mark.mpi(ranks=2)
def test_a_long_call_of_one_thread_is_drawn_among_another_threads_calls(tmp_path: Path, build_dir: Path,
                                                                          browser_page: Recorded) -> None:
    exe = compile_program(PROGRAM, mpicc=str(MPICH.mpicc), extra=["-pthread"], out_dir=build_dir / "long_call")
    out = tmp_path / "t"
    done = mpiscope_cli(["run", "--out", str(out), "--", *MPICH.launch(2), str(exe)], env=MPICH.environ())
    assert done.returncode == 0, done.stderr[-2000:]
    trace = open_trace(out)
    ev = trace.events().filter(pl.col("rank") == 0).collect()
    (recv,) = ev.filter((pl.col("thread") == 0) & (pl.col("call").cast(pl.Utf8) == "MPI_Recv")).rows(named=True)
    inside = ev.filter((pl.col("t_enter_ns") > recv["t_enter_ns"]) & (pl.col("t_enter_ns") < recv["t_leave_ns"]))
    assert inside.height > 100  # the other thread's calls during the long receive
    page = tmp_path / "report.html"
    assert mpiscope_cli(["report", str(out), "-o", str(page)]).returncode == 0
    browser_page.open(page.resolve().as_uri())
    origin = browser_page.page.evaluate("() => mpiscope.data.meta.t0_ns")
    middle = (recv["t_enter_ns"] + recv["t_leave_ns"]) / 2 - origin
    browser_page.page.evaluate(f"() => mpiscope.timeline.zoomTo({middle}, {middle + 2e6})")
    assert browser_page.page.evaluate("() => mpiscope.timeline.view().mode") == "events"
    assert browser_page.page.evaluate(MISSED) == []
    assert browser_page.console_errors == []
