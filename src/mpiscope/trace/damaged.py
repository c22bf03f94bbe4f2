"""Merging around what the reader dropped from damaged rank files (issue 21).

Messages are matched in order per envelope (match.py): the k-th send of
(comm, src, dst, tag) with the k-th receive. Records missing in the middle of
a rank's file would shift that order for every later message of the
envelope and pair them wrongly. Around a gap the order is still known from
both ends: the messages a damaged rank posted before its first gap are the
first ones of their envelopes, and those it posted after its last gap are the
last ones. Those are matched by position from the front and from the back;
the messages it posted in between (and those of the other side that they
would have matched) stay unmatched, and are counted.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mpiscope.trace.columns import Records
from mpiscope.trace.match import SIDE_FIELDS, Side, match_messages
from mpiscope.trace.reader import RankFile
from mpiscope.trace.requests import StartLinks

NEVER = np.iinfo(np.int64).max


@dataclass(frozen=True)
class Window:
    """A damaged rank's records are complete up to `before` and from `after` on (ns)."""
    before: int
    after: int


def gap_windows(files: list[RankFile], rec: Records, links: StartLinks) -> dict[int, Window]:
    """The window of every rank with missing records. `files` in the order build_records
    concatenated their records (rec); call before their blocks are released."""
    windows: dict[int, Window] = {}
    start = 0
    for f in files:
        end = start + f.size
        before, after = NEVER, -NEVER
        for thread, pos in f.gaps:
            g = start + pos
            before = min(before, int(rec.t_enter[g - 1]) if g - 1 >= start and rec.thread[g - 1] == thread
                         else -NEVER)
            after = max(after, int(rec.t_enter[g]) if g < end and rec.thread[g] == thread else NEVER)
        if f.gaps:
            # a request started before the gap and never completed may have been completed in it:
            # its message's place in the order is unknown from its start on
            mine = (links.index >= start) & (links.index < end) & (links.completed_by < 0)
            posted = rec.t_enter[links.index[mine]]
            open_before = posted[posted <= before]
            if open_before.size:
                before = min(before, int(open_before.min()) - 1)
            windows[f.rank] = Window(before, after)
        start = end
    return windows


def match_around_gaps(sends: Side, recvs: Side, windows: dict[int, Window]) -> tuple[np.ndarray, np.ndarray]:
    """match_messages, with the envelopes of damaged ranks matched from both ends (module doc)."""
    if not windows:
        return match_messages(sends, recvs)
    damaged = np.array(sorted(windows), np.int64)
    touched = [np.isin(s.src, damaged) | np.isin(s.dst, damaged) for s in (sends, recvs)]
    s_touched, r_touched = touched
    si, ri = match_messages(sends.take(~s_touched), recvs.take(~r_touched))
    si2, ri2 = _match_ends(sends.take(s_touched), recvs.take(r_touched), windows)
    return (np.concatenate([np.flatnonzero(~s_touched)[si], np.flatnonzero(s_touched)[si2]]),
            np.concatenate([np.flatnonzero(~r_touched)[ri], np.flatnonzero(r_touched)[ri2]]))


def _envelope_keys(s: Side) -> np.ndarray:
    """A number per distinct (comm, src, dst, tag)."""
    env = np.stack([s.comm.astype(np.int64), s.src, s.dst, s.tag])
    return np.unique(env, axis=1, return_inverse=True)[1].reshape(-1).astype(np.int64)


def _may_match(s: Side, owner: np.ndarray, windows: dict[int, Window]) -> tuple[np.ndarray, np.ndarray]:
    """Whether the rank of each message's side lets it be matched from the front, from the back."""
    before = np.full(s.size, NEVER, np.int64)
    after = np.full(s.size, -NEVER, np.int64)
    for rank, w in windows.items():
        mine = owner == rank
        before[mine], after[mine] = w.before, w.after
    return s.posted <= before, s.posted >= after


def _match_ends(sends: Side, recvs: Side, windows: dict[int, Window]) -> tuple[np.ndarray, np.ndarray]:
    """Pairs among messages that touch a damaged rank: same envelope, same position from the
    front where both may be matched from the front, or from the back where both may."""
    joined = Side.of({f: np.concatenate([getattr(sends, f), getattr(recvs, f)]) for f in SIDE_FIELDS})
    key = _envelope_keys(joined)
    may_front, may_back = _may_match(joined, np.concatenate([sends.src, recvs.dst]), windows)
    n = sends.size
    pairs = []
    for from_back, may in ((False, may_front), (True, may_back)):
        pos = _side_positions(key, joined.posted, joined.event, n, from_back)
        s_id, r_id = np.flatnonzero(may[:n]), np.flatnonzero(may[n:])
        pairs.append(_join(key[:n][s_id], pos[:n][s_id], s_id, key[n:][r_id], pos[n:][r_id], r_id))
    si = np.concatenate([pairs[0][0], pairs[1][0]])
    ri = np.concatenate([pairs[0][1], pairs[1][1]])
    # a message matched from both ends (only where damage added records) keeps its first pairing
    keep = _first_unique(si) & _first_unique(ri)
    return si[keep], ri[keep]


def _side_positions(key: np.ndarray, posted: np.ndarray, event: np.ndarray, n: int, from_back: bool) -> np.ndarray:
    """Position of each message within its envelope among its own side (sends: first n)."""
    out = np.empty(key.size, np.int64)
    for lo, hi in ((0, n), (n, key.size)):
        k, p, e = key[lo:hi], posted[lo:hi], event[lo:hi]
        order = np.lexsort((e, p, k))
        ks = k[order]
        first = np.r_[True, ks[1:] != ks[:-1]] if ks.size else np.zeros(0, bool)
        starts = np.flatnonzero(first)
        group = np.cumsum(first) - 1
        idx = np.arange(ks.size) - starts[group] if ks.size else np.zeros(0, np.int64)
        if from_back:
            sizes = np.diff(np.r_[starts, ks.size])
            idx = sizes[group] - 1 - idx
        pos = np.empty(ks.size, np.int64)
        pos[order] = idx
        out[lo:hi] = pos
    return out


def _join(ka: np.ndarray, pa: np.ndarray, a_id: np.ndarray, kb: np.ndarray, pb: np.ndarray,
          b_id: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Ids of the rows of a and b with equal (key, position) (each unique within its side)."""
    if not ka.size or not kb.size:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    width = int(max(pa.max(), pb.max())) + 1
    _, ia, ib = np.intersect1d(ka * width + pa, kb * width + pb, assume_unique=True, return_indices=True)
    return a_id[ia], b_id[ib]


def _first_unique(x: np.ndarray) -> np.ndarray:
    keep = np.zeros(x.size, bool)
    keep[np.unique(x, return_index=True)[1]] = True
    return keep
