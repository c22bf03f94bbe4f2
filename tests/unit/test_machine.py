"""How the merge asks the machine for memory (machine.py)."""

from __future__ import annotations

import resource

import numpy as np

from mpiscope.machine import reused_heap, small_pages


def _faults_of_arrays(count: int, nbytes: int) -> int:
    """Minor page faults of allocating, touching and freeing `count` arrays one after the other."""
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(count):
        a = np.ones(nbytes // 8)
        del a
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before


def test_freed_large_arrays_are_reused_without_page_faults() -> None:
    """An array of 64 MiB is mapped anew (a fault per page) each time outside reused_heap; inside,
    the second and third take the memory the first left. (In small pages, as the merge runs.)"""
    nbytes, pages = 64 << 20, (64 << 20) // resource.getpagesize()
    with small_pages():
        assert _faults_of_arrays(3, nbytes) >= 2.5 * pages
        with reused_heap():
            inside = _faults_of_arrays(3, nbytes)
        assert inside < 1.5 * pages, (inside, pages)
        assert _faults_of_arrays(3, nbytes) >= 2.5 * pages  # as before once it is left
