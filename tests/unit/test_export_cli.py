"""`mpiscope export` on a generated trace: CSV tables, the JSON summary, and bad input
(not a trace, unknown format, output exists without --force, unwritable place, full disk,
interruption): one sentence each, nothing half-written left."""

from __future__ import annotations

import errno
import json
from pathlib import Path

import polars as pl
import pytest
from tests.conftest import merged_halo, mpiscope_cli

from mpiscope.errors import UsageError
from mpiscope.export.chrome import export_chrome
from mpiscope.export.otf2 import export_otf2
from mpiscope.export.perfetto import export_perfetto
from mpiscope.export.tabular import export_csv
from mpiscope.trace import TABLES, Trace

EXPORTERS = {
    "otf2": export_otf2,
    "perfetto": export_perfetto,
    "chrome-json": export_chrome,
    "csv": export_csv,
}


@pytest.fixture(scope="module")
def halo(tmp_path_factory: pytest.TempPathFactory) -> Trace:
    return merged_halo(tmp_path_factory.mktemp("halo"), 4, 2000)


def one_sentence_error(done: object, code: int) -> str:
    assert done.returncode == code, done.stderr
    err = done.stderr.strip()
    assert "Traceback" not in err and len(err.splitlines()) == 1 and err.startswith("error: "), err
    return str(err)


def test_csv_tables(halo: Trace, tmp_path: Path) -> None:
    done = mpiscope_cli(
        ["export", str(halo.path), "--format", "csv", "-o", str(tmp_path / "csv"), "--json", "-"]
    )
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["schema"] == "mpiscope.export/1" and summary["run_id"] == "synthetic"
    for name in TABLES:
        table = getattr(halo, name)().collect()
        csv = pl.read_csv(tmp_path / "csv" / f"{name}.csv", infer_schema=False)
        assert csv.columns == table.columns and csv.height == table.height, name
    assert summary["records"] == sum(getattr(halo, n)().select(pl.len()).collect().item() for n in TABLES)
    comms = pl.read_csv(tmp_path / "csv" / "comms.csv", infer_schema=False)
    assert comms.filter(pl.col("comm") == "0")["ranks"].to_list() == ["0 1 2 3"]


def test_not_a_trace(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    err = one_sentence_error(
        mpiscope_cli(["export", str(tmp_path / "empty"), "--format", "otf2", "-o", str(tmp_path / "out")]), 3
    )
    assert "not an mpiscope trace" in err and not (tmp_path / "out").exists()


def test_unknown_format(halo: Trace, tmp_path: Path) -> None:
    err = one_sentence_error(
        mpiscope_cli(["export", str(halo.path), "--format", "vtf", "-o", str(tmp_path / "x")]), 2
    )
    assert "otf2, perfetto, chrome-json, csv" in err


@pytest.mark.parametrize("fmt", list(EXPORTERS))
def test_existing_output_kept_without_force(halo: Trace, tmp_path: Path, fmt: str) -> None:
    out = tmp_path / "out"
    if fmt in ("otf2", "csv"):
        out.mkdir()
        (out / "keep").write_text("mine")
    else:
        out.write_text("mine")
    with pytest.raises(UsageError, match="already exists; choose another -o or add --force"):
        EXPORTERS[fmt](halo, out)
    assert (out / "keep" if out.is_dir() else out).read_text() == "mine"
    EXPORTERS[fmt](halo, out, force=True)
    assert not (out / "keep").exists() and out.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]  # no staging left


def test_existing_output_cli(halo: Trace, tmp_path: Path) -> None:
    (tmp_path / "t.pftrace").write_text("mine")
    err = one_sentence_error(
        mpiscope_cli(["export", str(halo.path), "--format", "perfetto", "-o", str(tmp_path / "t.pftrace")]), 2
    )
    assert "--force" in err and (tmp_path / "t.pftrace").read_text() == "mine"


