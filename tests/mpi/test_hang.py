"""A run stopped by a signal while its ranks were blocked (a time limit, Ctrl-C): the recorder keeps a
blocking call's envelope from its entry, the merge the time each rank was stopped, and the diagnosis
says what each rank waited for and whether they waited for each other (analysis/hang.py); the
statistics and the report count the time until they were stopped."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import polars as pl
import pytest
from tests.conftest import MPICH, mpiscope_cli

from mpiscope.analysis.stats import summarize
from mpiscope.capture.run import STOP_GRACE_S
from mpiscope.mpi.build import compile_program
from mpiscope.report.payload import per_family
from mpiscope.report.source import FAMILIES, load_columns
from mpiscope.trace import open_trace

PROGRAM = Path(__file__).parent / "programs" / "hang.c"
BLOCKED_S = 2.5  # how long the ranks are left blocked before the signal (HUNG_NS is 1 s)


def stopped_run(tmp_path: Path, mode: str) -> tuple[Path, dict]:
    """Record hang.c MODE (or hang.py: "python") on 3 ranks, stop it BLOCKED_S after it said "ready" with SIGINT to its
    process group (as Ctrl-C in a terminal, or `timeout -s INT`, does), and return the trace and its
    diagnosis as JSON."""
    if mode == "python":
        program = [sys.executable, str(PROGRAM.with_suffix(".py"))]
    else:
        program = [str(compile_program(PROGRAM, mpicc=str(MPICH.mpicc), out_dir=tmp_path / "bin")), mode]
    out = tmp_path / mode
    run = subprocess.Popen([sys.executable, "-m", "mpiscope", "run", "--out", str(out), "--",
                            *MPICH.launch(3), *program],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=MPICH.environ(),
                           start_new_session=True)
    assert run.stdout is not None
    deadline = time.monotonic() + 120
    while "ready" not in run.stdout.readline():
        assert run.poll() is None and time.monotonic() < deadline, run.stderr.read() if run.stderr else ""
    time.sleep(BLOCKED_S)
    os.killpg(run.pid, signal.SIGINT)
    _, err = run.communicate(timeout=120)
    assert "Traceback" not in err, err
    # stopped by Ctrl-C: the command says so and exits as a shell reports it (Hydra itself exits 0)
    assert run.returncode == 128 + signal.SIGINT and "interrupted" in err, (run.returncode, err)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["interrupted"] is True and manifest["exit_code"] == 128 + signal.SIGINT
    done = mpiscope_cli(["diagnose", str(out), "--json", "-"])
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    return out, json.loads(done.stdout)


@pytest.mark.mpi(ranks=3)
def test_receive_never_sent_is_a_deadlock_with_its_envelope(tmp_path):
    out, d = stopped_run(tmp_path, "recv")
    t = open_trace(out)
    # the envelope was written when MPI_Recv was entered: whom rank 1 waited for is in the trace
    recv = t.events().filter((pl.col("rank") == 1) & pl.col("t_leave_ns").is_null()).collect()
    assert recv["call"].to_list() == ["MPI_Recv"]
    assert (recv["peer"][0], recv["tag"][0], recv["bytes"][0], recv["comm"][0]) == (0, 7, 4, 0)
    # rank 1 was killed without a trace of it (SIGINT blocked, hang.c): stopped at the Ctrl-C
    assert t.manifest["rank_states"]["1"] == "cut off"
    ended = t.manifest["ended_ns"]
    assert int(ended["1"]) - recv["t_enter_ns"][0] >= BLOCKED_S * 1e9 * 0.9
    first = d["findings"][0]
    assert first["kind"] == "deadlock", first
    assert first["cycle"] == [1, 0, 1] and first["ranks"] == [0, 1]
    blocked = {b["rank"]: b for b in first["blocked"]}
    assert blocked[1]["call"] == "MPI_Recv" and blocked[1]["waits_for"] == [0]
    assert blocked[0]["call"] == "MPI_Barrier" and blocked[0]["waits_for"] == [1]
    assert blocked[1]["waited_ns"] >= BLOCKED_S * 1e9 * 0.9
    assert "for a message from rank 0 (tag 7)" in first["text"], first["text"]
    assert first["suggestion"].startswith("rank 0 never sent what rank 1 receives in MPI_Recv at main (hang.c:")
    # the report: the run lasted until it was stopped, and rank 1's MPI time was its receive (p2p)
    c = load_columns(t)
    assert c.span_ns >= BLOCKED_S * 1e9 * 0.9 and c.t0_ns + c.span_ns == max(int(ns) for ns in ended.values())
    stopped = {r: float(ns - c.t0_ns) for r, ns in t.stopped_ns.items()}
    families = per_family(c.events.lazy(), c.ranks, c.vocab.calls, stopped)
    assert families[1][FAMILIES.index("p2p")] >= BLOCKED_S * 1e9 * 0.9, families
    assert families[0][FAMILIES.index("collective")] >= BLOCKED_S * 1e9 * 0.9, families


@pytest.mark.mpi(ranks=3)
def test_a_python_rank_blocked_in_mpi_is_stopped_and_diagnosed(tmp_path):
    """Python's SIGINT handler sets a flag and returns, so Ctrl-C left an mpi4py job blocked in MPI
    running, and `mpiscope run` waiting for ever (Polars' SIGINT handler restarts its waitpid): the
    job is sent SIGTERM STOP_GRACE_S later. The recording goes on through Python's handler and ends
    at the SIGTERM; the deadlock is found."""
    started = time.monotonic()
    out, d = stopped_run(tmp_path, "python")
    assert time.monotonic() - started < BLOCKED_S + STOP_GRACE_S + 60
    t = open_trace(out)
    # Hydra kills what is left of a job once a rank died of the SIGTERM: a rank it reached before
    # its own SIGTERM handler ran (the suite's earlier tests made that happen about every other run
    # on 2 cores) ends cut off, its records read up to the last
    states = t.manifest["rank_states"]
    assert set(states.values()) <= {"killed by a signal", "cut off"} and "killed by a signal" in states.values(), \
        states
    recv = t.events().filter((pl.col("rank") == 1) & pl.col("t_leave_ns").is_null()).collect()
    assert recv["call"].to_list() == ["MPI_Mprobe"] and (recv["peer"][0], recv["tag"][0]) == (0, 7)
    # blocked until the SIGTERM, not the Ctrl-C: the grace is part of the wait
    if states["1"] == "killed by a signal":
        assert int(t.manifest["ended_ns"]["1"]) - recv["t_enter_ns"][0] >= (BLOCKED_S + STOP_GRACE_S) * 1e9 * 0.9
    first = d["findings"][0]
    assert first["kind"] == "deadlock" and first["cycle"] == [1, 0, 1], first
    blocked = {b["rank"]: b for b in first["blocked"]}
    assert blocked[1]["call"] == "MPI_Mprobe" and blocked[1]["waits_for"] == [0]


@pytest.mark.mpi(ranks=3)
def test_two_ranks_sending_to_each_other_first_are_a_deadlock(tmp_path):
    _, d = stopped_run(tmp_path, "sends")
    first = d["findings"][0]
    assert first["kind"] == "deadlock" and first["cycle"] == [0, 1, 0], first
    assert {b["rank"]: b["call"] for b in first["blocked"]} == {0: "MPI_Send", 1: "MPI_Send", 2: "MPI_Barrier"}
    assert "MPI_Sendrecv" in first["suggestion"] and "MPI_Irecv" in first["suggestion"]


@pytest.mark.mpi(ranks=3)
def test_ranks_waiting_for_a_rank_outside_mpi_are_a_hang_not_a_deadlock(tmp_path):
    out, d = stopped_run(tmp_path, "outside")
    first = d["findings"][0]
    assert first["kind"] == "hang", first
    assert first["cycle"] == [] and 2 in first["outside_mpi"]
    assert all(b["waits_for"] == [2] and b["call"] == "MPI_Allreduce" for b in first["blocked"]), first["blocked"]
    assert "rank 2 was outside MPI for the last" in first["text"], first["text"]
    assert first["suggestion"].startswith("find what rank 2 did after its last MPI call")
    # the statistics count the blocked calls until the ranks were stopped, and rank 2's time outside MPI
    st = summarize(open_trace(out))
    allreduce = st.per_call.filter(pl.col("call") == "MPI_Allreduce")
    assert allreduce["total_ns"][0] >= 2 * BLOCKED_S * 1e9 * 0.9, st.per_call
    rank2 = st.per_rank.filter(pl.col("rank") == 2).row(0, named=True)
    assert rank2["app_time_ns"] >= BLOCKED_S * 1e9 * 0.9 and rank2["outside_mpi_ns"] >= BLOCKED_S * 1e9 * 0.9, rank2


@pytest.mark.mpi(ranks=3)
def test_run_stopped_while_it_progressed_has_no_hang(tmp_path):
    _, d = stopped_run(tmp_path, "progress")
    assert d["ended_early"].startswith("the run ended early")
    assert not [f for f in d["findings"] if f["kind"] in ("hang", "deadlock")], d["findings"][:1]
