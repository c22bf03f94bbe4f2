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
