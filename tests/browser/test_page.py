"""The page in a real browser (issue 17's acceptance), for a recorded 4-rank halo exchange, opened
both as a `mpiscope report` file and from a `mpiscope view` server: it loads with no console error
and asks nothing of anyone but the file itself or the loopback server; the time-line is drawn; a
window of fewer than 1,000 calls shows single calls; hovering a message shows the source,
destination and bytes that messages.parquet has; the density view's darkest bin is the one the
tables give. Each test keeps a screenshot under $MPISCOPE_TEST_ARTIFACTS (default test-artifacts/).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest
from tests.browser.conftest import Recorded

from mpiscope.trace import Trace

pytestmark = pytest.mark.mpi(ranks=4)

BINS = 1024


@dataclass
class Opened:
    rec: Recorded
    url: str
    mode: str
    meta: dict[str, Any]
    trace: Trace

    @property
    def page(self) -> Any:
        return self.rec.page

    def rel(self, t_ns: Any) -> Any:
        """Absolute trace ns -> the page's times (ns after meta.t0_ns), as float64."""
        return np.asarray(t_ns, dtype=np.float64) - float(self.meta["t0_ns"])

    def zoom(self, a: float, b: float) -> dict[str, Any]:
        self.page.evaluate("([a, b]) => mpiscope.timeline.zoomTo(a, b)", [float(a), float(b)])
        self.page.evaluate("() => mpiscope.timeline.canvas.scrollIntoView({block: 'center', behavior: 'instant'})")
        return dict(self.page.evaluate("mpiscope.timeline.view()"))

    def shot(self, artifacts: Path, name: str, selector: str | None = None) -> None:
        path = artifacts / f"{name}-{self.mode}.png"
        if selector:
            self.page.locator(selector).screenshot(path=str(path))
        else:
            self.page.screenshot(path=str(path), full_page=True)


@pytest.fixture(params=["report", "view"])
def opened(request: pytest.FixtureRequest, browser_page: Recorded, halo: Trace) -> Opened:
    if request.param == "report":
        url = Path(request.getfixturevalue("halo_report")).resolve().as_uri()
    else:
        url = request.getfixturevalue("halo_view")
    info = browser_page.open(url)
    return Opened(browser_page, url, request.param, info["meta"], halo)


def test_loads_with_no_error_and_no_foreign_request(opened: Opened, artifacts: Path) -> None:
    opened.shot(artifacts, "page")
    assert opened.rec.console_errors == []
    assert opened.meta["mode"] == opened.mode
    if opened.mode == "report":
        assert opened.rec.requests == [opened.url]
    else:
        origin = opened.url.split("/?")[0].rstrip("/")
        assert opened.rec.requests[0] == opened.url
        assert all(u.startswith(origin + "/") and "token=" in u for u in opened.rec.requests), opened.rec.requests
        assert any("/tile/b/0/0" in u for u in opened.rec.requests)


def test_per_call_table_says_nonblocking_receives_count_posted_buffers(opened: Opened) -> None:
    """halo.c receives with MPI_Irecv: the per-call table says its bytes are the buffers posted."""
    note = opened.page.locator("#per-call-note")
    assert note.is_visible() and note.inner_text().startswith("MPI_Irecv: bytes of the buffers posted")


def test_timeline_canvas_is_drawn(opened: Opened, artifacts: Path) -> None:
    coloured, total = opened.page.evaluate("""() => {
        const c = mpiscope.timeline.canvas, d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
        let n = 0;
        for (let i = 0; i < d.length; i += 4) {
          const hi = Math.max(d[i], d[i + 1], d[i + 2]), lo = Math.min(d[i], d[i + 1], d[i + 2]);
          if (hi - lo > 60) n++;                       // a family's colour, not white or grey
        }
        return [n, c.width * c.height];
    }""")
    opened.shot(artifacts, "timeline", "#sec-timeline")
    assert coloured > 0.05 * total, f"{coloured} coloured pixels of {total}"


