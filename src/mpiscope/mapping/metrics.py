"""Quality of a rank map: hop-bytes, maxlink, the paper's eval, dilation, link loads.

001 §4.4: congestion grows with the bytes crossing one link, so RMATT's
objective is eval(map) = Σ hops(i,j) × maxlink. The sum runs over the
communicating pairs (bytes(i,j) > 0, each ordered pair once): over all pairs
of a full permutation Σ hops is a constant (SPEC §3). Link loads follow
topology.ROUTING.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from mpiscope.mapping.patterns import Pattern
from mpiscope.mapping.topology import Network

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class Metrics:
    hop_bytes: float          # Σ bytes(i,j)·hops(i,j)
    maxlink: float            # largest byte count on one directed link
    hop_sum: int              # Σ hops(i,j) over communicating pairs
    eval: float               # hop_sum × maxlink (001 §5.3)
    avg_dilation: float       # mean hops over communicating pairs (mpiscope addition, not in 001)
    weighted_dilation: float  # hop_bytes / bytes: hops per byte
    links_used: int           # links with traffic

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)

    def objective(self, kind: str) -> float:
        return {"eval": self.eval, "hopbytes": self.hop_bytes, "maxlink": self.maxlink}[kind]


def link_loads(network: Network, node_of_rank: IntArray, src: IntArray, dst: IntArray,
               nbytes: FloatArray) -> FloatArray:
    """Bytes on every directed link (numbering of topology) when each flow follows its route."""
    a, b = node_of_rank[src], node_of_rank[dst]
    n, direction = network.steps(a, b)
    ca, cb = network.coords(a), network.coords(b)
    loads = np.zeros(network.links, dtype=np.float64)
    w = np.asarray(nbytes, dtype=np.float64)
    size = np.asarray(network.dims, dtype=np.int64)
    for d in range(network.ndim):
        # Dimension order: dims before d already carry b's coordinate, dims after still a's.
        base = np.concatenate((cb[:, :d], ca[:, d:]), axis=1)
        start = network.node_of(base) - base[:, d] * network.strides[d]
        sign = np.where(direction[:, d] == 0, 1, -1)
        for j in range(int(n[:, d].max(initial=0))):
            on = n[:, d] > j
            c = (base[on, d] + sign[on] * j) % size[d]
            link = ((start[on] + c * network.strides[d]) * network.ndim + d) * 2 + direction[on, d]
            loads += np.bincount(link, weights=w[on], minlength=network.links)
    return loads


def evaluate(network: Network, pattern: Pattern, node_of_rank: IntArray) -> Metrics:
    src, dst, nbytes = pattern.pairs()
    hops = network.hops(node_of_rank[src], node_of_rank[dst])
    loads = link_loads(network, node_of_rank, src, dst, nbytes)
    hop_bytes = float((hops * nbytes).sum())
    maxlink = float(loads.max(initial=0.0))
    hop_sum = int(hops.sum())
    total = float(nbytes.sum())
    return Metrics(hop_bytes=hop_bytes, maxlink=maxlink, hop_sum=hop_sum, eval=hop_sum * maxlink,
                   avg_dilation=float(hops.mean()) if hops.size else 0.0,
                   weighted_dilation=hop_bytes / total if total else 0.0,
                   links_used=int((loads > 0).sum()))


def link_histogram(loads: FloatArray, bins: int = 40, top: float | None = None) -> tuple[IntArray, FloatArray]:
    """001 Fig. 11: number of links per load bin, over the links that carry traffic."""
    used = loads[loads > 0]
    hi = top if top is not None else float(used.max(initial=1.0))
    counts, edges = np.histogram(used, bins=bins, range=(0.0, hi))
    return counts.astype(np.int64), edges
