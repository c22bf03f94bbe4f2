"""The streaming writers of trace/synthetic.py write what the whole-array ones write."""

from __future__ import annotations

import numpy as np
import pytest

from mpiscope.trace import record as R
from mpiscope.trace.reader import read_rank_file
from mpiscope.trace.synthetic import RankFileWriter, stream_halo_trace, write_rank_file


def records(n: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    rec = np.zeros(n, R.REC_DTYPE)
    rec["t_enter"] = np.sort(rng.integers(10, 10**9, n))
    rec["t_leave"] = rec["t_enter"] + 5
    rec["call"], rec["peer"] = rng.integers(0, 50, n), rng.integers(-5, 8, n)
    return rec


@pytest.mark.parametrize("version", [1, 4, R.FORMAT_VERSION])
@pytest.mark.parametrize("n", [0, 7, R.RECS_PER_BLOCK, R.RECS_PER_BLOCK + 1, 2 * R.RECS_PER_BLOCK + 5])
@pytest.mark.parametrize("state", [R.STATE_RUNNING, R.STATE_FINISHED])
def test_writer_in_chunks_writes_the_whole_file(tmp_path, version, n, state):
    rec = records(n)
    write_rank_file(tmp_path / "whole.msc", 3, 8, rec, state=state, version=version, t_end_ns=777 * (1 - state))
    with RankFileWriter(tmp_path / "chunks.msc", 3, 8, state, 777 * (1 - state), version) as w:
        for i in range(0, n, 10_007):  # chunks that straddle the blocks
            w.write(rec[i: i + 10_007])
    assert (tmp_path / "chunks.msc").read_bytes() == (tmp_path / "whole.msc").read_bytes()


def test_stream_halo_is_the_whole_rank_halo(tmp_path):
    rpb = R.RECS_PER_BLOCK
    n = stream_halo_trace(tmp_path / "whole", 2, 5 * rpb, seed=3, chunk_iters=None)
    assert stream_halo_trace(tmp_path / "chunks", 2, 5 * rpb, seed=3, chunk_iters=1_001) == n
    assert n == 2 * (5 * rpb // 12) * 6
    for name in ("rank-000000.msc", "rank-000001.msc", "rank-000000.comms", "rank-000001.comms"):
        assert (tmp_path / "chunks" / "raw" / name).read_bytes() == (tmp_path / "whole" / "raw" / name).read_bytes()
    f = read_rank_file(tmp_path / "chunks" / "raw" / "rank-000001.msc", 1 << 16)
    got = np.concatenate(f.blocks)
    assert got.size == n // 2 and not f.warnings and f.damage.blocks == 0
    assert (np.diff(got["t_enter"].astype(np.int64)) >= 0).all()
