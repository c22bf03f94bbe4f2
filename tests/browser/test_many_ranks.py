"""The report of a 1,024-rank run in chromium: the per-rank charts keep a page's height (a bar of at
least 3 units a rank drew "Computation and MPI per rank" ~4,000 pixels tall, the page 11,500), the
communication matrix's rank numbers do not run into each other (4-digit labels 16 pixels apart), and
the time-line zooms into a range of ranks (1,024 ranks share ~560 pixel rows: no single rank could
be seen or pointed at)."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from tests.browser.conftest import Recorded
from tests.conftest import mpiscope_cli

from mpiscope.trace import open_trace
from mpiscope.trace.synthetic import halo_trace

CHARTS = """() => ['rank-bars'].map(id => document.getElementById(id))
  .map(host => ({height: host.querySelector('svg').getBoundingClientRect().height, note: host.textContent}))"""
# The matrix's column labels: drawn on a canvas, so read back from the text it was asked to draw.
LABELS = """() => {
  const seen = [], draw = CanvasRenderingContext2D.prototype.fillText;
  CanvasRenderingContext2D.prototype.fillText = function (t, x, y) {
    if (this.textBaseline === 'bottom' && /^\\d+$/.test(t)) seen.push([x, this.measureText(t).width]);
    return draw.apply(this, arguments);
  };
  document.querySelector('#matrix-metric [data-metric="messages"]').click();
  CanvasRenderingContext2D.prototype.fillText = draw;
  return seen;
}"""
VIEW = "() => mpiscope.timeline.view()"


@pytest.fixture(scope="module")
def page_1024(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    trace = tmp_path_factory.mktemp("many") / "h1024"
    halo_trace(trace, 1024, 60_000)
    # --delete-raw: the 1,024 rank files take 2 GB of disk, the merged tables 300 KB.
    assert mpiscope_cli(["merge", str(trace), "--delete-raw"]).returncode == 0
    page = trace.parent / "report.html"
    done = mpiscope_cli(["report", str(trace), "-o", str(page)])
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-2000:]
    return trace, page


def test_a_thousand_ranks_fit_the_page(page_1024: tuple[Path, Path], browser_page: Recorded) -> None:
    browser_page.open(page_1024[1].resolve().as_uri())
    assert browser_page.console_errors == []
    (bars,) = browser_page.page.evaluate(CHARTS)
    assert bars["height"] < 600, bars
    assert "1,024 ranks, a line each" in bars["note"]
    labels = sorted(browser_page.page.evaluate(LABELS))
    assert len(labels) >= 4, labels
    for (x0, w0), (x1, w1) in zip(labels, labels[1:]):
        assert x1 - w1 / 2 > x0 + w0 / 2, labels  # centred labels: each ends before the next begins


def test_time_line_zooms_into_ranks(page_1024: tuple[Path, Path], browser_page: Recorded) -> None:
    """A drag over the rank numbers shows those ranks, the wheel there zooms them, ↓ moves through
    them, 0 shows them all; zoomed into ranks and time, single calls and only the messages that
    touch the ranks in view are drawn."""
    trace, page = page_1024
    browser_page.open(page.resolve().as_uri())
    pg = browser_page.page
    pg.evaluate("() => document.getElementById('sec-timeline').scrollIntoView({behavior: 'instant'})")
    x = pg.evaluate("() => mpiscope.timeline.canvas.getBoundingClientRect().left") + 30  # on the rank numbers
    y0, y1 = (pg.evaluate(f"() => mpiscope.timeline.yOf({r})") for r in (500, 531))
    pg.mouse.move(x, y0)
    pg.mouse.down()
    pg.mouse.move(x, y1, steps=4)
    pg.mouse.up()
    pg.evaluate("() => mpiscope.timeline.settled()")
    view = pg.evaluate(VIEW)
    assert (view["rank_first"], view["rank_last"]) == (500, 531), view
    assert pg.locator("#tl-ranks").inner_text() == "ranks 500–531 of 1,024"
    pg.mouse.move(x, pg.evaluate("() => mpiscope.timeline.yOf(515)"))
    pg.mouse.wheel(0, -400)
    pg.evaluate("() => mpiscope.timeline.settled()")
    zoomed = pg.evaluate(VIEW)
    assert zoomed["rank_first"] > 500 and zoomed["rank_last"] < 531, zoomed
    assert zoomed["rank_first"] <= 515 <= zoomed["rank_last"], zoomed
    pg.locator("#timeline").focus()
    pg.keyboard.press("ArrowDown")
    pg.evaluate("() => mpiscope.timeline.settled()")
    assert pg.evaluate(VIEW)["rank_first"] > zoomed["rank_first"]
    pg.keyboard.press("0")
    pg.evaluate("() => mpiscope.timeline.settled()")
    whole = pg.evaluate(VIEW)
    assert (whole["rank_first"], whole["rank_last"]) == (0, 1023) and pg.locator("#tl-ranks").is_hidden()

    window = pg.evaluate("() => mpiscope.data.detail.windows[0]")
    t0, t1 = window[0] + (window[1] - window[0]) * 0.25, window[0] + (window[1] - window[0]) * 0.75
    pg.evaluate("() => mpiscope.timeline.zoomRanks(500, 508)")
    pg.evaluate(f"() => mpiscope.timeline.zoomTo({t0}, {t1})")
    view = pg.evaluate(VIEW)
    assert view["mode"] == "events" and view["states"] > 0, view
    origin = pg.evaluate("() => mpiscope.data.meta.t0_ns")
    touching = (open_trace(trace).messages()
                .filter((pl.col("src").is_between(500, 507) | pl.col("dst").is_between(500, 507))
                        & (pl.col("t_send_enter_ns") - origin < t1) & (pl.col("t_recv_leave_ns") - origin > t0))
                .select(pl.len()).collect().item())
    assert 0 < view["messages"] == touching, (view, touching)
    assert browser_page.console_errors == []
