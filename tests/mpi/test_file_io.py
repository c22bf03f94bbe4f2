"""MPI-IO is recorded (examples/checkpoint.c, with each MPI): every MPI_File_* call the program
makes, with the bytes it asks to read or write, and none of the MPI calls the MPI's I/O layer
(ROMIO, OMPIO) makes inside them; its time is file I/O in stats and the diagnosis, a FILE_IO
region in OTF2."""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import polars as pl
import pytest
from tests.conftest import MPICH, mpiscope_cli, require

from mpiscope.analysis.diagnose import diagnose
from mpiscope.report.source import FAMILIES, call_vocab

N = 4
ITERATIONS, BYTES, EVERY = 6, 65536, 3
ARGS = [str(ITERATIONS), str(BYTES), str(EVERY), "5"]
CHECKPOINTS = ITERATIONS // EVERY
# calls per rank (rank 0 also deletes the file)
IO_CALLS = {"MPI_File_open": 1, "MPI_File_write_at_all": CHECKPOINTS, "MPI_File_sync": CHECKPOINTS + 2, "MPI_File_get_size": 1,
            "MPI_File_set_view": 1, "MPI_File_read_at_all": 1, "MPI_File_read_at_all_begin": 1,
            "MPI_File_read_at_all_end": 1, "MPI_File_iread_at": 1, "MPI_File_read_at": 1, "MPI_File_close": 1}
MOVING = {"MPI_File_write_at_all", "MPI_File_read_at_all", "MPI_File_read_at_all_begin", "MPI_File_iread_at",
          "MPI_File_read_at"}
OTHER_CALLS = {"MPI_Sendrecv": ITERATIONS, "MPI_Allreduce": ITERATIONS + 1, "MPI_Bcast": 1, "MPI_Barrier": 2,
               "MPI_Wait": 1}


@pytest.mark.mpi(ranks=N)
def test_mpi_io_calls_recorded_with_their_bytes(run_traced, any_mpi):
    t = run_traced("checkpoint", N, args=ARGS, mpi=any_mpi)
    ev = t.events().with_columns(pl.col("call").cast(pl.Utf8)).collect()
    counts = ev.group_by("rank", "call").len()
    for rank in range(N):
        mine = dict(counts.filter(pl.col("rank") == rank).select("call", "len").iter_rows())
        expected = {**IO_CALLS, **OTHER_CALLS, **({"MPI_File_delete": 1} if rank == 0 else {})}
        # nothing the MPI's I/O layer calls inside them (its own allreduces, type calls) is recorded
        assert {c: n for c, n in mine.items() if c in expected or c.startswith("MPI_File_")} == expected, rank
        assert mine.get("MPI_Allreduce") == OTHER_CALLS["MPI_Allreduce"], rank
    io = ev.filter(pl.col("call").str.starts_with("MPI_File_"))
    assert (io.filter(pl.col("call").is_in(MOVING))["bytes"] == BYTES).all()
    assert (io.filter(~pl.col("call").is_in(MOVING))["bytes"] == 0).all()
    assert (io["t_leave_ns"] >= io["t_enter_ns"]).all()
    # a nonblocking read is tied to the MPI_Wait that completed it
    iread = io.filter(pl.col("call") == "MPI_File_iread_at")
    waits = ev.filter(pl.col("event").is_in(iread["completed_by"].implode()))
    assert iread.height == N and waits["call"].to_list() == ["MPI_Wait"] * N
    assert (iread["t_complete_ns"] == waits.sort("event")["t_leave_ns"]).all()
    world = ev.filter(pl.col("call") == "MPI_Bcast")["comm"].unique().to_list()
    assert ev.filter(pl.col("call") == "MPI_File_open")["comm"].unique().to_list() == world
    # the checkpoint's collective writes are no messages
    assert t.manifest["counts"]["messages"] == N * ITERATIONS


@pytest.mark.mpi(ranks=N)
def test_mpi_io_time_is_file_io_in_stats_diagnosis_and_otf2(run_traced, tmp_path):
    t = run_traced("checkpoint", N, args=ARGS, mpi=MPICH)
    ev = t.events().with_columns(pl.col("call").cast(pl.Utf8)).collect()
    io = ev.filter(pl.col("call").str.starts_with("MPI_File_"))
    # the MPI_Wait that completed each rank's MPI_File_iread_at is I/O time too (it completed nothing else)
    wait = ev.filter(pl.col("event").is_in(io["completed_by"].drop_nulls().implode()))
    assert wait["call"].to_list() == ["MPI_Wait"] * N
    io_ns = dict(pl.concat([io, wait]).group_by("rank").agg((pl.col("t_leave_ns") - pl.col("t_enter_ns")).sum())
                 .iter_rows())

    done = mpiscope_cli(["stats", str(t.path), "--json", "-"])
    assert done.returncode == 0, done.stderr
    per_rank = {r["rank"]: r for r in json.loads(done.stdout)["per_rank"]}
    assert {r: per_rank[r]["io_time_ns"] for r in range(N)} == io_ns
    # each rank wrote its block at each checkpoint and read it back four ways (the split read's end: 0 B)
    assert all(per_rank[r]["io_bytes_written"] == CHECKPOINTS * BYTES for r in range(N))
    assert all(per_rank[r]["io_bytes_read"] == 4 * BYTES for r in range(N))
    shown = mpiscope_cli(["stats", str(t.path)], env={"COLUMNS": "220"})
    assert "of it MPI-IO" in shown.stdout and "file written" in shown.stdout

    # the report's time-line and bars draw it in a family of its own
    names, codes = call_vocab(t)
    io_code = FAMILIES.index("file I/O")
    assert {n for n, c in zip(names, codes) if c == io_code} == {n for n in names if n.startswith("MPI_File_")}

    d = diagnose(t).to_json()
    # one thread per rank: the union of a rank's MPI-IO calls is their sum
    assert [round(r["io_seconds"] * 1e9) for r in d["per_rank"]] == [io_ns[r] for r in range(N)]
    total = sum(io_ns.values())
    found = [f for f in d["findings"] if f["kind"] == "file_io"]
    if total >= 0.01 * sum(r["app_seconds"] for r in d["per_rank"]) * 1e9:
        (f,) = found
        assert f["seconds"] == pytest.approx(total / 1e9) and "MPI-IO" in f["text"] and "MPI_File_" in f["text"]

    require(shutil.which("otf2-print") is not None, "otf2-print (Debian's otf2-tools)",
            "apt-get install otf2-tools (make setup does it when run as root)")
    assert mpiscope_cli(["export", str(t.path), "--format", "otf2", "-o", str(tmp_path / "otf2")]).returncode == 0
    defs = subprocess.run(["otf2-print", "-G", str(tmp_path / "otf2" / "traces.otf2")], capture_output=True,
                          text=True, check=True).stdout
    roles = dict(re.findall(r'REGION .*?Name: "(MPI_\w+)".*?Role: (\w+)', defs))
    assert {c: roles[c] for c in IO_CALLS} == dict.fromkeys(IO_CALLS, "FILE_IO")
    assert roles["MPI_Allreduce"] != "FILE_IO"
