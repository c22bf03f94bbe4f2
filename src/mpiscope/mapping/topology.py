"""Mesh and torus networks: node numbering, coordinates, hop counts, routes.

A node index is x + X·(y + Y·z) (x fastest), for any number of dimensions.
Routing is dimension-order minimal routing: x first, then y, then z...; on a
torus ring the shorter way round, ties (a distance of exactly half the ring)
broken toward +. 001 does not state RMATT's routing; this is mpiscope's
default and every report says so (ROUTING).

Directed links are numbered (node · ndim + dim) · 2 + dir, dir 0 = toward +,
1 = toward −: the link leaving `node` along `dim`. On a mesh the links off the
edge exist in the numbering but never carry traffic.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import numpy.typing as npt

from mpiscope.errors import UsageError

IntArray = npt.NDArray[np.int64]

ROUTING = ("dimension-order minimal routing (x, then y, then z...), shortest way round each torus ring, "
           "ties toward +")

KINDS = ("torus", "mesh")


@dataclass(frozen=True)
class Network:
    kind: str                      # "torus" | "mesh"
    dims: tuple[int, ...]
    ranks_per_node: int = 1

    @property
    def nodes(self) -> int:
        return int(np.prod(self.dims))

    @property
    def slots(self) -> int:
        return self.nodes * self.ranks_per_node

    @property
    def ndim(self) -> int:
        return len(self.dims)

    @property
    def wraps(self) -> bool:
        return self.kind == "torus"

    @property
    def links(self) -> int:
        """Size of the directed-link numbering (see the module docstring)."""
        return self.nodes * self.ndim * 2

    @cached_property
    def strides(self) -> IntArray:
        return np.concatenate(([1], np.cumprod(self.dims[:-1]))).astype(np.int64)

    @property
    def spec(self) -> str:
        return f"{self.kind}:{'x'.join(map(str, self.dims))}"

    def coords(self, nodes: IntArray | int) -> IntArray:
        """Coordinates, shape (..., ndim), of node indices."""
        n = np.asarray(nodes, dtype=np.int64)
        return (n[..., None] // self.strides) % np.asarray(self.dims, dtype=np.int64)

    def node_of(self, coords: npt.ArrayLike) -> IntArray:
        c = np.asarray(coords, dtype=np.int64)
        return np.asarray((c * self.strides).sum(axis=-1), dtype=np.int64)

    def steps(self, a_nodes: IntArray | int, b_nodes: IntArray | int) -> tuple[IntArray, IntArray]:
        """Per dimension: hop count and direction (0 = +, 1 = −) of the route a → b, shape (..., ndim)."""
        ca, cb = self.coords(a_nodes), self.coords(b_nodes)
        size = np.asarray(self.dims, dtype=np.int64)
        if self.wraps:
            fwd = (cb - ca) % size
            back = (size - fwd) % size
            plus = fwd <= back                 # the tie (fwd == back) goes toward +
            return np.where(plus, fwd, back), np.where(plus, 0, 1).astype(np.int64)
        d = cb - ca
        return np.abs(d), (d < 0).astype(np.int64)

    def hops(self, a_nodes: IntArray | int, b_nodes: IntArray | int) -> IntArray:
        n, _ = self.steps(a_nodes, b_nodes)
        return np.asarray(n.sum(axis=-1), dtype=np.int64)

    def route_links(self, a: int, b: int) -> list[int]:
        """The directed links of one route, in order (for tests and small cases; metrics vectorise)."""
        n, direction = self.steps(a, b)
        c = self.coords(a).copy()
        out: list[int] = []
        for d in range(self.ndim):
            for _ in range(int(n[d])):
                node = int(self.node_of(c))
                out.append((node * self.ndim + d) * 2 + int(direction[d]))
                c[d] = (c[d] + (1 if direction[d] == 0 else -1)) % self.dims[d]
        return out


_SPEC = re.compile(r"^(torus|mesh):(\d+(?:x\d+)*)$")


def parse_network(spec: str, ranks_per_node: int = 1) -> Network:
    """"torus:16x16x16", "mesh:8x8", "torus:8" ... -> Network."""
    m = _SPEC.match(spec.strip().lower())
    if not m:
        raise UsageError(f"network {spec!r} is not understood; write KIND:XxYxZ with KIND torus or mesh, "
                         f"e.g. --network torus:16x16x16")
    dims = tuple(int(x) for x in m.group(2).split("x"))
    if min(dims) < 1:
        raise UsageError(f"network {spec!r} has an empty dimension; every size must be at least 1")
    if ranks_per_node < 1:
        raise UsageError(f"--ranks-per-node {ranks_per_node} must be at least 1")
    return Network(m.group(1), dims, ranks_per_node)
