"""Corrected clocks never put a receive before its send (property-based)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from mpiscope.trace.clocks import causality_shifts


@settings(max_examples=300, deadline=None)
@given(st.integers(2, 6), st.lists(st.integers(-500, 500), min_size=6, max_size=6),
       st.lists(st.tuples(st.integers(0, 5), st.integers(0, 5), st.integers(0, 10_000), st.integers(1, 300)),
                min_size=1, max_size=40))
def test_shifts_remove_every_violation_of_a_true_order(nranks, skew, msgs):
    """Messages of a real run (receive after send) seen through per-rank clock
    errors: the shifts must restore causality, never move a clock backwards,
    and leave consistent traces untouched."""
    msgs = [(s % nranks, d % nranks, t, lat) for s, d, t, lat in msgs if s % nranks != d % nranks]
    if not msgs:
        return
    src = np.array([m[0] for m in msgs])
    dst = np.array([m[1] for m in msgs])
    true_send = np.array([m[2] for m in msgs], dtype=np.int64)
    true_recv = true_send + np.array([m[3] for m in msgs])
    err = np.array(skew[:nranks], dtype=np.int64)
    send_seen, recv_seen = true_send + err[src], true_recv + err[dst]
    shifts, feasible, _ = causality_shifts(src, dst, send_seen, recv_seen, nranks)
    assert feasible  # a true order exists, so constant shifts can restore it
    assert (shifts >= 0).all()
    assert (recv_seen + shifts[dst] >= send_seen + shifts[src]).all()
    if (recv_seen >= send_seen).all():
        assert not shifts.any()


def test_cycle_is_reported_infeasible():
    src, dst = np.array([0, 1]), np.array([1, 0])
    send = np.array([100, 100])
    recv = np.array([0, 0])  # each receive 100 ns before its send: no shift can fix both
    _, feasible, _ = causality_shifts(src, dst, send, recv, 2)
    assert not feasible


def test_no_shift_beyond_the_bound():
    """A damaged time asks for a shift of hours in a run of seconds: that message is refused
    and named, and the other messages still get their small shifts."""
    src, dst = np.array([0, 0, 2]), np.array([1, 1, 1])
    send = np.array([1_000, 2_000, 10**13])   # the third: a damaged send time
    recv = np.array([900, 1_950, 5_000])
    shifts, feasible, refused = causality_shifts(src, dst, send, recv, 3, bound_ns=10**9)
    assert refused.tolist() == [2]
    assert shifts.tolist() == [0, 100, 0]
    assert not feasible  # what was refused stays a violation, which the caller clamps
