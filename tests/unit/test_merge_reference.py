"""The merge gives, table for table, what the NumPy merge it replaced gave.

tests/data/merge/NAME/trace.tar.xz holds a recorded trace of examples/NAME.c
(rank files cut after their last record, .maps dropped so call sites stay
addresses); the Parquet files and manifest-expected.json beside it were
written by the NumPy implementation before the C kernels replaced it. They
cover wildcard receives (wildcard), every send mode, probes, Mprobe/Mrecv
and persistent requests (p2pmodes), MPI_THREAD_MULTIPLE (threads, churn),
communicator creation (comms), collectives (coll), RMA (rma), Pcontrol
pauses (pcontrol), cut-off rank files (crash), and clock skew that the merge
removes by shifting ranks (skew5: a synthetic halo trace with two offsets
altered). They are format 3 traces, recorded before collectives' received bytes were:
their recv_bytes columns (events, collectives) are null, the rest is as it was, but for
times: since each rank that finished keeps the tick rate it measured itself (so that a
damaged or missing rank file cannot move the others' times, issue 21) rather than the
host's longest-span rate, times moved by at most 40 ns, and the tables were written again.
Since a Waitall, Waitsome, Testall or Testsome carries what its receives received (as a Wait
does), the `bytes` of those rows were written again too (p2pmodes: 8 rows, skew5: 500), and
since an MPI_Startall whose requests one call completed carries that completion (as an
MPI_Irecv does), so were p2pmodes' 6 Startall rows' t_complete_ns and completed_by. Since a
window-creating call's request names the window by its id in the trace (comms.parquet's comm)
rather than the rank's own, so were rma's 4 MPI_Win_allocate rows' request (2 -> 5); and since a
communicator-creating call's (not MPI_Comm_idup's) does the same for the new communicator, so were
coll's 8 (MPI_Comm_split 2 -> 3, MPI_Cart_create 3 -> 6) and comms' 16 (MPI_Comm_dup,
MPI_Comm_split, MPI_Intercomm_create, MPI_Dist_graph_create_adjacent: local ids -> 10, 8/9, 11, 1).
Since a call to MPI_PROC_NULL moves nothing, p2pmodes' 2 MPI_Send rows to it have bytes 0 (were 64).
"""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

import polars as pl
import pytest

from mpiscope.trace import TABLES, open_trace
from mpiscope.trace.merge import merge_trace

DATA = Path(__file__).parent.parent / "data" / "merge"
MANIFEST_KEYS = ("counts", "truncated_ranks", "unfinished_calls", "t0_ns", "warnings")


@pytest.mark.parametrize("name", sorted(p.name for p in DATA.iterdir()))
def test_tables_equal_reference(tmp_path: Path, name: str) -> None:
    with tarfile.open(DATA / name / "trace.tar.xz") as tar:
        tar.extractall(tmp_path, filter="data")
    merge_trace(tmp_path)
    trace = open_trace(tmp_path, merge=False)
    for table in TABLES:
        got, want = getattr(trace, table)().collect(), pl.read_parquet(DATA / name / f"{table}.parquet")
        if table in ("events", "collectives"):
            assert got["recv_bytes"].null_count() == got.height, table
            got = got.drop("recv_bytes")
        if table == "events":  # format 3 traces: no failed calls, no folded polls
            assert (got["count"] == 1).all() and got["rc"].null_count() == got["inside_ns"].null_count() == got.height
            got = got.drop("count", "inside_ns", "rc")
        assert got.schema == want.schema, table
        assert got.equals(want, null_equal=True), table
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    got_manifest = {k: manifest[k] for k in MANIFEST_KEYS} | {"causality_shift_ns": manifest["clock"]["causality_shift_ns"]}
    assert got_manifest == json.loads((DATA / name / "manifest-expected.json").read_text())


@pytest.mark.parametrize("name", ["p2pmodes", "coll"])
def test_tables_held_in_memory_are_the_tables(tmp_path: Path, name: str) -> None:
    """Trace.hold (a report's one read of its tables) changes nothing the frames give."""
    with tarfile.open(DATA / name / "trace.tar.xz") as tar:
        tar.extractall(tmp_path, filter="data")
    merge_trace(tmp_path)
    scanned, held = open_trace(tmp_path, merge=False), open_trace(tmp_path, merge=False)
    held.hold("events", "messages")
    for table in TABLES:
        a, b = getattr(scanned, table)().collect(), getattr(held, table)().collect()
        assert a.schema == b.schema and a.equals(b, null_equal=True), table
