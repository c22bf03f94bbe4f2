"""OTF2 and Perfetto round trips on recorded examples (MPICH): point-to-point (all modes,
nonblocking, wildcards), every collective (blocking, nonblocking, rooted, v-variants),
sub- and intercommunicators, threads and one-sided calls. Read back with the `otf2` reader
and with otf2-print, the calls, messages (by communicator, peer and tag) and collective
instances equal the tables', every timestamp within 1 ns; the Perfetto file's slices and
flows equal the calls and messages."""

from __future__ import annotations

import shutil
from collections import Counter
from pathlib import Path

import polars as pl
import pytest
from tests.conftest import require
from tests.unit.export_readback import check_otf2, check_perfetto, read_otf2, read_otf2_print, read_perfetto

from mpiscope.export.otf2 import export_otf2
from mpiscope.export.perfetto import export_perfetto

N = 4
EXAMPLES = {
    "p2pmodes": [],
    "wildcard": ["4"],
    "collectives": [],
    "nbc": [],
    "comms": [],
    "threads": ["3", "5"],
    "rma": [],
    "checkpoint": ["2", "65536", "1", "1"],
}


@pytest.mark.mpi(ranks=N)
@pytest.mark.parametrize("name", list(EXAMPLES))
def test_round_trips(run_traced, tmp_path: Path, name: str) -> None:
    require(
        shutil.which("otf2-print") is not None,
        "otf2-print (Debian's otf2-tools)",
        "apt-get install otf2-tools (make setup does it when run as root)",
    )
    # threads: 3 threads on each of 2 ranks; nbc: its MPI_Test loops spin less without oversubscription
    t = run_traced(name, 2 if name in ("threads", "nbc") else N, args=EXAMPLES[name])
    export_otf2(t, tmp_path / "otf2")
    got = read_otf2(tmp_path / "otf2")
    counts = check_otf2(t, got)
    assert counts == check_otf2(t, read_otf2_print(tmp_path / "otf2"))
    if name in ("p2pmodes", "wildcard", "comms", "threads"):
        assert counts["messages"] > 0
    if name in ("collectives", "nbc", "comms"):
        assert counts["instances"] == t.collectives().select(pl.len()).collect().item() > 0
    if name == "threads":
        assert (
            got.select("rank", "thread").n_unique()
            == t.events().select("rank", "thread").collect().n_unique()
            > 2
        )
    if name == "collectives" and "recv_bytes" not in t.events().collect_schema().names():
        # until the recorder records received bytes: a broadcast's non-roots receive the root's 16 bytes
        got_bytes = got.filter((pl.col("kind") == "MpiCollectiveEnd") & (pl.col("received") > 0))
        assert got_bytes.height == 2 * (N - 1) and (got_bytes["received"] == 16).all()
    if name == "rma":
        check_rma(t, got)
    if name != "nbc":  # nbc's Test loops make 10^5 calls: once is enough
        export_perfetto(t, tmp_path / "t.pftrace")
        check_perfetto(t, *read_perfetto(tmp_path / "t.pftrace"))


def check_rma(t, got: pl.DataFrame) -> None:
    """One-sided calls as OTF2 RMA events: an operation per Put/Get/atomic call, each completed
    once, a window created and destroyed on every rank, a lock per MPI_Win_lock."""
    ev = t.events().with_columns(pl.col("call").cast(pl.Utf8)).collect()
    calls = Counter(ev["call"].to_list())
    kinds = Counter(got["kind"].to_list())
    assert kinds["RmaPut"] == calls["MPI_Put"] + calls["MPI_Rput"]
    assert kinds["RmaGet"] == calls["MPI_Get"] + calls["MPI_Rget"]
    atomics = ("MPI_Accumulate", "MPI_Get_accumulate", "MPI_Fetch_and_op", "MPI_Compare_and_swap")
    assert kinds["RmaAtomic"] == sum(calls[c] for c in atomics)
    ops = kinds["RmaPut"] + kinds["RmaGet"] + kinds["RmaAtomic"]
    assert kinds["RmaOpCompleteBlocking"] + kinds["RmaOpCompleteNonBlocking"] == ops > 0
    assert kinds["RmaOpCompleteNonBlocking"] == calls["MPI_Rput"] + calls["MPI_Rget"]
    assert kinds["RmaWinCreate"] == kinds["RmaWinDestroy"] == N
    assert kinds["RmaCollectiveEnd"] == calls["MPI_Win_fence"]
    assert kinds["RmaRequestLock"] == kinds["RmaReleaseLock"] == calls["MPI_Win_lock"]


@pytest.mark.mpi(ranks=2)
def test_sends_never_completed_are_written(tmp_path: Path) -> None:
    """An MPI_Isend whose request the program frees, or never completes, is still a message: OTF2
    gets its MpiIsend (without a completion), as the receiver gets its receive (isend_free.c: three
    messages, the first freed, the second waited for, the third leaked)."""
    from tests.conftest import MPICH, mpiscope_cli

    from mpiscope.mpi.build import compile_program
    from mpiscope.trace import open_trace

    require(shutil.which("otf2-print") is not None, "otf2-print (Debian's otf2-tools)",
            "apt-get install otf2-tools (make setup does it when run as root)")
    exe = compile_program(Path(__file__).parent / "programs" / "isend_free.c", mpicc=str(MPICH.mpicc),
                          out_dir=tmp_path / "build")
    done = mpiscope_cli(["run", "--out", str(tmp_path / "t"), "--", *MPICH.launch(2), str(exe)], env=MPICH.environ())
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-3000:]
    t = open_trace(tmp_path / "t")
    assert t.messages().select(pl.len()).collect().item() == 3
    export_otf2(t, tmp_path / "otf2")
    got = read_otf2(tmp_path / "otf2")
    counts = check_otf2(t, got)
    assert counts == check_otf2(t, read_otf2_print(tmp_path / "otf2")) and counts["messages"] == 3
    kinds = Counter(got["kind"].to_list())
    assert kinds["MpiIsend"] == 3 and kinds["MpiIsendComplete"] == 1


