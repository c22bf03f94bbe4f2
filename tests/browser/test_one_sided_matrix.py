"""The communication matrix of a run whose ranks communicate one-sided (examples/rma.c: each
rank puts to and gets from rank+1) offers the one-sided bytes, origin to target for puts and
target to origin for gets; a point-to-point run (the halo) does not offer them."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from tests.browser.conftest import Recorded
from tests.conftest import MPICH, Mpi, mpiscope_cli

RANKS = 4
COUNT, INT = 8, 4  # rma.c


@pytest.fixture(scope="module")
def rma_report(tmp_path_factory: pytest.TempPathFactory, example: Callable[[str, Mpi], Path]) -> Path:
    out = tmp_path_factory.mktemp("rma") / "rma"
    done = mpiscope_cli(["run", "--out", str(out), "--", *MPICH.launch(RANKS), str(example("rma", MPICH))],
                        env=MPICH.environ())
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-3000:]
    page = out / "report.html"
    done = mpiscope_cli(["report", str(out), "-o", str(page)])
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-3000:]
    return page


@pytest.mark.mpi(ranks=RANKS)
def test_one_sided_bytes_in_the_matrix(browser_page: Recorded, rma_report: Path, artifacts: Path) -> None:
    browser_page.open(rma_report.resolve().as_uri())
    page = browser_page.page
    m = page.evaluate("mpiscope.data.stats.matrix")
    assert not any(any(row) for row in m["bytes"]), "rma.c sends no message"
    one_sided = m["one_sided"]
    for r in range(RANKS):
        target, origin = (r + 1) % RANKS, (r - 1) % RANKS
        # two Puts, Accumulate, Get_accumulate and Rput of COUNT ints; Fetch_and_op, Compare_and_swap of one
        assert one_sided[r][target] == (5 * COUNT + 2) * INT, (r, one_sided[r])
        # rank r-1's Get and Rget read from r: those bytes go from r to r-1
        assert one_sided[r][origin] == 2 * COUNT * INT, (r, one_sided[r])
    panel = page.locator("#sec-stats .panel").first
    assert "communicated one-sided" in page.locator("#matrix").inner_text()
    button = page.locator('#matrix-metric [data-metric="one_sided"]')
    assert button.is_visible()
    button.click()
    assert page.locator("#matrix canvas").count() == 1
    assert "one-sided bytes from row to column" in page.locator("#matrix").inner_text()
    # the scale's top is bytes, as the cells' tips are (it was a bare count)
    top = page.locator("#matrix .legend-scale .ls-label").last.inner_text()
    assert top.endswith("B") and top[0].isdigit(), top
    panel.screenshot(path=str(artifacts / "matrix-one-sided.png"))
    assert not browser_page.console_errors, browser_page.console_errors


def test_a_point_to_point_run_offers_no_one_sided_bytes(browser_page: Recorded, halo_report: Path) -> None:
    browser_page.open(halo_report.resolve().as_uri())
    page = browser_page.page
    assert "one_sided" not in page.evaluate("mpiscope.data.stats.matrix")
    assert not page.locator('#matrix-metric [data-metric="one_sided"]').is_visible()
    assert page.locator("#matrix canvas").count() == 1
    assert not browser_page.console_errors, browser_page.console_errors
