"""The merge in pieces (bounded.py) gives the in-memory merge's tables, row for row, on the
checked-in raw traces (threads, wildcards, every send mode, RMA, communicators, pauses,
cut-off ranks, clock skew the merge shifts away): with a budget that forces several pieces,
on worker processes, and removing the raw files as it goes."""

from __future__ import annotations

import dataclasses
import json
import shutil
import subprocess
import tarfile
import threading
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow.parquet as pq
import pytest
from polars.testing import assert_frame_equal

from mpiscope.errors import UsageError
from mpiscope.trace import assembly, merge, open_trace, storage
from mpiscope.trace import pieces as pieces_module
from mpiscope.trace import record as R
from mpiscope.trace.bounded import plan
from mpiscope.trace.merge import BASE_BYTES, PIECE_BYTES_PER_RECORD, merge_trace
from mpiscope.trace.reader import mapped, rank_files, read_rank_file
from mpiscope.trace.synthetic import halo_trace

DATA = Path(__file__).parent.parent / "data" / "merge"
SAME_MANIFEST = ("counts", "ranks", "t0_ns", "warnings", "unfinished_calls", "truncated_ranks", "clock",
                 "missing_ranks", "rank_states", "placement")


def tables(path: Path) -> dict[str, pl.DataFrame]:
    """What open_trace returns, messages in send-event order (a merge in pieces sorts them by
    send time within each part)."""
    t = open_trace(path, merge=False)
    return {"events": t.events().collect(), "messages": t.messages().collect().sort("send_event"),
            "collectives": t.collectives().collect(), "comms": t.comms().collect()}


def assert_same_merge(a: Path, b: Path) -> None:
    other = tables(b)
    for name, frame in tables(a).items():
        assert frame.columns == other[name].columns, name
        assert_frame_equal(frame, other[name], categorical_as_str=True)
    ma, mb = (json.loads((p / "manifest.json").read_text()) for p in (a, b))
    assert {k: ma.get(k) for k in SAME_MANIFEST} == {k: mb.get(k) for k in SAME_MANIFEST}


def copy(src: Path, dest: Path) -> Path:
    subprocess.run(["cp", "-a", "--sparse=always", str(src), str(dest)], check=True)
    return dest


def budget_for(trace: Path, workers: int = 1, base: int = BASE_BYTES) -> int:
    """A --memory that holds the largest rank's records in one piece on each worker, and little more."""
    largest = max(read_rank_file(p, 4096).size for p in rank_files(trace))
    per_worker = largest * PIECE_BYTES_PER_RECORD + (base if workers > 1 else 0)
    return base + workers * per_worker + 1


@pytest.fixture
def extracted(tmp_path: Path):
    def get(name: str) -> Path:
        out = tmp_path / name
        with tarfile.open(DATA / name / "trace.tar.xz") as tar:
            tar.extractall(out, filter="data")
        return out
    return get


def in_pieces_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """No budget that holds a piece holds these small traces whole in memory: they would be
    merged in one pass (a rank of 222 records beside three of 4-55 takes more in one piece
    than all of them in memory)."""
    monkeypatch.setattr(merge, "PEAK_BYTES_PER_RECORD", 1 << 30)


