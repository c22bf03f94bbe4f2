"""analysis/busy.py: a rank's time in MPI as the union of its calls, against a brute force."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from mpiscope.analysis.busy import union_by_rank


def brute(rank: np.ndarray, enter: np.ndarray, end: np.ndarray, ranks: int) -> list[int]:
    out = []
    for r in range(ranks):
        covered: set[int] = set()
        for a, b in zip(enter[rank == r].tolist(), end[rank == r].tolist()):
            covered.update(range(a, b))
        out.append(len(covered))
    return out


rows = st.lists(st.tuples(st.integers(0, 3), st.integers(0, 60), st.integers(-5, 30)), max_size=40)


@settings(max_examples=300, deadline=None)
@given(rows)
def test_union_matches_brute_force(data):
    rank = np.array([r for r, _, _ in data], np.int64)
    enter = np.array([t for _, t, _ in data], np.int64)
    end = enter + np.array([d for _, _, d in data], np.int64)
    assert union_by_rank(rank, enter, end, 4).tolist() == brute(rank, enter, end, 4)


def test_one_thread_sums_and_two_threads_overlap():
    # rank 0: one thread, calls back to back; rank 1: two threads in MPI at once for 200 of 205
    rank = np.array([0, 0, 0, 1, 1, 1], np.int64)
    enter = np.array([0, 10, 30, 1000, 1000, 1203], np.int64)
    end = np.array([10, 20, 35, 1200, 1200, 1205], np.int64)
    assert union_by_rank(rank, enter, end, 2).tolist() == [25, 202]


def test_times_too_far_apart_for_one_axis():
    rank = np.array([0, 0, 2], np.int64)
    enter = np.array([0, 5, 7], np.int64)
    end = np.array([10, 8, 1 << 61], np.int64)
    assert union_by_rank(rank, enter, end, 3).tolist() == [10, 0, (1 << 61) - 7]
