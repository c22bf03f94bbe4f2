"""Matching keeps MPI's non-overtaking order (property-based)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from mpiscope.trace.match import P2P, Side, ambiguous, match_messages, reorder_threads

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


def _crossed(sender_threads: int) -> tuple[P2P, np.ndarray, np.ndarray]:
    """Rank 0 sends two messages of one envelope (from one thread, or overlapping on two), entered
    at 100 and 120 (on its clock); rank 1 posted two receives for them at 10 and 20 and completed
    the second at 50, the first at 60 (on a clock behind rank 0's)."""
    leave = [110, 130] if sender_threads == 1 else [125, 130]
    sends = Side(*(np.array(v, np.int64) for v in ([0, 0], [0, 0], [1, 1], [7, 7], [100, 120], [0, 1])))
    recvs = Side(*(np.array(v, np.int64) for v in ([0, 0], [0, 0], [1, 1], [7, 7], [10, 20], [2, 3])))
    p = P2P(sends, np.array([8, 16]), np.array(leave, np.int64), recvs, np.array([8, 16]), np.array([60, 50]))
    si, ri = match_messages(sends, recvs)
    return p, si, ri


def test_one_threads_pairs_stay_in_posting_order_under_clock_error() -> None:
    """Both receives completed before either send began: the clocks' error, not threads, where
    neither rank has several; the first send stays with the first receive posted."""
    p, si, ri = _crossed(1)
    assert ri[np.argsort(si)].tolist() == [0, 1]
    assert ambiguous(p, si, ri, ()).sum() == 0
    assert reorder_threads(p, si, ri, ()).tolist() == ri.tolist()


def test_threads_pairs_go_by_entry_and_completion() -> None:
    """Where the sender has several threads (its two sends overlap), the order taken has no
    ground: the send entered first pairs with the receive completed first (issue 23)."""
    p, si, ri = _crossed(2)
    assert ambiguous(p, si, ri, (0,)).all()
    out = reorder_threads(p, si, ri, (0,))
    assert out[np.argsort(si)].tolist() == [1, 0]
    assert reorder_threads(p, si, ri, (5,)).tolist() == ri.tolist()  # another rank's threads


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 4), st.booleans(), st.sampled_from(["one", "sends", "recvs"])),
                min_size=1, max_size=30), st.booleans(), st.randoms(use_true_random=False))
def test_late_clusters_pair_by_entry_and_completion_the_others_stay(clusters, told, rnd):
    """Clusters of overlapping sends and receives of one envelope, far apart in time, between ranks
    of several threads: in a cluster whose receives completed before its sends began, and whose
    sends or receives several threads made (or where the sides' threads are not told), the sends
    by entry take the receives by completion; every other pair stays."""
    enter, leave, posted, done, late_of, send_thread, recv_thread = [], [], [], [], [], [], []
    for c, (size, late, threads) in enumerate(clusters):
        base = 100_000 * (c + 1)
        enter += [base + v for v in rnd.sample(range(100), size)]
        leave += [base + 200] * size
        posted += [base - (900 if late else 0) + v for v in rnd.sample(range(100), size)]
        done += [base - (500 if late else -400) + v for v in rnd.sample(range(100), size)]
        several = size > 1 and (threads != "one" or not told)
        late_of += [c if late and several else -1] * size
        send_thread += list(range(size)) if threads == "sends" else [0] * size
        recv_thread += list(range(size)) if threads == "recvs" else [0] * size
    n = len(enter)
    zeros, ev = np.zeros(n, np.int64), np.arange(n, dtype=np.int64)
    sends = Side(zeros, zeros, zeros + 1, zeros, np.array(enter, np.int64), ev,
                 np.array(send_thread, np.uint16) if told else None)
    recvs = Side(zeros, zeros, zeros + 1, zeros, np.array(posted, np.int64), ev + n,
                 np.array(recv_thread, np.uint16) if told else None)
    p = P2P(sends, zeros, np.array(leave, np.int64), recvs, zeros, np.array(done, np.int64))
    si, ri = match_messages(sends, recvs)
    out = reorder_threads(p, si, ri, (0, 1))
    taken = dict(zip(si.tolist(), ri.tolist()))
    want = dict(taken)
    for c in set(late_of) - {-1}:
        mine = [i for i in range(n) if late_of[i] == c]
        by_entry = sorted(mine, key=lambda i: enter[i])
        by_done = sorted((taken[i] for i in mine), key=lambda r: done[r])
        want.update(zip(by_entry, by_done))
    assert dict(zip(si.tolist(), out.tolist())) == want


def test_a_cluster_of_one_thread_a_side_keeps_its_order_on_ranks_of_several() -> None:
    """Ranks of several threads (both here), but one thread sent the cluster's messages and one
    posted their receives: that order is the true one; sent from two threads, re-paired."""
    p, si, ri = _crossed(2)
    p.recvs.thread = np.array([0, 0], np.uint16)
    p.sends.thread = np.array([1, 1], np.uint16)
    assert reorder_threads(p, si, ri, (0, 1)).tolist() == ri.tolist()
    p.sends.thread = np.array([1, 2], np.uint16)
    assert reorder_threads(p, si, ri, (0, 1))[np.argsort(si)].tolist() == [1, 0]
