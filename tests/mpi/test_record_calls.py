"""Every call of the example programs is recorded with the right peers, bytes,
tags and roots; every message is matched; nonblocking starts are tied to
their completions. Each test runs with MPICH and with Open MPI (any_mpi)."""

from __future__ import annotations

import json

import polars as pl
import pytest
from tests.conftest import mpiscope_cli

INT = 4
COUNT = 4  # collectives.c / nbc.c: ints per rank and peer
N = 4      # ranks

BLOCKING = ["MPI_Barrier", "MPI_Bcast", "MPI_Gather", "MPI_Gatherv", "MPI_Scatter", "MPI_Scatterv",
            "MPI_Allgather", "MPI_Allgatherv", "MPI_Alltoall", "MPI_Alltoallv", "MPI_Alltoallw", "MPI_Reduce",
            "MPI_Allreduce", "MPI_Reduce_scatter", "MPI_Reduce_scatter_block", "MPI_Scan", "MPI_Exscan"]
ROOTED = {"MPI_Bcast", "MPI_Gather", "MPI_Gatherv", "MPI_Scatter", "MPI_Scatterv", "MPI_Reduce"}


def by_call(ev: pl.DataFrame, call: str) -> pl.DataFrame:
    return ev.filter(pl.col("call").cast(pl.Utf8) == call)


def expected_coll_bytes(call: str, is_root: bool, n: int) -> int:
    """Bytes this rank sends, as the README defines them for collectives."""
    piece = COUNT * INT
    table = {
        "MPI_Barrier": 0, "MPI_Bcast": piece if is_root else 0, "MPI_Gather": piece, "MPI_Gatherv": piece,
        "MPI_Scatter": n * piece if is_root else 0, "MPI_Scatterv": n * piece if is_root else 0,
        "MPI_Allgather": piece, "MPI_Allgatherv": piece, "MPI_Alltoall": n * piece, "MPI_Alltoallv": n * piece,
        "MPI_Alltoallw": n * piece, "MPI_Reduce": piece, "MPI_Allreduce": piece, "MPI_Reduce_scatter": n * piece,
        "MPI_Reduce_scatter_block": n * piece, "MPI_Scan": piece, "MPI_Exscan": piece,
    }
    return table[call]


@pytest.mark.mpi(ranks=N)
def test_ring(run_traced, any_mpi):
    t = run_traced("ring", N, args=["3", "64"], mpi=any_mpi)
    ev = t.events().collect()
    sends, recvs = by_call(ev, "MPI_Send"), by_call(ev, "MPI_Recv")
    assert sends.height == recvs.height == 3 * N
    assert (sends["peer"] == (sends["rank"] + 1) % N).all()
    assert (recvs["peer"] == (recvs["rank"] - 1) % N).all()
    assert set(sends["tag"]) == {0, 1, 2} and (sends["bytes"] == 64).all() and (recvs["bytes"] == 64).all()
    m = t.messages().collect()
    assert m.height == 3 * N
    assert t.manifest["counts"]["unmatched_sends"] == t.manifest["counts"]["unmatched_recvs"] == 0
    assert set(zip(m["src"], m["dst"])) == {(r, (r + 1) % N) for r in range(N)}
    assert (m["t_recv_leave_ns"] >= m["t_send_enter_ns"]).all()
    assert (m["bytes"] == 64).all()


@pytest.mark.mpi(ranks=N)
def test_collectives_roots_bytes_instances(run_traced, any_mpi):
    t = run_traced("collectives", N, mpi=any_mpi)
    ev = t.events().collect()
    for call in BLOCKING:
        rows = by_call(ev, call)
        assert rows.height == 2 * N, call  # on MPI_COMM_WORLD and on the reversed communicator
        assert rows["comm"].n_unique() == 2, call
        if call in ROOTED:
            # root size-1 on world, root 0 on the reversed comm: the same world rank
            assert (rows["root"] == N - 1).all(), call
        else:
            assert rows["root"].is_null().all(), call
        for r in rows.iter_rows(named=True):
            assert r["bytes"] == expected_coll_bytes(call, r["rank"] == N - 1, N), (call, r)
    for call in ["MPI_Neighbor_allgather", "MPI_Neighbor_allgatherv", "MPI_Neighbor_alltoall",
                 "MPI_Neighbor_alltoallv", "MPI_Neighbor_alltoallw"]:
        rows = by_call(ev, call)
        assert rows.height == N, call
        assert (rows["bytes"] == 2 * COUNT * INT).all(), call  # a 1-D periodic ring: two neighbours
    colls = t.collectives().collect()
    assert colls.height == 2 * 17 + 5
    assert (colls["ranks"] == colls["comm_size"]).all() and (colls["calls_seen"] == 1).all()
    assert (colls["t_last_leave_ns"] >= colls["t_last_enter_ns"]).all()


