"""The only place (with cli/) that prints: tables, JSON, warnings, progress."""

from __future__ import annotations

import json
import math
import os
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from collections.abc import Callable
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from mpiscope.errors import UsageError
from mpiscope.units import scaled

console = Console()
err_console = Console(stderr=True)
for _c in (console, err_console):
    # Off a terminal rich assumes 80 columns, which folds the call-site columns of the tables
    # into unreadable stubs in a log; take the width a wide terminal would give (COLUMNS wins).
    if not _c.is_terminal and "COLUMNS" not in os.environ:
        _c.width = 150
_quiet = False


def set_quiet(quiet: bool) -> None:
    global _quiet
    _quiet = quiet


def warn(message: str) -> None:
    """Something the user must see (a truncated trace, a clamped clock)."""
    err_console.print(f"[yellow]warning:[/yellow] {message}", highlight=False)


def error(message: str) -> None:
    """A failure that does not end the command (the CLI's own errors end it: cli.main)."""
    err_console.print(f"error: {message}", highlight=False, markup=False, soft_wrap=True)


def info(message: str) -> None:
    if not _quiet:
        err_console.print(message, highlight=False)


def _clean(value: Any) -> Any:
    """JSON has no NaN/inf: they become null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    if hasattr(value, "item"):  # numpy scalars
        return _clean(value.item())
    return value


def write_atomic(path: Path, data: bytes) -> None:
    """Write through a temporary file and a rename: a reader never sees half a file."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        # mkstemp makes the file private (0600); results get the usual mode
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    except OSError as e:
        raise UsageError(f"cannot write {path} ({e.strerror}); choose a writable path with free space") from e


def show(render: Callable[[], None], payload: dict[str, Any], json_path: str | None) -> None:
    """A verb's tables (not with --json -) and its JSON. A JSON file is written first: a reader of the
    tables that stops early (`| head`) closed the pipe before it was, and it was lost."""
    if json_path not in (None, "-"):
        emit_json(payload, json_path)
    if json_path != "-":
        render()
    else:
        emit_json(payload, json_path)


def emit_json(payload: dict[str, Any], json_path: str | None) -> None:
    """`--json -` prints to stdout; `--json FILE` writes FILE atomically."""
    if json_path is None:
        return
    text = json.dumps(_clean(payload), indent=2) + "\n"
    if json_path == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
    else:
        write_atomic(Path(json_path), text.encode())


def table(title: str, columns: list[str], rows: list[list[Any]], justify_right_from: int = 1) -> None:
    if _quiet:
        return
    t = Table(title=title, title_justify="left", header_style="bold")
    for i, c in enumerate(columns):
        t.add_column(c, justify="right" if i >= justify_right_from else "left")
    for row in rows:
        t.add_row(*[str(v) for v in row])
    console.print(t)


def text(message: str) -> None:
    if not _quiet:
        console.print(message, highlight=False, soft_wrap=True)  # a line piped to a log stays one line


def preformatted(block: str) -> None:
    """Fixed-width text (e.g. an IMB-style table) exactly as given: no markup, no wrapping."""
    if not _quiet:
        sys.stdout.write(block if block.endswith("\n") else block + "\n")
        sys.stdout.flush()


@contextmanager
def progress(description: str, total: float | None = None) -> Iterator[Any]:
    """A progress bar on stderr; silent off a terminal or with --quiet."""
    show = not _quiet and err_console.is_terminal
    with Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.percentage:>3.0f}%"),
                  TimeElapsedColumn(), console=err_console, disable=not show, transient=True) as p:
        task = p.add_task(description, total=total)

        class Handle:
            def advance(self, amount: float = 1.0) -> None:
                p.advance(task, amount)

            def update(self, **fields: Any) -> None:
                p.update(task, **fields)

        yield Handle()


def fmt_ns(ns: float) -> str:
    """Human time from nanoseconds."""
    if ns is None or not math.isfinite(ns):
        return "-"
    return scaled(ns, (("s", 1e9), ("ms", 1e6), ("µs", 1e3)), "ns")


def fmt_bytes(n: float) -> str:
    if n is None or not math.isfinite(n):
        return "-"
    return scaled(n, (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)), "B")
