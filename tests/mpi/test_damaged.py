"""Damaged raw files (issue 21): the merge keeps every sound record of a damaged rank,
leaves every other rank exactly as the undamaged merge has it, and says what it dropped.

The recorded examples are real runs (4 and 8 ranks of tests/mpi/programs/exchange.c under
mpiscope run); the damage is random bytes, chosen by hypothesis (seeded), anywhere in one
rank's raw files."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from tests.conftest import MPICH, ROOT, compile_program, mpiscope_cli

from mpiscope.trace import open_trace
from mpiscope.trace import record as R
from mpiscope.trace.merge import merge_trace
from mpiscope.trace.reader import read_rank_file

PROGRAM = ROOT / "tests" / "mpi" / "programs" / "exchange.c"
# columns that number rows of the whole trace: they shift when another rank loses events
# hypothesis examples per fuzz test (MSC_FUZZ_EXAMPLES=200 for a longer search than CI's)
EXAMPLES = int(os.environ.get("MSC_FUZZ_EXAMPLES", "30"))
NUMBERING = ["event", "completed_by", "coll_id", "send_event", "recv_event"]


def _record(out: Path, ranks: int, iters: int, build: Path) -> Path:
    exe = compile_program(PROGRAM, mpicc=str(MPICH.mpicc), out_dir=build)
    done = mpiscope_cli(["run", "--out", str(out), "--", *MPICH.launch(ranks), str(exe), str(iters)],
                        env=MPICH.environ())
    assert done.returncode == 0, done.stderr[-3000:]
    return out


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> dict[int, Path]:
    """Pristine traces of 4 and 8 ranks, every rank file several blocks long."""
    base = tmp_path_factory.mktemp("damaged")
    return {4: _record(base / "four", 4, 30_000, base / "build"), 8: _record(base / "eight", 8, 15_000, base / "build")}


def _tables(trace_dir: Path) -> tuple[pl.DataFrame, pl.DataFrame]:
    """events and messages without the columns that number the whole trace, and with each
    communicator named by its gid (in `comm`, and in the request of the call that created it):
    the dense ids number the communicators of all ranks, so one that only the damaged rank
    defined (its MPI_COMM_SELF) renumbers the others."""
    t = open_trace(trace_dir)
    gid = t.comms().select("comm", "gid")
    # a call that creates a communicator or window names it in its request: by its gid too
    creating = [c["name"] for c in t.manifest["calls"]
                if c.get("role") == "create_win" or (c.get("role") == "create" and not c.get("starts_request"))]
    made = gid.rename({"comm": "request", "gid": "made_gid"})

    def named(frame: pl.LazyFrame) -> pl.DataFrame:
        df = frame.join(gid, on="comm", how="left", maintain_order="left").drop("comm")
        if "request" in df.collect_schema().names():
            creates = pl.col("call").cast(pl.Utf8).is_in(creating)
            df = (df.join(made, on="request", how="left", maintain_order="left")
                  .with_columns(pl.when(creates).then(None).otherwise(pl.col("request")).alias("request"),
                                pl.when(creates).then(pl.col("made_gid")).alias("made_gid")))
        out = df.collect()
        return out.drop([c for c in NUMBERING if c in out.columns])

    return named(t.events()), named(t.messages())


_PRISTINE: dict[Path, tuple[pl.DataFrame, pl.DataFrame]] = {}


def _pristine_tables(trace_dir: Path) -> tuple[pl.DataFrame, pl.DataFrame]:
    """_tables of an undamaged recorded trace, read once (0.4 s, for every example)."""
    if trace_dir not in _PRISTINE:
        _PRISTINE[trace_dir] = _tables(trace_dir)
    return _PRISTINE[trace_dir]


def _copy(src: Path, dst: Path) -> Path:
    if dst.exists():
        shutil.rmtree(dst)
    shutil.copytree(src / "raw", dst / "raw")
    shutil.copy(src / "manifest.json", dst / "manifest.json")
    return dst


def _written(path: Path) -> list[tuple[int, int]]:
    """The byte ranges of a raw file that hold data (a rank file's header struct and blocks;
    the hole after its header page is not read)."""
    size = path.stat().st_size
    if path.suffix != ".msc":
        return [(0, size)]
    return [(0, R.FILE_HEADER_DTYPE.itemsize), (R.HEADER_BYTES, size)]


def test_a_clean_run_seals_every_block_and_its_header(recorded):
    """At MPI_Finalize every block is sealed (the copies by the writer thread, the ring's by
    the finalize), the header too, and the reader finds every CRC sound."""
    for path in sorted((recorded[4] / "raw").glob("*.msc")):
        data = np.fromfile(path, np.uint8)
        hdr = data[: R.FILE_HEADER_DTYPE.itemsize].view(R.FILE_HEADER_DTYPE)[0]
        assert int(hdr["sealed"]) == R.SEALED_MAGIC and int(hdr["version"]) == R.FORMAT_VERSION
        blocks = data[R.HEADER_BYTES:].reshape(-1, R.BLOCK_BYTES)
        heads = blocks[:, : R.BLOCK_HEADER_BYTES].copy().view(R.BLOCK_HEADER_DTYPE).reshape(-1)
        used = heads["magic"] == R.BLOCK_MAGIC
        assert used.sum() >= 3 and (heads["crc_records"][used] > 0).all(), path
        f = read_rank_file(path, 1 << 16)
        assert not f.damage and not f.gaps and not f.warnings


damage = st.tuples(
    st.integers(0, 3),                       # which rank (of the first four)
    st.sampled_from(["msc", "msc", "msc", "comms", "maps"]),
    st.floats(0, 1, exclude_max=True),       # where, as a fraction of the written bytes
    st.integers(1, 300),                     # how many bytes
    st.booleans(),                           # a run of bytes, or bytes scattered over 64 KiB
    st.integers(0, 2**32 - 1),               # the random bytes' seed
)


@settings(max_examples=EXAMPLES, deadline=None, derandomize=True, phases=(Phase.explicit, Phase.generate),
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(ranks=st.sampled_from([4, 8]), hurt=damage)
def test_random_damage_to_one_rank_leaves_the_others_exact(recorded, tmp_path, ranks, hurt):
    rank, suffix, where, nbytes, run, seed = hurt
    pristine = recorded[ranks]
    trace = _copy(pristine, tmp_path / "t")
    path = trace / "raw" / f"rank-{rank:06d}.{suffix}"
    spans = _written(path)
    total = sum(b - a for a, b in spans)
    at = int(where * total)
    for a, b in spans:  # the fraction as an offset into the written ranges
        if at < b - a:
            offset = a + at
            break
        at -= b - a
    data = np.memmap(path, np.uint8, mode="r+")
    rng = np.random.default_rng(seed)
    positions = offset + (np.arange(nbytes) if run else np.sort(rng.integers(0, 65536, nbytes)))
    positions = positions[positions < data.size]
    before = data[positions].copy()
    data[positions] = rng.integers(0, 256, positions.size, dtype=np.uint8)
    changed = positions[data[positions] != before]
    data.flush()
    del data

    merge_trace(trace)  # never raises: one damaged rank must not stop the merge of the others

    manifest = json.loads((trace / "manifest.json").read_text())
    base_ev, base_msg = _pristine_tables(pristine)
    ev, msg = _tables(trace)
    others = pl.col("rank") != rank
    assert ev.filter(others).equals(base_ev.filter(others)), "an intact rank's events changed"
    intact = (pl.col("src") != rank) & (pl.col("dst") != rank)
    assert msg.filter(intact).equals(base_msg.filter(intact)), "messages between intact ranks changed"
    # no time of the damaged rank moved by more than the run lasted
    span = base_ev["t_enter_ns"].max() - base_ev["t_enter_ns"].min()
    mine = ev.filter(pl.col("rank") == rank)
    if mine.height:
        assert mine["t_enter_ns"].min() >= base_ev["t_enter_ns"].min() - span
        assert mine["t_enter_ns"].max() <= base_ev["t_enter_ns"].max() + span
    if suffix == "msc" and changed.size:
        _check_damaged_rank(path, pristine, changed, manifest, rank, ev, base_ev)


def _check_damaged_rank(path: Path, pristine: Path, changed: np.ndarray, manifest: dict, rank: int,
                        ev: pl.DataFrame, base_ev: pl.DataFrame) -> None:
    """The damaged rank keeps every record of its undamaged blocks, and what it lost is counted."""
    if changed.min() < R.TAIL_CRC_SPAN[0]:  # the header's CRC (or the fields that say whether it holds)
        assert str(rank) in manifest["missing_ranks"], manifest["missing_ranks"]
        assert ev.filter(pl.col("rank") == rank).height == 0
        return
    assert str(rank) not in manifest["missing_ranks"]
    if changed.min() < R.FILE_HEADER_DTYPE.itemsize:  # its placement fields: their own CRC
        _check_placement_damaged(manifest, rank)
    original = read_rank_file(pristine / "raw" / path.name, 1 << 16)
    damaged = read_rank_file(path, 1 << 16)
    hit = {int((c - R.HEADER_BYTES) // R.BLOCK_BYTES) for c in changed}
    kept = _blocks_by_key(damaged)
    for key, recs in _blocks_by_key(original).items():
        if _block_index(pristine / "raw" / path.name, key) not in hit:
            assert key in kept and np.array_equal(kept[key], recs), f"undamaged block {key} lost records"
    lost = original.size - damaged.size
    if lost > 0:
        assert manifest["dropped_records"][str(rank)] >= lost, manifest["damage"]
    assert ev.filter(pl.col("rank") == rank).height <= base_ev.filter(pl.col("rank") == rank).height


def _check_placement_damaged(manifest: dict, rank: int) -> None:
    """A rank whose header's placement fields were damaged is merged, said, and none of its
    damaged text reaches the manifest."""
    said = [w for w in manifest["warnings"] if w.startswith(f"rank {rank}: the header's record of where")]
    assert said, manifest["warnings"]
    assert all(lib.startswith("MPICH Version:") and lib.isprintable()
               for lib in manifest["placement"]["mpi_library"]), manifest["placement"]


def test_damaged_placement_fields_leave_the_rank_merged_and_are_said(recorded, tmp_path):
    """Bytes changed after the header's CRC (its CPUs and MPI library, which files written before
    those fields read as zeros) are caught by their own CRC: the rank's events stay exactly as they
    were, the fields are taken as unknown, and the warning says so. A byte of the padding after the
    library's name was merged as its last letter before."""
    trace = _copy(recorded[4], tmp_path / "t")
    path = trace / "raw" / "rank-000001.msc"
    data = np.memmap(path, np.uint8, mode="r+")
    data[R.offset_of(R.FILE_HEADER_DTYPE, "mpi_library") + 150] = ord("i")
    data.flush()
    del data
    done = mpiscope_cli(["merge", str(trace)])
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert "rank 1: the header's record of where the rank ran is damaged" in done.stderr, done.stderr
    manifest = json.loads((trace / "manifest.json").read_text())
    _check_placement_damaged(manifest, 1)
    assert manifest["placement"]["mpi_library"] == json.loads(
        (recorded[4] / "manifest.json").read_text())["placement"]["mpi_library"]
    base_ev, base_msg = _pristine_tables(recorded[4])
    ev, msg = _tables(trace)
    assert ev.equals(base_ev) and msg.equals(base_msg)


