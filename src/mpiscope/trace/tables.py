"""The merged tables built from the kernels' arrays: events, collectives, messages.

Rows of events.parquet come from the events kernel as NumPy arrays (one per
call record, row = event id); null is encoded by a sentinel there and
becomes an Arrow validity mask here, without copying the values.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa

from mpiscope.trace import native
from mpiscope.trace import record as R
from mpiscope.trace.callsites import callsite_column
from mpiscope.trace.columns import FIRST_TABLE_ID, ROLE, CallTable, Records
from mpiscope.trace.match import COLLECTIVE_COLUMNS, P2P
from mpiscope.trace.requests import StartLinks

Rows = dict[str, np.ndarray]


def nullable(values: np.ndarray, valid: np.ndarray, name: str) -> pl.Series:
    """values where valid, else null: an Arrow array over values' own buffer."""
    values = np.ascontiguousarray(values)
    bitmap = np.packbits(valid, bitorder="little")  # Arrow's validity bitmap
    array = pa.Array.from_buffers(pa.from_numpy_dtype(values.dtype), values.size,
                                  [pa.py_buffer(bitmap), pa.py_buffer(values)])
    return pl.Series(_ArrowCapsule(array)).alias(name)  # the capsule names its field ""


@dataclass(frozen=True)
class _ArrowCapsule:
    """An Arrow array seen through the Arrow PyCapsule interface alone: Polars takes its buffers as
    they are, where its from_arrow first imports pyarrow.compute (51 ms of a merge, on its critical
    path: the events table's columns are built in a thread beside the main one)."""
    array: pa.Array

    def __arrow_c_array__(self, requested_schema: object = None) -> tuple[object, object]:
        return self.array.__arrow_c_array__(requested_schema)


def latest_entries(rows: Rows) -> dict[int, int]:
    """Each rank's latest entry among rows in (rank, time) order."""
    rank, enter = rows["rank"], rows["t_enter"]
    if not rank.size:
        return {}
    first = np.r_[0, np.flatnonzero(np.diff(rank)) + 1]
    return dict(zip(rank[first].tolist(), np.maximum.reduceat(enter, first).tolist()))


def role_is(role: np.ndarray, *roles: str) -> np.ndarray:
    """role in roles: a comparison per role, which NumPy vectorises on the uint8 codes (a gather
    through a table over the codes widens them to 8-byte indices first: 22 ms for 15 M codes where
    this takes 7; np.isin sorts)."""
    found: np.ndarray = role == ROLE[roles[0]]
    for r in roles[1:]:
        found |= role == ROLE[r]
    return found


def event_rows(rec: Records, links: StartLinks, calls: CallTable) -> Rows:
    nevents = int(np.count_nonzero(rec.call >= FIRST_TABLE_ID))
    rows = native.events(rec.columns(), nevents, FIRST_TABLE_ID, calls.enum_codes(), links.index,
                         links.t_complete, links.completed_by)
    link_persistent_starts(rec, links, rows)
    return rows


def link_persistent_starts(rec: Records, links: StartLinks, rows: Rows) -> None:
    """An MPI_Start(all) of persistent sends or receives gets the completion of the requests
    it started (their sub:psend/precv records' links), as an MPI_Isend/MPI_Irecv row does: a
    message's wait is in the call that completed it (waitstates.py), not in the Start, which
    returns at once. A Startall whose requests different calls completed names none of them,
    but its t_complete is the last of their completions (its requests' life, which the exports
    draw); only a single Start names its request."""
    sub = np.flatnonzero(role_is(rec.role[links.index], "psend", "precv") & (links.completed_by >= 0))
    ev = rec.event[links.index[sub]]
    sub, ev = sub[ev >= 0], ev[ev >= 0]
    if not sub.size:
        return
    once, group, counts = np.unique(ev, return_inverse=True, return_counts=True)
    first, last = np.full(once.size, np.iinfo(np.int64).max), np.full(once.size, -1)
    done = np.full(once.size, -1)
    np.minimum.at(first, group, links.completed_by[sub])
    np.maximum.at(last, group, links.completed_by[sub])
    np.maximum.at(done, group, links.t_complete[sub])
    keep = (first == last) & (rows["completed_by"][once] < 0)  # never overwrite a row's own link
    rows["t_complete"][once[keep]] = done[keep]
    rows["completed_by"][once[keep]] = first[keep]
    spread = (first != last) & (rows["completed_by"][once] < 0) & (rows["t_complete"][once] < 0)
    rows["t_complete"][once[spread]] = done[spread]
    single = keep & (counts == 1)
    rows["req"][once[single]] = rec.req[links.index[sub[np.flatnonzero(single[group])]]]


