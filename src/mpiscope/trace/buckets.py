"""Message matching of a merge in pieces, one envelope bucket at a time.

Every message of one (communicator, source, destination) falls in one bucket
(pieces.bucket_of), and matching, matching around gaps and the re-pairing of
threads' messages all work within an envelope: a bucket is matched on its own
exactly as the whole trace would be. The clock correction needs from each
bucket only the strongest constraint between each ordered pair of ranks
(Bellman-Ford reduces to that, clocks._bellman_ford) and the messages it
refuses; the whole trace solves it once (shifts_of) and the buckets' messages
are shifted afterwards, where a rank moved (shift_messages).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa

from mpiscope.trace.clocks import ShiftBounds, _bellman_ford
from mpiscope.trace.damaged import Window, match_around_gaps
from mpiscope.trace.match import P2P, Side, reorder_threads
from mpiscope.trace.pieces import Whole, read_bucket, write
from mpiscope.trace.received import overclaimed
from mpiscope.trace.storage import read_table, write_table
from mpiscope.trace.tables import messages_table


@dataclass
class Matched:
    """What one bucket tells the whole trace."""
    messages: int
    unmatched_sends: int
    unmatched_recvs: int
    pair_src: np.ndarray          # the strongest constraint of each ordered pair of ranks
    pair_dst: np.ndarray
    pair_need: np.ndarray
    refused: int = 0              # messages asking for more than the clocks allow
    refused_need: int = 0
    refused_shown: list[str] = field(default_factory=list)
    lost_sends: int = 0           # beside damaged or missing ranks (merge._lost_messages)
    lost_recvs: int = 0
    # receives that recorded more than their message held (received.overclaimed): event ids, bytes
    over_event: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    over_bytes: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))


def _side(t: pa.Table) -> tuple[Side, np.ndarray, np.ndarray]:
    c = {n: t.column(n).to_numpy() for n in t.column_names}
    return Side(c["comm"], c["src"], c["dst"], c["tag"], c["posted"], c["event"]), c["bytes"], c["leave"]


def match_bucket(whole: Whole, event_offsets: np.ndarray, held: list[tuple[np.ndarray, np.ndarray]],
                 windows: dict[int, Window], bounds: ShiftBounds, damaged: list[int], path: Path) -> Matched:
    """Match one bucket's messages, write them (times unshifted) to `path`; event_offsets: each
    piece's first event id; held: the pieces that spilled sends, receives to it and the batches
    (pieces.batches_of)."""
    sends, sbytes, sleave = _side(read_bucket(whole, "sends", event_offsets, *held[0]))
    recvs, rbytes, rleave = _side(read_bucket(whole, "recvs", event_offsets, *held[1]))
    p2p = P2P(sends, sbytes, sleave, recvs, rbytes, rleave)
    si, ri = match_around_gaps(sends, recvs, windows)
    ri = reorder_threads(p2p, si, ri)
    write(whole, write_table, messages_table(p2p, si, ri, np.zeros(bounds.host.size, np.int64), True), path)
    done = rleave[ri] >= 0
    src, dst = sends.src[si][done], recvs.dst[ri][done]
    need = sends.posted[si][done] - rleave[ri][done]
    refused = need > bounds.between(src, dst)
    m = Matched(int(si.size), sends.size - si.size, recvs.size - ri.size, *_strongest(src[~refused],
                                                                                     dst[~refused], need[~refused]))
    m.over_event, m.over_bytes = overclaimed(p2p, si, ri)
    if refused.any():
        events = sends.event[si][done][refused]
        m.refused, m.refused_need = int(refused.sum()), int(need[refused].max())
        m.refused_shown = [f"rank {s} -> {d} (send event {e})" for s, d, e in
                           zip(src[refused][:3].tolist(), dst[refused][:3].tolist(), events[:3].tolist())]
    if damaged:
        bad = np.array(damaged)
        sent = np.ones(sends.size, bool)
        sent[si] = False
        got = np.ones(recvs.size, bool)
        got[ri] = False
        m.lost_sends = int((sent & np.isin(sends.dst, bad) & ~np.isin(sends.src, bad)).sum())
        m.lost_recvs = int((got & np.isin(recvs.src, bad) & ~np.isin(recvs.dst, bad)).sum())
    return m


def _strongest(src: np.ndarray, dst: np.ndarray, need: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The largest need of each ordered pair (src, dst)."""
    if not need.size:
        e = np.zeros(0, np.int64)
        return e, e, e
    key = (src.astype(np.int64) << 32) + dst.astype(np.int64)
    order = np.argsort(key, kind="stable")
    key_s = key[order]
    starts = np.flatnonzero(np.r_[True, key_s[1:] != key_s[:-1]])
    return key_s[starts] >> 32, key_s[starts] & 0xffffffff, np.maximum.reduceat(need[order], starts)


def shifts_of(matched: list[Matched], nranks: int, cap_ns: int) -> tuple[np.ndarray, bool]:
    """clocks.causality_shifts over the buckets' strongest constraints."""
    src, dst, need = (np.concatenate([getattr(m, f"pair_{n}") for m in matched] or [np.zeros(0, np.int64)])
                      for n in ("src", "dst", "need"))
    refused = sum(m.refused for m in matched)
    if need.size == 0 or need.max() <= 0:
        return np.zeros(nranks, np.int64), not refused
    shifts, feasible = _bellman_ford(src, dst, need, nranks)
    if (shifts > cap_ns).any():
        shifts[shifts > cap_ns] = 0
        feasible = False
    return shifts, feasible and not refused


def shift_messages(path: Path, shifts: np.ndarray, feasible: bool) -> None:
    """Move one bucket's messages by the ranks' shifts (tables.messages_table's arithmetic)."""
    shift = pl.Series(shifts)
    df = read_table(path, "messages")
    src_shift = shift.gather(df["src"].cast(pl.Int64))
    dst_shift = shift.gather(df["dst"].cast(pl.Int64))
    send_enter = df["t_send_enter_ns"] + src_shift
    recv_leave = df["t_recv_leave_ns"] + dst_shift
    if not feasible:
        recv_leave = pl.select(pl.when(recv_leave.is_not_null()).then(pl.max_horizontal(recv_leave, send_enter))
                               ).to_series().alias("t_recv_leave_ns")
    df = df.with_columns(t_send_enter_ns=send_enter, t_send_leave_ns=df["t_send_leave_ns"] + src_shift,
                         t_recv_enter_ns=df["t_recv_enter_ns"] + dst_shift,
                         t_recv_leave_ns=recv_leave).sort("t_send_enter_ns", "send_event")
    tmp = path.with_suffix(".shifted")
    write_table(df, tmp)
    tmp.replace(path)


def refused_sentence(count: int, need: int, shown: list[str], span_ns: int) -> str:
    """The warning on messages whose clock shift was refused."""
    return (f"clock correction: {count} message(s) were received before they were sent, by up to "
            f"{need:,} ns, more than the clocks allow (ranks on one host read one clock; across "
            f"hosts, the offsets' measured uncertainty; never more than the run, {span_ns / 1e9:.3g} s): "
            f"no rank was shifted for them, their receive is clamped to their send "
            f"({', '.join(shown)}{', ...' if count > 3 else ''})")


def lost_sentence(sends: int, recvs: int, damaged: list[int]) -> str:
    """One line on the messages of intact ranks left unmatched beside damaged or missing ones."""
    if not damaged or (not sends and not recvs):
        return ""
    return (f"{sends:,} send(s) to and {recvs:,} receive(s) from damaged or missing rank(s) "
            f"{', '.join(map(str, sorted(damaged)))} stay unmatched (their other side is lost)")