def _blocks_by_key(f) -> dict[tuple[int, int], np.ndarray]:
    return {(t, s): recs for recs, t, s in zip(f.blocks, f.block_thread, f.block_seq)}


def _block_index(path: Path, key: tuple[int, int]) -> int:
    """The block position in the file holding (thread, seq) (its sealed copy)."""
    data = np.fromfile(path, np.uint8)[R.HEADER_BYTES:]
    heads = data.reshape(-1, R.BLOCK_BYTES)[:, : R.BLOCK_HEADER_BYTES].copy().view(R.BLOCK_HEADER_DTYPE).reshape(-1)
    found = (heads["magic"] == R.BLOCK_MAGIC) & (heads["thread"] == key[0]) & (heads["seq"] == key[1])
    return int(np.flatnonzero(found & (heads["crc_records"] > 0))[0])


def test_a_destroyed_header_leaves_the_other_ranks_merged_and_names_the_missing_rank(recorded, tmp_path):
    trace = _copy(recorded[4], tmp_path / "t")
    with open(trace / "raw" / "rank-000002.msc", "r+b") as f:
        f.write(bytes(512))
    done = mpiscope_cli(["merge", str(trace)])
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    manifest = json.loads((trace / "manifest.json").read_text())
    assert list(manifest["missing_ranks"]) == ["2"]
    assert "bad magic" in manifest["missing_ranks"]["2"]
    lines = [line for line in done.stderr.splitlines() if "rank 2" in line]
    assert lines[0].startswith("warning: rank 2: not merged, is not an mpiscope rank file (bad magic)"), lines
    # its messages with the others are unmatched on their side, counted
    assert any("damaged or missing rank(s) 2 stay unmatched" in line for line in done.stderr.splitlines())
    ev, _ = _tables(trace)
    base_ev, _ = _pristine_tables(recorded[4])
    assert ev.filter(pl.col("rank") == 2).height == 0
    assert ev.equals(base_ev.filter(pl.col("rank") != 2))
    stats = json.loads(mpiscope_cli(["stats", str(trace), "--json", "-"]).stdout)
    assert stats["missing_ranks"] == manifest["missing_ranks"]


