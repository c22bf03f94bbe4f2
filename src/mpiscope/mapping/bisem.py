"""BISEM (001 §4.3, §5.2): recursive bisection of the network and of the rank graph.

Each level cuts every area in two along the longest axis of the current areas
(decideAxis, bisectionArea) and splits its rank group into two halves of the
halves' slot counts with the least traffic between them (bisectionGrp, METIS
via pymetis). Groups already placed in areas next to one half only (the
"subgroups"; on a torus areas at opposite ends of a dimension touch) are
contracted into one fixed vertex per half (rankA, rankB in 001 Fig. 2), so the
half next to a group takes the ranks that talk to it (conditions 3 and 4).
makeInitMap places each group's ranks at random on its area's nodes.

Empty slots (more slots than ranks) are isolated vertices, so every group
fills its area exactly. METIS balances only approximately and knows no fixed
vertices: `refine` restores exact sizes and improves the cut by batched
Kernighan–Lin pair swaps that count the fixed vertices. If conditions 1–2
still cannot hold, the result is used anyway; OPTIM's window, larger than an
area, repairs it (001 §4.3).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp

from mpiscope.mapping.patterns import Pattern
from mpiscope.mapping.topology import Network

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class Area:
    lo: tuple[int, ...]
    size: tuple[int, ...]

    def nodes(self, network: Network) -> IntArray:
        grids = np.meshgrid(*[np.arange(lo, lo + s) for lo, s in zip(self.lo, self.size)], indexing="ij")
        coords = np.stack([g.ravel() for g in grids], axis=1)
        return np.sort(network.node_of(coords))

    def halves(self, axis: int) -> tuple[Area, Area]:
        cut = self.size[axis] // 2
        lo1 = list(self.lo)
        lo1[axis] += cut
        s0, s1 = list(self.size), list(self.size)
        s0[axis], s1[axis] = cut, self.size[axis] - cut
        return Area(self.lo, tuple(s0)), Area(tuple(lo1), tuple(s1))


def touches(a: Area, b: Area, network: Network) -> bool:
    """Areas share a face: adjacent in one dimension (across the wrap on a torus), overlapping in the others."""
    adjacent = 0
    for d, size in enumerate(network.dims):
        a_end, b_end = a.lo[d] + a.size[d], b.lo[d] + b.size[d]
        if a.lo[d] < b_end and b.lo[d] < a_end:
            continue
        ends = (a_end % size, b_end % size) if network.wraps else (a_end, b_end)
        if ends[0] == b.lo[d] or ends[1] == a.lo[d]:
            adjacent += 1
        else:
            return False
    return adjacent == 1


def traffic_graph(pattern: Pattern, nslots: int) -> sp.csr_matrix:
    """Symmetric bytes between ranks; rows past the ranks are empty slots."""
    src, dst, w = pattern.pairs()
    m = sp.coo_matrix((w, (src, dst)), shape=(nslots, nslots)).tocsr()
    return (m + m.T).tocsr()


def _cut(sub: sp.csr_matrix, pull0: FloatArray, pull1: FloatArray, side: npt.NDArray[np.bool_]) -> float:
    s = side.astype(np.float64)
    cross = float(s @ (sub @ (1 - s)))
    return cross + float(pull0[side].sum()) + float(pull1[~side].sum())


def refine(sub: sp.csr_matrix, pull0: FloatArray, pull1: FloatArray, side: npt.NDArray[np.bool_], n1: int,
           passes: int = 12) -> npt.NDArray[np.bool_]:
    """Exact sizes (n1 vertices on side 1), then batched pair swaps that lower the cut.

    pull0/pull1: bytes from each vertex to the fixed vertex of side 0/1.
    """
    side = side.copy()

    def gains() -> FloatArray:
        s = side.astype(np.float64)
        to1 = sub @ s + pull1            # bytes toward side 1
        to0 = sub @ (1 - s) + pull0
        return np.asarray(np.where(side, to0 - to1, to1 - to0), dtype=np.float64)   # cut saved by moving

    excess = int(side.sum()) - n1
    if excess:
        g = gains()
        movers = np.flatnonzero(side if excess > 0 else ~side)
        side[movers[np.argsort(-g[movers])[: abs(excess)]]] ^= True
    best = _cut(sub, pull0, pull1, side)
    for _ in range(passes):
        g = gains()
        a, b = np.flatnonzero(~side), np.flatnonzero(side)
        a, b = a[np.argsort(-g[a])], b[np.argsort(-g[b])]
        n = min(a.size, b.size)
        pair_gain = g[a[:n]] + g[b[:n]]
        count = int((pair_gain > 0).sum())
        improved = False
        while count > 0:
            trial = side.copy()
            trial[a[:count]] = True
            trial[b[:count]] = False
            c = _cut(sub, pull0, pull1, trial)
            if c < best:
                side, best, improved = trial, c, True
                break
            count //= 2
        if not improved:
            break
    return side


def bisect_group(graph: sp.csr_matrix, verts: IntArray, n0: int, n1: int, fixed0: IntArray, fixed1: IntArray,
                 seed: int) -> npt.NDArray[np.bool_]:
    """bisectionGrp for one group: True = side 1. fixed0/1: ranks of the placed groups next to half 0/1."""
    import pymetis

    sub = graph[verts][:, verts].tocsr()
    rows = graph[verts]
    pull0 = np.asarray(rows[:, fixed0].sum(axis=1)).ravel() if fixed0.size else np.zeros(verts.size)
    pull1 = np.asarray(rows[:, fixed1].sum(axis=1)).ravel() if fixed1.size else np.zeros(verts.size)
    n = verts.size
    if sub.nnz == 0 and not (pull0.any() or pull1.any()):
        side = np.zeros(n, dtype=bool)
        side[np.random.default_rng(seed).permutation(n)[:n1]] = True
        return side
    # The graph METIS sees: the group plus one vertex per side for the fixed groups, integer weights.
    full = sp.bmat([[sub, sp.csr_matrix(pull0[:, None]), sp.csr_matrix(pull1[:, None])],
                    [sp.csr_matrix(pull0[None, :]), None, None],
                    [sp.csr_matrix(pull1[None, :]), None, None]], format="csr")
    full.eliminate_zeros()
    top = float(full.data.max(initial=1.0))
    eweights = np.maximum(np.round(full.data / top * 2**24), 1).astype(np.int64)
    vweights = np.concatenate((np.ones(n, dtype=np.int64), [0, 0]))
    opts = pymetis.Options()
    opts.seed = seed
    opts.ufactor = 1
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        part = np.asarray(pymetis.part_graph(2, xadj=full.indptr, adjncy=full.indices, eweights=eweights,
                                             vweights=vweights, tpwgts=[n0 / n, n1 / n], options=opts).vertex_part)
    side = part[:n].astype(bool)
    a0, a1 = part[n], part[n + 1]
    # Orient so the fixed vertex of half 0 is on side 0; if METIS put both fixed vertices on one side,
    # the heavier one decides and refine() pulls the ranks of the other across.
    flip = a0 == 1 if (a0 != a1 or pull0.sum() >= pull1.sum()) else a1 == 0
    if flip:
        side = ~side
    return refine(sub, pull0, pull1, side, n1)


def longest_axis(areas: list[Area]) -> int:
    """decideAxis (001 §5.2): the axis along which the current areas are largest (first such on ties)."""
    return int(np.argmax(np.max([a.size for a in areas], axis=0)))


def bisem_areas(network: Network, pattern: Pattern, levels: int, seed: int = 0) -> tuple[list[Area], list[IntArray]]:
    """The areas after `levels` bisections (fewer if areas reach one node) and the slot group of each."""
    nslots = network.slots
    graph = traffic_graph(pattern, nslots)
    areas = [Area(tuple([0] * network.ndim), network.dims)]
    groups = [np.arange(nslots, dtype=np.int64)]
    for level in range(levels):
        axis = longest_axis(areas)
        if max(a.size[axis] for a in areas) < 2:
            break
        new_areas: list[Area] = []
        new_groups: list[IntArray] = []
        for i, (area, grp) in enumerate(zip(areas, groups)):
            if area.size[axis] < 2:
                new_areas.append(area)
                new_groups.append(grp)
                continue
            h0, h1 = area.halves(axis)
            # Placed groups: this level's halves already split, and the areas still to be split.
            placed = list(zip(new_areas, new_groups)) + list(zip(areas[i + 1:], groups[i + 1:]))
            fixed: list[list[IntArray]] = [[], []]
            for other, members in placed:
                t0, t1 = touches(h0, other, network), touches(h1, other, network)
                if t0 != t1:
                    fixed[int(t1)].append(members)
            f0, f1 = (np.concatenate(f) if f else np.zeros(0, dtype=np.int64) for f in fixed)
            n0 = int(np.prod(h0.size)) * network.ranks_per_node
            side = bisect_group(graph, grp, n0, grp.size - n0, f0, f1, seed + 7919 * level + i)
            new_areas += [h0, h1]
            new_groups += [grp[~side], grp[side]]
        areas, groups = new_areas, new_groups
    return areas, groups


def make_init_map(network: Network, nranks: int, areas: list[Area], groups: list[IntArray],
                  seed: int = 0) -> IntArray:
    """makeInitMap (001 §5.2): each group's ranks at random on the slots of its area."""
    rng = np.random.default_rng(seed)
    slot_node = np.empty(network.slots, dtype=np.int64)
    for area, grp in zip(areas, groups):
        nodes = np.repeat(area.nodes(network), network.ranks_per_node)
        slot_node[grp] = nodes[rng.permutation(nodes.size)]
    return slot_node[:nranks]


def bisem(network: Network, pattern: Pattern, levels: int, seed: int = 0) -> tuple[IntArray, list[Area]]:
    """The BISEM initial map and its areas."""
    areas, groups = bisem_areas(network, pattern, levels, seed)
    return make_init_map(network, pattern.nranks, areas, groups, seed), areas


def default_levels(network: Network) -> int:
    """001 §7.3: 4096 ranks in groups of m = 8, i.e. log2(nodes / 8) bisections (9 for 16x16x16)."""
    return max(0, int(np.floor(np.log2(max(network.nodes, 1) / 8))))
