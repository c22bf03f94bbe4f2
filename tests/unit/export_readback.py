"""Read exported traces back (OTF2 with the `otf2` reader and with `otf2-print`, Perfetto
with its protos) and compare them with the trace's tables: the round trips of
tests/unit/test_export_*.py and tests/mpi/test_export.py."""

from __future__ import annotations

import re
import shutil
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

import polars as pl

from mpiscope.export.streams import with_recv_bytes
from mpiscope.trace import Trace

SENDS, RECVS = ("MpiSend", "MpiIsend"), ("MpiRecv", "MpiIrecv")
PRINT_NAMES = {
    "ENTER": "Enter",
    "LEAVE": "Leave",
    "MPI_SEND": "MpiSend",
    "MPI_ISEND": "MpiIsend",
    "MPI_ISEND_COMPLETE": "MpiIsendComplete",
    "MPI_IRECV_REQUEST": "MpiIrecvRequest",
    "MPI_RECV": "MpiRecv",
    "MPI_IRECV": "MpiIrecv",
    "MPI_COLLECTIVE_BEGIN": "MpiCollectiveBegin",
    "MPI_COLLECTIVE_END": "MpiCollectiveEnd",
    "NON_BLOCKING_COLLECTIVE_REQUEST": "NonBlockingCollectiveRequest",
    "NON_BLOCKING_COLLECTIVE_COMPLETE": "NonBlockingCollectiveComplete",
}


def _comm_id(name: str) -> int:
    return 0 if name == "MPI_COMM_WORLD" else int(name.split()[-1])


def read_otf2(path: Path) -> pl.DataFrame:
    """Every event with the `otf2` reader: (kind, rank, thread, time, region, comm, peer, root, tag,
    bytes, request, received), peers and roots as world ranks (through the communicators' groups)."""
    import otf2

    rows: list[tuple[Any, ...]] = []
    with otf2.reader.open(str(path / "traces.otf2")) as tr:
        rank_of = {loc: int(loc.group.name.split()[-1]) for loc in tr.definitions.locations}
        thread_of = {
            loc: 0 if loc.name == "Master thread" else int(loc.name.split()[-1])
            for loc in tr.definitions.locations
        }
        for loc, ev in tr.events:
            kind = type(ev).__name__
            if kind in ("Enter", "Leave"):  # most events: the short way
                rows.append((kind, rank_of[loc], thread_of[loc], ev.time, ev.region.name) + (None,) * 7)
                continue
            comm, peer, root = getattr(ev, "communicator", None), None, None
            if comm is not None:
                p = getattr(ev, "receiver", getattr(ev, "sender", None))
                peer = rank_of[comm.group.members[p]] if p is not None else None
                r = getattr(ev, "root", None)
                root = rank_of[comm.group.members[r]] if r is not None and r != 0xFFFFFFFF else None
            rows.append(
                (
                    kind,
                    rank_of[loc],
                    thread_of[loc],
                    ev.time,
                    None,
                    _comm_id(comm.name) if comm is not None else None,
                    peer,
                    root,
                    getattr(ev, "msg_tag", None),
                    getattr(ev, "msg_length", getattr(ev, "size_sent", None)),
                    getattr(ev, "request_id", getattr(ev, "requestID", None)),
                    getattr(ev, "size_received", None),
                )
            )
    return pl.DataFrame(
        rows,
        orient="row",
        schema={
            "kind": pl.Utf8,
            "rank": pl.Int64,
            "thread": pl.Int64,
            "time": pl.Int64,
            "region": pl.Utf8,
            "comm": pl.Int64,
            "peer": pl.Int64,
            "root": pl.Int64,
            "tag": pl.Int64,
            "bytes": pl.Int64,
            "request": pl.Int64,
            "received": pl.Int64,
        },
    )


_LINE = re.compile(r"^(\w+)\s+(\d+)\s+(\d+)\s*(.*)$")


