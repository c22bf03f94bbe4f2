"""The time-line of a rank with threads in chromium: a long call of one thread among many short ones of
another is drawn wherever the view starts (the search for the first call still running stepped back 8
rows only: thread 0's MPI_Recv of a second vanished under 600 calls of thread 1), and on a lane of its
own, beside the other thread's calls (drawn in one row, the receive hid them)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
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


@pytest.fixture(scope="module")
def long_call(tmp_path_factory: pytest.TempPathFactory, build_dir: Path) -> tuple[dict[str, Any], Path]:
    """thread_long_call.c recorded: rank 0's long MPI_Recv (thread 0) and the report."""
    exe = compile_program(PROGRAM, mpicc=str(MPICH.mpicc), extra=["-pthread"], out_dir=build_dir / "long_call")
    out = tmp_path_factory.mktemp("threads") / "t"
    done = mpiscope_cli(["run", "--out", str(out), "--", *MPICH.launch(2), str(exe)], env=MPICH.environ())
    assert done.returncode == 0, done.stderr[-2000:]
    trace = open_trace(out)
    ev = trace.events().filter(pl.col("rank") == 0).collect()
    (recv,) = ev.filter((pl.col("thread") == 0) & (pl.col("call").cast(pl.Utf8) == "MPI_Recv")).rows(named=True)
    inside = ev.filter((pl.col("t_enter_ns") > recv["t_enter_ns"]) & (pl.col("t_enter_ns") < recv["t_leave_ns"]))
    assert inside.height > 100  # the other thread's calls during the long receive
    page = out.parent / "report.html"
    assert mpiscope_cli(["report", str(out), "-o", str(page)]).returncode == 0
    return recv, page


def _zoom_into(browser_page: Recorded, recv: dict[str, Any], page: Path, width_ns: float) -> float:
    """The page opened and zoomed to `width_ns` from the middle of the long receive; that middle."""
    browser_page.open(page.resolve().as_uri())
    origin = browser_page.page.evaluate("() => mpiscope.data.meta.t0_ns")
    middle = (recv["t_enter_ns"] + recv["t_leave_ns"]) / 2 - origin
    browser_page.page.evaluate(f"() => mpiscope.timeline.zoomTo({middle}, {middle + width_ns})")
    assert browser_page.page.evaluate("() => mpiscope.timeline.view().mode") == "events"
    return middle


@pytest.mark.mpi(ranks=2)
def test_a_long_call_of_one_thread_is_drawn_among_another_threads_calls(long_call: tuple[dict[str, Any], Path],
                                                                          browser_page: Recorded) -> None:
    _zoom_into(browser_page, *long_call, 2e6)
    assert browser_page.page.evaluate(MISSED) == []
    assert browser_page.console_errors == []


# Per lane of rank 0 (thread 0, thread 1): the share of its pixels in the plot's middle column range
# that are painted (not the row's background), and the call under the pointer at the lane's middle.
LANES = """async () => {
  const tl = mpiscope.timeline.object, g = tl.g, L = g.layout, out = [];
  for (let k = 0; k < L.lanesIn(0); k++) {
    const [y0, y1] = L.box(k), y = Math.floor((y0 + y1) / 2), bg = tl.img32[y * g.cols];
    let painted = 0;
    for (let x = 0; x < g.cols; x++) if (tl.img32[y * g.cols + x] !== bg) painted++;
    const hit = tl.hitEvent(g.x0 + g.cols / 2, g.top + y);
    out.push({ painted: painted / g.cols, box: [y0, y1], thread: hit ? hit.thread : null, call: hit ? hit.call : null });
  }
  return { lanes: L.LM, threads: mpiscope.data.threads, out, vs: tl.vs, ve: tl.ve, cols: g.cols };
}"""


def _columns_covered(calls: pl.DataFrame, origin: int, view: dict[str, Any]) -> float:
    """The share of the plot's columns that `calls` (t_enter_ns, t_leave_ns) overlap in the view, as the
    time-line paints them (a call narrower than a column still colours it)."""
    vs, ve, cols = view["vs"], view["ve"], view["cols"]
    per_ns = cols / (ve - vs)
    covered = np.zeros(cols, dtype=bool)
    for t0, t1 in calls.select(pl.col("t_enter_ns") - origin, pl.col("t_leave_ns") - origin).iter_rows():
        if t1 <= vs or t0 >= ve:
            continue
        x0, x1 = (max(t0, vs) - vs) * per_ns, (min(t1, ve) - vs) * per_ns
        covered[math.floor(x0):max(math.floor(x0) + 1, min(cols, math.ceil(x1)))] = True
    return float(covered.mean())


@pytest.mark.mpi(ranks=2)
def test_each_thread_of_a_rank_has_its_lane(long_call: tuple[dict[str, Any], Path], browser_page: Recorded,
                                            artifacts: Path) -> None:
    recv, page = long_call
    _zoom_into(browser_page, recv, page, 12e6)
    got = browser_page.page.evaluate(LANES)
    assert got["threads"] == [2, 2] and got["lanes"] == 2, got
    receive, pingpong = got["out"]
    assert receive["box"][1] <= pingpong["box"][0]
    # thread 0's lane is its receive from end to end; thread 1's shows its own calls where the trace has them,
    # not the receive's colour throughout (one row for both hid them). How much of the lane its calls cover
    # depends on the machine: on 2 loaded cores a ping-pong's receive can last nearly all of its 1 ms sleep.
    assert receive["painted"] > 0.99 and (receive["thread"], receive["call"]) == (0, "MPI_Recv"), receive
    origin = browser_page.page.evaluate("() => mpiscope.data.meta.t0_ns")
    thread1 = open_trace(page.parent / "t").events().filter((pl.col("rank") == 0) & (pl.col("thread") == 1))
    expected = _columns_covered(thread1.collect(), origin, got)
    assert 0.005 < pingpong["painted"] and abs(pingpong["painted"] - expected) < 0.02, (pingpong, expected)
    assert pingpong["thread"] in (1, None), pingpong
    browser_page.page.locator("#timeline").screenshot(path=str(artifacts / "timeline-thread-lanes.png"))
    assert browser_page.console_errors == []
