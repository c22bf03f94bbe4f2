"""A rank whose threads are in MPI at once: its MPI time and its waiting are wall time (each moment
counted once), never more than its run; the call tables keep each call's own time."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from tests.conftest import MPICH, mpiscope_cli

from mpiscope.mpi.build import compile_program
from mpiscope.trace import open_trace

PROGRAM = Path(__file__).parent / "programs" / "threads_in_mpi.c"


@pytest.mark.mpi(ranks=2)
def test_threads_in_mpi_at_once_count_once(tmp_path, build_dir):
    exe = compile_program(PROGRAM, mpicc=str(MPICH.mpicc), extra=["-O0", "-pthread"], out_dir=build_dir / "threads")
    out = tmp_path / "t"
    done = mpiscope_cli(["run", "--out", str(out), "--", *MPICH.launch(2), str(exe), "200"], env=MPICH.environ())
    assert done.returncode == 0, done.stderr[-2000:]
    recvs = (open_trace(out).events().filter((pl.col("rank") == 0) & (pl.col("call").cast(pl.Utf8) == "MPI_Recv"))
             .select("thread", "t_enter_ns", "t_leave_ns").sort("t_enter_ns").collect())
    assert recvs["thread"].n_unique() == 2
    # the two receives' union, by hand: they overlap (both wait for rank 1's sleep)
    (a0, a1), (b0, b1) = recvs.select("t_enter_ns", "t_leave_ns").rows()
    union = (max(a1, b1) - a0) if b0 <= a1 else (a1 - a0) + (b1 - b0)
    both = (a1 - a0) + (b1 - b0)
    # both wait for most of rank 1's 200 ms sleep (less what rank 0's thread start-up took: 184 ms seen)
    assert union < 0.8 * both and union >= 0.1e9

    s = json.loads(mpiscope_cli(["stats", str(out), "--json", "-"]).stdout)
    r0 = s["per_rank"][0]
    assert r0["threads"] == 2 and r0["mpi_time_ns"] == union and r0["mpi_pct"] <= 100
    assert r0["outside_mpi_ns"] == r0["app_time_ns"] - union
    recv = next(c for c in s["per_call"] if c["call"] == "MPI_Recv")
    assert recv["total_ns"] == both and recv["count"] == 2
    text = mpiscope_cli(["stats", str(out)]).stdout
    assert "rank 0: several threads in MPI" in text

    d = json.loads(mpiscope_cli(["diagnose", str(out), "--json", "-"]).stdout)
    p0 = d["per_rank"][0]
    assert p0["mpi_seconds"] * 1e9 == pytest.approx(union, abs=1)
    assert 0.1 <= p0["wait_seconds"] <= p0["mpi_seconds"] <= p0["app_seconds"]
    waited = sum(w["seconds"] for w in d["wait_states"] if w["rank"] == 0)
    assert waited > 1.2 * p0["wait_seconds"]  # each thread's wait, in the wait states (overlap: as above)


WAITS = Path(__file__).parent / "programs" / "thread_waits.c"


@pytest.mark.mpi(ranks=2)
@pytest.mark.parametrize("mode", ["handoff", "order"])
def test_waits_between_threads(tmp_path, build_dir, mode):
    """A thread's computation before a late send is its own (the rank's previous call was another
    thread's receive, still waiting: the cause read 0 ms and "held up earlier"); a wait for another
    thread of the same rank is said so, with no rebalancing of ranks; a message another thread
    receives is no other order the waiting thread could have taken."""
    exe = compile_program(WAITS, mpicc=str(MPICH.mpicc), extra=["-pthread"], out_dir=build_dir / "thread_waits")
    out = tmp_path / "t"
    done = mpiscope_cli(["run", "--out", str(out), "--", *MPICH.launch(2), str(exe), mode], env=MPICH.environ())
    assert done.returncode == 0, done.stderr[-2000:]
    d = json.loads(mpiscope_cli(["diagnose", str(out), "--json", "-"]).stdout)
    senders = [w for w in d["wait_states"] if w["pattern"].startswith("late_sender") and w["call"] == "MPI_Recv"]
    assert senders and not any(w["pattern"] == "late_sender_wrong_order" for w in d["wait_states"]), senders
    found = [f for f in d["findings"] if f["kind"].startswith("late_sender")]
    assert found, d["findings"]
    if mode == "handoff":
        for f in found:
            assert "another thread of rank" in f["text"] and "rebalanc" in f["suggestion"], f
            assert "mpiscope rebalance" not in f["suggestion"]
            assert f["delay_seconds_per_instance"] > 0.05, f  # the sending thread computed 150 ms
    else:
        late = next(f for f in found if f["cause_rank"] == 1)
        assert late["delay_seconds_per_instance"] > 0.05, late  # thread 0's 100 ms before sending
