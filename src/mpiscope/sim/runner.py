"""Runs a simulator process with a progress bar, and stops it cleanly on Ctrl-C.

The simulator runs in its own session, so the terminal's Ctrl-C reaches only
mpiscope, which then terminates the simulator it started (SIGTERM, then
SIGKILL) before the interrupt propagates: no simulator keeps running, and no
result file is half written (results are written only after a run ends).
"""

from __future__ import annotations

import logging
import os
import queue
import signal
import subprocess
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from mpiscope import output

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Finished:
    returncode: int
    stdout: str
    stderr_tail: list[str]       # last lines of stderr, progress lines removed
    wall_s: float
    peak_rss_bytes: int          # largest resident set of the simulator (and what it waited for)


def run_simulator(cmd: list[str], description: str, total: float | None = None,
                  on_line: Callable[[str, Any], bool] | None = None, cwd: Path | None = None) -> Finished:
    """Run `cmd`; `on_line(line, bar)` may consume a stderr line (e.g. a progress report)."""
    log.info("running %s", " ".join(cmd))
    tail: deque[str] = deque(maxlen=40)
    lines: queue.Queue[str | None] = queue.Queue()
    start = time.perf_counter()
    with tempfile.TemporaryFile(mode="w+") as out, output.progress(description, total=total) as bar:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.PIPE, text=True, cwd=cwd,
                                start_new_session=True)
        threading.Thread(target=_pump, args=(proc.stderr, lines), daemon=True).start()
        try:
            # The main thread never blocks in a read: Ctrl-C may be delivered to another thread
            # (numpy's), and only a main thread that runs Python code turns it into KeyboardInterrupt.
            while (line := _next_line(lines)) is not None:
                if line and (on_line is None or not on_line(line, bar)):
                    tail.append(line.rstrip("\n"))
            # wait4, not wait: it also gives the simulator's peak memory (Linux: in KiB).
            _, status, usage = os.wait4(proc.pid, 0)
            proc.returncode = os.waitstatus_to_exitcode(status)
        except BaseException:
            _stop(proc)
            raise
        out.seek(0)
        return Finished(proc.returncode, out.read(), list(tail), time.perf_counter() - start,
                        usage.ru_maxrss * 1024)


def _pump(stream: IO[str] | None, lines: queue.Queue[str | None]) -> None:
    if stream is not None:
        for line in stream:
            lines.put(line)
    lines.put(None)


def _next_line(lines: queue.Queue[str | None]) -> str | None:
    """The next stderr line, '' after a quiet 0.2 s, None at the end of the stream."""
    try:
        return lines.get(timeout=0.2)
    except queue.Empty:
        return ""


def _stop(proc: subprocess.Popen[str]) -> None:
    """Terminate the simulator's whole process group (smpirun starts children)."""
    for sig, wait_s in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait_s)
            return
        except subprocess.TimeoutExpired:
            continue


def first_error(tail: list[str]) -> str:
    """The line of a simulator's stderr that says what went wrong."""
    for key in ("Deadlock", "CRITICAL", "error", "Error", "Abort", "abort"):
        for line in tail:
            if key in line:
                return line.strip()
    return tail[-1].strip() if tail else "no message"
