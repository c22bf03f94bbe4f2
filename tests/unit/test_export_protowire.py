"""protowire writes what the protobuf runtime writes: byte for byte, for random rows with
absent fields, negative int64s (ten-byte varints), repeated fixed64s, pre-encoded items and
messages longer than 127 bytes (two-byte lengths)."""

from __future__ import annotations

import numpy as np
from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import Trace, TracePacket

from mpiscope.export import protowire as W


def test_rows_equal_the_runtime() -> None:
    rng = np.random.default_rng(20)
    n = 500
    ts = rng.integers(0, 2**62, n)
    value = rng.integers(-300, 300, n)
    has = rng.random(n) < 0.5
    many = rng.random(n) < 0.1  # rows with 20 annotations: a length of two bytes
    rows = np.sort(rng.integers(0, n, 200))
    flows = rng.integers(0, 2**64 - 1, 200, dtype=np.uint64)
    extra_rows = np.sort(rng.choice(n, 20, replace=False))
    descriptors = {}
    for r in extra_rows.tolist():
        p = descriptors[r] = TracePacket(timestamp=r, trusted_packet_sequence_id=3)
        p.track_descriptor.uuid, p.track_descriptor.name = r, "nonblocking"
    extras = [
        W.key(1, 2) + W.varint_bytes(p.ByteSize()) + p.SerializeToString() for p in descriptors.values()
    ]

    def annotation(present: np.ndarray) -> W.Field:
        return W.message(W.key(4, 2), [W.const(b"\x08\x01"), W.varint(W.key(4, 0), value)], present=present)

    event = W.message(
        W.key(11, 2),
        [
            annotation(has),
            *(annotation(many) for _ in range(19)),
            W.const(W.key(9, 0) + W.varint_bytes(1)),
            W.varint(W.key(11, 0), value * 1000, present=~has),
            W.fixed64s(W.key(47, 1), rows, flows),
        ],
    )
    packet = W.message(
        W.key(1, 2), [W.varint(W.key(8, 0), ts), W.const(b"\x50\x07"), event, W.const(b"\x68\x02")]
    )
    got = W.encode([W.blobs(extra_rows, extras), packet], n)

    want = Trace()
    for i in range(n):
        if i in descriptors:
            want.packet.add().CopyFrom(descriptors[i])
        e = want.packet.add(timestamp=int(ts[i]), trusted_packet_sequence_id=7, sequence_flags=2).track_event
        for _ in range(int(has[i]) + 19 * int(many[i])):
            e.debug_annotations.add(name_iid=1, int_value=int(value[i]))
        e.type = 1
        if not has[i]:
            e.track_uuid = int(value[i] * 1000) & (2**64 - 1)
        e.flow_ids.extend(int(f) for f in flows[rows == i])
    assert got == want.SerializeToString()


def test_varints() -> None:
    v = np.array([0, 127, 128, 2**14 - 1, 2**14, 2**63 - 1, 2**64 - 1], dtype=np.uint64)
    assert W.varint_size(v).tolist() == [len(W.varint_bytes(int(x))) for x in v] == [1, 1, 2, 2, 3, 9, 10]
    assert W.varint_bytes(-1) == b"\xff" * 9 + b"\x01"
    assert W.encode([], 0) == b""
