"""The report's load-imbalance table in chromium for a run of more phases than the diagnosis lists
one by one: each row names the range of phases it groups (not its row number, which read as a phase
the findings never meant), the single phases that lost the most time follow, and the bars keep the
imbalance's proportions (a CSS cap drew every bar above 61 % of the largest at one width)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from tests.browser.conftest import Recorded
from tests.conftest import MPICH, Mpi, mpiscope_cli

from mpiscope.analysis.diagnose import diagnose
from mpiscope.analysis.imbalance import JSON_PHASES
from mpiscope.trace import open_trace

ROWS = """() => [...document.querySelectorAll('table.data')].filter(t => t.querySelector('.imb-bar'))
  .map(t => [...t.querySelectorAll('tbody tr')].map(tr => ({label: tr.cells[0].textContent,
    bar: tr.querySelector('.imb-bar').getBoundingClientRect().width, pct: tr.querySelector('.imb-val').textContent})))"""


@pytest.mark.mpi(ranks=4)
def test_grouped_phases_are_labelled_by_their_range(tmp_path: Path, example: Callable[[str, Mpi], Path],
                                                    browser_page: Recorded) -> None:
    out = tmp_path / "halo"
    done = mpiscope_cli(["run", "--out", str(out), "--", *MPICH.launch(4), str(example("halo", MPICH)), "150", "64"],
                        env=MPICH.environ())
    assert done.returncode == 0, done.stderr[-2000:]
    imbalance = diagnose(open_trace(out)).to_json()["imbalance"]
    assert imbalance["grouped"] and imbalance["phase_count"] > JSON_PHASES
    page = out / "report.html"
    assert mpiscope_cli(["report", str(out), "-o", str(page), "--force"]).returncode == 0
    browser_page.open(page.resolve().as_uri())
    assert browser_page.console_errors == []
    groups, worst = browser_page.page.evaluate(ROWS)
    assert [r["label"] for r in groups] == [f"{g['index']}–{g['last_index']}" if g["count"] > 1 else str(g["index"])
                                            for g in imbalance["phases"]]
    assert [r["label"] for r in worst] == [str(p["index"]) for p in imbalance["worst_phases"]]
    rows = groups + worst
    pcts = [float(r["pct"].rstrip(" %")) for r in rows]
    top = max(pcts)
    for r, pct in zip(rows, pcts):
        assert r["bar"] == pytest.approx(110 * pct / top, abs=1.0), (r, top)
