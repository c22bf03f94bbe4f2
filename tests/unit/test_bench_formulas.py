"""Overlap formulas, rank choice, sizes and operation names on synthetic input (no MPI)."""

import math

import pytest

from mpiscope.bench import catalog
from mpiscope.bench.formulas import (
    bandwidth_mb_s,
    imb_overlap_pct,
    imb_rank,
    osu_overlap_pct,
    overlap_point,
    passive_ratio,
)
from mpiscope.errors import UsageError


def test_imb_no_overlap_is_zero():
    # communication and computation strictly one after the other: t_ovrlp = t_pure + t_CPU
    assert imb_overlap_pct(100.0, 100.0, 200.0) == 0.0


def test_imb_full_overlap_is_100():
    # everything hidden: t_ovrlp = max(t_pure, t_CPU)
    assert imb_overlap_pct(100.0, 100.0, 100.0) == 100.0
    # IMB divides by max(t_pure, t_CPU): all 80 µs of communication hidden in 100 µs of work reads 80 %
    assert imb_overlap_pct(80.0, 100.0, 100.0) == pytest.approx(80.0)


def test_imb_partial_overlap():
    # 150 µs for 100 + 100: half of the 100 µs could be hidden
    assert imb_overlap_pct(100.0, 100.0, 150.0) == pytest.approx(50.0)
    # the denominator is max(t_pure, t_CPU), not t_pure
    assert imb_overlap_pct(50.0, 100.0, 120.0) == pytest.approx(30.0)


def test_imb_clips_to_0_and_100():
    assert imb_overlap_pct(100.0, 100.0, 400.0) == 0.0       # slower than serial
    assert imb_overlap_pct(100.0, 100.0, 20.0) == 100.0      # faster than either alone
    assert imb_overlap_pct(0.0, 0.0, 5.0) == 0.0              # degenerate, no division by zero


def test_osu_definition_differs_from_imb():
    # OSU: 100 − 100·(overall − (compute − test))/pure, no upper clip, t_pure denominator
    assert osu_overlap_pct(overall=150.0, compute=100.0, test=0.0, pure=100.0) == pytest.approx(50.0)
    # MPI_Test time counts as overhead, not as computation
    assert osu_overlap_pct(overall=150.0, compute=110.0, test=10.0, pure=100.0) == pytest.approx(50.0)
    # where t_CPU > t_pure the two definitions disagree: IMB divides by t_CPU
    assert imb_overlap_pct(50.0, 100.0, 120.0) == pytest.approx(30.0)
    assert osu_overlap_pct(overall=120.0, compute=100.0, test=0.0, pure=50.0) == pytest.approx(60.0)
    assert osu_overlap_pct(overall=400.0, compute=100.0, test=0.0, pure=100.0) == 0.0


def test_imb_rank_is_first_largest_t_ovrlp():
    assert imb_rank([1.0, 3.0, 2.0, 3.0]) == 1
    assert imb_rank([5.0]) == 0


def test_overlap_point_takes_imb_rank_and_osu_averages():
    # rank 1 has the largest t_ovrlp: IMB prints its three times, OSU averages over ranks
    t_pure, t_ovrlp = [100e-6, 100e-6], [150e-6, 200e-6]
    t_cpu, t_test, t_blocking = [100e-6, 100e-6], [0.0, 0.0], [60e-6, 90e-6]
    p = overlap_point(t_pure, t_ovrlp, t_cpu, t_test, t_blocking)
    assert p.rank == 1
    assert (p.t_pure_us, p.t_cpu_us, p.t_ovrlp_us) == pytest.approx((100.0, 100.0, 200.0))
    assert p.overlap_pct == 0.0
    assert p.osu_overall_us == pytest.approx(175.0)
    assert p.osu_overlap_pct == pytest.approx(25.0)
    assert p.blocking_plus_cpu_us == pytest.approx(190.0)     # slowest rank's blocking + t_CPU
    assert p.faster == "blocking"


def test_faster_is_nonblocking_when_overlap_wins():
    p = overlap_point([100e-6], [110e-6], [100e-6], [0.0], [100e-6])
    assert p.faster == "nonblocking"
    assert p.overlap_pct == pytest.approx(90.0)


def test_passive_ratio_and_bandwidth():
    assert passive_ratio(10.0, 20.0) == 2.0
    assert math.isnan(passive_ratio(0.0, 1.0))
    assert bandwidth_mb_s(1_000_000, 1000.0) == 1000.0       # 1 MB in 1 ms = 1000 MB/s


def test_default_sizes_are_imbs():
    sizes = catalog.parse_sizes(None)
    assert sizes[0] == 0 and sizes[1] == 1 and sizes[-1] == 4 * 2**20 and len(sizes) == 24


def test_parse_sizes_lists_units_and_ranges():
    assert catalog.parse_sizes("4K,0,1M,4k") == [0, 4096, 2**20]
    assert catalog.parse_sizes("0:8") == [0, 1, 2, 4, 8]
    assert catalog.parse_sizes("3:16") == [4, 8, 16]


@pytest.mark.parametrize("text", ["abc", "2G", "-1", "8:4", ",", "1T", ",".join(map(str, range(1, 100)))])
def test_bad_sizes_are_one_sentence(text):
    with pytest.raises(UsageError) as e:
        catalog.parse_sizes(text)
    assert "\n" not in str(e.value) and ";" in str(e.value)


def test_reductions_round_sizes_up_to_floats():
    assert catalog.sizes_for([0, 1, 2, 4, 5, 8], reduction=True) == [0, 4, 8]
    assert catalog.sizes_for([0, 1, 2], reduction=False) == [0, 1, 2]


def test_op_selection():
    assert catalog.select_ops(None, catalog.NBC_BY_NAME, catalog.NBC_GROUPS, "overlap") == \
        [op.name for op in catalog.NBC_OPS]
    imb = catalog.select_ops(["imb"], catalog.NBC_BY_NAME, catalog.NBC_GROUPS, "overlap")
    assert len(imb) == 13 and "iscan" not in imb
    assert catalog.select_ops(["ibcast,IALLTOALL", "ibcast"], catalog.NBC_BY_NAME, catalog.NBC_GROUPS,
                              "overlap") == ["ibcast", "ialltoall"]
    with pytest.raises(UsageError, match="unknown operation 'ibcats'"):
        catalog.select_ops(["ibcats"], catalog.NBC_BY_NAME, catalog.NBC_GROUPS, "overlap")


def test_buffer_limit_names_the_fix():
    op = catalog.NBC_BY_NAME["ialltoall"]
    catalog.check_buffer_limit(op, [2**20], 1024)
    with pytest.raises(UsageError, match="beyond MPI's int counts"):
        catalog.check_buffer_limit(op, [2**30], 4)