@pytest.mark.mpi(ranks=N)
def test_nonblocking_collectives_tied_to_completions(run_traced, any_mpi):
    t = run_traced("nbc", N, mpi=any_mpi)
    ev = t.events().collect()
    starts = ev.filter(pl.col("coll_id").is_not_null() & pl.col("call").cast(pl.Utf8).str.starts_with("MPI_I"))
    assert starts.height == 17 * N
    assert starts["request"].is_not_null().all()
    assert starts["t_complete_ns"].is_not_null().all() and starts["completed_by"].is_not_null().all()
    completions = ev.join(starts.select(pl.col("completed_by").alias("event"), pl.col("request").alias("req"),
                                        pl.col("rank").alias("start_rank")), on="event")
    assert (completions["rank"] == completions["start_rank"]).all()
    assert set(completions["call"].cast(pl.Utf8)) == {"MPI_Wait", "MPI_Waitall", "MPI_Test"}
    single = completions.filter(pl.col("call").cast(pl.Utf8) != "MPI_Waitall")
    assert (single["request"] == single["req"]).all()
    assert (starts["t_complete_ns"] >= starts["t_leave_ns"]).all()
    colls = t.collectives().collect()
    assert colls.height == 17 and (colls["ranks"] == N).all()
    ibcast = colls.filter(pl.col("call") == "MPI_Ibcast")
    assert ibcast["root"].to_list() == [N - 1] and ibcast["bytes"].to_list() == [COUNT * INT]


@pytest.mark.mpi(ranks=N)
def test_rma_epochs(run_traced, any_mpi):
    t = run_traced("rma", N, mpi=any_mpi)
    ev = t.events().collect()
    for call, count in [("MPI_Put", 2), ("MPI_Get", 1), ("MPI_Accumulate", 1), ("MPI_Fetch_and_op", 1),
                        ("MPI_Compare_and_swap", 1), ("MPI_Get_accumulate", 1), ("MPI_Rput", 1), ("MPI_Rget", 1),
                        ("MPI_Win_lock", 1), ("MPI_Win_unlock", 1), ("MPI_Win_flush", 1)]:
        rows = by_call(ev, call)
        assert rows.height == count * N, call
        assert (rows["peer"] == (rows["rank"] + 1) % N).all(), call
    assert (by_call(ev, "MPI_Put")["bytes"] == 8 * INT).all()
    assert (by_call(ev, "MPI_Fetch_and_op")["bytes"] == INT).all()
    assert by_call(ev, "MPI_Win_fence").height == 4 * N
    for call in ["MPI_Win_post", "MPI_Win_start", "MPI_Win_complete", "MPI_Win_wait", "MPI_Win_lock_all",
                 "MPI_Win_unlock_all", "MPI_Win_allocate", "MPI_Win_free"]:
        assert by_call(ev, call).height == N, call
    window = by_call(ev, "MPI_Put")["comm"].unique().to_list()
    assert len(window) == 1 and window != [0]
    comms = t.comms().collect().filter(pl.col("comm") == window[0])
    assert comms["kind"].to_list() == ["window"] and comms["comm_size"].to_list() == [N]
    rput = by_call(ev, "MPI_Rput")
    assert rput["completed_by"].is_not_null().all()


