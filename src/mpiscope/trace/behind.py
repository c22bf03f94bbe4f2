"""Writes of a merge in pieces that run beside the work on the next piece (issue 22).

One process that merges its pieces one after another builds a piece with the
kernels and NumPy on one core while the disk waits, then encodes it (Arrow IPC,
Parquet) while the kernels wait. Handed to one writing thread, a piece's writes
overlap the next piece's reading and building. At most one write waits: what
it holds (a piece's sides, its collective shares or its events) is what this
costs in memory.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import suppress
from typing import Any


class Behind:
    """A writing thread that runs one write at a time, in the order they are handed to it."""

    def __init__(self) -> None:
        self._pool: ThreadPoolExecutor | None = None
        self._pending: Future[Any] | None = None

    def run(self, write: Callable[..., Any], *args: Any) -> None:
        """write(*args) on the writing thread, once the write before it is done (whose failure
        is raised here)."""
        self.wait()
        if self._pool is None:
            self._pool = ThreadPoolExecutor(1, thread_name_prefix="mpiscope-write")
        self._pending = self._pool.submit(write, *args)

    def wait(self) -> None:
        """Until every write handed over is done; a failed write's exception is raised here."""
        pending, self._pending = self._pending, None
        if pending is not None:
            pending.result()

    def settle(self) -> None:
        """Until every write is done, its failure dropped: the merge fails for another reason,
        and its clean-up may remove what the write was writing into."""
        with suppress(Exception):
            self.wait()


WRITES = Behind()  # this process's writing thread