def cut_everywhere(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every rank that can be cut is cut where its quiet points allow pieces of a sixteenth of the
    largest rank's records (of 2 records at least: small ranks at every quiet point), the
    collective instances are added up one sequence number at a time (assembly.key_ranges), and
    every bucket is matched in windows of one piece's batch (buckets._in_windows) where it can be."""
    monkeypatch.setattr(merge, "most_records", lambda records, *_: max(2, max(records.values()) // 16))
    monkeypatch.setattr(assembly, "INSTANCE_BYTES", 1 << 50)
    monkeypatch.setattr(merge, "plan", lambda *args, **kw: dataclasses.replace(plan(*args, **kw), sides=1))


@pytest.mark.parametrize("name", sorted(p.name for p in DATA.iterdir()))
@pytest.mark.parametrize("cut", [False, True], ids=["whole-ranks", "ranks-cut"])
def test_pieces_equal_in_memory(extracted, tmp_path: Path, name: str, cut: bool,
                                monkeypatch: pytest.MonkeyPatch) -> None:
    whole = extracted(name)
    pieces = copy(whole, tmp_path / "pieces")
    merge_trace(whole)
    in_pieces_only(monkeypatch)
    if cut:
        cut_everywhere(monkeypatch)
    merge_trace(pieces, memory=budget_for(pieces))
    how = json.loads((pieces / "manifest.json").read_text())["merge"]
    ranks = len(rank_files(pieces))
    assert how["pieces"] >= (ranks + 1 if cut and name not in ("threads", "churn") else 2), how
    assert how["buckets"] >= 1, how
    assert (pieces / "events").is_dir() and not (pieces / "events.parquet").exists()
    assert not (pieces / ".merge-spill").exists()
    instances = json.loads((pieces / "manifest.json").read_text())["counts"]["collectives"]
    if cut:  # added up in ranges of one sequence number, written in parts
        assert (pieces / "collectives").is_dir() == (instances > 1), instances
    assert_same_merge(whole, pieces)


def test_workers_and_delete_raw(extracted, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """skew5: a rank is shifted; two worker processes; each rank file removed once merged. (A
    trace this small fits any budget that holds two worker processes: the processes' own
    memory is taken as 64 KiB here, so that the budget splits it.)"""
    whole = extracted("skew5")
    pieces = copy(whole, tmp_path / "pieces")
    merge_trace(whole)
    monkeypatch.setattr(merge, "BASE_BYTES", 1 << 16)
    result = merge_trace(pieces, memory=budget_for(pieces, workers=2, base=1 << 16), workers=2, delete_raw=True)
    assert any("shifted" in w for w in result.warnings)
    assert json.loads((pieces / "manifest.json").read_text())["merge"]["workers"] == 2
    assert not list((pieces / "raw").glob("*.msc"))
    assert_same_merge(whole, pieces)


def test_workers_that_would_not_fit_are_fewer(extracted, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A budget that holds the largest rank on one process but not on each of two: the merge runs
    on one, says so in one sentence, and its tables are the same."""
    whole = extracted("skew5")
    pieces = copy(whole, tmp_path / "pieces")
    merge_trace(whole)
    in_pieces_only(monkeypatch)
    monkeypatch.setattr(merge, "BASE_BYTES", 1 << 16)
    result = merge_trace(pieces, memory=budget_for(pieces, base=1 << 16), workers=2)
    said = [w for w in result.warnings if "instead of 2" in w]
    assert len(said) == 1 and "--memory" in said[0] and "\n" not in said[0], result.warnings
    manifest = json.loads((pieces / "manifest.json").read_text())
    assert manifest["merge"]["workers"] == 1 and manifest["merge"]["pieces"] >= 2, manifest["merge"]
    manifest["warnings"].remove(said[0])  # the only difference from the one-pass merge's manifest
    (pieces / "manifest.json").write_text(json.dumps(manifest))
    assert_same_merge(whole, pieces)


def test_large_events_are_written_as_parts_in_parallel(extracted, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Events of more rows than a part is worth are written as part files, one thread each, in
    memory and by each piece of a merge in pieces: the same rows, in order."""
    whole = extracted("skew5")
    parts = copy(whole, tmp_path / "parts")
    merge_trace(whole)
    monkeypatch.setattr(storage, "PART_ROWS", 50)
    monkeypatch.setattr(storage.os, "cpu_count", lambda: 2)
    merge_trace(parts)
    assert sorted(p.name for p in (parts / "events").iterdir()) == ["part-000000-0.parquet", "part-000000-1.parquet"]
    assert not (parts / "events.parquet").exists() and (parts / "messages.parquet").is_file()
    assert_same_merge(whole, parts)
    in_pieces_only(monkeypatch)
    merge_trace(parts, memory=budget_for(parts))
    pieces = json.loads((parts / "manifest.json").read_text())["merge"]["pieces"]
    assert len(list((parts / "events").glob("part-*-1.parquet"))) == pieces >= 2
    assert_same_merge(whole, parts)
    merge_trace(parts)  # in memory again, the dataset of the pieces replaced
    assert len(list((parts / "events").iterdir())) == 2
    assert_same_merge(whole, parts)


def test_merged_again_in_memory_replaces_the_dataset(extracted) -> None:
    trace = extracted("threads")
    merge_trace(trace, memory=budget_for(trace))
    assert (trace / "events").is_dir()
    merge_trace(trace)
    assert (trace / "events.parquet").is_file() and not (trace / "events").exists()
    assert open_trace(trace).events().select(pl.len()).collect().item() == 1809


def test_a_rank_larger_than_a_piece_is_cut(extracted, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """skew5 with a budget that holds a third of its largest rank: refused before ranks were cut
    at quiet points, now merged in pieces of parts of ranks, on two worker processes too."""
    whole = extracted("skew5")
    merge_trace(whole)
    largest = max(read_rank_file(p, 4096).size for p in rank_files(whole))
    in_pieces_only(monkeypatch)
    for workers in (1, 2):
        pieces = copy(whole, tmp_path / f"pieces-{workers}")
        memory = BASE_BYTES + workers * (largest * PIECE_BYTES_PER_RECORD // 3 + (BASE_BYTES if workers > 1 else 0))
        result = merge_trace(pieces, memory=memory, workers=workers, delete_raw=workers == 2)
        how = json.loads((pieces / "manifest.json").read_text())["merge"]
        assert how["pieces"] >= 3 * len(rank_files(whole)) and how["workers"] == workers, how
        assert not any("instead of" in w for w in result.warnings), result.warnings
        assert not list((pieces / "raw").glob("*.msc")) or workers == 1
        assert_same_merge(whole, pieces)


def test_one_process_makes_pieces_its_kept_heap_holds(extracted, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """A process that merges its pieces one after another makes them no larger than its kept heap
    holds (merge._kept_heap), whatever the budget allows: smaller pieces, a rank larger than
    that cut; the tables the same. Where the budget holds three such pieces, each next one is built
    on a thread of its own beside the one before (pieces.read)."""
    whole = extracted("skew5")
    merge_trace(whole)
    largest = max(read_rank_file(p, 4096).size for p in rank_files(whole))
    in_pieces_only(monkeypatch)
    built_on: list[str] = []
    build = pieces_module._read

    def spied(*args: object) -> object:
        built_on.append(threading.current_thread().name)
        return build(*args)

    monkeypatch.setattr(pieces_module, "_read", spied)
    monkeypatch.setattr(merge, "HEAP_BYTES_PER_RECORD", 1)  # a kept heap of next to no room beside
    made, ahead = {}, {}                                    # these small pieces
    for kept in (100 * largest, largest // 3):
        monkeypatch.setattr(merge, "_kept_heap", lambda budget, kept=kept: kept)
        pieces = copy(whole, tmp_path / f"kept-{kept}")
        built_on.clear()
        merge_trace(pieces, memory=budget_for(pieces))
        made[kept] = json.loads((pieces / "manifest.json").read_text())["merge"]["pieces"]
        ahead[kept] = sum(name.startswith("mpiscope-build") for name in built_on)
        assert_same_merge(whole, pieces)
    assert made[largest // 3] >= made[100 * largest] + 2, made
    assert ahead[100 * largest] == 0 and ahead[largest // 3] >= made[largest // 3], ahead  # both passes


def test_the_kept_heap_grows_with_the_budget_beside_two_of_its_pieces() -> None:
    """The heap one process keeps (merge._kept_heap) leaves room in the budget for two pieces of
    the records it holds (one written while the next is built); it grows with the budget up to
    machine.KEPT_HEAP_BYTES, and a budget too small for a useful one releases the arrays (0)."""
    heaps = []
    for budget in range(BASE_BYTES, 8 << 30, 64 << 20):
        heap = merge._kept_heap(budget)
        assert heap == 0 or merge.SMALLEST_KEPT_HEAP <= heap <= merge.KEPT_HEAP_BYTES
        assert BASE_BYTES + heap + 2 * (heap // merge.HEAP_BYTES_PER_RECORD) * PIECE_BYTES_PER_RECORD <= budget
        heaps.append(heap)
    assert heaps == sorted(heaps) and heaps[0] == 0 and heaps[-1] == merge.KEPT_HEAP_BYTES
    assert merge._kept_heap(1 << 30) == 0 and 0 < merge._kept_heap(2 << 30) < merge.KEPT_HEAP_BYTES


def test_the_matching_buckets_leave_room_for_the_kept_heap() -> None:
    """The sides' buckets fit a process's share less the heap it keeps (bounded.plan's `held`): the
    matching holds them in Arrow's pool, which does not take that heap; the pieces stay the same."""
    records = {r: 1_000_000 for r in range(8)}
    alone = plan(records, 1 << 30, 1, PIECE_BYTES_PER_RECORD, 280, {})
    beside = plan(records, 1 << 30, 1, PIECE_BYTES_PER_RECORD, 280, {}, held=1 << 29)
    assert alone.buckets == -(-8_000_000 * 280 // (1 << 30)) == 3
    assert beside.buckets == -(-8_000_000 * 280 // (1 << 29)) == 5
    assert beside.pieces == alone.pieces


def test_a_cut_rank_reads_only_its_blocks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A piece of a cut rank reads the blocks that hold its records (the generated halo's
    are sealed: their headers count them), which are those of the whole file; and the
    pieces give the in-memory merge's tables."""
    whole = tmp_path / "whole"
    halo_trace(whole, 2, 400_000)  # 2 MiB blocks: ~43,000 records each
    path = whole / "raw" / "rank-000000.msc"
    full = read_rank_file(path, 4096)
    n = full.size
    for span in ((0, n // 3), (n // 3, 2 * n // 3 + 7), (n - 5, n)):
        part = read_rank_file(path, 4096, span)
        assert len(part.blocks) < len(full.blocks) and not part.gaps
        assert (np.concatenate(part.blocks) == full.records[span[0]:span[1]]).all()
    pieces = copy(whole, tmp_path / "pieces")
    merge_trace(whole)
    in_pieces_only(monkeypatch)
    monkeypatch.setattr(merge, "most_records", lambda records, *_: max(records.values()) // 4)
    merge_trace(pieces, memory=budget_for(pieces))
    assert json.loads((pieces / "manifest.json").read_text())["merge"]["pieces"] >= 8
    assert_same_merge(whole, pieces)


def test_an_envelope_larger_than_the_budget_is_matched_in_windows(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """The generated halo's envelopes (a ring of 4 ranks: 4 of ~33,000 sends and receives each),
    each rank cut in 8 pieces, where the matching may hold 20,000 sides at once: every bucket is
    matched in windows of a few pieces' sides, holds no more than that, is not said to be over the
    budget, and gives the in-memory merge's tables."""
    whole = tmp_path / "whole"
    halo_trace(whole, 4, 400_000)
    pieces = copy(whole, tmp_path / "pieces")
    merge_trace(whole)
    in_pieces_only(monkeypatch)
    monkeypatch.setattr(merge, "most_records", lambda records, *_: max(records.values()) // 8)
    monkeypatch.setattr(merge, "plan", lambda *args, **kw: dataclasses.replace(plan(*args, **kw), sides=20_000))
    monkeypatch.setattr(merge, "FULLEST_MARGIN", 0)
    result = merge_trace(pieces, memory=budget_for(pieces))
    how = json.loads((pieces / "manifest.json").read_text())["merge"]
    envelope = 2 * json.loads((whole / "manifest.json").read_text())["counts"]["messages"] // 4   # its sides
    assert how["pieces"] >= 32 and envelope > 30_000, how
    assert 0 < how["largest_bucket"] <= 20_000, how
    assert len(list((pieces / "messages").iterdir())) > how["buckets"]   # several windows' parts
    assert not [w for w in result.warnings if "fullest matching bucket" in w]
    assert_same_merge(whole, pieces)


def test_buckets_beside_a_damaged_rank_are_matched_in_windows(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """The same halo with a block of rank 2 damaged (its records dropped: a gap): the buckets whose
    messages touch rank 2 are matched whole, around its gap from both ends (damaged.py); the
    others still in windows; the tables are the in-memory merge's."""
    whole = tmp_path / "whole"
    halo_trace(whole, 4, 400_000)
    data = np.memmap(whole / "raw" / "rank-000002.msc", np.uint8, mode="r+")
    at = R.HEADER_BYTES + 2 * R.BLOCK_BYTES + R.BLOCK_HEADER_BYTES + 1000
    data[at:at + 8] ^= 0xff
    data.flush()
    del data
    pieces = copy(whole, tmp_path / "pieces")
    merge_trace(whole)
    in_pieces_only(monkeypatch)
    monkeypatch.setattr(merge, "most_records", lambda records, *_: max(records.values()) // 8)
    monkeypatch.setattr(merge, "plan", lambda *args, **kw: dataclasses.replace(plan(*args, **kw), sides=20_000))
    merge_trace(pieces, memory=budget_for(pieces))
    assert any("rank 2: damaged raw file" in w for w in json.loads((whole / "manifest.json").read_text())["warnings"])
    parts = [f.stem.count("-") for f in (pieces / "messages").glob("part-*.parquet")]
    assert parts.count(1) >= 1 and parts.count(2) >= 2, parts   # matched whole, and windows' parts
    assert_same_merge(whole, pieces)


def _resident_file_bytes() -> int:
    """This process's resident pages of mapped files (RssFile)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("RssFile:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no RssFile in /proc/self/status")


def test_a_released_read_keeps_no_page_of_the_file_and_finds_the_same_cuts(tmp_path: Path) -> None:
    """The count-and-cut read releases each block of a rank file once read where two files do not
    fit the budget (merge._release_files): the same records and quiet cuts as a read that keeps
    them mapped, without the file's pages staying resident (a 48 MB file here)."""
    from mpiscope.trace.columns import CallTable
    from mpiscope.trace.quiet import quiet_cuts

    halo_trace(tmp_path, 1, 1_000_000)
    path = tmp_path / "raw" / "rank-000000.msc"
    calls = CallTable.from_manifest(json.loads((tmp_path / "manifest.json").read_text())["calls"])
    kept = read_rank_file(path, calls.known())
    kept_cuts = quiet_cuts(kept, calls, 100_000)
    mapped_whole = _resident_file_bytes()
    del kept
    released = read_rank_file(path, calls.known(), release=True)
    assert _resident_file_bytes() < mapped_whole - 40_000_000
    cuts = quiet_cuts(released, calls, 100_000, release=True)
    assert _resident_file_bytes() < mapped_whole - 40_000_000
    assert len(kept_cuts) >= 9 and cuts == kept_cuts
    # the kernel releases only blocks that map the file: on a copy, MADV_DONTNEED would zero it
    assert all(mapped(b) for b in released.blocks) and not mapped(released.blocks[0].copy())
    assert (released.records == read_rank_file(path, calls.known()).records).all()
    assert merge._release_files({0: 15_600_000, 1: 15_600_000}, 1 << 30)
    assert not merge._release_files({0: 15_600_000, 1: 15_600_000}, 2 << 30)


def test_budget_too_small_says_what_it_needs(extracted) -> None:
    trace = extracted("threads")
    merge_trace(trace)
    before = (trace / "events.parquet").read_bytes()
    with pytest.raises(UsageError) as e:
        merge_trace(trace, memory=BASE_BYTES + 1000)
    assert "needs at least" in str(e.value) and "--memory" in str(e.value) and "\n" not in str(e.value)
    assert (trace / "events.parquet").read_bytes() == before


def test_disk_without_room(extracted, monkeypatch: pytest.MonkeyPatch) -> None:
    trace = extracted("threads")
    merge_trace(trace)
    before = (trace / "events.parquet").read_bytes()
    monkeypatch.setattr(merge.shutil, "disk_usage", lambda _: shutil._ntuple_diskusage(1 << 30, 1 << 30, 1000))
    with pytest.raises(UsageError) as e:
        merge_trace(trace)
    assert "free disk space" in str(e.value) and "\n" not in str(e.value)
    assert (trace / "events.parquet").read_bytes() == before


def test_diagnosis_too_big_for_memory_says_so(extracted, monkeypatch: pytest.MonkeyPatch) -> None:
    """A verb that holds every event in memory refuses, in one sentence, a trace this machine
    cannot hold; stats streams any size."""
    from mpiscope import machine
    from mpiscope.analysis import diagnose
    from mpiscope.analysis.stats import summarize
    from mpiscope.analysis.imbalance import compute_phases
    from mpiscope.report import cache
    from mpiscope.report.build import build_report
    from mpiscope.roofline.place import measure_traffic
    from mpiscope.sim.replay import trace_actions

    trace = extracted("threads")
    merge_trace(trace, memory=budget_for(trace))
    monkeypatch.setattr(machine, "available_memory", lambda: 1000)
    for verb, what in ((diagnose.diagnose, "the diagnosis"), (build_report, "the report"),
                       (compute_phases, "the phase analysis"), (trace_actions, "the replay"),
                       (cache.build, "the view's index")):
        with pytest.raises(UsageError) as e:
            verb(open_trace(trace))
        assert str(e.value).startswith(what) and "mpiscope stats" in str(e.value) and "\n" not in str(e.value)
    env = pl.col("call").cast(pl.Utf8).is_in(["MPI_Init", "MPI_Init_thread", "MPI_Finalize", "MPI_Pcontrol"])
    mpi_calls = open_trace(trace).events().filter(~env).select(pl.col("count").sum()).collect().item()
    assert 0 < mpi_calls < 1809 and int(summarize(open_trace(trace)).per_rank["calls"].sum()) == mpi_calls
    # the roofline's traffic is streamed aggregates too
    assert measure_traffic(open_trace(trace), ranks_as_nodes=True).p2p_inter_bytes > 0


def test_merged_with_delete_raw_cannot_merge_again(extracted) -> None:
    trace = extracted("wildcard")
    merge_trace(trace, delete_raw=True)
    assert not list((trace / "raw").glob("*.msc"))
    with pytest.raises(UsageError) as e:
        merge_trace(trace)
    assert "--delete-raw" in str(e.value) and "\n" not in str(e.value)
    assert open_trace(trace).events().select(pl.len()).collect().item() == 38


def test_disk_full_during_merge_in_pieces(extracted, monkeypatch: pytest.MonkeyPatch) -> None:
    """A write that fails half-way (ENOSPC) is one sentence; the earlier tables stay, nothing
    temporary is left behind."""
    import errno

    from mpiscope.trace import pieces

    trace = extracted("threads")
    merge_trace(trace)
    before = (trace / "events.parquet").read_bytes()

    def full(*_: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(pieces, "write_parts", full)
    with pytest.raises(UsageError) as e:
        merge_trace(trace, memory=budget_for(trace))
    assert "No space left" in str(e.value) and "\n" not in str(e.value)
    assert (trace / "events.parquet").read_bytes() == before
    assert not [p.name for p in trace.iterdir() if p.name.startswith(".")]


def test_workers_on_a_trace_that_fits_merge_in_one_pass(extracted) -> None:
    trace = extracted("wildcard")
    merge_trace(trace, workers=2)
    assert json.loads((trace / "manifest.json").read_text())["merge"] == {"pieces": 1, "buckets": 1, "workers": 1}
    assert (trace / "events.parquet").is_file()


@pytest.mark.parametrize("args,says", [(["--memory", "4XB"], "is not a size"), (["--workers", "0"], "--workers 0")])
def test_merge_options_bad_input(extracted, args: list[str], says: str) -> None:
    from tests.conftest import mpiscope_cli

    done = mpiscope_cli(["merge", str(extracted("wildcard")), *args])
    assert done.returncode != 0 and says in done.stderr and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_a_bucket_is_read_from_the_pieces_that_spilled_to_it() -> None:
    """A piece's spill file holds a batch per bucket it has rows for, in bucket order: bucket 2's
    sends are the second batch of piece 0 and the first of piece 2; no piece has receives for it."""
    sides = np.zeros((3, 2, 4), np.int64)   # piece, side (sends, receives), bucket
    sides[0, 0, [1, 2]] = 5
    sides[2, 0, 2] = 1
    sides[1, 1, 0] = 7
    held = pieces_module.batches_of(sides)
    (pieces, batches), (recv_pieces, recv_batches) = held[2]
    assert pieces.tolist() == [0, 2] and batches.tolist() == [1, 0]
    assert recv_pieces.size == 0 and recv_batches.size == 0
    assert [p.tolist() for p, _ in held[0]] == [[], [1]] and held[0][1][1].tolist() == [0]


def test_a_bucket_larger_than_its_share_is_said(extracted, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A bucket whose receives completed before their sends began between ranks of several threads
    (skew5's, as if its ranks had several: a rank's clock is behind) is matched whole, not in
    windows (threads' messages may need re-pairing: match.reorder_threads): where it holds more
    than the budget leaves the matching (100 sides here), the merge says so in one sentence, and
    its tables are those of the in-memory merge."""
    whole = extracted("skew5")
    trace = copy(whole, tmp_path / "pieces")
    monkeypatch.setattr(merge, "threaded_ranks", lambda files: tuple(f.rank for f in files))
    merge_trace(whole)
    in_pieces_only(monkeypatch)
    monkeypatch.setattr(merge, "plan", lambda *args, **kw: dataclasses.replace(plan(*args, **kw), sides=100))
    monkeypatch.setattr(merge, "FULLEST_MARGIN", 0)
    result = merge_trace(trace, memory=budget_for(trace))
    how = json.loads((trace / "manifest.json").read_text())["merge"]
    whole_parts = [f for f in (trace / "messages").glob("part-*.parquet") if f.stem.count("-") == 1]
    assert max(pq.read_metadata(f).num_rows for f in whole_parts) > 50   # > 100 sides, matched whole
    said = [w for w in result.warnings if "fullest matching bucket" in w]
    assert len(said) == 1 and f"held {how['largest_bucket']:,} sends and receives" in said[0], result.warnings
    assert "--memory" in said[0] and "\n" not in said[0] and how["largest_bucket"] > 100
    in_memory = json.loads((whole / "manifest.json").read_text())
    assert [w for w in result.warnings if w not in said] == in_memory["warnings"]
    matched = tables(trace)
    for name, frame in tables(whole).items():
        assert_frame_equal(frame, matched[name], categorical_as_str=True)