def test_unwritable_place(halo: Trace, tmp_path: Path) -> None:
    err = one_sentence_error(
        mpiscope_cli(
            ["export", str(halo.path), "--format", "perfetto", "-o", str(tmp_path / "missing" / "t.pftrace")]
        ),
        2,
    )
    assert "does not exist" in err
    err = one_sentence_error(
        mpiscope_cli(["export", str(halo.path), "--format", "csv", "-o", "/proc/mpiscope-csv"]), 2
    )
    assert "cannot write /proc/mpiscope-csv" in err


@pytest.mark.parametrize("fmt", list(EXPORTERS))
def test_full_disk_leaves_nothing(halo: Trace, tmp_path: Path, fmt: str) -> None:
    """A write failing with ENOSPC in the middle of the export (raised where the exporter
    reports progress): one sentence, no output, no staging files."""

    def full(n: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    with pytest.raises(UsageError, match=r"the disk is full\); nothing was written"):
        EXPORTERS[fmt](halo, tmp_path / "out", progress=full)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("fmt", list(EXPORTERS))
def test_interrupted_export_leaves_nothing(halo: Trace, tmp_path: Path, fmt: str) -> None:
    (tmp_path / "out").mkdir() if fmt in ("otf2", "csv") else (tmp_path / "out").write_text("old")

    def interrupt(n: int) -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        EXPORTERS[fmt](halo, tmp_path / "out", force=True, progress=interrupt)
    assert [p.name for p in tmp_path.iterdir()] == ["out"]  # the old output, untouched


@pytest.mark.parametrize("fmt", ["otf2", "csv"])
def test_export_bigger_than_the_free_space_is_refused_before_writing(
    halo: Trace, tmp_path: Path, fmt: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The free space is checked against the fewest bytes a call takes in the format: refused in
    one sentence before a byte is written, not after the disk is full."""
    import shutil

    from mpiscope import export
    from mpiscope.cli import main

    calls = int(halo.manifest["counts"]["events"])
    room = calls * export.MIN_BYTES_PER_CALL[fmt] - 1
    real = shutil.disk_usage
    monkeypatch.setattr(shutil, "disk_usage", lambda p: real(p)._replace(free=room))
    assert main(["export", str(halo.path), "--format", fmt, "-o", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert f"the {fmt} export of {calls:,} calls takes at least" in err and "free space" in err
    assert "\n" not in err and list(tmp_path.iterdir()) == []
    monkeypatch.setattr(shutil, "disk_usage", lambda p: real(p)._replace(free=room + 1))
    assert main(["export", str(halo.path), "--format", fmt, "-o", str(tmp_path / "out")]) == 0


@pytest.mark.parametrize("fmt", ["otf2", "perfetto"])
def test_workers_that_the_memory_cannot_hold_are_not_started(
    halo: Trace, tmp_path: Path, fmt: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each worker holds one rank at a time: as many start as the memory holds with the longest
    rank (here one: the export runs in this process), and none is refused in one sentence."""
    from mpiscope.export import otf2, perfetto, pool

    per_call = {"otf2": otf2.BYTES_PER_CALL, "perfetto": perfetto.BYTES_PER_CALL}[fmt]
    spans = halo.events().group_by("rank").len().collect().rows()
    one = pool.process_bytes(spans, per_call)
    monkeypatch.setattr(pool, "INLINE_EVENTS", 0)
    monkeypatch.setattr(pool, "available_memory", lambda: 2 * one - 1)
    monkeypatch.setattr(pool, "ProcessPoolExecutor", None)  # a started worker would fail here
    EXPORTERS[fmt](halo, tmp_path / "out", workers=2)
    assert "runs on 1 process instead of 2" in capsys.readouterr().err
    monkeypatch.setattr(pool, "available_memory", lambda: one - 1)
    with pytest.raises(UsageError) as e:
        EXPORTERS[fmt](halo, tmp_path / "again", workers=2)
    assert "holds one rank's calls at a time, and rank" in str(e.value) and "\n" not in str(e.value)
    assert [p.name for p in tmp_path.iterdir()] == ["out"]
