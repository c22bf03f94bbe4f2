"""OPTIM (001 §4.4, §5.3): simulated annealing of the BISEM map.

A round picks NUM_SWAPS ranks inside a random window of size RANGE
(initOp), evaluates `tries` random permutations of their places and keeps
the best by the Metropolis rule (update). 001 gives no schedule (it cites
Kirkpatrick 1984 only); mpiscope's default (SPEC §3): T0 such that half of
the uphill moves from the initial map are accepted, T ← 0.95·T every K
rounds. With a time limit, K is set from the measured speed so the schedule
spans the time; it is written into the saved state with everything else.
Stops: time limit, a target objective, a round limit, convergence (the
schedule done and no new best for `patience` cooling steps), or Ctrl-C; the
best map is kept.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from mpiscope.errors import UsageError
from mpiscope.mapping.kernel import Kernel
from mpiscope.output import write_atomic

IntArray = npt.NDArray[np.int64]

COOLING_STEPS = 180          # 0.95^180 ≈ 1e-4: from 50 % uphill acceptance to nearly none
SAMPLE_MOVES = 2000


@dataclass
class AnnealParams:
    objective: str = "eval"
    window: tuple[int, ...] = (3, 3, 3)
    num_swaps: int = 2
    tries: int = 1
    cooling: float = 0.95
    rounds_per_step: int = 0          # K; 0 = from the time limit (or 20,000 without one)
    t0: float = 0.0                   # 0 = calibrated to 50 % uphill acceptance
    patience: int = 40
    seed: int = 0


@dataclass
class AnnealState:
    """Everything needed to resume: maps, temperature, counters, parameters."""
    current: IntArray
    best: IntArray
    temperature: float
    params: AnnealParams
    step: int = 0
    rounds: int = 0
    evaluated: int = 0
    accepted: int = 0
    initial_objective: float = 0.0
    best_objective: float = 0.0
    since_best: int = 0
    elapsed_s: float = 0.0
    history: list[tuple[float, float]] = field(default_factory=list)   # (elapsed s, best objective)
    stop_reason: str = ""

    def save(self, path: str | Path, fingerprint: str) -> None:
        meta = {k: v for k, v in asdict(self).items() if k not in ("current", "best")}
        meta["fingerprint"] = fingerprint
        import io

        buf = io.BytesIO()
        np.savez(buf, current=self.current, best=self.best, meta=np.array(json.dumps(meta)))
        write_atomic(Path(path), buf.getvalue())

    @staticmethod
    def load(path: str | Path, fingerprint: str) -> AnnealState:
        try:
            with np.load(path, allow_pickle=False) as z:
                meta = json.loads(str(z["meta"]))
                current, best = z["current"].astype(np.int64), z["best"].astype(np.int64)
        except (OSError, ValueError, KeyError) as e:
            raise UsageError(f"cannot read annealing state {path} ({e}); give a file written by mpiscope map") from e
        if meta.pop("fingerprint", None) != fingerprint:
            raise UsageError(f"state {path} was saved for another network or pattern; resume with the same "
                             f"--network, pattern and --objective")
        saved = meta.pop("params")
        params = AnnealParams(**{**saved, "window": tuple(saved["window"])})
        meta["history"] = [tuple(h) for h in meta["history"]]
        return AnnealState(current=current, best=best, params=params, **meta)


class Engine(Protocol):
    """Runs rounds on the current map: in process (below) or with workers (parallel.py)."""
    kernel: Kernel

    def run(self, rounds: int, temperature: float) -> tuple[int, int, int]: ...

    def close(self) -> None: ...


class LocalEngine:
    """Master and worker in one process: the whole round loop runs in C."""

    def __init__(self, kernel: Kernel, params: AnnealParams) -> None:
        self.kernel, self.params = kernel, params

    def run(self, rounds: int, temperature: float) -> tuple[int, int, int]:
        p = self.params
        return self.kernel.anneal(rounds, p.window, p.num_swaps, p.tries, temperature, p.objective)

    def close(self) -> None:
        pass


def initial_temperature(kernel: Kernel, params: AnnealParams) -> float:
    """SPEC §3 default: exp(−Δ/T0) = 1/2 for the median uphill Δ of random moves from the initial map.

    For eval, the median is taken over the uphill moves that keep maxlink: a move that raises maxlink
    changes eval by Σhops × Δmaxlink, orders of magnitude more than a hop, and a temperature that accepts
    half of those melts any map within seconds (measured: 4096-rank Bruck never got back below its start).
    """
    d, dmax = kernel.sample(SAMPLE_MOVES, params.window, params.num_swaps, params.objective)
    up = d[(d > 0) & (dmax <= 0)] if params.objective == "eval" else d[d > 0]
    if up.size == 0:
        up = d[d > 0]
    return float(np.median(up)) / math.log(2) if up.size else 1.0


Progress = Callable[[AnnealState, float], None]


def anneal(engine: Engine, state: AnnealState, deadline: float | None = None, max_rounds: int = 0,
           target: float | None = None, on_progress: Progress | None = None) -> AnnealState:
    """Cool until a stop condition; returns the state with the best map (also on Ctrl-C)."""
    p, k = state.params, engine.kernel
    start = time.monotonic() - state.elapsed_s
    chunk = 2000
    if p.rounds_per_step <= 0:
        # Measure the speed once, then spread COOLING_STEPS over the time left.
        t = time.perf_counter()
        ev, acc, _ = engine.run(chunk, state.temperature)
        state.rounds += chunk
        state.evaluated += ev
        state.accepted += acc
        rate = chunk / max(time.perf_counter() - t, 1e-6)
        left = (deadline - time.monotonic()) if deadline else 0.0
        p.rounds_per_step = max(1000, int(rate * left / COOLING_STEPS)) if left > 0 else 20000
    try:
        while True:
            done = 0
            step_best = k.best_objective()
            while done < p.rounds_per_step:
                n = min(chunk, p.rounds_per_step - done)
                t = time.perf_counter()
                ev, acc, _ = engine.run(n, state.temperature)
                # Chunks of about 0.2 s keep the bar, the deadline and Ctrl-C responsive.
                chunk = int(np.clip(n * 0.2 / max(time.perf_counter() - t, 1e-6), 100, 1_000_000))
                done += n
                state.rounds += n
                state.evaluated += ev
                state.accepted += acc
                state.elapsed_s = time.monotonic() - start
                state.best_objective = k.best_objective()
                if on_progress:
                    on_progress(state, state.temperature)
                if deadline and time.monotonic() >= deadline:
                    state.stop_reason = "time limit"
                    return _finish(engine, state)
                if max_rounds and state.rounds >= max_rounds:
                    state.stop_reason = "round limit"
                    return _finish(engine, state)
                if target is not None and state.best_objective <= target:
                    state.stop_reason = "target reached"
                    return _finish(engine, state)
            state.step += 1
            state.history.append((state.elapsed_s, state.best_objective))
            improved = k.best_objective() < step_best * (1 - 1e-12)
            state.since_best = 0 if improved else state.since_best + 1
            # Converged: the schedule has run its course (T down by 1e-4) and no new best came for
            # `patience` steps (moves that change nothing may still be accepted: ring symmetries).
            if state.since_best >= p.patience and state.step >= COOLING_STEPS:
                state.stop_reason = "converged"
                return _finish(engine, state)
            state.temperature *= p.cooling
    except KeyboardInterrupt:
        state.stop_reason = "interrupted"
        return _finish(engine, state)


def _finish(engine: Engine, state: AnnealState) -> AnnealState:
    k = engine.kernel
    state.current = k.map()
    state.best = k.map(best=True)
    state.best_objective = k.best_objective()
    return state


REFINE_T0 = 0.01


def start_state(kernel: Kernel, params: AnnealParams, initial: IntArray, refine: bool = False) -> AnnealState:
    """refine: the start is an already optimised map (a baseline); mpiscope then starts at 1 % of the
    50 % rule's temperature, which on 4096-rank Bruck still improves Scotch's map (T0 from 3e6 to 3e7
    did, 3.7e8 = the rule's did not within 100 s)."""
    t0 = params.t0 or initial_temperature(kernel, params) * (REFINE_T0 if refine else 1.0)
    params.t0 = t0
    obj = kernel.objective(params.objective)
    kernel.reset_best()
    kernel.offer_best(params.objective)
    return AnnealState(current=initial.copy(), best=initial.copy(), temperature=t0, params=params,
                       initial_objective=obj, best_objective=obj)


def resume_kernel(kernel: Kernel, state: AnnealState) -> None:
    """Load a saved state into a kernel: the best map first (so it counts as best), then the current one."""
    kernel.set_map(state.best)
    kernel.reset_best()
    kernel.offer_best(state.params.objective)
    kernel.set_map(state.current)


def progress_fraction(state: AnnealState, reference: float | None = None) -> float:
    """001 §7.3: (eval(initial) − eval(now)) / (eval(initial) − eval(best known or final))."""
    ref = reference if reference is not None else state.best_objective
    span = state.initial_objective - ref
    return (state.initial_objective - state.best_objective) / span if span > 0 else 1.0


def summary(state: AnnealState, scale: float) -> dict[str, Any]:
    return {"rounds": state.rounds, "moves_evaluated": state.evaluated, "moves_accepted": state.accepted,
            "cooling_steps": state.step, "final_temperature": state.temperature / scale,
            "rounds_per_step": state.params.rounds_per_step, "elapsed_s": state.elapsed_s,
            "stop_reason": state.stop_reason, "initial_objective": state.initial_objective / scale,
            "best_objective": state.best_objective / scale,
            "history": [[t, v / scale] for t, v in state.history]}