def test_damaged_records_are_dropped_in_one_sentence_per_rank(recorded, tmp_path):
    """The issue's case: 300 random bytes inside one rank's records. The sealed block they hit
    is dropped, the CLI says so in one line, and stats --json reports it per rank."""
    trace = _copy(recorded[4], tmp_path / "t")
    path = trace / "raw" / "rank-000001.msc"
    data = np.memmap(path, np.uint8, mode="r+")  # inside the records of thread 0's second block
    at = R.HEADER_BYTES + _block_index(path, (0, 1)) * R.BLOCK_BYTES + 10_000
    data[at: at + 300] = np.random.default_rng(3).integers(0, 256, 300, dtype=np.uint8)
    data.flush()
    del data
    done = mpiscope_cli(["merge", str(trace)])
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    damaged = [line for line in done.stderr.splitlines() if line.startswith("warning: rank 1: damaged")]
    assert len(damaged) == 1 and "1 block (" in damaged[0] and "checksum mismatch" in damaged[0], done.stderr
    stats = json.loads(mpiscope_cli(["stats", str(trace), "--json", "-"]).stdout)
    assert stats["dropped_blocks"] == {"1": 1}
    assert stats["dropped_records"]["1"] > 0
    assert stats["damage"]["1"]["checksum mismatch"]["blocks"] == 1
    assert "clock correction" not in done.stderr


