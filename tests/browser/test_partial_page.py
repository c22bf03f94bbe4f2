"""A report page that holds single calls for part of the run only (its size budget took the
busiest windows): a view straddling the edge of an embedded window says how much of it the
page holds, rather than that it holds none. A generated 8-rank halo trace, no MPI needed.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.browser.conftest import Recorded
from tests.conftest import merged_halo, mpiscope_cli

from mpiscope.trace import Trace


@pytest.fixture(scope="module")
def partial_report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    trace: Trace = merged_halo(tmp_path_factory.mktemp("partial") / "halo", 8, 200_000)
    out = trace.path / "report.html"
    done = mpiscope_cli(["report", str(trace.path), "-o", str(out), "--max-size", "1.5", "--json", "-"])
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-3000:]
    return out


def test_view_across_an_embedded_edge_names_the_share_it_holds(browser_page: Recorded, partial_report: Path,
                                                               artifacts: Path) -> None:
    browser_page.open(partial_report.resolve().as_uri())
    page = browser_page.page
    detail = page.evaluate("mpiscope.data.detail")
    assert not detail["complete"], "the 2 MB budget was meant to leave windows out"
    span = page.evaluate("mpiscope.data.meta.span_ns")
    windows = sorted(detail["windows"])
    merged: list[list[float]] = []
    for a, b in windows:
        if merged and a <= merged[-1][1] * (1 + 1e-12):
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    a, b = next((w for w in merged if w[1] < span * 0.999), merged[0])
    width = min(b - a, windows[0][1] - windows[0][0])
    # 70 % of the view inside the window, 30 % past its end, where nothing is embedded.
    lo, hi = b - 0.7 * width, b + 0.3 * width
    page.evaluate("([a, b]) => mpiscope.timeline.zoomTo(a, b)", [lo, hi])
    view = page.evaluate("mpiscope.timeline.view()")
    page.locator("#sec-timeline").screenshot(path=str(artifacts / "partial-edge.png"))
    assert view["mode"] == "bins" and "70 % of this window" in (view["note"] or ""), view
    # wholly inside the window the page draws its single calls, with no note
    page.evaluate("([a, b]) => mpiscope.timeline.zoomTo(a, b)", [b - width, b])
    view = page.evaluate("mpiscope.timeline.view()")
    assert view["mode"] == "events" and view["note"] is None, view
    assert not browser_page.console_errors, browser_page.console_errors


HOVER_BINS = """() => {
  const o = mpiscope.timeline.object, g = o.g, L = g.layout, out = [];
  for (let row = 0; row < Math.min(2, L.rows || 2); row++) {
    const y = g.top + row * L.rowH + 1;
    for (let col = 0; col < g.cols; col++) {
      const it = o.hitTest(g.x0 + col + 0.5, y);
      if (it && it.kind === "bin") out.push([row, col, it.rank, it.ranks, it.t0, it.t1, it.starts]);
    }
  }
  return out;
}"""


def test_hovered_time_span_counts_what_started_in_it(browser_page: Recorded, partial_report: Path) -> None:
    """Zoomed out, hovering a pixel column of a rank shows the calls started in the time span it
    names, each bin counted at one pixel: every bin touching the pixel was summed, so bins about a
    pixel wide counted twice (NPB LU: 130 calls started where the trace has 64)."""
    import polars as pl

    from mpiscope.trace import open_trace

    browser_page.open(partial_report.resolve().as_uri())
    page = browser_page.page
    assert page.evaluate("mpiscope.timeline.view()")["mode"] == "bins"
    hits = page.evaluate(HOVER_BINS)
    assert len(hits) > 100
    trace = open_trace(partial_report.parent)
    t0 = page.evaluate("mpiscope.data.meta.t0_ns")
    ev = trace.events().select("rank", (pl.col("t_enter_ns") - t0).cast(pl.Float64).alias("t")).collect()
    for row in {h[0] for h in hits}:
        mine = [h for h in hits if h[0] == row]
        rank, n = mine[0][2], mine[0][3]
        starts = ev.filter((pl.col("rank") >= rank) & (pl.col("rank") < rank + n))["t"].to_numpy()
        # across the row every call started is counted once
        assert sum(h[6] for h in mine) == starts.size, (row, sum(h[6] for h in mine), starts.size)
        for _, _, _, _, a, b, count in mine[:: max(1, len(mine) // 25)]:
            got = int(((starts >= a) & (starts < b)).sum())
            assert abs(got - count) <= 1, (a, b, count, got)
