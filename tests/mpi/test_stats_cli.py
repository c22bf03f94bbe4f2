"""`mpiscope stats --json -` and `mpiscope demo` from the command line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.conftest import MPICH, mpiscope_cli

from mpiscope.mpi.build import compile_program


@pytest.mark.mpi(ranks=4)
def test_stats_json(run_traced):
    t = run_traced("ring", 4, args=["5", "100"])
    done = mpiscope_cli(["stats", str(t.path), "--json", "-"])
    assert done.returncode == 0 and "Traceback" not in done.stderr
    s = json.loads(done.stdout)
    assert s["schema"] == "mpiscope.stats/1" and s["ranks"] == 4
    assert s["unmatched_messages"] == 0
    assert [r["rank"] for r in s["per_rank"]] == [0, 1, 2, 3]
    assert all(r["bytes_sent"] == 500 and r["bytes_received"] == 500 for r in s["per_rank"])
    assert all(0 <= r["mpi_time_ns"] <= r["app_time_ns"] for r in s["per_rank"])
    assert all(r["rma_bytes_put"] == r["rma_bytes_get"] == 0 for r in s["per_rank"])
    text = mpiscope_cli(["stats", str(t.path)]).stdout
    assert "one-sided" not in text and "buffers posted" not in text  # ring.c receives with MPI_Recv
    from mpiscope.analysis.stats import summarize
    from mpiscope.report.payload import summary

    assert "rma_bytes_put" not in summary(summarize(t))["per_rank"][0]
    calls = {c["call"]: c for c in s["per_call"]}
    assert calls["MPI_Send"]["count"] == 20 and calls["MPI_Send"]["bytes"] == 2000
    # mpiP's view: call sites resolved to file:line of the example (built with -g)
    sites = {c["callsite"] for c in s["callsites"] if c["call"] == "MPI_Recv"}
    assert any("ring.c:" in site for site in sites), sites
    pairs = {(p["src"], p["dst"]): p for p in s["pairs"]}
    assert pairs[(0, 1)]["messages"] == 5 and pairs[(0, 1)]["bytes"] == 500


@pytest.mark.mpi(ranks=3)
def test_one_sided_bytes_per_rank(tmp_path: Path, build_dir: Path) -> None:
    """fence.c: each of 3 ranks puts one double to the next between 4 fences (3 iterations): 24 B
    each, none read; `stats` shows one-sided columns for such a run only (ring has none)."""
    exe = compile_program(Path(__file__).parent / "programs" / "fence.c", mpicc=str(MPICH.mpicc),
                          extra=["-O0"], out_dir=build_dir / "fence")
    out = tmp_path / "t"
    done = mpiscope_cli(["run", "--out", str(out), "--", *MPICH.launch(3), str(exe), "3", "1"],
                        env=MPICH.environ())
    assert done.returncode == 0, done.stderr[-2000:]
    per_rank = json.loads(mpiscope_cli(["stats", str(out), "--json", "-"]).stdout)["per_rank"]
    assert [(r["rma_bytes_put"], r["rma_bytes_get"]) for r in per_rank] == [(24, 0)] * 3
    assert "one-sided put" in mpiscope_cli(["stats", str(out)]).stdout
    from mpiscope.analysis.stats import summarize
    from mpiscope.report.payload import summary
    from mpiscope.trace import open_trace

    rows = summary(summarize(open_trace(out)))["per_rank"]  # the report's per-rank table
    assert [(r["rma_bytes_put"], r["rma_bytes_get"]) for r in rows] == [(24, 0)] * 3


def test_demo(tmp_path):
    """The README's `make demo`: S-CAT's gallery recorded, diagnosed and shown, a report each."""
    done = mpiscope_cli(["demo", "--out", str(tmp_path / "demo")], env=MPICH.environ(), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    for name in ("mm", "lu", "sor", "ep", "nqueens"):
        assert (tmp_path / "demo" / name / "events.parquet").is_file()
        report = tmp_path / "demo" / name / "report.html"
        assert report.is_file() and str(report) in done.stdout
    assert "finding:" in done.stdout
    bad = mpiscope_cli(["demo", "--only", "mm,fft"], env=MPICH.environ(), cwd=tmp_path)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "fft" in bad.stderr


@pytest.mark.mpi(ranks=2)
def test_nonblocking_receives_say_their_bytes_are_posted_buffers(tmp_path: Path, build_dir: Path) -> None:
    """irecv_capacity.c: rank 1 posts 10 MPI_Irecv of a 1 MiB buffer for 100-byte messages and
    cancels an 11th. The MPI_Irecv row counts the buffers posted (11 MiB) and says so; the 1,000
    bytes that arrived count at the MPI_Wait that completed them and in rank 1's received bytes."""
    exe = compile_program(Path(__file__).parent / "programs" / "irecv_capacity.c", mpicc=str(MPICH.mpicc),
                          extra=["-O0"], out_dir=build_dir / "irecv_capacity")
    out = tmp_path / "t"
    done = mpiscope_cli(["run", "--out", str(out), "--", *MPICH.launch(2), str(exe)], env=MPICH.environ())
    assert done.returncode == 0, done.stderr[-2000:]
    s = json.loads(mpiscope_cli(["stats", str(out), "--json", "-"]).stdout)
    calls = {c["call"]: c for c in s["per_call"]}
    assert calls["MPI_Irecv"]["count"] == 11 and calls["MPI_Irecv"]["bytes"] == 11 << 20
    assert calls["MPI_Wait"]["bytes"] == calls["MPI_Send"]["bytes"] == s["per_rank"][1]["bytes_received"] == 1000
    text = mpiscope_cli(["stats", str(out)]).stdout
    assert "MPI_Irecv: bytes of the buffers posted" in " ".join(text.split())


