"""Perfetto protobuf trace (ui.perfetto.dev, trace_processor) with the `perfetto`
package's protos.

A process track per rank with a thread track per recorded thread: one slice per MPI call
(its arguments as debug annotations), flows from each send to the call that delivered the
message, the nonblocking operations as async slices from start to completion (on as few
"nonblocking" lanes as overlap needs), and counters of the bytes each rank sent and
received per time bin. A Perfetto trace is a sequence of TracePacket fields, so packets
are written in batches as they are made (what the package's StreamingTraceProtoBuilder
does one packet at a time) and the ranks' parts, made in parallel, are concatenated.
"""

from __future__ import annotations

import heapq
import os
import shutil
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import numpy.typing as npt
import polars as pl
from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import (
    CounterDescriptor,
    Trace,
    TracePacket,
    TrackEvent,
)

from mpiscope.export import ExportResult, Progress, staged_output
from mpiscope.export import protowire as W
from mpiscope.export import streams as S
from mpiscope.export.pool import run_groups
from mpiscope.trace import Trace as MTrace
from mpiscope.trace import open_trace

BATCH = 20_000  # packets per serialized batch
COUNTER_BINS = 1000  # time bins of the byte counters over the whole trace
BEGIN, END, COUNTER = TrackEvent.TYPE_SLICE_BEGIN, TrackEvent.TYPE_SLICE_END, TrackEvent.TYPE_COUNTER
CLEARED, NEEDS = TracePacket.SEQ_INCREMENTAL_STATE_CLEARED, TracePacket.SEQ_NEEDS_INCREMENTAL_STATE
# the call's arguments shown on its slice (the rank-local request id is left out: the
# nonblocking lanes show what it ties together)
ARGS = ("comm", "peer", "tag", "bytes", "root", "coll_id")


def uuid(kind: int, rank: int, index: int = 0) -> int:
    """Track uuids: 1 process, 2 thread, 3 nonblocking lane, 4 bytes sent, 5 bytes received;
    small numbers, since every packet spells its track's uuid as a varint."""
    return (((rank << 20) | index) << 3) | kind


@dataclass(frozen=True)
class _Plan:
    trace_dir: str
    parts_dir: str
    t0: int
    bin_ns: int


class _Out:
    """Packets in batches: a serialized Trace holding N packets is N packet fields, so
    batches written one after the other form one trace."""

    def __init__(self, f: BinaryIO) -> None:
        self.f, self.trace, self.count = f, Trace(), 0

    def packet(self, ts: int, seq: int) -> Any:
        if len(self.trace.packet) >= BATCH:
            self.flush()
        p = self.trace.packet.add()
        p.timestamp, p.trusted_packet_sequence_id = ts, seq
        return p

    def raw(self, data: bytes, packets: int) -> None:
        """Packets encoded elsewhere (protowire), after those made so far."""
        self.flush()
        self.f.write(data)
        self.count += packets

    def flush(self) -> None:
        if len(self.trace.packet):
            self.f.write(self.trace.SerializeToString())
            self.count += len(self.trace.packet)
            self.trace = Trace()


def _header(out: _Out, trace: MTrace, threads: list[tuple[int, int]], bin_ns: int) -> None:
    hosts = trace.manifest.get("hosts", {})
    first: dict[int, int] = {}
    for rank, thread in sorted(threads):
        first.setdefault(rank, thread)
    for i, (rank, thread) in enumerate(sorted(threads)):
        if thread == first[rank]:
            d = out.packet(0, 1).track_descriptor
            d.uuid, d.process.pid = uuid(1, rank), rank + 1
            d.process.process_name = f"MPI rank {rank}" + (
                f" ({hosts[str(rank)]})" if str(rank) in hosts else ""
            )
            for kind, what in ((4, "sent"), (5, "received")):
                c = out.packet(0, 1).track_descriptor
                c.uuid, c.parent_uuid, c.name = (
                    uuid(kind, rank),
                    uuid(1, rank),
                    f"bytes {what} per {bin_ns} ns",
                )
                c.counter.unit = CounterDescriptor.UNIT_SIZE_BYTES
        d = out.packet(0, 1).track_descriptor
        d.uuid, d.parent_uuid = uuid(2, rank, thread), uuid(1, rank)
        d.thread.pid, d.thread.tid = rank + 1, 1_000_000 + i  # tids unique in the trace
        d.thread.thread_name = "main" if thread == 0 else f"thread {thread}"


