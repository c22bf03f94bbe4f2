"""A piece's shares of collective instances, and their sum over pieces, are the same reduced in
place on packed keys as grouped by Polars."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from polars.testing import assert_frame_equal

from mpiscope.trace.instances import _add_up_grouped, _partials_grouped, _summed, partials

KEYS = ["comm", "seq", "call"]


def share(rng: np.random.Generator, n: int, piece: int, comm_high: int) -> pl.DataFrame:
    """A piece's share of n instances (partials' columns), some roots and leave times null."""
    order = (piece << 40) + rng.permutation(n).astype(np.int64)
    has_root = rng.random(n) < 0.5
    leave = rng.integers(0, 10**9, n)
    return pl.DataFrame({
        "comm": rng.integers(0, comm_high, n), "seq": rng.integers(0, 40, n),
        "call": rng.integers(0, 3, n).astype(np.uint32), "first": order,
        "root": pl.Series(rng.integers(0, 8, n).astype(np.int32)).set(pl.Series(~has_root), None),
        "root_first": pl.Series(order - rng.integers(0, 3, n)).set(pl.Series(~has_root), None),
        "bytes": rng.integers(0, 1000, n), "recv_count": rng.integers(0, 4, n).astype(np.uint32),
        "recv_bytes": rng.integers(0, 1000, n), "ranks": rng.integers(1, 4, n).astype(np.uint32),
        "t_first_enter_ns": rng.integers(0, 10**9, n), "t_last_enter_ns": rng.integers(10**9, 2 * 10**9, n),
        "t_first_leave_ns": pl.Series(leave).set(pl.Series(rng.random(n) < 0.2), None),
        "t_last_leave_ns": pl.Series(leave + 5).set(pl.Series(rng.random(n) < 0.2), None),
    }).unique(KEYS, keep="first")


# packed; too large a communicator id to pack; packed until the last share
@pytest.mark.parametrize("comm_high", [[5] * 4, [1 << 21] * 4, [5, 5, 5, 1 << 21]])
def test_add_up_in_place_equals_grouped(comm_high: list[int]) -> None:
    rng = np.random.default_rng(7)
    shares = [share(rng, 300, piece, high) for piece, high in enumerate(comm_high)]
    total = _summed(iter(shares))
    grouped = shares[0]
    for s in shares[1:]:  # keys shared, new, and missing in each
        grouped = _add_up_grouped(pl.concat([grouped, s]))
    assert total is not None and total.schema == shares[0].schema
    assert total["root"].null_count() and total["t_first_leave_ns"].null_count()
    assert_frame_equal(total.sort(KEYS), grouped.sort(KEYS))


def rows(rng: np.random.Generator, n: int, comm_high: int) -> pl.DataFrame:
    """coll_rows' columns: n rows in `order`, several per instance, some roots, receives and ends null."""
    def some_null(values: np.ndarray, share: float) -> pl.Series:
        return pl.Series(values).set(pl.Series(rng.random(n) < share), None)

    return pl.DataFrame({
        "order": np.sort(rng.choice(10 * n, n, replace=False)).astype(np.int64),
        "comm": rng.choice([0, 1, comm_high - 1], n), "seq": rng.integers(0, 300, n),
        "call": rng.integers(0, 2, n).astype(np.uint32), "root": some_null(rng.integers(0, 8, n).astype(np.int32), 0.6),
        "bytes": rng.integers(0, 1000, n), "recv_bytes": some_null(rng.integers(0, 1000, n), 0.5),
        "t_enter_ns": rng.integers(0, 10**9, n), "t_done_ns": some_null(rng.integers(0, 10**9, n), 0.3),
    })


@pytest.mark.parametrize("comm_high", [4, 1 << 21])
def test_partials_in_place_equal_grouped(comm_high: int) -> None:
    frame = rows(np.random.default_rng(3), 2000, comm_high)
    share = partials(frame, 5)
    assert share.height < frame.height and share["root"].null_count() and share["t_first_leave_ns"].null_count()
    assert_frame_equal(share.sort(KEYS), _partials_grouped(frame, 5).sort(KEYS))