def read_otf2_print(path: Path) -> pl.DataFrame:
    """The same from `otf2-print`'s text (kind, rank, time, region, peer, comm, tag)."""
    exe = shutil.which("otf2-print")
    assert exe, "otf2-print is missing"
    defs = subprocess.run(
        [exe, "-G", str(path / "traces.otf2")], capture_output=True, text=True, check=True
    ).stdout
    rank_of = {
        int(m.group(1)): int(m.group(2))
        for m in re.finditer(r"^LOCATION\s+(\d+)\s+Name: .*Group: \"MPI Rank (\d+)\"", defs, re.MULTILINE)
    }
    group_members: dict[int, list[int]] = {}
    for m in re.finditer(r"^GROUP\s+(\d+)\s+Name: .*Type: COMM_GROUP.*Members?: (.*)$", defs, re.MULTILINE):
        group_members[int(m.group(1))] = [int(x) for x in re.findall(r"(\d+) \(\"", m.group(2))]
    comm_group = {
        int(m.group(1)): int(m.group(2))
        for m in re.finditer(r"^COMM\s+(\d+)\s+Name: .*Group: \"[^\"]*\" <(\d+)>", defs, re.MULTILINE)
    }
    comm_name = {
        int(m.group(1)): m.group(2)
        for m in re.finditer(r"^COMM\s+(\d+)\s+Name: \"([^\"]+)\"", defs, re.MULTILINE)
    }
    text = subprocess.run([exe, str(path / "traces.otf2")], capture_output=True, text=True, check=True).stdout
    rows = []
    for line in text.splitlines():
        m = _LINE.match(line)
        if not m or m.group(1) not in PRINT_NAMES:
            continue
        kind, loc, t, attrs = PRINT_NAMES[m.group(1)], int(m.group(2)), int(m.group(3)), m.group(4)
        row: dict[str, Any] = {"kind": kind, "rank": rank_of[loc], "time": t}
        region = re.search(r'Region: "([^"]+)"', attrs)
        row["region"] = region.group(1) if region else None
        comm = re.search(r"Communicator: \"[^\"]*\" <(\d+)>", attrs)
        peer = re.search(r"(?:Receiver|Sender): (\d+) ", attrs)
        if comm:
            ref = int(comm.group(1))
            row["comm"] = _comm_id(comm_name[ref])
            if peer:
                row["peer"] = group_members[comm_group[ref]][int(peer.group(1))]
        tag = re.search(r"Tag: (\d+)", attrs)
        row["tag"] = int(tag.group(1)) if tag else None
        rows.append(row)
    return pl.DataFrame(
        rows,
        schema={
            "kind": pl.Utf8,
            "rank": pl.Int64,
            "time": pl.Int64,
            "region": pl.Utf8,
            "comm": pl.Int64,
            "peer": pl.Int64,
            "tag": pl.Int64,
        },
    )


def _same_times(
    a: pl.DataFrame, a_time: str, b: pl.DataFrame, b_time: str, keys: list[str], what: str
) -> None:
    """The same number of times per key in both, and the k-th smallest of each within 1 ns."""

    def ranked(df: pl.DataFrame, col: str) -> pl.DataFrame:
        return (
            df.select(
                *[
                    pl.col(k).cast(pl.Utf8 if df.schema[k] in (pl.Utf8, pl.Categorical) else pl.Int64)
                    for k in keys
                ],
                pl.col(col).cast(pl.Int64).alias("t"),
            )
            .sort([*keys, "t"])
            .with_columns(pl.int_range(pl.len()).over(keys).alias("k"))
        )

    x, y = ranked(a, a_time), ranked(b, b_time)
    assert x.height == y.height, (what, x.height, y.height)
    j = x.join(y, on=[*keys, "k"], how="full", coalesce=True, nulls_equal=True)
    assert j.height == x.height and j["t"].null_count() == j["t_right"].null_count() == 0, (
        what,
        j.filter(pl.col("t").is_null() | pl.col("t_right").is_null()).head(5),
    )
    worst = int((j["t"] - j["t_right"]).abs().max() or 0)
    assert worst <= 1, (what, worst)


