"""Every correct MPI program recorded faithfully (issue 23): the job's exit code, failed
calls, polling loops, the MPI-4.1 calls."""

from __future__ import annotations

import polars as pl
import pytest
from tests.conftest import MPICH, ROOT, compile_program, mpiscope_cli

PROGRAMS = ROOT / "tests" / "mpi" / "programs"


@pytest.mark.parametrize("code", [0, 3])
def test_run_returns_the_programs_exit_code_when_the_merge_fails(tmp_path, code):
    """The merge cannot read any rank file: run says so in one sentence, names the way to
    finish the merge, keeps the raw files and returns the program's code."""
    exe = compile_program(PROGRAMS / "spoil_trace.c", mpicc=str(MPICH.mpicc), out_dir=tmp_path / "build")
    out = tmp_path / "t"
    done = mpiscope_cli(["run", "--out", str(out), "--", *MPICH.launch(2), str(exe), str(code)], env=MPICH.environ())
    assert done.returncode == code, done.stderr
    assert "Traceback" not in done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and f"mpiscope merge {out} will finish the merge" in errors[0], done.stderr
    assert sorted(p.name for p in (out / "raw").glob("*.msc")) == ["rank-000000.msc", "rank-000001.msc"]


def _run(tmp_path, ranks: int, *args: str):
    from mpiscope.trace import open_trace

    exe = compile_program(PROGRAMS / "polling.c", mpicc=str(MPICH.mpicc), out_dir=tmp_path / "build")
    out = tmp_path / "t"
    done = mpiscope_cli(["run", "--out", str(out), "--", *MPICH.launch(ranks), str(exe), *args], env=MPICH.environ())
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    return open_trace(out), done.stdout


@pytest.mark.parametrize("mode, call", [("test", "MPI_Test"), ("testany", "MPI_Testany"),
                                        ("testsome", "MPI_Testsome"), ("testall", "MPI_Testall"),
                                        ("iprobe", "MPI_Iprobe"), ("greq", "MPI_Test")])
def test_a_polling_loop_leaves_a_few_records_and_counts_every_call(tmp_path, mode, call):
    """A 1-second polling loop (on a late message, or on a generalized request another thread
    completes) makes millions of calls: it leaves fewer than 1,000 records, stats counts every
    call, and its time in MPI is the time inside the calls, not the loop's span."""
    import json

    from mpiscope.trace.reader import read_rank_file

    trace, stdout = _run(tmp_path, 1 if mode == "greq" else 2, mode, "1")
    polls = int(stdout.split("polls")[1].split()[0])
    assert polls > 10_000
    records = sum(read_rank_file(p, 1 << 16).size for p in (trace.path / "raw").glob("*.msc"))
    assert records < 1_000
    stats = json.loads(mpiscope_cli(["stats", str(trace.path), "--json", "-"]).stdout)
    assert {c["call"]: c["count"] for c in stats["per_call"]}[call] == polls
    folded = trace.events().filter(pl.col("count") > 1).collect()
    assert folded.height == 1 and folded["call"][0] == call
    assert 0 < folded["inside_ns"][0] < folded["t_leave_ns"][0] - folded["t_enter_ns"][0]
    assert folded["t_leave_ns"][0] - folded["t_enter_ns"][0] > 0.9e9


def test_polls_of_several_call_sites_taking_turns_fold_too(tmp_path):
    """A 1-second loop polling three call sites in turn (MPI_Test, MPI_Iprobe, MPI_Testany) makes
    millions of calls: it leaves fewer than 1,000 records and one row per call site, stats counts
    every call of each, and the three rows follow one another across the loop's span, each at
    least as long as its time inside MPI, as a time-line and OTF2 need."""
    import json

    from mpiscope.trace.reader import read_rank_file

    trace, stdout = _run(tmp_path, 2, "cycle", "1")
    tests, probes, anys = (int(x) for x in stdout.split("polls")[1].split()[:3])
    assert min(tests, probes, anys) > 10_000
    records = sum(read_rank_file(p, 1 << 16).size for p in (trace.path / "raw").glob("*.msc"))
    assert records < 1_000
    stats = json.loads(mpiscope_cli(["stats", str(trace.path), "--json", "-"]).stdout)
    counts = {c["call"]: c["count"] for c in stats["per_call"]}
    assert (counts["MPI_Test"], counts["MPI_Iprobe"], counts["MPI_Testany"]) == (tests, probes, anys)
    folded = trace.events().filter(pl.col("count") > 1).sort("event").collect()
    assert folded["call"].cast(pl.Utf8).to_list() == ["MPI_Test", "MPI_Iprobe", "MPI_Testany"]
    enter, leave, inside = (folded[c].to_list() for c in ("t_enter_ns", "t_leave_ns", "inside_ns"))
    assert leave[0] == enter[1] and leave[1] == enter[2]
    assert all(0 < i <= b - a for a, b, i in zip(enter, leave, inside))
    assert leave[2] - enter[0] > 0.9e9
    ev = trace.events().filter(pl.col("rank") == 0).sort("event").collect()
    assert (ev["t_enter_ns"].diff().drop_nulls() >= 0).all() and (ev["t_enter_ns"].shift(-1) >= ev["t_leave_ns"])[:-1].all()
    export = mpiscope_cli(["export", str(trace.path), "--format", "otf2", "-o", str(tmp_path / "otf2")])
    assert export.returncode == 0 and "Traceback" not in export.stderr, export.stderr


