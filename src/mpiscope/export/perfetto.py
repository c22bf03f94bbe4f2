"""Perfetto protobuf trace (ui.perfetto.dev, trace_processor) with the `perfetto`
package's protos.

A process track per rank with a thread track per recorded thread: one slice per MPI call
(its arguments as debug annotations), flows from each send to the call that delivered the
message, the nonblocking operations as async slices from start to completion (on as few
"nonblocking" lanes as overlap needs), and counters of the bytes each rank sent and
received per time bin (messages, collectives, and one-sided: what its puts, accumulates and
atomics carried out, what its gets brought in). A Perfetto trace is a sequence of TracePacket fields, so packets
are written in batches as they are made (what the package's StreamingTraceProtoBuilder
does one packet at a time) and the ranks' parts, made in parallel, are concatenated. The
packets that come one or two per call are encoded a chunk of calls at a time
(perfetto_packets.py); the few others are the protobuf runtime's messages.
"""

from __future__ import annotations

import errno
import heapq
import os
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import polars as pl
from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import CounterDescriptor, Trace, TracePacket

from mpiscope.analysis.stats import RMA_GET_CALLS, RMA_PUT_CALLS
from mpiscope.export import ExportResult, Progress, staged_output
from mpiscope.export import streams as S
from mpiscope.export.perfetto_packets import ARGS, async_slices, call_slices, counter_packets, uuid
from mpiscope.export.pool import run_groups
from mpiscope.trace import Trace as MTrace
from mpiscope.trace import open_trace

BATCH = 20_000  # packets per serialized batch
BYTES_PER_CALL = 750  # a worker's memory per call of its longest rank (pool.py)
COUNTER_BINS = 1000  # time bins of the byte counters over the whole trace
CLEARED = TracePacket.SEQ_INCREMENTAL_STATE_CLEARED
__all__ = ["ARGS", "export_perfetto", "uuid", "with_flows"]  # ARGS, uuid: chrome.py, tests


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
    numbers, new = _assign_lanes(ops["t_enter_ns"].to_list(), ops["t_complete_ns"].to_list(), lanes)
    lane = ((rank << 20 | np.array(numbers, dtype=np.int64)) << 3) | 3  # uuid(3, rank, number)
    out.raw(*async_slices(rank, seq, ops, lane, new, names.calls))


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
    # one-sided, as stats counts it (the origin's buffer): out when a put starts, in when a get returns
    call = pl.col("call").cast(pl.Utf8)
    puts = ev.filter(call.is_in(RMA_PUT_CALLS)).select(pl.col("t_enter_ns").alias("t"), "bytes")
    gets = ev.filter(call.is_in(RMA_GET_CALLS) & pl.col("t_leave_ns").is_not_null()).select(
        pl.col("t_leave_ns").alias("t"), "bytes"
    )
    flows = {
        4: [
            sends.select(pl.col("t_send_enter_ns").alias("t"), "bytes"),
            coll.select(pl.col("t_enter_ns").alias("t"), "bytes"),
            puts,
        ],
        5: [
            recvs.select(pl.col("t_recv_leave_ns").alias("t"), pl.col("recv_bytes").alias("bytes")),
            coll.select(pl.col("t_leave_ns").alias("t"), pl.col("recv_bytes").alias("bytes")),
            gets,
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
        out.raw(
            *counter_packets(seq, uuid(kind, rank), plan.t0, plan.bin_ns, per_bin["bin"], per_bin["bytes"])
        )


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
            for chunk in ev.iter_slices(S.CHUNK):  # encoded a chunk of calls at a time
                packets, n, started = call_slices(rank, seq, chunk, names.calls, names.args, names.sites)
                out.raw(packets, n)
                flows += started
                _async(out, rank, seq, chunk, names, lanes)
            _counters(out, trace, rank, seq, ev, sends, recvs, plan)
            if progress:
                progress(ev.height)
        out.flush()
    return out.count, flows


def _append(f: BinaryIO, part: Path) -> None:
    """Append a part file to f (flushed) and remove it: copied by the kernel where it can
    (copy_file_range), since the parts are most of the output and this runs after the workers."""
    with open(part, "rb") as src:
        left = os.fstat(src.fileno()).st_size
        try:
            while left > 0:
                copied = os.copy_file_range(src.fileno(), f.fileno(), left)
                if copied == 0:
                    break
                left -= copied
        except OSError as e:
            if e.errno not in (errno.EXDEV, errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
                raise
        if left > 0:  # no kernel copy here (or not across these file systems): through Python
            src.seek(-left, os.SEEK_END)
            f.seek(0, os.SEEK_END)
            shutil.copyfileobj(src, f, 1 << 22)
            f.flush()
    os.unlink(part)


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
            results = run_groups(_write_part, (plan,), list(per_rank.iter_rows()), progress, workers,
                                 "the Perfetto export", BYTES_PER_CALL)
            with open(stage, "wb") as f:
                head = _Out(f)
                _header(
                    head,
                    trace,
                    [(int(r), int(t)) for r, t in spans.select("rank", "thread").iter_rows()],
                    bin_ns,
                )
                head.flush()
                f.flush()
                for i in range(len(results)):
                    _append(f, Path(parts_dir) / f"{i:06d}.pb")
        finally:
            shutil.rmtree(parts_dir, ignore_errors=True)
    return ExportResult(
        "perfetto",
        out,
        S.as_int(spans["n"].sum()),
        head.count + sum(n for n, _ in results),
        time.perf_counter() - t_start,
    )
