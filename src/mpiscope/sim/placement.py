"""The simulated network and the rank placement, from command-line specs.

Torus and mesh specs, maps and their checks are the mapping module's
(mpiscope.mapping); only the fat-tree, which mapping does not model, is
parsed here.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from mpiscope.errors import UsageError
from mpiscope.mapping.mapfile import read_map
from mpiscope.mapping.topology import Network, parse_network
from mpiscope.sim.platform import Platform, parse_fat_tree, parse_quantity

IntArray = npt.NDArray[np.int64]


def make_platform(spec: str, ranks_per_node: int = 1, bandwidth: str = "5GBps", latency: str = "120ns",
                  node_speed: str = "1Gf") -> Platform:
    """--network torus:16x16x16 | mesh:8x8 | fat-tree:2;4,4;1,2;1,2, with the link and host parameters."""
    bw, lat, speed = (parse_quantity(bandwidth, "bandwidth"), parse_quantity(latency, "latency"),
                      parse_quantity(node_speed, "node speed"))
    if spec.strip().lower().startswith("fat-tree"):
        if ranks_per_node < 1:
            raise UsageError(f"--ranks-per-node {ranks_per_node} must be at least 1")
        return Platform("fat-tree", (), ranks_per_node, bw, lat, speed, parse_fat_tree(spec.strip()))
    try:
        net = parse_network(spec, ranks_per_node)
    except UsageError as e:
        raise UsageError(f"{e} (or a fat-tree: fat-tree:2;4,4;1,2;1,2)") from e
    return Platform(net.kind, net.dims, ranks_per_node, bw, lat, speed)


def network_of(platform: Platform) -> Network:
    """The mapping module's view of a torus or mesh platform."""
    if platform.kind == "fat-tree":
        raise UsageError("map files place ranks on torus and mesh coordinates; for a fat-tree use "
                         "--map identity or --map random")
    return Network(platform.kind, platform.dims, platform.ranks_per_node)


def resolve_map(platform: Platform, spec: str, nranks: int) -> tuple[IntArray, str]:
    """--map identity | random[:SEED] | FILE (rank,node,coords CSV from mpiscope map) -> node of each rank."""
    if nranks > platform.slots:
        raise UsageError(f"{nranks} ranks do not fit on {platform.describe()} with {platform.ranks_per_node} "
                         f"rank(s) per node ({platform.slots} slots); use a larger network or "
                         f"--ranks-per-node")
    if spec == "identity":
        return np.arange(nranks, dtype=np.int64) // platform.ranks_per_node, "identity"
    if spec == "random" or spec.startswith("random:"):
        try:
            seed = int(spec.split(":", 1)[1]) if ":" in spec else 1
        except ValueError:
            raise UsageError(f"--map {spec!r}: the seed must be a whole number, e.g. random:7") from None
        # A random choice of slots, each node holding at most ranks_per_node ranks.
        slots = np.random.default_rng(seed).permutation(platform.slots)[:nranks]
        return (slots // platform.ranks_per_node).astype(np.int64), f"random:{seed}"
    net = network_of(platform)
    return read_map(spec, net, nranks), spec