def test_polls_with_nothing_left_to_complete_fold(tmp_path):
    """MPI_Test, _Testall, _Testany and _Testsome of MPI_REQUEST_NULL return at once (flag true,
    nothing completed): 20,000 of each leave a few records, not 80,000 (CP2K: 3.5 M one-call rows of
    MPI_Testany in a trace of 139 k calls), stats counts every call, and the message completed
    afterwards by MPI_Test is matched."""
    import json

    from mpiscope.trace import open_trace
    from mpiscope.trace.reader import read_rank_file

    exe = compile_program(PROGRAMS / "poll_null.c", mpicc=str(MPICH.mpicc), out_dir=tmp_path / "build")
    out = tmp_path / "t"
    done = mpiscope_cli(["run", "--out", str(out), "--", *MPICH.launch(2), str(exe), "20000"], env=MPICH.environ())
    assert done.returncode == 0 and "got 0" in done.stdout, done.stderr
    trace = open_trace(out)
    records = sum(read_rank_file(p, 1 << 16).size for p in (trace.path / "raw").glob("*.msc"))
    assert records < 200, records
    stats = json.loads(mpiscope_cli(["stats", str(out), "--json", "-"]).stdout)
    counts = {c["call"]: c["count"] for c in stats["per_call"]}
    assert [counts[c] for c in ("MPI_Testall", "MPI_Testany", "MPI_Testsome")] == [40_000] * 3
    assert counts["MPI_Test"] >= 40_002
    assert trace.manifest["counts"]["messages"] == 1 and trace.manifest["counts"]["unmatched_sends"] == 0


def test_a_receive_never_completed_still_takes_its_message(tmp_path):
    """A receive posted for one source and tag whose request is never completed takes that envelope's
    next message all the same: left out of the matching, every later message paired with the receive
    after its own (LAMMPS' NEB: 384 unmatched sends, 480 messages paired with smaller receives)."""
    from mpiscope.trace import open_trace

    exe = compile_program(PROGRAMS / "leaked_recv.c", mpicc=str(MPICH.mpicc), out_dir=tmp_path / "build")
    out = tmp_path / "t"
    done = mpiscope_cli(["run", "--out", str(out), "--", *MPICH.launch(2), str(exe)], env=MPICH.environ())
    assert done.returncode == 0 and done.stdout.split() == ["got", "8"] * 3, (done.stdout, done.stderr)
    trace = open_trace(out)
    counts = trace.manifest["counts"]
    assert counts["messages"] == 9 and counts["unmatched_sends"] == counts["unmatched_recvs"] == 0
    m = trace.messages().sort("t_send_enter_ns").collect()
    ev = trace.events().select("event", "bytes").collect()
    posted = m.join(ev.rename({"event": "recv_event", "bytes": "posted"}), on="recv_event")["posted"]
    assert m["bytes"].to_list() == [800, 80, 8] * 3 and (posted >= m["bytes"]).all()
    assert m["t_recv_leave_ns"].null_count() == 3  # the receives never completed


def test_calls_to_proc_null_move_no_bytes(tmp_path):
    """A send or receive with MPI_PROC_NULL as its peer moves nothing: its bytes are 0 in the events and
    in stats' per-call table (a halo's edge ranks' MPI_Isend bytes were twice what they sent)."""
    import json

    from mpiscope.trace import open_trace

    exe = compile_program(PROGRAMS / "proc_null.c", mpicc=str(MPICH.mpicc), out_dir=tmp_path / "build")
    out = tmp_path / "t"
    done = mpiscope_cli(["run", "--out", str(out), "--", *MPICH.launch(1), str(exe)], env=MPICH.environ())
    assert done.returncode == 0, done.stderr
    ev = open_trace(out).events().select(pl.col("call").cast(pl.Utf8), "bytes").collect()
    moved = dict(ev.rows())
    assert [moved[c] for c in ("MPI_Isend", "MPI_Irecv", "MPI_Send", "MPI_Sendrecv")] == [0, 0, 0, 0], moved
    per_call = json.loads(mpiscope_cli(["stats", str(out), "--json", "-"]).stdout)["per_call"]
    assert all(c["bytes"] == 0 for c in per_call), per_call


