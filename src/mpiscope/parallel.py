"""Parallel work: worker processes on this machine, or an MPI job across nodes (mpi4py).

The only module that imports mpi4py. For mapping it runs 001 §5.3's OPTIM
master/worker scheme with rounds long enough to pay for their messages
(a round trip through a pipe costs about 1 ms, while a move is decided in
about a microsecond). In each round the master sends every worker the
current map (or the moves it kept since the last round) and its share of the
swap candidates (as the seed of a candidate stream: listing 10^5 windows
would cost more than evaluating them); each worker anneals its copy of the map through `rounds` candidates
at the master's temperature (C kernel) and returns the moves it accepted,
each with the threshold of its Metropolis draw. The master replays the
workers' moves on its own map, the best chain first, and keeps those whose
change on that map is still within their threshold (update), so its map and
metrics stay exact and moves of different workers that do not interact are
all kept. Workers then go back to their snapshot of the round's start and
replay the kept moves, or reload the map when there are many.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import random
import signal
import time
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any, Self

import numpy as np
import numpy.typing as npt

from mpiscope.mapping.kernel import Kernel, MoveLog
from mpiscope.mapping.topology import Network

IntArray = npt.NDArray[np.int64]
_released = False          # MPI workers told to stop (each may be told once)
# A round as a worker sees it: where to start (the map, or the moves the master kept since the
# worker's snapshot), rounds, temperature, seed of its candidates.
Round = tuple["IntArray | MoveLog", int, float, int]
# What a worker returns: moves evaluated, the moves it accepted, the objective it reached, its CPU time.
Result = tuple[int, MoveLog, float, float]


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


@dataclass(frozen=True)
class Moves:
    """The move set of a search: RANGE window and NUM_SWAPS."""
    window: tuple[int, ...]
    num_swaps: int


# Up to this many kept moves the workers replay them from their snapshot (about 10 us each) rather than
# re-evaluate the whole map (8 to 18 ms for 4096-rank Bruck).
REPLAY_MAX = 1000


def _serve(k: Kernel, problem: Problem, moves: Moves, msg: Round) -> Result:
    cpu = time.process_time()
    start, rounds, temperature, seed = msg
    if isinstance(start, MoveLog):
        if not k.restore():
            raise RuntimeError("a worker was sent moves before any map")   # the master always sends a map first
        k.apply_moves(start)
    else:
        k.set_map(start)
    k.snapshot()
    k.rng.value = seed
    log = MoveLog.empty(rounds, moves.num_swaps)
    evaluated, _, _ = k.anneal(rounds, moves.window, moves.num_swaps, problem.tries, temperature,
                               problem.objective, log=log)
    return evaluated, log, k.objective(problem.objective), time.process_time() - cpu


def _process_worker(conn: Connection, problem: Problem, moves: Moves, seed: int) -> None:
    # Ctrl-C at the terminal reaches the whole process group: only the master stops (and saves).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    k = problem.kernel(seed)
    conn.send("ready")
    while True:
        msg = conn.recv()
        if msg is None:
            return
        conn.send(_serve(k, problem, moves, msg))


class _Master:
    """The master's side of a round, shared by the process and MPI engines."""

    def __init__(self, problem: Problem, seed: int) -> None:
        self.problem = problem
        self.kernel = problem.kernel(seed)
        self.rng = random.Random(seed)
        self.kept: MoveLog | None = None      # kept last round; None: the workers need the map
        self.worker_cpu_s = 0.0               # the busiest worker's CPU time, summed over rounds

    def round(self, rounds: int, temperature: float, workers: int, exchange: Any) -> tuple[int, int, int]:
        start: IntArray | MoveLog
        if self.kept is not None and len(self.kept) <= REPLAY_MAX:
            start = self.kept
        else:
            start = self.kernel.map(slots=True)
        msgs = [(start, rounds, temperature, self.rng.getrandbits(64) or 1) for _ in range(workers)]
        results: list[Result] = exchange(msgs)
        # The chain that got furthest first, whole, then what of the others still helps. Interleaving
        # the chains kept fewer moves and a worse map (measured on 4096-rank Bruck: maxlink couples
        # every move, and a move judged after another chain's maxlink change is judged anew).
        results.sort(key=lambda r: r[2])
        self.kept, bests = self.kernel.merge(MoveLog.concat([r[1] for r in results]), self.problem.objective)
        self.worker_cpu_s += max(r[3] for r in results)
        return sum(r[0] for r in results), len(self.kept), bests


