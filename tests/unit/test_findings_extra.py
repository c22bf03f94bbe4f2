"""Findings beside the wait states: communication-bound (its advice depends on whether the ranks had a
network between them) and hot spots (only where the traffic or the waiting for it matters)."""

from __future__ import annotations

import polars as pl
import pytest

from mpiscope.analysis.findings import FileIo, comm_bound_finding, file_io_finding, hot_spot_findings
from mpiscope.analysis.hotspots import HotSpot

TIMES = pl.DataFrame({"rank": [0, 1], "app_ns": [1_000, 1_000], "mpi_ns": [900, 800]})


def test_busy_run_on_several_hosts_suggests_placement():
    f = comm_bound_finding(TIMES, {0: 100}, "t", hosts=2)
    assert f is not None and f.kind == "communication_bound" and f.seconds == (1_700 - 100) / 1e9
    assert "mpiscope map --trace t" in f.suggestion


def test_busy_run_on_one_host_does_not_suggest_placement():
    f = comm_bound_finding(TIMES, {0: 100}, "t", hosts=1)
    assert f is not None and "mpiscope map" not in f.suggestion and "one host" in f.suggestion


def test_a_run_that_mostly_waits_is_not_communication_bound():
    assert comm_bound_finding(TIMES, {0: 800, 1: 700}, "t", hosts=2) is None


def test_time_in_mpi_io_is_file_io_not_communication():
    """A run whose time in MPI is mostly MPI-IO is not communication-bound: the file I/O is its own finding."""
    writing = TIMES.with_columns(pl.Series("io_ns", [700, 600]))
    assert comm_bound_finding(writing, {0: 100}, "t", hosts=2) is None
    f = file_io_finding(writing, FileIo(("MPI_File_write_at", "main (app.c:12)", 1_300), 0.9))
    assert f is not None and f.kind == "file_io" and f.seconds == 1_300 / 1e9 and f.ranks == [0, 1]
    assert "65 % of their time in MPI-IO" in f.text and "MPI_File_write_at at main (app.c:12)" in f.text
    assert "write collectively" in f.suggestion
    assert file_io_finding(TIMES.with_columns(pl.lit(0).alias("io_ns")), None) is None
    # the advice fits what the time went to: reads are told of reading, collective writes not to be
    # made collective, files opened once each not to be opened once (a read-only program was told to write
    # collectively, an HDF5 run whose writes were collective to write collectively)
    reading = file_io_finding(writing, FileIo(None, 0.9, read_share=0.8))
    assert reading is not None and reading.suggestion.startswith("read less often") and "write" not in reading.suggestion
    collective = file_io_finding(writing, FileIo(None, 0.9, collective_share=0.9))
    assert collective is not None and "write collectively" not in collective.suggestion
    assert "collective already" in collective.suggestion
    # mostly opening, closing and syncing: other advice, by how often files were opened
    meta = file_io_finding(writing, FileIo(("MPI_File_sync", "main (app.c:20)", 900), 0.25, opens=40, accesses=40))
    assert meta is not None and "75 % of it opening, closing, syncing or resizing files" in meta.text
    assert "open each file once" in meta.suggestion
    few = file_io_finding(writing, FileIo(None, 0.25, opens=8, accesses=800))
    assert few is not None and "open each file once" not in few.suggestion and "fewer, larger files" in few.suggestion
    assert "opening" not in file_io_finding(writing, FileIo(("MPI_File_sync", "s", 900), 0.75)).text
    # one writer rank among four
    writer = pl.DataFrame({"rank": [0, 1, 2, 3], "app_ns": [1_000] * 4, "mpi_ns": [900, 100, 100, 100],
                           "io_ns": [800, 10, 10, 0]})
    w = file_io_finding(writer, FileIo(("MPI_File_write", "main (app.c:30)", 800)))
    assert w is not None and "rank 0 alone 98 % of it" in w.text and "rather than through rank 0" in w.suggestion
    assert "alone" not in f.text  # two ranks: no writer rank said


def test_hot_spot_of_little_traffic_is_a_finding_only_where_others_waited():
    small = HotSpot(3, "bytes_sent", 88, 22.0, 88)
    heavy = HotSpot(0, "messages_received", 5_000, 1_250.0, 5_000)
    assert [f.ranks for f in hot_spot_findings([heavy, small], {})] == [[0]]
    assert [f.ranks for f in hot_spot_findings([small], {3: 2_000_000}, floor_s=0.001)] == [[3]]
    assert hot_spot_findings([small], {3: 500_000}, floor_s=0.001) == []


