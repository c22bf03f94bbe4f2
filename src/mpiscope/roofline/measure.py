"""`roofline measure`: describe this machine or cluster as a machine file.

Roofs: the theoretical peak (estimated from the CPU) and the best measured
network bandwidth. Ceilings (004 §4.3): the benchmark kernel's rate with all
nodes computing and nobody communicating (ceiling a), and the bandwidths of
ping-pong (one pair, one port), of the benchmark's contention-free pairwise
exchange alone (ceiling b) and of the all-neighbour exchange (all ports).
On one host every "inter-node" byte goes through shared memory; the file says so.
"""

from __future__ import annotations

import math
import socket
import time
from dataclasses import dataclass, field, replace
from typing import Any

from mpiscope.mpi.find import built_against
from mpiscope.roofline.cpu import CpuPeak, with_clock
from mpiscope.roofline.model import Ceiling, Machine, Network
from mpiscope.roofline.native import Launch, one_host, run_program

SCHEMA = "mpiscope.roofline/1"


@dataclass(frozen=True)
class Settings:
    matrix_n: int = 512
    msg_bytes: int = 4 << 20
    seconds: float = 0.4        # per measurement and repetition
    repeat: int = 5     # best of 5: a ceiling is what the machine can reach, so dodge passing load


@dataclass(frozen=True)
class Measurement:
    machine: Machine
    cpu: CpuPeak
    hosts: list[str]
    dgemm_gflops: float
    bw_gbps: dict[str, float]           # per direction: pingpong, pairwise, exchange
    warnings: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        m = self.machine
        return {"schema": SCHEMA, "command": "measure", "name": m.name, "peak_gflops": m.peak_gflops,
                "peak_note": m.peak_note, "bw_gbps_per_direction": m.networks[0].bw_gbps_per_direction,
                "network": m.networks[0].label, "dgemm_gflops": self.dgemm_gflops,
                "bw_gbps_per_direction_measured": self.bw_gbps, "shared_memory": m.shared_memory,
                "hosts": self.hosts, "nodes": m.nodes, "ridge": m.peak_gflops / (2 * m.networks[0].bw_gbps_per_direction),
                "ceilings": [{"kind": c.kind, "label": c.label, "value": c.value} for c in m.ceilings],
                "measured": m.measured, "warnings": self.warnings}


BW_LABELS = {
    "pingpong": ("ping-pong, one pair (one port)",
                 "one transfer at a time per node: fine-grained or serialised communication"),
    "pairwise": ("pairwise exchange alone (004 §4.3)",
                 "the benchmark's contention-free communication on its own (004 §4.3 ceiling b)"),
    "exchange": ("all-neighbour exchange (all ports)", "every node sending to every other node at once"),
}


def _best(lines: list[dict[str, Any]], **match: Any) -> dict[str, Any]:
    """Best of the repetitions (shortest time): a ceiling is what the machine can reach."""
    rows = [ln for ln in lines if all(ln.get(k) == v for k, v in match.items())]
    return min(rows, key=lambda ln: float(ln["seconds"]))


def measure(launch: Launch, cpu: CpuPeak, s: Settings, peak_override: float | None = None) -> Measurement:
    _, clock = run_program(launch, ["clock"])
    cpu = with_clock(cpu, float(clock[0]["ghz"]))
    est_peak = cpu.gflops_per_core * launch.threads
    flops_per_rep = 2.0 * s.matrix_n ** 3
    reps = max(1, math.ceil(s.seconds * est_peak * 1e9 / flops_per_rep))
    rounds = 100
    r = ["-r", str(s.repeat)]
    hosts, mixed = run_program(launch, ["mixed", str(s.matrix_n), str(reps), str(s.msg_bytes), "0",
                                        str(s.matrix_n), "0", str(s.msg_bytes), str(rounds), *r])
    _, pp = run_program(launch, ["pingpong", str(s.msg_bytes), str(rounds), *r])
    _, ex = run_program(launch, ["exchange", str(s.msg_bytes), str(max(10, rounds // (launch.ranks - 1))), *r])
    dg = _best(mixed, point=0)
    dgemm = dg["flops_per_node"] / dg["seconds"] / 1e9
    pw = _best(mixed, point=1)
    bw = {"pingpong": _best(pp)["bytes_per_direction"] / _best(pp)["seconds"] / 1e9,
          "pairwise": pw["bytes_per_node"] / 2.0 / pw["seconds"] / 1e9,
          "exchange": _best(ex)["bytes_per_direction"] / _best(ex)["seconds"] / 1e9}
    shared = one_host(hosts)
    warnings = []
    peak, peak_note = est_peak, cpu.describe(launch.threads)
    if peak_override:
        peak, peak_note = peak_override, f"given with --peak-gflops (the CPU {peak_note})"
    elif dgemm > est_peak:
        # cpuinfo's clock can be the base or TSC clock while the cores run faster (turbo, or a VM).
        warnings.append(f"DGEMM reached {dgemm:.1f} GF/s per node, above the estimated peak {est_peak:.1f}: "
                        f"the clock in /proc/cpuinfo is lower than the real one; the peak roof uses the "
                        f"DGEMM rate (give the true peak with --peak-gflops)")
        peak, peak_note = dgemm, f"measured DGEMM, above the CPU {peak_note}"
    best = max(bw, key=lambda k: bw[k])
    roof = Network(f"best measured: {BW_LABELS[best][0]}", bw[best], 1,
                   note="shared memory between ranks on one host" if shared else "measured between nodes")
    ceilings = [Ceiling("compute", "DGEMM, all nodes at once (measured)", dgemm,
                        "the kernel's rate on a node (004 §4.3 ceiling a): the node code itself is the limit")]
    ceilings += [Ceiling("bandwidth", BW_LABELS[k][0], v, BW_LABELS[k][1]) for k, v in bw.items() if k != best]
    host = hosts[0] if hosts else socket.gethostname()
    mpi = built_against()
    machine = Machine(
        name=f"{host} (measured)" if shared else f"{host} + {len(set(hosts)) - 1} more hosts (measured)",
        peak_gflops=peak, networks=(roof,), ceilings=tuple(ceilings),
        topology="one host: ranks exchange through shared memory" if shared else
        f"{len(set(hosts))} hosts; topology not measured",
        nodes=len(hosts), peak_note=peak_note, shared_memory=shared,
        notes=("One host: every rank stands for a node with " f"{launch.threads} core(s), and the 'network' is "
               "shared memory." if shared else "One rank per node."),
        source=f"mpiscope roofline measure, {time.strftime('%Y-%m-%d %H:%M')}",
        measured={"hosts": hosts, "ranks": len(hosts), "threads_per_rank": launch.threads,
                  "mpi": mpi.label, "matrix_n": s.matrix_n, "msg_bytes": s.msg_bytes, "repeat": s.repeat,
                  "dgemm_gflops": dgemm, "peak_estimate_gflops": est_peak, "clock_ghz": cpu.ghz,
                  **{f"bw_{k}_gbps_per_direction": v for k, v in bw.items()}})
    return Measurement(machine, cpu, hosts, dgemm, bw, warnings)


def with_name(m: Measurement, name: str | None) -> Measurement:
    return replace(m, machine=replace(m.machine, name=name)) if name else m
