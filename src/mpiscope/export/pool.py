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
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from typing import Any, TypeVar

from mpiscope.export import Progress

R = TypeVar("R")
INLINE_EVENTS = 200_000  # below this many events a trace is exported in this process


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


def run_groups(
    fn: Callable[..., R],
    common: tuple[Any, ...],
    spans: Sequence[tuple[int, int]],
    progress: Progress | None,
    workers: int | None = None,
) -> list[R]:
    """fn(*common, ranks, part_index, progress) for every group; results in group order.
    In this process there is one group, which reports its progress rank by rank."""
    total = sum(n for _, n in spans)
    workers = usable_cpus() if workers is None else workers
    if workers <= 1 or total < INLINE_EVENTS:
        return [fn(*common, [r for r, _ in spans], 0, progress)]
    groups = rank_groups(spans, tasks=4 * workers)
    events = dict(spans)
    out: dict[int, R] = {}
    pool = ProcessPoolExecutor(max_workers=workers, mp_context=mp.get_context("spawn"))
    try:
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
