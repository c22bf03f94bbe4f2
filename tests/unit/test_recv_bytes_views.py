"""Collectives' received bytes in `stats` and in the density view's bins (sent + received at the
call's entry), on the synthetic format 4 trace of test_recv_bytes_reader."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl
from tests.unit.test_recv_bytes_reader import write_trace

from mpiscope.analysis.stats import summarize
from mpiscope.report import source
from mpiscope.report.density import BinInput, bin_input, compute_level
from mpiscope.trace import open_trace

# Bcast 16 from rank 0, Allreduce 8, Gather of 4 to rank 0, a 32-byte message 0 -> 1
SENT = {0: 16 + 8 + 4, 1: 0 + 8 + 4}
RECEIVED = {0: 0 + 8 + 8, 1: 16 + 8 + 0}
MESSAGE = 32


def test_stats_count_received_bytes_of_collectives(tmp_path: Path) -> None:
    write_trace(tmp_path, 4)
    s = summarize(open_trace(tmp_path))
    rows = {r["rank"]: r for r in s.per_rank.iter_rows(named=True)}
    assert {r: rows[r]["collective_bytes_sent"] for r in rows} == SENT
    assert {r: rows[r]["collective_bytes_received"] for r in rows} == RECEIVED
    assert rows[1]["bytes_received"] == MESSAGE
    per_call = dict(s.per_call.select("call", "recv_bytes").iter_rows())
    assert per_call["MPI_Bcast"] == 16 and per_call["MPI_Allreduce"] == 16 and per_call["MPI_Gather"] == 8
    assert s.to_json()["per_rank"][1]["collective_bytes_received"] == RECEIVED[1]


def test_stats_of_a_trace_without_received_bytes(tmp_path: Path) -> None:
    write_trace(tmp_path, 3)
    rows = summarize(open_trace(tmp_path)).per_rank
    assert rows["collective_bytes_received"].to_list() == [0, 0]
    assert rows["collective_bytes_sent"].to_list() == [SENT[0], SENT[1]]


def test_density_bins_count_sent_and_received_bytes(tmp_path: Path) -> None:
    write_trace(tmp_path, 4)
    c = source.load_columns(open_trace(tmp_path))
    lv = compute_level(BinInput.from_columns(c), 0)
    per_rank = lv.bytes.sum(axis=1)  # the report's path: event-tile columns with rbytes
    assert per_rank.tolist() == [SENT[0] + RECEIVED[0] + MESSAGE, SENT[1] + RECEIVED[1] + MESSAGE]
    narrow = source.bin_columns(c.events.lazy()).collect()  # the view cache's path: pbytes
    by_rank = narrow.group_by("rank").agg(pl.col("pbytes").sum()).sort("rank")["pbytes"].to_list()
    assert by_rank == [SENT[0] + RECEIVED[0], SENT[1] + RECEIVED[1]]
    cached = compute_level(bin_input(narrow, c.messages, c.ranks, c.span_ns), 0)
    np.testing.assert_array_equal(cached.bytes, lv.bytes)


def test_views_of_tables_merged_before_recv_bytes(tmp_path: Path) -> None:
    """A trace merged by an older mpiscope (schema mpiscope.trace/1, no recv_bytes columns):
    stats and the bins read it and count what its collectives sent."""
    write_trace(tmp_path, 4)
    open_trace(tmp_path)
    for name in ("events", "collectives"):
        path = tmp_path / f"{name}.parquet"
        pl.read_parquet(path).drop("recv_bytes").write_parquet(path)
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    manifest["schema"] = "mpiscope.trace/1"
    del manifest["recv_bytes_recorded"]
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    t = open_trace(tmp_path)
    assert summarize(t).per_rank["collective_bytes_received"].to_list() == [0, 0]
    lv = compute_level(BinInput.from_columns(source.load_columns(t)), 0)
    assert lv.bytes.sum(axis=1).tolist() == [SENT[0] + MESSAGE, SENT[1] + MESSAGE]
