"""Platform generation for SimGrid: units, XML, the mesh embedding, link names, routing ties."""

from __future__ import annotations

import itertools
import os
import sys

import numpy as np
import pytest
from tests.conftest import mpiscope_cli

from mpiscope.errors import UsageError
from mpiscope.mapping.topology import Network
from mpiscope.sim.placement import make_platform, resolve_map
from mpiscope.sim.platform import Platform, parse_fat_tree, parse_quantity


@pytest.mark.parametrize("text,what,value", [
    ("5GBps", "bandwidth", 5e9), ("40Gbps", "bandwidth", 5e9), ("1GiBps", "bandwidth", 2.0**30),
    ("120ns", "latency", 1.2e-7), ("1.5us", "latency", 1.5e-6), ("0", "latency", 0.0),
    ("2Gf", "node speed", 2e9), ("1e9", "node speed", 1e9)])
def test_quantities_in_simgrid_units(text: str, what: str, value: float) -> None:
    assert parse_quantity(text, what) == value


@pytest.mark.parametrize("text,what", [("5 furlongs", "bandwidth"), ("0GBps", "bandwidth"),
                                       ("-1ns", "latency"), ("fast", "node speed")])
def test_bad_quantities_say_which_units(text: str, what: str) -> None:
    with pytest.raises(UsageError, match="e.g."):
        parse_quantity(text, what)


def test_torus_is_one_simgrid_torus_cluster() -> None:
    xml = make_platform("torus:16x16x16", bandwidth="5GBps", latency="120ns").xml()
    assert 'topology="TORUS" topo_parameters="16,16,16"' in xml
    assert 'radical="0-4095"' in xml and 'bw="5000000000.0Bps"' in xml and 'lat="1.2e-07s"' in xml
    assert 'sharing_policy="SPLITDUPLEX"' in xml


def test_mesh_is_the_box_of_a_larger_torus() -> None:
    p = make_platform("mesh:4x3x2")
    assert p.grid == (7, 5, 3) and p.hosts == 105
    net = Network("mesh", (4, 3, 2))
    nodes = np.arange(p.nodes)
    hosts = p.host_of_node(nodes)
    # Same coordinates in the box: host (x, y, z) of the 7x5x3 torus for mesh node (x, y, z).
    assert [p.node_coords(int(h)) for h in hosts] == [tuple(c) for c in net.coords(nodes).tolist()]
    # Every way round through the empty part of a ring is longer than the way inside the box.
    for d, g in zip(p.dims, p.grid):
        for a, b in itertools.product(range(d), repeat=2):
            assert abs(a - b) < g - abs(a - b)


def test_size_one_dimensions_are_left_out_of_the_cluster() -> None:
    p = make_platform("torus:4x1x2")
    assert 'topo_parameters="4,2"' in p.xml()
    assert p.host_of_node(np.arange(8)).tolist() == list(range(8))


def test_link_names_read_as_node_and_direction() -> None:
    p = make_platform("torus:4x4x4")
    assert p.link_label("c_link_from_5_to_6_UP") == "(1,1,0) x+"
    assert p.link_label("c_link_from_5_to_6_DOWN") == "(2,1,0) x-"
    assert p.link_label("c_link_from_3_to_0_UP") == "(3,0,0) x+"          # the wrap-around link
    assert p.link_label("c_link_from_5_to_21_DOWN") == "(1,1,1) z-"
    assert p.link_place("c_link_from_5_to_21_DOWN") == (21, 2, 1)
    assert make_platform("mesh:4x4").link_place("c_link_from_8_to_15_UP") == (5, 1, 0)


def test_simgrid_ties_differ_from_the_metrics_only_from_half_ring_to_zero() -> None:
    p = make_platform("torus:4x3")
    src, dst = np.array([2, 0, 3, 2, 1]), np.array([0, 2, 1, 3, 3])
    # x: 2 -> 0 is the only tie SimGrid routes toward -; 0 -> 2 and 3 -> 1 go + in both.
    assert p.tie_messages(src, dst) == 1
    assert make_platform("mesh:4x4").tie_messages(src, dst) == 0


def test_fat_tree_parameters() -> None:
    assert parse_fat_tree("fat-tree:2;4,4;1,2;1,2") == ((2,), (4, 4), (1, 2), (1, 2))
    assert parse_fat_tree("fat-tree:2:4,4:1,2:1,2") == ((2,), (4, 4), (1, 2), (1, 2))
    p = make_platform("fat-tree:2;4,4;1,2;1,2")
    assert p.nodes == 16 and 'topology="FAT_TREE" topo_parameters="2;4,4;1,2;1,2"' in p.xml()
    with pytest.raises(UsageError, match="fat-tree"):
        parse_fat_tree("fat-tree:2;4;1,2")


def test_maps_identity_random_and_bad_sizes(tmp_path: object) -> None:
    p = make_platform("torus:4x4", ranks_per_node=2)
    assert resolve_map(p, "identity", 8)[0].tolist() == [0, 0, 1, 1, 2, 2, 3, 3]
    node, name = resolve_map(p, "random:5", 32)
    assert name == "random:5" and np.bincount(node, minlength=16).max() == 2
    with pytest.raises(UsageError, match="do not fit"):
        resolve_map(p, "identity", 33)
    with pytest.raises(UsageError, match="fat-tree"):
        resolve_map(make_platform("fat-tree:2;4,4;1,2;1,2"), "some.csv", 16)


def test_missing_simgrid_is_one_sentence(tmp_path: object) -> None:
    env = dict(os.environ, PATH=os.path.dirname(sys.executable))
    done = mpiscope_cli(["sim", "--network", "torus:4x4", "--pattern", "ring:16"], env=env)
    assert done.returncode == 6
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert "SimGrid is not installed" in done.stderr and "apt-get install libsimgrid-dev" in done.stderr


def test_platform_is_hashable_and_described() -> None:
    p = Platform("torus", (2, 2), 1, 1e9, 0.0, 1e9)
    assert p.describe() == "torus:2x2" and hash(p) == hash(Platform("torus", (2, 2), 1, 1e9, 0.0, 1e9))