SENDRECV_PROGRAM = """
from mpi4py import MPI
import numpy as np
comm = MPI.COMM_WORLD
if comm.Get_rank() == 0:
    comm.Sendrecv(np.zeros(10), dest=1, recvbuf=np.zeros(2), source=1)
else:
    comm.Recv(np.zeros(10), source=0)
    comm.Send(np.zeros(2), dest=0)
"""


def test_send_receives_say_what_they_received(tmp_path: Path) -> None:
    """A send-receive's bytes are what it sent; the per-call table's received column has its message's
    (it was blank: CoMD's halo of MPI_Sendrecv showed only what it sent). Its call site is the
    mpi4py method the program called."""
    from tests.conftest import record_python

    trace = record_python(tmp_path, SENDRECV_PROGRAM, 2)
    stats = json.loads(mpiscope_cli(["stats", str(trace.path), "--json", "-"]).stdout)
    (row,) = [c for c in stats["per_call"] if c["call"].startswith("MPI_Sendrecv")]
    assert (row["bytes"], row["recv_bytes"]) == (80, 16), row
    # mpi4py's call sites by their Python names (they read __pyx_pw_6mpi4py_3MPI_4Comm_..Sendrecv (MPI.c:?))
    sites = {c["call"].removesuffix("_c"): c["callsite"] for c in stats["callsites"]}
    assert sites["MPI_Sendrecv"] == "mpi4py.MPI.Comm.Sendrecv" and sites["MPI_Recv"] == "mpi4py.MPI.Comm.Recv", sites


@pytest.mark.parametrize("verb", ["stats", "diagnose"])
def test_a_json_file_is_written_when_the_tables_reader_stops_early(run_traced, tmp_path: Path, verb: str) -> None:
    """`mpiscope stats T --json F | head -1`: the reader closed the pipe while the tables were printed,
    before the JSON file was written, and it was lost; it is written first, and no traceback shows."""
    import subprocess
    import sys

    t = run_traced("ring", 2)
    out = tmp_path / f"{verb}.json"
    # `true` reads nothing and is gone long before the tables come: every write to the pipe fails
    done = subprocess.run(f"'{sys.executable}' -m mpiscope {verb} '{t.path}' --json '{out}' | true",
                          shell=True, capture_output=True, text=True, timeout=120, check=False)
    assert "Traceback" not in done.stderr, done.stderr
    assert json.loads(out.read_text())["run_id"] == t.manifest["run_id"]