def test_a_failed_bsend_is_no_message(tmp_path):
    """MPI_Bsend without a buffer fails (MPI_ERR_BUFFER under MPI_ERRORS_RETURN): it stays an
    event with its error code, is no message, and the three sends after it with the same
    envelope pair with the three receives in order."""
    trace, _ = _run(tmp_path, 2, "bsend")
    assert trace.manifest["counts"]["unmatched_sends"] == trace.manifest["counts"]["unmatched_recvs"] == 0
    ev = trace.events().collect()
    bsend = ev.filter(pl.col("call") == "MPI_Bsend")
    assert bsend.height == 1 and bsend["rc"][0] not in (None, 0)
    assert ev.filter(pl.col("call") != "MPI_Bsend")["rc"].null_count() == ev.height - 1
    msgs = trace.messages().sort("t_send_enter_ns").collect()
    assert msgs.height == 3
    sends = ev.filter(pl.col("call") == "MPI_Send").sort("t_enter_ns")["event"].to_list()
    recvs = ev.filter(pl.col("call") == "MPI_Recv").sort("t_enter_ns")["event"].to_list()
    assert msgs["send_event"].to_list() == sends and msgs["recv_event"].to_list() == recvs


def test_mpi41_calls_are_recorded_and_their_messages_matched(tmp_path):
    """MPI_Intercomm_create_from_groups names the new intercommunicator alike on both sides
    (its messages match: 0 unmatched), and the buffers attached to a communicator, flushed
    and flushed as a request, are recorded calls."""
    from mpiscope.trace import open_trace

    exe = compile_program(PROGRAMS / "mpi41.c", mpicc=str(MPICH.mpicc), out_dir=tmp_path / "build")
    out = tmp_path / "t"
    done = mpiscope_cli(["run", "--out", str(out), "--", *MPICH.launch(4), str(exe)], env=MPICH.environ())
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    trace = open_trace(out)
    counts = trace.manifest["counts"]
    assert counts["unmatched_sends"] == counts["unmatched_recvs"] == 0
    inter = trace.comms().filter(pl.col("kind") == "inter").collect()
    assert inter.height == 1 and sorted(inter["ranks"][0].to_list() + inter["remote_ranks"][0].to_list()) == [0, 1, 2, 3]
    msgs = trace.messages().collect()
    assert msgs.filter(pl.col("comm") == inter["comm"][0]).height == 4
    calls = set(trace.events().select(pl.col("call").cast(pl.Utf8)).collect()["call"])
    assert {"MPI_Intercomm_create_from_groups", "MPI_Comm_attach_buffer", "MPI_Comm_flush_buffer",
            "MPI_Comm_iflush_buffer", "MPI_Comm_detach_buffer"} <= calls


def test_threads_sending_one_envelope_need_no_clock_shift(tmp_path):
    """4 threads send one envelope at once to 4 threads that receive it with MPI_Mprobe and
    MPI_Imrecv; MPI does not order the threads' sends, so the merge pairs them in an order MPI
    allows that keeps every receive after its send. 20 runs on one host: 0 unmatched, no rank
    shifted, no receive before its send."""
    from mpiscope.trace import open_trace

    exe = compile_program(PROGRAMS / "thread_envelope.c", mpicc=str(MPICH.mpicc), out_dir=tmp_path / "build")
    for run in range(20):
        out = tmp_path / f"t{run}"
        done = mpiscope_cli(["run", "--out", str(out), "--", *MPICH.launch(2), str(exe), "4", "100"],
                            env=MPICH.environ())
        assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
        assert "clock correction" not in done.stderr, (run, done.stderr)
        trace = open_trace(out)
        counts = trace.manifest["counts"]
        assert counts["unmatched_sends"] == counts["unmatched_recvs"] == 0 and counts["messages"] == 400
        assert not any(trace.manifest["clock"]["causality_shift_ns"]), run
        m = trace.messages().collect()
        assert (m["t_recv_leave_ns"] >= m["t_send_enter_ns"]).all()
