"""The adaptive broadcast (SPEC §5): the optimiser on 000 Fig. 6, a recorded run
with its swaps, the broadcast without recording, fallbacks and bad input."""

from __future__ import annotations

import json
import subprocess

import polars as pl
import pytest
from tests.conftest import MPICH, ROOT, mpiscope_cli

from mpiscope.mpi.build import compile_program
from mpiscope.mpi.find import lib_dir
from mpiscope.report import bcast as report_bcast
from mpiscope.report.bcast import bcast_section
from mpiscope.trace import open_trace

BCAST_SRC = ROOT / "src" / "mpiscope" / "native" / "bcast"


def one_error(done: subprocess.CompletedProcess[str], *words: str) -> str:
    assert done.returncode == 2, (done.returncode, done.stderr)
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:"), done.stderr
    for w in words:
        assert w in lines[0], lines[0]
    return lines[0]


def test_optimiser_fig6_four_swaps_to_zero_wait(build_dir):
    """000 §4.3, Fig. 6: 8 ranks, workload rising with the rank, identity table:
    zero total wait after 4 swaps, 6 operations with the 2 undos."""
    prog = compile_program(ROOT / "tests" / "mpi" / "programs" / "bcast_fig6.c", mpicc=str(MPICH.mpicc),
                           extra=[f"-I{BCAST_SRC}", *(str(BCAST_SRC / f) for f in ("adapt.c", "tree.c", "vrank.c"))],
                           out_dir=build_dir / "fig6")
    lines = subprocess.run([str(prog)], capture_output=True, text=True, check=True).stdout.splitlines()
    ops = [tuple(ln.split()) for ln in lines if ln.startswith(("swap", "undo"))]
    totals = [float(ln.split()[1]) for ln in lines if ln.startswith("total")]
    # (a)->(b) lowers the total; (c) and (d) raise it and are undone; (e) reaches zero
    assert ops == [("swap", "1", "4"), ("swap", "3", "1"), ("undo", "3", "1"), ("swap", "3", "2"),
                   ("undo", "3", "2"), ("swap", "3", "6")]
    assert totals[1] < totals[0] and totals[2] > totals[1] and totals[4] > totals[1] and totals[-1] == 0
    assert lines[-1] == "operations 6 swaps 4 undos 2"