def test_few_events_show_single_states(opened: Opened, artifacts: Path) -> None:
    ev = opened.trace.events().select("rank", "call", "t_enter_ns", "t_leave_ns").sort("t_enter_ns").collect()
    t0 = opened.rel(ev["t_enter_ns"].to_numpy())
    t1 = opened.rel(ev["t_leave_ns"].fill_null(np.iinfo(np.int64).max // 2).to_numpy())
    mid = len(t0) // 2
    a, b = float(t0[mid]), float(t0[min(len(t0) - 1, mid + 150)])
    inside = (t0 < b) & (t1 > a)
    assert 0 < inside.sum() < 1000
    view = opened.zoom(a, b)
    assert view["mode"] == "events", view
    assert view["states"] == int(inside.sum())
    # the longest call of the window is painted in its family's colour (most of its pixels: message
    # lines and collective marks cross it)
    k = int(np.argmax(np.where(inside, np.minimum(t1, b) - np.maximum(t0, a), -1)))
    lo, hi = float(max(t0[k], a)), float(min(t1[k], b))
    pixels, want = opened.page.evaluate("""([ts, rank, call]) => {
        const tl = mpiscope.timeline, c = tl.canvas, box = c.getBoundingClientRect(), dpr = c.width / box.width;
        const y = Math.round((tl.yOf(rank) - box.top) * dpr);
        const ctx = c.getContext('2d'), d = mpiscope.data, fam = d.call_family[d.calls.indexOf(call)];
        const hex = (p) => '#' + [p[0], p[1], p[2]].map((v) => v.toString(16).padStart(2, '0')).join('').toUpperCase();
        return [ts.map((t) => hex(ctx.getImageData(Math.round((tl.xOf(t) - box.left) * dpr), y, 1, 1).data)),
                MS.FAMILY_COLORS[fam].toUpperCase()];
    }""", [[lo + f * (hi - lo) for f in np.linspace(0.1, 0.9, 21)], int(ev["rank"][k]), str(ev["call"][k])])
    opened.shot(artifacts, "single-states", "#sec-timeline")
    assert pixels.count(want) > len(pixels) / 2, (want, pixels)


def _segments(opened: Opened, m: pl.DataFrame) -> np.ndarray:
    xs = opened.page.evaluate("ts => ts.map(t => mpiscope.timeline.xOf(t))",
                              [*opened.rel(m["t_send_enter_ns"].to_numpy()).tolist(),
                               *opened.rel(m["t_recv_leave_ns"].to_numpy()).tolist()])
    ys = opened.page.evaluate("rs => rs.map(r => mpiscope.timeline.yOf(r))", [*m["src"].to_list(), *m["dst"].to_list()])
    n = m.height
    return np.array([xs[:n], ys[:n], xs[n:], ys[n:]], dtype=float).T


def _distance(p: np.ndarray, seg: np.ndarray) -> np.ndarray:
    a, b = seg[:, 0:2], seg[:, 2:4]
    d = b - a
    u = np.clip(((p - a) * d).sum(1) / np.maximum((d * d).sum(1), 1e-9), 0, 1)
    return np.asarray(np.hypot(*(a + u[:, None] * d - p).T))


def test_hover_message_shows_its_details(opened: Opened, artifacts: Path) -> None:
    msgs = opened.trace.messages().filter(pl.col("t_recv_leave_ns").is_not_null()).collect()
    dur = (msgs["t_recv_leave_ns"] - msgs["t_send_enter_ns"]).to_numpy()
    for j in np.argsort(-dur)[:40]:            # the longest messages first: their lines are long
        m = msgs.row(int(j), named=True)
        ts, tr = float(opened.rel(m["t_send_enter_ns"])), float(opened.rel(m["t_recv_leave_ns"]))
        pad = 0.15 * (tr - ts)
        view = opened.zoom(ts - pad, tr + pad)
        assert view["mode"] == "events", view
        a, b = view["t_start"], view["t_end"]
        others = msgs.filter((pl.col("t_send_enter_ns") < b + opened.meta["t0_ns"]) &
                             (pl.col("t_recv_leave_ns") > a + opened.meta["t0_ns"]))
        seg = _segments(opened, others)
        mine = _segments(opened, pl.DataFrame([m]).select(others.columns))[0]
        # lines near the point must be 8 px away, or messages that read the same (halo sends two
        # messages per pair at once, whose lines coincide)
        same = ((others["src"] == m["src"]) & (others["dst"] == m["dst"]) & (others["bytes"] == m["bytes"])).to_numpy()
        for f in np.linspace(0.15, 0.85, 15):
            p = mine[0:2] + f * (mine[2:4] - mine[0:2])
            if _distance(p, seg[~same]).min(initial=1e9) >= 8:
                break
        else:
            continue
        opened.page.mouse.move(float(p[0]), float(p[1]))
        opened.page.wait_for_selector("#detail[data-kind=message]")
        d = opened.page.evaluate("({...document.getElementById('detail').dataset})")
        text = opened.page.inner_text("#detail")
        opened.shot(artifacts, "hover-message", "#sec-timeline")
        assert (int(d["src"]), int(d["dst"]), int(float(d["bytes"]))) == (m["src"], m["dst"], m["bytes"])
        assert f"rank {m['src']} → rank {m['dst']}" in text
        assert f"{m['bytes']:,} B" in text
        return
    pytest.fail("no message line stood 8 px clear of other messages")


def _expected_density(opened: Opened) -> np.ndarray:
    """Level-0 bins of bytes per rank from the tables (protocol: sends at their entry, receives at
    their completion, a collective's sent and received bytes at its entry)."""
    ranks, span = int(opened.meta["ranks"]), float(opened.meta["span_ns"])
    w = span / BINS
    out = np.zeros((ranks, BINS))

    def add(rank: np.ndarray, t: np.ndarray, nbytes: np.ndarray) -> None:
        rel = opened.rel(t)
        keep = (rel >= 0) & (rel < span) | (rel == span)
        np.add.at(out, (rank[keep], np.minimum((rel[keep] / w).astype(np.int64), BINS - 1)), nbytes[keep])

    m = opened.trace.messages().collect()
    add(m["src"].to_numpy(), m["t_send_enter_ns"].to_numpy(), m["bytes"].to_numpy().astype(float))
    done = m.filter(pl.col("t_recv_leave_ns").is_not_null())
    add(done["dst"].to_numpy(), done["t_recv_leave_ns"].to_numpy(), done["bytes"].to_numpy().astype(float))
    c = opened.trace.events().filter(pl.col("coll_id").is_not_null()).collect()
    moved = c["bytes"].fill_null(0) + c["recv_bytes"].fill_null(0)
    add(c["rank"].to_numpy(), c["t_enter_ns"].to_numpy(), moved.to_numpy().astype(float))
    return out


def test_density_darkest_bin_is_where_the_trace_says(opened: Opened, artifacts: Path) -> None:
    want = _expected_density(opened)
    got = opened.page.evaluate("mpiscope.density.darkest()")
    opened.shot(artifacts, "density", "#sec-overview")
    assert got["metric"] == "bytes"
    assert got["value"] == pytest.approx(want.max(), rel=1e-6)
    assert want[got["rank"], got["bin"]] == pytest.approx(want.max(), rel=1e-6), \
        f"page: rank {got['rank']} bin {got['bin']}; tables: {np.argwhere(want == want.max()).tolist()}"
    span = float(opened.meta["span_ns"])
    assert got["t_start"] == pytest.approx(got["bin"] * span / BINS)
    assert got["t_end"] == pytest.approx((got["bin"] + 1) * span / BINS)


def test_click_collective_shows_every_rank(opened: Opened, artifacts: Path) -> None:
    colls = opened.trace.collectives().filter(pl.col("ranks") == opened.meta["ranks"]).sort("t_first_enter_ns").collect()
    c = colls.row(colls.height // 2, named=True)
    ev = opened.trace.events().filter(pl.col("coll_id") == c["coll_id"]).sort("rank").collect()
    a, b = opened.rel(c["t_first_enter_ns"]), opened.rel(c["t_last_leave_ns"])
    view = opened.zoom(a - 0.2 * (b - a), b + 0.2 * (b - a))
    assert view["mode"] == "events", view
    msgs = opened.trace.messages().filter(pl.col("t_recv_leave_ns").is_not_null()).filter(
        (pl.col("t_send_enter_ns") < view["t_end"] + opened.meta["t0_ns"]) &
        (pl.col("t_recv_leave_ns") > view["t_start"] + opened.meta["t0_ns"])).collect()
    seg = _segments(opened, msgs)
    for e in ev.iter_rows(named=True):     # a point of a member's call 8 px clear of every message line
        t0, t1 = float(opened.rel(e["t_enter_ns"])), float(opened.rel(e["t_leave_ns"]))
        y = opened.page.evaluate("r => mpiscope.timeline.yOf(r)", e["rank"])
        pts = [np.array([opened.page.evaluate("t => mpiscope.timeline.xOf(t)", t0 + f * (t1 - t0)), y])
               for f in np.linspace(0.1, 0.9, 9)]
        clear = [p for p in pts if _distance(p, seg).min(initial=1e9) >= 8]
        if clear:
            break
    else:
        pytest.fail("no collective call stood 8 px clear of the message lines")
    opened.page.mouse.click(float(clear[0][0]), float(clear[0][1]))
    opened.page.wait_for_selector("#detail[data-kind=collective]")
    d = opened.page.evaluate("({...document.getElementById('detail').dataset})")
    rows = opened.page.eval_on_selector_all("#detail tbody tr", "trs => trs.map(tr => tr.cells[0].textContent)")
    opened.shot(artifacts, "collective", "#sec-timeline")
    assert int(float(d["coll"])) == c["coll_id"]
    assert int(d["members"]) == ev.height == c["ranks"]
    assert [int(r) for r in rows] == ev["rank"].to_list()


def test_time_axis_labels_do_not_overlap_deep_in_the_run(opened: Opened) -> None:
    """At microsecond zoom seconds into a run a label is long ("3 600 004.25 µs"): the ticks are
    spaced wide enough for the widest of them. The axis of windows at 0.3 s-1 h into a run (this
    trace is shorter: the window is set, not drawn)."""
    for start, width in ((3e8, 1e3), (3.6e9, 2e3), (3.6e9, 5e4), (3.6e12, 1e4), (3.6e12, 1e7)):
        spacing, widest, labels = opened.page.evaluate("""([a, w]) => {
            const tl = mpiscope.timeline.object, vs = tl.vs, ve = tl.ve;
            tl.vs = a; tl.ve = a + w;
            const step = tl.tickStep(), ts = tl.ticks();
            tl.ctx.save(); tl.ctx.font = tl.font(11);
            const widest = Math.max(...ts.map((t) => tl.ctx.measureText(MS.fmtTime(t, step)).width));
            tl.ctx.restore();
            tl.vs = vs; tl.ve = ve;
            return [step / ((a + w - a) / tl.g.cols), widest, ts.map((t) => MS.fmtTime(t, step))];
        }""", [start, width])
        assert len(labels) >= 2 and spacing > widest, (start, width, spacing, widest, labels)


def test_long_call_sites_keep_their_line(opened: Opened) -> None:
    """A call-site cell cut at its end would lose the line that tells a function's call sites apart."""
    got = opened.page.evaluate("""() => [
        MS.shortSite("CommSBN(Domain&, int, double& (Domain::**)(int)) (lulesh-comm.cc:911)"),
        MS.shortSite("exchange_halo (hpcg_like.c:33)"), MS.shortSite(null)]""")
    assert got == ["CommSBN(…) (lulesh-comm.cc:911)", "exchange_halo (hpcg_like.c:33)", "–"]