def with_flows(ev: pl.DataFrame, sends: pl.DataFrame, recvs: pl.DataFrame) -> pl.DataFrame:
    """`ev` with flow ids (message id + 1) leaving each send call and ending at each call that
    delivered a message (its receive, or the Wait/Test that completed it)."""
    out = sends.group_by("send_event").agg((pl.col("msg") + 1).alias("fo"))
    done = S.completion_hosts(ev.lazy(), recvs.lazy(), "recv_event", "t_recv_leave_ns").collect()
    into = done.group_by("_done_host").agg((pl.col("msg") + 1).alias("fi"))
    return ev.join(out, left_on="event", right_on="send_event", how="left", maintain_order="left").join(
        into, left_on="event", right_on="_done_host", how="left", maintain_order="left"
    )


@dataclass
class _Interned:
    """A rank's sequence interns its call names, argument names and call sites: the first
    packet carries the tables (and clears the state), the others refer to them by iid."""

    calls: dict[str, int]
    args: dict[str, int]
    sites: dict[str, int]

    @classmethod
    def write(cls, out: _Out, seq: int, ev: pl.DataFrame) -> _Interned:
        table = cls(
            {c: i + 1 for i, c in enumerate(sorted(ev["call"].unique().to_list()))},
            {a: i + 1 for i, a in enumerate((*ARGS, "callsite"))},
            {c: i + 1 for i, c in enumerate(sorted(ev["callsite"].drop_nulls().unique().to_list()))},
        )
        p = out.packet(S.as_int(ev["t_enter_ns"].min()), seq)
        p.sequence_flags = CLEARED
        d = p.interned_data
        for name, iid in table.calls.items():
            d.event_names.add(iid=iid, name=name)
        for name, iid in table.args.items():
            d.debug_annotation_names.add(iid=iid, name=name)
        for site, iid in table.sites.items():
            d.debug_annotation_string_values.add(iid=iid, str=site.encode())
        return table


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


_DEBUG_ANNOTATION = W.key(4, 2)


def _items(lists: pl.Series) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """(row, value) of every item of a list column (null lists have none)."""
    counts = lists.list.len().fill_null(0).to_numpy()
    rows = np.repeat(np.arange(len(lists), dtype=np.int64), counts)
    return rows, lists.explode().drop_nulls().to_numpy().astype(np.int64)


def _slices(out: _Out, rank: int, seq: int, ev: pl.DataFrame, names: _Interned) -> int:
    """A BEGIN/END pair per call on its thread's track, encoded a chunk of calls at a time;
    returns the flows started."""
    n = ev.height
    track = W.varint(W.key(11, 0), (((rank << 20) | ev["thread"].to_numpy().astype(np.int64)) << 3) | 2)
    name = W.varint(W.key(10, 0), ev["call"].replace_strict(names.calls, return_dtype=pl.Int64).to_numpy())
    annotations = []
    for arg in ARGS:
        col = ev[arg]
        annotations.append(
            W.message(
                _DEBUG_ANNOTATION,
                [
                    W.const(W.key(1, 0) + W.varint_bytes(names.args[arg])),
                    W.varint(W.key(4, 0), col.fill_null(0).cast(pl.Int64).to_numpy()),
                ],
                present=col.is_not_null().to_numpy() if col.null_count() else None,
            )
        )
    site = ev["callsite"].cast(pl.Utf8)
    sited = (site.is_not_null() & (site != "")).to_numpy()
    has_site = None if sited.all() else sited
    site_iid = site.replace_strict(names.sites, default=0, return_dtype=pl.Int64).fill_null(0).to_numpy()
    annotations.append(
        W.message(
            _DEBUG_ANNOTATION,
            [
                W.const(W.key(1, 0) + W.varint_bytes(names.args["callsite"])),
                W.varint(W.key(17, 0), site_iid),
            ],
            present=has_site,
        )
    )
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
    out.raw(W.encode([begin, end], n), 2 * n)
    return int(fo.size)


