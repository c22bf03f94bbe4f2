"""Perfetto and Chrome JSON exports of a generated trace (no MPI): the protobuf parses with
the `perfetto` package's protos with a slice per call and a flow per message from its send
to its delivery; nonblocking operations are async slices; byte counters add up; Chrome
JSON is refused above its limit with a sentence naming perfetto."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from tests.conftest import merged_halo
from tests.unit.export_readback import check_perfetto, read_perfetto

from mpiscope.errors import UsageError
from mpiscope.export import chrome, pool
from mpiscope.export.chrome import export_chrome
from mpiscope.export.perfetto import export_perfetto, uuid
from mpiscope.trace import Trace

RANKS, EVENTS = 4, 4000


@pytest.fixture(scope="module")
def halo(tmp_path_factory: pytest.TempPathFactory) -> Trace:
    return merged_halo(tmp_path_factory.mktemp("halo"), RANKS, EVENTS)


def test_round_trip(halo: Trace, tmp_path: Path) -> None:
    r = export_perfetto(halo, tmp_path / "t.pftrace")
    slices, flows = read_perfetto(tmp_path / "t.pftrace")
    check_perfetto(halo, slices, flows)
    assert slices.height == r.events == halo.events().select(pl.len()).collect().item()
    assert sorted(slices["rank"].unique().to_list()) == list(range(RANKS))


def test_parallel_parts_equal_one_process(
    halo: Trace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pool, "INLINE_EVENTS", 0)
    export_perfetto(halo, tmp_path / "p.pftrace", workers=2)
    export_perfetto(halo, tmp_path / "s.pftrace", workers=1)
    assert (tmp_path / "p.pftrace").read_bytes() == (tmp_path / "s.pftrace").read_bytes()


def test_async_slices_and_counters(halo: Trace, tmp_path: Path) -> None:
    from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import Trace as PTrace
    from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import TrackEvent

    export_perfetto(halo, tmp_path / "t.pftrace")
    t = PTrace()
    t.ParseFromString((tmp_path / "t.pftrace").read_bytes())
    lanes = {p.track_descriptor.uuid for p in t.packet if p.track_descriptor.name == "nonblocking"}
    begins = [
        p
        for p in t.packet
        if p.track_event.track_uuid in lanes and p.track_event.type == TrackEvent.TYPE_SLICE_BEGIN
    ]
    ev = halo.events().collect()
    nonblocking = ev.filter(pl.col("t_complete_ns") > pl.col("t_leave_ns"))
    assert len(begins) == nonblocking.height > 0
    sent = {r: 0 for r in range(RANKS)}
    for p in t.packet:
        for r in range(RANKS):
            if p.track_event.type == TrackEvent.TYPE_COUNTER and p.track_event.track_uuid == uuid(4, r):
                sent[r] += p.track_event.counter_value
    m = halo.messages().group_by("src").agg(pl.col("bytes").sum()).collect()
    coll = ev.filter(pl.col("coll_id").is_not_null()).group_by("rank").agg(pl.col("bytes").sum())
    for r in range(RANKS):
        expect = m.filter(pl.col("src") == r)["bytes"].sum() + coll.filter(pl.col("rank") == r)["bytes"].sum()
        assert sent[r] == expect


def test_chrome_json(halo: Trace, tmp_path: Path) -> None:
    r = export_chrome(halo, tmp_path / "t.json")
    doc = json.loads((tmp_path / "t.json").read_text())
    events = doc["traceEvents"]
    complete = [e for e in events if e["ph"] == "X"]
    assert len(complete) == r.events == halo.events().select(pl.len()).collect().item()
    messages = halo.messages().select(pl.len()).collect().item()
    assert sum(e["ph"] == "s" for e in events) == sum(e["ph"] == "f" for e in events) == messages
    assert {e["pid"] for e in complete} == set(range(RANKS))


def test_chrome_json_refused_above_its_limit(
    halo: Trace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(chrome, "CHROME_MAX_EVENTS", 100)
    with pytest.raises(UsageError, match="--format perfetto") as e:
        export_chrome(halo, tmp_path / "t.json")
    assert str(e.value).count(". ") == 0 and not (tmp_path / "t.json").exists()
    assert list(tmp_path.iterdir()) == []


def test_long_ranks_are_written_in_chunks(
    halo: Trace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Chunk boundaries change nothing: the same slices, flows and nonblocking lanes."""
    from mpiscope.export import streams

    export_perfetto(halo, tmp_path / "whole.pftrace")
    monkeypatch.setattr(streams, "CHUNK", 7)
    export_perfetto(halo, tmp_path / "chunks.pftrace")
    whole, chunks = read_perfetto(tmp_path / "whole.pftrace"), read_perfetto(tmp_path / "chunks.pftrace")
    for a, b in zip(whole, chunks):
        assert a.sort(a.columns).equals(b.sort(b.columns))
    check_perfetto(halo, *chunks)