class ProcessEngine:
    """OPTIM with `workers` processes on this machine."""

    def __init__(self, problem: Problem, workers: int, window: tuple[int, ...], num_swaps: int, seed: int) -> None:
        self.master = _Master(problem, seed)
        self.kernel = self.master.kernel
        ctx = mp.get_context("fork")
        self.conns: list[Connection] = []
        self.procs = []
        for w in range(workers):
            a, b = ctx.Pipe()
            proc = ctx.Process(target=_process_worker, args=(b, problem, Moves(window, num_swaps), seed + 1 + w),
                               daemon=True)
            proc.start()
            self.conns.append(a)
            self.procs.append(proc)
        for c in self.conns:       # each builds its kernel first; the speed measured next is the rounds'
            c.recv()

    def _exchange(self, msgs: list[Round]) -> list[Result]:
        for c, m in zip(self.conns, msgs):
            c.send(m)
        return [c.recv() for c in self.conns]

    def run(self, rounds: int, temperature: float) -> tuple[int, int, int]:
        """`rounds` rounds on every worker at once."""
        return self.master.round(rounds, temperature, len(self.conns), self._exchange)

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
        self.comm.bcast((problem, Moves(window, num_swaps), seed), root=0)
        global _released
        _released = False
        self.master = _Master(problem, seed)
        self.kernel = self.master.kernel
        self.comm.gather(None, root=0)       # the workers have built their kernels

    def _exchange(self, msgs: list[Round]) -> list[Result]:
        self.comm.scatter([None, *msgs], root=0)
        gathered = self.comm.gather(None, root=0) or []
        return list(gathered[1:])

    def run(self, rounds: int, temperature: float) -> tuple[int, int, int]:
        return self.master.round(rounds, temperature, self.comm.Get_size() - 1, self._exchange)

    def close(self) -> None:
        global _released
        if not _released:
            self.comm.scatter([None] * self.comm.Get_size(), root=0)
            _released = True


def mpi_worker() -> None:
    """What ranks other than 0 do for the whole job: serve rounds until the master says stop.

    A master that finishes without annealing sends None in place of the problem."""
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    start = comm.bcast(None, root=0)
    if start is None:
        return
    problem, moves, seed = start
    k = problem.kernel(seed + comm.Get_rank())
    comm.gather("ready", root=0)
    while True:
        msg = comm.scatter(None, root=0)
        if msg is None:
            return
        comm.gather(_serve(k, problem, moves, msg), root=0)


def mpi_release_workers() -> None:
    """Master side: tell waiting workers there is no (more) annealing to do."""
    global _released
    if _released:
        return
    from mpi4py import MPI

    MPI.COMM_WORLD.bcast(None, root=0)
    _released = True


class Tasks:
    """Independent tasks fn(*args) run on `workers` processes of this machine, or, in an MPI job
    (mpiexec -n N mpiscope ...), on world ranks 1..N-1 while rank 0 hands them out (serve_tasks).
    Results come back in the order of the arguments. One pool serves every batch: starting
    Python worker processes costs ~0.5 s each."""

    def __init__(self, workers: int, setup: Any = None) -> None:
        self.mpi = mpi_size() > 1
        self.workers = Tasks.count(workers)
        self.pool: Any = None
        if not self.mpi and self.workers > 1:
            from concurrent.futures import ProcessPoolExecutor

            # spawn: the parent holds Polars' and the kernels' threads, which fork would copy mid-state
            self.pool = ProcessPoolExecutor(self.workers, mp_context=mp.get_context("spawn"),
                                            initializer=setup)
            for _ in range(self.workers):  # start them now: they set up while the caller prepares
                self.pool.submit(int)

    @staticmethod
    def count(workers: int) -> int:
        """The processes that run the tasks: `workers`, or the MPI job's ranks but 0."""
        return mpi_size() - 1 if mpi_size() > 1 else max(1, workers)

    def map(self, fn: Any, args: list[tuple[Any, ...]]) -> list[Any]:
        if self.mpi:
            return _mpi_map(fn, args)
        if self.pool is None:
            return [fn(*a) for a in args]
        return list(self.pool.map(_call, [(fn, a) for a in args]))

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(cancel_futures=True)
        if self.mpi:
            from mpi4py import MPI

            for dest in range(1, MPI.COMM_WORLD.Get_size()):
                MPI.COMM_WORLD.send(None, dest=dest, tag=_TASK)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_TASK = 77


def _call(job: tuple[Any, tuple[Any, ...]]) -> Any:
    fn, args = job
    return fn(*args)


def _mpi_map(fn: Any, args: list[tuple[Any, ...]]) -> list[Any]:
    """Rank 0: hand the tasks out one at a time to whichever worker is free."""
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    results: list[Any] = [None] * len(args)
    pending = list(enumerate(args))
    busy = 0
    for dest in range(1, comm.Get_size()):
        if pending:
            comm.send((fn, *pending.pop(0)), dest=dest, tag=_TASK)
            busy += 1
    error = None
    while busy:
        status = MPI.Status()
        index, ok, value = comm.recv(source=MPI.ANY_SOURCE, tag=_TASK, status=status)
        busy -= 1
        if not ok:
            error = error or value
        else:
            results[index] = value
        if pending and error is None:
            comm.send((fn, *pending.pop(0)), dest=status.Get_source(), tag=_TASK)
            busy += 1
    if error is not None:
        raise error
    return results


def serve_tasks() -> None:
    """World ranks other than 0 of an MPI job: run the tasks rank 0 sends until it sends None."""
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    while True:
        job = comm.recv(source=0, tag=_TASK)
        if job is None:
            return
        fn, index, args = job
        try:
            comm.send((index, True, fn(*args)), dest=0, tag=_TASK)
        except Exception as e:  # noqa: BLE001 - rank 0 raises it; this rank must keep serving
            comm.send((index, False, e), dest=0, tag=_TASK)
