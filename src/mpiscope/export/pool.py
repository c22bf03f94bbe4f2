"""Run an exporter's per-rank work on this machine's cores.

The ranks are cut into contiguous groups of about equal events; each group is one task
that writes its own part (OTF2 event files, a run of Perfetto packets) into the staging
directory, and the caller stitches the parts in rank order. Workers are spawned (not
forked: Polars' thread pool does not survive a fork); a small trace runs in this process,
where starting workers would cost more than it saves.
"""

from __future__ import annotations

import multiprocessing as mp
import os
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from contextlib import contextmanager
from typing import Any, TypeVar

from mpiscope import output
from mpiscope.errors import UsageError
from mpiscope.export import Progress
from mpiscope.export.tables import MESSAGE_BATCH, MESSAGE_BYTES_PER_CALL
from mpiscope.machine import available_memory

R = TypeVar("R")
INLINE_EVENTS = 200_000  # below this many events a trace is exported in this process
# A process holds its interpreter and libraries, the messages of a batch of ranks (tables.py),
# and one rank's records at a time. One process, ranks of 1.04 M calls (64 ranks) and of 4.17 M
# (16 ranks): OTF2 peaked at 2.27 and 6.17 GB (1,250 bytes per call of the rank above ~1 GB),
# Perfetto at 1.48 and 3.43 GB (620); otf2.py and perfetto.py keep a margin.
BASE_BYTES = 512 << 20


def process_bytes(spans: Sequence[tuple[int, int]], bytes_per_call: int) -> int:
    """Memory of one exporting process: the base, a batch's messages, the longest rank."""
    total = sum(n for _, n in spans)
    longest = max((n for _, n in spans), default=0)
    return BASE_BYTES + min(total, MESSAGE_BATCH) * MESSAGE_BYTES_PER_CALL + longest * bytes_per_call


@contextmanager
def _one_polars_thread() -> Iterator[None]:
    """Workers spawned inside run Polars on one thread each (unless the user chose a number):
    the workers already fill the cores, and a thread pool per worker only adds switching
    (~10 % more CPU measured on 2 cores)."""
    if "POLARS_MAX_THREADS" in os.environ:
        yield
        return
    os.environ["POLARS_MAX_THREADS"] = "1"
    try:
        yield
    finally:
        del os.environ["POLARS_MAX_THREADS"]


def usable_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def rank_groups(spans: Sequence[tuple[int, int]], tasks: int) -> list[list[int]]:
    """Contiguous groups of ranks, each with about total/tasks events."""
    total = sum(n for _, n in spans) or 1
    groups: list[list[int]] = [[]]
    acc = 0
    for rank, n in spans:
        if groups[-1] and acc >= total * len(groups) / tasks:
            groups.append([])
        groups[-1].append(rank)
        acc += n
    return [g for g in groups if g]


def fitting_workers(what: str, spans: Sequence[tuple[int, int]], workers: int, bytes_per_call: int) -> int:
    """At most `workers` processes that each hold the longest rank within the memory available;
    refused in one sentence where not even one does."""
    have = available_memory()
    rank, longest = max(spans, key=lambda s: s[1], default=(0, 0))
    need = process_bytes(spans, bytes_per_call)
    if have is None:
        return workers
    if need > have:
        raise UsageError(f"{what} holds one rank's calls at a time, and rank {rank} has {longest:,}: about "
                         f"{need / 2**30:.1f} GiB, and {have / 2**30:.1f} GiB is available; export on a machine "
                         f"with more memory, or record a part of the run (MPI_Pcontrol)")
    fitting = max(1, min(workers, have // need))
    if fitting < workers:
        output.warn(f"{what} runs on {fitting} process{'es' if fitting > 1 else ''} instead of {workers}: each holds "
                    f"rank {rank}'s {longest:,} calls, about {need / 2**30:.1f} GiB, and {have / 2**30:.1f} GiB "
                    f"is available")
    return fitting


def run_groups(
    fn: Callable[..., R],
    common: tuple[Any, ...],
    spans: Sequence[tuple[int, int]],
    progress: Progress | None,
    workers: int | None,
    what: str,
    bytes_per_call: int,
) -> list[R]:
    """fn(*common, ranks, part_index, progress) for every group; results in group order.
    In this process there is one group, which reports its progress rank by rank. `workers`
    (default: the usable cores) is lowered to what the memory holds (`bytes_per_call` of the
    longest rank each)."""
    total = sum(n for _, n in spans)
    workers = fitting_workers(what, spans, usable_cpus() if workers is None else workers, bytes_per_call)
    if workers <= 1 or total < INLINE_EVENTS:
        return [fn(*common, [r for r, _ in spans], 0, progress)]
    groups = rank_groups(spans, tasks=4 * workers)
    events = dict(spans)
    out: dict[int, R] = {}
    pool = ProcessPoolExecutor(max_workers=workers, mp_context=mp.get_context("spawn"))
    try:
        with _one_polars_thread():  # the workers are spawned by the submits
            futures = {pool.submit(fn, *common, g, i): i for i, g in enumerate(groups)}
        for f in as_completed(futures):
            i = futures[f]
            out[i] = f.result()
            if progress:
                progress(sum(events[r] for r in groups[i]))
    except BaseException:
        # a failed part, a full disk, Ctrl-C: start no more parts; the caller removes the staging
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown()
    return [out[i] for i in range(len(groups))]
