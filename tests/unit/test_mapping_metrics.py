"""Networks, patterns, map files and metrics on small hand-checked cases."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mpiscope.errors import UsageError
from mpiscope.mapping.mapfile import identity_map, read_map, write_map_csv
from mpiscope.mapping.metrics import evaluate, link_loads
from mpiscope.mapping.patterns import load_matrix, load_pattern, parse_pattern
from mpiscope.mapping.topology import Network, parse_network

B = 2048


def link(net: Network, node: int, dim: int, minus: int) -> int:
    return (node * net.ndim + dim) * 2 + minus


def test_node_numbering_is_x_fastest() -> None:
    net = parse_network("torus:4x3x2")
    assert net.nodes == 24 and net.slots == 24
    assert net.coords(1).tolist() == [1, 0, 0]
    assert net.coords(4).tolist() == [0, 1, 0]
    assert net.coords(12).tolist() == [0, 0, 1]
    assert net.node_of([3, 2, 1]).tolist() == 3 + 4 * (2 + 3 * 1)
    assert net.coords(np.arange(24)).shape == (24, 3)


def test_hops_shortest_way_round_ties_toward_plus() -> None:
    t = parse_network("torus:4")
    assert t.hops(0, 3).tolist() == 1            # wrap
    n, d = t.steps(0, 2)
    assert (n.tolist(), d.tolist()) == ([2], [0])  # tie: toward +
    n, d = t.steps(2, 0)
    assert (n.tolist(), d.tolist()) == ([2], [0])
    m = parse_network("mesh:4")
    assert m.hops(0, 3).tolist() == 3            # no wrap on a mesh


def test_ring_on_2x2_torus_hand_checked() -> None:
    net = parse_network("torus:2x2")
    pat = parse_pattern(f"ring:4:{B}")
    m = evaluate(net, pat, identity_map(net, 4))
    # 0→1: 1 hop; 1→2: (1,0)→(0,1) 2 hops; 2→3: 1 hop; 3→0: (1,1)→(0,0) 2 hops.
    assert (m.hop_sum, m.hop_bytes, m.maxlink, m.eval) == (6, 6 * B, B, 6 * B)
    assert m.avg_dilation == 1.5 and m.links_used == 6
    loads = link_loads(net, identity_map(net, 4), *pat.pairs())
    expect = {link(net, 0, 0, 0), link(net, 1, 0, 0), link(net, 0, 1, 0), link(net, 2, 0, 0),
              link(net, 3, 0, 0), link(net, 2, 1, 0)}
    assert set(np.nonzero(loads)[0].tolist()) == expect
    around = np.array([0, 1, 3, 2])              # ring order round the square: every message 1 hop
    m2 = evaluate(net, pat, around)
    assert (m2.hop_sum, m2.hop_bytes, m2.maxlink, m2.eval) == (4, 4 * B, B, 4 * B)


def test_ring_on_mesh_has_no_wrap_links() -> None:
    net = parse_network("mesh:4")
    m = evaluate(net, parse_pattern("ring:4:10"), identity_map(net, 4))
    assert (m.hop_sum, m.hop_bytes, m.maxlink) == (6, 60, 10)
    loads = link_loads(net, identity_map(net, 4), *parse_pattern("ring:4:10").pairs())
    # 3→0 walks back over the − links of nodes 3, 2, 1; no link leaves the mesh.
    assert sorted(np.nonzero(loads)[0].tolist()) == sorted(
        [link(net, 0, 0, 0), link(net, 1, 0, 0), link(net, 2, 0, 0), link(net, 3, 0, 1), link(net, 2, 0, 1),
         link(net, 1, 0, 1)])
    net2 = parse_network("mesh:2x2")
    m2 = evaluate(net2, parse_pattern("ring:4:10"), identity_map(net2, 4))
    assert (m2.hop_sum, m2.maxlink) == (6, 10)


def test_ranks_per_node_shares_nodes() -> None:
    net = parse_network("torus:2", ranks_per_node=2)
    assert net.slots == 4
    m = evaluate(net, parse_pattern("ring:4:1"), identity_map(net, 4))
    assert m.hop_sum == 2                        # 0→1 and 2→3 stay on their node


@settings(max_examples=40, deadline=None)
@given(kind=st.sampled_from(["torus", "mesh"]), dims=st.lists(st.integers(1, 5), min_size=1, max_size=3),
       seed=st.integers(0, 2**31))
def test_link_loads_match_brute_force(kind: str, dims: list[int], seed: int) -> None:
    net = Network(kind, tuple(dims))
    rng = np.random.default_rng(seed)
    nflows = 30
    src, dst = rng.integers(0, net.nodes, nflows), rng.integers(0, net.nodes, nflows)
    w = rng.integers(1, 100, nflows).astype(np.float64)
    brute = np.zeros(net.links)
    for s, d, b in zip(src, dst, w):
        route = net.route_links(int(s), int(d))
        assert len(route) == net.hops(int(s), int(d))
        for lk in route:
            brute[lk] += b
    ident = np.arange(net.nodes, dtype=np.int64)
    assert np.array_equal(link_loads(net, ident, src, dst, w), brute)


def test_generators() -> None:
    b = parse_pattern("bruck:4096")
    assert b.nranks == 4096 and b.src.size == 12 * 4096
    assert sorted(set(b.bytes.tolist())) == [2048 * 2**k for k in range(12)]
    k3 = b.step == 3
    assert np.array_equal(b.dst[k3], (b.src[k3] - 8) % 4096)
    assert set(parse_pattern("bruck:16:2048:1").bytes.tolist()) == {4096 * 2**k for k in range(4)}
    assert parse_pattern("stencil2d:4x4").src.size == 2 * (3 * 4) * 2
    assert parse_pattern("stencil3d:4x4x4:periodic").src.size == 64 * 6
    assert parse_pattern("alltoall:5").src.size == 20
    rd = parse_pattern("recursive-doubling:8")
    assert np.array_equal(rd.dst[rd.step == 2], rd.src[rd.step == 2] ^ 4)
    bc = parse_pattern("binomial-bcast:8")
    assert sorted(zip(bc.src.tolist(), bc.dst.tolist())) == [(0, 1), (0, 2), (0, 4), (1, 3), (1, 5), (2, 6),
                                                             (3, 7)]
    r = parse_pattern("random:64:4:7")
    assert r.src.size == 256 and (r.src != r.dst).all()
    assert np.array_equal(r.bytes, parse_pattern("random:64:4:7").bytes)
    s, d, w = parse_pattern("ring:4:5").pairs()
    assert (s.tolist(), d.tolist(), w.tolist()) == ([0, 1, 2, 3], [1, 2, 3, 0], [5.0] * 4)


@pytest.mark.parametrize("spec", ["bogus:4", "bruck", "bruck:x", "stencil2d:4", "random:8:9:1", "ring:4:1:2"])
def test_bad_patterns_are_one_sentence(spec: str) -> None:
    with pytest.raises(UsageError) as e:
        parse_pattern(spec)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("spec", ["torus", "ring:4x4", "torus:4x0", "torus:4xx4"])
def test_bad_networks(spec: str) -> None:
    with pytest.raises(UsageError):
        parse_network(spec)


def test_matrix_formats_agree(tmp_path: Path) -> None:
    import scipy.io
    import scipy.sparse

    m = np.zeros((4, 4))
    m[0, 1], m[2, 3], m[3, 0] = 5, 7, 9
    np.save(tmp_path / "m.npy", m)
    np.savetxt(tmp_path / "m.csv", m, delimiter=",")
    (tmp_path / "e.csv").write_text("src,dst,bytes\n0,1,5\n2,3,7\n3,0,9\n")
    scipy.io.mmwrite(tmp_path / "m.mtx", scipy.sparse.coo_matrix(m))
    want = parse_pattern("ring:4").pairs()
    for f in ("m.npy", "m.csv", "e.csv", "m.mtx"):
        p = load_matrix(tmp_path / f)
        s, d, w = p.pairs()
        assert p.nranks == 4 and (s.tolist(), d.tolist(), w.tolist()) == ([0, 2, 3], [1, 3, 0], [5, 7, 9]), f
    assert want[0].size == 4


@pytest.mark.parametrize("content", ["1,2\n3\n", "a,b\n1,2\n", "1,2,3\n4,5,6\n", "1,-2\n3,4\n"])
def test_malformed_matrix(tmp_path: Path, content: str) -> None:
    (tmp_path / "bad.csv").write_text(content)
    with pytest.raises(UsageError) as e:
        load_matrix(tmp_path / "bad.csv")
    assert "bad.csv" in str(e.value)


def test_load_pattern_needs_exactly_one() -> None:
    with pytest.raises(UsageError):
        load_pattern()
    with pytest.raises(UsageError):
        load_pattern(pattern="ring:4", matrix="x.npy")


def test_map_csv_round_trip(tmp_path: Path) -> None:
    net = parse_network("torus:4x4")
    node = np.random.default_rng(1).permutation(16).astype(np.int64)
    write_map_csv(tmp_path / "map.csv", net, node)
    lines = (tmp_path / "map.csv").read_text().splitlines()
    assert lines[0] == "rank,node,coords" and lines[1] == f"0,{node[0]},{node[0] % 4}:{node[0] // 4}"
    assert np.array_equal(read_map(tmp_path / "map.csv", net, 16), node)
    with pytest.raises(UsageError, match="pattern has 17"):
        read_map(tmp_path / "map.csv", net, 17)
    (tmp_path / "dup.csv").write_text("rank,node\n0,1\n1,1\n")
    with pytest.raises(UsageError, match="more than --ranks-per-node"):
        read_map(tmp_path / "dup.csv", net, 2)
    (tmp_path / "far.csv").write_text("rank,node\n0,99\n")
    with pytest.raises(UsageError, match="outside"):
        read_map(tmp_path / "far.csv", net, 1)