def shift_rows(e: Rows, shifts: np.ndarray) -> None:
    """Add the per-rank clock shifts (ns) to every time of the rows, in place."""
    if not shifts.any():
        return
    s = shifts[e["rank"]]
    e["t_enter"] += s
    for name in ("t_leave", "t_complete"):  # -1: none
        e[name] += np.where(e[name] >= 0, s, 0)


def persistent_starts(rec: Records, links: StartLinks, calls: CallTable) -> Rows:
    """Each start of an MPI-4 persistent collective (a sub:pcoll record) as one rank's part
    in a collective instance, with the columns of an event row: the Start's times, the
    completion that finished it, and the collective named by its *_init call, whose id
    the record keeps in its callsite field."""
    idx = np.flatnonzero(rec.role == ROLE["pcoll"])
    pos = np.minimum(np.searchsorted(links.index, idx), max(links.index.size - 1, 0))
    linked = (links.index[pos] == idx) if links.index.size else np.zeros(idx.size, bool)
    codes = calls.enum_codes()
    init = rec.callsite[idx]
    known = init < codes.size
    return {
        "rank": rec.rank[idx], "comm": rec.comm[idx].astype(np.int64), "tag": rec.tag[idx],
        "peer": rec.peer[idx], "bytes": rec.bytes[idx], "t_enter": rec.t_enter[idx].copy(),
        "t_leave": rec.t_leave[idx].copy(),
        "t_complete": np.where(linked, links.t_complete[pos] if links.index.size else -1, -1),
        "completed_by": np.where(linked, links.completed_by[pos] if links.index.size else -1, -1),
        "call": np.where(known, codes[np.where(known, init, 0).astype(np.int64)], 0).astype(np.uint32),
        "record": idx, "event": rec.event[idx].astype(np.int64),
    }


def lift_persistent_starts(rec: Records, rows: Rows, starts: Rows) -> Rows:
    """The MPI_Start(all) rows that started one persistent collective and nothing else become
    that rank's part of its instance, as an MPI_Iallreduce row is: the collective's
    communicator, sequence number, root, bytes, received bytes, request and completion, and
    role coll (collective_ids gives them the instance's coll_id). `rows["lifted"]` (event
    rows, sorted) and `rows["lifted_call"]` keep the collective each names (its *_init call:
    instance_calls). Returns the starts left: those of a Startall of several persistent
    collectives, which stay instances of their own (no row can carry two coll_ids); the
    Startall's row carries the bytes they sent and received, summed."""
    ev = starts["event"]
    valid = (ev >= 0) & (starts["comm"] >= 0) & (starts["call"] > 0)
    once, counts = np.unique(ev[ev >= 0], return_counts=True)
    p2p = np.unique(rec.event[role_is(rec.role, "psend", "precv")])
    alone = np.isin(ev, once[counts == 1]) & ~np.isin(ev, p2p)
    keep = valid & alone
    keep[keep] = rows["completed_by"][ev[keep]] < 0  # never overwrite a row's own link
    s = np.flatnonzero(keep)
    e = ev[s]
    order = np.argsort(e)
    s, e = s[order], e[order]
    rows["role"][e] = ROLE["coll"]
    for name in ("comm", "tag", "peer", "bytes", "recv_bytes", "recv_valid", "t_complete", "completed_by"):
        rows[name][e] = starts[name][s]
    rows["req"][e] = rec.req[starts["record"][s]]
    rows["lifted"], rows["lifted_call"] = e, starts["call"][s]
    left = {name: values[~keep] for name, values in starts.items()}
    shared = np.flatnonzero(valid[~keep])
    np.add.at(rows["bytes"], left["event"][shared], left["bytes"][shared].astype(rows["bytes"].dtype))
    np.add.at(rows["recv_bytes"], left["event"][shared], left["recv_bytes"][shared].astype(rows["recv_bytes"].dtype))
    rows["recv_valid"][left["event"][shared]] |= left["recv_valid"][shared]
    return left


