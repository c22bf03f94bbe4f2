"""Threads, crashes, mpi4py, clock correction: the recorder keeps what it saw."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from tests.conftest import MPICH, mpiscope_cli, record_python

from mpiscope.analysis.diagnose import diagnose
from mpiscope.mpi.build import compile_program
from mpiscope.trace import open_trace
from mpiscope.trace import record as R

N = 4


def by_call(ev: pl.DataFrame, call: str) -> pl.DataFrame:
    return ev.filter(pl.col("call").cast(pl.Utf8) == call)


@pytest.mark.mpi(ranks=N)
def test_thread_multiple(run_traced, any_mpi):
    threads, msgs = 4, 30
    t = run_traced("threads", N, args=[str(threads), str(msgs)], mpi=any_mpi)
    m = t.messages().collect()
    assert m.height == N * threads * msgs
    assert t.manifest["counts"]["unmatched_sends"] == t.manifest["counts"]["unmatched_recvs"] == 0
    # thread t of rank r talks to thread t of rank r+1 through tag t
    assert set(m["tag"]) == set(range(threads))
    assert (m["dst"] == (m["src"] + 1) % N).all()
    ev = t.events().collect()
    sends = by_call(ev, "MPI_Send")
    assert sends.group_by("rank").agg(pl.col("thread").n_unique())["thread"].min() == threads
    assert (m["t_recv_leave_ns"] >= m["t_send_enter_ns"]).all()


@pytest.mark.mpi(ranks=2)
def test_clean_end_gives_back_the_unused_block_tails(run_traced):
    """Each of 4 threads per rank maps a 2 MiB block of the rank file; after
    MPI_Finalize what no record used is a hole again, and reads as before."""
    threads, msgs = 4, 30
    t = run_traced("threads", 2, args=[str(threads), str(msgs)])
    assert t.messages().collect().height == 2 * threads * msgs
    for f in sorted((t.path / "raw").glob("*.msc")):
        st = f.stat()
        assert st.st_size >= R.HEADER_BYTES + threads * R.BLOCK_BYTES, f
        assert st.st_blocks * 512 < 256 << 10, f"{f}: {st.st_blocks * 512} bytes allocated (no holes punched?)"


@pytest.mark.parametrize("how,state", [("segv", "killed by a signal"), ("abort", "MPI_Abort"),
                                       ("kill", "cut off")])
@pytest.mark.mpi(ranks=N)
def test_crash_leaves_readable_partial_trace(run_traced, how, state):
    iters = 10
    t = run_traced("crash", N, args=[str(iters), how], expect_exit=None)
    assert t.manifest["rank_states"]["1"] == state
    assert 1 in t.manifest["truncated_ranks"]
    ev = t.events().collect()
    done = by_call(ev, "MPI_Sendrecv_replace").filter(pl.col("t_leave_ns").is_not_null())
    # rank 1 finished all its exchanges before dying; nothing it recorded is lost
    assert done.filter(pl.col("rank") == 1).height == iters
    m = t.messages().collect()
    assert m.height == iters * N and m.filter(pl.col("src") == 1).height == iters
    assert (m["t_recv_leave_ns"] >= m["t_send_enter_ns"]).all()
    ended = diagnose(t).ended_early or ""
    assert ended.startswith("the run ended early") and ended.endswith("the diagnosis covers the run up to there")
    assert {"abort": "rank 1 called MPI_Abort at main (crash.c:", "segv": "rank 1 killed by a signal",
            "kill": "rank 1 stopped"}[how] in ended, ended
    if how != "abort":
        # the survivors were killed inside the barrier: the trace says where they were, so does the diagnosis
        stuck = t.manifest["unfinished_calls"]
        assert {stuck.get(f"{r}.0") for r in (0, 2, 3)} == {"MPI_Barrier"}
        assert "ranks 0, 2-3 stopped inside MPI_Barrier" in ended, ended


@pytest.mark.mpi(ranks=2)
def test_long_run_reuses_its_ring_of_blocks(run_traced):
    """240,000 records per rank fill 6 blocks, more than the 4 of a thread's
    ring: full blocks are copied further on in the file and their slots
    reused. Every event is read once, and after the clean end the slots whose
    blocks were copied are holes again: the file holds each block once."""
    iters = 120_000
    t = run_traced("pingpong", 2, args=[str(iters), "8"])
    ev = t.events().collect()
    for rank in (0, 1):
        mine = ev.filter(pl.col("rank") == rank)
        assert by_call(mine, "MPI_Send").height == by_call(mine, "MPI_Recv").height == iters
    assert t.messages().collect().height == 2 * iters
    assert t.manifest["counts"]["unmatched_sends"] == t.manifest["counts"]["unmatched_recvs"] == 0
    blocks = -(-(ev.height // 2) // R.RECS_PER_BLOCK)
    for f in sorted((t.path / "raw").glob("*.msc")):
        assert f.stat().st_blocks * 512 <= (blocks + 1) * R.BLOCK_BYTES, f


@pytest.mark.mpi(ranks=2)
def test_rank_killed_after_its_ring_wrapped_loses_nothing(run_traced):
    """SIGKILL after 300,000 records: some blocks only in their ring slot, some
    only in their copy, one maybe in both; each is read once, whole."""
    iters = 150_000
    t = run_traced("crash", 2, args=[str(iters), "kill"], expect_exit=None)
    assert t.manifest["rank_states"]["1"] == "cut off"
    ev = t.events().collect()
    for rank in (0, 1):
        done = by_call(ev, "MPI_Sendrecv_replace").filter((pl.col("rank") == rank) & pl.col("t_leave_ns").is_not_null())
        assert done.height == iters, rank
    m = t.messages().collect()
    assert m.height == 2 * iters
    assert (m["t_recv_leave_ns"] >= m["t_send_enter_ns"]).all()


@pytest.mark.mpi(ranks=N)
def test_mpi4py_program_recorded(run_traced):
    t = run_traced("ring", N, args=["3"], mpi=MPICH, python=True)
    m = t.messages().collect()
    # 3 ring rounds of a NumPy buffer (tag = round) + one pickled sendrecv each (tag 100)
    assert m.filter(pl.col("tag") < 3).height == 3 * N
    assert m.filter(pl.col("tag") == 100).height == N
    assert m.height == 4 * N
    assert t.manifest["counts"]["unmatched_sends"] == t.manifest["counts"]["unmatched_recvs"] == 0
    assert (m.filter(pl.col("tag") < 3)["bytes"] == 16 * 8).all()
    ev = t.events().collect()
    assert by_call(ev, "MPI_Init_thread").height == N


ACCEPT_CONNECT = """
import numpy as np
from mpi4py import MPI
w = MPI.COMM_WORLD
r = w.Get_rank()
for it in range(3):
    port = w.bcast(MPI.Open_port() if r == 0 else None, root=0)
    ic = MPI.COMM_SELF.Accept(port) if r == 0 else MPI.COMM_SELF.Connect(port)
    buf = np.arange(100, dtype="d")
    ic.Bcast(buf, root=MPI.ROOT if r == 0 else 0)
    ic.Barrier()
    if r == 0:
        ic.Send(buf, dest=0, tag=7)
    else:
        ic.Recv(buf, source=0, tag=7)
    ic.Disconnect()
    if r == 0:
        MPI.Close_port(port)
