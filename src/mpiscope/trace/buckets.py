"""Message matching of a merge in pieces, one envelope bucket at a time.

Every message of one (communicator, source, destination) falls in one bucket
(pieces.bucket_of), and matching, matching around gaps and the re-pairing of
threads' messages all work within an envelope: a bucket is matched on its own
exactly as the whole trace would be. The clock correction needs from each
bucket only the strongest constraint between each ordered pair of ranks
(Bellman-Ford reduces to that, clocks._bellman_ford) and the messages it
refuses; the whole trace solves it once (shifts_of) and the buckets' messages
are shifted afterwards, where a rank moved (shift_messages).

A bucket with more sends and receives than the budget holds is matched in
windows (_in_windows), its unmatched sides carried from one to the next: one
envelope of a long run can hold more messages than any budget.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa

from mpiscope.trace.clocks import ShiftBounds, _bellman_ford
from mpiscope.trace.damaged import Window, match_around_gaps
from mpiscope.trace.match import P2P, Side, ambiguous, match_messages, reorder_threads
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
    refused_first: list[tuple[int, ...]] = field(default_factory=list)   # their envelope, posting, event
    lost_sends: int = 0           # beside damaged or missing ranks (merge._lost_messages)
    lost_recvs: int = 0
    # receives that recorded more than their message held (received.overclaimed): event ids, bytes
    over_event: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    over_bytes: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    parts: list[Path] = field(default_factory=list)   # the part files of its messages
    held: int = 0                 # sends and receives held at once: all of them, or a window's


def _side(t: pa.Table) -> tuple[Side, np.ndarray, np.ndarray]:
    c = {n: t.column(n).to_numpy() for n in t.column_names}
    return Side.of(c), c["bytes"], c["leave"]


def _p2p(sends: pa.Table, recvs: pa.Table) -> P2P:
    (s, sbytes, sleave), (r, rbytes, rleave) = _side(sends), _side(recvs)
    return P2P(s, sbytes, sleave, r, rbytes, rleave)


def match_bucket(whole: Whole, event_offsets: np.ndarray, held: list[tuple[np.ndarray, np.ndarray]],
                 windows: dict[int, Window], bounds: ShiftBounds, damaged: list[int], path: Path,
                 counts: np.ndarray, firsts: np.ndarray, most: int) -> Matched:
    """Match one bucket's messages, write them (times unshifted) to `path`; event_offsets: each
    piece's first event id; held: the pieces that spilled sends, receives to it and the batches
    (pieces.batches_of); counts: the sends and receives each piece spilled to it (piece x side);
    firsts: each piece's first entry. A bucket of more than `most` sides is matched in windows
    where it can be (_in_windows), else whole."""
    if int(counts.sum()) > most:
        m = _in_windows(whole, event_offsets, held, counts, firsts, most, bounds, path,
                        np.array(sorted(set(windows) | set(damaged)), np.int64))
        if m is not None:
            return m
    p2p = _p2p(read_bucket(whole, "sends", event_offsets, *held[0]),
               read_bucket(whole, "recvs", event_offsets, *held[1]))
    si, ri = match_around_gaps(p2p.sends, p2p.recvs, windows)
    ri = reorder_threads(p2p, si, ri, whole.threaded)
    write(whole, write_table, messages_table(p2p, si, ri, np.zeros(bounds.host.size, np.int64), True), path)
    m = _told(p2p, si, ri, bounds, damaged)
    m.parts, m.held = [path], p2p.sends.size + p2p.recvs.size
    return m


def _told(p2p: P2P, si: np.ndarray, ri: np.ndarray, bounds: ShiftBounds, damaged: list[int]) -> Matched:
    """What the matched pairs (si, ri) of p2p tell the whole trace."""
    sends, recvs, rleave = p2p.sends, p2p.recvs, p2p.recv_leave
    done = rleave[ri] >= 0
    src, dst = sends.src[si][done], recvs.dst[ri][done]
    need = sends.posted[si][done] - rleave[ri][done]
    refused = need > bounds.between(src, dst)
    m = Matched(int(si.size), sends.size - si.size, recvs.size - ri.size, *_strongest(src[~refused],
                                                                                     dst[~refused], need[~refused]))
    m.over_event, m.over_bytes = overclaimed(p2p, si, ri)
    if refused.any():
        first = np.flatnonzero(refused)[:3]   # the first in matching order: envelope, then posting
        at = si[done][first]
        m.refused, m.refused_need = int(refused.sum()), int(need[refused].max())
        m.refused_first = [(int(sends.comm[i]), int(sends.src[i]), int(sends.dst[i]), int(sends.tag[i]),
                            int(sends.posted[i]), int(sends.event[i])) for i in at.tolist()]
        m.refused_shown = _shown(m.refused_first)
    if damaged:
        bad = np.array(damaged)
        sent = np.ones(sends.size, bool)
        sent[si] = False
        got = np.ones(recvs.size, bool)
        got[ri] = False
        m.lost_sends = int((sent & np.isin(sends.dst, bad) & ~np.isin(sends.src, bad)).sum())
        m.lost_recvs = int((got & np.isin(recvs.src, bad) & ~np.isin(recvs.dst, bad)).sum())
    return m


def _shown(refused: list[tuple[int, ...]]) -> list[str]:
    """Refused messages as the warning shows them, from (comm, src, dst, tag, posted, event)."""
    return [f"rank {k[1]} -> {k[2]} (send event {k[5]})" for k in refused]


def _in_windows(whole: Whole, event_offsets: np.ndarray, held: list[tuple[np.ndarray, np.ndarray]],
                counts: np.ndarray, firsts: np.ndarray, most: int, bounds: ShiftBounds, path: Path,
                damaged: np.ndarray) -> Matched | None:
    """A bucket matched in windows of at most `most` sides where its pieces' batches allow (counts:
    each piece's sends and receives in it), one part file each (PATH-W.parquet): the batches read
    in the order of the pieces' first entries (a rank's pieces in time order), each window's sends
    and receives matched together with those the windows before left unmatched, which carry on.
    The k-th send of an envelope (comm, src, dst, tag) pairs with its k-th receive (match.py), and
    every earlier one of either side is then paired already: the pairs are those of the bucket
    matched whole. None (the bucket is then matched whole) where a receive completed before its
    send began between ranks of which one has several threads, whose pairing reorder_threads may
    change (between single-threaded ranks that is the clocks' error: the pairs stand), where a
    message's source or destination is among the `damaged` ranks (matched around their gaps from
    both ends: damaged.py), or where one side has no rows. The
    generated halo of 1,000 M records on 64 ranks has 64 envelopes of 5.2 M sends and receives
    each, more than a budget of 1 GiB holds."""
    chunks = sorted((int(firsts[piece]), piece, k, batch) for k, (pieces, batches) in enumerate(held)
                    for piece, batch in zip(pieces.tolist(), batches.tolist()))
    window = _Window(bounds, path, whole.threaded, damaged)
    try:
        for _, piece, k, batch in chunks:
            rows = int(counts[piece, k])
            if window.holding and window.holding + rows > most and all(window.pending):
                window.match()
            window.add(k, read_bucket(whole, ("sends", "recvs")[k], event_offsets, np.array([piece]),
                                      np.array([batch])))
        window.match()
    except _Whole:
        for part in window.parts:
            part.unlink(missing_ok=True)
        return None
    return window.matched()


class _Window:
    """The sides a windowed bucket holds, its part files and what its windows told."""

    def __init__(self, bounds: ShiftBounds, path: Path, threaded: tuple[int, ...], damaged: np.ndarray) -> None:
        self.bounds, self.path, self.threaded, self.damaged = bounds, path, threaded, damaged
        self.pending: list[list[pa.Table]] = [[], []]   # sends, receives: carried on, then read
        self.holding = self.most_held = 0
        self.parts: list[Path] = []
        self.told: list[Matched] = []

    def add(self, side: int, table: pa.Table) -> None:
        if self.damaged.size and (np.isin(table["src"].to_numpy(), self.damaged)
                                  | np.isin(table["dst"].to_numpy(), self.damaged)).any():
            raise _Whole
        self.pending[side].append(table)
        self.holding += table.num_rows

    def match(self) -> None:
        """Match what is held, write its messages, keep the sides left unmatched."""
        if not all(self.pending):
            raise _Whole
        sides = [pa.concat_tables(tables).combine_chunks() for tables in self.pending]
        p2p = _p2p(*sides)
        si, ri = match_messages(p2p.sends, p2p.recvs)
        if ambiguous(p2p, si, ri, self.threaded).any():
            raise _Whole
        self.parts.append(self.path.with_name(f"{self.path.stem}-{len(self.parts):04d}.parquet"))
        write_table(messages_table(p2p, si, ri, np.zeros(self.bounds.host.size, np.int64), True), self.parts[-1])
        self.told.append(_told(p2p, si, ri, self.bounds, []))
        self.most_held = max(self.most_held, self.holding)
        self.pending = [[_unmatched(side, at)] for side, at in zip(sides, (si, ri))]
        self.holding = sum(t.num_rows for t, in self.pending)

    def matched(self) -> Matched:
        """The bucket's Matched from its windows'."""
        told = self.told
        src, dst, need = (np.concatenate([getattr(m, f"pair_{n}") for m in told]) for n in ("src", "dst", "need"))
        (sends,), (recvs,) = self.pending
        m = Matched(sum(t.messages for t in told), sends.num_rows, recvs.num_rows, *_strongest(src, dst, need))
        m.refused = sum(t.refused for t in told)
        m.refused_need = max(t.refused_need for t in told)
        m.refused_first = sorted(k for t in told for k in t.refused_first)[:3]
        m.refused_shown = _shown(m.refused_first)
        m.over_event = np.concatenate([t.over_event for t in told])
        m.over_bytes = np.concatenate([t.over_bytes for t in told])
        m.parts, m.held = self.parts, self.most_held
        return m


class _Whole(Exception):
    """A bucket that windows cannot match as it would be matched whole."""


def _unmatched(side: pa.Table, matched: np.ndarray) -> pa.Table:
    keep = np.ones(side.num_rows, bool)
    keep[matched] = False
    return side.filter(pa.array(keep))


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
