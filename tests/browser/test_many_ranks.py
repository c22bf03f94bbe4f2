"""The report of a 1,024-rank run in chromium: the per-rank charts keep a page's height (a bar of at
least 3 units a rank drew "Computation and MPI per rank" ~4,000 pixels tall, the page 11,500), and the
communication matrix's rank numbers do not run into each other (4-digit labels 16 pixels apart)."""

from __future__ import annotations

from pathlib import Path

from tests.browser.conftest import Recorded
from tests.conftest import mpiscope_cli

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


def test_a_thousand_ranks_fit_the_page(tmp_path: Path, browser_page: Recorded) -> None:
    trace = tmp_path / "h1024"
    halo_trace(trace, 1024, 60_000)
    assert mpiscope_cli(["merge", str(trace)]).returncode == 0
    page = tmp_path / "report.html"
    done = mpiscope_cli(["report", str(trace), "-o", str(page)])
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-2000:]
    browser_page.open(page.resolve().as_uri())
    assert browser_page.console_errors == []
    (bars,) = browser_page.page.evaluate(CHARTS)
    assert bars["height"] < 600, bars
    assert "1,024 ranks, a line each" in bars["note"]
    labels = sorted(browser_page.page.evaluate(LABELS))
    assert len(labels) >= 4, labels
    for (x0, w0), (x1, w1) in zip(labels, labels[1:]):
        assert x1 - w1 / 2 > x0 + w0 / 2, labels  # centred labels: each ends before the next begins