@pytest.mark.mpi(ranks=N)
def test_point_to_point_modes(run_traced, any_mpi):
    t = run_traced("p2pmodes", N, mpi=any_mpi)
    m = t.messages().collect()
    assert t.manifest["counts"]["unmatched_sends"] == t.manifest["counts"]["unmatched_recvs"] == 0
    per_tag = dict(m.group_by("tag").len().iter_rows())
    cancel_tag = 17
    sent_to_self = per_tag.pop(cancel_tag)
    # tags of p2pmodes.c: one message each, Sendrecv (and the zero-byte sync) both ways, persistent 3 rounds,
    # Isendrecv and Sendrecv both ways
    assert per_tag == {1: 1, 2: 1, 3: 1, 4: 2, 5: 2, 6: 6, 7: 1, 8: 1, 9: 1, 10: 1, 11: 1, 12: 1, 13: 1, 14: 1, 15: 1,
                       16: 4, 99: 2}
    assert set(zip(m["src"], m["dst"])) == {(0, 1), (1, 0), (0, 0), (1, 1)}
    assert (m.filter(~pl.col("tag").is_in([15, 99]))["bytes"] == 16 * INT).all()
    ev = t.events().collect()
    # Cancelled sends carry no message: each rank's real send to itself matches its receive, not a
    # cancelled send of the same envelope before it. MPICH cancels sends to itself, Open MPI none;
    # what was not cancelled the program received.
    starts = ev.filter(pl.col("call").is_in(["MPI_Isend", "MPI_Issend"]) & (pl.col("tag") == cancel_tag))
    received = by_call(ev, "MPI_Recv").filter(pl.col("tag") == cancel_tag)
    assert starts.height == 6 and sent_to_self == received.height
    assert starts.height - sent_to_self == (4 if "mpich" in any_mpi.name else 0)
    assert by_call(ev, "MPI_Cancel")["request"].is_in(starts["request"].implode()).all()
    # a derived datatype's size, and the bytes that came rather than the room the receive gave
    derived = ev.filter(pl.col("tag") == 15).sort("rank")
    assert derived["call"].to_list() == ["MPI_Send", "MPI_Recv"] and derived["bytes"].to_list() == [96, 96]
    assert m.filter(pl.col("tag") == 15)["bytes"].to_list() == [96]
    # MPI_PROC_NULL: recorded, no peer, no message
    proc_null = by_call(ev, "MPI_Send").filter(pl.col("peer").is_null())
    assert proc_null.height == 2
    probes = by_call(ev, "MPI_Mprobe")
    assert probes["peer"].to_list() == [0] and probes["tag"].to_list() == [9]
    assert by_call(ev, "MPI_Startall").height == 6
    # the receive half of an Isendrecv, completed by MPI_Wait, with its own envelope
    waits = by_call(ev, "MPI_Wait").filter(pl.col("tag") == 16).sort("rank")
    assert waits["peer"].to_list() == [1, 0] and (waits["bytes"] == 16 * INT).all()
    assert (m["t_recv_leave_ns"] >= m["t_send_enter_ns"]).all()


@pytest.mark.mpi(ranks=N)
def test_communicators_translate_to_world_ranks(run_traced, any_mpi):
    t = run_traced("comms", N, mpi=any_mpi)
    m = t.messages().collect()
    pairs = sorted(zip(m["src"].to_list(), m["dst"].to_list(), m["tag"].to_list()))
    # ring inside each half (tag 5), then the two half leaders (highest world ranks) over the intercomm
    # (tag 12) and over its duplicate (tag 13)
    assert pairs == [(0, 2, 5), (1, 3, 5), (2, 0, 5), (2, 3, 12), (2, 3, 13), (3, 1, 5), (3, 2, 12), (3, 2, 13)]
    assert t.manifest["counts"]["unmatched_sends"] == t.manifest["counts"]["unmatched_recvs"] == 0
    ev = t.events().collect()
    bcast = by_call(ev, "MPI_Bcast")
    assert sorted(bcast["rank"].to_list()) == [0, 1] and (bcast["root"] == 1).all()
    assert bcast["comm"].n_unique() == 1
    colls = t.collectives().collect()
    assert (colls["ranks"] == colls["comm_size"]).all()
    alltoall = by_call(ev, "MPI_Neighbor_alltoall")
    assert (alltoall["bytes"] == 2 * INT).all()  # one out-neighbour in the distributed graph
    comms = t.comms().collect()
    assert "inter" in comms["kind"].to_list()


