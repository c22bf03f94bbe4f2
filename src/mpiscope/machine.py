"""What this machine has to give (memory the kernel will not take back), and how to ask for it."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pyarrow as pa

from mpiscope.errors import UsageError
from mpiscope.glibc import (
    DEFAULT_MMAP_MAX,
    DEFAULT_TRIM_THRESHOLD,
    GROWN_MMAP_THRESHOLD,
    M_MMAP_MAX,
    M_MMAP_THRESHOLD,
    M_TRIM_THRESHOLD,
    glibc,
)


def available_memory() -> int | None:
    """Bytes a process can take without the kernel killing it (MemAvailable + SwapFree), None
    where /proc/meminfo does not say."""
    try:
        info = dict(line.split(":", 1) for line in Path("/proc/meminfo").read_text().splitlines() if ":" in line)
        return sum(int(info[k].split()[0]) * 1024 for k in ("MemAvailable", "SwapFree"))
    except (OSError, KeyError, ValueError):
        return None


@contextmanager
def small_pages() -> Iterator[None]:
    """NumPy asks for transparent huge pages on large arrays; where the kernel
    then compacts memory on each first touch (defrag=madvise, common on VMs),
    that made the merge's fresh allocations ~6x slower (measured: 0.79 s vs
    0.13 s to copy 192 MB). The merge allocates and touches each array once."""
    multiarray = getattr(np, "_core", getattr(np, "core", None)).multiarray  # type: ignore[union-attr]
    setter = getattr(multiarray, "_set_madvise_hugepage", None)
    if setter is None:
        yield
        return
    previous = setter(False)
    try:
        yield
    finally:
        setter(previous)


def require_memory(what: str, events: int, bytes_per_event: int, path: Path) -> None:
    """Refuse in one sentence a verb that holds every event of a trace in memory where the machine
    cannot, rather than be killed for it."""
    need, have = events * bytes_per_event, available_memory()
    if have is not None and need > have:
        raise UsageError(f"{what} holds all {events:,} events of {path} in memory, about {need / 2**30:.1f} GiB, "
                         f"and {have / 2**30:.1f} GiB is available; run it on a machine with more memory, or record "
                         f"a part of the run (MPI_Pcontrol); mpiscope stats summarises a trace of any size")


# Freed heap kept for the next arrays. More is faster but the merge's Polars and Arrow memory
# (their own allocators) comes on top: 1,000 M records in pieces of one 15.6 M-record rank peaked
# at 3.64 GB with 1 GiB kept (364 s), 4.45 GB with 2 GiB and 4.52 GB with 3 GiB (312 s), over
# the default budget of 4 GiB. A smaller budget keeps less (merge._kept_heap).
KEPT_HEAP_BYTES = 1 << 30


@contextmanager
def reused_heap(kept: int = KEPT_HEAP_BYTES) -> Iterator[None]:
    """glibc maps every array above 32 MiB with mmap and unmaps it when freed, so the next array
    of that size starts over with one page fault per 4 KiB. The merge allocates arrays of the
    same sizes again and again (each piece, in both passes): taken from the heap and kept there
    when freed (up to `kept` bytes), they are reused without faults. Measured on the
    generated halo (bench/merge_scale.py's traces), one process: 100 M records in pieces
    33.5 -> 28.3 s (system time 17.1 -> 8.9 s, peak 3.42 -> 3.76 GB), 30 M 11.6 -> 8.6 s
    (3.1 M -> 1.4 M page faults), 10 M in memory 2.10 -> 1.95 s (peak 2.15 -> 2.41 GB).
    Elsewhere than glibc, nothing changes."""
    libc = glibc()
    if libc is None or not libc.mallopt(M_MMAP_MAX, 0):
        yield
        return
    libc.mallopt(M_TRIM_THRESHOLD, kept)
    try:
        yield
    finally:
        libc.mallopt(M_MMAP_MAX, DEFAULT_MMAP_MAX)
        libc.mallopt(M_TRIM_THRESHOLD, DEFAULT_TRIM_THRESHOLD)
        trim_heap()


def trim_heap() -> None:
    """Give the free memory of glibc's heap (malloc_trim; elsewhere than glibc, nothing) and of
    Arrow's pool back to the kernel now, where the next step allocates mostly through another
    allocator than the step before, which does not take what the other keeps."""
    libc = glibc()
    if libc is not None:
        libc.malloc_trim(0)
    pa.default_memory_pool().release_unused()


# Arrays above this size are mapped on their own where the heap is released (released_heap).
RELEASED_ABOVE = 1 << 20


@contextmanager
def released_heap() -> Iterator[None]:
    """While the context lasts, every array above RELEASED_ABOVE is mapped on its own and given back
    to the kernel when freed. glibc would keep arrays of up to 32 MiB in its heap, where the holes
    they leave between arrays still alive stay resident: a merge in pieces of 3.1 M records, one
    process, 1.25 GiB budget, peaked at 1.53 GiB with a heap of 1.0 GiB of which 0.83 was free;
    with this, at 1.11 GiB (80.6 s, not 69.6). After it, glibc's thresholds as they end up in a
    process that freed large arrays (they no longer move once set): arrays up to 32 MiB from the
    heap, which keeps twice that free at its top. Elsewhere than glibc, nothing changes."""
    libc = glibc()
    if libc is None or not libc.mallopt(M_MMAP_THRESHOLD, RELEASED_ABOVE):
        yield
        return
    try:
        yield
    finally:
        libc.mallopt(M_MMAP_THRESHOLD, GROWN_MMAP_THRESHOLD)
        libc.mallopt(M_TRIM_THRESHOLD, 2 * GROWN_MMAP_THRESHOLD)
        trim_heap()
