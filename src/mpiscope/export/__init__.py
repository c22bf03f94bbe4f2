"""Exports of a merged trace to the formats other tools open: OTF2 (Vampir, Scalasca,
Pipit), Perfetto protobuf and Chrome JSON (ui.perfetto.dev), CSV (spreadsheets).

Each exporter writes into a staging path beside the output (`staged_output`), which is
renamed onto the output only when the export finished: an interrupted or failed export
(Ctrl-C, full disk) leaves no half-written output, and an existing output is replaced only
with `force`.
"""

from __future__ import annotations

import errno
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mpiscope.errors import UsageError

FORMATS = ("otf2", "perfetto", "chrome-json", "csv")
DIRECTORY_FORMATS = ("otf2", "csv")  # the others write one file
Progress = Callable[[int], None]


@dataclass(frozen=True)
class ExportResult:
    format: str
    path: Path
    events: int  # calls exported
    records: int  # records written (OTF2 events, Perfetto packets, CSV rows)
    seconds: float
    files: list[str] = field(default_factory=list)

    def to_json(self, run_id: str) -> dict[str, Any]:
        return {
            "schema": "mpiscope.export/1",
            "run_id": run_id,
            "format": self.format,
            "path": str(self.path),
            "events": self.events,
            "records": self.records,
            "seconds": self.seconds,
            "files": self.files,
        }


def check_output(out: Path, force: bool, is_dir: bool) -> None:
    """Refuse before any work: an existing output without --force, an unwritable place."""
    if out.exists() or out.is_symlink():
        if not force:
            raise UsageError(f"{out} already exists; choose another -o or add --force to replace it")
        if is_dir != out.is_dir():
            kind = "a directory" if out.is_dir() else "a file"
            raise UsageError(f"{out} is {kind}, which this format does not write; choose another -o")
    parent = out.absolute().parent
    if not parent.is_dir():
        raise UsageError(f"the directory {parent} does not exist; create it or choose another -o")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise UsageError(f"cannot write in {parent} (permission denied); choose a writable -o")


# Bytes an exported call takes at least, measured on recorded HPCG- and IMB-like traces and a
# generated halo of 6.7 M calls (OTF2 32-35, Perfetto 83-100, CSV 105-140): a trace of tens of
# millions of calls is refused before it fills the disk rather than after (the output is staged,
# so a full disk loses nothing, but takes every free byte until then).
MIN_BYTES_PER_CALL = {"otf2": 30, "perfetto": 80, "chrome-json": 80, "csv": 100}


def check_room(out: Path, fmt: str, calls: int) -> None:
    """Refuse an export that cannot fit the free space where it is written."""
    need = calls * MIN_BYTES_PER_CALL[fmt]
    parent = out.absolute().parent
    try:
        usage = shutil.disk_usage(parent)
    except OSError:
        return  # the export's own write says what is wrong with the place
    free = usage.free
    if usage.total and need > free:  # a pseudo file system (/proc) has no size: its write fails instead
        raise UsageError(f"the {fmt} export of {calls:,} calls takes at least {need / 2**30:.1f} GiB "
                         f"(~{MIN_BYTES_PER_CALL[fmt]} bytes a call) and {parent} has {free / 2**30:.1f} GiB free; "
                         f"free space or choose another -o")


def _os_error(out: Path, e: OSError) -> UsageError:
    if e.errno in (errno.ENOSPC, errno.EDQUOT):
        return UsageError(
            f"cannot write {out} (the disk is full); nothing was written, free space or choose another -o"
        )
    return UsageError(f"cannot write {out} ({e.strerror or e}); nothing was written, choose a writable -o")


@contextmanager
def staged_output(out: Path, force: bool, is_dir: bool) -> Iterator[Path]:
    """Yield a staging path (a file, or a directory to fill) beside `out`; on success it
    replaces `out`, on any failure it is removed and `out` is left as it was."""
    check_output(out, force, is_dir)
    parent = out.absolute().parent
    try:
        if is_dir:
            stage = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".partial", dir=parent))
        else:
            fd, name = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".partial", dir=parent)
            os.close(fd)
            stage = Path(name)
    except OSError as e:
        raise _os_error(out, e) from e
    try:
        yield stage
        _commit(stage, out, is_dir)
    except OSError as e:
        _discard(stage)
        raise _os_error(out, e) from e
    except BaseException:
        _discard(stage)
        raise


def _commit(stage: Path, out: Path, is_dir: bool) -> None:
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(stage, (0o777 if is_dir else 0o666) & ~umask)  # mkstemp/mkdtemp make them private
    if is_dir and out.exists():
        # a directory cannot be renamed over a non-empty one: move the old one aside first
        old = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".old", dir=out.absolute().parent))
        os.replace(out, old / out.name)
        os.replace(stage, out)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(stage, out)


def _discard(stage: Path) -> None:
    if stage.is_dir():
        shutil.rmtree(stage, ignore_errors=True)
    else:
        stage.unlink(missing_ok=True)