def test_waits_at_collectives_are_not_laid_at_a_hot_spot():
    """Ranks 1-3 each send rank 0 one message (rank 0 is a hot spot by messages received), then wait
    for rank 0 at barriers: those waits are the barrier's, not the hot spot's."""
    from tests.unit.test_waitstates import Run

    from mpiscope.analysis.diagnose import diagnose_frames

    run = Run(4)
    for r in range(4):
        run.call(r, "MPI_Init", 0, 5)
    for w in (1, 2, 3):
        run.send(run.call(w, "MPI_Send", 10, 11), run.call(0, "MPI_Recv", 10 + w, 12 + w))
    for b in range(5):  # rank 0 enters every barrier 1,000 ns late
        t = 100 + 2_000 * b
        for r in range(4):
            run.call(r, "MPI_Barrier", t + (1_000 if r == 0 else 0), t + 1_010, coll=b)
    d = diagnose_frames(run.frames()).to_json()
    assert any(h["rank"] == 0 for h in d["hot_spots"])
    assert not [f for f in d["findings"] if f["kind"] == "hot_spot"]
    barrier = [f for f in d["findings"] if f["kind"] == "wait_at_barrier"]
    assert barrier and "hot spot" not in barrier[0]["text"] and "master" not in barrier[0]["suggestion"]


def test_a_late_sender_that_was_itself_held_up_is_not_told_to_rebalance():
    """Rank 1 sends late because it waited for rank 2 first, not because it computed longer: the
    advice points at what held it up."""
    from tests.unit.test_waitstates import Run

    from mpiscope.analysis.diagnose import diagnose_frames

    run = Run(3)
    for r in range(3):
        run.call(r, "MPI_Init", 0, 5)
    for i in range(4):
        t = 100 + 10_000 * i
        recv0 = run.call(0, "MPI_Recv", t, t + 5_000)                  # waits for rank 1
        recv1 = run.call(1, "MPI_Recv", t, t + 4_990)                  # waits for rank 2
        run.send(run.call(2, "MPI_Send", t + 4_980, t + 4_985), recv1)  # rank 2 computed 4,880 ns more
        run.send(run.call(1, "MPI_Send", t + 4_995, t + 4_998), recv0)
    d = diagnose_frames(run.frames()).to_json()
    held = [f for f in d["findings"] if f["kind"] == "late_sender" and f["ranks"] == [0]]
    assert held and "did not compute noticeably longer" in held[0]["text"], d["findings"]
    assert "mpiscope rebalance" not in held[0]["suggestion"] and "held rank 1 up" in held[0]["suggestion"]
    explained = [f for f in d["findings"] if f["kind"] == "late_sender" and f["ranks"] == [1]]
    assert explained and "mpiscope rebalance" in explained[0]["suggestion"]
    assert "(mean per waiting call)" not in explained[0]["text"]  # one wait: its own delay


def test_a_delay_beside_several_waits_is_said_to_be_their_mean() -> None:
    """24 waits summed to 20 ms beside a delay of 834 µs per wait: not read as 4 % explained."""
    from mpiscope.analysis.findings import _cause_text

    r = {"cause_rank": 0, "cause_call": "MPI_Send", "cause_callsite": "main (a.c:3)", "delay_ns": 834_000,
         "wait_ns": 20_000_000, "instances": 24}
    assert _cause_text(r) == "rank 0 computed 834 µs longer (mean per waiting call) before MPI_Send at main (a.c:3)"


def test_a_barrier_waiting_for_a_held_up_rank_is_not_told_to_rebalance():
    """Rank 0 enters the barrier last because it waited in a receive, not because it computed:
    the advice points at what held it up, and dropping the barrier still holds."""
    from tests.unit.test_waitstates import Run

    from mpiscope.analysis.diagnose import diagnose_frames

    run = Run(3)
    for r in range(3):
        run.call(r, "MPI_Init", 0, 5)
    for b in range(4):
        t = 100 + 10_000 * b
        recv = run.call(0, "MPI_Recv", t, t + 5_000)
        run.send(run.call(1, "MPI_Send", t + 4_990, t + 4_995), recv)
        run.call(0, "MPI_Barrier", t + 5_005, t + 5_010, coll=b)
        run.call(1, "MPI_Barrier", t + 5_000, t + 5_010, coll=b)
        run.call(2, "MPI_Barrier", t + 20, t + 5_010, coll=b)
    d = diagnose_frames(run.frames()).to_json()
    barrier = [f for f in d["findings"] if f["kind"] == "wait_at_barrier" and 2 in f["ranks"]]
    assert barrier and "did not compute noticeably longer" in barrier[0]["text"], d["findings"]
    assert "held rank 0 up" in barrier[0]["suggestion"] and "drop the barrier" in barrier[0]["suggestion"]
    assert "mpiscope rebalance" not in barrier[0]["suggestion"]


