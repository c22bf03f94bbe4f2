"""The merge's recv_bytes from raw records: format 4 files carry a sub:recv_bytes record after a
collective that received other than it sent (a block marker may sit between); format 3 files
did not record it, so the column is null; tables merged before the column existed read as null."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest

from mpiscope.capture.manifest import write_manifest
from mpiscope.trace import open_trace
from mpiscope.trace import record as R
from mpiscope.trace.synthetic import call_id, calls_table, write_rank_file, write_world_comm

RANKS = 2


def rank_records(calls: list[dict], rank: int, version: int) -> np.ndarray:
    """A Bcast from rank 0 (16 bytes), an Allreduce (8 bytes: receives what it sends), a Gather to
    rank 0 (4 bytes each; the root receives 8), a Send from 0 to 1 and a Barrier. From format 4 on, a
    sub:recv_bytes record follows each collective call that received other than it sent; at
    the Gather's root a sub:block marker (the recorder switched blocks) sits between the two."""
    sub = call_id(calls, "sub:recv_bytes")
    rows: list[tuple[str, int, int, int, int]] = []  # call, peer, tag, bytes, t
    rows.append(("MPI_Bcast", 0, 0, 16 if rank == 0 else 0, 1000))
    if version >= 4:  # the root received nothing, the other rank the root's 16 bytes
        rows.append(("sub:recv_bytes", R.PEER_NONE, R.TAG_NONE, 0 if rank == 0 else 16, 1000))
    rows.append(("MPI_Allreduce", R.PEER_NONE, 1, 8, 2000))
    rows.append(("MPI_Gather", 0, 2, 4, 3000))
    if version >= 4 and rank == 0:
        rows.append(("sub:block", R.PEER_NONE, R.TAG_NONE, 0, 3000))
    if version >= 4:  # the root both ranks' 4 bytes, the other rank nothing
        rows.append(("sub:recv_bytes", R.PEER_NONE, R.TAG_NONE, 8 if rank == 0 else 0, 3000))
    rows.append(("MPI_Send" if rank == 0 else "MPI_Recv", 1 - rank, 5, 32, 4000))
    rows.append(("MPI_Barrier", R.PEER_NONE, 3, 0, 5000))
    rec = np.zeros(len(rows), R.REC_DTYPE)
    for i, (name, peer, tag, nbytes, t) in enumerate(rows):
        cid = sub if name == "sub:recv_bytes" else call_id(calls, name)
        rec[i] = (t + 10 * rank, t + 500 + 10 * rank, nbytes, 0x401000 + 16 * i, 0, peer, tag, 0, cid)
    return rec


def write_trace(out: Path, version: int) -> None:
    calls = calls_table()
    (out / "raw").mkdir(parents=True)
    for rank in range(RANKS):
        write_rank_file(out / "raw" / f"rank-{rank:06d}.msc", rank, RANKS, rank_records(calls, rank, version),
                        version=version)
        write_world_comm(out / "raw" / f"rank-{rank:06d}.comms", rank, RANKS)
    write_manifest(out, {"run_id": f"format{version}", "command": ["synthetic"], "calls": calls,
                         "ranks": RANKS, "merged": False})


def by_call(frame: pl.LazyFrame) -> dict[tuple[str, int], int | None]:
    ev = frame.select(pl.col("call").cast(pl.Utf8), "rank", "recv_bytes").collect()
    return {(c, r): v for c, r, v in ev.iter_rows()}


def test_format_4_records_received_bytes(tmp_path: Path) -> None:
    write_trace(tmp_path, 4)
    t = open_trace(tmp_path)
    assert t.manifest["recv_bytes_recorded"] is True
    assert by_call(t.events()) == {
        ("MPI_Bcast", 0): 0, ("MPI_Bcast", 1): 16,
        ("MPI_Allreduce", 0): 8, ("MPI_Allreduce", 1): 8,
        ("MPI_Gather", 0): 8, ("MPI_Gather", 1): 0,
        ("MPI_Send", 0): None, ("MPI_Recv", 1): None,  # point-to-point: the message's bytes say it
        ("MPI_Barrier", 0): 0, ("MPI_Barrier", 1): 0,
    }
    colls = t.collectives().select(pl.col("call").cast(pl.Utf8), "bytes", "recv_bytes").sort("call").collect()
    assert colls.rows() == [("MPI_Allreduce", 16, 16), ("MPI_Barrier", 0, 0), ("MPI_Bcast", 16, 16),
                           ("MPI_Gather", 8, 8)]


@pytest.mark.parametrize("version", [1, 2, 3])
def test_older_formats_read_with_null_recv_bytes(tmp_path: Path, version: int) -> None:
    write_trace(tmp_path, version)
    t = open_trace(tmp_path)
    assert t.manifest["recv_bytes_recorded"] is False
    ev = t.events().collect()
    assert ev.height == 2 * 5 and ev["recv_bytes"].null_count() == ev.height
    assert ev.filter(pl.col("call").cast(pl.Utf8) == "MPI_Bcast")["bytes"].to_list() == [16, 0]
    assert t.collectives().collect()["recv_bytes"].null_count() == 4


def test_tables_merged_before_recv_bytes_read_as_null(tmp_path: Path) -> None:
    """events.parquet and collectives.parquet of schema mpiscope.trace/1 have no recv_bytes."""
    write_trace(tmp_path, 4)
    open_trace(tmp_path)
    for name in ("events", "collectives"):
        path = tmp_path / f"{name}.parquet"
        pl.read_parquet(path).drop("recv_bytes").write_parquet(path)
    t = open_trace(tmp_path)
    for frame in (t.events(), t.collectives()):
        got = frame.select("recv_bytes").collect()["recv_bytes"]
        assert got.dtype == pl.Int64 and got.null_count() == got.len() > 0
