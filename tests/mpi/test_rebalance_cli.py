"""`mpiscope rebalance` from the command line: given times, a recorded mm, the partition file, bad input."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from tests.conftest import mpiscope_cli

TABLE2 = "4.99,5.65,6.34,6.91,7.11,7.26,7.74,7.51,7.59,7.65,7.70,7.81,8.04,8.13,8.21,8.27"
EXPECTED = [184, 164, 144, 132, 128, 128, 120, 124, 120, 120, 120, 116, 112, 112, 112, 112]


def ok_json(args: list[str]) -> dict:
    done = mpiscope_cli(["rebalance", *args, "--json", "-"])
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    return json.loads(done.stdout)


def fails(args: list[str], words: str) -> None:
    done = mpiscope_cli(["rebalance", *args])
    assert done.returncode != 0 and "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and words in lines[0], done.stderr


def test_table2_times_give_the_spec_shares() -> None:
    j = ok_json(["--times", TABLE2, "--shares", "128x16"])
    assert j["schema"] == "mpiscope.rebalance/1" and j["shares"] == EXPECTED
    assert j["old_shares"] == [128] * 16 and j["granularity"] == 4 and j["total"] == 2048
    assert j["rows"][0] == [0, 184] and j["rows"][-1] == [1936, 2048] and j["phase"] is None
    assert j["predicted_max_time_s"] < j["max_time_s"] == 8.27


@pytest.mark.mpi(ranks=4)
def test_trace_to_partition_file_to_mm(run_traced, tmp_path: Path) -> None:
    before = run_traced("mm", 4, args=["--n", "256", "--row-ms", "8"])
    part = tmp_path / "mm.part"
    j = ok_json([str(before.path), "--shares", "64x4", "-o", str(part)])
    shares = j["shares"]
    assert sum(shares) == 256 and all(s % 4 == 0 for s in shares)
    assert shares[0] == max(shares) > 64 > shares[3]  # rank 0 was the fastest, rank 3 among the slowest
    assert len(j["times_s"]) == 4 and j["run_id"] == before.manifest["run_id"]
    assert [list(map(int, ln.split())) for ln in part.read_text().splitlines() if not ln.startswith("#")] \
        == j["rows"]
    # the partition file as --shares, and mm reading it: each rank gathers its new rows of C
    assert ok_json([str(before.path), "--shares", str(part)])["old_shares"] == shares
    after = run_traced("mm", 4, args=["--n", "256", "--row-ms", "8", "--partition", str(part)])
    sent = (after.events().filter(pl.col("call").cast(pl.Utf8) == "MPI_Gatherv").sort("rank")
            .collect()["bytes"].to_list())
    assert sent == [s * 256 * 8 for s in shares]
    fails([str(before.path), "--shares", "64x4", "-o", str(part)], "--force")   # kept without --force
    fails([str(before.path), "--shares", "128x16"], "--shares gives 16 ranks")
    fails([str(before.path), "--shares", "64x4", "--granularity", "128"], "larger than rank 0's share")
    fails([str(before.path), "--shares", "64x4", "--phase", "99"], "no phase 99")
    # all phases: the computation summed over them, the diagnosis's per-rank totals
    every = ok_json([str(before.path), "--shares", "64x4", "--phase", "all"])
    from mpiscope.analysis.diagnose import diagnose

    totals = diagnose(before).to_json()["imbalance"]["total"]["compute_seconds"]
    assert every["phase"] == "all" and every["times_s"] == pytest.approx(totals, rel=1e-9)
    done = mpiscope_cli(["rebalance", str(before.path), "--shares", "64x4", "--phase", "most"])
    assert done.returncode == 2 and "neither a phase number nor 'all'" in done.stderr


@pytest.mark.mpi(ranks=4)
def test_trace_without_phase(run_traced, tmp_path: Path) -> None:
    from mpiscope.analysis.imbalance import compute_phases
    from mpiscope.errors import UsageError

    ring = run_traced("ring", 4, args=["2", "8"])
    # a rank held off its core for over 1 ms before MPI_Finalize (a loaded machine) makes the run
    # one phase, its tail, in which that rank alone computed: refused as such
    try:
        compute_phases(ring)
        said = "not shared out by rows"
    except UsageError:
        said = "no blocking collective"
    fails([str(ring.path), "--shares", "64x4", "-o", str(tmp_path / "p")], said)
    assert not (tmp_path / "p").exists()


@pytest.mark.parametrize(("args", "words"), [
    (["--times", "1,2,x", "--shares", "128x3"], "--times '1,2,x' is not"),
    (["--times", "1,2", "--shares", "12y4"], "--shares '12y4' is neither"),
    (["--times", "1,2", "--shares", "128x3"], "2 times for 3 shares"),
    (["--times", "1,2", "--shares", "2x2"], "larger than rank 0's share"),
    (["--times", "1,2", "--shares", "8x2", "--phase", "1"], "--phase needs a TRACE"),
    (["--shares", "8x2"], "either a TRACE or --times"),
    (["/nonexistent-trace", "--shares", "8x2"], "/nonexistent-trace"),
])
def test_bad_input_is_one_sentence(args: list[str], words: str, tmp_path: Path) -> None:
    fails([*args, "-o", str(tmp_path / "p")], words)
    assert not (tmp_path / "p").exists()


@pytest.mark.mpi(ranks=2)
def test_no_work_to_share_is_refused(tmp_path: Path, build_dir: Path) -> None:
    """Ranks that computed next to nothing have no work to share: new shares from 2.3 and 1.2 µs (a
    threaded run whose threads were always in MPI) predicted a 30 % gain; now one sentence."""
    from tests.conftest import MPICH

    from mpiscope.mpi.build import compile_program

    exe = compile_program(Path(__file__).parent / "programs" / "no_work.c", mpicc=str(MPICH.mpicc),
                          out_dir=build_dir / "no_work")
    out = tmp_path / "t"
    assert mpiscope_cli(["run", "--out", str(out), "--", *MPICH.launch(2), str(exe)], env=MPICH.environ()).returncode == 0
    for phase in (["--phase", "3"], ["--phase", "all"]):
        fails([str(out), "--shares", "100x2", *phase], "computed next to nothing")
