"""The master/worker rounds of parallel.py, in one process: replayed logs and snapshots stay exact."""

from __future__ import annotations

import numpy as np
import pytest

from mpiscope import parallel
from mpiscope.mapping.kernel import Kernel, MoveLog
from mpiscope.mapping.patterns import parse_pattern
from mpiscope.mapping.topology import Network


def setup(ranks_per_node: int = 1) -> tuple[parallel.Problem, parallel.Moves]:
    net = Network("torus", (4, 4, 4), ranks_per_node)
    pat = parse_pattern("bruck:64")
    start = np.random.default_rng(3).permutation(np.arange(64) // ranks_per_node)
    src, dst, w = pat.pairs()
    return parallel.Problem(net, 64, src, dst, w, start, "eval", 1), parallel.Moves((3, 3, 3), 2)


def metrics_match(k: Kernel, problem: parallel.Problem) -> bool:
    """Metrics, loads and the early-rejection bound (hop-sum tables) as a kernel built for the map has them."""
    fresh = problem.kernel(0)
    fresh.set_map(k.map(slots=True))
    rng = np.random.default_rng(5)
    moves = [(rng.choice(64, 2, replace=False), [1, 0]) for _ in range(50)]
    return (k.raw_metrics() == fresh.raw_metrics() and np.array_equal(k.loads(), fresh.loads())
            and all(k.bound(r, p, "eval") == fresh.bound(r, p, "eval") for r, p in moves))


@pytest.mark.parametrize("ranks_per_node", [1, 2])
def test_one_worker_log_replays_exactly(ranks_per_node: int) -> None:
    problem, moves = setup(ranks_per_node)
    master, worker = problem.kernel(1), problem.kernel(2)
    t = master.objective("eval") * 1e-3
    _, log, obj, _ = parallel._serve(worker, problem, moves, (master.map(slots=True), 5000, t, 7))
    kept, _ = master.merge(log, "eval")
    assert len(log) > 0 and len(kept) == len(log)            # the same map: every move judged the same
    assert np.array_equal(master.map(), worker.map()) and master.objective("eval") == obj


def test_workers_follow_the_master_by_snapshot_and_replay() -> None:
    problem, moves = setup()
    master, workers = problem.kernel(1), [problem.kernel(2), problem.kernel(3)]
    t = master.objective("eval") * 1e-2
    start: np.ndarray | MoveLog = master.map(slots=True)
    for r in range(4):
        results = [parallel._serve(w, problem, moves, (start, 3000, t, 11 + 2 * r + i)) for i, w in enumerate(workers)]
        results.sort(key=lambda x: x[2])
        start, _ = master.merge(MoveLog.concat([x[1] for x in results]), "eval")
        assert metrics_match(master, problem)
    for w in workers:                                          # back to the round's start, then the kept moves
        assert w.restore()
        w.apply_moves(start)
        assert np.array_equal(w.map(), master.map()) and metrics_match(w, problem)