def instance_calls(e: Rows, idx: np.ndarray) -> np.ndarray:
    """The call that names the collective of rows idx: their own, but the *_init call for a
    persistent collective's start (lift_persistent_starts)."""
    calls: np.ndarray = e["call"][idx].copy()
    lifted = e.get("lifted")
    if lifted is not None and lifted.size:
        pos = np.minimum(np.searchsorted(lifted, idx), lifted.size - 1)
        hit = lifted[pos] == idx
        calls[hit] = e["lifted_call"][pos[hit]]
    return calls


def collective_ids(e: Rows, starts: Rows) -> tuple[np.ndarray, np.ndarray]:
    """The instance (coll_id) of every event row and of every persistent collective start
    (persistent_starts), -1 if none. (comm, sequence number) names an instance (match.py);
    instances are numbered by first entry, then comm, then sequence number."""
    idx = np.flatnonzero((e["role"] == ROLE["coll"]) & (e["comm"] >= 0) & (e["rc"] == 0))
    sidx = np.flatnonzero((starts["comm"] >= 0) & (starts["call"] > 0))

    def both(name: str) -> np.ndarray:
        part = e[name][idx]
        return np.concatenate([part, starts[name][sidx]]) if sidx.size else part

    comm = both("comm").astype(np.int64, copy=False)
    seq = both("tag").astype(np.int64)  # tag: the sequence number
    t_enter = both("t_enter")
    group, first = native.factorize(((comm << 32) + (seq & 0xffffffff)).view(np.uint64))
    first_enter = t_enter[first]
    np.minimum.at(first_enter, group, t_enter)
    order = np.lexsort((seq[first], comm[first], first_enter))
    coll_of_group = np.empty(order.size, np.int64)
    coll_of_group[order] = np.arange(order.size)
    ids = coll_of_group[group]
    coll_id = np.full(e["event"].size, -1, np.int64)
    coll_id[idx] = ids[:idx.size]
    start_id = np.full(starts["comm"].size, -1, np.int64)
    start_id[sidx] = ids[idx.size:]
    return coll_id, start_id