"""


@pytest.mark.mpi(ranks=2)
def test_intercommunicators_from_accept_and_connect(tmp_path):
    """MPI_Comm_accept/connect make intercommunicators the recorder sees first in use: both sides must
    name each the same (their groups in swapped roles), and three rounds between the same ranks three
    communicators. Named by member list alone, in order, the sides never paired (3 unmatched messages,
    Bcast instances of 3 calls on a 2-rank communicator)."""
    t = record_python(tmp_path, ACCEPT_CONNECT, 2)
    inter = t.comms().filter(pl.col("kind") == "inter").collect()
    assert inter.height == 3 and (inter["comm_size"] == 2).all()
    assert t.manifest["counts"]["unmatched_sends"] == t.manifest["counts"]["unmatched_recvs"] == 0
    assert t.messages().collect().height == 3
    on_inter = t.collectives().filter(pl.col("comm").is_in(inter["comm"].implode())).collect()
    assert sorted(on_inter["call"].cast(pl.Utf8).str.replace("_c$", "").to_list()) == ["MPI_Barrier"] * 3 + ["MPI_Bcast"] * 3
    assert (on_inter["ranks"] == 2).all() and on_inter["comm"].n_unique() == 3


@pytest.mark.mpi(ranks=N)
def test_forced_clock_sync_keeps_causality(tmp_path, example):
    """MPISCOPE_SYNC=always measures offsets even on one host: the whole
    correction pipeline runs, and no receive ends before its send began."""
    from tests.conftest import mpiscope_cli

    from mpiscope.trace import open_trace

    out = tmp_path / "sync"
    env = dict(MPICH.environ(), MPISCOPE_SYNC="always")
    done = mpiscope_cli(["run", "--out", str(out), "--", *MPICH.launch(N), str(example("ring", MPICH)), "20", "8"],
                        env=env)
    assert done.returncode == 0, done.stderr
    t = open_trace(out)
    clocks = t.manifest["clock"]["ranks"]
    assert len(clocks) == N and all(abs(c["offset_ns"]) < 5e6 for c in clocks)
    m = t.messages().collect()
    assert m.height == 20 * N
    assert (m["t_recv_leave_ns"] >= m["t_send_enter_ns"]).all()


@pytest.mark.mpi(ranks=2)
def test_thread_slots_reused(run_traced):
    """1,200 short-lived threads per rank, more than the 1,024 thread slots."""
    rounds, threads = 300, 4
    t = run_traced("threads_churn", 2, args=[str(rounds), str(threads)])
    assert t.manifest["counts"]["dropped"] == 0
    m = t.messages().collect()
    assert m.height == 2 * rounds * threads
    assert t.manifest["counts"]["unmatched_sends"] == t.manifest["counts"]["unmatched_recvs"] == 0


@pytest.mark.mpi(ranks=2)
def test_spawned_processes_run_unrecorded_and_leave_the_parents_trace_whole(tmp_path, example):
    """Spawned workers have world ranks of their own, which would take the
    parents' file names: they run unrecorded, with one line saying so in the
    run (the program spawns twice) and the count of such worlds in the manifest."""
    from tests.conftest import mpiscope_cli

    from mpiscope.trace import open_trace

    out = tmp_path / "spawn"
    done = mpiscope_cli(["run", "--out", str(out), "--", *MPICH.launch(2), str(example("spawn", MPICH))],
                        env=MPICH.environ())
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("parents done") == 1 and done.stdout.count("workers done") == 2
    assert done.stderr.count("processes started by MPI_Comm_spawn are not recorded") == 1, done.stderr
    t = open_trace(out)
    assert not t.manifest["truncated_ranks"] and not t.manifest["unfinished_calls"]
    assert any(w.startswith("2 group(s) of processes started by MPI_Comm_spawn") for w in t.manifest["warnings"])
    ev = t.events().collect()
    assert set(ev["rank"]) == {0, 1}
    assert by_call(ev, "MPI_Send").height == 4  # rank 0 to each worker, twice


@pytest.mark.mpi(ranks=N)
def test_rank_that_cannot_open_its_trace_runs_on_and_no_rank_waits(tmp_path, example):
    """One rank's file cannot be created (the name is taken): that rank runs
    unrecorded, yet takes part in both clock syncs, which are collective, so
    the others neither wait for it nor lose their traces."""
    import subprocess

    from mpiscope.mpi.find import lib_dir
    from mpiscope.trace.reader import read_rank_file

    raw = tmp_path / "raw"
    raw.mkdir()
    (raw / "rank-000001.msc").write_bytes(b"taken")
    env = dict(MPICH.environ(), MPISCOPE_DIR=str(tmp_path), LD_PRELOAD=str(lib_dir() / "libmpiscope.so"))
    done = subprocess.run([*MPICH.launch(N), str(example("ring", MPICH)), "5", "8"], env=env,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stderr.count("not recorded, the program runs on; cannot create") == 1, done.stderr
    for rank in (0, 2, 3):
        f = read_rank_file(raw / f"rank-{rank:06d}.msc", 1 << 16)
        assert not f.cut_off and f.size > 0


@pytest.mark.mpi(ranks=2)
def test_standard_abi_program_without_an_abi_build_stops_with_one_line(tmp_path, example, mpich_abi):
    """A libmpiscope for libmpi preloaded into a program built for the MPI
    standard ABI, with no abi/ build beside it, would start the wrong libmpi
    and crash the program later: it stops it before main with one line."""
    import shutil
    import subprocess

    from mpiscope.mpi.find import lib_dir

    lone = tmp_path / "lib"
    lone.mkdir()
    shutil.copy(lib_dir() / "libmpiscope.so", lone)
    env = dict(mpich_abi.environ(), MPISCOPE_DIR=str(tmp_path), LD_PRELOAD=str(lone / "libmpiscope.so"))
    done = subprocess.run([*mpich_abi.launch(2), str(example("ring", mpich_abi)), "2", "8"], env=env,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode != 0
    assert done.stderr.count("is built for the MPI standard ABI (libmpi_abi)") == 1, done.stderr
    assert "Segmentation" not in done.stderr + done.stdout


@pytest.mark.mpi(ranks=2)
def test_an_ignored_sigint_stops_neither_the_program_nor_its_recording(tmp_path, build_dir, any_mpi):
    """A program that ignores SIGINT (a shell's background job does) goes on after one, and the
    recorder, which stopped the recording on any SIGINT, records what follows."""
    exe = compile_program(Path(__file__).parent / "programs" / "ignores_sigint.c", mpicc=str(any_mpi.mpicc),
                          out_dir=build_dir / f"ignores_sigint-{any_mpi.name}")
    out = tmp_path / "t"
    done = mpiscope_cli(["run", "--out", str(out), "--", *any_mpi.launch(2), str(exe)], env=any_mpi.environ())
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-3000:]
    t = open_trace(out)
    assert t.manifest["rank_states"] == {"0": "finished", "1": "finished"}
    barriers = by_call(t.events().collect(), "MPI_Barrier")
    assert barriers.group_by("rank").len().sort("rank")["len"].to_list() == [10, 10]


@pytest.mark.mpi(ranks=2)
@pytest.mark.parametrize("handler", ["returns", "exit", "kill"])
def test_a_programs_own_sigterm_handler_decides_whether_the_recording_goes_on(tmp_path, build_dir, any_mpi, handler):
    """A program that handles SIGTERM itself and goes on after one (a checkpoint before the batch
    system's SIGKILL) is recorded to its end; the recorder stopped the recording on any SIGTERM (5
    of 10 barriers). A handler that ends the process leaves the rank stopped by the signal; a rank
    killed by SIGKILL after it went on was stopped after its last call, not at the SIGTERM."""
    exe = compile_program(Path(__file__).parent / "programs" / "handles_sigterm.c", mpicc=str(any_mpi.mpicc),
                          out_dir=build_dir / f"handles_sigterm-{any_mpi.name}")
    out = tmp_path / "t"
    args = [handler] if handler != "returns" else []
    done = mpiscope_cli(["run", "--out", str(out), "--", *any_mpi.launch(2), str(exe), *args], env=any_mpi.environ())
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    t = open_trace(out)
    barriers = by_call(t.events().collect(), "MPI_Barrier").group_by("rank").len().sort("rank")["len"].to_list()
    if handler == "returns":
        assert done.returncode == 0, done.stderr[-3000:]
        assert t.manifest["rank_states"] == {"0": "finished", "1": "finished"}
        assert barriers == [10, 10]
    if handler == "exit":
        assert done.returncode != 0
        assert t.manifest["rank_states"] == {"0": "killed by a signal", "1": "killed by a signal"}
        assert set(t.manifest["ended_ns"]) == {"0", "1"}
        assert barriers == [5, 5]
    if handler == "kill":  # SIGKILL after the program went on: it ran until its last call at least
        assert done.returncode != 0
        assert t.manifest["rank_states"] == {"0": "cut off", "1": "cut off"} and barriers == [10, 10]
        last = t.events().group_by("rank").agg(pl.col("t_enter_ns").max()).collect()
        for rank, entered in last.iter_rows():
            assert int(t.manifest["ended_ns"][str(rank)]) >= entered
