"""Matching keeps MPI's non-overtaking order (property-based)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from mpiscope.trace.match import Side, match_messages

envelopes = st.lists(st.tuples(st.integers(0, 2), st.integers(0, 3), st.integers(0, 3), st.integers(0, 2)),
                     min_size=0, max_size=60)


def side(env: list[tuple[int, int, int, int]], times: list[int]) -> Side:
    a = np.array(env, dtype=np.int64).reshape(-1, 4)
    return Side(a[:, 0], a[:, 1], a[:, 2], a[:, 3], np.array(times, np.int64), np.arange(len(env), dtype=np.int64))


@settings(max_examples=200, deadline=None)
@given(envelopes, st.randoms(use_true_random=False), st.integers(0, 10))
def test_kth_send_matches_kth_receive_of_its_envelope(sends_env, rnd, drop):
    # receives: the same envelopes posted in a shuffled global order, some missing
    send_times = list(range(0, 10 * len(sends_env), 10))
    recv_env = list(sends_env)
    rnd.shuffle(recv_env)
    recv_env = recv_env[: max(0, len(recv_env) - drop)]
    recv_times = [rnd.randrange(0, 10_000) for _ in recv_env]
    s, r = side(sends_env, send_times), side(recv_env, recv_times)
    si, ri = match_messages(s, r)
    # every matched pair has the same envelope
    for a, b in zip(si, ri):
        assert sends_env[a] == recv_env[b]
    # per envelope: matched counts = min(sends, receives), order preserved on both sides
    for env in set(sends_env):
        n_s = sum(1 for e in sends_env if e == env)
        n_r = sum(1 for e in recv_env if e == env)
        pairs = [(a, b) for a, b in zip(si, ri) if sends_env[a] == env]
        assert len(pairs) == min(n_s, n_r)
        sends_in_order = sorted(i for i, e in enumerate(sends_env) if e == env)[: len(pairs)]
        recvs_in_order = sorted((i for i, e in enumerate(recv_env) if e == env),
                                key=lambda i: (recv_times[i], i))[: len(pairs)]
        assert [a for a, _ in pairs] == sends_in_order
        assert [b for _, b in pairs] == recvs_in_order


def test_empty():
    e = side([], [])
    si, ri = match_messages(e, e)
    assert si.size == ri.size == 0
