"""SimGrid platforms for the simulated networks: torus, mesh and fat-tree.

Each network is one `<cluster>` element (SimGrid's examples/platforms/
cluster_torus.xml and cluster_fat_tree.xml), hosts named "n<index>", links
full duplex (SPLITDUPLEX: one link per direction, as on a torus router).

SimGrid's cluster element has no mesh. A mesh X×Y×Z is therefore built as
the box [0,X)×[0,Y)×[0,Z) of a torus (2X-1)×(2Y-1)×(2Z-1) whose other hosts
carry nothing: between two hosts of the box the way round through the empty
part is always longer (2X-1-d > d for d < X), so every route stays inside the
box and no message ever uses a wrap-around link. SimGrid's own torus routing
then gives exactly the dimension-order routes of a mesh.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from decimal import Decimal
from functools import reduce
from operator import mul

import numpy as np

from mpiscope.errors import UsageError

CLUSTER_ID = "c"
# Ranks on one node talk through the node's loopback link, at SimGrid's default loopback bandwidth
# (network/loopback-bw) and no latency; CM02 has no route at all between a host and itself without it.
LOOPBACK_BPS = 10e9
AXES = "xyzw"

# SimGrid's unit suffixes (https://simgrid.org/doc/latest/XML_reference.html), value in base units.
_BANDWIDTH = {"Bps": 1.0, "kBps": 1e3, "KBps": 1e3, "MBps": 1e6, "GBps": 1e9, "TBps": 1e12,
              "KiBps": 2.0**10, "MiBps": 2.0**20, "GiBps": 2.0**30, "TiBps": 2.0**40,
              "bps": 1 / 8, "kbps": 1e3 / 8, "Kbps": 1e3 / 8, "Mbps": 1e6 / 8, "Gbps": 1e9 / 8,
              "Tbps": 1e12 / 8}
_TIME = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9, "ps": 1e-12}
_SPEED = {"f": 1.0, "kf": 1e3, "Kf": 1e3, "Mf": 1e6, "Gf": 1e9, "Tf": 1e12, "Pf": 1e15}
_UNITS = {"bandwidth": _BANDWIDTH, "latency": _TIME, "precision": _TIME, "node speed": _SPEED}


def parse_quantity(text: str, what: str) -> float:
    """'5GBps' -> 5e9 (bandwidth), '120ns' -> 1.2e-7 (latency), '1Gf' -> 1e9 (node speed)."""
    units = _UNITS[what]
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*([A-Za-zµ]*)\s*", text)
    unit = m.group(2) if m else ""
    if not m or (unit and unit not in units):
        raise UsageError(f"{what} {text!r} is not understood; give a number with one of the units "
                         f"{', '.join(units)} (e.g. {_example(what)})")
    # Decimal keeps '120ns' at exactly 1.2e-07 (120 * 1e-9 in floats is 1.2000000000000002e-07).
    value = float(Decimal(m.group(1)) * Decimal(repr(units[unit] if unit else 1.0)))
    if not math.isfinite(value) or (value == 0 and what != "latency"):
        raise UsageError(f"{what} {text!r} must be positive; give e.g. {_example(what)}")
    return value


def _example(what: str) -> str:
    return {"bandwidth": "5GBps", "latency": "120ns", "precision": "1ns", "node speed": "1Gf"}[what]


@dataclass(frozen=True)
class Platform:
    """A simulated network with its link and host parameters.

    `dims` is the node grid of a torus or mesh (x fastest, as the mapping
    metrics number nodes); `fat_tree` holds SimGrid's fat-tree parameters
    (levels; down-links; up-links; link counts) and `dims` is then empty.
    """

    kind: str                      # "torus" | "mesh" | "fat-tree"
    dims: tuple[int, ...]
    ranks_per_node: int
    bandwidth_Bps: float
    latency_s: float
    speed_flops: float
    fat_tree: tuple[tuple[int, ...], ...] = ()

    @property
    def nodes(self) -> int:
        if self.kind == "fat-tree":
            return reduce(mul, self.fat_tree[1], 1)
        return reduce(mul, self.dims, 1)

    @property
    def slots(self) -> int:
        return self.nodes * self.ranks_per_node

    @property
    def grid(self) -> tuple[int, ...]:
        """Dimensions of SimGrid's torus: the mesh's embedding torus for a mesh."""
        return tuple(2 * d - 1 for d in self.dims) if self.kind == "mesh" else self.dims

    @property
    def cluster_dims(self) -> tuple[int, ...]:
        """The grid without its size-1 dimensions, which SimGrid rejects (it would declare the
        self-link of a node twice); dropping them keeps every host index."""
        return tuple(d for d in self.grid if d > 1) or (1,)

    @property
    def hosts(self) -> int:
        return reduce(mul, self.grid, 1) if self.kind != "fat-tree" else self.nodes

    def host_of_node(self, node: np.ndarray) -> np.ndarray:
        """Host index in the cluster of each node index (the identity except on a mesh)."""
        node = np.asarray(node, dtype=np.int64)
        if self.kind != "mesh":
            return node
        host = np.zeros_like(node)
        rest, stride = node, 1
        for d, cd in zip(self.dims, self.grid):
            host += (rest % d) * stride
            rest, stride = rest // d, stride * cd
        return host

    def host_names(self, node: np.ndarray) -> list[str]:
        return [f"n{h}" for h in self.host_of_node(node).tolist()]

    def describe(self) -> str:
        if self.kind == "fat-tree":
            shape = ";".join(",".join(map(str, part)) for part in self.fat_tree[1:])
            return f"fat-tree:{self.fat_tree[0][0]};{shape}"
        return f"{self.kind}:{'x'.join(map(str, self.dims))}"

    def xml(self) -> str:
        if self.kind == "fat-tree":
            topo, params = "FAT_TREE", ";".join(",".join(map(str, p)) for p in self.fat_tree)
        else:
            topo, params = "TORUS", ",".join(map(str, self.cluster_dims))
        return (
            "<?xml version='1.0'?>\n"
            '<!DOCTYPE platform SYSTEM "https://simgrid.org/simgrid.dtd">\n'
            f"<!-- mpiscope: {self.describe()}, {self.ranks_per_node} rank(s) per node -->\n"
            '<platform version="4.1">\n'
            '  <zone id="world" routing="Full">\n'
            f'    <cluster id="{CLUSTER_ID}" topology="{topo}" topo_parameters="{params}"\n'
            f'             prefix="n" radical="0-{self.hosts - 1}" suffix=""\n'
            # a core per rank a node holds: its ranks compute side by side (with one core, 2 ranks a
            # node ran their recorded computation one after the other: CoMD 4.5 s -> 8.2 s)
            f'             speed="{self.speed_flops!r}f" core="{self.ranks_per_node}"\n'
            f'             bw="{self.bandwidth_Bps!r}Bps"\n'
            f'             lat="{self.latency_s!r}s" sharing_policy="SPLITDUPLEX"\n'
            f'             loopback_bw="{LOOPBACK_BPS!r}Bps" loopback_lat="0s"/>\n'
            "  </zone>\n"
            "</platform>\n")

    def node_coords(self, host: int) -> tuple[int, ...]:
        """Coordinates of a host in SimGrid's grid (on a mesh, inside the box they are the node's)."""
        coords, rest = [], host
        for cd in self.grid:
            coords.append(rest % cd)
            rest //= cd
        return tuple(coords)

    def link_place(self, name: str) -> tuple[int, int, int] | None:
        """'c_link_from_5_to_6_UP' -> (node the link leaves, dimension, 0 for + / 1 for -), the mapping
        metrics' link numbering; None for links outside a torus or mesh (loopback, fat-tree)."""
        m = re.fullmatch(rf"{CLUSTER_ID}_link_from_(\d+)_to_(\d+)_(UP|DOWN)", name)
        if self.kind == "fat-tree" or not m:
            return None
        a, b = self.node_coords(int(m.group(1))), self.node_coords(int(m.group(2)))
        dim = next(i for i, (p, q) in enumerate(zip(a, b)) if p != q)
        # TorusZone: _UP carries a -> b (b is a's + neighbour), _DOWN carries b -> a.
        start, way = (a, 0) if m.group(3) == "UP" else (b, 1)
        node, stride = 0, 1
        for c, d in zip(start, self.dims):
            node, stride = node + c * stride, stride * d
        return node, dim, way

    def link_label(self, name: str) -> str:
        """'c_link_from_17_to_18_UP' -> '(1,1,0) x+': the node a link leaves and its direction."""
        place = self.link_place(name)
        if place is None:
            return name
        node, dim, way = place
        coords, rest = [], node
        for d in self.dims:
            coords.append(rest % d)
            rest //= d
        axis = AXES[dim] if len(self.dims) <= len(AXES) else f"d{dim}"
        return f"({','.join(map(str, coords))}) {axis}{'+-'[way]}"

    def routing(self) -> str:
        """Where SimGrid's routes differ from the mapping metrics' (dimension order, ties toward +)."""
        if self.kind == "fat-tree":
            return ("SimGrid fat-tree routing (up to the nearest common ancestor, then down); the mapping "
                    "metrics do not model fat-trees")
        if self.kind == "mesh":
            return ("dimension order (x, then y, then z), minimal, no wrap-around links: the same routes as "
                    "the mapping metrics")
        return ("SimGrid TorusZone: dimension order (x, then y, then z), shortest way round each ring, as "
                "the mapping metrics; a tie (distance exactly half an even ring) goes + like the metrics, "
                "except from ring position n/2 to position 0, which SimGrid routes -")

    def tie_messages(self, src_node: np.ndarray, dst_node: np.ndarray) -> int:
        """Messages whose SimGrid route differs from the metrics' route (torus ties from n/2 to 0)."""
        if self.kind != "torus":
            return 0
        differs = np.zeros(len(src_node), dtype=bool)
        src, dst = np.asarray(src_node, dtype=np.int64), np.asarray(dst_node, dtype=np.int64)
        for d in self.dims:
            if d % 2 == 0:
                differs |= (src % d == d // 2) & (dst % d == 0)
            src, dst = src // d, dst // d
        return int(differs.sum())


def parse_fat_tree(spec: str) -> tuple[tuple[int, ...], ...]:
    """'fat-tree:2;4,4;1,2;1,2' (SimGrid's levels;down;up;count, ':' also separates) -> parameters."""
    body = spec.split(":", 1)[1] if ":" in spec else ""
    parts = [p for p in re.split(r"[;:]", body) if p]
    try:
        levels = int(parts[0])
        params = tuple(tuple(int(v) for v in p.split(",")) for p in parts[1:])
    except (ValueError, IndexError):
        levels, params = 0, ()
    if levels < 1 or len(params) != 3 or any(len(p) != levels or min(p) < 1 for p in params):
        raise UsageError(f"fat-tree {spec!r} is not understood; give SimGrid's levels;down-links;up-links;"
                         f"link-counts, e.g. 'fat-tree:2;4,4;1,2;1,2' (16 nodes)")
    return ((levels,), *params)