def collectives_table(parts: list[tuple[Rows, np.ndarray]], comms: pl.DataFrame, calls: CallTable) -> pl.DataFrame:
    """collectives.parquet, from the rows taking part in instances: (rows, their coll_id), for
    the event rows and the persistent starts (collective_ids): per instance, the comm, call (how
    many calls its rows named) and root of its first row in that order, bytes and received bytes
    summed (null where none was recorded), rows, first and last entry and completion. Summed up
    over the dense instance ids with NumPy (10 M records, 1.7 M rows of 26 K instances: 0.19-0.30 s
    through a frame and a Polars group-by)."""
    picked = [(e, coll_id, np.flatnonzero(coll_id >= 0)) for e, coll_id in parts]
    picked = [p for p in picked if p[2].size] or picked[:1]

    def joined(values: Callable[[Rows, np.ndarray, np.ndarray], np.ndarray], dtype: type) -> np.ndarray:
        # (gathering 1.7 M of 6.7 M rows is most of the time here: no copy more than needed)
        got = [values(e, coll_id, i).astype(dtype, copy=False) for e, coll_id, i in picked]
        return got[0] if len(got) == 1 else np.concatenate(got)

    def completion(e: Rows, _: np.ndarray, i: np.ndarray) -> np.ndarray:
        t_complete, t_leave = e["t_complete"][i], e["t_leave"][i]
        return np.where(t_complete >= 0, t_complete, t_leave)

    cid = joined(lambda e, coll_id, i: coll_id[i], np.int64)
    comm = joined(lambda e, _, i: e["comm"][i], np.int64)
    call = joined(lambda e, _, i: instance_calls(e, i), np.int64)
    peer = joined(lambda e, _, i: e["peer"][i], np.int32)
    nbytes = joined(lambda e, _, i: e["bytes"][i], np.int64)
    rbytes = joined(lambda e, _, i: e["recv_bytes"][i], np.int64)
    rvalid = joined(lambda e, _, i: e["recv_valid"][i], np.bool_)
    enter = joined(lambda e, _, i: e["t_enter"][i], np.int64)
    done = joined(completion, np.int64)
    n, g = cid.size, int(cid.max()) + 1 if cid.size else 0
    pos = np.arange(n)
    first = np.full(g, n)
    np.minimum.at(first, cid, pos)
    rooted = peer >= 0
    root_at = np.full(g, n)
    np.minimum.at(root_at, cid[rooted], pos[rooted])
    total = np.zeros(g, np.int64)
    np.add.at(total, cid, nbytes)
    received = np.zeros(g, np.int64)
    np.add.at(received, cid[rvalid], rbytes[rvalid])
    never = np.iinfo(np.int64).max
    first_enter, last_enter = np.full(g, never), np.full(g, np.iinfo(np.int64).min)
    np.minimum.at(first_enter, cid, enter)
    np.maximum.at(last_enter, cid, enter)
    ended = done >= 0
    first_done, last_done = np.full(g, never), np.full(g, -1)
    np.minimum.at(first_done, cid[ended], done[ended])
    np.maximum.at(last_done, cid[ended], done[ended])
    other = call != call[first[cid]]  # a rank that named another call (calls_seen > 1)
    seen = np.ones(g, np.int64)
    if other.any():
        pairs = np.unique(np.stack([cid, call]), axis=1)
        seen = np.bincount(pairs[0], minlength=g)
    present = first < n  # ids of failed calls' instances may be missing
    ids = np.flatnonzero(present)
    f, r = first[ids], root_at[ids]
    has_root = r < n
    df = pl.DataFrame([
        pl.Series("coll_id", ids.astype(np.int64)), pl.Series("comm", comm[f]),
        calls.series(call[f].astype(np.uint32)),
        pl.Series("calls_seen", seen[ids].astype(np.uint32)),
        nullable(np.where(has_root, peer[np.minimum(r, n - 1)], 0).astype(np.int32), has_root, "root"),
        pl.Series("bytes", total[ids]),
        nullable(received[ids], np.bincount(cid[rvalid], minlength=g)[ids] > 0, "recv_bytes"),
        pl.Series("ranks", np.bincount(cid, minlength=g)[ids].astype(np.uint32)),
        pl.Series("t_first_enter_ns", first_enter[ids]), pl.Series("t_last_enter_ns", last_enter[ids]),
        nullable(first_done[ids], first_done[ids] != never, "t_first_leave_ns"),
        nullable(last_done[ids], last_done[ids] != -1, "t_last_leave_ns"),
    ])
    return df.join(comms.select("comm", "comm_size"), on="comm", how="left").select(COLLECTIVE_COLUMNS)


