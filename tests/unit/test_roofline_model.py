"""Communication roofline (004): machine files, model, verdicts, what-ifs, trace placement, charts."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import polars as pl
import pytest
from tests.conftest import mpiscope_cli

from mpiscope.errors import UsageError
from mpiscope.roofline import flops, results
from mpiscope.roofline.bench import plan_points
from mpiscope.roofline.chart import chart_data, overlay_data
from mpiscope.roofline.cpu import parse_cpuinfo, with_clock
from mpiscope.roofline.html import render_html
from mpiscope.roofline.machines import (
    builtin,
    builtin_names,
    load_machine,
    machine_to_toml,
    parse_machine,
    system_rows,
)
from mpiscope.roofline.model import Ceiling, Machine, Network, classify, what_if
from mpiscope.roofline.place import measure_traffic, place_trace
from mpiscope.roofline.plot import render_png
from mpiscope.trace import Trace

DATA = Path(__file__).resolve().parent.parent / "data" / "roofline"


@pytest.fixture(scope="module")
def rows() -> dict[str, dict]:
    done = mpiscope_cli(["roofline", "systems", "--json", "-"])
    assert done.returncode == 0, done.stderr
    return {r["name"]: r for r in json.loads(done.stdout)["systems"]}


def test_systems_ridges_match_the_paper_within_3_percent(rows: dict[str, dict]) -> None:
    expected = {"Fujitsu FX1 (InfiniBand DDR x4)": 10, "Fujitsu FX10 (all 10 ports)": 2.36,
                "Fujitsu FX10 (one port)": 23.6, "Hitachi SR16000 M1 (CPU-Hub)": 5.1,
                "Hitachi SR16000 M1 (in drawer)": 20.4, "Intel Nehalem EX cluster (InfiniBand QDR x4)": 36.2}
    for name, printed in expected.items():
        r = rows[name]
        assert set(r) >= {"name", "peak_gflops", "bw_gbps_per_direction", "ridge", "ridge_paper"}
        assert r["ridge_paper"] == printed
        assert r["ridge"] == pytest.approx(r["peak_gflops"] / (2 * r["bw_gbps_per_direction"]))
        assert abs(r["ridge"] - printed) / printed < 0.03, name
    # every one of the paper's five systems is there
    assert {r["system"] for r in rows.values()} == {"NEC SX-9", "Intel Nehalem EX cluster", "Fujitsu FX1",
                                                   "Fujitsu FX10", "Hitachi SR16000 M1"}


def test_systems_flag_the_papers_inconsistencies_and_nothing_else(rows: dict[str, dict]) -> None:
    flagged = {n for n, r in rows.items() if r["inconsistent"]}
    assert flagged == {"NEC SX-9 (IXS)", "Intel Nehalem EX cluster (InfiniBand QDR x4)",
                       "Hitachi SR16000 M1 (drawer to drawer, indirect)"}
    assert rows["NEC SX-9 (IXS)"]["ridge"] == pytest.approx(6.55, abs=0.005)
    assert "38.2" in rows["Intel Nehalem EX cluster (InfiniBand QDR x4)"]["flags"][0]
    assert "not derivable" in rows["Hitachi SR16000 M1 (drawer to drawer, indirect)"]["flags"][0]


def test_sx9_what_if_communication_cut_to_a_quarter() -> None:
    """004 Fig. 12: I = 4.59 / 4 -> 4.59 with a quarter of the bytes, roof 4.59 x 256 GB/s = 1175 GF/s."""
    done = mpiscope_cli(["roofline", "place", "--system", "sx9", "--intensity", str(4.59 / 4), "--gflops", "250",
                         "--comm-factor", "0.25", "--json", "-"])
    assert done.returncode == 0, done.stderr
    d = json.loads(done.stdout)
    w = d["what_ifs"][0]
    assert w["intensity"] == pytest.approx(4.59)
    assert w["attainable_gflops"] == pytest.approx(1175, rel=1e-3)
    assert w["attainable_before_gflops"] == pytest.approx(4.59 / 4 * 256)
    assert d["verdict"]["kind"] == "network-bound" and "mpiscope map" in d["verdict"]["advice"]


MACHINE = Machine("test", 100.0, (Network("net", 5.0),),
                  (Ceiling("compute", "kernel", 60.0, "slow kernel"), Ceiling("bandwidth", "pingpong", 1.0, "one port")))


@pytest.mark.parametrize("intensity, gflops, kind, line", [
    (100.0, 95.0, "compute-bound", "peak"),
    (2.0, 19.0, "network-bound", "net"),
    (100.0, 58.0, "ceiling", "kernel"),
    (2.0, 3.9, "ceiling", "pingpong"),
    (100.0, 10.0, "below-all", "roof"),
    (2.0, 21.0, "above-roof", "roof"),
    (100.0, 100.5, "above-roof", "roof"),
])
def test_classify_points_d_e_f(intensity: float, gflops: float, kind: str, line: str) -> None:
    v = classify(MACHINE, intensity, gflops)
    assert (v.kind, v.line) == (kind, line)


def test_what_if_in_the_compute_bound_region_stays_at_peak() -> None:
    assert what_if(MACHINE, 50.0, 0.25)["attainable_gflops"] == 100.0


def write_toml(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "m.toml"
    p.write_text(text)
    return p


@pytest.mark.parametrize("text, words", [
    ('name = "x"\n[[network]]\nbw_gbps_per_direction = 5\n', ["no peak_gflops", "add a line"]),
    ('name = "x"\npeak_gflops = 10\n[[network]]\nbw_gbps_per_direction = 0\n', ["bw_gbps_per_direction is 0"]),
    ('name = "x"\npeak_gflops = 10\n', ["no [[network]]"]),
    ('name = "x"\npeak_gflops = "fast"\n[[network]]\nbw_gbps_per_direction = 5\n', ["is not a number"]),
    ('name = "x\npeak', ["not valid TOML"]),
])
def test_bad_machine_files_give_one_sentence(tmp_path: Path, text: str, words: list[str]) -> None:
    path = write_toml(tmp_path, text)
    with pytest.raises(UsageError) as e:
        load_machine(path)
    message = str(e.value)
    assert str(path) in message and "\n" not in message
    for w in words:
        assert w in message


def test_bad_machine_file_on_the_command_line(tmp_path: Path) -> None:
    path = write_toml(tmp_path, 'name = "x"\npeak_gflops = 10\n[[network]]\nbw_gbps_per_direction = 0\n')
    done = mpiscope_cli(["roofline", "plot", "--machine", str(path), "--out", str(tmp_path / "p")])
    assert done.returncode == 2 and "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "must be greater than 0" in lines[0]
    assert not (tmp_path / "p.png").exists()


def test_machine_file_round_trip(tmp_path: Path) -> None:
    m = Machine("rt", 12.5, (Network("a", 3.0, 2), Network("b", 1.0)), (Ceiling("compute", "dgemm", 10.0, "why"),),
                topology="star", nodes=4, shared_memory=True, measured={"ranks": 4})
    path = tmp_path / "rt.toml"
    path.write_bytes(machine_to_toml(m))
    assert load_machine(path) == m


def test_every_builtin_system_loads() -> None:
    assert set(builtin_names()) == {"fx1", "fx10", "nehalem-ex", "sr16000", "sx9"}
    assert builtin("FX10").networks[1].bw_gbps_per_direction == 5.0
    with pytest.raises(UsageError, match="no built-in system"):
        builtin("k-computer")


def test_cpu_peak_estimates() -> None:
    epyc = parse_cpuinfo((DATA / "cpuinfo-epyc.txt").read_text())
    assert (epyc.cores, epyc.simd_doubles, epyc.fma) == (2, 4, True)
    assert epyc.gflops_per_core == pytest.approx(2.44542 * 4 * 2 * 2)
    skx = parse_cpuinfo((DATA / "cpuinfo-skylake-smt.txt").read_text(), max_khz="3700000\n", fma_units=1)
    assert skx.cores == 1                      # two hyper-threads of one core
    assert skx.gflops_per_core == pytest.approx(3.7 * 8 * 2)
    assert skx.clock_source == "cpufreq maximum"
    with pytest.raises(UsageError, match="no processor"):
        parse_cpuinfo("")
    boosted = with_clock(epyc, 3.2)
    assert boosted.gflops_per_core == pytest.approx(3.2 * 16) and "2.45 GHz" in boosted.clock_source
    assert with_clock(epyc, 1.1) is epyc          # a clock slowed by other processes never lowers the peak


def test_perf_stat_csv_to_flops(tmp_path: Path) -> None:
    intel, seen = flops.parse_csv((DATA / "perf-intel.csv").read_text())
    assert intel == 1000 + 250 * 4 + 10 * 4
    assert "fp_arith_inst_retired.512b_packed_double" not in seen
    (tmp_path / "flops").mkdir()
    for name in ("perf-amd.csv", "perf-intel.csv"):
        (tmp_path / "flops" / f"host.{name}").write_text((DATA / name).read_text())
    counted = flops.read_counts(tmp_path)
    assert counted is not None and counted.flops == 123456789 + 2040 and counted.files == 2
    assert "perf stat" in counted.source
    assert flops.read_counts(tmp_path / "missing") is None
    assert flops.flop_events("vendor_id : AuthenticAMD") == flops.AMD


def test_plan_sets_flops_and_bytes_independently() -> None:
    plans = plan_points(MACHINE, [0.5, 10.0, 1000.0], nodes=2, matrix_n=64, msg_max=1 << 20, seconds=0.01)
    for p in plans:
        flops_ = p.reps * 2 * 64 ** 3
        assert flops_ / (2 * p.msg_bytes * p.rounds) == pytest.approx(p.intensity, rel=0.05)
    with pytest.raises(UsageError, match="positive"):
        plan_points(MACHINE, [0.0], 2, 64, 1 << 20, 0.01)


def fake_trace(tmp_path: Path, hosts: list[str], msg_bytes: list[int]) -> Trace:
    """Four ranks on `hosts`; messages 0->1, 0->2, 3->1, 2->3; one 8-byte allreduce per rank."""
    ranks = list(range(4))
    pl.DataFrame({"src": [0, 0, 3, 2], "dst": [1, 2, 1, 3], "bytes": msg_bytes},
                 schema={"src": pl.Int32, "dst": pl.Int32, "bytes": pl.Int64}).write_parquet(tmp_path / "messages.parquet")
    ev = [(r, "MPI_Init", 0, 1_000_000_000, None, 0, 0) for r in ranks]
    ev += [(r, "MPI_Allreduce", 1_500_000_000, 1_600_000_000, 0, 0, 8 if sum(msg_bytes) else 0) for r in ranks]
    ev += [(r, "MPI_Finalize", 3_000_000_000, 3_100_000_000, None, 0, 0) for r in ranks]
    pl.DataFrame(ev, schema={"rank": pl.Int32, "call": pl.Utf8, "t_enter_ns": pl.Int64, "t_leave_ns": pl.Int64,
                             "coll_id": pl.Int64, "comm": pl.Int64, "bytes": pl.Int64},
                 orient="row").write_parquet(tmp_path / "events.parquet")
    pl.DataFrame({"comm": [0], "comm_size": [4], "ranks": [ranks]},
                 schema={"comm": pl.Int64, "comm_size": pl.Int64, "ranks": pl.List(pl.Int32)}).write_parquet(
        tmp_path / "comms.parquet")
    return Trace(tmp_path, {"ranks": 4, "hosts": {str(r): h for r, h in zip(ranks, hosts)}})


def test_inter_node_bytes_follow_the_manifest_hosts(tmp_path: Path) -> None:
    t = fake_trace(tmp_path, ["a", "a", "b", "b"], [100, 1000, 500, 50])
    tr = measure_traffic(t)
    assert (tr.nodes, tr.one_host) == (2, False)
    assert (tr.p2p_inter_bytes, tr.p2p_intra_bytes) == (1500, 150)
    assert tr.coll_inter_bytes == pytest.approx(4 * 8 * 2 / 3)     # 2 of the 3 other members are remote
    assert tr.inter_bytes_per_node == pytest.approx(2 * (1500 + 64 / 3) / 2)
    assert tr.per_node == [{"node": "a", "sent": 1000.0, "received": 500.0},
                           {"node": "b", "sent": 500.0, "received": 1000.0}]
    p = place_trace(t, MACHINE, MACHINE.networks[0], 4e9, "given", False, [0.25]).to_json()
    assert p["gflops"] == pytest.approx(1.0)                       # 2e9 flops per node in 2 s
    assert p["intensity"] == pytest.approx(2e9 / tr.inter_bytes_per_node)
    assert p["what_ifs"][0]["intensity"] == pytest.approx(4 * p["intensity"])


def test_one_host_says_every_byte_is_intra_node(tmp_path: Path) -> None:
    t = fake_trace(tmp_path, ["h"] * 4, [100, 1000, 500, 50])
    p = place_trace(t, MACHINE, MACHINE.networks[0], 4e9, "given", False, []).to_json()
    assert p["intensity"] is None and p["one_host"] and p["verdict"] is None
    assert "every byte" in p["notes"][0] and "--ranks-as-nodes" in p["notes"][0]
    q = place_trace(t, MACHINE, MACHINE.networks[0], 4e9, "given", True, []).to_json()
    assert q["nodes"] == 4 and q["inter_node_bytes_per_node"] == pytest.approx(2 * (1650 + 32) / 4)


def test_trace_without_byte_counts_is_refused(tmp_path: Path) -> None:
    t = fake_trace(tmp_path, ["a", "a", "b", "b"], [0, 0, 0, 0])
    with pytest.raises(UsageError, match="has no byte counts"):
        place_trace(t, MACHINE, MACHINE.networks[0], 4e9, "given", False, [])


def test_chart_flags_a_point_above_the_roof_and_draws_it() -> None:
    bench = {"points": [{"intensity": 1.0, "gflops": 9.0}, {"intensity": 1.0, "gflops": 11.0},
                        {"intensity": 1000.0, "gflops": 99.0}]}
    d = chart_data(MACHINE, bench, [{"label": "app", "intensity": 2.0, "gflops": 5.0,
                                     "what_ifs": [what_if(MACHINE, 2.0, 0.25)]}])
    assert [p["above_roof"] for p in d["points"]] == [False, True, False, False]
    assert len(d["errors"]) == 1 and "measurement error" in d["errors"][0]
    assert d["ridge"]["intensity"] == 10.0 and d["what_ifs"][0]["to"] == [8.0, 80.0]
    assert render_png(d)[:8] == b"\x89PNG\r\n\x1a\n"
    page = render_html(d).decode()
    assert "http://" not in page.replace("http://www.w3.org/2000/svg", "") and "https://" not in page
    assert "<script src" not in page and json.dumps(d["ridge"]) in page


def test_chart_flags_a_ceiling_of_the_same_run_above_the_roof() -> None:
    d = chart_data(MACHINE, {"points": [], "ceilings": {"dgemm_gflops": 90.0, "exchange_gbps_per_direction": 6.0}}, [])
    assert len(d["errors"]) == 1 and "exchange_gbps_per_direction = 6" in d["errors"][0]
    assert sum("during the sweep" in ln["label"] for ln in d["lines"]) == 2
    assert render_png(d)[:4] == b"\x89PNG"


def test_a_measured_roof_is_raised_by_a_faster_exchange_in_the_sweep() -> None:
    measured = Machine("here", 100.0, (Network("best measured", 5.0),), measured={"ranks": 2})
    bench = {"points": [{"intensity": 1.0, "gflops": 11.0}], "ceilings": {"exchange_gbps_per_direction": 6.0}}
    d = chart_data(measured, bench, [])
    assert d["errors"] == [] and "raised from 5 to 6" in d["notes"][0]
    assert d["points"][0]["roof_gflops"] == 12.0 and not d["points"][0]["above_roof"]
    # a data-sheet roof is not raised: the same sweep is an error there
    assert chart_data(replace(measured, measured={}), bench, [])["errors"]


def test_plot_json_on_stdout_stays_json_with_notes_and_errors(tmp_path: Path) -> None:
    measured = Machine("here", 100.0, (Network("best measured", 5.0),), measured={"ranks": 2})
    (tmp_path / "m.toml").write_bytes(machine_to_toml(measured))
    bench = {"schema": "mpiscope.roofline/1", "points": [{"intensity": 1.0, "gflops": 13.0}],
             "ceilings": {"exchange_gbps_per_direction": 6.0}}
    (tmp_path / "b.json").write_text(json.dumps(bench))
    done = mpiscope_cli(["roofline", "plot", "--machine", str(tmp_path / "m.toml"), "--bench",
                         str(tmp_path / "b.json"), "--out", str(tmp_path / "p"), "--json", "-"])
    assert done.returncode == 0, done.stderr
    d = json.loads(done.stdout)
    assert d["notes"] and d["points"][0]["above_roof"] and "measurement error" in done.stderr


def test_overlay_of_the_five_systems_like_fig_5() -> None:
    d = overlay_data([builtin(k) for k in builtin_names()])
    assert d["overlay"] and len(d["lines"]) == 5 and len(d["ridges"]) == 5
    fx1 = next(r for r in d["ridges"] if r["label"] == "Fujitsu FX1")
    assert fx1["intensity"] == 10.0 and fx1["gflops"] == 40.0
    assert d["x_range"][0] < 2.36 / 10 and d["x_range"][1] > 36.2 * 10
    assert render_png(d)[:4] == b"\x89PNG" and "ridge I = " in render_html(d).decode()


def test_results_keep_the_previous_default_file(tmp_path: Path) -> None:
    default = tmp_path / "machine.toml"
    results.save(default, b"one", default, force=False)
    kept = results.save(default, b"two", default, force=False)
    assert default.read_bytes() == b"two" and kept is not None and kept.read_bytes() == b"one"
    explicit = tmp_path / "mine.toml"
    results.save(explicit, b"x", default, force=False)
    with pytest.raises(UsageError, match="--force"):
        results.save(explicit, b"y", default, force=False)
    results.save(explicit, b"y", default, force=True)
    assert explicit.read_bytes() == b"y"


def test_parse_machine_names_the_network_with_the_problem() -> None:
    with pytest.raises(UsageError, match="network 'tofu'"):
        parse_machine({"name": "x", "peak_gflops": 1, "network": [{"label": "tofu", "bw_gbps_per_direction": -1}]},
                      "m.toml")
    m = parse_machine({"name": "x", "peak_gflops": 1, "network": [{"bw_gbps_per_direction": 1}]}, "m.toml")
    with pytest.raises(UsageError, match="has no network 'ib'"):
        m.network("ib")
    assert system_rows([("x", m)])[0]["ridge"] == 0.5


def test_an_alltoalls_own_block_stays_on_its_node(tmp_path: Path) -> None:
    """An alltoall's bytes hold a block for every member, the rank's own among them: with 2 of 4
    members on another node, half of them leave (all of them were counted as inter-node)."""
    t = fake_trace(tmp_path, ["a", "a", "b", "b"], [0, 0, 0, 0])
    ev = pl.read_parquet(tmp_path / "events.parquet")
    ev = ev.with_columns(pl.when(pl.col("call") == "MPI_Allreduce").then(pl.lit("MPI_Alltoall_c"))
                         .otherwise(pl.col("call")).alias("call"),
                         pl.when(pl.col("coll_id").is_not_null()).then(4 * 1000).otherwise(0).alias("bytes"))
    ev.write_parquet(tmp_path / "events.parquet")
    assert measure_traffic(t).coll_inter_bytes == pytest.approx(4 * 4000 * 2 / 4)
