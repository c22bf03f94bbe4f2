"""A call that completes several requests (Waitall, Waitsome, Testall) carries in `bytes` what
the receives it completed received, as an MPI_Wait does; the sends it completes add nothing.
(The merge in pieces does the same: tests/unit/test_merge_pieces.py compares it row by row.)"""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from tests.conftest import MPICH, mpiscope_cli

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
