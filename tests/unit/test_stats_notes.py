"""The per-call table's note on what the bytes of some calls are: nonblocking receives hold the
buffer posted, persistent sends the buffer once per request."""

from __future__ import annotations

import polars as pl

from mpiscope.analysis.stats import Stats


def test_per_call_note_says_what_receive_and_persistent_send_bytes_are() -> None:
    def note(calls: list[str]) -> str:
        empty = pl.DataFrame()
        return Stats("r", 2, empty, pl.DataFrame({"call": calls}), empty, empty, 0, 0).posted_note

    assert note(["MPI_Send", "MPI_Recv"]) == ""
    assert note(["MPI_Irecv"]).startswith("MPI_Irecv: bytes of the buffers posted")
    both = note(["MPI_Startall", "MPI_Send_init", "MPI_Recv_init"])
    assert both.startswith("MPI_Recv_init: bytes of the buffers posted")
    assert "MPI_Send_init: bytes of the buffer, once per request; the messages each MPI_Start" in both


def test_a_rank_without_events_keeps_its_row() -> None:
    """A rank killed before its MPI_Init returned recorded nothing: stats lists it with counts 0 and
    times null (it was missing from the table), and no rank's MPI share is NaN."""
    from mpiscope.analysis.stats import _every_rank, _mpi_pct

    per_rank = pl.DataFrame({"rank": pl.Series([0, 2], dtype=pl.Int32), "app_time_ns": [0, 10],
                             "mpi_time_ns": [0, 4], "calls": [0, 3]}).with_columns(_mpi_pct())
    rows = _every_rank(per_rank, 3).to_dicts()
    assert [r["rank"] for r in rows] == [0, 1, 2]
    assert rows[1] == {"rank": 1, "app_time_ns": None, "mpi_time_ns": None, "calls": 0, "mpi_pct": None}
    assert rows[0]["mpi_pct"] is None and rows[2]["mpi_pct"] == 40.0
