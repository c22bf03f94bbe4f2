"""Recorded traces read through open_trace as they did before issue 22's storage: each merged
again with the tables written as before (every integer delta-encoded, every time absolute) gives,
column for column and row for row, what the merge of `mpiscope run` wrote with today's writer."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import polars as pl
import pytest
from tests.unit.test_storage import assert_read_as_before, with_old_writer

from mpiscope.trace import Trace, table_files
from mpiscope.trace.merge import merge_trace

# halo: nonblocking point-to-point, Waitall, Allreduce on a Cartesian communicator; nbc: every
# nonblocking collective, completed by Wait, Waitall or a Test loop; wildcard: ANY_SOURCE/ANY_TAG
# receives; persistent: persistent collectives and partitioned communication.
EXAMPLES = [("halo", ["30", "16"]), ("nbc", []), ("wildcard", ["8"]), ("persistent", [])]


@pytest.mark.mpi(ranks=4)
@pytest.mark.parametrize(("name", "args"), EXAMPLES)
def test_recorded_traces_read_as_before(run_traced: Callable[..., Trace], tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch, name: str, args: list[str]) -> None:
    new = run_traced(name, 4, args=args).path
    assert "t_leave_ns-t_enter_ns" in pl.read_parquet_schema(table_files(new, "events")[0])
    old = tmp_path / "old"
    shutil.copytree(new, old)
    with monkeypatch.context() as m:
        with_old_writer(m)
        merge_trace(old)
    assert_read_as_before(old, new)