@pytest.mark.mpi(ranks=2)
def test_each_window_is_created_in_its_own_call(tmp_path: Path) -> None:
    """Two MPI_Win_create before either window is used: each holds one RmaWinCreate, of its own
    window (both went into the second call, the latest creation before either window's first use)."""
    import subprocess

    from tests.conftest import MPICH, ROOT, mpiscope_cli

    from mpiscope.mpi.build import compile_program
    from mpiscope.trace import open_trace

    require(shutil.which("otf2-print") is not None, "otf2-print (Debian's otf2-tools)",
            "apt-get install otf2-tools (make setup does it when run as root)")
    exe = compile_program(ROOT / "tests" / "mpi" / "programs" / "two_windows.c", mpicc=str(MPICH.mpicc),
                          out_dir=tmp_path / "build")
    done = mpiscope_cli(["run", "--out", str(tmp_path / "t"), "--", *MPICH.launch(2), str(exe)], env=MPICH.environ())
    assert done.returncode == 0, done.stderr[-2000:]
    t = open_trace(tmp_path / "t")
    ev = t.events().with_columns(pl.col("call").cast(pl.Utf8)).filter(pl.col("rank") == 0).collect()
    created = ev.filter(pl.col("call") == "MPI_Win_create")["request"].to_list()
    fenced = ev.filter(pl.col("call") == "MPI_Win_fence")["comm"].to_list()
    assert fenced == [created[1], created[1], created[0], created[0]]  # the merge names each window alike
    export_otf2(t, tmp_path / "otf2")
    lines = subprocess.run(["otf2-print", str(tmp_path / "otf2" / "traces.otf2")], capture_output=True, text=True,
                           check=True).stdout.splitlines()
    inside: dict[str, list[list[str]]] = {}
    open_call: dict[str, list[str] | None] = {}
    for line in lines:
        kind, _, rest = line.partition(" ")
        location = rest.split()[0] if rest.split() else ""
        if kind == "ENTER" and '"MPI_Win_create"' in line:
            open_call[location] = []
            inside.setdefault(location, []).append(open_call[location])  # type: ignore[arg-type]
        elif kind == "LEAVE" and '"MPI_Win_create"' in line:
            open_call[location] = None
        elif kind == "RMA_WIN_CREATE" and open_call.get(location) is not None:
            open_call[location].append(line)  # type: ignore[union-attr]
    assert len(inside) == 2
    for calls in inside.values():
        assert [len(c) for c in calls] == [1, 1], calls
        assert calls[0][0].split("Window")[1] != calls[1][0].split("Window")[1]


@pytest.mark.mpi(ranks=N)
def test_perfetto_byte_counters_count_one_sided_bytes(run_traced, tmp_path: Path) -> None:
    """Each rank's 'sent' counter adds up its messages, collectives and what its puts, accumulates and
    atomics carried out; 'received' what came in, gets included (one-sided bytes were left out)."""
    from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import Trace as PTrace
    from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import TrackEvent

    from mpiscope.analysis.stats import summarize
    from mpiscope.export.perfetto_packets import uuid

    t = run_traced("rma", N)
    export_perfetto(t, tmp_path / "t.pftrace")
    p = PTrace()
    p.ParseFromString((tmp_path / "t.pftrace").read_bytes())
    counted: Counter[tuple[int, int]] = Counter()
    for packet in p.packet:
        if packet.track_event.type == TrackEvent.TYPE_COUNTER:
            for kind in (4, 5):
                for r in range(N):
                    if packet.track_event.track_uuid == uuid(kind, r):
                        counted[kind, r] += int(packet.track_event.counter_value)
    per_rank = {r["rank"]: r for r in summarize(t).per_rank.to_dicts()}
    for r in range(N):
        s = per_rank[r]
        assert s["rma_bytes_put"] > 0 and s["rma_bytes_get"] > 0
        assert counted[4, r] == s["bytes_sent"] + s["collective_bytes_sent"] + s["rma_bytes_put"]
        assert counted[5, r] == s["bytes_received"] + (s["collective_bytes_received"] or 0) + s["rma_bytes_get"]


@pytest.mark.mpi(ranks=N)
def test_window_creation_carries_no_bytes_in_the_report(run_traced) -> None:
    """MPI_Win_allocate's row holds the window's size: the report's density counts no bytes for it
    (50 windows of 1 MiB drew 4 MiB a bin for a run that moved nothing), only what the puts, gets and
    accumulates carried; stats says what that row's bytes are."""
    from mpiscope.analysis.stats import summarize
    from mpiscope.report import source

    t = run_traced("rma", N)
    v, codes = source.vocab(t)
    t0, _ = source.time_origin(t)
    ev = source.event_frame(t, t0, v, codes).collect()
    names = pl.Series([v.calls[c] for c in ev["call"].to_list()])
    assert (t.events().filter(pl.col("call").cast(pl.Utf8) == "MPI_Win_allocate").collect()["bytes"] > 0).all()
    assert (ev.filter(names == "MPI_Win_allocate")["bytes"] == 0).all()
    one_sided = source.bin_columns(ev.lazy()).collect().filter(pl.col("family") == 2)["pbytes"].sum()
    s = summarize(t)
    assert one_sided == s.per_rank["rma_bytes_put"].sum() + s.per_rank["rma_bytes_get"].sum()
    assert "MPI_Win_allocate: the size of the window, which no data crossed" in s.posted_note
