"""OTF2 export of a generated trace (no MPI): the archive reads back with the `otf2`
reader and with otf2-print (Debian's otf2-tools) with the calls, messages and collective
instances of the tables, every timestamp within 1 ns; definitions as Vampir expects."""

from __future__ import annotations

import shutil
from pathlib import Path

import polars as pl
import pytest
from tests.conftest import merged_halo, require
from tests.unit.export_readback import check_otf2, read_otf2, read_otf2_print

from mpiscope.export import pool
from mpiscope.export.otf2 import export_otf2
from mpiscope.trace import Trace

RANKS, EVENTS = 4, 4000


@pytest.fixture(scope="module")
def halo(tmp_path_factory: pytest.TempPathFactory) -> Trace:
    return merged_halo(tmp_path_factory.mktemp("halo"), RANKS, EVENTS)


def test_round_trip_with_the_otf2_reader(halo: Trace, tmp_path: Path) -> None:
    r = export_otf2(halo, tmp_path / "otf2")
    counts = check_otf2(halo, read_otf2(tmp_path / "otf2"))
    assert counts["messages"] == halo.messages().select(pl.len()).collect().item() > 0
    assert counts["instances"] == halo.collectives().select(pl.len()).collect().item() > 0
    assert r.events == counts["calls"] and (tmp_path / "otf2" / "traces.otf2").is_file()


def test_round_trip_with_otf2_print(halo: Trace, tmp_path: Path) -> None:
    require(
        shutil.which("otf2-print") is not None,
        "otf2-print (Debian's otf2-tools)",
        "apt-get install otf2-tools (make setup does it when run as root)",
    )
    export_otf2(halo, tmp_path / "otf2")
    check_otf2(halo, read_otf2_print(tmp_path / "otf2"))