def test_imbalance_on_a_crowded_host_is_told_to_record_again_first():
    """Rank 1 computes twice as long between the barriers: an imbalance, and rank 0 waits at each
    barrier; where the ranks shared fewer CPUs than they were, the spread may be the scheduler's,
    so every advice to rebalance says so first."""
    from tests.unit.test_waitstates import Run

    from mpiscope.analysis.diagnose import diagnose_frames
    from mpiscope.trace.placement import Crowded

    run = Run(2)
    for r in range(2):
        run.call(r, "MPI_Init", 0, 5)
    for b in range(4):
        t = 100 + 100_000 * b
        run.call(0, "MPI_Barrier", t + 40_000, t + 80_010, coll=b)
        run.call(1, "MPI_Barrier", t + 80_000, t + 80_010, coll=b)

    def advice(crowded: list[Crowded] | None, kind: str = "imbalance") -> str:
        found = [f for f in diagnose_frames(run.frames(), crowded=crowded).findings if f.kind == kind]
        assert found
        return found[0].suggestion

    crowded = [Crowded("h", [0, 1], 1, 1)]
    assert advice(None).startswith("give each rank work in proportion")
    assert advice(crowded).startswith("record again with no more ranks than CPUs")
    assert advice(None, "wait_at_barrier").startswith("balance that work: mpiscope rebalance")
    barrier = advice(crowded, "wait_at_barrier")
    assert barrier.startswith("record again with no more ranks than CPUs") and "mpiscope rebalance" in barrier


def test_polling_and_one_sided_synchronisation_are_not_busy_time():
    """Rank 0 spends most of its run polling with MPI_Test and in MPI_Win_wait, waiting for rank 1:
    that is not time spent moving data, so the run is not called communication-bound; where it is
    (rank 1 in long sends), the finding says what it left out."""
    from tests.unit.test_waitstates import Run

    from mpiscope.analysis.diagnose import diagnose_frames

    def run_with(sends: bool) -> list[dict[str, object]]:
        run = Run(2)
        for r in range(2):
            run.call(r, "MPI_Init", 0, 5)
            run.call(r, "MPI_Finalize", 10_000, 10_005)
        for i in range(40):
            run.call(0, "MPI_Test", 100 + 200 * i, 250 + 200 * i)
            if sends:
                run.call(1, "MPI_Bsend", 100 + 200 * i, 290 + 200 * i)
        run.call(0, "MPI_Win_wait", 8_100, 9_100)
        # a flush and an unlock wait for their target to carry out the operations (IMB-RMA's
        # flushes while the target sat in a barrier): synchronisation too, not moving data
        run.call(0, "MPI_Win_flush", 9_100, 9_500)
        run.call(0, "MPI_Win_unlock", 9_500, 9_900)
        return diagnose_frames(run.frames()).to_json()["findings"]

    assert not [f for f in run_with(False) if f["kind"] == "communication_bound"]
    (busy,) = [f for f in run_with(True) if f["kind"] == "communication_bound"]
    assert busy["seconds"] == pytest.approx(40 * 190 / 1e9)
    assert "left out: 6 µs of polling and 1.8 µs of one-sided synchronisation" in busy["text"], busy["text"]
    (unsaid,) = [f for f in run_with(False) if f["kind"] == "unattributed_wait"]
    assert unsaid["unattributed_seconds"]["one-sided synchronisation"] == pytest.approx(1_800 / 1e9)
    assert "flush and unlock" in unsaid["suggestion"]


def test_findings_name_a_cpp_call_site_by_its_function_and_line():
    from mpiscope.analysis.findings import short_site

    dot = ("miniFE::TypeTraits<miniFE::Vector<double, int, int>::ScalarType>::magnitude_type miniFE::dot<"
           "miniFE::Vector<double, int, int> >(miniFE::Vector<double, int, int> const&, miniFE::Vector<double, "
           "int, int> const&) (Vector_functions.hpp:221)")
    assert short_site(dot) == "miniFE::dot (Vector_functions.hpp:221)"
    lulesh = "CommSBN(Domain&, int, double& (Domain::*)(int), double& (Domain::*)(int)) (lulesh-comm.cc:911)"
    assert short_site(lulesh) == "CommSBN (lulesh-comm.cc:911)"
    assert short_site("main (ring.c:20)") == "main (ring.c:20)" and short_site(None) == "?"
    # short names alike: miniMD's sites are 41 and 49 characters long
    assert short_site("Comm::communicate(Atom&) (comm.2.cpp:304)") == "Comm::communicate (comm.2.cpp:304)"
    assert short_site("0x401050") == "0x401050"


