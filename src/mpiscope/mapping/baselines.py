"""Maps to compare against in the same run (SPEC §3; mpiscope additions, not in 001).

identity (001's "x,y,z order"), random, greedy (heaviest pairs placed first,
each rank on the free node nearest its placed peers), bisection (BISEM
without annealing, computed by the caller), Scotch's static mapping onto the
same mesh/torus (Debian `scotch`: `scotch_gmap` with a meshXD/torusXD target)
and KaHIP's process mapping where the installed binding offers it.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp

from mpiscope.mapping.bisem import traffic_graph
from mpiscope.mapping.mapfile import identity_map
from mpiscope.mapping.patterns import Pattern
from mpiscope.mapping.topology import Network

IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True)
class Baseline:
    name: str
    node_of_rank: IntArray | None     # None: not available here
    note: str = ""


def random_map(network: Network, nranks: int, seed: int) -> IntArray:
    slots = np.repeat(np.arange(network.nodes, dtype=np.int64), network.ranks_per_node)
    return np.random.default_rng(seed).permutation(slots)[:nranks]


def greedy_map(network: Network, pattern: Pattern) -> IntArray:
    """Place ranks in order of bytes to already-placed ranks, each on the free slot with the least
    bytes·hops to its placed peers (ties: lowest node)."""
    n = pattern.nranks
    g = traffic_graph(pattern, n)
    free = np.full(network.nodes, network.ranks_per_node, dtype=np.int64)
    node = np.full(n, -1, dtype=np.int64)
    pull = np.zeros(n)
    all_nodes = np.arange(network.nodes)
    weight = np.asarray(g.sum(axis=1)).ravel()
    for _ in range(n):
        cand = np.where(node < 0, pull, -np.inf)
        r = int(np.argmax(cand)) if cand.max() > 0 else int(np.argmax(np.where(node < 0, weight, -1)))
        row = g.getrow(r)
        peers, w = row.indices, row.data
        placed = node[peers] >= 0
        open_nodes = all_nodes[free > 0]
        if placed.any():
            cost = (network.hops(open_nodes[:, None], node[peers[placed]][None, :]) * w[placed]).sum(axis=1)
            choice = int(open_nodes[np.argmin(cost)])
        else:
            choice = int(open_nodes[0])
        node[r] = choice
        free[choice] -= 1
        pull[peers] += w
    return node


def _write_scotch_graph(path: Path, graph: sp.csr_matrix) -> None:
    """Scotch source graph: header, then per vertex its degree and (edge weight, neighbour) pairs."""
    top = float(graph.data.max(initial=1.0))
    w = np.maximum(np.round(graph.data / top * 2**20), 1).astype(np.int64)
    lines = ["0", f"{graph.shape[0]} {graph.nnz}", "0 010"]
    for v in range(graph.shape[0]):
        a, b = graph.indptr[v], graph.indptr[v + 1]
        pairs = " ".join(f"{wt} {u}" for wt, u in zip(w[a:b].tolist(), graph.indices[a:b].tolist()))
        lines.append(f"{b - a} {pairs}".rstrip())
    path.write_text("\n".join(lines) + "\n")


def repair(network: Network, node_of_rank: IntArray) -> tuple[IntArray, int]:
    """Move ranks off over-full nodes to the nearest free slot; returns the map and how many moved."""
    node = node_of_rank.copy()
    count = np.bincount(node, minlength=network.nodes)
    moved = 0
    for r in range(node.size):
        if count[node[r]] > network.ranks_per_node:
            open_nodes = np.flatnonzero(count < network.ranks_per_node)
            dest = int(open_nodes[np.argmin(network.hops(open_nodes, node[r]))])
            count[node[r]] -= 1
            count[dest] += 1
            node[r] = dest
            moved += 1
    return node, moved


def scotch_map(network: Network, pattern: Pattern, timeout_s: float = 300) -> Baseline:
    gmap = shutil.which("scotch_gmap") or shutil.which("gmap")
    if not gmap:
        return Baseline("scotch", None, "scotch_gmap not found; install Debian's scotch package")
    if network.slots != network.nodes:
        # Scotch maps onto terminals of the target; with k ranks per node give it a k-times-longer x axis.
        target_dims = (network.dims[0] * network.ranks_per_node, *network.dims[1:])
    else:
        target_dims = network.dims
    kind = "torusXD" if network.wraps else "meshXD"
    with tempfile.TemporaryDirectory(prefix="mpiscope-scotch-") as tmp:
        d = Path(tmp)
        _write_scotch_graph(d / "src.grf", traffic_graph(pattern, pattern.nranks))
        (d / "target.tgt").write_text(f"{kind} {len(target_dims)} {' '.join(map(str, target_dims))}\n")
        try:
            # -cb: enforce load balance, so each terminal gets at most one rank where possible.
            subprocess.run([gmap, "-cb", str(d / "src.grf"), str(d / "target.tgt"), str(d / "out.map")],
                           check=True, capture_output=True, text=True, timeout=timeout_s)
            rows = np.loadtxt(d / "out.map", skiprows=1, dtype=np.int64, ndmin=2)
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired, ValueError, OSError) as e:
            return Baseline("scotch", None, f"scotch_gmap failed: {str(e).splitlines()[0]}")
    terminal = np.empty(pattern.nranks, dtype=np.int64)
    terminal[rows[:, 0]] = rows[:, 1]
    # Scotch numbers meshXD/torusXD terminals with the first dimension fastest, like mpiscope.
    node = terminal // network.ranks_per_node if network.slots != network.nodes else terminal
    if network.slots != network.nodes:
        c = np.asarray(np.unravel_index(terminal, target_dims, order="F")).T
        c[:, 0] //= network.ranks_per_node
        node = network.node_of(c)
    node, moved = repair(network, node)
    return Baseline("scotch", node, f"{moved} ranks moved off over-full nodes" if moved else "")


def kahip_map() -> Baseline:
    try:
        import kahip
    except ImportError:
        return Baseline("kahip", None, "the kahip Python package is not installed")
    if not hasattr(kahip, "process_mapping"):
        return Baseline("kahip", None, "the kahip Python binding offers kaffpa only, not process mapping")
    return Baseline("kahip", None, "KaHIP process mapping targets hierarchies, not tori")


def baselines(network: Network, pattern: Pattern, bisection: IntArray, seed: int,
              on_start: Callable[[str], None] | None = None) -> list[Baseline]:
    out: list[Baseline] = []
    steps: list[tuple[str, Callable[[], Baseline]]] = [
        ("identity", lambda: Baseline("identity", identity_map(network, pattern.nranks))),
        ("random", lambda: Baseline("random", random_map(network, pattern.nranks, seed))),
        ("greedy", lambda: Baseline("greedy", greedy_map(network, pattern))),
        ("bisection", lambda: Baseline("bisection", bisection, "BISEM without annealing")),
        ("scotch", lambda: scotch_map(network, pattern)),
        ("kahip", kahip_map),
    ]
    for name, make in steps:
        if on_start:
            on_start(name)
        out.append(make())
    return out
