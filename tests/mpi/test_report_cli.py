"""`mpiscope report` and `mpiscope view` from the command line, on recorded examples."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import polars as pl
import pytest
from tests.conftest import MPICH, mpiscope_cli

from mpiscope.errors import UsageError
from mpiscope.report import frame
from mpiscope.report.cache import cache_dir, is_current
from mpiscope.report.server import bind
from mpiscope.trace import open_trace
from mpiscope.trace.merge import merge_trace
from mpiscope.trace.synthetic import halo_trace


def one_line_error(done: subprocess.CompletedProcess[str], code: int, *words: str) -> None:
    assert done.returncode == code, done.stderr
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    for w in words:
        assert w in lines[0], lines[0]


def embedded(page: str) -> dict:
    m = re.search(r'<script type="application/json" id="mpiscope-data">(.*?)</script>', page, re.DOTALL)
    assert m, "no payload in the page"
    return json.loads(m.group(1).replace("<\\/", "</"))


@pytest.fixture(scope="module")
def ring(tmp_path_factory: pytest.TempPathFactory, example) -> Path:
    """One recorded ring (5 rounds of 100 bytes on 4 ranks) for all the tests of this module."""
    out = tmp_path_factory.mktemp("ring") / "trace"
    done = mpiscope_cli(
        ["run", "--out", str(out), "--", *MPICH.launch(4), str(example("ring")), "5", "100"],
        env=MPICH.environ(),
    )
    assert done.returncode == 0, done.stderr
    return out


@pytest.mark.mpi(ranks=4)
def test_report_is_one_self_contained_file(ring: Path, tmp_path: Path) -> None:
    out = tmp_path / "ring.html"
    done = mpiscope_cli(["report", str(ring), "-o", str(out), "--json", "-"])
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    summary = json.loads(done.stdout)
    assert summary["schema"] == "mpiscope.report/1" and summary["complete"] is True
    page = out.read_text()
    assert summary["html_bytes"] == len(page.encode())
    assert not re.search(r"""(src|href)\s*=\s*["']?\s*(https?:)?//""", page, re.IGNORECASE)
    assert "http://" not in page.split('id="mpiscope-data"')[0]  # nothing before the data asks the network
    data = embedded(page)
    assert data["schema"] == "mpiscope.report/1" and data["meta"]["mode"] == "report"
    assert data["meta"]["ranks"] == 4 and data["meta"]["messages"] == 20
    # the message table of the event tile is messages.parquet, in relative time
    k = data["pyramid"]["event_level"]
    tables = [frame.decode(v).tables for key, v in data["tiles"].items() if key.startswith(f"e/{k}/")]
    got = sorted(
        (int(s), int(d), float(b))
        for t in tables
        for s, d, b in zip(t["messages"]["src"], t["messages"]["dst"], t["messages"]["bytes"])
    )
    want = open_trace(ring, merge=False).messages().collect()
    assert sorted(set(got)) == sorted(set(zip(want["src"], want["dst"], want["bytes"].cast(pl.Float64))))
    t0 = data["meta"]["t0_ns"]
    first = min(t["messages"]["ts"].min() for t in tables if t["messages"]["ts"].size)
    assert first == float(want["t_send_enter_ns"].min() - t0)
    # statistics: the full matrix (src row, dst column) and the size histogram
    m = data["stats"]["matrix"]
    assert m["ranks"] == 4 and all(m["bytes"][r][(r + 1) % 4] == 500 for r in range(4))
    assert data["stats"]["size_hist"] == [{"lo_bytes": 64, "hi_bytes": 128, "count": 20, "bytes": 2000}]
    assert sum(data["stats"]["per_family"][0]) == data["summary"]["per_rank"][0]["mpi_time_ns"]
    # an existing page is kept without --force, replaced with it
    again = mpiscope_cli(["report", str(ring), "-o", str(out)])
    one_line_error(again, 2, str(out), "--force")
    assert out.read_text() == page
    assert mpiscope_cli(["report", str(ring), "-o", str(out), "--force"]).returncode == 0


@pytest.mark.mpi(ranks=4)
def test_report_bad_input(ring: Path, tmp_path: Path) -> None:
    one_line_error(mpiscope_cli(["report", str(tmp_path)]), 3, "not an mpiscope trace")
    raw = tmp_path / "raw-only"  # as `mpiscope run --no-merge` leaves it (written without MPI)
    halo_trace(raw, 2, 600)
    one_line_error(mpiscope_cli(["report", str(raw)]), 2, "mpiscope merge")
    one_line_error(mpiscope_cli(["view", str(raw), "--no-browser"]), 2, "mpiscope merge")
    assert not (raw / ".mpiscope").exists() and not (raw / "report.html").exists()
    two = tmp_path / "two"
    halo_trace(two, 2, 600)
    merge_trace(two)
    out = tmp_path / "cmp.html"
    one_line_error(mpiscope_cli(["report", str(ring), "-o", str(out), "--baseline", str(two)]), 2, "2 ranks", "4")
    assert not out.exists()