def events_frame(e: Rows, calls: CallTable, trace_dir: Path) -> pl.DataFrame:
    """events.parquet but its last column, coll_id (from collectives_table)."""
    role, peer, tag = e["role"], e["peer"], e["tag"]
    coll = role == ROLE["coll"]
    # a call to MPI_PROC_NULL moves nothing (the recorder keeps the count asked for: a halo's edge
    # ranks' MPI_Isend bytes were twice those sent)
    to_nobody = peer == R.PEER_PROC_NULL
    nbytes = np.where(~coll & to_nobody, 0, e["bytes"]) if to_nobody.any() else e["bytes"]
    numbered = coll | role_is(role, "create", "create_win")
    t_leave, tc, cb, comm, req = e["t_leave"], e["t_complete"], e["completed_by"], e["comm"], e["req"]
    return pl.DataFrame([
        pl.Series("event", e["event"]), pl.Series("rank", e["rank"]), pl.Series("thread", e["thread"]),
        calls.series(e["call"]),
        pl.Series("t_enter_ns", e["t_enter"]),
        nullable(t_leave, t_leave >= 0, "t_leave_ns"),
        nullable(comm, comm >= 0, "comm"),
        nullable(peer, ~coll & (peer >= 0), "peer"),
        nullable(tag, ~numbered & (tag > R.TAG_ANY), "tag"),
        pl.Series("bytes", nbytes),
        nullable(e["recv_bytes"], e["recv_valid"], "recv_bytes"),
        nullable(peer, coll & (peer >= 0), "root"),
        nullable(req, req != 0, "request"),
        nullable(tc, tc >= 0, "t_complete_ns"),
        nullable(cb, cb >= 0, "completed_by"),
        nullable(tag, numbered, "seq"),
        callsite_column(trace_dir, e["rank"], e["callsite"]),
        pl.Series("count", e["count"]),
        nullable(e["inside"], e["inside"] >= 0, "inside_ns"),
        nullable(e["rc"], e["rc"] != 0, "rc"),
    ])


def messages_table(p: P2P, si: np.ndarray, ri: np.ndarray, shifts: np.ndarray, feasible: bool) -> pl.DataFrame:
    """messages.parquet's rows, in (send entry, send event) order. The order is found on the two
    keys alone, before the columns are built (a stable merge sort: the sends come in runs of a
    rank's time order); sorting the built frame took 0.23 s of 1.7 M messages, this 0.04 s."""
    s, r = p.sends, p.recvs
    shifted = bool(shifts.any())  # mostly not: no gathers of zeros (1.7 M messages: 30 ms)
    posted = s.posted[si] + shifts[s.src[si]] if shifted else s.posted[si]
    event = s.event[si]
    # where the sends come in event order (a merge's are), a stable sort by entry alone keeps it
    # among equal entries (1.7 M messages: 40 ms, the two keys 76)
    order = (np.argsort(posted, kind="stable") if event.size < 2 or bool((event[1:] >= event[:-1]).all())
             else np.lexsort((event, posted)))
    si, ri = si[order], ri[order]
    src_shift, dst_shift = (shifts[s.src[si]], shifts[r.dst[ri]]) if shifted else (0, 0)
    send_leave = p.send_leave[si]
    recv_leave = p.recv_leave[ri]
    recv_leave = np.where(recv_leave >= 0, recv_leave + dst_shift, -1)
    send_enter = posted[order]
    if not feasible:  # cyclic violations no rank shift removes: clamp the rest
        recv_leave = np.where(recv_leave >= 0, np.maximum(recv_leave, send_enter), -1)
    sent, received = p.send_bytes[si], p.recv_bytes[ri]
    # a message holds what was sent (received.overclaimed), in place: a copy took 11 ms of 3.3 M messages
    np.minimum(received, sent, out=received, casting="unsafe")
    df = pl.DataFrame({
        "src": s.src[si], "dst": r.dst[ri], "tag": s.tag[si], "comm": s.comm[si], "bytes": sent,
        "recv_bytes": received,
        "t_send_enter_ns": send_enter,
        "t_send_leave_ns": nullable(np.where(send_leave >= 0, send_leave + src_shift, 0), send_leave >= 0,
                                    "t_send_leave_ns"),
        "t_recv_enter_ns": r.posted[ri] + dst_shift,
        "t_recv_leave_ns": nullable(recv_leave, recv_leave >= 0, "t_recv_leave_ns"),
        "send_event": s.event[si], "recv_event": r.event[ri],
    })
    return df
