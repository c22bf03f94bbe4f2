"""glibc's allocator, as mpiscope tunes it (mallopt): no NumPy, Polars or Arrow imported here, so
that the package can tune it before their threads start (mpiscope/__init__.py)."""

from __future__ import annotations

import ctypes
import ctypes.util

# glibc's mallopt parameters (malloc.h) and its defaults; glibc's threshold for mapping an
# array on its own grows from 128 KiB as such arrays are freed, up to 32 MiB (64-bit)
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD, M_MMAP_MAX, M_ARENA_MAX = -1, -3, -4, -8
DEFAULT_TRIM_THRESHOLD, DEFAULT_MMAP_MAX = 128 * 1024, 65536
GROWN_MMAP_THRESHOLD = 32 << 20


def glibc() -> ctypes.CDLL | None:
    """The C library where it is glibc (has mallopt and malloc_trim), else None. By glibc's
    name first: elsewhere, find_library runs ldconfig (2.5 ms, at every import of the package)."""
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        try:
            libc = ctypes.CDLL(ctypes.util.find_library("c"))
        except (OSError, TypeError):   # TypeError: find_library found none
            return None
    return libc if hasattr(libc, "mallopt") and hasattr(libc, "malloc_trim") else None


def one_arena() -> None:
    """Every thread of this process allocates from glibc's one heap (elsewhere than glibc,
    nothing). Otherwise each thread that allocates gets a heap of its own, which keeps what the
    thread freed (up to the trim threshold each: the kept heap of machine.reused_heap) out of the
    others' reach. A merge in pieces within 4 GiB, one process: 100 M records of 8 ranks peaked at
    3.10-3.17 GiB with them and 2.45-2.48 GiB without (53.4-56.4 s; 48.6-55.8 s); of 64 ranks,
    1.78-1.79 and 1.43-1.45 GiB (46.6-55.9 s; 50.0-53.7 s); 10 M records merged in memory alike
    (2.4 GiB, 3.5-4.4 s). mpiscope allocates few, large arrays: one lock is no contention. glibc
    gives a thread a heap of its own when it first allocates: once another thread has one,
    threads share the heaps there are, hence at the package's import."""
    libc = glibc()
    if libc is not None:
        libc.mallopt(M_ARENA_MAX, 1)
