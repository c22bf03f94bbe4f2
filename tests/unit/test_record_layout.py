"""The C record layout (record.h) and the NumPy dtypes (trace/record.py) agree."""

from __future__ import annotations

import shutil
import subprocess

import numpy as np
from tests.conftest import ROOT, require

from mpiscope.trace import record as R
from mpiscope.trace.reader import read_rank_file
from mpiscope.trace.synthetic import write_rank_file

PROBE = ROOT / "src" / "mpiscope" / "native" / "probe" / "layout.c"
DTYPES = {"msc_rec": R.REC_DTYPE, "msc_block_header": R.BLOCK_HEADER_DTYPE, "msc_commdef": R.COMMDEF_DTYPE,
          "msc_file_header": R.FILE_HEADER_DTYPE}


def test_layout_matches_dtypes(tmp_path):
    cc = shutil.which("cc") or shutil.which("gcc")
    require(cc is not None, "a C compiler", "apt-get install gcc")
    exe = tmp_path / "layout"
    subprocess.run([cc, "-std=c11", "-Wall", "-Werror", str(PROBE), "-o", str(exe)], check=True)
    seen = 0
    for line in subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.splitlines():
        if line.startswith("constants"):
            words = line.split()[1:]
            consts = dict(zip(words[::2], map(int, words[1::2])))
            assert consts == {"version": R.FORMAT_VERSION, "page": R.HEADER_PAGE, "header": R.HEADER_BYTES,
                              "block": R.BLOCK_BYTES, "recs": R.RECS_PER_BLOCK, "magic": R.FILE_MAGIC}
            assert R.GEOMETRY[R.FORMAT_VERSION] == (R.HEADER_BYTES, R.BLOCK_BYTES)
            continue
        struct, field, value = line.split()
        dtype = DTYPES[struct]
        if field == "sizeof":
            assert dtype.itemsize == int(value), struct
        else:
            assert dtype.fields[field][1] == int(value), f"{struct}.{field}"
        seen += 1
    assert seen > 40


def test_reader_takes_both_block_layouts(tmp_path):
    """Formats 2 and 3 put blocks at 2 MiB-aligned offsets; traces of format 1
    (1 MiB blocks right after the header page) still read, record for record."""
    recs = np.zeros(50_000, R.REC_DTYPE)  # more than one block of either format
    recs["call"] = 20
    recs["t_enter"] = np.arange(recs.size) * 100 + 1
    recs["t_leave"] = recs["t_enter"] + 50
    for version in (1, 2, 3):
        path = tmp_path / str(version) / "rank-000000.msc"
        path.parent.mkdir()
        write_rank_file(path, 0, 1, recs, version=version)
        got = read_rank_file(path, 300)
        assert not any("block" in w for w in got.warnings), got.warnings
        assert np.array_equal(got.records, recs), version
        assert len(got.blocks) == -(-recs.size // R.layout(version)[2])


def _block_at(path, index: int) -> np.ndarray:
    """A writable view of block `index` of a format-3 rank file (header + records)."""
    data = np.memmap(path, dtype=np.uint8, mode="r+")
    return data[R.HEADER_BYTES + index * R.BLOCK_BYTES: R.HEADER_BYTES + (index + 1) * R.BLOCK_BYTES]


def test_a_block_found_twice_is_read_once_from_its_fuller_copy(tmp_path):
    """The recorder copies each full block out of its ring slot before zeroing
    the slot (records first): a killed rank can leave a block twice, whole in
    one place and partly zeroed, or not yet written, in the other."""
    per = R.RECS_PER_BLOCK
    recs = np.zeros(3 * per, R.REC_DTYPE)
    recs["call"] = 20
    recs["t_enter"] = np.arange(recs.size) * 100 + 1
    recs["t_leave"] = recs["t_enter"] + 50
    path = tmp_path / "rank-000000.msc"
    write_rank_file(path, 0, 1, recs)
    with open(path, "r+b") as f:  # room for two more blocks
        f.truncate(R.HEADER_BYTES + 5 * R.BLOCK_BYTES)
    # block 3: a slot of seq 0 whose records the writer had begun to zero
    slot = _block_at(path, 3)
    slot[:] = _block_at(path, 0)
    slot[R.BLOCK_HEADER_BYTES: R.BLOCK_HEADER_BYTES + 100 * R.REC_BYTES] = 0
    # block 4: a copy of seq 1 that was never written but its header (fewer records)
    _block_at(path, 4)[: R.BLOCK_HEADER_BYTES] = _block_at(path, 1)[: R.BLOCK_HEADER_BYTES]
    # block 1 holds seq 1 whole; make block 2 (seq 2) the slot still being filled: not sealed
    _block_at(path, 2)[R.BLOCK_HEADER_BYTES + 10 * R.REC_BYTES:] = 0
    _block_at(path, 2)[R.BLOCK_CRC_BYTES: R.BLOCK_CRC_BYTES + 8] = 0
    got = read_rank_file(path, 300)
    assert not any("block" in w for w in got.warnings), got.warnings
    assert not got.damage and not got.gaps
    assert [b.size for b in got.blocks] == [per, per, 10]
    assert np.array_equal(got.records, recs[: 2 * per + 10])
    # two calibration pairs per sealed block; the unsealed block's pairs are zero, which no clock gives
    assert got.block_ticks.size == 4