@pytest.mark.mpi(ranks=N)
def test_wildcard_receives_resolved_from_status(run_traced, any_mpi):
    t = run_traced("wildcard", N, args=["4"], mpi=any_mpi)
    m = t.messages().collect()
    assert m.height == 4 * (N - 1)
    assert (m["dst"] == 0).all() and (m["tag"] == m["src"]).all() and (m["bytes"] == 8 * m["src"]).all()
    ev = t.events().collect()
    irecv = by_call(ev, "MPI_Irecv")
    assert irecv["peer"].is_null().all() and irecv["tag"].is_null().all()  # posted as wildcards
    done = by_call(ev, "MPI_Waitany")
    assert set(done["peer"]) == set(range(1, N)) and (done["tag"] == done["peer"]).all()


@pytest.mark.mpi(ranks=N)
def test_pcontrol_pauses_and_resumes(run_traced, any_mpi):
    t = run_traced("pcontrol", N, mpi=any_mpi)
    ev = t.events().collect()
    assert by_call(ev, "MPI_Allreduce").height == 0 and by_call(ev, "MPI_Sendrecv").height == 0
    assert by_call(ev, "MPI_Barrier").height == 3 * N and by_call(ev, "MPI_Bcast").height == 2 * N
    assert by_call(ev, "MPI_Pcontrol").height == 2 * N
    colls = t.collectives().collect()
    assert colls.height == 5 and (colls["ranks"] == N).all()
    # collective numbering went on while paused: 3 barriers, 5 allreduces, then the 2 bcasts
    assert sorted(by_call(ev, "MPI_Bcast")["seq"].unique().to_list()) == [8, 9]
    # the paused time is said: it counts as outside MPI, and the calls made in it are not in the trace
    from mpiscope.analysis.stats import summarize
    s = summarize(t)
    pc = by_call(ev, "MPI_Pcontrol").sort("rank", "t_enter_ns")
    want = pc.group_by("rank").agg((pl.col("t_enter_ns").last() - pl.col("t_leave_ns").first()).alias("ns"))
    got = dict(zip(s.per_rank["rank"], s.per_rank["paused_ns"]))
    assert got == dict(zip(want["rank"], want["ns"])) and not s.per_rank["paused_open"].any()
    assert s.paused_note.startswith("recording was paused (MPI_Pcontrol) for rank 0 ")


@pytest.mark.mpi(ranks=2)
def test_a_run_started_paused_that_never_resumed_says_so(run_traced, tmp_path):
    from tests.conftest import EXAMPLES, MPICH, mpiscope_cli

    from mpiscope.mpi.build import compile_program

    exe = compile_program(EXAMPLES / "ring.c", mpicc=str(MPICH.mpicc), out_dir=tmp_path)
    done = mpiscope_cli(["run", "--paused", "--out", str(tmp_path / "t"), "--", *MPICH.launch(2), str(exe)],
                        env=MPICH.environ())
    assert done.returncode == 0 and "nothing was recorded: recording started paused (--paused)" in done.stderr
    for verb in (["diagnose"], ["report"], ["sim", "--network", "mesh:2x1", "--trace"]):
        said = mpiscope_cli([*verb, str(tmp_path / "t")])
        assert said.returncode != 0 and "never resumed it with MPI_Pcontrol(1)" in said.stderr, (verb, said.stderr)
        assert "Traceback" not in said.stderr