def test_a_wait_for_file_accesses_only_is_mpi_io_time():
    """MPI_File_iwrite_at ... MPI_Wait: the wait is the write's time (rank_times' io_ns, not communication
    or polling); a wait that also completed a message stays communication."""
    from tests.unit.test_waitstates import Run

    from mpiscope.analysis.frames import file_io_rows, rank_times
    from mpiscope.analysis.waitstates import unattributed_ns, wait_events

    run = Run(2)
    for r in (0, 1):
        run.call(r, "MPI_Init", 0, 5)
        run.call(r, "MPI_Finalize", 100, 101)
    wait = run.call(0, "MPI_Wait", 12, 50)
    run.call(0, "MPI_File_iwrite_at", 10, 12, done_by=wait)
    both = run.call(0, "MPI_Waitall", 62, 90)
    isend = run.call(0, "MPI_Isend", 60, 61, done_by=both)
    run.call(0, "MPI_File_iread_at", 61, 62, done_by=both)
    test = run.call(0, "MPI_Test", 95, 99)
    run.call(0, "MPI_File_iread", 91, 92, done_by=test)
    run.send(isend, run.call(1, "MPI_Recv", 60, 70))
    f = run.frames()
    io = dict(zip(f.events["call"].cast(pl.Utf8).to_list(), file_io_rows(f).tolist()))
    assert io == {"MPI_Init": False, "MPI_Finalize": False, "MPI_File_iwrite_at": True, "MPI_Wait": True,
                  "MPI_Isend": False, "MPI_File_iread_at": True, "MPI_Waitall": False, "MPI_File_iread": True,
                  "MPI_Test": True, "MPI_Recv": False}
    assert rank_times(f)["io_ns"].to_list() == [2 + 38 + 1 + 1 + 4, 0]
    assert unattributed_ns(f, wait_events(f))["polling"] == 0


def test_a_wait_for_a_rank_that_left_mpi_init_late_is_the_start_up():
    """Rank 0 leaves MPI_Init 90 ns after rank 1 entered the barrier it waits in: the MPI's start-up, not
    the program (it read 'held up earlier, see the critical path', which starts after it); a later wait at
    the same barrier, where rank 0 computed longer, stays the program's."""
    from tests.unit.test_waitstates import Run

    from mpiscope.analysis.findings import START_UP_ADVICE, wait_findings
    from mpiscope.analysis.waitstates import wait_events

    run = Run(2)
    run.call(0, "MPI_Init", 0, 100)
    run.call(1, "MPI_Init", 0, 10)
    run.call(0, "MPI_Barrier", 102, 105, coll=1, site="barrier@main")
    run.call(1, "MPI_Barrier", 12, 105, coll=1, site="barrier@main")
    run.call(0, "MPI_Barrier", 300, 302, coll=2, site="barrier@main")   # rank 0 computed 195, rank 1 5
    run.call(1, "MPI_Barrier", 110, 302, coll=2, site="barrier@main")
    for r in (0, 1):
        run.call(r, "MPI_Finalize", 400, 401)
    waits = wait_events(run.frames())
    assert waits["in_init_ns"].to_list() == [88, 0]  # rank 1 waited from 12, rank 0 left MPI_Init at 100
    by_start = {f.evidence["start_up"]: f for f in wait_findings(waits, "t", 2)}
    first, later = by_start[True], by_start[False]
    assert first.seconds == 90e-9 and "rank 0 was still inside MPI_Init for 88 ns of it" in first.text
    assert "the MPI's start-up" in first.text and first.suggestion == START_UP_ADVICE
    assert later.seconds == 190e-9 and "rank 0 computed" in later.text


