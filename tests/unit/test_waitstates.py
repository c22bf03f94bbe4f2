"""Wait states, critical path, phases and hot spots on small hand-made tables (exact
numbers), and the property that no rank waits longer than it spends in MPI."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mpiscope.analysis.critical import critical_path
from mpiscope.analysis.diagnose import diagnose_frames
from mpiscope.analysis.frames import Frames, frames_from, rank_times
from mpiscope.analysis.hotspots import hot_spots
from mpiscope.analysis.imbalance import phases_of
from mpiscope.analysis.waitstates import wait_events, wait_state_rows
from mpiscope.errors import UsageError


@dataclass
class Run:
    """Events given in any order (index = position in `events`), renumbered in (rank, entry) order."""
    ranks: int
    events: list[dict[str, object]] = field(default_factory=list)
    messages: list[tuple[int, int, int]] = field(default_factory=list)  # send, receive (indices), bytes

    def call(self, rank: int, call: str, t0: int, t1: int, **kw: object) -> int:
        self.events.append({"rank": rank, "call": call, "t0": t0, "t1": t1, "site": f"{call}@{rank}:{t0}", **kw})
        return len(self.events) - 1

    def send(self, send: int, recv: int, nbytes: int = 8) -> None:
        self.messages.append((send, recv, nbytes))

    def frames(self) -> Frames:
        order = sorted(range(len(self.events)), key=lambda i: (self.events[i]["rank"], self.events[i]["t0"], i))
        eid = {old: new for new, old in enumerate(order)}
        rows = [self.events[i] for i in order]
        ev = pl.DataFrame({
            "event": list(range(len(rows))), "rank": [r["rank"] for r in rows], "call": [r["call"] for r in rows],
            "t_enter_ns": [r["t0"] for r in rows], "t_leave_ns": [r["t1"] for r in rows],
            "completed_by": [eid[r["done_by"]] if "done_by" in r else None for r in rows],  # type: ignore[index]
            "coll_id": [r.get("coll") for r in rows], "root": [r.get("root") for r in rows],
            "callsite": [r["site"] for r in rows], "inside_ns": [None] * len(rows),
            "comm": [r.get("comm", 0) for r in rows],
        }, schema={"event": pl.Int64, "rank": pl.Int32, "call": pl.Utf8, "t_enter_ns": pl.Int64,
                   "t_leave_ns": pl.Int64, "completed_by": pl.Int64, "coll_id": pl.Int64, "root": pl.Int32,
                   "callsite": pl.Utf8, "inside_ns": pl.Int64, "comm": pl.Int64})
        e = self.events
        msgs = pl.DataFrame({
            "src": [e[s]["rank"] for s, _, _ in self.messages], "dst": [e[r]["rank"] for _, r, _ in self.messages],
            "bytes": [b for _, _, b in self.messages],
            "t_send_enter_ns": [e[s]["t0"] for s, _, _ in self.messages],
            "t_recv_enter_ns": [e[r]["t0"] for _, r, _ in self.messages],
            "send_event": [eid[s] for s, _, _ in self.messages], "recv_event": [eid[r] for _, r, _ in self.messages],
        }, schema={"src": pl.Int32, "dst": pl.Int32, "bytes": pl.Int64, "t_send_enter_ns": pl.Int64,
                   "t_recv_enter_ns": pl.Int64, "send_event": pl.Int64, "recv_event": pl.Int64})
        return frames_from(ev, msgs, self.ranks)


def waits_by(run: Run, eager_limit: int = 65536) -> dict[tuple[str, int], int]:
    w = wait_events(run.frames(), eager_limit)
    return {(p, r): ns for p, r, ns in w.group_by("pattern", "rank").agg(pl.col("wait_ns").sum())
            .select(pl.col("pattern").cast(pl.Utf8), "rank", "wait_ns").iter_rows()}


def test_late_sender_blocking_and_its_cause():
    run = Run(2)
    run.call(0, "MPI_Init", 0, 5)
    run.call(1, "MPI_Init", 0, 5)
    recv = run.call(0, "MPI_Recv", 10, 102)
    run.call(1, "MPI_Barrier", 20, 30, coll=7, root=None)       # a lone instance: no wait
    send = run.call(1, "MPI_Send", 100, 101)
    run.send(send, recv)
    w = wait_events(run.frames())
    assert w.height == 1
    row = w.row(0, named=True)
    assert (str(row["pattern"]), row["rank"], row["wait_ns"], row["release_ns"]) == ("late_sender", 0, 90, 100)
    assert (row["cause_rank"], row["cause_callsite"], row["cause_from_callsite"]) == (1, "MPI_Send@1:100",
                                                                                      "MPI_Barrier@1:20")
    # the lone barrier waited for no one: the computation runs back over it to MPI_Init (95 ns less its
    # 10 ns); rank 0 computed 5 ns before its Recv
    assert row["cause_compute_ns"] == 85 and row["delay_ns"] == 85 - 5
    rows = wait_state_rows(w).to_dicts()
    assert rows[0]["caused_by"][0] == {"rank": 1, "callsite": "MPI_Send@1:100", "seconds": 90e-9, "instances": 1,
                                       "from_callsite": "MPI_Barrier@1:20", "excess_compute_seconds": 80e-9}


def test_blocking_probes_wait_for_their_message():
    """MPI_Mprobe is its message's receive (posted at its entry), completed by the MPI_Mrecv after
    it: the probe waited. An MPI_Probe right before the MPI_Recv of the message it found waited for
    it; one that found another message, which came earlier, waited for that one, not this."""
    run = Run(3)
    mrecv = run.call(0, "MPI_Mrecv", 101, 102)
    run.send(run.call(1, "MPI_Send", 100, 101), run.call(0, "MPI_Mprobe", 10, 100, done_by=mrecv))
    run.call(0, "MPI_Probe", 200, 300)
    run.send(run.call(2, "MPI_Send", 290, 291), run.call(0, "MPI_Recv", 301, 302))
    run.call(0, "MPI_Probe", 400, 450)  # found rank 1's message, sent at 440; the Recv is for rank 2's
    run.send(run.call(2, "MPI_Send", 460, 461), run.call(0, "MPI_Recv", 451, 470))
    run.send(run.call(1, "MPI_Send", 440, 441), run.call(0, "MPI_Recv", 471, 472))
    w = wait_events(run.frames())
    got = [(str(c), n, r) for c, n, r in w.select("call", "wait_ns", "cause_rank").iter_rows()]
    assert got == [("MPI_Mprobe", 90, 1), ("MPI_Probe", 90, 2), ("MPI_Recv", 9, 2)], got


def test_a_matched_probe_waits_also_where_the_trace_names_no_completing_call():
    """A recorded MPI_Mprobe has no completed_by (its MPI_Mrecv is found by the time the message was
    received): the probe waited, not the MPI_Mrecv that left at that time."""
    run = Run(2)
    run.call(0, "MPI_Mrecv", 101, 102)
    run.send(run.call(1, "MPI_Send", 100, 101), run.call(0, "MPI_Mprobe", 10, 100))
    frames = run.frames()
    w = wait_events(replace(frames, messages=frames.messages.with_columns(
        pl.lit(102, pl.Int64).alias("t_recv_leave_ns"))))
    assert [(str(c), n) for c, n in w.select("call", "wait_ns").iter_rows()] == [("MPI_Mprobe", 90)]


def test_waitall_waits_for_the_latest_message_once():
    run = Run(3)
    wait = run.call(0, "MPI_Waitall", 2, 200)
    a = run.call(0, "MPI_Irecv", 0, 1, done_by=wait)
    b = run.call(0, "MPI_Irecv", 1, 2, done_by=wait)
    run.send(run.call(1, "MPI_Send", 50, 51), a)
    run.send(run.call(2, "MPI_Send", 150, 151), b)
    w = wait_events(run.frames())
    assert w["wait_ns"].to_list() == [148] and w["cause_rank"].to_list() == [2]   # not 48 + 148
    assert str(w["call"][0]) == "MPI_Waitall"


def test_late_receiver_only_for_sends_that_block():
    def run_with(call: str, nbytes: int, recv_at: int) -> Run:
        run = Run(2)
        send = run.call(0, call, 0, 100)
        run.send(send, run.call(1, "MPI_Recv", recv_at, recv_at + 40), nbytes)
        return run

    assert waits_by(run_with("MPI_Ssend", 8, 80)) == {("late_receiver", 0): 80}
    assert waits_by(run_with("MPI_Send", 8, 80)) == {}                      # eager: the send did not wait
    assert waits_by(run_with("MPI_Send", 8, 80), eager_limit=8) == {("late_receiver", 0): 80}
    assert waits_by(run_with("MPI_Send", 1 << 20, 80)) == {("late_receiver", 0): 80}
    assert waits_by(run_with("MPI_Ssend", 8, 150)) == {}      # left before the receive was posted


def test_nonblocking_send_waits_in_its_completion():
    run = Run(2)
    wait = run.call(0, "MPI_Wait", 10, 100)
    send = run.call(0, "MPI_Issend", 0, 1, done_by=wait)
    run.send(send, run.call(1, "MPI_Recv", 60, 110))
    assert waits_by(run) == {("late_receiver", 0): 50}


def test_wrong_order():
    run = Run(3)
    first = run.call(0, "MPI_Recv", 10, 100)       # from rank 2, which sends late
    second = run.call(0, "MPI_Recv", 100, 101)     # from rank 1, whose message was there all along
    run.send(run.call(1, "MPI_Send", 0, 1), second)
    run.send(run.call(2, "MPI_Send", 90, 91), first)
    assert waits_by(run) == {("late_sender_wrong_order", 0): 80}


def _wrong_order_run(send_between: bool, waiting: str = "MPI_Recv") -> Run:
    """Rank 0 waits for rank 2's late message while rank 1's is there; with `send_between`, rank 0
    sends to rank 3 before it receives rank 1's (a later step, as NPB CG's stages); `waiting`
    MPI_Sendrecv: the waiting call sends itself (CoMD's exchanges, one dimension after another)."""
    run = Run(4)
    first = run.call(0, waiting, 10, 100)
    if send_between:
        run.send(run.call(0, "MPI_Send", 100, 101), run.call(3, "MPI_Recv", 0, 102))
    second = run.call(0, "MPI_Recv", 105, 106)
    run.send(run.call(1, "MPI_Send", 0, 1), second)
    run.send(run.call(2, "MPI_Send", 90, 91), first)
    for k in range(3):  # a ring of messages nobody waits for, so that no rank is a hot spot
        for r in range(4):
            run.send(run.call(r, "MPI_Send", 200 + 10 * k, 201 + 10 * k),
                     run.call((r + 1) % 4, "MPI_Recv", 202 + 10 * k, 203 + 10 * k))
    return run


def test_wrong_order_is_reorderable_only_with_no_send_between():
    for between, waiting, reorderable in ((False, "MPI_Recv", True), (True, "MPI_Recv", False),
                                          (False, "MPI_Sendrecv", False)):
        waits = wait_events(_wrong_order_run(between, waiting).frames())
        wo = waits.filter(pl.col("pattern") == "late_sender_wrong_order")
        assert wo.height == 1 and wo["reorderable"].to_list() == [reorderable], (between, waits)
        assert waits.filter(pl.col("pattern") != "late_sender_wrong_order")["reorderable"].sum() == 0


def test_wrong_order_advice_follows_the_order_of_steps():
    def advice(between: bool) -> tuple[str, str]:
        f = next(x for x in diagnose_frames(_wrong_order_run(between).frames()).findings
                 if x.kind == "late_sender_wrong_order")
        return f.text, f.suggestion

    text, do = advice(False)
    assert "MPI_Irecv per sender" in do and "later step" not in text
    text, do = advice(True)
    assert "MPI_Irecv per sender" not in do and "most likely for a later step" in text


def test_collective_patterns():
    run = Run(3)
    for r, t in enumerate((0, 10, 30)):
        run.call(r, "MPI_Barrier", t, 40, coll=0)
    for r, t in enumerate((100, 150, 120)):                  # root 1 enters last
        run.call(r, "MPI_Bcast", t, 160, coll=1, root=1)
    for r, t in enumerate((200, 240, 260)):                  # root 0 enters first
        run.call(r, "MPI_Reduce", t, 270 if r == 0 else t + 1, coll=2, root=0)
    for r, t in enumerate((300, 310, 305)):                  # nonblocking: waits in its MPI_Wait
        w = run.call(r, "MPI_Wait", 320, 330)
        run.call(r, "MPI_Iallreduce", t, t + 1, coll=3, done_by=w)
    assert waits_by(run) == {("wait_at_barrier", 0): 30, ("wait_at_barrier", 1): 20, ("late_broadcast", 0): 50,
                             ("late_broadcast", 2): 30, ("early_reduce", 0): 40}
    w = wait_events(run.frames())
    assert w.filter(pl.col("pattern") == "early_reduce")["cause_rank"].to_list() == [1]
    assert set(w.filter(pl.col("pattern") == "wait_at_barrier")["cause_rank"].to_list()) == {2}


def test_wait_at_fence_per_window():
    """The k-th fence of a window on each rank is one instance; two windows' fences do not mix."""
    run = Run(3)
    for r in range(3):
        run.call(r, "MPI_Init", 0, 10)
    # window 5: rank 2 enters 40 late; window 6 (in between): rank 0 enters 25 late
    run.call(0, "MPI_Win_fence", 20, 70, comm=5)
    run.call(1, "MPI_Win_fence", 30, 70, comm=5)
    run.call(2, "MPI_Win_fence", 60, 70, comm=5)
    run.call(0, "MPI_Win_fence", 105, 110, comm=6)
    run.call(1, "MPI_Win_fence", 80, 110, comm=6)
    run.call(2, "MPI_Win_fence", 90, 110, comm=6)
    run.call(0, "MPI_Win_fence", 120, 130, comm=5)
    run.call(1, "MPI_Win_fence", 120, 130, comm=5)
    run.call(2, "MPI_Win_fence", 120, 130, comm=5)
    assert waits_by(run) == {("wait_at_fence", 0): 40, ("wait_at_fence", 1): 30 + 25, ("wait_at_fence", 2): 15}
    w = wait_events(run.frames())
    assert sorted(w["cause_rank"].to_list()) == [0, 0, 2, 2]


def two_rank_run() -> Run:
    run = Run(2)
    run.call(0, "MPI_Init", 0, 10)
    run.call(1, "MPI_Init", 0, 10)
    recv = run.call(0, "MPI_Recv", 20, 100)
    run.send(run.call(1, "MPI_Send", 90, 91), recv)
    run.call(0, "MPI_Barrier", 100, 150, coll=0)
    run.call(1, "MPI_Barrier", 140, 150, coll=0)
    run.call(0, "MPI_Finalize", 170, 180)
    run.call(1, "MPI_Finalize", 160, 180)
    return run


def test_critical_path():
    f = two_rank_run().frames()
    cp = critical_path(wait_events(f), rank_times(f))
    # rank 0 from its end (170) back to its barrier's release (140), to rank 1 at 140, back to
    # 91... rank 1 never waited: on to its start (10). Rank 0: 30 ns, rank 1: 130 ns.
    assert cp.ns_by_rank == [30, 130] and cp.seconds == 160e-9 and cp.end_rank == 0
    assert cp.share_by_rank == pytest.approx([30 / 160, 130 / 160])


def test_phases():
    imb = phases_of(two_rank_run().frames())
    (p,) = imb.phases
    # rank 0: 100 - 10 - 80 in MPI_Recv = 10; rank 1: 140 - 10 - 1 in MPI_Send = 129
    assert (p.index, p.compute_ns, p.critical_rank, p.closing_call) == (0, [10, 129], 1, "MPI_Barrier")
    assert p.imbalance_pct == pytest.approx(100 * (129 - 69.5) / 129)
    assert (p.t_start_ns, p.t_end_ns) == (10, 140)
    assert imb.to_json()["total"]["lost_seconds"] == pytest.approx(59.5e-9)


def test_work_after_the_last_collective_is_a_phase_closed_by_finalize():
    """A program that synchronises only at its start computes after its last collective: that stretch,
    up to MPI_Finalize, is a phase where a rank computed 1 ms in it (tachyon's 2.7 s read as balanced,
    in 0.8 ms of phases, and rebalance refused it)."""
    ms = 1_000_000
    run = Run(2)
    for r in range(2):
        run.call(r, "MPI_Init", 0, 10)
        run.call(r, "MPI_Barrier", 20, 30, coll=0)
    run.call(0, "MPI_Send", 30 + 100 * ms, 31 + 100 * ms)       # 1 ns in MPI inside the phase
    run.call(0, "MPI_Finalize", 30 + 300 * ms, 40 + 300 * ms)
    run.call(1, "MPI_Finalize", 30 + 600 * ms, 40 + 600 * ms)
    imb = phases_of(run.frames())
    first, last = imb.phases
    assert first.closing_call == "MPI_Barrier" and last.closing_call == "MPI_Finalize"
    assert last.compute_ns == [300 * ms - 1, 600 * ms] and last.critical_rank == 1
    assert (last.t_start_ns, last.t_end_ns) == (30, 30 + 600 * ms)
    # with no collective at all, the run up to MPI_Finalize is its one phase
    run = Run(2)
    for r in range(2):
        run.call(r, "MPI_Init", 0, 10)
        run.call(r, "MPI_Finalize", 10 + (r + 1) * 5 * ms, 20 + (r + 1) * 5 * ms)
    (only,) = phases_of(run.frames()).phases
    assert only.compute_ns == [5 * ms, 10 * ms] and only.closing_call == "MPI_Finalize"


def test_many_phases_are_grouped_in_the_json():
    run = Run(2)
    for i in range(200):
        for r in range(2):
            run.call(r, "MPI_Allreduce", 100 * i + 10 * r * (i % 3), 100 * i + 50, coll=i)
    imb = phases_of(run.frames())
    js = imb.to_json(limit=16)
    assert len(imb.phases) == 200 and js["grouped"] and len(js["phases"]) == 16
    assert sum(g["count"] for g in js["phases"]) == 200
    assert len(js["worst_phases"]) == 10
    assert js["total"]["compute_seconds"] == pytest.approx([sum(p.compute_ns[r] for p in imb.phases) / 1e9
                                                            for r in range(2)])


def test_no_phase_to_cut():
    run = Run(2)
    run.call(0, "MPI_Barrier", 0, 10, coll=0)        # rank 1 never took part
    run.call(1, "MPI_Send", 0, 10)
    with pytest.raises(UsageError, match="has no blocking collective that all 2 ranks take part in"):
        phases_of(run.frames())
    d = diagnose_frames(run.frames())                # the diagnosis goes on without phases
    assert d.imbalance is None and d.to_json()["imbalance"]["phases"] == [] and d.notes


def test_hot_spot():
    run = Run(4)
    for w in (1, 2, 3):
        for i in range(3):
            run.send(run.call(w, "MPI_Send", 10 * i, 10 * i + 1), run.call(0, "MPI_Recv", 10 * i + w, 10 * i + 5))
    spots = hot_spots(run.frames())
    assert [(h.rank, h.measure) for h in spots][:2] == [(0, "messages_received"), (0, "bytes_received")]
    assert spots[0].ratio == 4.0 and spots[0].share == 1.0
    assert hot_spots(Run(2, run.events, run.messages[:0]).frames()) == []


def test_ranks_that_only_exchange_with_each_other_are_no_hot_spots():
    """Two domain leaders of four ranks (PRK's MPISHM transpose): ranks 0 and 2 exchange, 1 and 3
    send nothing. Each leader has 2x the mean of the ranks, as a master of one worker would, but
    its only peer handles as much as it does."""
    run = Run(4)
    for i in range(3):
        t = 10 * i
        run.send(run.call(0, "MPI_Send", t, t + 1), run.call(2, "MPI_Recv", t, t + 5))
        run.send(run.call(2, "MPI_Send", t + 6, t + 7), run.call(0, "MPI_Recv", t + 2, t + 8))
    assert hot_spots(run.frames()) == []
    for w in (1, 3):  # rank 0 now serves ranks 1 and 3 too
        for i in range(3):
            t = 40 + 10 * i + w
            run.send(run.call(w, "MPI_Send", t, t + 1), run.call(0, "MPI_Recv", t, t + 5))
    assert [(h.rank, h.measure) for h in hot_spots(run.frames())][:1] == [(0, "messages_received")]


def test_a_rank_with_one_peer_is_no_hot_spot():
    """PRK's MPISHM pipeline: the last rank alone sends bytes, all of them to rank 0 (4x the mean
    of the ranks each); a master serves several ranks."""
    run = Run(4)
    for i in range(3):
        run.send(run.call(3, "MPI_Send", 10 * i, 10 * i + 1), run.call(0, "MPI_Recv", 10 * i, 10 * i + 5))
    assert hot_spots(run.frames()) == []


CALLS = ["MPI_Send", "MPI_Ssend", "MPI_Recv", "MPI_Isend", "MPI_Irecv", "MPI_Wait", "MPI_Waitall", "MPI_Sendrecv",
         "MPI_Allreduce", "MPI_Barrier", "MPI_Bcast", "MPI_Reduce", "MPI_Ibarrier", "MPI_Init", "MPI_Finalize"]


@st.composite
def random_runs(draw: st.DrawFn) -> Run:
    """Any tables, consistent or not: the bound must hold whatever the clocks and matches say."""
    ranks = draw(st.integers(2, 4))
    run = Run(ranks)
    per_rank: list[list[int]] = []
    for r in range(ranks):
        t, mine = 0, []
        for _ in range(draw(st.integers(1, 8))):
            t += draw(st.integers(0, 50))
            dur = draw(st.integers(0, 100))
            call = draw(st.sampled_from(CALLS))
            kw: dict[str, object] = {}
            if call in ("MPI_Allreduce", "MPI_Barrier", "MPI_Bcast", "MPI_Reduce", "MPI_Ibarrier"):
                kw = {"coll": draw(st.integers(0, 3)), "root": draw(st.integers(0, ranks - 1))}
            mine.append(run.call(r, call, t, t + dur, **kw))
            t += dur
        per_rank.append(mine)
    for mine in per_rank:   # nonblocking starts completed by a later Wait(all) of their rank (Waitall: several)
        for i, e in enumerate(mine):
            later = [x for x in mine[i + 1:] if run.events[x]["call"] in ("MPI_Wait", "MPI_Waitall")]
            if run.events[e]["call"] in ("MPI_Isend", "MPI_Irecv", "MPI_Ibarrier") and later and draw(st.booleans()):
                run.events[e]["done_by"] = draw(st.sampled_from(later))
    every = [e for mine in per_rank for e in mine]
    sends = [e for e in every if run.events[e]["call"] in ("MPI_Send", "MPI_Ssend", "MPI_Isend", "MPI_Sendrecv")]
    recvs = [e for e in every if run.events[e]["call"] in ("MPI_Recv", "MPI_Irecv", "MPI_Sendrecv")]
    for _ in range(draw(st.integers(0, 12)) if sends and recvs else 0):  # any pairs, in any time order
        run.send(draw(st.sampled_from(sends)), draw(st.sampled_from(recvs)), draw(st.sampled_from([8, 1 << 20])))
    return run


@settings(max_examples=100, deadline=None)
@given(random_runs())
def test_no_rank_waits_longer_than_it_spends_in_mpi(run: Run):
    f = run.frames()
    waits = wait_events(f, eager_limit=1024)
    per_rank = dict(waits.group_by("rank").agg(pl.col("wait_ns").sum()).iter_rows())
    mpi = dict(rank_times(f).select("rank", "mpi_ns").iter_rows())
    for rank, ns in per_rank.items():
        assert ns <= mpi[rank], (rank, ns, mpi[rank])
    assert waits["event"].is_unique().all()                  # each call waits once
    d = diagnose_frames(f, eager_limit=1024).to_json()       # and the whole diagnosis goes through
    assert all(r["wait_seconds"] <= r["mpi_seconds"] + 1e-12 for r in d["per_rank"])


def test_eager_limit_needs_each_side_to_agree():
    """The eager limit read from a trace: sends from it on held until their receive, sends below it
    returned, each side with at most a fifth contradicting. 300 small eager sends outweighed a size at
    which 3 of 75 sends had waited (NPB MG: "4,896 B" on an MPICH that waits from 8 KiB)."""
    from mpiscope.analysis.waitstates import observed_eager_limit

    def run_of(sizes_held: list[tuple[int, bool]]) -> Run:
        run = Run(2)
        t = 0
        for nbytes, held in sizes_held:
            # the receive is posted at t + 50 µs; a held send leaves after it, an eager one before
            s = run.call(0, "MPI_Send", t, t + (100_000 if held else 10_000))
            r = run.call(1, "MPI_Recv", t + 50_000, t + 120_000)
            run.send(s, r, nbytes)
            t += 1_000_000
        return run

    # 300 eager sends of 1 KiB; of 75 of 4,896 B three waited: 72 of 75 above the limit contradict it
    mixed = [(1024, False)] * 300 + [(4896, True)] * 3 + [(4896, False)] * 72
    assert observed_eager_limit(run_of(mixed).frames()) is None
    clear = [(1024, False)] * 20 + [(8192, True)] * 6
    assert observed_eager_limit(run_of(clear).frames()) == 8192
    assert observed_eager_limit(run_of([(1024, False)] * 20 + [(8192, True)] * 2).frames()) is None


def test_eager_limit_reads_no_send_held_by_what_its_wait_also_completed():
    """An MPI_Waitall that completes a 1 KiB MPI_Isend and the MPI_Irecv of a late message waits for
    the message, not for the send's receive: such sends are no evidence of the limit ("eager limit
    1,024 B" on MPIs that send up to 4 and 8 KiB eagerly, and false late receivers in PETSc's
    scatters). A wait that completes the send alone still is."""
    from mpiscope.analysis.waitstates import observed_eager_limit

    def run_of(waitall: bool) -> Run:
        run = Run(2)
        for k in range(20):
            t = 1_000_000 * k
            if waitall:  # rank 0: Irecv, Isend, Waitall held until rank 1's late message at t + 300 µs
                rq = run.call(0, "MPI_Irecv", t, t + 1_000)
                sq = run.call(0, "MPI_Isend", t + 2_000, t + 3_000)
                w = run.call(0, "MPI_Waitall", t + 4_000, t + 310_000)
                run.events[rq]["done_by"] = run.events[sq]["done_by"] = w
            else:  # rank 0: Isend, Wait held until rank 1 posts its receive at t + 300 µs
                sq = run.call(0, "MPI_Isend", t + 2_000, t + 3_000)
                w = run.call(0, "MPI_Wait", t + 4_000, t + 310_000)
                run.events[sq]["done_by"] = w
            r = run.call(1, "MPI_Recv", t + 300_000, t + 320_000)
            run.send(sq, r, 1024)
            small = run.call(0, "MPI_Send", t + 400_000, t + 410_000)  # eager: returns before its receive
            run.send(small, run.call(1, "MPI_Recv", t + 450_000, t + 460_000), 16)
        return run

    assert observed_eager_limit(run_of(waitall=True).frames()) is None
    assert observed_eager_limit(run_of(waitall=False).frames()) == 1024
