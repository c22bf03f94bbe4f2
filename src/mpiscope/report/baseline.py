"""`--baseline BEFORE`: the earlier run beside this one (003 Fig. 7, Tables 2/3).

The page shows the two density views one above the other on the same relative
time scale (ns since each run's first event) and each rank's computation time
(time outside MPI) before and after.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mpiscope.analysis.stats import summarize
from mpiscope.errors import UsageError
from mpiscope.report import density, frame, payload, tiles
from mpiscope.report.density import BinInput
from mpiscope.report.source import load_columns
from mpiscope.trace import Trace


def check_ranks(before: Trace, after: Trace) -> None:
    if before.ranks != after.ranks:
        raise UsageError(
            f"the baseline {before.path} has {before.ranks} ranks and {after.path} has {after.ranks}; "
            f"compare two runs with the same number of ranks"
        )


def baseline(before: Trace, label: str | None = None) -> dict[str, Any]:
    """The protocol's `baseline` object: meta, summary, the level-0 bin tile, compute time per rank."""
    c = load_columns(before)
    s = summarize(before)
    lv = density.compute_level(BinInput.from_columns(c), 0)
    tile = frame.encode(
        {"bins": density.tile_table(lv, 0)},
        density.tile_attrs(0, 0, c.span_ns, c.ranks),
        tiles.BIN_ZLIB_LEVEL,
    )
    return {
        "meta": {**payload.meta(before, c.t0_ns, c.span_ns, "report"), "ranks": c.ranks},
        "summary": payload.summary(s),
        "density": frame.b64(tile),
        "compute_ns": s.per_rank.sort("rank")["outside_mpi_ns"].to_list(),
        "label": label or Path(before.path).name,
    }