def test_late_receiver_advice_fits_the_send_and_the_cause():
    """A late receiver that did not compute longer is not told to rebalance (it was held up earlier),
    and a send that already is nonblocking (NPB BT's MPI_Isend, waited in MPI_Wait) is not told to
    use MPI_Isend but to complete it later."""
    from mpiscope.analysis.findings import wait_findings

    def advice(call: str, delay_ns: int) -> str:
        waits = pl.DataFrame({
            "pattern": ["late_receiver"], "call": [call], "callsite": ["y_solve (y_solve.f:73)"], "cause_rank": [1],
            "cause_call": ["MPI_Irecv"], "cause_callsite": ["y_solve (y_solve.f:60)"], "wait_ns": [1_000_000],
            "rank": [0], "delay_ns": [delay_ns], "cause_from_callsite": [None], "reorderable": [0.0],
            "in_init_ns": [0]}, schema_overrides={"cause_from_callsite": pl.Utf8})
        (found,) = wait_findings(waits, "t", 4)
        return found.suggestion

    held = advice("MPI_Wait", 0)
    assert "rather than rebalance" in held and "mpiscope rebalance" not in held
    assert "complete the send later" in held and "MPI_Isend" not in held
    blocking = advice("MPI_Send", 900_000)
    assert "let the send go on (MPI_Isend" in blocking and "mpiscope rebalance t" in blocking


def test_the_page_names_call_sites_as_the_findings_do():
    """The report's tables and hover show a C++ call site by its function (short_site), not the
    start of its demangled name, which a table cell cut before the function ("miniFE::TypeTraits<...")."""
    import polars as pl

    from mpiscope.report.payload import _short

    dot = ("miniFE::TypeTraits<miniFE::Vector<double, int, int>::ScalarType>::magnitude_type miniFE::dot<"
           "miniFE::Vector<double, int, int> >(miniFE::Vector<double, int, int> const&, miniFE::Vector<double, "
           "int, int> const&) (Vector_functions.hpp:221)")
    got = pl.DataFrame({"callsite": [dot, "main (ab.c:13)", None]}).select(_short(pl.col("callsite")))
    assert got["callsite"].to_list() == ["miniFE::dot (Vector_functions.hpp:221)", "main (ab.c:13)", None]


def test_communication_bound_advice_fits_the_calls_that_took_the_time():
    """The busy time is named by its calls and the advice follows the one that took most: a run
    whose busy time was MPI_Comm_split at start-up was told to send fewer, larger messages (it sent
    none); collectives are to be combined; point-to-point keeps fewer, larger messages."""
    import polars as pl

    from mpiscope.analysis.findings import comm_bound_finding

    times = pl.DataFrame({"rank": [0, 1], "app_ns": [100, 100], "mpi_ns": [80, 80]})

    def said(calls: list[tuple[str, int]]) -> tuple[str, str]:
        f = comm_bound_finding(times, {}, "t", hosts=1, busiest=calls)
        assert f is not None
        return f.text, f.suggestion

    text, advice = said([("MPI_Comm_split", 150), ("MPI_Bcast", 9), ("MPI_Wait", 1)])
    assert text.endswith("mostly in MPI_Comm_split (150 ns) and MPI_Bcast (9 ns)"), text
    assert advice.startswith("create communicators and windows once")
    assert said([("MPI_Allreduce_c", 160)])[1].startswith("call collectives less often and combine them")
    assert said([("MPI_Isend", 100), ("MPI_Waitall", 60)])[1].startswith("send fewer, larger messages")
    # one-sided: a program of one window whose time went to fences was told to create windows once
    assert said([("MPI_Win_fence", 150)])[1].startswith("synchronise the windows less often")
    assert said([("MPI_Win_free", 150)])[1].startswith("create communicators and windows once")
    assert said([("MPI_Rput", 150)])[1].startswith("move fewer, larger one-sided transfers")


def test_imbalance_of_many_phases_is_rebalanced_over_all_of_them():
    """A run of many phases (an iterative program's steps) is rebalanced by its computation summed
    over them: one step's shares are noise (LAMMPS: the worst phase of two time steps gave 8 of 240
    rows to the rank that computed three times longer over the run); one big phase (S-CAT's mm) by
    itself."""
    from mpiscope.analysis.findings import imbalance_finding
    from mpiscope.analysis.imbalance import Imbalance, Phase

    def imb(n: int) -> Imbalance:
        return Imbalance(2, [Phase(i, 0, 1, [3_000_000, 1_000_000], 66.7, 0, "MPI_Allreduce") for i in range(n)])

    assert imbalance_finding(imb(40), "t").suggestion.endswith("--shares ROWSx2 --phase all")
    assert imbalance_finding(imb(1), "t").suggestion.endswith("--shares ROWSx2 --phase 0")