def test_parallel_parts_equal_one_process(
    halo: Trace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Worker processes write the ranks' event files in parts; the stitched archive is the same."""
    monkeypatch.setattr(pool, "INLINE_EVENTS", 0)
    export_otf2(halo, tmp_path / "parallel", workers=2)
    export_otf2(halo, tmp_path / "serial", workers=1)
    a, b = read_otf2(tmp_path / "parallel"), read_otf2(tmp_path / "serial")
    assert a.sort(a.columns).equals(b.sort(b.columns))
    check_otf2(halo, a)


def test_ranks_read_in_batches_equal_read_at_once(
    halo: Trace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Calls and messages are read a batch of ranks at a time: a rank per batch gives the same archive."""
    from mpiscope.export import tables

    export_otf2(halo, tmp_path / "whole", workers=1)
    monkeypatch.setattr(tables, "MESSAGE_BATCH", 1)
    monkeypatch.setattr(tables, "ROWS_PER_BATCH", 1)
    export_otf2(halo, tmp_path / "batched", workers=1)
    a, b = read_otf2(tmp_path / "whole"), read_otf2(tmp_path / "batched")
    assert a.height > 0 and a.sort(a.columns).equals(b.sort(b.columns))


def test_each_rank_leaves_memory_once_written(halo: Trace, tmp_path: Path) -> None:
    """OTF2 holds a location's events in memory until its writer is closed: each rank's event
    files are on disk (and out of memory) before the next rank is written, not at the
    archive's close, so the export's memory follows one rank, not the trace."""
    on_disk: list[int] = []

    def progress(n: int) -> None:  # called once a rank is written
        on_disk.append(sum(f.stat().st_size for f in tmp_path.glob("*.partial/.part-*/traces/*.evt")))

    export_otf2(halo, tmp_path / "otf2", progress=progress, workers=1)
    assert len(on_disk) == RANKS and 0 < on_disk[0] < on_disk[1] < on_disk[-1]


def test_definitions(halo: Trace, tmp_path: Path) -> None:
    import otf2
    from otf2.enums import Paradigm, RegionRole

    export_otf2(halo, tmp_path / "otf2")
    t0 = halo.events().select(pl.col("t_enter_ns").min()).collect().item()
    with otf2.reader.open(str(tmp_path / "otf2" / "traces.otf2")) as tr:
        d = tr.definitions
        assert d.clock_properties.timer_resolution == 1_000_000_000
        assert d.clock_properties.global_offset == t0
        assert sorted(g.name for g in d.location_groups) == [f"MPI Rank {r}" for r in range(RANKS)]
        assert all(loc.group.system_tree_parent.name == "synthetic" for loc in d.locations)
        regions = {r.name: r for r in d.regions}
        assert set(regions) == {"MPI_Irecv", "MPI_Isend", "MPI_Waitall", "MPI_Allreduce"}
        assert all(r.paradigm == Paradigm.MPI for r in regions.values())
        assert regions["MPI_Allreduce"].region_role == RegionRole.COLL_ALL2ALL
        assert regions["MPI_Isend"].region_role == RegionRole.POINT2POINT
        world = next(c for c in d.comms if c.name == "MPI_COMM_WORLD")
        assert [m.group.name for m in world.group.members] == [f"MPI Rank {r}" for r in range(RANKS)]
        assert sum(loc.number_of_events for loc in d.locations) > 2 * RANKS * (EVENTS // RANKS // 2)


def test_recv_bytes_read_from_the_events_when_recorded(halo: Trace) -> None:
    """Collectives' received bytes: the events' `recv_bytes` column when the trace records it
    (here: allreduces of 8 bytes); before that, what the tables tell (allreduces: 0)."""
    from mpiscope.export.streams import with_recv_bytes

    colls = halo.events().filter(pl.col("coll_id").is_not_null()).with_columns(pl.col("call").cast(pl.Utf8))
    assert (with_recv_bytes(halo, colls).collect()["recv_bytes"] == 8).all()
    recorded = colls.with_columns(pl.lit(24, pl.Int64).alias("recv_bytes"))
    assert (with_recv_bytes(halo, recorded).collect()["recv_bytes"] == 24).all()


def test_long_ranks_are_written_in_chunks(
    halo: Trace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A rank's records reach the writer a chunk at a time; chunk boundaries change nothing."""
    from mpiscope.export import streams

    export_otf2(halo, tmp_path / "whole")
    monkeypatch.setattr(streams, "CHUNK", 7)
    export_otf2(halo, tmp_path / "chunks")
    a, b = read_otf2(tmp_path / "whole"), read_otf2(tmp_path / "chunks")
    assert a.equals(b)


def test_communicators_have_their_parents(tmp_path: Path) -> None:
    """The recorded communicator example (tests/data/merge/comms): MPI_Comm_dup of the world is
    comm 10, MPI_Comm_split of it makes 8 and 9; Score-P gives each its parent, so does the export.
    The intercommunicator (11), made from 8 on one side and 9 on the other, has none."""
    import tarfile

    import otf2

    from mpiscope.trace import open_trace
    from mpiscope.trace.merge import merge_trace

    with tarfile.open(Path(__file__).parent.parent / "data" / "merge" / "comms" / "trace.tar.xz") as tar:
        tar.extractall(tmp_path / "t", filter="data")
    merge_trace(tmp_path / "t")
    export_otf2(open_trace(tmp_path / "t", merge=False), tmp_path / "otf2")
    with otf2.reader.open(str(tmp_path / "otf2" / "traces.otf2")) as tr:
        parent = {c.name: c.parent.name if c.parent is not None else None for c in tr.definitions.comms}
        group = {c.name: (c.group.name, [m._ref for m in c.group.members]) for c in tr.definitions.comms}
        comm_groups = [g for g in tr.definitions.groups if g.group_type == otf2.GroupType.COMM_GROUP]
    assert parent["MPI_COMM_WORLD"] is None and parent["comm 10"] == "MPI_COMM_WORLD"
    assert parent["comm 8"] == parent["comm 9"] == "comm 10" and parent["comm 11"] is None
    # communicators of the same members share their group (the otf2 package writes each group by a scan
    # of all of them: 10,000 duplicates of MPI_COMM_WORLD took 135 s)
    assert group["comm 10"] == group["MPI_COMM_WORLD"] and group["comm 10"][0] == "MPI_COMM_WORLD group"
    assert len(comm_groups) == len({tuple(members) for _, members in group.values()})
