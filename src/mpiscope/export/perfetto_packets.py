"""The TracePackets of the Perfetto export that come by the thousand (a BEGIN/END pair per
call, the nonblocking operations' async slices, the byte counters), as protowire shapes:
encoded a chunk of calls at a time with NumPy, byte for byte what the protobuf runtime
writes for the same packets (fields in field-number order), at a fraction of its cost
per packet. The few other packets (descriptors, interned data) are the runtime's.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
import polars as pl
from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import TracePacket, TrackEvent

from mpiscope.export import protowire as W

BEGIN, END, COUNTER = TrackEvent.TYPE_SLICE_BEGIN, TrackEvent.TYPE_SLICE_END, TrackEvent.TYPE_COUNTER
NEEDS = TracePacket.SEQ_NEEDS_INCREMENTAL_STATE
# the call's arguments shown on its slice (the rank-local request id is left out: the
# nonblocking lanes show what it ties together)
ARGS = ("comm", "peer", "tag", "bytes", "root", "coll_id")
_DEBUG_ANNOTATION = W.key(4, 2)


def uuid(kind: int, rank: int, index: int = 0) -> int:
    """Track uuids: 1 process, 2 thread, 3 nonblocking lane, 4 bytes sent, 5 bytes received;
    small numbers, since every packet spells its track's uuid as a varint."""
    return (((rank << 20) | index) << 3) | kind


def _track_event(
    typ: int,
    track: W.Field,
    name: W.Field | None = None,
    annotations: Sequence[W.Field] = (),
    flows: Sequence[W.Field] = (),
) -> W.Field:
    """A TrackEvent in field-number order: debug annotations (4), type (9), name_iid (10),
    track_uuid (11), flow_ids (47), terminating_flow_ids (48)."""
    typ_field = W.const(W.key(9, 0) + W.varint_bytes(typ))
    return W.message(W.key(11, 2), [*annotations, typ_field, *([name] if name else []), track, *flows])


def _packet(
    ts: W.Field, seq: int, event: W.Field, flags: int | None = None, present: W.Mask | None = None
) -> W.Field:
    """A TracePacket with a track event: timestamp (8), sequence id (10), event (11), flags (13)."""
    fields = [ts, W.const(W.key(10, 0) + W.varint_bytes(seq)), event]
    if flags is not None:
        fields.append(W.const(W.key(13, 0) + W.varint_bytes(flags)))
    return W.message(W.key(1, 2), fields, present=present)


def _items(lists: pl.Series) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """(row, value) of every item of a list column (null lists have none)."""
    counts = lists.list.len().fill_null(0).to_numpy()
    rows = np.repeat(np.arange(len(lists), dtype=np.int64), counts)
    return rows, lists.explode().drop_nulls().to_numpy().astype(np.int64)


def _annotation(iid: int, value_key: bytes, values: npt.ArrayLike, present: W.Mask | None) -> W.Field:
    """A DebugAnnotation: name_iid (1), then the value (int_value 4, string_value_iid 17)."""
    name = W.const(W.key(1, 0) + W.varint_bytes(iid))
    return W.message(_DEBUG_ANNOTATION, [name, W.varint(value_key, values)], present=present)


