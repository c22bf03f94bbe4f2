"""How the merged tables are stored (trace/storage.py): open_trace returns, column for column and
row for row, what it returned from the tables as they were written before issue 22 (every integer
delta-encoded, every time absolute), on the checked-in raw traces; any row decodes exactly, nulls
included; decode is row-local; the columns readers filter row groups by keep their statistics
and filters on them still reach the Parquet scan."""

from __future__ import annotations

import sys
import tarfile
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow.parquet as pq
import pytest
from polars.testing import assert_frame_equal

import mpiscope.trace.merge  # noqa: F401 - its modules bind write_table, patched below
from mpiscope.trace import TABLES, Trace, open_trace, storage, table_files
from mpiscope.trace.merge import merge_trace
from mpiscope.trace.storage import FILTER_COLUMNS, decode, read_table, write_table, write_table_v3

DATA = Path(__file__).parent.parent / "data" / "merge"


def with_old_writer(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every merge module that writes tables writes them as before issue 22 (no derived times)."""
    for name, module in list(sys.modules.items()):
        if name.startswith("mpiscope.trace") and getattr(module, "write_table", None) is storage.write_table:
            monkeypatch.setattr(module, "write_table", lambda df, path, compact=False: write_table_v3(df, path))
    monkeypatch.setattr(mpiscope.trace.merge, "with_derived_times", lambda name, df, events: df)


def public_tables(path: Path) -> dict[str, pl.DataFrame]:
    t = open_trace(path, merge=False)
    return {name: getattr(t, name)().collect() for name in TABLES}


def assert_read_as_before(old: Path, new: Path) -> None:
    before, now = public_tables(old), public_tables(new)
    for name in TABLES:
        assert now[name].columns == before[name].columns, name
        assert now[name].schema == before[name].schema, name
        assert_frame_equal(now[name], before[name])


@pytest.mark.parametrize("name", sorted(p.name for p in DATA.iterdir()))
def test_checked_in_traces_read_as_before(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    old, new = tmp_path / "old", tmp_path / "new"
    for where in (old, new):
        with tarfile.open(DATA / name / "trace.tar.xz") as tar:
            tar.extractall(where, filter="data")
    with monkeypatch.context() as m:
        with_old_writer(m)
        merge_trace(old)
    merge_trace(new)
    assert storage.ENTRY_GAP in pl.read_parquet_schema(table_files(new, "events")[0])
    assert "t_leave_ns" in pl.read_parquet_schema(table_files(old, "events")[0])
    assert "t_recv_leave_ns@recv_event" in pl.read_parquet_schema(new / "messages.parquet")
    assert "t_last_leave_ns@coll_id" in pl.read_parquet_schema(new / "collectives.parquet")
    assert_read_as_before(old, new)


def round_trip(tmp_path: Path, df: pl.DataFrame, name: str) -> pl.DataFrame:
    write_table(df, tmp_path / f"{name}.parquet")
    return read_table(tmp_path / f"{name}.parquet", name)


def test_rows_with_null_bases_decode_exactly(tmp_path: Path) -> None:
    """A call that never returned (t_leave null) yet has a completion, messages whose send or
    receive never completed: the time is stored whole where its base is null."""
    events = pl.DataFrame({
        "event": [0, 1, 2, 3], "rank": pl.Series([0, 0, 1, 1], dtype=pl.Int32),
        "t_enter_ns": [10, 20, 30, 2**60], "t_leave_ns": [15, None, 40, 2**60 + 7],
        "t_complete_ns": [50, 60, None, 2**61],
    })
    assert_frame_equal(round_trip(tmp_path, events, "events"), events)
    messages = pl.DataFrame({
        "src": pl.Series([0, 1, 2], dtype=pl.Int32), "dst": pl.Series([1, 2, 0], dtype=pl.Int32),
        "t_send_enter_ns": [100, 200, 300], "t_send_leave_ns": [None, 250, 310],
        "t_recv_enter_ns": [90, 205, 290], "t_recv_leave_ns": [120, None, 5],
        "send_event": [4, 9, 12], "recv_event": [7, 1, 3],
    })
    assert_frame_equal(round_trip(tmp_path, messages, "messages"), messages)
    stored = pl.read_parquet_schema(tmp_path / "messages.parquet")
    assert list(stored) == ["src", "dst", "t_send_enter_ns", "t_send_leave_ns-t_send_enter_ns",
                            "t_recv_enter_ns-t_recv_leave_ns", "t_recv_leave_ns-t_send_enter_ns",
                            "send_event", "recv_event"]


def test_tables_written_before_pass_as_they_are(tmp_path: Path) -> None:
    df = pl.DataFrame({"event": [0, 1], "t_enter_ns": [5, 9], "t_leave_ns": [7, 11]})
    write_table_v3(df, tmp_path / "events.parquet")
    assert_frame_equal(read_table(tmp_path / "events.parquet", "events"), df)


def test_parts_of_a_dataset_decode_as_one(tmp_path: Path) -> None:
    """Each part's entries add up from its own first row (a merge in pieces writes them apart)."""
    df = pl.DataFrame({"event": range(6), "t_enter_ns": [1, 2, 3, 10, 20, 30],
                       "t_leave_ns": [2, 3, 4, 15, 25, None], "recv_bytes": [None] * 6, "count": [1] * 6})
    (tmp_path / "events").mkdir()
    write_table(df.head(3), tmp_path / "events" / "part-000000.parquet", compact=True)
    write_table(df.tail(3), tmp_path / "events" / "part-000001.parquet", compact=True)
    assert pl.read_parquet(tmp_path / "events" / "part-000001.parquet")[storage.ENTRY_GAP][0] == 10
    assert_frame_equal(Trace(tmp_path, {}).events().collect(), df, check_dtypes=False)


@pytest.fixture(scope="module")
def merged(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("halo")
    with tarfile.open(DATA / "skew5" / "trace.tar.xz") as tar:
        tar.extractall(path, filter="data")
    merge_trace(path)
    return path


@pytest.mark.parametrize("name", TABLES)
def test_decode_streams(merged: Path, name: str) -> None:
    """No join, sort or window in a table's plan (streaming, in bounded memory): the events' entries
    a running sum, the derived times gathered by the IO source."""
    plan = getattr(open_trace(merged, merge=False), name)().explain().upper()
    for word in ("JOIN", "SORT", "OVER", "WINDOW", "GROUP"):
        assert word not in plan, (word, plan)


def test_derived_times_read_the_events_only_when_asked(merged: Path, tmp_path: Path) -> None:
    """Matrices and counts (stats) read no event; a message's times come from its events."""
    import shutil
    copy = tmp_path / "copy"
    shutil.copytree(merged, copy)
    t = open_trace(copy, merge=False)
    whole = t.messages().collect()
    stored = pl.read_parquet_schema(copy / "messages.parquet")
    assert "t_send_enter_ns@send_event" in stored and "t_send_enter_ns" not in stored
    assert_frame_equal(t.collectives().collect(), open_trace(merged, merge=False).collectives().collect())
    (copy / "events.parquet").write_bytes(b"not parquet")
    fresh = open_trace(copy, merge=False)  # (t keeps the events' times it read)
    envelope = fresh.messages().filter(pl.col("src") == 1).select("src", "dst", "bytes").collect()
    assert_frame_equal(envelope, whole.filter(pl.col("src") == 1).select("src", "dst", "bytes"))
    assert_frame_equal(t.messages().collect(), whole)
    with pytest.raises(Exception):
        fresh.messages().select("t_send_enter_ns").collect()


def stats_of(path: Path) -> dict[str, Any]:
    md = pq.ParquetFile(path).metadata
    group = md.row_group(0)
    return {group.column(i).path_in_schema: group.column(i).statistics for i in range(md.num_columns)}


def test_filter_columns_keep_statistics(merged: Path) -> None:
    for name in ("events", "messages", "collectives"):
        stats = stats_of(merged / f"{name}.parquet")
        for column in FILTER_COLUMNS & set(stats):
            assert stats[column] is not None and stats[column].has_min_max, (name, column)
        assert all(s is None for c, s in stats.items() if "-" in c or "@" in c), name


def test_filters_by_rank_reach_the_scan(merged: Path) -> None:
    t = open_trace(merged, merge=False)
    q = t.messages().filter(pl.col("src") == 1).select("dst")
    assert 'col("src")' in q.explain().split("SCAN")[1], q.explain()


def test_a_merge_in_pieces_keeps_timestamps_to_filter_by(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Traces too large for memory are read by rank and time range: their events keep t_enter_ns a
    timestamp with statistics, their messages t_send_enter_ns, and filters on them reach the scan."""
    from tests.unit.test_merge_pieces import budget_for, in_pieces_only

    with tarfile.open(DATA / "skew5" / "trace.tar.xz") as tar:
        tar.extractall(tmp_path, filter="data")
    in_pieces_only(monkeypatch)
    merge_trace(tmp_path, memory=budget_for(tmp_path))
    for name, stamp in (("events", "t_enter_ns"), ("messages", "t_send_enter_ns")):
        part = table_files(tmp_path, name)[0]
        stats = stats_of(part)
        assert stats[stamp] is not None and stats[stamp].has_min_max, name
        raw = pl.read_parquet(part, columns=[stamp])[stamp]
        assert (stats[stamp].min, stats[stamp].max) == (raw.min(), raw.max())
    t = open_trace(tmp_path, merge=False)
    q = t.events().filter((pl.col("rank") == 1) & (pl.col("t_enter_ns") > 5)).select("t_leave_ns")
    scan = q.explain().split("Parquet SCAN")[1]
    assert 'col("rank")' in scan and 'col("t_enter_ns")' in scan, q.explain()
    q = t.messages().filter(pl.col("t_send_enter_ns") < 10**18).select("t_recv_leave_ns")
    assert 'col("t_send_enter_ns")' in q.explain().split("Parquet SCAN")[1], q.explain()