@pytest.mark.mpi(ranks=N)
@pytest.mark.parametrize("mode", ["", "mixed"])
def test_sessions_program_recorded_without_mpi_init(run_traced, any_mpi, mode):
    t = run_traced("sessions", N, args=[mode] if mode else [], mpi=any_mpi)
    ev = t.events().collect()
    assert by_call(ev, "MPI_Session_init").height == N
    assert by_call(ev, "MPI_Session_finalize").height == N
    assert by_call(ev, "MPI_Comm_create_from_group").height == 2 * N
    m = t.messages().collect()
    assert t.manifest["counts"]["unmatched_sends"] == t.manifest["counts"]["unmatched_recvs"] == 0
    ring = m.filter(pl.col("tag") == 7)
    assert set(zip(ring["src"], ring["dst"])) == {(r, (r + 1) % N) for r in range(N)}
    # the reversed communicator's rank 0 -> rank 1, as world ranks
    assert list(zip(*m.filter(pl.col("tag") == 9).select("src", "dst"))) == [(N - 1, N - 2)]
    # the two communicators made with one group and tag get different ids
    assert m.filter(pl.col("tag") == 7)["comm"].n_unique() == 1
    assert m.filter(pl.col("tag") == 7)["comm"][0] != m.filter(pl.col("tag") == 9)["comm"][0]
    coll = t.collectives().collect()
    assert coll.height == 1 and coll["call"].cast(pl.Utf8)[0] == "MPI_Allreduce"
    assert (m["t_recv_leave_ns"] >= m["t_send_enter_ns"]).all()
    assert not t.manifest["truncated_ranks"] and not t.manifest["unfinished_calls"]
    # a session's start and end are no MPI time, as MPI_Init's and MPI_Finalize's are not (a sessions
    # program read "communication-bound, mostly in MPI_Session_init")
    from mpiscope.analysis.stats import summarize

    s = summarize(t)
    assert not s.per_call.filter(pl.col("call").is_in(["MPI_Session_init", "MPI_Session_finalize"])).height
    in_calls = ev.filter(~pl.col("call").cast(pl.Utf8).is_in(["MPI_Session_init", "MPI_Session_finalize",
                                                               "MPI_Init_thread", "MPI_Finalize"]))
    longest = in_calls.group_by("rank").agg((pl.col("t_leave_ns") - pl.col("t_enter_ns")).sum().alias("ns"))
    for rank, ns in longest.iter_rows():
        assert s.per_rank.filter(pl.col("rank") == rank)["mpi_time_ns"].item() <= ns, rank
    if mode == "mixed":  # the session ends first; MPI_Finalize ends the recording
        world = m.filter(pl.col("tag") == 11)
        assert set(zip(world["src"], world["dst"])) == {(r, (r + 1) % N) for r in range(N)}
        assert by_call(ev, "MPI_Init_thread").height == by_call(ev, "MPI_Finalize").height == N


@pytest.mark.mpi(ranks=N)
def test_a_second_session_leaves_the_first_sessions_trace(tmp_path, example):
    """A sessions program that starts a session again after the first ended: the recording (which the
    first session's finalize ended) is not begun anew: that opened the rank file again ("File exists"),
    clock-synced into its sealed header, and the merge refused every rank: nothing was left. The
    wheel's MPICH only: a second MPI_Session_init crashes the Open MPI 5.0 wheel, unrecorded too (and
    the second session makes no communicator: MPICH's first one after a re-init hangs at times)."""
    from tests.conftest import MPICH

    from mpiscope.trace import open_trace

    any_mpi = MPICH

    out = tmp_path / "t"
    done = mpiscope_cli(["run", "--out", str(out), "--", *any_mpi.launch(N), str(example("sessions", any_mpi)), "again"],
                        env=any_mpi.environ())
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-3000:]
    assert "File exists" not in done.stderr and "damaged" not in done.stderr, done.stderr[-3000:]
    assert done.stderr.count("a session started after the recording ended") == 1, done.stderr[-3000:]
    assert f"sessions again: {N} ranks" in done.stdout, done.stdout
    t = open_trace(out)
    m = t.messages().collect()
    assert set(m["tag"].unique().to_list()) == {7, 9} and t.manifest["counts"]["unmatched_sends"] == 0


