"""The page's adaptive-broadcast section (`DATA.bcast`, SPEC §5, issue 19): what the
optimiser did (each swap and undo, from the manifest) and what each broadcast cost (the
mean and the largest per-process MPI_Bcast time of every broadcast on the communicator
where it swapped), so that a user sees a swap cut the time, or not.

The broadcast's number on its communicator is what the optimiser counts (a swap's
`bcast` is the first broadcast on the new tree): the instances of that communicator's
MPI_Bcast in the order they began. Beyond MAX_POINTS broadcasts, consecutive ones are
averaged into one point (the largest time kept), so the page stays small at any size.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from mpiscope.trace import Trace

MAX_POINTS = 2000
BCAST_CALLS = ["MPI_Bcast", "MPI_Bcast_c"]


def bcast_section(trace: Trace) -> dict[str, Any] | None:
    """The section's data; None where the run used the MPI's own broadcast."""
    recorded = trace.manifest.get("bcast") or {}
    mode = recorded.get("mode", "library")
    if mode == "library":
        return None
    swaps: list[dict[str, Any]] = list(recorded.get("swaps", []))
    instances = _instances(trace.events())
    comm = _communicator(instances, swaps)
    return {
        "mode": mode,
        "params": {k: v for k, v in recorded.items() if k not in ("mode", "swaps")},
        "comm": comm,
        **_series(instances.filter(pl.col("comm") == comm) if comm is not None else instances.clear()),
        "swaps": swaps,
    }


def _instances(events: pl.LazyFrame) -> pl.DataFrame:
    """Every MPI_Bcast instance (one scan of the events): its communicator, first entry, and the
    mean and largest per-process time (ns), in the order they began."""
    return (events.filter(pl.col("call").cast(pl.Utf8).is_in(BCAST_CALLS) & pl.col("coll_id").is_not_null())
            .with_columns((pl.col("t_leave_ns") - pl.col("t_enter_ns")).alias("d"))
            .group_by("coll_id")
            .agg(pl.col("comm").first(), pl.col("t_enter_ns").min().alias("first"),
                 pl.col("d").mean().alias("mean_ns"), pl.col("d").max().alias("max_ns"))
            .sort("first", "coll_id")
            .collect())


def _communicator(instances: pl.DataFrame, swaps: list[dict[str, Any]]) -> int | None:
    """The communicator the optimiser swapped on most, else the one with the most broadcasts."""
    if swaps:
        counts: dict[int, int] = {}
        for s in swaps:
            counts[int(s["comm"])] = counts.get(int(s["comm"]), 0) + 1
        return max(counts, key=lambda c: (counts[c], -c))
    busiest = instances.group_by("comm").len().sort("len", "comm", descending=[True, False]).head(1)
    return int(busiest["comm"][0]) if busiest.height else None


def _series(per: pl.DataFrame) -> dict[str, Any]:
    """One communicator's broadcasts in at most MAX_POINTS points (x: the first broadcast of
    each, from 1): the mean of their means, the largest of their largest times."""
    n = per.height
    if not n:
        return {"broadcasts": 0, "series": {"bcast": [], "mean_ns": [], "max_ns": []}}
    width = -(-n // MAX_POINTS)
    points = (per.with_row_index("i").with_columns((pl.col("i") // width).alias("bin"))
              .group_by("bin", maintain_order=True)
              .agg((pl.col("i").first() + 1).alias("bcast"), pl.col("mean_ns").mean(), pl.col("max_ns").max()))
    return {"broadcasts": n,
            "series": {"bcast": points["bcast"].to_list(), "mean_ns": points["mean_ns"].to_list(),
                       "max_ns": points["max_ns"].to_list()}}
