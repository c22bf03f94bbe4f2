"""The processes a benchmarked command starts, for the benchmarks that measure their memory."""

from __future__ import annotations

import os


def children(pid: int) -> list[int]:
    """The direct children of a live process (empty if it is gone)."""
    kids: list[int] = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as f:
                kids += [int(k) for k in f.read().split()]
    except OSError:  # gone, or a kernel without CONFIG_PROC_CHILDREN (then the root alone)
        pass
    return kids
