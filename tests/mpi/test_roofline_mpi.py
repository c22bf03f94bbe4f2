"""Communication roofline on real MPI processes: measure -> bench -> plot, the benchmark's
contention-free schedule, and placing a traced run. Rates are never asserted (they are timings);
flop and byte counts are exact and are."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from tests.conftest import Mpi, mpiscope_cli, require

from mpiscope.trace import Trace

SMALL = ["--seconds", "0.03", "--repeat", "1", "--matrix", "128", "--msg-bytes", "262144"]


@pytest.fixture(scope="module")
def roofline_mm() -> Path:
    from mpiscope.errors import MpiscopeError
    from mpiscope.roofline.native import program
    try:
        path = program()
    except MpiscopeError:
        path = Path("/nonexistent")
    require(path.is_file(), "roofline_mm (built only where a CBLAS is found)",
            "apt-get install libopenblas-dev, then make setup")
    return path


def cli(args: list[str], mpi: Mpi, cwd: Path) -> dict:
    """Run a roofline action with --json - (before --run, which takes the rest of the line)."""
    at = args.index("--run") if "--run" in args else len(args)
    done = mpiscope_cli(["roofline", *args[:at], "--json", "-", *args[at:]], env=mpi.environ(), cwd=cwd)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-2000:]
    return json.loads(done.stdout)


@pytest.mark.mpi(ranks=2)
def test_measure_bench_plot(tmp_path: Path, mpich: Mpi, roofline_mm: Path) -> None:
    m = cli(["measure", *SMALL], mpich, tmp_path)
    assert m["shared_memory"] is True and len(m["hosts"]) == 2
    assert set(m["bw_gbps_per_direction_measured"]) == {"pingpong", "pairwise", "exchange"}
    assert m["bw_gbps_per_direction"] == max(m["bw_gbps_per_direction_measured"].values())
    assert m["ridge"] == pytest.approx(m["peak_gflops"] / (2 * m["bw_gbps_per_direction"]))
    assert (tmp_path / "mpiscope-roofline" / "machine.toml").is_file()
    assert m["measured"]["clock_ghz"] > 0 and m["peak_gflops"] >= m["measured"]["clock_ghz"] * 2

    b = cli(["bench", "--points", "5", *SMALL], mpich, tmp_path)
    assert len(b["points"]) == 5 and b["nodes"] == 2 and b["shared_memory"]
    assert b["ceilings"]["dgemm_gflops"] > 0 and b["ceilings"]["exchange_gbps_per_direction"] > 0
    for p in b["points"]:
        # flops and bytes are what the sweep asked for, exactly: 2 n^3 per product, 2 messages a round
        assert p["flops_per_node"] == p["reps"] * 2 * 128 ** 3
        assert p["bytes_per_node"] == 2 * p["msg_bytes"] * p["rounds"]
        assert p["intensity"] == pytest.approx(p["flops_per_node"] / p["bytes_per_node"])
    sides = {p["intensity"] < b["ridge"] for p in b["points"]}
    assert sides == {True, False}, "the sweep must straddle the ridge"

    d = cli(["plot"], mpich, tmp_path)
    assert len(d["points"]) == 5
    assert sum("during the sweep" in ln["label"] for ln in d["lines"]) == 2
    assert Path(tmp_path / d["png"]).stat().st_size > 10_000 and Path(tmp_path / d["html"]).is_file()
    # a second measure keeps the first machine file
    cli(["measure", *SMALL], mpich, tmp_path)
    assert len(list((tmp_path / "mpiscope-roofline" / "history").glob("machine-*.toml"))) == 1


@pytest.mark.mpi(ranks=4)
def test_exchange_schedule_is_contention_free(mpich: Mpi, roofline_mm: Path, tmp_path: Path) -> None:
    """Round-robin tournament: in each round the 4 nodes form 2 disjoint pairs; 3 rounds meet everyone."""
    out = tmp_path / "t"
    done = mpiscope_cli(["run", "--out", str(out), "--", *mpich.launch(4), str(roofline_mm),
                         "mixed", "64", "0", "1024", "3", "-r", "1"], env=mpich.environ())
    assert done.returncode == 0, done.stderr[-2000:]
    from mpiscope.trace import open_trace
    msgs = open_trace(out).messages().collect().filter(tag=7).sort("t_send_enter_ns")
    assert msgs.height == 4 * 3 * 2          # 4 ranks x 3 rounds x (warm-up + 1 repetition)
    met: dict[int, set[int]] = {r: set() for r in range(4)}
    for k in range(3):
        partner = {src: msgs.filter(src=src)["dst"][k] for src in range(4)}
        assert all(partner[partner[r]] == r and partner[r] != r for r in range(4)), partner
        for r in range(4):
            met[r].add(partner[r])
    assert all(met[r] == set(range(4)) - {r} for r in range(4))


@pytest.mark.mpi(ranks=3)
def test_odd_node_count_leaves_one_node_idle_per_round(mpich: Mpi, roofline_mm: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    from mpiscope.roofline.native import Launch, run_program
    for k, v in mpich.env.items():
        monkeypatch.setenv(k, v)
    launch = Launch(3, 1, (str(mpich.mpiexec), "-n", "3"), timeout_s=120)
    hosts, lines = run_program(launch, ["mixed", "64", "0", "1000", "3", "-r", "1"])
    assert len(hosts) == 3 and lines[0]["bytes_per_node"] == 2 * 1000 * 2


@pytest.mark.mpi(ranks=2)
def test_place_a_traced_run(mpich: Mpi, roofline_mm: Path, tmp_path: Path) -> None:
    out = tmp_path / "app"
    reps, n, msg, rounds = 4, 128, 65536, 8
    run = [*mpich.launch(2), str(roofline_mm), "mixed", str(n), str(reps), str(msg), str(rounds), "-r", "1"]
    flops = 2 * 2 * reps * 2 * n ** 3          # 2 ranks x (warm-up + 1 repetition)
    d = cli(["place", str(out), "--system", "fx1", "--flops", str(flops), "--ranks-as-nodes",
             "--comm-factor", "0.25", "--run", *run], mpich, tmp_path)
    assert d["nodes"] == 2 and d["ranks_as_nodes"]
    assert d["p2p_inter_node_bytes"] == 2 * 2 * rounds * msg
    if d["flops_source"].startswith("hardware counters"):
        assert d["flops"] == pytest.approx(flops, rel=0.1)
    else:
        assert d["flops_source"].startswith("given with --flops") and d["flops"] == flops
    # intensity: flops per node over the inter-node bytes a node sends plus receives
    assert d["intensity"] == pytest.approx(d["flops"] / 2 / d["inter_node_bytes_per_node"])
    assert d["what_ifs"][0]["intensity"] == pytest.approx(4 * d["intensity"])
    assert d["verdict"]["kind"] in {"compute-bound", "network-bound", "ceiling", "below-all"}
    # the same trace on its one host: every byte is intra-node
    one = cli(["place", str(out), "--system", "fx1", "--flops", str(flops)], mpich, tmp_path)
    assert one["one_host"] and one["intensity"] is None and "every byte" in one["notes"][0]


@pytest.mark.mpi(ranks=2)
def test_roofline_errors_are_one_sentence(mpich: Mpi, tmp_path: Path, run_traced: Callable[..., Trace]) -> None:
    trace = run_traced("ring", 2, args=["2", "64"])
    cases = [
        (["measure", "--ranks", "1"], "at least 2 nodes"),
        (["measure", "--seconds", "0"], "greater than 0"),
        (["bench"], "roofline measure"),
        (["place", str(trace.path), "--system", "sx9"], "--flops"),
        (["place", str(trace.path), "--system", "sx9", "--flops", "1e6", "--comm-factor", "0"], "greater than 0"),
        (["plot", "--system", "sx9", "--app", str(tmp_path / "none.json")], "not found"),
    ]
    for args, words in cases:
        done = mpiscope_cli(["roofline", *args], env=mpich.environ(), cwd=tmp_path)
        lines = done.stderr.strip().splitlines()
        assert done.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: "), (args, done.stderr)
        assert words in lines[0], lines[0]


@pytest.mark.mpi(ranks=2)
def test_each_rank_runs_under_its_own_perf_stat(mpich: Mpi, roofline_mm: Path, tmp_path: Path) -> None:
    """The wrapper `place --run` uses for flop counting, shown with a software event every machine has."""
    import shutil
    import subprocess

    from mpiscope.roofline.flops import wrap
    require(shutil.which("perf") is not None, "perf", "apt-get install linux-perf")
    counts = tmp_path / "trace" / "flops"         # created by the wrapper on each node
    cmd = wrap([*mpich.launch(2), str(roofline_mm), "pingpong", "1000", "5", "-r", "1"], counts,
               [("task-clock", 1)])
    done = subprocess.run(cmd, env=mpich.environ(), capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    files = sorted(counts.glob("*.csv"))
    assert len(files) == 2
    assert all("task-clock:u" in f.read_text() for f in files)
