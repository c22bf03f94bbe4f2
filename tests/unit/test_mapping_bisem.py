"""BISEM: 001 Figs. 1-2 on a 4x4 mesh, and area geometry."""

from __future__ import annotations

import numpy as np

from mpiscope.mapping.bisem import Area, bisem, bisem_areas, default_levels, longest_axis, touches
from mpiscope.mapping.patterns import Pattern, stencil
from mpiscope.mapping.topology import parse_network


def scrambled_stencil(seed: int) -> Pattern:
    """A 4x4 halo exchange with the ranks renumbered at random: identity is no longer good."""
    p = stencil((4, 4), 100)
    perm = np.random.default_rng(seed).permutation(16)
    return Pattern("scrambled", 16, perm[p.src], perm[p.dst], p.bytes, p.step)


def volume(p: Pattern, a: np.ndarray, b: np.ndarray) -> float:
    s, d, w = p.pairs()
    return float(w[(np.isin(s, a) & np.isin(d, b)) | (np.isin(s, b) & np.isin(d, a))].sum())


def test_fig1_conditions_3_and_4_hold() -> None:
    net = parse_network("mesh:4x4")
    for seed in range(5):
        pat = scrambled_stencil(seed)
        areas, groups = bisem_areas(net, pat, 2, seed=seed)
        # x first (area'0 x<2, area'1 x>=2), then y on each half: areas'' 0..3 as in 001 Fig. 1.
        assert [(a.lo, a.size) for a in areas] == [((0, 0), (2, 2)), ((0, 2), (2, 2)), ((2, 0), (2, 2)),
                                                   ((2, 2), (2, 2))]
        g0, g1, g2, g3 = groups
        assert all(g.size == 4 for g in groups)                       # condition 1
        assert volume(pat, g2, g0) > volume(pat, g2, g1), seed         # condition 3
        assert volume(pat, g3, g1) > volume(pat, g3, g0), seed         # condition 4


def test_bisem_recovers_a_scrambled_stencil_cut() -> None:
    net = parse_network("mesh:4x4")
    pat = scrambled_stencil(3)
    _, groups = bisem_areas(net, pat, 1, seed=0)
    # The best halving of a 4x4 grid cuts 4 links, 2 directions each.
    assert volume(pat, groups[0], groups[1]) == 4 * 2 * 100


def test_areas_touch_across_the_torus_wrap() -> None:
    torus, mesh = parse_network("torus:8x8"), parse_network("mesh:8x8")
    left, right = Area((0, 0), (2, 8)), Area((6, 0), (2, 8))
    assert touches(left, right, torus) and not touches(left, right, mesh)
    assert not touches(Area((0, 0), (2, 2)), Area((2, 2), (2, 2)), torus)   # corners only
    assert longest_axis([Area((0, 0), (4, 8))]) == 1


def test_bisem_map_is_a_placement_and_default_levels_match_the_paper() -> None:
    net = parse_network("torus:16x16x16")
    assert default_levels(net) == 9                                   # 001 §7.3: groups of 8
    small = parse_network("torus:4x4x2", ranks_per_node=2)
    pat = stencil((4, 4, 2), 10)
    node, areas = bisem(small, pat, 3, seed=1)
    assert np.bincount(node, minlength=small.nodes).max() <= 2 and node.size == 32
    assert len(areas) == 8
