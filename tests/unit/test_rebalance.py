"""Rebalance by measured compute times (003 §4.2, SPEC §2): exact Table 2 result, properties, parsing."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mpiscope.analysis.rebalance import (
    format_partition,
    new_shares,
    parse_partition,
    parse_shares,
    parse_times,
    rebalance,
)
from mpiscope.errors import UsageError

# 003 Table 2: 16 nodes x 128 rows, computation seconds per node
TABLE2 = [4.99, 5.65, 6.34, 6.91, 7.11, 7.26, 7.74, 7.51, 7.59, 7.65, 7.70, 7.81, 8.04, 8.13, 8.21, 8.27]
EXPECTED = [184, 164, 144, 132, 128, 128, 120, 124, 120, 120, 120, 116, 112, 112, 112, 112]


def test_table2_gives_the_spec_shares() -> None:
    r = rebalance(TABLE2, [128] * 16, granularity=4)
    assert r.shares == EXPECTED
    assert r.rows[0] == (0, 184) and r.rows[-1] == (1936, 2048)
    assert all(a[1] == b[0] for a, b in zip(r.rows, r.rows[1:]))
    j = r.to_json()
    assert j["schema"] == "mpiscope.rebalance/1" and j["shares"] == EXPECTED and j["old_shares"] == [128] * 16
    assert j["granularity"] == 4 and j["rows"][1] == [184, 348] and j["max_time_s"] == 8.27
    # time per row kept: rank 0 takes 4.99/128 s per row for 184 rows
    assert r.predicted_times_s[0] == pytest.approx(4.99 * 184 / 128)
    assert j["predicted_max_time_s"] < 8.27 and j["predicted_gain_pct"] > 0


def test_equal_times_keep_the_shares() -> None:
    assert new_shares([2.0] * 4, [512] * 4) == [512] * 4
    assert new_shares([1.0, 1.0, 1.0], [8, 16, 24], granularity=8) == [8, 16, 24]


def test_ties_go_to_the_lower_rank() -> None:
    # 3 units for 2 equal ranks: the leftover unit goes to rank 0
    assert new_shares([1.0, 1.0], [8, 4], granularity=4) == [8, 4]
    assert new_shares([2.0, 2.0], [6, 6], granularity=4) == [8, 4]


shares_and_times = st.integers(1, 8).flatmap(lambda g: st.tuples(
    st.just(g),
    st.lists(st.integers(1, 300), min_size=1, max_size=40).map(lambda units: [u * g for u in units]),
)).flatmap(lambda gs: st.tuples(
    st.just(gs[0]), st.just(gs[1]),
    st.lists(st.floats(1e-6, 1e6, allow_nan=False, allow_infinity=False),
             min_size=len(gs[1]), max_size=len(gs[1])),
))


@given(shares_and_times)
def test_total_kept_and_multiples_of_g(case: tuple[int, list[int], list[float]]) -> None:
    g, shares, times = case
    new = new_shares(times, shares, g)
    assert sum(new) == sum(shares)
    assert all(s % g == 0 and s >= 0 for s in new)
    # largest remainder: each share is within one granule of its exact value
    speed = [w / t for w, t in zip(shares, times)]
    exact = [sum(shares) * s / sum(speed) for s in speed]
    assert all(abs(n - e) < g + 1e-6 * sum(shares) for n, e in zip(new, exact))


@given(st.lists(st.integers(1, 500), min_size=1, max_size=20), st.integers(1, 16))
def test_shares_not_multiples_of_g_but_total_is(units: list[int], g: int) -> None:
    shares = [u + g for u in units]
    shares[-1] += (-sum(shares)) % g            # the total is a multiple of g, single shares need not be
    new = new_shares([1.0 + i for i in range(len(shares))], shares, g)
    assert sum(new) == sum(shares) and all(s % g == 0 for s in new)


@pytest.mark.parametrize(("times", "shares", "g", "words"), [
    ([1.0, 2.0], [128, 128, 128], 4, "2 times for 3 shares"),
    ([1.0, 2.0], [128, 2], 4, "larger than rank 1's share"),
    ([1.0, 2.0], [130, 128], 4, "not a multiple of granularity"),
    ([1.0, 0.0], [128, 128], 4, "rank 1's time"),
    ([1.0, 2.0], [128, 128], 0, "not a positive number of rows"),
])
def test_bad_input_is_one_sentence(times: list[float], shares: list[int], g: int, words: str) -> None:
    with pytest.raises(UsageError, match=words) as e:
        new_shares(times, shares, g)
    assert "\n" not in str(e.value) and ";" in str(e.value)


def test_parse_shares_and_times() -> None:
    assert parse_shares("128x16") == [128] * 16
    assert parse_shares("184,164, 144") == [184, 164, 144]
    assert parse_shares("part.txt") is None and parse_shares("12") is None
    assert parse_times("4.99, 5.65,6.34") == [4.99, 5.65, 6.34]
    for bad in ("4.99,,5", "a,b", "1,-2", "1,inf"):
        with pytest.raises(UsageError, match="--times"):
            parse_times(bad)


def test_partition_file_round_trip() -> None:
    r = rebalance(TABLE2, [128] * 16)
    text = format_partition(r, "times given")
    assert text.startswith("# mpiscope rebalance") and "\n0 184\n184 348\n" in text
    assert parse_partition(text, "p") == EXPECTED
    assert parse_partition("# rows\n\n10\n20\n 30 \n", "p") == [10, 20, 30]


@pytest.mark.parametrize(("text", "words"), [
    ("0 10\n11 20\n", "do not follow row 10"),
    ("10 x\n", "is not ROWS or START END"),
    ("1 2 3\n", "is not ROWS or START END"),
    ("# nothing\n", "no rank lines"),
])
def test_bad_partition_file(text: str, words: str) -> None:
    with pytest.raises(UsageError, match=words):
        parse_partition(text, "part.txt")
