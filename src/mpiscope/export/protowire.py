"""Protocol Buffers' wire format for many messages of one shape at once, with NumPy.

The Perfetto export writes two packets per MPI call; building each as a message object of
the protobuf runtime cost ~15 us per call, most of the export of 10^7 events. Its packets
have a few shapes, so a shape is described once (`message`, `varint`, `const`, `fixed64s`,
`blobs`) with one array of values per field, a row per instance, and `encode` writes all
rows with a few array operations per field: first every field's size (a length-delimited
field needs its content's), then the bytes at cursors that advance field by field. Fields
go in the order given; to equal what the runtime writes, give them in field-number order,
as it does. The result parses with the package's protos (tests compare the two
byte for byte).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

Int = npt.NDArray[np.int64]
U64 = npt.NDArray[np.uint64]
Mask = npt.NDArray[np.bool_]
Size = Int | int  # bytes per row; an int when every row has as many (no array to make)
_VARINT_LIMITS = np.array([1 << (7 * k) for k in range(1, 10)], dtype=np.uint64)


def key(number: int, wire_type: int) -> bytes:
    """A field's key: (number << 3) | wire type (0 varint, 1 fixed64, 2 length-delimited)."""
    return varint_bytes((number << 3) | wire_type)


def varint_bytes(value: int) -> bytes:
    """One value as a varint; a negative int64 as its two's complement (ten bytes)."""
    value &= (1 << 64) - 1
    out = bytearray()
    while True:
        out.append((value & 0x7F) | (0x80 if value > 0x7F else 0))
        value >>= 7
        if not value:
            return bytes(out)


def varint_size(v: U64) -> Size:
    """Bytes of each value's varint: one int when all need as many (timestamps of a chunk,
    small ids), which two reductions tell, instead of a search per value."""
    if v.size == 0:
        return 1
    lo, hi = np.searchsorted(_VARINT_LIMITS, [v.min(), v.max()], side="right")
    if lo == hi:
        return int(lo) + 1
    return np.searchsorted(_VARINT_LIMITS, v, side="right").astype(np.int64) + 1


def _at(size: Size, m: Mask | None) -> Size:
    """The rows of `m` of a size per row (an int: the same in every row)."""
    return size if m is None or isinstance(size, int) else size[m]


def as_u64(values: npt.ArrayLike) -> U64:
    """int64 (or smaller) values as the uint64 a varint encodes: negatives as two's complement."""
    a = np.asarray(values)
    if a.dtype == np.uint64:
        return a
    return a.astype(np.int64).view(np.uint64)


@dataclass(eq=False)
class Field:
    """One field of a message shape, present in the rows of `present` (all rows if None)."""

    key: bytes
    kind: str  # "varint", "const", "message", "fixed64s", "blobs"
    values: U64 | None = None  # varint: a value per row
    data: bytes = b""  # const: the key and value, encoded
    children: Sequence[Field] = ()  # message
    rows: Int | None = None  # fixed64s and blobs: the row of each item, ascending
    items: list[bytes] | None = None  # blobs: the bytes of each item
    present: Mask | None = None
    # filled by encode(): the effective mask, each row's size, and what writing needs
    _mask: Mask | None = field(default=None, repr=False)
    _size: Size = field(default=0, repr=False)
    _aux: Size = field(default=0, repr=False)
    _lensize: Size = field(default=0, repr=False)


def varint(k: bytes, values: npt.ArrayLike, present: Mask | None = None) -> Field:
    return Field(k, "varint", values=as_u64(values), present=present)


def const(data: bytes, present: Mask | None = None) -> Field:
    """Bytes equal in every row: a key with its value encoded (varint_bytes), or several."""
    return Field(b"", "const", data=data, present=present)


def message(k: bytes, children: Sequence[Field], present: Mask | None = None) -> Field:
    return Field(k, "message", children=children, present=present)


def fixed64s(k: bytes, rows: Int, values: npt.ArrayLike) -> Field:
    """A repeated fixed64 field (not packed, as proto2 writes it): value i in row rows[i]."""
    return Field(k, "fixed64s", values=as_u64(values), rows=np.asarray(rows, np.int64))


def blobs(rows: Int, items: list[bytes]) -> Field:
    """Bytes encoded elsewhere (rare fields, made by the protobuf runtime), item i in row rows[i]."""
    return Field(b"", "blobs", rows=np.asarray(rows, np.int64), items=items)


def _and(a: Mask | None, b: Mask | None) -> Mask | None:
    if a is None:
        return b
    return a if b is None else a & b


