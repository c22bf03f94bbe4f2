"""Agreement of the 004 §4.2 benchmark with the communication roofline on this machine, in one run.

Runs `mpiscope roofline measure` and `bench` (or reads their files with --machine/--bench), then
prints, per point, achieved / roof, and the ratios the paper reads off its figures (004 §4.3):
at low intensity, achieved / measured-bandwidth ceiling (the benchmark's communication part
alone); at high intensity, achieved / single-node DGEMM ceiling. The paper's observations are
printed beside them, never instead of them.

  .venv/bin/python bench/roofline_local.py [--json FILE|-] [--machine FILE --bench FILE]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from mpiscope import output
from mpiscope.mpi.find import built_against
from mpiscope.roofline.bench import effective_machine
from mpiscope.roofline.machines import load_machine
from mpiscope.roofline.model import Machine, ridge

PAPER = [
    "SX-9 (Fig. 6): points near the peak for I >= 75; near the measured-bandwidth roof for I <= 18",
    "Nehalem EX, FX1 (Figs. 7-8): for I >= 140 points on the single-node DGEMM line, below the peak",
    "FX10 (Fig. 9): I <= 3 at about 1/10 of the all-ports roof",
]


def run_mpiscope(args: list[str], cwd: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "mpiscope", "roofline", *args], cwd=cwd, text=True,
                          capture_output=True, check=False)
    if done.returncode != 0:
        sys.exit(f"mpiscope roofline {' '.join(args)} failed: {done.stderr.strip()}")


def ratios(m: Machine, bench: dict[str, Any]) -> dict[str, Any]:
    m, _ = effective_machine(m, bench["ceilings"])      # the roof the sweep's points were judged against
    net = m.networks[0]
    r = ridge(m.peak_gflops, net.bw_gbps_per_direction)
    # 004 §4.3's ceilings, measured by `bench` in the same run as its points
    dgemm = bench["ceilings"]["dgemm_gflops"]
    pairwise = bench["ceilings"]["exchange_gbps_per_direction"]
    rows = []
    for p in bench["points"]:
        i, g = p["intensity"], p["gflops"]
        row = {"intensity": i, "gflops": g, "of_roof": g / p["roof_gflops"]}
        if i <= r / 2:
            row["of_bandwidth_ceiling"] = g / (2 * pairwise * i)
        if i >= 20 * r:
            row["of_dgemm_ceiling"] = g / dgemm
        rows.append(row)
    low = [x["of_bandwidth_ceiling"] for x in rows if "of_bandwidth_ceiling" in x]
    high = [x["of_dgemm_ceiling"] for x in rows if "of_dgemm_ceiling" in x]
    return {"schema": "mpiscope.roofline/1", "command": "bench-agreement", "machine": m.name,
            "mpi": built_against().label, "peak_gflops": m.peak_gflops, "dgemm_gflops": dgemm,
            "bw_gbps_per_direction": net.bw_gbps_per_direction, "pairwise_gbps_per_direction": pairwise,
            "ridge": r, "points": rows, "max_of_roof": max(x["of_roof"] for x in rows),
            "points_above_roof": sum(x["of_roof"] > 1 for x in rows),
            "low_intensity_of_bandwidth_ceiling": low, "high_intensity_of_dgemm_ceiling": high,
            "paper": PAPER}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--machine", type=Path)
    ap.add_argument("--bench", type=Path)
    ap.add_argument("--json", metavar="FILE")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="roofline-bench-") as tmp:
        if a.machine and a.bench:
            machine_file, bench_file = a.machine, a.bench
        else:
            run_mpiscope(["measure"], Path(tmp))
            run_mpiscope(["bench"], Path(tmp))
            machine_file = Path(tmp) / "mpiscope-roofline" / "machine.toml"
            bench_file = Path(tmp) / "mpiscope-roofline" / "bench.json"
        res = ratios(load_machine(machine_file), json.loads(bench_file.read_text()))
    print(f"machine: {res['machine']}, {res['mpi']}; peak {res['peak_gflops']:.2f} GF/s, DGEMM "
          f"{res['dgemm_gflops']:.2f} GF/s, roof {res['bw_gbps_per_direction']:.2f} GB/s per direction, "
          f"ridge {res['ridge']:.3g}")
    print(f"{'I':>9} {'GF/s':>8} {'/roof':>7} {'/BW ceil':>9} {'/DGEMM':>8}")
    for x in res["points"]:
        bw = f"{x['of_bandwidth_ceiling']:.3f}" if "of_bandwidth_ceiling" in x else "-"
        dg = f"{x['of_dgemm_ceiling']:.3f}" if "of_dgemm_ceiling" in x else "-"
        print(f"{x['intensity']:9.3g} {x['gflops']:8.3f} {x['of_roof']:7.3f} {bw:>9} {dg:>8}")
    print(f"largest achieved/roof: {res['max_of_roof']:.3f} ({res['points_above_roof']} point(s) above the roof)")
    print("paper (004 §4.3), beside:", *PAPER, sep="\n  ")
    output.emit_json(res, a.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
