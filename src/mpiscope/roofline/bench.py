"""`roofline bench`: the benchmark of 004 §4.2 swept over communication intensity.

Each node multiplies dense matrices while exchanging unrelated messages on a
contention-free schedule; flops and bytes are set independently, so each
point has a chosen intensity I = flops / (bytes sent + received) per node.
Work per point is sized from the machine file so that every point takes
about the same time whichever side of the ridge it falls on.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from mpiscope.errors import UsageError
from mpiscope.roofline.model import ABOVE_TOLERANCE, Machine, attainable, ridge
from mpiscope.roofline.native import Launch, one_host, run_program

SCHEMA = "mpiscope.roofline/1"


@dataclass(frozen=True)
class Plan:
    intensity: float        # requested; the point's own I comes from the counts
    reps: int
    msg_bytes: int
    rounds: int


def default_intensities(m: Machine, points: int) -> list[float]:
    """About 1 ... 1000 (004 §4.2: the paper's points run from I <= 3 to I >= 140), widened to reach
    30x below this machine's ridge, where the products take a few % of the exchange's time and the
    points show the bandwidth alone, and 100x above it, where the messages are as negligible."""
    r = ridge(m.peak_gflops, m.networks[0].bw_gbps_per_direction)
    lo, hi = min(1.0, r / 30.0), max(1000.0, r * 100.0)
    return [float(x) for x in np.geomspace(lo, hi, points)]


def plan_points(m: Machine, intensities: list[float], nodes: int, matrix_n: int, msg_max: int,
                seconds: float) -> list[Plan]:
    compute = min([c.value for c in m.ceilings if c.kind == "compute"] + [m.peak_gflops]) * 1e9
    bw_dir = min([c.value for c in m.ceilings if c.kind == "bandwidth"]
                 + [m.networks[0].bw_gbps_per_direction]) * 1e9
    # an odd node count leaves one node without a partner in each round (the tournament's bye)
    busy = 1.0 if nodes % 2 == 0 else (nodes - 1) / nodes
    plans = []
    for i in intensities:
        if i <= 0 or not math.isfinite(i):
            raise UsageError(f"intensity {i} is not a positive number; give flop/byte values > 0")
        # time = max(flops / compute, bytes / (2 B_dir)) = seconds, with flops = I x bytes
        flops = seconds * min(compute, 2.0 * bw_dir * i)
        reps = max(1, round(flops / (2.0 * matrix_n ** 3)))
        total_bytes = reps * 2.0 * matrix_n ** 3 / i
        # as few rounds as the largest message allows, then the message size that hits the byte count
        rounds = max(1, math.ceil(total_bytes / (2.0 * busy * msg_max)))
        msg = int(max(1, round(total_bytes / (2.0 * busy * rounds))))
        plans.append(Plan(i, reps, msg, rounds))
    return plans


@dataclass(frozen=True)
class BenchResult:
    machine: Machine
    machine_file: str
    hosts: list[str]
    nodes: int
    matrix_n: int
    points: list[dict[str, Any]]
    ceilings: dict[str, float]          # measured in the same run: the kernel alone, the exchange alone
    notes: list[str]

    def above_roof(self) -> list[dict[str, Any]]:
        return [p for p in self.points if p["above_roof"]]

    def to_json(self) -> dict[str, Any]:
        m = self.machine
        return {"schema": SCHEMA, "command": "bench", "machine": m.name, "machine_file": self.machine_file,
                "peak_gflops": m.peak_gflops, "bw_gbps_per_direction": m.networks[0].bw_gbps_per_direction,
                "ridge": ridge(m.peak_gflops, m.networks[0].bw_gbps_per_direction),
                "nodes": self.nodes, "hosts": self.hosts, "shared_memory": one_host(self.hosts),
                "matrix_n": self.matrix_n, "ceilings": self.ceilings, "notes": self.notes,
                "points": self.points}


def summarize_point(m: Machine, rows: list[dict[str, Any]]) -> dict[str, Any]:
    best = min(rows, key=lambda r: float(r["seconds"]))
    flops, nbytes = float(best["flops_per_node"]), float(best["bytes_per_node"])
    intensity = flops / nbytes
    gflops = flops / float(best["seconds"]) / 1e9
    roof = attainable(m.peak_gflops, m.networks[0].bw_gbps_per_direction, intensity)
    return {"intensity": intensity, "gflops": gflops, "roof_gflops": roof, "fraction_of_roof": gflops / roof,
            "above_roof": gflops > roof * (1.0 + ABOVE_TOLERANCE),
            "flops_per_node": flops, "bytes_per_node": nbytes, "seconds": float(best["seconds"]),
            "seconds_median": statistics.median(float(r["seconds"]) for r in rows),
            "compute_seconds": float(best["compute_seconds"]), "comm_seconds": float(best["comm_seconds"]),
            "matrix_n": int(best["n"]), "reps": int(best["reps"]), "msg_bytes": int(best["msg_bytes"]),
            "rounds": int(best["rounds"]), "repeats": len(rows)}


def effective_machine(m: Machine, ceilings: dict[str, float]) -> tuple[Machine, str | None]:
    """A measured network roof is the best bandwidth seen so far: when the sweep's exchange alone beat
    it, that is the better measurement of the same thing and becomes the roof. A roof given by a
    data sheet (no [measured] table) is never raised: a ceiling above it is an error, flagged."""
    bw = ceilings.get("exchange_gbps_per_direction", 0.0)
    net = m.networks[0]
    if not m.measured or bw <= net.bw_gbps_per_direction:
        return m, None
    note = (f"network roof raised from {net.bw_gbps_per_direction:.4g} to {bw:.4g} GB/s per direction: the "
            f"exchange alone was faster during the sweep than when the machine was measured")
    raised = replace(net, label=f"{net.label}, raised by the sweep", bw_gbps_per_direction=bw)
    return replace(m, networks=(raised, *m.networks[1:])), note


def ceiling_plans(sweep: list[Plan]) -> list[Plan]:
    """The 004 §4.3 ceilings, taken in the same run as the sweep so that both see the same machine:
    the largest product count alone, and the largest exchange alone."""
    most_flops = max(sweep, key=lambda p: p.reps)
    most_bytes = max(sweep, key=lambda p: p.msg_bytes * p.rounds)
    return [Plan(math.inf, most_flops.reps, 1, 0), Plan(0.0, 0, most_bytes.msg_bytes, most_bytes.rounds)]


def run_bench(m: Machine, machine_file: str, launch: Launch, plans: list[Plan], matrix_n: int, repeat: int,
              advance: Any = None) -> BenchResult:
    args = ["mixed"]
    # the ceilings both before and after the sweep: the best of the two spans the sweep's conditions
    ceiling = ceiling_plans(plans)
    for p in [*ceiling, *plans, *ceiling]:
        args += [str(matrix_n), str(p.reps), str(p.msg_bytes), str(p.rounds)]
    hosts, lines = run_program(launch, [*args, "-r", str(repeat)],
                               on_line=(lambda _ln: advance()) if advance else None)

    def best(*points: int) -> dict[str, Any]:
        return min((ln for ln in lines if ln["point"] in points), key=lambda ln: float(ln["seconds"]))

    after = len(plans) + 2
    dgemm, exchange = best(0, after), best(1, after + 1)
    ceilings = {"dgemm_gflops": dgemm["flops_per_node"] / dgemm["seconds"] / 1e9,
                "exchange_gbps_per_direction": exchange["bytes_per_node"] / 2.0 / exchange["seconds"] / 1e9}
    m, note = effective_machine(m, ceilings)
    points = [summarize_point(m, [ln for ln in lines if ln["point"] == i + 2]) for i in range(len(plans))]
    return BenchResult(m, machine_file, hosts, len(hosts), matrix_n, points, ceilings, [note] if note else [])