def check_otf2(trace: Trace, got: pl.DataFrame) -> dict[str, int]:
    """Calls, messages and collective instances of the export equal the tables' (timestamps
    within 1 ns), from either reader's frame. Returns the counts compared."""
    ev = trace.events().with_columns(pl.col("call").cast(pl.Utf8)).collect()
    kinds = Counter(got["kind"].to_list())
    assert kinds["Enter"] == kinds["Leave"] == ev.height
    enters, leaves = got.filter(pl.col("kind") == "Enter"), got.filter(pl.col("kind") == "Leave")
    ev = ev.with_columns(pl.col("call").alias("region"), pl.col("t_leave_ns").fill_null(pl.col("t_enter_ns")))
    _same_times(enters, "time", ev, "t_enter_ns", ["rank", "region"], "Enter")
    _same_times(leaves, "time", ev, "t_leave_ns", ["rank", "region"], "Leave")
    m = trace.messages().collect()
    env = ["rank", "peer", "comm", "tag"]
    sends = got.filter(pl.col("kind").is_in(SENDS))
    recvs = got.filter(pl.col("kind").is_in(RECVS))
    assert sends.height == recvs.height == m.height
    _same_times(sends, "time", m.rename({"src": "rank", "dst": "peer"}), "t_send_enter_ns", env, "send")
    _same_times(recvs, "time", m.rename({"dst": "rank", "src": "peer"}), "t_recv_leave_ns", env, "receive")
    colls = ev.filter(pl.col("coll_id").is_not_null())
    ends = got.filter(pl.col("kind").is_in(["MpiCollectiveEnd", "NonBlockingCollectiveComplete"]))
    assert ends.height == colls.height
    # an instance is the k-th collective of a communicator on each of its members
    inst = ends.sort("time").with_columns(pl.int_range(pl.len()).over("rank", "comm").alias("k"))
    assert inst.select("comm", "k").n_unique() == colls["coll_id"].n_unique()
    blocking = colls.filter(pl.col("completed_by").is_null())
    _same_times(
        got.filter(pl.col("kind") == "MpiCollectiveEnd"),
        "time",
        blocking,
        "t_leave_ns",
        ["rank", "comm"],
        "collective end",
    )
    _same_times(
        got.filter(pl.col("kind") == "NonBlockingCollectiveComplete"),
        "time",
        colls.filter(pl.col("completed_by").is_not_null()),
        "t_complete_ns",
        ["rank", "comm"],
        "nonblocking collective completion",
    )
    if "received" in got.columns:  # the `otf2` reader's frame: roots and bytes too
        expect = with_recv_bytes(
            trace,
            trace.events().filter(pl.col("coll_id").is_not_null()).with_columns(pl.col("call").cast(pl.Utf8)),
        ).collect()
        keys = ["rank", "comm", "root", "bytes", "received"]
        a = ends.select(keys).sort(keys, nulls_last=True)
        b = (
            expect.select(*keys[:4], pl.col("recv_bytes").alias("received"))
            .cast(pl.Int64)
            .sort(keys, nulls_last=True)
        )
        assert a.equals(b), "collective roots and bytes"
    return {
        "calls": ev.height,
        "messages": m.height,
        "collective_calls": colls.height,
        "instances": colls["coll_id"].n_unique(),
    }


