"""Each table of a trace as CSV (spreadsheets, R, anything that reads text): one file
per table in the output directory, streamed from the Parquet tables by Polars.

List columns (a communicator's members) become space-separated ranks, since CSV has no
lists; the call and call-site categories become their text.
"""

from __future__ import annotations

import time
from pathlib import Path

import polars as pl

from mpiscope.export import ExportResult, Progress, staged_output
from mpiscope.trace import TABLES, Trace


def _csv_ready(lf: pl.LazyFrame) -> pl.LazyFrame:
    schema = lf.collect_schema()
    return lf.with_columns(
        *[
            pl.col(c).cast(pl.List(pl.Utf8)).list.join(" ")
            for c, t in schema.items()
            if isinstance(t, pl.List)
        ],
        *[pl.col(c).cast(pl.Utf8) for c, t in schema.items() if isinstance(t, (pl.Enum, pl.Categorical))],
    )


def export_csv(
    trace: Trace, out: Path, force: bool = False, progress: Progress | None = None
) -> ExportResult:
    """Write events.csv, messages.csv, collectives.csv and comms.csv into directory `out`."""
    t_start = time.perf_counter()
    rows = 0
    events = int(trace.events().select(pl.len()).collect(engine="streaming").item())
    with staged_output(out, force, is_dir=True) as stage:
        for name in TABLES:
            lf = getattr(trace, name)()
            # the streaming engine writes row group by row group: memory stays flat
            _csv_ready(lf).sink_csv(stage / f"{name}.csv")
            n = int(lf.select(pl.len()).collect(engine="streaming").item())
            rows += n
            if progress:
                progress(n if name == "events" else 0)
    return ExportResult(
        "csv", out, events, rows, time.perf_counter() - t_start, files=[f"{name}.csv" for name in TABLES]
    )