@dataclass
class _Lanes:
    """A rank's "nonblocking" tracks: the lanes in use as end << 32 | lane number (one int
    compares and heaps faster than a tuple), and how many lanes exist."""

    busy: list[int] = field(default_factory=list)
    count: int = 0


def _assign_lanes(starts: list[int], ends: list[int], lanes: _Lanes) -> tuple[list[int], list[int]]:
    """Each operation's lane number: the lane that has been free longest, if free at its start,
    else a new one. Returns the lane numbers, and the operations that opened a new lane."""
    busy, out, new = lanes.busy, [], []
    for i, (start, end) in enumerate(zip(starts, ends)):
        if busy and busy[0] < start << 32:  # that lane's end < start
            lane = busy[0] & 0xFFFFFFFF
            heapq.heapreplace(busy, end << 32 | lane)
        else:
            lane = lanes.count
            lanes.count += 1
            new.append(i)
            heapq.heappush(busy, end << 32 | lane)
        out.append(lane)
    return out, new


def _async(out: _Out, rank: int, seq: int, ev: pl.DataFrame, names: _Interned, lanes: _Lanes) -> None:
    """Nonblocking operations from start to completion, each on the first lane free at its
    start; a lane's descriptor comes just before its first slice."""
    ops = ev.filter(pl.col("t_complete_ns").is_not_null() & (pl.col("t_complete_ns") > pl.col("t_leave_ns")))
    start, end = ops["t_enter_ns"].cast(pl.Int64), ops["t_complete_ns"].cast(pl.Int64)
    numbers, new = _assign_lanes(start.to_list(), end.to_list(), lanes)
    lane = ((rank << 20 | np.array(numbers, dtype=np.int64)) << 3) | 3  # uuid(3, rank, number)
    descriptors = []
    for i in new:
        p = TracePacket(timestamp=0, trusted_packet_sequence_id=seq)
        d = p.track_descriptor
        d.uuid, d.parent_uuid, d.name = int(lane[i]), uuid(1, rank), "nonblocking"
        descriptors.append(W.key(1, 2) + W.varint_bytes(p.ByteSize()) + p.SerializeToString())
    track = W.varint(W.key(11, 0), lane)
    name = W.varint(W.key(10, 0), ops["call"].replace_strict(names.calls, return_dtype=pl.Int64).to_numpy())
    begin = _packet(W.varint(W.key(8, 0), start.to_numpy()), seq, _track_event(BEGIN, track, name), NEEDS)
    end_packet = _packet(W.varint(W.key(8, 0), end.to_numpy()), seq, _track_event(END, track))
    rows = np.array(new, dtype=np.int64)
    out.raw(W.encode([W.blobs(rows, descriptors), begin, end_packet], ops.height), 2 * ops.height + len(new))