def read_perfetto(path: Path) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(slices, flows) of a Perfetto trace parsed with the package's protos, interned names
    resolved per sequence: one row per thread-track slice (rank, thread, name, begin, end and
    its integer arguments) and one per flow end (flow id, role, rank, begin and end of its slice)."""
    from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import Trace as PTrace
    from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import TracePacket, TrackEvent

    trace = PTrace()
    trace.ParseFromString(path.read_bytes())
    thread_tracks: dict[int, tuple[int, int]] = {}
    for p in trace.packet:
        if p.HasField("track_descriptor") and p.track_descriptor.HasField("thread"):
            d = p.track_descriptor
            name = d.thread.thread_name
            thread_tracks[d.uuid] = (d.thread.pid - 1, 0 if name == "main" else int(name.split()[-1]))
    interned: dict[int, tuple[dict[int, str], dict[int, str]]] = {}
    open_: dict[int, list[dict[str, Any]]] = {}
    slices: list[dict[str, Any]] = []
    for p in trace.packet:
        seq = p.trusted_packet_sequence_id
        if p.sequence_flags & TracePacket.SEQ_INCREMENTAL_STATE_CLEARED:
            interned[seq] = ({}, {})
        if p.HasField("interned_data"):
            interned[seq][0].update({n.iid: n.name for n in p.interned_data.event_names})
            interned[seq][1].update({n.iid: n.name for n in p.interned_data.debug_annotation_names})
        if not p.HasField("track_event") or p.track_event.track_uuid not in thread_tracks:
            continue
        e = p.track_event
        if e.type == TrackEvent.TYPE_SLICE_BEGIN:
            assert p.sequence_flags & TracePacket.SEQ_NEEDS_INCREMENTAL_STATE
            events, args = interned[seq]
            rank, thread = thread_tracks[e.track_uuid]
            row = {
                "rank": rank,
                "thread": thread,
                "name": e.name or events[e.name_iid],
                "begin": p.timestamp,
                "fo": list(e.flow_ids),
                "fi": list(e.terminating_flow_ids),
            }
            row.update(
                {
                    (a.name or args[a.name_iid]): a.int_value
                    for a in e.debug_annotations
                    if a.HasField("int_value")
                }
            )
            open_.setdefault(e.track_uuid, []).append(row)
        elif e.type == TrackEvent.TYPE_SLICE_END:
            row = open_[e.track_uuid].pop()
            row["end"] = p.timestamp
            slices.append(row)
    flows = [
        {"flow": f, "role": role, "rank": s["rank"], "begin": s["begin"], "end": s["end"]}
        for s in slices
        for role in ("out", "in")
        for f in s["fo" if role == "out" else "fi"]
    ]
    cols = ["rank", "thread", "name", "begin", "end", "comm", "peer", "tag", "bytes", "root", "coll_id"]
    return (
        pl.DataFrame(
            [{c: s.get(c) for c in cols} for s in slices],
            schema={c: pl.Utf8 if c == "name" else pl.Int64 for c in cols},
        ),
        pl.DataFrame(
            flows,
            schema={"flow": pl.Int64, "role": pl.Utf8, "rank": pl.Int64, "begin": pl.Int64, "end": pl.Int64},
        ),
    )


def check_perfetto(trace: Trace, slices: pl.DataFrame, flows: pl.DataFrame) -> None:
    """Slices per rank equal the calls, with their arguments; each message is one flow from the
    slice that sent it (begins at its send) to the slice that delivered it (ends at its delivery)."""
    ev = trace.events().with_columns(pl.col("call").cast(pl.Utf8)).collect()
    _same_times(
        slices, "begin", ev.rename({"call": "name"}), "t_enter_ns", ["rank", "thread", "name"], "slice begin"
    )
    _same_times(
        slices,
        "end",
        ev.rename({"call": "name"}).with_columns(pl.col("t_leave_ns").fill_null(pl.col("t_enter_ns"))),
        "t_leave_ns",
        ["rank", "thread", "name"],
        "slice end",
    )
    # the arguments a slice shows are its call's (a thread has one call at a time)
    args = ["comm", "peer", "tag", "bytes", "root", "coll_id"]
    table = ev.select("rank", "thread", pl.col("t_enter_ns").alias("begin"), *args).cast(
        {a: pl.Int64 for a in args}
    )
    both = slices.join(table, on=["rank", "thread", "begin"], suffix="_table")
    assert both.height == slices.height
    for a in args:
        assert both.select(pl.col(a).eq_missing(pl.col(f"{a}_table"))).to_series().all(), a
    m = (
        trace.messages()
        .with_row_index("msg")
        .with_columns((pl.col("msg") + 1).cast(pl.Int64).alias("flow"))
        .collect()
    )
    out, into = flows.filter(pl.col("role") == "out"), flows.filter(pl.col("role") == "in")
    assert out.height == into.height == m.height
    ends = m.join(out, on="flow").join(into, on="flow", suffix="_in")
    assert ends.height == m.height
    assert (ends["rank"] == ends["src"]).all() and (ends["rank_in"] == ends["dst"]).all()
    assert (ends["begin"] == ends["t_send_enter_ns"]).all()
    assert (ends["end_in"] == ends["t_recv_leave_ns"]).all()