def _unseal(trace: Path, rank: int) -> None:
    """Make a rank's file look like one whose rank died: no CRC on its header or blocks."""
    path = trace / "raw" / f"rank-{rank:06d}.msc"
    data = np.memmap(path, np.uint8, mode="r+")
    hdr = data[: R.FILE_HEADER_DTYPE.itemsize].view(R.FILE_HEADER_DTYPE)
    hdr["sealed"], hdr["crc"], hdr["state"] = 0, 0, R.STATE_RUNNING
    for b in range((data.size - R.HEADER_BYTES) // R.BLOCK_BYTES):
        at = R.HEADER_BYTES + b * R.BLOCK_BYTES
        data[at + R.BLOCK_CRC_BYTES: at + R.BLOCK_CRC_BYTES + 8] = 0
    data.flush()


def test_every_recorded_record_is_plausible(recorded, tmp_path):
    """The checks for unsealed blocks drop nothing a recorder wrote: every block of the
    recorded examples, unsealed, reads record for record as sealed."""
    for ranks, pristine in recorded.items():
        trace = _copy(pristine, tmp_path / str(ranks))
        for rank in range(ranks):
            _unseal(trace, rank)
            sealed = read_rank_file(pristine / "raw" / f"rank-{rank:06d}.msc", 1 << 16)
            unsealed = read_rank_file(trace / "raw" / f"rank-{rank:06d}.msc", 1 << 16)
            assert not unsealed.damage and not unsealed.gaps, unsealed.warnings
            assert np.array_equal(unsealed.records, sealed.records)


@settings(max_examples=EXAMPLES // 2, deadline=None, derandomize=True,
          phases=(Phase.explicit, Phase.generate),
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(rank=st.integers(0, 3), where=st.floats(0, 1, exclude_max=True), nbytes=st.integers(1, 300),
       seed=st.integers(0, 2**32 - 1))
def test_damage_in_unsealed_blocks_moves_no_clock_beyond_the_run(recorded, tmp_path, rank, where, nbytes, seed):
    """A rank that died leaves blocks without CRC: random bytes there are caught by the
    plausibility checks where they make a record impossible, and whatever gets through
    never shifts any rank by more than the run lasted (the issue's 106,727 s)."""
    trace = _copy(recorded[4], tmp_path / "t")
    _unseal(trace, rank)
    path = trace / "raw" / f"rank-{rank:06d}.msc"
    data = np.memmap(path, np.uint8, mode="r+")
    at = R.HEADER_BYTES + int(where * (data.size - R.HEADER_BYTES))
    data[at: at + nbytes] = np.random.default_rng(seed).integers(0, 256, min(nbytes, data.size - at), dtype=np.uint8)
    data.flush()
    del data
    merge_trace(trace)
    manifest = json.loads((trace / "manifest.json").read_text())
    base_ev, _ = _pristine_tables(recorded[4])
    ev, _ = _tables(trace)
    span = base_ev["t_enter_ns"].max() - base_ev["t_enter_ns"].min()
    assert max(manifest["clock"]["causality_shift_ns"]) <= span
    assert ev["t_enter_ns"].min() >= base_ev["t_enter_ns"].min() - span
    assert ev["t_enter_ns"].max() <= base_ev["t_enter_ns"].max() + span
    assert ev.filter(pl.col("rank") != rank).height == base_ev.filter(pl.col("rank") != rank).height