def call_slices(
    rank: int, seq: int, ev: pl.DataFrame, calls: dict[str, int], args: dict[str, int], sites: dict[str, int]
) -> tuple[bytes, int, int]:
    """A BEGIN/END pair per call of `ev` (with_flows' columns) on its thread's track, names and
    call sites as interned; returns the packets, how many, and the flows they start."""
    track = W.varint(W.key(11, 0), (((rank << 20) | ev["thread"].to_numpy().astype(np.int64)) << 3) | 2)
    name = W.varint(W.key(10, 0), ev["call"].replace_strict(calls, return_dtype=pl.Int64).to_numpy())
    annotations = []
    for arg in ARGS:
        col = ev[arg]
        present = col.is_not_null().to_numpy() if col.null_count() else None
        annotations.append(
            _annotation(args[arg], W.key(4, 0), col.fill_null(0).cast(pl.Int64).to_numpy(), present)
        )
    site = ev["callsite"].cast(pl.Utf8)
    sited = (site.is_not_null() & (site != "")).to_numpy()
    site_iid = site.replace_strict(sites, default=0, return_dtype=pl.Int64).fill_null(0).to_numpy()
    annotations.append(_annotation(args["callsite"], W.key(17, 0), site_iid, None if sited.all() else sited))
    fo_rows, fo = _items(ev["fo"])
    fi_rows, fi = _items(ev["fi"])
    flows = [W.fixed64s(W.key(47, 1), fo_rows, fo), W.fixed64s(W.key(48, 1), fi_rows, fi)]
    begin = _packet(
        W.varint(W.key(8, 0), ev["t_enter_ns"].cast(pl.Int64).to_numpy()),
        seq,
        _track_event(BEGIN, track, name, annotations, flows),
        NEEDS,
    )
    end = _packet(
        W.varint(W.key(8, 0), ev["t_leave_ns"].cast(pl.Int64).to_numpy()), seq, _track_event(END, track)
    )
    return W.encode([begin, end], ev.height), 2 * ev.height, int(fo.size)


def async_slices(
    rank: int, seq: int, ops: pl.DataFrame, lane: npt.NDArray[np.int64], new: list[int], calls: dict[str, int]
) -> tuple[bytes, int]:
    """Each nonblocking operation of `ops` as a slice from its start to its completion on the
    lane (uuid) given, after its lane's descriptor if it opened the lane (`new`)."""
    descriptors = []
    for i in new:
        p = TracePacket(timestamp=0, trusted_packet_sequence_id=seq)
        d = p.track_descriptor
        d.uuid, d.parent_uuid, d.name = int(lane[i]), uuid(1, rank), "nonblocking"
        descriptors.append(W.key(1, 2) + W.varint_bytes(p.ByteSize()) + p.SerializeToString())
    track = W.varint(W.key(11, 0), lane)
    name = W.varint(W.key(10, 0), ops["call"].replace_strict(calls, return_dtype=pl.Int64).to_numpy())
    start = W.varint(W.key(8, 0), ops["t_enter_ns"].cast(pl.Int64).to_numpy())
    end = W.varint(W.key(8, 0), ops["t_complete_ns"].cast(pl.Int64).to_numpy())
    begin = _packet(start, seq, _track_event(BEGIN, track, name), NEEDS)
    rows = [
        W.blobs(np.array(new, dtype=np.int64), descriptors),
        begin,
        _packet(end, seq, _track_event(END, track)),
    ]
    return W.encode(rows, ops.height), 2 * ops.height + len(new)


def counter_packets(
    seq: int, track: int, t0: int, bin_ns: int, bins: pl.Series, values: pl.Series
) -> tuple[bytes, int]:
    """A counter's packets: each bin's value, then 0 in the next bin unless that one has a
    value of its own (bins sorted, distinct); returns them encoded, and how many."""
    if bins.is_empty():
        return b"", 0
    b, v = bins.to_numpy().astype(np.int64), values.to_numpy().astype(np.int64)
    gap = np.append(b[1:] != b[:-1] + 1, True)
    fields = []
    for at, value, present in ((b, v, None), (b + 1, np.zeros_like(v), gap)):
        event = [W.const(W.key(9, 0) + W.varint_bytes(COUNTER) + W.key(11, 0) + W.varint_bytes(track))]
        event.append(W.varint(W.key(30, 0), value))
        ts = W.varint(W.key(8, 0), t0 + at * bin_ns)
        fields.append(_packet(ts, seq, W.message(W.key(11, 2), event), present=present))
    return W.encode(fields, b.size), b.size + int(gap.sum())
