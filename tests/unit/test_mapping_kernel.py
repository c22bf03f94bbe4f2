"""The incremental annealing kernel agrees with full recomputation."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from mpiscope.mapping.kernel import Kernel
from mpiscope.mapping.metrics import evaluate, link_loads
from mpiscope.mapping.patterns import parse_pattern, random_pattern
from mpiscope.mapping.topology import Network


def full(net: Network, pat_pairs: tuple[np.ndarray, np.ndarray, np.ndarray], node: np.ndarray) -> tuple[int, int, int]:
    src, dst, w = pat_pairs
    hops = net.hops(node[src], node[dst])
    return int(hops.sum()), int((hops * w).sum()), int(link_loads(net, node, src, dst, w).max(initial=0))


@settings(max_examples=60, deadline=None)
@given(kind=st.sampled_from(["torus", "mesh"]), dims=st.lists(st.integers(1, 5), min_size=1, max_size=3),
       rpn=st.integers(1, 2), seed=st.integers(0, 2**31), moves=st.integers(1, 60))
def test_incremental_equals_full(kind: str, dims: list[int], rpn: int, seed: int, moves: int) -> None:
    net = Network(kind, tuple(dims), rpn)
    rng = np.random.default_rng(seed)
    nranks = int(rng.integers(2, net.slots + 1)) if net.slots >= 2 else 1
    pat = random_pattern(nranks, min(3, nranks - 1), seed) if nranks > 1 else parse_pattern("ring:1")
    pairs = pat.pairs()
    start = rng.permutation(np.repeat(np.arange(net.nodes), rpn))[:nranks].astype(np.int64)
    k = Kernel(net, nranks, *pairs, start, seed=seed)
    assert k.raw_metrics() == full(net, pairs, start)
    for _ in range(moves):
        n = int(rng.integers(2, min(6, k.nslots) + 1)) if k.nslots >= 2 else 0
        if n < 2:
            break
        ranks = rng.choice(k.nslots, size=n, replace=False)
        perm = rng.permutation(n)
        predicted = k.eval_move(ranks, perm)
        # The early-rejection bound: exact for hop-bytes, never above eval (hopsum.c's tables follow commits).
        assert k.bound(ranks, perm, "hopbytes") == predicted[1]
        assert k.bound(ranks, perm, "eval") <= float(predicted[0]) * predicted[2]
        slots_before = k.map(slots=True)
        if rng.random() < 0.5:
            continue                                   # evaluated, not applied: nothing may change
        k.apply_move(ranks, perm)
        after = k.map(slots=True)
        expect = slots_before.copy()
        expect[ranks] = slots_before[ranks[perm]]
        assert np.array_equal(after, expect)
        assert k.raw_metrics() == predicted == full(net, pairs, after[:nranks])
    node = k.map()
    assert np.array_equal(k.loads(), link_loads(net, node, *pairs).astype(np.int64))
    k.recompute()
    assert k.raw_metrics() == full(net, pairs, node)


@settings(max_examples=25, deadline=None)
@given(kind=st.sampled_from(["torus", "mesh"]), dims=st.lists(st.integers(2, 6), min_size=1, max_size=3),
       objective=st.sampled_from(["eval", "hopbytes", "maxlink"]), k=st.integers(2, 4),
       temperature=st.sampled_from([0.0, 1e-3, 1e-1, 1.0]), seed=st.integers(0, 2**31))
def test_early_rejection_takes_the_exact_path(kind: str, dims: list[int], objective: str, k: int,
                                              temperature: float, seed: int) -> None:
    """Rejecting on the lower bound changes no decision and no random draw: the same moves are accepted."""
    net = Network(kind, tuple(dims))
    pat = random_pattern(net.nodes, min(3, net.nodes - 1), seed)
    start = np.random.default_rng(seed).permutation(net.nodes).astype(np.int64)
    runs = []
    for bound in (True, False):
        kern = Kernel(net, net.nodes, *pat.pairs(), start, seed=seed)
        kern.early_rejection(bound)
        t = temperature * kern.objective(objective)
        stats = kern.anneal(3000, (2,) * net.ndim, k, 1, t, objective)
        runs.append((stats, kern.map().tolist(), kern.map(best=True).tolist(), kern.raw_metrics()))
    assert runs[0] == runs[1]


def test_early_rejection_decides_most_moves_at_low_temperature() -> None:
    net, pat = Network("torus", (4, 4, 4)), parse_pattern("bruck:64")
    start = np.random.default_rng(1).permutation(64).astype(np.int64)
    k = Kernel(net, 64, *pat.pairs(), start, seed=2)
    k.anneal(20000, (3, 3, 3), 2, 1, 0.0, "eval")          # greedy descent to a local optimum
    k.rejected_early = 0
    evaluated, _, _ = k.anneal(20000, (3, 3, 3), 2, 1, k.objective("eval") * 1e-6, "eval")
    assert k.rejected_early > evaluated // 2


def test_kernel_anneal_keeps_best_and_counts() -> None:
    net = Network("torus", (4, 4, 4))
    pat = parse_pattern("bruck:64")
    start = np.random.default_rng(0).permutation(64).astype(np.int64)
    k = Kernel(net, 64, *pat.pairs(), start, seed=3)
    before = k.objective("eval")
    evaluated, accepted, bests = k.anneal(20000, (3, 3, 3), 2, 1, before * 1e-3, "eval")
    assert evaluated == 20000 and 0 < accepted <= evaluated and bests > 0
    best = k.map(best=True)
    m = evaluate(net, pat, best)
    assert m.eval < before
    k.set_map(best)
    assert k.objective("eval") == m.eval
