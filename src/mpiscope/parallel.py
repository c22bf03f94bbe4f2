"""Parallel work: worker processes on this machine, or an MPI job across nodes (mpi4py).

The only module that imports mpi4py. For mapping it runs 001 §5.3's OPTIM
master/worker scheme: each round the master picks the swap candidates
(NUM_SWAPS ranks in a random RANGE window, initOp), sends every worker the
moves accepted since its last round and that list; each worker evaluates
`tries` random permutations of the listed ranks on its own copy of the map
(incrementally, in the C kernel) and returns its best; the master keeps the
best of the returned maps by the SA acceptance rule (update). Workers hold a
replica of the map, so a round sends the accepted moves, not the whole map.
"""

from __future__ import annotations

import math
import multiprocessing as mp
import os
import random
import signal
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

import numpy as np
import numpy.typing as npt

from mpiscope.mapping.kernel import Kernel
from mpiscope.mapping.topology import Network

IntArray = npt.NDArray[np.int64]
_released = False          # MPI workers told to stop (each may be told once)
Move = tuple[npt.NDArray[np.int32], npt.NDArray[np.int32]]


@dataclass(frozen=True)
class Problem:
    """What a worker needs to build its kernel."""
    network: Network
    nranks: int
    src: IntArray
    dst: IntArray
    nbytes: npt.NDArray[np.float64]
    node_of_rank: IntArray
    objective: str
    tries: int

    def kernel(self, seed: int) -> Kernel:
        return Kernel(self.network, self.nranks, self.src, self.dst, self.nbytes, self.node_of_rank, seed=seed)


def _serve(k: Kernel, msg: tuple[list[Move], npt.NDArray[np.int32]], problem: Problem) -> tuple[float, Any]:
    moves, ranks = msg
    for r, p in moves:
        k.apply_move(r, p)
    return k.try_list(ranks, problem.tries, problem.objective)


def _process_worker(conn: Connection, problem: Problem, seed: int) -> None:
    # Ctrl-C at the terminal reaches the whole process group: only the master stops (and saves).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    k = problem.kernel(seed)
    while True:
        msg = conn.recv()
        if msg is None:
            return
        conn.send(_serve(k, msg, problem))


class _Master:
    """The master's side of a round, shared by the process and MPI engines."""

    def __init__(self, problem: Problem, window: tuple[int, ...], num_swaps: int, seed: int) -> None:
        self.problem, self.window, self.num_swaps = problem, window, num_swaps
        self.kernel = problem.kernel(seed)
        self.pending: list[Move] = []
        self.rng = random.Random(seed)

    def rounds(self, rounds: int, temperature: float, exchange: Any) -> tuple[int, int, int]:
        evaluated = accepted = bests = 0
        kind = self.problem.objective
        for _ in range(rounds):
            ranks = self.kernel.pick(self.window, self.num_swaps)
            if ranks.size < 2:
                continue
            results: list[tuple[float, Any]] = exchange((self.pending, ranks))
            self.pending = []
            evaluated += self.problem.tries * len(results)
            value, perm = min(results, key=lambda x: x[0])
            delta = value - self.kernel.objective(kind)
            if delta <= 0 or (temperature > 0 and self.rng.random() < math.exp(-delta / temperature)):
                before = self.kernel.best_objective()
                self.kernel.apply_move(ranks, perm)
                self.kernel.offer_best(kind)
                self.pending.append((ranks, np.asarray(perm, dtype=np.int32)))
                accepted += 1
                bests += self.kernel.best_objective() < before
        return evaluated, accepted, bests


class ProcessEngine:
    """OPTIM with `workers` processes on this machine."""

    def __init__(self, problem: Problem, workers: int, window: tuple[int, ...], num_swaps: int, seed: int) -> None:
        self.master = _Master(problem, window, num_swaps, seed)
        self.kernel = self.master.kernel
        ctx = mp.get_context("fork")
        self.conns: list[Connection] = []
        self.procs = []
        for w in range(workers):
            a, b = ctx.Pipe()
            proc = ctx.Process(target=_process_worker, args=(b, problem, seed + 1 + w), daemon=True)
            proc.start()
            self.conns.append(a)
            self.procs.append(proc)

    def _exchange(self, msg: Any) -> list[Any]:
        for c in self.conns:
            c.send(msg)
        return [c.recv() for c in self.conns]

    def run(self, rounds: int, temperature: float) -> tuple[int, int, int]:
        return self.master.rounds(rounds, temperature, self._exchange)

    def close(self) -> None:
        for c in self.conns:
            try:
                c.send(None)
            except (BrokenPipeError, OSError):
                pass
        for p in self.procs:
            p.join(timeout=5)
            if p.is_alive():
                p.terminate()


def mpi_size() -> int:
    """World size when started by mpiexec/srun, else 1, without importing MPI for plain runs."""
    for var in ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "PMIX_SIZE", "SLURM_NTASKS"):
        if os.environ.get(var, "").isdigit():
            return int(os.environ[var])
    return 1


def mpi_rank() -> int:
    from mpi4py import MPI

    return int(MPI.COMM_WORLD.Get_rank())


class MpiEngine:
    """OPTIM as an MPI job: world rank 0 is the master, every other rank a worker (mpi_worker)."""

    def __init__(self, problem: Problem, window: tuple[int, ...], num_swaps: int, seed: int) -> None:
        from mpi4py import MPI

        self.comm = MPI.COMM_WORLD
        self.comm.bcast((problem, seed), root=0)
        global _released
        _released = False
        self.master = _Master(problem, window, num_swaps, seed)
        self.kernel = self.master.kernel

    def _exchange(self, msg: Any) -> list[Any]:
        self.comm.bcast(msg, root=0)
        gathered = self.comm.gather(None, root=0) or []
        return list(gathered[1:])

    def run(self, rounds: int, temperature: float) -> tuple[int, int, int]:
        return self.master.rounds(rounds, temperature, self._exchange)

    def close(self) -> None:
        global _released
        if not _released:
            self.comm.bcast(None, root=0)
            _released = True


def mpi_worker() -> None:
    """What ranks other than 0 do for the whole job: serve rounds until the master says stop.

    A master that finishes without annealing sends None in place of the problem."""
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    start = comm.bcast(None, root=0)
    if start is None:
        return
    problem, seed = start
    k = problem.kernel(seed + comm.Get_rank())
    while True:
        msg = comm.bcast(None, root=0)
        if msg is None:
            return
        comm.gather(_serve(k, msg, problem), root=0)


def mpi_release_workers() -> None:
    """Master side: tell waiting workers there is no (more) annealing to do."""
    global _released
    if _released:
        return
    from mpi4py import MPI

    MPI.COMM_WORLD.bcast(None, root=0)
    _released = True
