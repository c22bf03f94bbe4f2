"""The report's adaptive-broadcast section in chromium: a run recorded with `--bcast adaptive`
shows each broadcast's time with the optimiser's swaps and undos marked and listed; a run on the
MPI's own broadcast has no such section."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from tests.browser.conftest import Recorded
from tests.conftest import MPICH, Mpi, mpiscope_cli

from mpiscope.trace import Trace, open_trace


@pytest.fixture(scope="module")
def adaptive(tmp_path_factory: pytest.TempPathFactory, example: Callable[[str, Mpi], Path]) -> tuple[Trace, Path]:
    """4 ranks, 30 broadcasts of 256 B; rank 2, root 0's first receiver, sleeps 20 ms before each."""
    out = tmp_path_factory.mktemp("bcast") / "t"
    done = mpiscope_cli(["run", "--bcast", "adaptive", "--out", str(out), "--", *MPICH.launch(4),
                         str(example("bcast_load", MPICH)), "30", "256", "20000"], env=MPICH.environ())
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-3000:]
    page = out / "report.html"
    done = mpiscope_cli(["report", str(out), "-o", str(page)])
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-3000:]
    return open_trace(out), page


@pytest.mark.mpi(ranks=4)
def test_section_marks_and_lists_every_swap(adaptive: tuple[Trace, Path], browser_page: Recorded,
                                           artifacts: Path) -> None:
    trace, page = adaptive
    browser_page.open(page.resolve().as_uri())
    swaps = trace.manifest["bcast"]["swaps"]
    assert swaps, "the load's first receiver gave the optimiser nothing to swap"
    p = browser_page.page
    assert p.evaluate("document.getElementById('sec-bcast').hidden") is False
    marks = p.evaluate("""() => [...document.querySelectorAll('#bcast svg line.bc-swap, #bcast svg line.bc-undo')]
                          .map((l) => [l.getAttribute('class'), l.querySelector('title').textContent])""")
    drawn = [s for s in swaps if s["bcast"] <= 30]  # one decided after the last broadcast is only listed
    assert [m[0] for m in marks] == [f"bc-{s['op']}" for s in drawn]
    assert all(f"from broadcast {s['bcast']}: {s['op']} ranks {s['rank_a']} and {s['rank_b']}" in m[1]
               for m, s in zip(marks, drawn))
    rows = p.evaluate("() => [...document.querySelectorAll('#bcast table.data tbody tr')].map((r) => r.cells[1].textContent)")
    assert rows == [s["op"] for s in swaps]
    # one point per broadcast: 30 of them, each the path's vertex
    path = p.evaluate("() => document.querySelector('#bcast path.bc-mean').getAttribute('d')")
    assert path.count("L") == 29 and "30 broadcasts" in p.inner_text("#bcast")
    assert browser_page.console_errors == []
    p.locator("#sec-bcast").screenshot(path=str(artifacts / "bcast-section.png"))


def test_no_section_without_the_adaptive_broadcast(halo_report: Path, browser_page: Recorded) -> None:
    browser_page.open(halo_report.resolve().as_uri())
    assert browser_page.page.evaluate("document.getElementById('sec-bcast').hidden") is True
    assert browser_page.page.evaluate("mpiscope.data.bcast") is None
    assert browser_page.console_errors == []
