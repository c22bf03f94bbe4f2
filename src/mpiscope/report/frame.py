"""The "MSF1" frame file of docs/report-protocol.md: named tables of typed columns, zlib-compressed.

    "MSF1"  u32 header_len  header JSON (padded with spaces to a multiple of 8)  buffers

Every buffer starts 8-byte aligned, so the page can view it as a typed array
without copying; the page inflates the blob with DecompressionStream("deflate"),
which takes zlib's format (RFC 1950), i.e. what zlib.compress writes.
"""

from __future__ import annotations

import base64
import json
import struct
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from mpiscope.errors import TraceCorrupt

MAGIC = b"MSF1"
DTYPES = {"u8": "<u1", "u16": "<u2", "u32": "<u4", "i32": "<i4", "f32": "<f4", "f64": "<f8"}
_NAME_OF = {np.dtype(v).str: k for k, v in DTYPES.items()}
# Level 1 for event tiles, encoded while the user waits (view) or by the hundred (report):
# on the bench trace level 6 made them 7 % smaller (211 vs 228 kB) in 4x the time (43 vs 11 ms).
LEVEL = 1

Table = Mapping[str, np.ndarray]


@dataclass(frozen=True)
class Frame:
    attrs: dict[str, Any]
    tables: dict[str, dict[str, np.ndarray]]


def _pad8(n: int) -> int:
    return -n % 8


def pack(tables: Mapping[str, Table], attrs: Mapping[str, Any] | None = None) -> bytes:
    """The frame file, uncompressed. Columns must have a protocol dtype and, per table, one length."""
    layout: dict[str, Any] = {}
    chunks: list[bytes] = []
    offset = 0
    for tname, cols in tables.items():
        rows = {len(c) for c in cols.values()}
        if len(rows) > 1:
            raise ValueError(f"columns of table {tname} differ in length: {sorted(rows)}")
        spec: dict[str, list[Any]] = {}
        for cname, col in cols.items():
            dt = _NAME_OF.get(np.dtype(col.dtype).newbyteorder("<").str)
            if dt is None:
                raise ValueError(f"column {tname}.{cname} has dtype {col.dtype}, not one of {list(DTYPES)}")
            data = np.ascontiguousarray(col, dtype=DTYPES[dt]).tobytes()
            spec[cname] = [dt, offset]
            chunks.append(data + b"\0" * _pad8(len(data)))
            offset += len(data) + _pad8(len(data))
        layout[tname] = {"rows": rows.pop() if rows else 0, "columns": spec}
    header = json.dumps(
        {"attrs": dict(attrs or {}), "tables": layout}, separators=(",", ":"), allow_nan=False
    ).encode()
    header += b" " * _pad8(len(header))
    return b"".join([MAGIC, struct.pack("<I", len(header)), header, *chunks])


def encode(tables: Mapping[str, Table], attrs: Mapping[str, Any] | None = None, level: int = LEVEL) -> bytes:
    """The frame file, zlib-compressed: a tile as the server sends it."""
    return zlib.compress(pack(tables, attrs), level)


def b64(blob: bytes) -> str:
    """A tile as a report embeds it."""
    return base64.b64encode(blob).decode("ascii")


def unpack(raw: bytes) -> Frame:
    """The inverse of pack (tests, tools): views of the buffers, no copies."""
    if raw[:4] != MAGIC or len(raw) < 8:
        raise TraceCorrupt("not an MSF1 frame (bad magic); rebuild the report or clear the view cache")
    (hlen,) = struct.unpack_from("<I", raw, 4)
    header = json.loads(raw[8 : 8 + hlen])
    base = 8 + hlen
    tables: dict[str, dict[str, np.ndarray]] = {}
    for tname, spec in header["tables"].items():
        rows = int(spec["rows"])
        tables[tname] = {
            c: np.frombuffer(raw, DTYPES[dt], rows, base + off) for c, (dt, off) in spec["columns"].items()
        }
    return Frame(header["attrs"], tables)


def decode(blob: bytes | str) -> Frame:
    """A compressed tile (bytes, or base64 text as in a report) back to tables."""
    data = base64.b64decode(blob) if isinstance(blob, str) else blob
    return unpack(zlib.decompress(data))
