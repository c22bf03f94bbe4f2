"""Rank maps: an int64 array giving the node of each rank, and its CSV form.

The identity map is RMATT's "x,y,z order" (001 §7.3, Fig. 7): rank r on node
r // ranks_per_node, nodes numbered x fastest.
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import numpy.typing as npt

from mpiscope.errors import UsageError
from mpiscope.mapping.topology import Network
from mpiscope.output import write_atomic

IntArray = npt.NDArray[np.int64]


def identity_map(network: Network, nranks: int) -> IntArray:
    return np.arange(nranks, dtype=np.int64) // network.ranks_per_node


def check_map(network: Network, node_of_rank: IntArray, nranks: int, origin: str) -> IntArray:
    """The map itself if it places nranks ranks within the network's capacity, else a UsageError."""
    m = np.asarray(node_of_rank, dtype=np.int64)
    if m.shape != (nranks,):
        raise UsageError(f"{origin} places {m.size} ranks but the pattern has {nranks}; "
                         f"give one line per rank 0..{nranks - 1}")
    if m.size and (m.min() < 0 or m.max() >= network.nodes):
        bad = int(m[(m < 0) | (m >= network.nodes)][0])
        raise UsageError(f"{origin} uses node {bad}, outside the {network.nodes} nodes of {network.spec}; "
                         f"use nodes 0..{network.nodes - 1}")
    counts = np.bincount(m, minlength=network.nodes)
    if counts.max(initial=0) > network.ranks_per_node:
        node = int(counts.argmax())
        raise UsageError(f"{origin} puts {counts[node]} ranks on node {node}, more than --ranks-per-node "
                         f"{network.ranks_per_node}; give each node at most that many ranks")
    return m


def coord_text(network: Network, nodes: IntArray) -> list[str]:
    return [":".join(map(str, c)) for c in network.coords(nodes).tolist()]


def write_map_csv(path: str | Path, network: Network, node_of_rank: IntArray) -> None:
    """`rank,node,coords` with coords as x:y:z, written atomically."""
    buf = io.StringIO()
    buf.write("rank,node,coords\n")
    for r, (n, c) in enumerate(zip(node_of_rank.tolist(), coord_text(network, node_of_rank))):
        buf.write(f"{r},{n},{c}\n")
    write_atomic(Path(path), buf.getvalue().encode())


def read_map(path: str | Path, network: Network, nranks: int) -> IntArray:
    """Read a `rank,node,coords` CSV (coords alone are enough when the node column is absent)."""
    path = Path(path)
    try:
        lines = path.read_text().splitlines()
    except OSError as e:
        raise UsageError(f"cannot read map {path} ({e.strerror}); give a rank,node,coords CSV") from e
    header = [h.strip() for h in (lines[0].split(",") if lines else [])]
    if "rank" not in header or not ({"node", "coords"} & set(header)):
        raise UsageError(f"map {path} has no 'rank,node,coords' header line; write one as mpiscope map --out does")
    node = np.full(nranks, -1, dtype=np.int64)
    seen = np.zeros(nranks, dtype=bool)
    for lineno, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        f = dict(zip(header, (x.strip() for x in line.split(","))))
        try:
            r = int(f["rank"])
            if "node" in f and f["node"] != "":
                n = int(f["node"])
            else:
                c = [int(x) for x in f["coords"].split(":")]
                if len(c) != network.ndim or any(not 0 <= v < s for v, s in zip(c, network.dims)):
                    raise ValueError(f"coords {f['coords']} outside {network.spec}")
                n = int(network.node_of(c))
        except (KeyError, ValueError) as e:
            raise UsageError(f"map {path} line {lineno} is malformed ({e}); write rank,node,x:y:z") from e
        if not 0 <= r < nranks:
            raise UsageError(f"map {path} line {lineno} names rank {r}, but the pattern has ranks 0..{nranks - 1}")
        if seen[r]:
            raise UsageError(f"map {path} places rank {r} twice (line {lineno}); give each rank one line")
        seen[r] = True
        node[r] = n
    if not seen.all():
        raise UsageError(f"map {path} places {int(seen.sum())} ranks but the pattern has {nranks}; "
                         f"rank {int(np.argmin(seen))} is missing")
    return check_map(network, node, nranks, f"map {path}")
