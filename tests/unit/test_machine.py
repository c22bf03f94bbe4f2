"""How the merge asks the machine for memory (machine.py)."""

from __future__ import annotations

import json
import subprocess
import sys

# In a fresh interpreter: once a heap has kept freed arrays, later large arrays may reuse its free
# chunks even outside reused_heap (the suite's merges run in the test process).
_COUNT = """
import json, resource
import numpy as np
from mpiscope.machine import released_heap, reused_heap, small_pages

def faults(count, nbytes):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(count):
        a = np.ones(nbytes // 8)
        del a
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
"""
_FAULTS = _COUNT + """
with small_pages():  # as the merge runs: a fault per 4 KiB page, not per huge page
    outside = faults(3, 64 << 20)
    with reused_heap():
        inside = faults(3, 64 << 20)
print(json.dumps({"outside": outside, "inside": inside, "pages": (64 << 20) // resource.getpagesize()}))
"""


def test_freed_large_arrays_are_reused_without_page_faults() -> None:
    """An array of 64 MiB is mapped anew (a fault per page) each time outside reused_heap; inside,
    the second and third take the memory the first left."""
    done = subprocess.run([sys.executable, "-c", _FAULTS], capture_output=True, text=True, check=True)
    got = json.loads(done.stdout)
    assert got["outside"] >= 2.5 * got["pages"], got
    assert got["inside"] < 1.5 * got["pages"], got


_RELEASED = _COUNT + """
with small_pages():  # released first: a heap that holds a free chunk gives it out whatever the threshold
    with released_heap():
        released = faults(3, 8 << 20)
    kept = faults(3, 8 << 20)  # the threshold after it (32 MiB): the first faults, the next two reuse
print(json.dumps({"kept": kept, "released": released, "pages": (8 << 20) // resource.getpagesize()}))
"""


def test_released_heap_gives_each_freed_array_back() -> None:
    """Inside released_heap each 8 MiB array is mapped anew and given back when freed (a merge
    below the budget that holds a kept heap: its peak is then what is alive); after it, glibc
    keeps such an array in its heap for the next."""
    done = subprocess.run([sys.executable, "-c", _RELEASED], capture_output=True, text=True, check=True)
    got = json.loads(done.stdout)
    assert got["kept"] < 1.5 * got["pages"], got
    assert got["released"] >= 2.5 * got["pages"], got
