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


@settings(max_examples=30, deadline=None)
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
