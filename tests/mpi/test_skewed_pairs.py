"""Two receives of one envelope that a rank's one thread posted and waited for the other way round,
on a rank whose clock reads earlier than its sender's by more than the wait (as across hosts whose
offsets were measured badly): each message stays paired with the receive posted first for it, as
MPI's non-overtaking rule pairs them, not with the receive that completed first (issue 23's
re-pairing is for ranks of several threads only)."""

from __future__ import annotations

import json

import numpy as np
import polars as pl
from crc32c import crc32c
from tests.conftest import mpiscope_cli, record_python

from mpiscope.trace import open_trace
from mpiscope.trace import record as R

WAIT_BACKWARDS = """
import time
import numpy as np
from mpi4py import MPI
comm = MPI.COMM_WORLD
if comm.rank == 0:
    comm.Send(np.zeros(1), dest=1, tag=7)   # 8 bytes: into the receive posted first
    comm.Send(np.zeros(2), dest=1, tag=7)   # 16 bytes: into the second
else:
    first, second = np.empty(2), np.empty(2)
    a = comm.Irecv(first, source=0, tag=7)
    b = comm.Irecv(second, source=0, tag=7)
    time.sleep(0.05)
    b.Wait()                                # the second posted completes first
    a.Wait()
comm.Barrier()
"""


def _clock_behind(path, ns: int) -> None:
    """Rank 1's offset to rank 0 made `ns` larger (its times read that much earlier), the header's
    checksum written again."""
    raw = bytearray(path.read_bytes()[: R.HEADER_PAGE])
    hdr = np.frombuffer(raw, R.FILE_HEADER_DTYPE, count=1)
    hdr["offset_init_ns"] += ns
    hdr["offset_end_ns"] += ns
    hdr["crc"] = crc32c(bytes(raw[: R.HEADER_CRC_BYTES]))
    with path.open("r+b") as f:
        f.write(bytes(raw))


def test_one_threads_receives_keep_their_messages_under_clock_error(tmp_path) -> None:
    trace = record_python(tmp_path, WAIT_BACKWARDS, 2)
    _clock_behind(trace.path / "raw" / "rank-000001.msc", 400_000_000)
    done = mpiscope_cli(["merge", str(trace.path)])
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-2000:]
    warnings = json.loads((trace.path / "manifest.json").read_text())["warnings"]
    assert any(w.startswith("clock correction") for w in warnings), warnings  # the skew was seen
    t = open_trace(trace.path)
    recvs = (t.events().filter((pl.col("rank") == 1) & pl.col("call").cast(pl.Utf8).str.starts_with("MPI_Irecv"))
             .select("event", "t_enter_ns").sort("t_enter_ns").collect())
    pairs = (t.messages().filter(pl.col("tag") == 7).select("recv_event", "bytes").collect())
    got = dict(zip(pairs["recv_event"].to_list(), pairs["bytes"].to_list()))
    assert [got[e] for e in recvs["event"].to_list()] == [8, 16], (got, recvs)