@pytest.mark.mpi(ranks=4)
def test_report_with_baseline(ring: Path, tmp_path: Path) -> None:
    out = tmp_path / "cmp.html"
    done = mpiscope_cli(["report", str(ring), "-o", str(out), "--baseline", str(ring)])
    assert done.returncode == 0, done.stderr
    data = embedded(out.read_text())
    base = data["baseline"]
    assert base["meta"]["ranks"] == 4 and len(base["compute_ns"]) == 4
    assert base["compute_ns"] == [r["outside_mpi_ns"] for r in data["summary"]["per_rank"]]
    density = frame.decode(base["density"])
    assert density.attrs["k"] == 0 and density.tables["bins"]["bytes"].size == 4 * 1024


class View:
    """`mpiscope view` in a subprocess; its URL from the first line it prints."""

    def __init__(self, trace: Path, port: int = 0) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "mpiscope", "view", str(trace), "--no-browser", "--port", str(port)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=dict(os.environ),
        )
        line = self.proc.stdout.readline() if self.proc.stdout else ""
        m = re.search(r"(http://127\.0\.0\.1:(\d+))/\?token=(\S+)", line)
        assert m, (line, self.proc.stderr.read() if self.proc.stderr else "")
        self.base, self.port, self.token = m[1], int(m[2]), m[3]

    def get(self, path: str, token: str | None = None) -> tuple[int, bytes, str]:
        sep = "&" if "?" in path else "?"
        url = f"{self.base}{path}" + ("" if token == "" else f"{sep}token={token or self.token}")
        try:
            with urllib.request.urlopen(url, timeout=30) as r:
                return r.status, r.read(), r.headers.get("Content-Type", "")
        except urllib.error.HTTPError as e:
            return e.code, e.read(), ""

    def stop(self) -> tuple[int, str]:
        self.proc.send_signal(signal.SIGINT)
        _, err = self.proc.communicate(timeout=30)
        return self.proc.returncode, err


@pytest.mark.mpi(ranks=4)
def test_view_serves_page_data_and_tiles_with_its_token(ring: Path) -> None:
    view = View(ring)
    try:
        assert view.get("/", token="")[0] == 403
        assert view.get("/data.json", token="wrong")[0] == 403
        assert view.get("/tile/b/0/0", token="")[0] == 403
        status, page, ctype = view.get("/")
        assert status == 200 and ctype.startswith("text/html") and b"mpiscope-data" in page
        status, body, _ = view.get("/data.json")
        data = json.loads(body)
        assert status == 200 and data["meta"]["mode"] == "view" and data["meta"]["ranks"] == 4
        status, blob, ctype = view.get("/tile/b/0/0")
        assert status == 200 and ctype == "application/octet-stream"
        assert frame.decode(blob).tables["bins"]["mpi"].size == 4 * 1024
        k = data["pyramid"]["event_level"]
        status, blob, _ = view.get(f"/tile/e/{k}/0")
        tile = frame.decode(blob)
        assert status == 200 and tile.attrs["truncated"] is False
        assert tile.tables["messages"]["src"].size == 20 and tile.tables["events"]["rank"].size > 40
        assert view.get(f"/tile/e/{k}/{2**k}")[0] == 404
        assert view.get("/tile/b/40/0")[0] == 404
        assert view.get("/other")[0] == 404
        # a second server on the same port: one sentence, nothing else
        one_line_error(
            mpiscope_cli(["view", str(ring), "--no-browser", "--port", str(view.port)]),
            2,
            str(view.port),
            "in use",
        )
    finally:
        code, err = view.stop()
    assert code == 0 and "Traceback" not in err and err.strip().splitlines()[-1] == "mpiscope view: stopped"
    trace = open_trace(ring, merge=False)
    assert is_current(trace) and (cache_dir(trace) / "bins.bin").is_file()
    os.utime(ring / "events.parquet", ns=(time.time_ns(), time.time_ns()))
    assert not is_current(trace)  # new tables: the next view indexes again


def test_view_port_in_use() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        with pytest.raises(UsageError, match=f"port {port} on 127.0.0.1 is in use"):
            bind(port)
