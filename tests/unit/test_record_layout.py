"""The C record layout (record.h) and the NumPy dtypes (trace/record.py) agree."""

from __future__ import annotations

import shutil
import subprocess

from tests.conftest import ROOT, require

from mpiscope.trace import record as R

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
            assert consts == {"header": R.HEADER_BYTES, "block": R.BLOCK_BYTES, "recs": R.RECS_PER_BLOCK,
                              "magic": R.FILE_MAGIC}
            continue
        struct, field, value = line.split()
        dtype = DTYPES[struct]
        if field == "sizeof":
            assert dtype.itemsize == int(value), struct
        else:
            assert dtype.fields[field][1] == int(value), f"{struct}.{field}"
        seen += 1
    assert seen > 40
