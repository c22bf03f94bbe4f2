"""Browser fixtures: Debian's chromium (/usr/bin/chromium, or $MPISCOPE_CHROMIUM) driven by
Playwright for Python through `executable_path`; no browser is ever downloaded. A missing
chromium or Playwright fails under CI=true (tests/conftest.py `require`) and skips elsewhere.

`browser_page` opens an isolated browser context per test (one chromium per session, on a fresh
profile) and records every request, console error and uncaught page error; `artifacts` is where screenshots are kept ($MPISCOPE_TEST_ARTIFACTS,
default test-artifacts/ at the repository root).
"""

from __future__ import annotations

import importlib.util
import os
import queue
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import MPICH, ROOT, Mpi, mpiscope_cli, require

from mpiscope.trace import Trace, open_trace

CHROMIUM = Path(os.environ.get("MPISCOPE_CHROMIUM", "/usr/bin/chromium"))
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
VIEWPORT = {"width": 1440, "height": 1000}
URL_RE = re.compile(r"http://127\.0\.0\.1:\d+/\S*token=[\w\-.~%]+")


@dataclass
class Recorded:
    """A page and what it did: every request URL, console errors, uncaught errors."""
    page: Any
    url: str = ""
    requests: list[str] = field(default_factory=list)
    console_errors: list[str] = field(default_factory=list)

    def open(self, url: str) -> dict[str, Any]:
        """Go to `url` and wait until the page says it is ready (first paint, every section)."""
        self.url = url
        self.page.goto(url, timeout=60_000)
        self.page.wait_for_function("() => window.mpiscope && window.mpiscope.readyState !== 'loading'", timeout=60_000)
        state = self.page.evaluate("window.mpiscope.readyState")
        assert state == "ready", f"page did not start: {state}; console: {self.console_errors}"
        return dict(self.page.evaluate("({meta: mpiscope.data.meta, pyramid: mpiscope.data.pyramid})"))


@pytest.fixture(scope="session")
def chromium() -> Iterator[Any]:
    """One headless chromium for the session, started by Playwright on a fresh temporary profile
    (its user-data dir); each test gets its own isolated context in it."""
    require(importlib.util.find_spec("playwright") is not None, "Playwright for Python",
            "pip install -e '.[test]' (no browser download: the tests use Debian's chromium)")
    require(CHROMIUM.is_file(), f"Debian's chromium ({CHROMIUM})", "apt-get install chromium (make setup as root)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture
def browser_page(chromium: Any) -> Iterator[Recorded]:
    ctx = chromium.new_context(viewport=VIEWPORT)
    page = ctx.new_page()
    page.set_default_timeout(30_000)
    rec = Recorded(page)
    page.on("request", lambda r: rec.requests.append(r.url))
    page.on("console", lambda m: rec.console_errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: rec.console_errors.append(f"uncaught: {e}"))
    # Only the page's own file and the loopback server may answer; anything else is refused.
    ctx.route(re.compile(r"^(?!http://127\.0\.0\.1[:/]).*"),
              lambda route: route.continue_() if route.request.url == rec.url else route.abort())
    try:
        yield rec
    finally:
        ctx.close()


@pytest.fixture(scope="session")
def artifacts() -> Path:
    d = Path(os.environ.get("MPISCOPE_TEST_ARTIFACTS") or ROOT / "test-artifacts")
    d.mkdir(parents=True, exist_ok=True)
    return d


@pytest.fixture(scope="module")
def halo(tmp_path_factory: pytest.TempPathFactory, example: Callable[[str, Mpi], Path]) -> Trace:
    """4-rank halo exchange (20 iterations, 128 doubles): Irecv/Isend/Waitall and an Allreduce each."""
    out = tmp_path_factory.mktemp("browser") / "halo"
    done = mpiscope_cli(["run", "--out", str(out), "--", *MPICH.launch(4), str(example("halo", MPICH)), "20", "128"],
                        env=MPICH.environ())
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-3000:]
    return open_trace(out)


@pytest.fixture(scope="module")
def halo_report(halo: Trace) -> Path:
    out = halo.path / "report.html"
    done = mpiscope_cli(["report", str(halo.path), "-o", str(out), "--force"])
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-3000:]
    return out


@pytest.fixture(scope="module")
def halo_view(halo: Trace) -> Iterator[str]:
    """`mpiscope view` on the halo trace: the URL it prints (with its token)."""
    proc = subprocess.Popen([sys.executable, "-m", "mpiscope", "view", str(halo.path), "--no-browser"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=dict(os.environ))
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(ln) for ln in proc.stdout or []], daemon=True).start()
    seen: list[str] = []
    url = None
    while url is None:
        try:
            line = lines.get(timeout=120)
        except queue.Empty:
            break
        seen.append(line)
        m = URL_RE.search(line)
        url = m.group(0) if m else None
        if proc.poll() is not None and lines.empty():
            break
    try:
        assert url, f"mpiscope view printed no URL: {''.join(seen)[-2000:]}"
        yield url
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
