"""Per-rank raw files -> events / messages / collectives / comms Parquet tables.

Everything is column-wise (NumPy masks, Polars joins); no Python loop runs
per event. Tables are written through temporary files and renamed, so a
failed merge leaves any earlier tables intact.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from mpiscope import __version__
from mpiscope.capture.manifest import read_manifest, write_manifest
from mpiscope.errors import UsageError
from mpiscope.trace import record as R
from mpiscope.trace.callsites import resolve_callsites
from mpiscope.trace.clocks import causality_shifts, rank_clocks, to_global_ns
from mpiscope.trace.match import group_collectives, match_messages
from mpiscope.trace.reader import RankFile, read_rank_file, rank_files

FIRST_TABLE_ID = 16


@dataclass
class MergeResult:
    events: int
    messages: int
    collectives: int
    unmatched_sends: int
    unmatched_recvs: int
    seconds: float
    warnings: list[str] = field(default_factory=list)


@dataclass
class CallTable:
    names: list[str]
    role: np.ndarray           # object array of role strings by call id
    starts: np.ndarray         # bool by call id: the call starts a request

    @classmethod
    def from_manifest(cls, calls: list[dict[str, Any]]) -> CallTable:
        n = max(c["id"] for c in calls) + 1
        names = [""] * n
        role = np.full(n, "", dtype=object)
        starts = np.zeros(n, dtype=bool)
        for c in calls:
            names[c["id"]] = c["name"]
            role[c["id"]] = c["role"]
            starts[c["id"]] = bool(c.get("starts_request"))
        return cls(names, role, starts)

    def mask(self, call: np.ndarray, *roles: str) -> np.ndarray:
        return np.isin(call, np.flatnonzero(np.isin(self.role, roles)))


def _concat(files: list[RankFile]) -> dict[str, np.ndarray]:
    recs = np.concatenate([f.records for f in files]) if files else np.zeros(0, R.REC_DTYPE)
    cols = {name: np.ascontiguousarray(recs[name]) for name in R.REC_DTYPE.names}
    cols["rank"] = np.concatenate([np.full(f.records.size, f.rank, np.int32) for f in files])
    cols["thread"] = np.concatenate([f.thread for f in files]).astype(np.int32)
    return cols


def _parents(call: np.ndarray, rank: np.ndarray, thread: np.ndarray) -> np.ndarray:
    """Index of the call record each record belongs to (itself for calls).

    Sub-records follow their call in the same thread's stream; a block
    marker may sit in between, and is skipped like any sub-record."""
    idx = np.arange(call.size)
    is_call = call >= FIRST_TABLE_ID
    last = np.maximum.accumulate(np.where(is_call, idx, -1))
    seg_start = np.r_[True, (rank[1:] != rank[:-1]) | (thread[1:] != thread[:-1])] if call.size else call
    first_of_seg = np.maximum.accumulate(np.where(seg_start, idx, 0)) if call.size else idx
    return np.where(last >= first_of_seg, last, -1)


def _comm_ids(files: list[RankFile], rank: np.ndarray, local: np.ndarray) -> tuple[np.ndarray, pl.DataFrame]:
    """Rank-local communicator ids -> one dense id per communicator (0 = world)."""
    rows = [(f.rank, d.local_id, d.gid, d.kind, d.ranks.size + d.remote.size, d.ranks, d.remote)
            for f in files for d in f.comms]
    gids = sorted({r[2] for r in rows} - {1})
    dense = {1: 0} | {g: i + 1 for i, g in enumerate(gids)}
    keys = np.array([r[0] * 65536 + r[1] for r in rows], dtype=np.int64)
    vals = np.array([dense[r[2]] for r in rows], dtype=np.int64)
    order = np.argsort(keys)
    keys, vals = keys[order], vals[order]
    want = rank.astype(np.int64) * 65536 + local
    pos = np.clip(np.searchsorted(keys, want), 0, max(keys.size - 1, 0))
    found = keys.size > 0
    comm = np.where(found & (keys[pos] == want) if found else False, vals[pos] if found else 0, -1)
    first: dict[int, tuple] = {}
    for r in rows:
        first.setdefault(r[2], r)
    table = pl.DataFrame({
        "comm": [dense[g] for g in first],
        "gid": [g for g in first],
        "kind": [R.COMM_KIND_NAMES.get(first[g][3], "?") for g in first],
        # an intercommunicator's collectives involve both groups
        "comm_size": [int(first[g][5].size + first[g][6].size) for g in first],
        "ranks": [first[g][5].tolist() for g in first],
        "remote_ranks": [first[g][6].tolist() for g in first],
    }, schema={"comm": pl.Int64, "gid": pl.UInt64, "kind": pl.Utf8, "comm_size": pl.Int64,
               "ranks": pl.List(pl.Int32), "remote_ranks": pl.List(pl.Int32)}).sort("comm")
    return comm, table


def _build_frames(files: list[RankFile], calls: CallTable) -> tuple[pl.DataFrame, pl.DataFrame]:
    c = _concat(files)
    clocks = rank_clocks(files)
    t_enter = to_global_ns(c["t_enter"], c["rank"], clocks)
    t_leave = to_global_ns(c["t_leave"], c["rank"], clocks)
    comm, comms = _comm_ids(files, c["rank"], c["comm"].astype(np.int64))
    rows = pl.DataFrame({
        "rec": np.arange(c["call"].size, dtype=np.int64),
        "parent": _parents(c["call"], c["rank"], c["thread"]),
        "rank": c["rank"], "thread": c["thread"], "call_id": c["call"].astype(np.int32),
        "t_enter_ns": t_enter,
        # t_leave 0: the call never returned (the rank died inside it)
        "t_leave_ns": pl.Series(t_leave).set(pl.Series(c["t_leave"] == 0), None),
        "bytes": c["bytes"].astype(np.int64),
        "callsite_addr": c["callsite"], "req": (c["req"] & 0x7FFFFFFF).astype(np.int64),
        # set by the recorder when MPI returned a shared, already complete request object
        "immediate": (c["req"] & 0x80000000) != 0, "peer_raw": c["peer"],
        "tag_raw": c["tag"], "comm": comm,
    })
    return rows, comms


def _roles(rows: pl.DataFrame, calls: CallTable) -> pl.DataFrame:
    call = rows["call_id"].to_numpy()
    return rows.with_columns(pl.Series("role", calls.role[call].astype(str)),
                             pl.Series("starts", calls.starts[call]))


def merge_trace(trace_dir: Path) -> MergeResult:
    t0 = time.perf_counter()
    trace_dir = Path(trace_dir)
    manifest = read_manifest(trace_dir)
    calls = CallTable.from_manifest(manifest["calls"])
    files = [read_rank_file(p, len(calls.names)) for p in rank_files(trace_dir)]
    warnings = [w for f in files for w in f.warnings] + _unfinished(files)
    rows, comms = _build_frames(files, calls)
    rows = _roles(rows, calls)

    stuck = _stuck_calls(rows, calls)
    rows = rows.filter(pl.col("t_leave_ns").is_not_null() | (pl.col("call_id") >= FIRST_TABLE_ID))
    # Events: one row per MPI call, ordered by rank and time.
    ev = rows.filter(pl.col("call_id") >= FIRST_TABLE_ID).sort("rank", "t_enter_ns", "rec")
    ev = ev.with_columns(pl.int_range(pl.len(), dtype=pl.Int64).alias("event"))
    ev_of_rec = ev.select("rec", "event")
    rows = rows.join(ev_of_rec.rename({"rec": "parent", "event": "parent_event"}), on="parent", how="left")

    # Request completions, joined to their starts.
    done = (rows.filter((pl.col("role") == "complete") & (pl.col("req") != 0))
            .select("rank", "req", pl.col("t_leave_ns").alias("t_complete_ns"),
                    pl.col("parent_event").alias("completed_by"), pl.col("peer_raw").alias("c_peer"),
                    pl.col("tag_raw").alias("c_tag"), pl.col("bytes").alias("c_bytes"))
            .unique(["rank", "req"], keep="first"))
    late = (rows.filter(pl.col("role") == "immediate").select("rank", "req", pl.lit(True).alias("late"))
            .unique(["rank", "req"]))
    starts = (rows.filter(pl.col("starts") & (pl.col("req") != 0))
              .join(done, on=["rank", "req"], how="left")
              .join(late, on=["rank", "req"], how="left")
              .with_columns(pl.col("immediate") | pl.col("late").fill_null(False))
              .with_columns(
                  pl.when(pl.col("immediate")).then(pl.col("t_leave_ns")).otherwise(pl.col("t_complete_ns"))
                  .alias("t_complete_ns"),
                  pl.when(pl.col("immediate")).then(pl.col("parent_event")).otherwise(pl.col("completed_by"))
                  .alias("completed_by")))

    sends, recvs = _p2p_sides(rows, starts)
    raw_messages, unmatched_s, unmatched_r = match_messages(sends, recvs)

    # Clock causality: whole-rank shifts removing any receive-before-send.
    nranks = max(max(int(f.header["world_size"]) for f in files), max(f.rank for f in files) + 1)
    shifts, feasible = causality_shifts(raw_messages["src"].to_numpy(), raw_messages["dst"].to_numpy(),
                                        raw_messages["t_send_enter_ns"].to_numpy(),
                                        raw_messages["t_recv_leave_ns"].to_numpy(), nranks)
    if shifts.any():
        warnings.append(f"clock correction: {int((shifts > 0).sum())} rank(s) shifted by up to "
                        f"{int(shifts.max())} ns so that no message is received before it was sent")
    if not feasible:
        warnings.append("clock correction: some receive-before-send violations remain (cyclic); clamped")

    messages = _shift_messages(raw_messages, shifts, feasible)
    ev = _final_events(ev, starts, rows, shifts)
    colls, coll_of_event = _collectives(ev, comms, calls)
    ev = ev.join(coll_of_event, on="event", how="left")
    ev = _with_callsites(ev, trace_dir)
    ev = _public_events(ev, calls)

    _write_tables(trace_dir, {"events": ev, "messages": messages, "collectives": colls, "comms": comms})
    manifest.update({
        "merged": True,
        "merged_by": __version__,
        "counts": {"events": ev.height, "messages": messages.height, "collectives": colls.height,
                   "unmatched_sends": unmatched_s, "unmatched_recvs": unmatched_r,
                   "dropped": int(sum(int(f.header["dropped"]) for f in files))},
        "ranks": nranks,
        "rank_states": {str(f.rank): R.STATE_NAMES.get(f.state, "unknown") for f in files},
        "truncated_ranks": [f.rank for f in files if f.cut_off],
        "unfinished_calls": stuck,
        "hosts": {str(f.rank): f.header["hostname"].decode(errors="replace") for f in files},
        "clock": {"kind": "tsc" if any(int(f.header["clock_kind"]) for f in files) else "monotonic",
                  "ranks": [c.to_dict() for c in rank_clocks(files).values()],
                  "causality_shift_ns": shifts.tolist()},
        "t0_ns": int(ev["t_enter_ns"].min()) if ev.height else 0,
        "warnings": warnings,
    })
    write_manifest(trace_dir, manifest)
    return MergeResult(ev.height, messages.height, colls.height, unmatched_s, unmatched_r,
                       time.perf_counter() - t0, warnings)


def _stuck_calls(rows: pl.DataFrame, calls: CallTable) -> dict[str, str]:
    """The call each rank (thread) was inside when its recording ended."""
    open_calls = rows.filter(pl.col("t_leave_ns").is_null() & (pl.col("call_id") >= FIRST_TABLE_ID))
    return {f"{r['rank']}.{r['thread']}": calls.names[r["call_id"]] for r in open_calls.iter_rows(named=True)
            if calls.names[r["call_id"]] != "MPI_Finalize"}


def _unfinished(files: list[RankFile]) -> list[str]:
    by_state: dict[str, list[int]] = {}
    for f in files:
        if f.cut_off:
            what = R.STATE_NAMES.get(f.state, "unknown state")
            if int(f.header["end_signal"]):
                what += f", signal {int(f.header['end_signal'])}"
            by_state.setdefault(what, []).append(f.rank)
    return [f"rank{'s' if len(r) > 1 else ''} {', '.join(map(str, r))} did not finish ({what}); "
            f"read up to the last record" for what, r in by_state.items()]


def _p2p_sides(rows: pl.DataFrame, starts: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    rows = rows.filter(pl.col("t_leave_ns").is_not_null())  # unfinished calls delivered nothing known
    real = pl.col("peer_raw") >= 0
    blocking_send = rows.filter((pl.col("role") == "send") & real).select(
        "comm", pl.col("rank").alias("src"), pl.col("peer_raw").alias("dst"), pl.col("tag_raw").alias("tag"),
        "bytes", pl.col("t_enter_ns").alias("t_send_enter_ns"), pl.col("t_leave_ns").alias("t_send_leave_ns"),
        pl.col("parent_event").alias("send_event"))
    nb_send = starts.filter(pl.col("role").is_in(["isend", "psend", "isendrecv"]) & real).select(
        "comm", pl.col("rank").alias("src"), pl.col("peer_raw").alias("dst"), pl.col("tag_raw").alias("tag"),
        "bytes", pl.col("t_enter_ns").alias("t_send_enter_ns"), pl.col("t_complete_ns").alias("t_send_leave_ns"),
        pl.col("parent_event").alias("send_event"))
    sends = pl.concat([blocking_send, nb_send])

    recv_cols = ["comm", "src", "dst", "tag", "recv_bytes", "t_recv_enter_ns", "t_recv_leave_ns", "recv_event"]
    blocking_recv = rows.filter(pl.col("role").is_in(["recv", "recv_part"]) & real).select(
        "comm", pl.col("peer_raw").alias("src"), pl.col("rank").alias("dst"), pl.col("tag_raw").alias("tag"),
        pl.col("bytes").alias("recv_bytes"), pl.col("t_enter_ns").alias("t_recv_enter_ns"),
        pl.col("t_leave_ns").alias("t_recv_leave_ns"), pl.col("parent_event").alias("recv_event"))
    nb_recv = starts.filter(pl.col("role").is_in(["irecv", "precv", "isendrecv"]) & (pl.col("c_peer") >= 0)).select(
        "comm", pl.col("c_peer").alias("src"), pl.col("rank").alias("dst"), pl.col("c_tag").alias("tag"),
        pl.col("c_bytes").alias("recv_bytes"), pl.col("t_enter_ns").alias("t_recv_enter_ns"),
        pl.col("t_complete_ns").alias("t_recv_leave_ns"), pl.col("parent_event").alias("recv_event"))
    # Matched probes: the message is taken off the queue at Mprobe; it is
    # delivered by Mrecv, or by the completion of Imrecv's request.
    probes = rows.filter((pl.col("role") == "mprobe") & real & (pl.col("req") != 0))
    mrecv = rows.filter(pl.col("role") == "mrecv").select("rank", "req", pl.col("t_leave_ns").alias("t_m"))
    imrecv = starts.filter(pl.col("role") == "imrecv").select("rank", "req", pl.col("t_complete_ns").alias("t_i"))
    probed = (probes.join(mrecv, on=["rank", "req"], how="left").join(imrecv, on=["rank", "req"], how="left")
              .select("comm", pl.col("peer_raw").alias("src"), pl.col("rank").alias("dst"),
                      pl.col("tag_raw").alias("tag"), pl.col("bytes").alias("recv_bytes"),
                      pl.col("t_enter_ns").alias("t_recv_enter_ns"),
                      pl.coalesce("t_m", "t_i").alias("t_recv_leave_ns"),
                      pl.col("parent_event").alias("recv_event")))
    recvs = pl.concat([blocking_recv.select(recv_cols), nb_recv.select(recv_cols), probed.select(recv_cols)])
    return sends, recvs


def _shift_messages(m: pl.DataFrame, shifts: np.ndarray, feasible: bool) -> pl.DataFrame:
    s = pl.Series(shifts)
    src_shift = s.gather(m["src"].cast(pl.UInt32))
    dst_shift = s.gather(m["dst"].cast(pl.UInt32))
    m = m.with_columns(
        (pl.col("t_send_enter_ns") + src_shift).alias("t_send_enter_ns"),
        (pl.col("t_send_leave_ns") + src_shift).alias("t_send_leave_ns"),
        (pl.col("t_recv_enter_ns") + dst_shift).alias("t_recv_enter_ns"),
        (pl.col("t_recv_leave_ns") + dst_shift).alias("t_recv_leave_ns"),
    )
    if not feasible:
        m = m.with_columns(pl.max_horizontal("t_recv_leave_ns", "t_send_enter_ns").alias("t_recv_leave_ns"))
    return m.select("src", "dst", "tag", "comm", "bytes", "recv_bytes", "t_send_enter_ns", "t_send_leave_ns",
                    "t_recv_enter_ns", "t_recv_leave_ns", "send_event", "recv_event")


def _final_events(ev: pl.DataFrame, starts: pl.DataFrame, rows: pl.DataFrame, shifts: np.ndarray) -> pl.DataFrame:
    s = pl.Series(shifts)
    link = starts.filter(pl.col("call_id") >= FIRST_TABLE_ID).select("rec", "t_complete_ns", "completed_by")
    ev = ev.join(link, on="rec", how="left")
    shift = s.gather(ev["rank"].cast(pl.UInt32))
    role = pl.col("role")
    rooted = role.is_in(["coll"]) & (pl.col("peer_raw") >= 0)
    is_coll = role == "coll"
    # Receive calls carry the status envelope; MPI_ANY_* and absent values are null.
    return ev.with_columns(
        (pl.col("t_enter_ns") + shift).alias("t_enter_ns"),
        (pl.col("t_leave_ns") + shift).alias("t_leave_ns"),
        (pl.col("t_complete_ns") + shift).alias("t_complete_ns"),
        pl.when(~is_coll & (pl.col("peer_raw") >= 0)).then(pl.col("peer_raw")).alias("peer"),
        pl.when(rooted).then(pl.col("peer_raw")).alias("root"),
        pl.when(~is_coll & ~role.is_in(["create", "create_win"]) & (pl.col("tag_raw") > R.TAG_ANY))
        .then(pl.col("tag_raw")).alias("tag"),
        pl.when(is_coll | role.is_in(["create", "create_win"])).then(pl.col("tag_raw")).alias("seq"),
        pl.when(pl.col("req") != 0).then(pl.col("req")).alias("request"),
        pl.when(pl.col("comm") >= 0).then(pl.col("comm")).alias("comm"),
    )


def _call_names(ids: pl.Series, calls: CallTable) -> pl.Series:
    names = pl.Enum(sorted({n for n in calls.names if n}))
    return pl.Series("call", calls.names).gather(ids).cast(names)


def _collectives(ev: pl.DataFrame, comms: pl.DataFrame, calls: CallTable) -> tuple[pl.DataFrame, pl.DataFrame]:
    rows = ev.filter((pl.col("role") == "coll") & pl.col("comm").is_not_null()).select(
        "event", "comm", "seq", "call_id", "root", "bytes", "t_enter_ns",
        pl.coalesce("t_complete_ns", "t_leave_ns").alias("t_done_ns"))
    rows = rows.rename({"call_id": "call"})
    inst = group_collectives(rows, comms.select("comm", "comm_size"))
    of_event = rows.join(inst.select("comm", "seq", "coll_id"), on=["comm", "seq"]).select("event", "coll_id")
    return inst.drop("seq").with_columns(_call_names(inst["call"], calls)), of_event


def _with_callsites(ev: pl.DataFrame, trace_dir: Path) -> pl.DataFrame:
    labels = resolve_callsites(trace_dir, ev.select("rank", "callsite_addr").unique())
    return ev.join(labels, on=["rank", "callsite_addr"], how="left")


def _public_events(ev: pl.DataFrame, calls: CallTable) -> pl.DataFrame:
    ev = ev.sort("event")
    return ev.select(
        "event", "rank", "thread", _call_names(ev["call_id"], calls),
        "t_enter_ns", "t_leave_ns", "comm", "peer", "tag", "bytes", "root", "request",
        "t_complete_ns", "completed_by", "coll_id", "seq", "callsite", "callsite_addr",
    )


def _write_tables(trace_dir: Path, tables: dict[str, pl.DataFrame]) -> None:
    for name, df in tables.items():
        path = trace_dir / f"{name}.parquet"
        tmp = trace_dir / f".{name}.parquet.tmp"
        try:
            df.write_parquet(tmp, compression="zstd", statistics=True)
            tmp.replace(path)
        except OSError as e:
            tmp.unlink(missing_ok=True)
            raise UsageError(f"cannot write {path} ({e.strerror}); free space or make {trace_dir} "
                             f"writable, then run: mpiscope merge {trace_dir}") from e
