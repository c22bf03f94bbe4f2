"""What `mpiscope bench bcast` launches for each experiment (SPEC §5), and the
measurement itself: the launches of bcast_exp.c, their records, one result.

Simulated launches are split so that several can run at once (--jobs): one
per load column (max-effect), per block of patterns (random), per process
count (sparse). Real launches run one after the other.
"""

from __future__ import annotations

import math
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mpiscope.bench import bcast_paper as paper
from mpiscope.bench.bcast import SimSetup, Spec, real_jobs, run_jobs, sim_jobs
from mpiscope.bench.bcast_results import BcastResult
from mpiscope.bench.runner import mpi_in_use
from mpiscope.capture.bcast import PARAMS
from mpiscope.errors import UsageError

EXPERIMENTS = ("max-effect", "random", "sparse")
VARIANTS = ("library", "binomial", "adaptive", "ideal")
DEFAULT_VARIANTS = {"max-effect": VARIANTS, "random": ("binomial", "adaptive"),
                    "sparse": ("binomial", "adaptive", "ideal")}
# 000 §5.2: the sparse product starts optimising after 16 broadcasts, doubles the
# interval on a small change (the halving is stated only for §5.1), and uses the
# mean of 3 agreeing measurements.
SPARSE_PARAMS = {"interval": 16, "halve": 0, "stable": 1}
FLAGS = {"weight": "--weight", "stable": "--stable", "stable_tol": "--stable-tol", "threshold": "--threshold",
         "interval": "--interval", "interval_max": "--interval-max", "change": "--change", "halve": "--halve",
         "eps": "--eps", "eps_min_s": "--eps-min", "report": "--report"}


@dataclass
class Options:
    experiment: str
    simulate: bool
    ranks: int
    sizes: list[int]
    load_sets: dict[str, tuple[int, ...]]
    iters: int
    variants: tuple[str, ...]
    patterns: int
    first_pattern: int
    n: int
    density: float
    slope: float
    runs: int
    seed: int
    procs: list[int]
    parallel: int
    params: dict[str, Any]


def experiment_params(experiment: str, config: dict[str, Any], explicit: set[str]) -> dict[str, Any]:
    """The adaptive broadcast's parameters for an experiment: 000's for it, unless set explicitly."""
    values = {p.name: config[p.name] for p in PARAMS}
    if experiment == "sparse":
        values.update({k: v for k, v in SPARSE_PARAMS.items() if k not in explicit})
    return values


def adaptive_argv(params: dict[str, Any]) -> list[str]:
    return [arg for name, flag in FLAGS.items() for arg in (flag, str(params[name]))]


def check(o: Options) -> None:
    if o.ranks < 2 or (o.simulate and o.ranks > 4096):
        raise UsageError(f"--ranks {o.ranks} is out of range; give 2 to {4096 if o.simulate else 'any number'} "
                         f"(the paper: 128)")
    if o.iters < 1:
        raise UsageError(f"--iters {o.iters} is out of range; give at least 1 (the paper: 100)")
    if any(s > (1 << 30) for s in o.sizes):
        raise UsageError("a --sizes value is above 1 GiB; give sizes up to 1G")
    if o.patterns < 1 or o.first_pattern < 0:
        raise UsageError(f"--patterns {o.patterns} / --first-pattern {o.first_pattern} are out of range; "
                         f"give at least one pattern from 0 on (the paper: 200)")
    if o.n < 2 or not 0 < o.density <= 1 or not 0 <= o.slope <= 1 or o.runs < 1:
        raise UsageError(f"sparse matrix N={o.n} R={o.density} C={o.slope} with {o.runs} run(s) is out of range; "
                         f"give N >= 2, 0 < R <= 1, 0 <= C <= 1 and --runs >= 1 (the paper: N=4000, R=0.1, C=0.2)")
    if any(p < 2 for p in o.procs):
        raise UsageError(f"--procs {o.procs} is out of range; give process counts of at least 2 (the paper: "
                         f"8,16,32,64)")


def specs(o: Options) -> tuple[list[Spec], int]:
    """The launches, and how many result records they print."""
    variants = ",".join(o.variants)
    common = ["--iters", str(o.iters), "--variants", variants, *adaptive_argv(o.params)]
    sizes = ",".join(map(str, o.sizes))
    out: list[Spec] = []
    if o.experiment == "max-effect":
        for name, loads in o.load_sets.items():
            for column, load in enumerate(loads):
                out.append((["max-effect", "--sizes", sizes, "--loads", str(load), *common], o.ranks,
                            {"load_set": name, "column": column}))
        return out, sum(len(v) for v in o.load_sets.values()) * len(o.sizes) * len(o.variants)
    if o.experiment == "random":
        blocks = max(1, min(o.parallel * 2, o.patterns)) if o.simulate else 1
        step = math.ceil(o.patterns / blocks)
        for first in range(o.first_pattern, o.first_pattern + o.patterns, step):
            count = min(step, o.first_pattern + o.patterns - first)
            out.append((["random", "--sizes", sizes, "--first", str(first), "--patterns", str(count), *common],
                        o.ranks, {}))
        return out, o.patterns * len(o.sizes) * len(o.variants)
    matrix = ["--n", str(o.n), "--density", str(o.density), "--slope", str(o.slope), "--runs", str(o.runs),
              "--seed", str(o.seed)]
    for procs in o.procs:
        out.append((["sparse", *matrix, *common], procs, {}))
    return out, len(o.procs) * o.runs * len(o.variants)


def measure(o: Options, setup: SimSetup, launcher_args: str) -> BcastResult:
    check(o)
    plan, expected = specs(o)
    what = f"000 {o.experiment}" + (" (SimGrid SMPI)" if o.simulate else "")
    notes: list[str] = []
    with tempfile.TemporaryDirectory(prefix="mpiscope-bcast-") as tmp:
        if o.simulate:
            jobs = sim_jobs(plan, setup, Path(tmp))
            mpi = "SimGrid SMPI"
        else:
            jobs, notes = real_jobs(plan, launcher_args)
            mpi = mpi_in_use()[0].label
        records = run_jobs(jobs, o.parallel if o.simulate else 1, what, expected)
    return BcastResult(o.experiment, uuid.uuid4().hex[:12], o.ranks, o.simulate, mpi, o.params, records,
                       setup.to_json() if o.simulate else None, notes)


def load_sets(choice: str, loads: list[int] | None) -> dict[str, tuple[int, ...]]:
    if loads is not None:
        return {"custom": tuple(loads)}
    if choice == "both":
        return dict(paper.LOAD_SETS)
    return {choice: paper.LOAD_SETS[choice]}
