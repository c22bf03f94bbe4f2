"""The communication roofline (004 §3): attainable rate, ridge, and the verdict for a point.

Convention (004 Table 1): the intensity I of a node is its flops divided by
the inter-node bytes it sends *plus* receives, and a full-duplex link moves
B_dir bytes per second in each direction, so the network roof is
2·B_dir·I and the ridge is peak / (2·B_dir) (FX1: 40 / (2·2) = 10). The
paper's Eq. (2) prints "bandwidth / intensity", a typo for ×.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

CONVENTION = ("ridge = peak / (2 x B_dir): intensity counts the inter-node bytes a node sends plus receives, "
              "and a full-duplex link carries B_dir in each direction (004 Table 1)")
# A point within this fraction of a line is "near" it (004 §3 gives no figure; mpiscope default).
NEAR = 0.7
# A roof is an upper bound: any point above it is a measurement error. A ceiling is a measured
# rate, which a point may pass by this much and still be "near" it.
ABOVE_TOLERANCE = 0.0
CEILING_SLACK = 0.05


@dataclass(frozen=True)
class Network:
    """One bandwidth roof: a port, a level of a hierarchical network (004 §4.1)."""
    label: str
    bw_gbps_per_direction: float
    ports: int = 1
    ridge_paper: float | None = None
    ridge_paper_text: float | None = None   # where the paper's text prints another value than its table
    derivable: bool = True                  # False: the printed ridge follows from no printed bandwidth
    note: str = ""


@dataclass(frozen=True)
class Ceiling:
    """An auxiliary line under the roofs (004 §3): a measured rate or bandwidth and what it stands for."""
    kind: Literal["compute", "bandwidth"]
    label: str
    value: float          # GF/s for compute, GB/s per direction for bandwidth
    meaning: str = ""

    def at(self, intensity: float) -> float:
        return self.value if self.kind == "compute" else 2.0 * self.value * intensity


@dataclass(frozen=True)
class Machine:
    name: str
    peak_gflops: float
    networks: tuple[Network, ...]
    ceilings: tuple[Ceiling, ...] = ()
    topology: str = ""
    nodes: int | None = None
    notes: str = ""
    peak_note: str = ""
    source: str = ""
    shared_memory: bool = False              # "nodes" are ranks on one host: the network is memory
    measured: dict[str, Any] = field(default_factory=dict)

    def network(self, label: str | None = None) -> Network:
        """The roof used for verdicts: the named network level, else the first one."""
        if label is None:
            return self.networks[0]
        for n in self.networks:
            if n.label.lower() == label.lower():
                return n
        from mpiscope.errors import UsageError
        raise UsageError(f"{self.name} has no network '{label}'; choose one of: "
                         + ", ".join(n.label for n in self.networks))


def ridge(peak_gflops: float, bw_gbps_per_direction: float) -> float:
    return peak_gflops / (2.0 * bw_gbps_per_direction)


def attainable(peak_gflops: float, bw_gbps_per_direction: float, intensity: float) -> float:
    """004 §3: min(peak, network bandwidth x intensity), bandwidth = send + receive."""
    return min(peak_gflops, 2.0 * bw_gbps_per_direction * intensity)


@dataclass(frozen=True)
class Verdict:
    kind: Literal["compute-bound", "network-bound", "ceiling", "below-all", "above-roof"]
    line: str                 # the line that explains the point
    fraction: float           # the point's rate / that line's value at its intensity
    advice: str


def classify(machine: Machine, intensity: float, gflops: float, network: Network | None = None) -> Verdict:
    """004 §3, points D, E, F: near the peak roof, near the network roof, or near an auxiliary ceiling."""
    net = network or machine.network()
    bw_roof = 2.0 * net.bw_gbps_per_direction * intensity
    roof = min(machine.peak_gflops, bw_roof)
    if gflops > roof * (1.0 + ABOVE_TOLERANCE):
        return Verdict("above-roof", "roof", gflops / roof,
                       f"the point is {gflops / roof:.2f}x the roof: a measurement error (flops, bytes or time "
                       f"wrong, or a roof that is not an upper bound); check the inputs")
    if machine.peak_gflops <= bw_roof and gflops >= NEAR * machine.peak_gflops:
        return Verdict("compute-bound", "peak", gflops / machine.peak_gflops,
                       "compute-bound (004 §3, point D): the node's peak limits it; only a faster processor "
                       "or fewer flops helps")
    if bw_roof < machine.peak_gflops and gflops >= NEAR * bw_roof:
        return Verdict("network-bound", net.label, gflops / bw_roof,
                       "network-bound (004 §3, point E): cut inter-node bytes by task placement "
                       "(mpiscope map) or by removing redundant communication")
    near = [(c.at(intensity), c) for c in machine.ceilings
            if gflops <= c.at(intensity) * (1.0 + CEILING_SLACK) and gflops >= NEAR * c.at(intensity)]
    if near:
        value, c = min(near, key=lambda vc: vc[0])
        why = c.meaning or c.label
        return Verdict("ceiling", c.label, gflops / value,
                       f"below both roofs, near the ceiling '{c.label}' (004 §3, point F): {why}")
    return Verdict("below-all", "roof", gflops / roof,
                   "below both roofs and every ceiling: neither the node nor the network explains it; "
                   "look for waiting and imbalance (mpiscope stats) and for both kinds of optimisation (004 §2, C)")


def what_if(machine: Machine, intensity: float, comm_factor: float, network: Network | None = None) -> dict[str, float]:
    """004 Fig. 12: scale the inter-node bytes and read the new roof (the flops stay)."""
    net = network or machine.network()
    new_i = intensity / comm_factor
    return {"comm_factor": comm_factor, "intensity": new_i,
            "attainable_gflops": attainable(machine.peak_gflops, net.bw_gbps_per_direction, new_i),
            "attainable_before_gflops": attainable(machine.peak_gflops, net.bw_gbps_per_direction, intensity)}
