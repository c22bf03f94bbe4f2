"""A call that completes several requests (Waitall, Waitsome, Testall) carries in `bytes` what
the receives it completed received, as an MPI_Wait does; the sends it completes add nothing.
(The merge in pieces does the same: tests/unit/test_merge_pieces.py compares it row by row.)"""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from tests.conftest import MPICH, mpiscope_cli, record_python

from mpiscope.mpi.build import compile_program
from mpiscope.trace import open_trace

PROGRAM = Path(__file__).parent / "programs" / "completed_bytes.c"


@pytest.mark.mpi(ranks=2)
def test_multi_completions_carry_the_bytes_they_received(tmp_path: Path, build_dir: Path) -> None:
    exe = compile_program(PROGRAM, mpicc=str(MPICH.mpicc), extra=["-O0"], out_dir=build_dir / "completed")
    out = tmp_path / "t"
    done = mpiscope_cli(["run", "--out", str(out), "--", *MPICH.launch(2), str(exe)], env=MPICH.environ())
    assert done.returncode == 0, done.stderr[-2000:]
    ev = (open_trace(out).events().filter(pl.col("rank") == 1)
          .group_by(pl.col("call").cast(pl.Utf8)).agg(pl.col("bytes").sum(), pl.len()).collect())
    got = dict(zip(ev["call"].to_list(), ev["bytes"].to_list()))
    assert got["MPI_Waitall"] == 3000  # 1000 + 2000 received, the 100-byte send adds nothing
    assert got["MPI_Waitsome"] == 7000
    assert got["MPI_Testall"] == 11000  # the polls that completed nothing add nothing
    assert got["MPI_Wait"] == 6000


ISENDRECV = """
import numpy as np
from mpi4py import MPI
w = MPI.COMM_WORLD
o = 1 - w.Get_rank()
s, big = np.ones(1, "d"), np.zeros(100, "d")
w.Isendrecv(s, o, 1, big, o, 1).Wait()       # 8 bytes into an 800-byte buffer
req = w.Irecv(big, o, 2)
w.Send(s, o, 2)
req.Wait()
b = np.ones(3, "d")
w.Isendrecv_replace(b, o, 3, o, 3).Wait()     # 24 bytes each way
"""


@pytest.mark.mpi(ranks=2)
def test_a_receive_holds_what_its_message_held(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """MPICH 5.0 completes an MPI_Isendrecv with a status of another tag and count, which the recorder
    does not take: it records the receive half's buffer (800 bytes for an 8-byte message). The merge
    takes the message's size, in messages' recv_bytes and in the MPI_Wait that completed it, in one
    pass and in pieces alike."""
    from tests.unit.test_merge_pieces import assert_same_merge, budget_for, copy, in_pieces_only

    from mpiscope.trace.merge import merge_trace

    t = record_python(tmp_path, ISENDRECV, 2)
    out = t.path
    m = t.messages().collect()
    assert m.height == 6 and (m["recv_bytes"] == m["bytes"]).all(), m
    waits = t.events().filter(pl.col("call").cast(pl.Utf8) == "MPI_Wait").sort("rank", "event").collect()
    assert waits["bytes"].to_list() == [8, 8, 24] * 2
    pieces = copy(out, tmp_path / "pieces")
    in_pieces_only(monkeypatch)
    merge_trace(pieces, memory=budget_for(pieces))
    assert_same_merge(out, pieces)
