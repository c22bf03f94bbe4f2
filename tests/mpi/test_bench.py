"""`mpiscope bench overlap|rma` on real MPI processes: result buffers, calibration, settings, errors.

Sizes and repetitions are tiny (--iter 3..20): these tests check correctness and
the JSON interface, never speed.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from tests.conftest import Mpi, mpiscope_cli

from mpiscope.bench.catalog import NBC_OPS, RMA_OPS

KEYS = {"op", "bytes", "async_progress", "t_pure_us", "t_cpu_us", "t_ovrlp_us", "overlap_pct",
        "blocking_plus_cpu_us"}
QUICK = ["--iter", "3", "--time", "0.5"]


def bench(mpi: Mpi, *args: str) -> dict:
    done = mpiscope_cli(["bench", *args, "--json", "-"], env=mpi.environ())
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


@pytest.mark.mpi(ranks=3)
def test_every_overlap_operation_delivers_correct_results(mpich):
    # 3 ranks: a non-power-of-two group, and root 2 for the rooted operations' check
    out = bench(mpich, "overlap", "-n", "3", "--sizes", "4,1K", "--async-progress", "off", *QUICK)
    assert out["schema"] == "mpiscope.bench.overlap/1"
    rows = out["results"]
    got = {(r["op"], r["bytes"]) for r in rows}
    for op in NBC_OPS:
        assert ((op.name, 0) in got) if not op.sized else {(op.name, 4), (op.name, 1024)} <= got, op.name
    for r in rows:
        assert KEYS <= set(r), r
        assert r["errors"] == 0, f"{r['op']} at {r['bytes']} B: {r['errors']} wrong result elements"
        assert r["async_progress"] is False
        assert 0.0 <= r["overlap_pct"] <= 100.0
        assert r["blocking_plus_cpu_us"] >= r["t_cpu_us"] > 0.0
        assert r["imb_rank"] in (0, 1, 2)
    assert len(rows) == len(got)


@pytest.mark.mpi(ranks=2)
def test_calibrated_computation_lasts_as_long_as_the_operation(mpich):
    # IMB's CPU_Exploit is calibrated once per process (its speed measured at
    # start-up) and then sized to t_pure: the measured t_CPU must come within
    # 15 % of t_pure, at sizes where t_pure is far above the kernel's
    # granularity (an optimised kernel ran 1.3-1.7x longer than calibrated).
    # Other processes competing for the cores disturb the start-up measurement
    # of a whole run, so a run may be repeated until each op has had one within
    # 15 %. On this shared VM such spells last half a minute or more (t_CPU/
    # t_pure from 0.80 to 1.39 over six runs in a row, while 1.01 and 1.03 came
    # in between; a fresh clone once saw 0.82-0.93 for three minutes), so the
    # repeats are spread over four and a half.
    ops = ("iallreduce", "ialltoall")
    seen: dict[str, list[float]] = {op: [] for op in ops}
    for attempt in range(10):
        time.sleep(6 * attempt)
        out = bench(mpich, "overlap", "--ops", ",".join(ops), "--sizes", "256K", "--async-progress", "off",
                    "--iter", "20", "--time", "1")
        for r in out["results"]:
            seen[r["op"]].append(r["t_cpu_us"] / r["t_pure_us"])
        if all(any(abs(x - 1) <= 0.15 for x in ratios) for ratios in seen.values()):
            return
    pytest.fail(f"t_CPU/t_pure never within 15 % for some op: {seen}")


@pytest.mark.mpi(ranks=2)
def test_progress_off_and_on_side_by_side_with_files(mpich, tmp_path):
    json_path, csv_path, png = tmp_path / "o.json", tmp_path / "o.csv", tmp_path / "o.png"
    done = mpiscope_cli(["bench", "overlap", "--ops", "ibcast", "--sizes", "1K", *QUICK, "--json", str(json_path),
                         "--csv", str(csv_path), "--plot", str(png)], env=mpich.environ())
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(json_path.read_text())
    assert [r["async_progress"] for r in out["results"]] == [False, True]
    on = next(s for s in out["settings"] if s["async_progress"])
    assert on["env"] == {"MPICH_ASYNC_PROGRESS": "1"}
    oversubscribed = 2 * 2 > (os.cpu_count() or 1)        # 2 ranks + 2 progress threads
    assert on["oversubscribed"] is oversubscribed
    assert ("progress threads on" in done.stderr) is oversubscribed
    assert "async progress off" in done.stdout and "async progress on" in done.stdout   # the terminal table
    assert len(csv_path.read_text().splitlines()) == 3
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.mpi(ranks=2)
def test_osu_definition_with_test_calls(mpich):
    out = bench(mpich, "overlap", "--ops", "iallreduce", "--sizes", "64K", "--async-progress", "off",
                "--definition", "osu", "--test-calls", "5", *QUICK)
    (r,) = out["results"]
    assert r["errors"] == 0
    assert {"osu_overall_us", "osu_compute_us", "osu_pure_us", "osu_overlap_pct"} <= set(r)
    assert r["t_test_us"] > 0.0           # MPI_Test was called during the computation
    assert out["test_calls"] == 5


@pytest.mark.mpi(ranks=2)
def test_rma_operations_and_truly_passive_ratio(mpich):
    out = bench(mpich, "rma", "--sizes", "4,4K", "--async-progress", "off", *QUICK)
    assert out["schema"] == "mpiscope.bench.rma/1"
    rows = out["results"]
    for r in rows:
        assert r["errors"] == 0, f"{r['op']} {r.get('mode')} at {r['bytes']} B"
    for op in RMA_OPS:
        mine = [r for r in rows if r["op"] == op.name]
        if op.name == "truly_passive_put":
            assert [r["bytes"] for r in mine] == [4, 4096]
            for r in mine:
                assert r["ratio"] == pytest.approx(r["t_ovrlp_us"] / r["t_pure_us"]) and r["ratio"] > 0
        else:
            sizes = [4] if op.single_element else [4, 4096]
            assert sorted((r["mode"], r["bytes"]) for r in mine) == sorted(
                (m, s) for m in ("lock_unlock", "lock_all_flush", "aggregate") for s in sizes)


@pytest.mark.parametrize("args, words", [
    (["bench", "overlap", "--ops", "ibcats"], "unknown operation 'ibcats'"),
    (["bench", "overlap", "--sizes", "2G"], "out of range"),
    (["bench", "overlap", "--sizes", "1M", "-n", "4096"], "beyond MPI's int counts"),
    (["bench", "rma", "-n", "3"], "run them with -n 2"),
    (["bench", "overlap", "--plot", "out.gif"], "end the file name in .png"),
    (["bench"], "name a benchmark"),
    (["bench", "rma", "--launcher-args", "-f 'hosts"], "check its quotes"),
])
def test_bad_input_is_one_sentence(args, words, mpich):
    done = mpiscope_cli(args, env=mpich.environ())
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and words in lines[0], done.stderr


def test_existing_results_are_kept(mpich, tmp_path: Path):
    kept = tmp_path / "earlier.json"
    kept.write_text("precious")
    done = mpiscope_cli(["bench", "overlap", "--ops", "ibcast", "--json", str(kept)], env=mpich.environ())
    assert done.returncode == 2 and "--force" in done.stderr
    assert kept.read_text() == "precious"


@pytest.mark.mpi(ranks=2)
@pytest.mark.openmpi
def test_open_mpi_progress_knobs_are_detected(openmpi):
    out = bench(openmpi, "overlap", "--ops", "ibcast", "--sizes", "1K", *QUICK)
    assert out["mpi"].startswith("Open MPI")
    assert all(r["errors"] == 0 for r in out["results"])
    on = [s for s in out["settings"] if s["async_progress"]]
    # Open MPI 5.0 has only the TCP transport's progress thread; 6.x adds opal_async_progress
    assert on and set(on[0]["env"]) <= {"OMPI_MCA_btl_tcp_progress_thread", "OMPI_MCA_opal_async_progress"}
    assert all(v == "1" for v in on[0]["env"].values())