def _counters(
    out: _Out,
    trace: MTrace,
    rank: int,
    seq: int,
    ev: pl.DataFrame,
    sends: pl.DataFrame,
    recvs: pl.DataFrame,
    plan: _Plan,
) -> None:
    coll = S.with_recv_bytes(trace, ev.lazy().filter(pl.col("coll_id").is_not_null())).collect()
    flows = {
        4: [
            sends.select(pl.col("t_send_enter_ns").alias("t"), "bytes"),
            coll.select(pl.col("t_enter_ns").alias("t"), "bytes"),
        ],
        5: [
            recvs.select(pl.col("t_recv_leave_ns").alias("t"), pl.col("recv_bytes").alias("bytes")),
            coll.select(pl.col("t_leave_ns").alias("t"), pl.col("recv_bytes").alias("bytes")),
        ],
    }
    for kind, parts in flows.items():
        per_bin = (
            pl.concat([p.cast({"t": pl.Int64, "bytes": pl.Int64}) for p in parts])
            .group_by(((pl.col("t") - plan.t0) // plan.bin_ns).alias("bin"))
            .agg(pl.col("bytes").sum())
            .filter(pl.col("bytes") > 0)
            .sort("bin")
        )
        out.raw(*_counter_packets(seq, uuid(kind, rank), plan, per_bin["bin"], per_bin["bytes"]))


def _counter_packets(
    seq: int, track: int, plan: _Plan, bins: pl.Series, values: pl.Series
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
        ts = W.varint(W.key(8, 0), plan.t0 + at * plan.bin_ns)
        fields.append(_packet(ts, seq, W.message(W.key(11, 2), event), present=present))
    return W.encode(fields, b.size), b.size + int(gap.sum())


def _write_part(
    plan: _Plan, ranks: list[int], part: int, progress: Progress | None = None
) -> tuple[int, int]:
    """Packets of `ranks` into the part file `part`; returns (packets, flows)."""
    trace = open_trace(plan.trace_dir, merge=False)
    flows = 0
    with open(Path(plan.parts_dir) / f"{part:06d}.pb", "wb") as f:
        out = _Out(f)
        for data in S.iter_rank_data(trace, ranks):
            rank, messages = data.rank, data.messages
            seq = rank + 2  # sequence 1 is the header's
            ev = data.events
            sends, recvs = S.rank_messages(trace, rank, messages)
            ev = with_flows(ev, sends, recvs)
            names = _Interned.write(out, seq, ev)
            lanes = _Lanes()
            for chunk in ev.iter_slices(S.CHUNK):  # Python lists of a chunk at a time
                flows += _slices(out, rank, seq, chunk, names)
                _async(out, rank, seq, chunk, names, lanes)
            _counters(out, trace, rank, seq, ev, sends, recvs, plan)
            if progress:
                progress(ev.height)
        out.flush()
    return out.count, flows


def export_perfetto(
    trace: MTrace,
    out: Path,
    force: bool = False,
    progress: Progress | None = None,
    workers: int | None = None,
) -> ExportResult:
    """Write the trace as a Perfetto protobuf file `out` (open it in ui.perfetto.dev)."""
    t_start = time.perf_counter()
    spans = S.thread_spans(trace)
    t0, t1 = S.as_int(spans["t0"].min()), S.as_int(spans["t1"].max())
    bin_ns = max(1, -(-(t1 - t0) // COUNTER_BINS))
    per_rank = spans.group_by("rank").agg(pl.col("n").sum()).sort("rank")
    with staged_output(out, force, is_dir=False) as stage:
        parts_dir = tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".parts", dir=stage.parent)
        try:
            plan = _Plan(str(trace.path), parts_dir, t0, bin_ns)
            results = run_groups(_write_part, (plan,), list(per_rank.iter_rows()), progress, workers)
            with open(stage, "wb") as f:
                head = _Out(f)
                _header(
                    head,
                    trace,
                    [(int(r), int(t)) for r, t in spans.select("rank", "thread").iter_rows()],
                    bin_ns,
                )
                head.flush()
                for i in range(len(results)):
                    with open(Path(parts_dir) / f"{i:06d}.pb", "rb") as part:
                        shutil.copyfileobj(part, f, 1 << 22)
                    os.unlink(Path(parts_dir) / f"{i:06d}.pb")
        finally:
            shutil.rmtree(parts_dir, ignore_errors=True)
    return ExportResult(
        "perfetto",
        out,
        S.as_int(spans["n"].sum()),
        head.count + sum(n for n, _ in results),
        time.perf_counter() - t_start,
    )