def _sizes(f: Field, n: int, mask: Mask | None) -> Size:
    m = f._mask = _and(mask, f.present)
    size: Size
    if f.kind == "const":
        size = len(f.data)
    elif f.kind == "varint":
        assert f.values is not None
        f._aux = varint_size(f.values)
        size = len(f.key) + f._aux
    elif f.kind == "message":
        inner: Size = 0
        for c in f.children:
            inner = inner + _sizes(c, n, m)
        f._aux = inner
        f._lensize = (
            len(varint_bytes(inner)) if isinstance(inner, int) else varint_size(inner.view(np.uint64))
        )
        size = len(f.key) + f._lensize + inner
    elif f.kind == "fixed64s":
        assert f.rows is not None
        f._aux = np.bincount(f.rows, minlength=n).astype(np.int64)
        size = f._aux * (len(f.key) + 8)
    else:  # blobs
        assert f.rows is not None and f.items is not None
        size = np.zeros(n, np.int64)
        np.add.at(size, f.rows, np.array([len(b) for b in f.items], np.int64))
    f._size = size if m is None else np.where(m, size, 0)
    return f._size


def _put_bytes(out: npt.NDArray[np.uint8], at: Int, data: bytes) -> None:
    for j, b in enumerate(data):  # keys and short constants: a scatter per byte
        out[at + j] = b


def _put_varints(out: npt.NDArray[np.uint8], at: Int, v: U64, sizes: Size) -> None:
    """Each v[i] as a varint of sizes[i] bytes at at[i]: byte k holds bits 7k..7k+6, with the
    high bit set when more bytes follow."""
    if isinstance(sizes, int):  # all as long: no masks
        for k in range(sizes):
            byte = ((v >> np.uint64(7 * k)) & np.uint64(0x7F)).astype(np.uint8)
            out[at + k] = byte | 0x80 if k + 1 < sizes else byte
        return
    k = 0
    while at.size:
        more = sizes > k + 1
        out[at + k] = (v & np.uint64(0x7F)).astype(np.uint8) | (more.astype(np.uint8) << 7)
        if not more.all():
            at, v, sizes = at[more], v[more], sizes[more]
        v = v >> np.uint64(7)
        k += 1


def _write(f: Field, out: npt.NDArray[np.uint8], start: Int) -> None:
    """Write field f of every row, where it starts in each row (`start`, all rows): a message's
    children start where the ones before them end, found with whole-array additions."""
    m = f._mask
    at = start if m is None else start[m]
    if f.kind == "const":
        _put_bytes(out, at, f.data)
    elif f.kind == "varint":
        assert f.values is not None
        _put_bytes(out, at, f.key)
        _put_varints(out, at + len(f.key), f.values if m is None else f.values[m], _at(f._aux, m))
    elif f.kind == "message":
        _put_bytes(out, at, f.key)
        if isinstance(f._aux, int):
            _put_bytes(out, at + len(f.key), varint_bytes(f._aux))
        else:
            inner = f._aux.view(np.uint64)
            _put_varints(out, at + len(f.key), inner if m is None else inner[m], _at(f._lensize, m))
        child = start + (len(f.key) + f._lensize)
        for c in f.children:
            _write(c, out, child)
            child = child + c._size
    elif f.kind == "fixed64s":
        assert f.rows is not None and f.values is not None and not isinstance(f._aux, int)
        width = len(f.key) + 8
        first = np.cumsum(f._aux) - f._aux  # index of each row's first item
        item_at = start[f.rows] + (np.arange(f.rows.size) - first[f.rows]) * width
        _put_bytes(out, item_at, f.key)
        if item_at.size:
            le = f.values.astype("<u8").view(np.uint8).reshape(-1, 8)
            out[(item_at + len(f.key))[:, None] + np.arange(8)] = le
    else:  # blobs: a few items, one at a time
        assert f.rows is not None and f.items is not None
        offset: dict[int, int] = {}
        for row, item in zip(f.rows.tolist(), f.items):
            at_row = int(start[row]) + offset.get(row, 0)
            out[at_row : at_row + len(item)] = np.frombuffer(item, np.uint8)
            offset[row] = offset.get(row, 0) + len(item)


def encode(fields: Sequence[Field], n: int) -> bytes:
    """`n` rows of `fields`, one row after the other."""
    if n == 0:
        return b""
    sizes = np.zeros(n, np.int64)
    for f in fields:
        sizes += _sizes(f, n, None)
    out = np.zeros(int(sizes.sum()), np.uint8)
    start = np.cumsum(sizes) - sizes
    for f in fields:
        _write(f, out, start)
        start = start + f._size
    return out.tobytes()
