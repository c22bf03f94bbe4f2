"""Random, truncated and bit-flipped rank files must read or raise TraceCorrupt."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mpiscope.errors import TraceCorrupt
from mpiscope.trace import record as R
from mpiscope.trace.reader import read_rank_file
from mpiscope.trace.synthetic import write_rank_file


# The fuzzed bytes are the header page and the start of the first block;
# on disk the first block sits at HEADER_BYTES, after a hole.
@pytest.fixture(scope="module")
def sample(tmp_path_factory) -> bytes:
    recs = np.zeros(30, R.REC_DTYPE)
    recs["call"] = 20
    recs["t_enter"] = np.arange(30) * 100 + 1
    recs["t_leave"] = recs["t_enter"] + 50
    path = tmp_path_factory.mktemp("fuzz") / "rank-000000.msc"
    write_rank_file(path, 0, 2, recs)
    data = path.read_bytes()
    return data[: R.HEADER_PAGE] + data[R.HEADER_BYTES: R.HEADER_BYTES + R.BLOCK_HEADER_BYTES + 48 * 40]


def read(tmp: Path, data: bytes) -> None:
    path = tmp / "rank-000000.msc"
    with open(path, "wb") as f:
        f.write(data[: R.HEADER_PAGE])
        if len(data) > R.HEADER_PAGE:
            f.seek(R.HEADER_BYTES)
            f.write(data[R.HEADER_PAGE:])
    try:
        f = read_rank_file(path, 300)
    except TraceCorrupt:
        return
    assert f.records.size <= 30 and (f.records["call"] != 0).all()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.binary(max_size=6000))
def test_random_bytes(tmp_path, data):
    read(tmp_path, data)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.integers(0, 10_000))
def test_truncated(tmp_path, sample, cut):
    read(tmp_path, sample[:cut])


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 7)), min_size=1, max_size=8))
def test_bit_flips(tmp_path, sample, flips):
    data = bytearray(sample)
    for pos, bit in flips:
        if pos < len(data):
            data[pos] ^= 1 << bit
    read(tmp_path, bytes(data))