@pytest.mark.mpi(ranks=4)
def test_adaptive_run_recorded_with_swaps(tmp_path, example, monkeypatch):
    """4 ranks, rank 2 (root 0's first receiver) sleeps before each broadcast: the
    optimiser first swaps it with rank 3, its child, which waited longest; each rank
    records one MPI_Bcast per broadcast and the tree's messages are not user messages."""
    out = tmp_path / "t"
    env = dict(MPICH.environ(), MPISCOPE_BCAST_THRESHOLD="0.25")
    done = mpiscope_cli(["run", "--bcast", "adaptive", "--out", str(out), "--", *MPICH.launch(4),
                         str(example("bcast_load")), "12", "256", "60000"], env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    t = open_trace(out)
    ev = t.events().collect()
    bcasts = ev.filter(pl.col("call").cast(pl.Utf8) == "MPI_Bcast")
    assert bcasts.height == 4 * 12 and sorted(bcasts.group_by("rank").len()["len"].to_list()) == [12] * 4
    assert t.messages().collect().height == 0 and t.manifest["counts"]["unmatched_sends"] == 0
    colls = t.collectives().collect().filter(pl.col("call").cast(pl.Utf8) == "MPI_Bcast")
    assert colls.height == 12 and (colls["ranks"] == 4).all()
    bcast = t.manifest["bcast"]
    assert bcast["mode"] == "adaptive" and bcast["threshold"] == 0.25 and bcast["weight"] == 1
    stats = json.loads(mpiscope_cli(["stats", str(out), "--json", "-"]).stdout)
    swaps = stats["bcast_swaps"]
    assert stats["bcast_mode"] == "adaptive" and swaps == bcast["swaps"] and swaps
    # waits that are noise on 2 shared cores may make the odd swap too; this one is the load's
    key = [x for x in swaps if (x["op"], x["comm"], x["rank_a"], x["rank_b"]) == ("swap", 0, 3, 2)]
    assert key and 2 <= key[0]["bcast"] <= 12 and key[0]["total_wait_ns"] > 0, swaps
    # the report's section: the swaps, and each broadcast's mean and largest time over its ranks
    section = bcast_section(t)
    assert section and section["mode"] == "adaptive" and section["swaps"] == swaps and section["comm"] == 0
    d = bcasts.sort("t_enter_ns").with_columns(d=pl.col("t_leave_ns") - pl.col("t_enter_ns"))
    per = d.group_by("coll_id", maintain_order=True).agg(pl.col("d").mean(), pl.col("d").max().alias("mx"))
    assert section["broadcasts"] == 12 and section["series"]["bcast"] == list(range(1, 13))
    assert section["series"]["mean_ns"] == per["d"].to_list() and section["series"]["max_ns"] == per["mx"].to_list()
    monkeypatch.setattr(report_bcast, "MAX_POINTS", 5)  # 12 broadcasts in points of 3
    few = bcast_section(t)["series"]  # type: ignore[index]
    assert few["bcast"] == [1, 4, 7, 10] and few["max_ns"] == [max(per["mx"][i:i + 3]) for i in (0, 3, 6, 9)]
    assert few["mean_ns"] == pytest.approx([sum(per["d"][i:i + 3]) / 3 for i in (0, 3, 6, 9)])


@pytest.mark.mpi(ranks=4)
def test_no_record_runs_the_broadcast_alone(tmp_path, example):
    out = tmp_path / "not-written"
    done = mpiscope_cli(["run", "--bcast", "binomial", "--no-record", "--out", str(out), "--",
                         *MPICH.launch(4), str(example("bcast_stress")), "3", "40"], env=MPICH.environ(),
                        cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "bcast_stress: 160 broadcasts, 0 mismatches" in done.stdout
    assert not out.exists() and not (tmp_path / "mpiscope-trace").exists()


@pytest.mark.mpi(ranks=4)
def test_intercommunicator_falls_back_and_says_so_once(tmp_path, example):
    done = mpiscope_cli(["run", "--bcast", "adaptive", "--out", str(tmp_path / "t"), "--", *MPICH.launch(4),
                         str(example("bcast_inter")), "4"], env=MPICH.environ())
    assert done.returncode == 0 and "bcast_inter: 0 wrong" in done.stdout, done.stderr[-2000:]
    said = [ln for ln in done.stderr.splitlines() if ln.startswith("mpiscope:") and "intercommunicator" in ln]
    assert len(said) == 1 and said[0].startswith("mpiscope: rank 0:") and "MPI's own broadcast" in said[0]
    ev = open_trace(tmp_path / "t").events().collect()
    assert ev.filter(pl.col("call").cast(pl.Utf8) == "MPI_Bcast").height == 4 * 4 * 2


@pytest.mark.parametrize("args, words", [
    (["--bcast", "fastest"], ["--bcast fastest", "adaptive"]),
    (["--no-record"], ["--no-record", "--bcast adaptive"]),
])
def test_bad_bcast_options(tmp_path, args, words):
    out = tmp_path / "t"
    one_error(mpiscope_cli(["run", *args, "--out", str(out), "--", "true"]), *words)
    assert not out.exists()


@pytest.mark.parametrize("var, value, words", [
    ("MPISCOPE_BCAST_WEIGHT", "17", ["MPISCOPE_BCAST_WEIGHT=17", "0 to 16"]),
    ("MPISCOPE_BCAST_THRESHOLD", "-0.5", ["MPISCOPE_BCAST_THRESHOLD=-0.5", "out of range"]),
    ("MPISCOPE_BCAST_INTERVAL", "1.5", ["whole number"]),
    ("MPISCOPE_BCAST_REPORT", "shout", ["put, send"]),
    ("MPISCOPE_BCAST", "fast", ["MPISCOPE_BCAST fast", "binomial"]),
])
def test_bad_bcast_parameters(tmp_path, var, value, words):
    env = dict(MPICH.environ(), **{var: value})
    extra = [] if var == "MPISCOPE_BCAST" else ["--bcast", "adaptive"]
    out = tmp_path / "t"
    one_error(mpiscope_cli(["run", *extra, "--out", str(out), "--", "true"], env=env), *words)
    assert not out.exists()


@pytest.mark.mpi(ranks=2)
def test_library_reports_bad_environment_once(example):
    """Set by hand (without mpiscope run), a bad value is named in one line by rank 0
    and its default used."""
    env = dict(MPICH.environ(), LD_PRELOAD=str(lib_dir() / "libmpiscope.so"), MPISCOPE_BCAST="quick",
               MPISCOPE_BCAST_EPS="3")
    done = subprocess.run([*MPICH.launch(2), str(example("bcast_inter")), "2"], capture_output=True, text=True,
                          env=env, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    lines = [ln for ln in done.stderr.splitlines() if ln.startswith("mpiscope:")]
    assert len(lines) == 2, done.stderr
    assert "MPISCOPE_BCAST=quick is not a broadcast mode" in lines[0]
    assert "MPISCOPE_BCAST_EPS=3 is out of range" in lines[1] and "default 0.01" in lines[1]