@pytest.mark.mpi(ranks=N)
def test_mpi4_persistent_collectives_and_partitioned_messages(run_traced, any_mpi):
    t = run_traced("persistent", N, mpi=any_mpi)
    ev = t.events().collect()
    # rank 0 made it with recording paused: not recorded, yet its starts are numbered like the others'
    inits = by_call(ev, "MPI_Allreduce_init")
    assert sorted(inits["rank"]) == list(range(1, N)) and (inits["bytes"] == 16).all()
    # Startall: twice for the Bcast and Barrier, twice for the partitioned pair
    assert by_call(ev, "MPI_Start").height == 3 * N and by_call(ev, "MPI_Startall").height == 4 * N
    coll = t.collectives().collect().sort("t_first_enter_ns", "coll_id")
    calls = coll["call"].cast(pl.Utf8).to_list()
    assert calls[:4] == ["MPI_Allreduce_init"] * 3 + ["MPI_Barrier"], calls
    # Startall starts the Bcast and the Barrier together: same times, either order
    assert sorted(calls[4:]) == sorted(["MPI_Bcast_init", "MPI_Barrier_init"] * 2), calls
    assert (coll["ranks"] == N).all() and (coll["calls_seen"] == 1).all()
    assert (coll.filter(pl.col("call").cast(pl.Utf8) == "MPI_Allreduce_init")["bytes"] == N * COUNT * INT).all()
    bcast = coll.filter(pl.col("call").cast(pl.Utf8) == "MPI_Bcast_init")
    assert (bcast["root"] == N - 1).all() and (bcast["bytes"] == COUNT * INT).all()
    # each start ends at the completion that finished it
    assert coll["t_last_leave_ns"].null_count() == 0
    # an MPI_Start of one persistent collective is its rank's part in the instance, as an
    # MPI_Iallreduce row is: the instance, bytes, received bytes and the MPI_Wait that completed it
    started = by_call(ev, "MPI_Start").sort("rank", "event")
    assert started["coll_id"].null_count() == 0 and started["seq"].null_count() == 0
    assert (started["bytes"] == COUNT * INT).all() and (started["recv_bytes"] == COUNT * INT).all()
    assert set(started["coll_id"]) == set(coll.filter(pl.col("call").cast(pl.Utf8) == "MPI_Allreduce_init")["coll_id"])
    waits = ev.select(pl.col("event").alias("completed_by"), pl.col("call").cast(pl.Utf8).alias("by"),
                      pl.col("t_leave_ns").alias("t_complete_ns"))
    assert started.join(waits, on=["completed_by", "t_complete_ns"])["by"].to_list() == ["MPI_Wait"] * 3 * N
    # a Startall of two collectives cannot stand for both: they stay instances of their own, and
    # the Startall's row carries their bytes (the Bcast's root sends 4 ints; the others receive them)
    alls = by_call(ev, "MPI_Startall").filter(pl.col("t_enter_ns") < ev.filter(pl.col("call").cast(pl.Utf8)
                                                                                  == "MPI_Psend_init")["t_enter_ns"].min())
    assert alls.height == 2 * N and alls["coll_id"].null_count() == 2 * N
    assert sorted(zip(alls["rank"], alls["bytes"], alls["recv_bytes"])) == sorted(
        (r, COUNT * INT if r == N - 1 else 0, 0 if r == N - 1 else COUNT * INT) for r in range(N) for _ in range(2))
    stats = json.loads(mpiscope_cli(["stats", str(t.path), "--json", "-"]).stdout)
    assert [r["collective_bytes_sent"] for r in stats["per_rank"]] == \
        [3 * COUNT * INT + (2 * COUNT * INT if r == N - 1 else 0) for r in range(N)]
    assert (coll["t_last_leave_ns"] >= coll["t_first_enter_ns"]).all()
    # partitioned: each start of the Psend/Precv pair is one message of its 4 partitions of 2 ints
    assert by_call(ev, "MPI_Psend_init").height == by_call(ev, "MPI_Precv_init").height == N
    m = t.messages().collect()
    assert t.manifest["counts"]["unmatched_sends"] == t.manifest["counts"]["unmatched_recvs"] == 0
    assert m.height == 2 * N and (m["tag"] == 21).all()
    assert sorted(zip(m["src"], m["dst"])) == sorted([(r, (r + 1) % N) for r in range(N)] * 2)
    assert (m["bytes"] == 4 * 2 * INT).all() and (m["recv_bytes"] == 4 * 2 * INT).all()
    assert (m["t_recv_leave_ns"] >= m["t_send_enter_ns"]).all()
    # the local partition calls name the started instance of their request
    ready, ranged = by_call(ev, "MPI_Pready"), by_call(ev, "MPI_Pready_range")
    assert ready.height == 4 * N and ranged.height == N and by_call(ev, "MPI_Parrived").height >= N
    # a loop of MPI_Parrived that found nothing is one row, counting its calls, as a loop of MPI_Test is:
    # per rank and start at most that row and the call that found the partition
    arrived = by_call(ev, "MPI_Parrived")
    assert arrived.group_by("rank").len()["len"].max() <= 2 * 2, arrived.group_by("rank").len()
    assert arrived["count"].sum() >= arrived.height
    starts = ev.filter(pl.col("call").cast(pl.Utf8) == "MPI_Startall").select("rank", "event")
    assert ready["request"].is_not_null().all() and ranged["request"].is_not_null().all()
    assert ready.group_by("rank", "request").len()["len"].to_list() == [4] * N
    assert not set(zip(ready["rank"], ready["request"])) & set(zip(ranged["rank"], ranged["request"]))
    assert starts.height == 4 * N
    # the exports name a persistent collective's start by its *_init call: in OTF2 each MPI_Start
    # completes an allreduce (not an operation of MPI_Start, which names none)
    import otf2
    from otf2.enums import CollectiveOp

    from mpiscope.export.otf2 import export_otf2

    export_otf2(t, t.path / "otf2")
    ops = []
    with otf2.reader.open(str(t.path / "otf2" / "traces.otf2")) as tr:
        ops = [ev.collective_op for _, ev in tr.events if type(ev).__name__ == "NonBlockingCollectiveComplete"]
    assert ops.count(CollectiveOp.ALLREDUCE) == 3 * N


