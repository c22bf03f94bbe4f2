"""The tree of the adaptive broadcast (native/bcast/tree.c, through ctypes): for any
size, root and virtual-rank permutation, every rank but the root receives exactly
once, from a process that has it already, and the tree is 000 §3.1's binomial tree
over virtual positions (SPEC §5)."""

from __future__ import annotations

import ctypes
import subprocess

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.conftest import MPICH, ROOT

TREE = ROOT / "src" / "mpiscope" / "native" / "bcast"


class Table(ctypes.Structure):
    _fields_ = [("size", ctypes.c_int), ("vr", ctypes.POINTER(ctypes.c_int)),
                ("real", ctypes.POINTER(ctypes.c_int))]


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> ctypes.CDLL:
    lib = tmp_path_factory.mktemp("tree") / "libtree.so"
    subprocess.run([str(MPICH.mpicc), "-shared", "-fPIC", "-O2", f"-I{TREE}", str(TREE / "tree.c"), "-o", str(lib)],
                   check=True)
    return ctypes.CDLL(str(lib))


def table(perm: list[int]) -> tuple[Table, ctypes.Array[ctypes.c_int], ctypes.Array[ctypes.c_int]]:
    n = len(perm)
    vr = (ctypes.c_int * n)(*perm)
    real = (ctypes.c_int * n)()
    for r, v in enumerate(perm):
        real[v] = r
    return Table(n, vr, real), vr, real


def children(tree: ctypes.CDLL, pos: int, size: int) -> list[int]:
    out, k = [], tree.msc_bc_first_child_step(pos, size)
    while k >= 1:
        if pos + k < size:
            out.append(pos + k)
        k >>= 1
    return out


@st.composite
def setups(draw: st.DrawFn) -> tuple[list[int], int]:
    size = draw(st.integers(1, 300))
    perm = draw(st.permutations(range(size)))
    return list(perm), draw(st.integers(0, size - 1))


@settings(max_examples=150, deadline=None)
@given(setups())
def test_every_rank_receives_once_from_one_that_has_it(tree, setup):
    perm, root = setup
    t, _vr, _real = table(perm)
    size = len(perm)
    got_from: dict[int, int] = {}
    step_of = {root: 0}
    order = [0]  # positions in the order they receive: a parent always before its children
    for pos in order:
        me = tree.msc_bc_real_at(ctypes.byref(t), pos, root)
        assert tree.msc_bc_position(ctypes.byref(t), me, root) == pos
        kids = children(tree, pos, size)
        assert len(kids) == tree.msc_bc_sends(pos, size)
        for i, child in enumerate(kids, 1):
            assert tree.msc_bc_parent(child) == pos and tree.msc_bc_depth(child) == tree.msc_bc_depth(pos) + 1
            rank = tree.msc_bc_real_at(ctypes.byref(t), child, root)
            assert rank not in got_from and rank != root
            got_from[rank] = me
            step_of[rank] = step_of[me] + i  # sends in order: i-th child gets it i steps later
            order.append(child)
    assert sorted(got_from) == sorted(set(range(size)) - {root})
    # binomial: every rank has it after ceil(log2 M) steps, the root sends 2^n, ..., 1 (2^n < M <= 2^(n+1))
    assert max(step_of.values()) == (size - 1).bit_length()
    if size > 1:
        first = children(tree, 0, size)[0]
        assert first < size <= 2 * first


@settings(max_examples=60, deadline=None)
@given(setups(), st.data())
def test_swaps_keep_the_table_a_permutation(tree, setup, data):
    perm, _ = setup
    t, vr, real = table(perm)
    size = len(perm)
    for _ in range(data.draw(st.integers(0, 20))):
        a, b = data.draw(st.integers(0, size - 1)), data.draw(st.integers(0, size - 1))
        before = (vr[a], vr[b])
        tree.msc_bc_table_swap(ctypes.byref(t), a, b)
        assert (vr[a], vr[b]) == (before[1], before[0])
    assert sorted(vr[:size]) == list(range(size))
    assert all(real[vr[r]] == r for r in range(size))


def test_paper_examples(tree):
    """M = 4 (000 Fig. 4): 0 sends to 2 then 1, 2 to 3; M = 128 (000 §5.1): the first
    receiver is 64, with 1 receive and 6 sends."""
    assert children(tree, 0, 4) == [2, 1] and children(tree, 2, 4) == [3]
    assert children(tree, 0, 16) == [8, 4, 2, 1]
    assert children(tree, 0, 128)[0] == 64 and tree.msc_bc_sends(64, 128) == 6
