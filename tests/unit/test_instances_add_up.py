"""A piece's shares of collective instances, and their sum over pieces, are the same reduced in
place on packed keys as grouped by Polars."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from polars.testing import assert_frame_equal

from mpiscope.trace.assembly import key_ranges
from mpiscope.trace.instances import CALL_BITS, KEY, SEQ_BITS, _add_up_grouped, _partials_grouped, partials, summed

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
    total = summed(iter(shares))
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
    assert (KEY in share.columns) == (comm_high < 1 << 20)   # the packed key where it packs
    assert_frame_equal(share.drop(KEY, strict=False).sort(KEYS), _partials_grouped(frame, 5).sort(KEYS))


def test_key_ranges_cover_every_key_and_hold_at_most_their_instances() -> None:
    """Communicators 0, 3, 5 with 10, 1, 25 sequence numbers, at most 7 instances a range: the
    ranges run from the first key to past the last, each holding at most 7 (comm, seq) pairs."""
    seqs = {0: 10, 3: 1, 5: 25}
    ranges = key_ranges(seqs, 7)
    assert ranges[0][0] == 0 and ranges[-1][1] == 1 << 64
    assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:]))
    keys = np.array([(c << (SEQ_BITS + CALL_BITS)) | (s << CALL_BITS) | call
                     for c, n in seqs.items() for s in range(n) for call in (0, (1 << CALL_BITS) - 1)], np.uint64)
    held = [int(((keys >= np.uint64(lo)) & ((keys < np.uint64(hi)) if hi < 1 << 64 else True)).sum()) // 2
            for lo, hi in ranges]
    assert held == [7, 7, 7, 7, 7, 1] and key_ranges(seqs, 36) == [(0, 1 << 64)]
    assert key_ranges(None, 7) == [(0, 1 << 64)]