@pytest.mark.mpi(ranks=1)
def test_a_datatype_of_more_than_2_gib_keeps_its_bytes(tmp_path, any_mpi):
    """MPI_Type_size cannot give a size over INT_MAX (MPI_UNDEFINED): the recorder asks MPI_Type_size_x
    then (a 2.4e9-byte put of such a type read as 0 bytes, in puts and sends alike)."""
    from pathlib import Path

    from mpiscope.mpi.build import compile_program
    from mpiscope.trace import open_trace

    exe = compile_program(Path(__file__).parent / "programs" / "big_type.c", mpicc=str(any_mpi.mpicc),
                          out_dir=tmp_path)
    done = mpiscope_cli(["run", "--out", str(tmp_path / "t"), "--", *any_mpi.launch(1), str(exe)],
                        env=any_mpi.environ())
    assert done.returncode == 0, done.stderr[-3000:]
    ev = open_trace(tmp_path / "t").events().collect()
    assert by_call(ev, "MPI_Send_init")["bytes"].to_list() == [300_000_000 * 8]


@pytest.mark.mpi(ranks=1)
def test_communicators_beyond_the_recorders_numbers_are_said(tmp_path):
    """Past 65,534 communicators and windows made (freed ones' numbers are not reused), calls on new
    ones have no communicator: the merge says so (it was only a count in the manifest)."""
    from pathlib import Path

    from tests.conftest import MPICH

    from mpiscope.mpi.build import compile_program
    from mpiscope.trace import open_trace

    exe = compile_program(Path(__file__).parent / "programs" / "many_comms.c", mpicc=str(MPICH.mpicc),
                          out_dir=tmp_path)
    done = mpiscope_cli(["run", "--out", str(tmp_path / "t"), "--", *MPICH.launch(1), str(exe)],
                        env=MPICH.environ())
    assert done.returncode == 0, done.stderr[-3000:]
    assert "rank 0 (" in done.stderr and "over 65,534 communicators and windows made in the run" in done.stderr
    t = open_trace(tmp_path / "t")
    assert t.manifest["counts"]["dropped"] > 0
    assert by_call(t.events().collect(), "MPI_Barrier")["comm"].to_list() == [None]
