"""Collective instances of a merge in pieces: each piece's share, then the whole.

(communicator, sequence number) names an instance (match.py). A piece sums up
its ranks' part of every instance (partials); the parts are added up
(summed), numbered as tables.collective_ids does (by first entry, then
communicator, then sequence number) and made collectives.parquet with the
values tables.collectives_table gives (assembly.py). "First" (the instance's call and root)
means first in that table's row order: event rows (by event id, so by piece)
before persistent starts.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import polars as pl

from mpiscope.trace.columns import ROLE
from mpiscope.trace.tables import Rows, instance_calls, nullable

_KIND_BIT, _PIECE_BIT = 62, 40  # a row's place in that order: kind (0 rows, 1 starts), piece, position


def coll_rows(rows: Rows, starts: Rows) -> pl.DataFrame:
    """The rows of a piece that take part in collective instances (tables.collective_ids)."""
    frames = []
    for kind, e, idx in ((0, rows, np.flatnonzero((rows["role"] == ROLE["coll"]) & (rows["comm"] >= 0)
                                                  & (rows["rc"] == 0))),
                         (1, starts, np.flatnonzero((starts["comm"] >= 0) & (starts["call"] > 0)))):
        peer, t_complete, t_leave = e["peer"][idx], e["t_complete"][idx], e["t_leave"][idx]
        t_done = np.where(t_complete >= 0, t_complete, t_leave)
        frames.append(pl.DataFrame([
            pl.Series("order", (np.int64(kind) << _KIND_BIT) + idx.astype(np.int64)),
            pl.Series("comm", e["comm"][idx].astype(np.int64)), pl.Series("seq", e["tag"][idx].astype(np.int64)),
            pl.Series("call", instance_calls(e, idx).astype(np.uint32)), nullable(peer, peer >= 0, "root"),
            pl.Series("bytes", e["bytes"][idx].astype(np.int64)),
            nullable(e["recv_bytes"][idx].astype(np.int64), e["recv_valid"][idx], "recv_bytes"),
            pl.Series("t_enter_ns", e["t_enter"][idx].astype(np.int64)),
            nullable(t_done.astype(np.int64), t_done >= 0, "t_done_ns"),
        ]))
    return pl.concat(frames)


def partials(rows: pl.DataFrame, piece: int) -> pl.DataFrame:
    """One piece's share of each instance, by (comm, seq, call), in packed-key order with the key as
    a column (KEY), where the keys pack. The rows come in `order` (coll_rows): sorted stably by key,
    each instance's rows stay in it, so its first row and its first root are where the reductions
    start. A group-by with a sort inside took 1.8 s for one rank of 1,000 M records on 64 (2.6 M
    collectives)."""
    key = _packed(rows)
    if key is None or not rows.height:
        return _partials_grouped(rows, piece)
    at = np.argsort(key, kind="stable")
    start = np.flatnonzero(np.r_[True, key[at][1:] != key[at][:-1]])
    never, n = np.iinfo(np.int64).max, rows.height

    def column(name: str, fill: int) -> np.ndarray:
        values: np.ndarray = rows[name].fill_null(fill).to_numpy()[at]
        return values

    order = column("order", 0) + (piece << _PIECE_BIT)
    with_root = np.minimum.reduceat(np.where(rows["root"].is_not_null().to_numpy()[at], np.arange(n), n), start)
    found = with_root < n
    with_root = np.minimum(with_root, n - 1)
    leave_min = np.minimum.reduceat(column("t_done_ns", never), start)
    leave_max = np.maximum.reduceat(column("t_done_ns", -1), start)
    return pl.DataFrame([
        *(rows[c].gather(at[start]) for c in ("comm", "seq", "call")),
        pl.Series(KEY, key[at[start]]),
        pl.Series("first", order[start]),
        nullable(column("root", 0)[with_root].astype(np.int32), found, "root"),
        nullable(order[with_root], found, "root_first"),
        pl.Series("bytes", np.add.reduceat(column("bytes", 0), start)),
        pl.Series("recv_count", np.add.reduceat(rows["recv_bytes"].is_not_null().to_numpy()[at], start,
                                                dtype=np.uint32)),
        pl.Series("recv_bytes", np.add.reduceat(column("recv_bytes", 0), start)),
        pl.Series("ranks", np.diff(np.r_[start, n]).astype(np.uint32)),
        pl.Series("t_first_enter_ns", np.minimum.reduceat(column("t_enter_ns", never), start)),
        pl.Series("t_last_enter_ns", np.maximum.reduceat(column("t_enter_ns", -1), start)),
        nullable(leave_min, leave_min != never, "t_first_leave_ns"),
        nullable(leave_max, leave_max != -1, "t_last_leave_ns"),
    ])


def _partials_grouped(rows: pl.DataFrame, piece: int) -> pl.DataFrame:
    """partials for keys that do not pack into 64 bits."""
    order = pl.col("order") + (piece << _PIECE_BIT)
    return rows.group_by("comm", "seq", "call").agg(
        order.min().alias("first"),
        pl.col("root").sort_by(order).drop_nulls().first(),
        order.filter(pl.col("root").is_not_null()).min().alias("root_first"),
        pl.col("bytes").sum(),
        pl.col("recv_bytes").count().alias("recv_count"),
        pl.col("recv_bytes").sum(),
        pl.len().alias("ranks"),
        pl.col("t_enter_ns").min().alias("t_first_enter_ns"),
        pl.col("t_enter_ns").max().alias("t_last_enter_ns"),
        pl.col("t_done_ns").min().alias("t_first_leave_ns"),
        pl.col("t_done_ns").max().alias("t_last_leave_ns"),
    )


# partials' columns, by how two shares of one instance add up
_MIN, _MAX = ("first", "root_first", "t_first_enter_ns", "t_first_leave_ns"), ("t_last_enter_ns", "t_last_leave_ns")
_SUM = ("bytes", "recv_count", "recv_bytes", "ranks")
_IDENTITY = {**{n: np.iinfo(np.int64).max for n in _MIN}, **{n: np.iinfo(np.int64).min for n in _MAX}}
SEQ_BITS, CALL_BITS = 32, 12   # a packed key: communicator, sequence number, call
KEY = "key"   # a share's packed keys (partials)


def pack(comm: Any, seq: Any, call: Any = 0) -> Any:
    """(comm, seq, call) as one packed key: of Python ints an int, of uint64 arrays an array."""
    return (comm << (SEQ_BITS + CALL_BITS)) | (seq << CALL_BITS) | call


def _packed(df: pl.DataFrame) -> np.ndarray | None:
    """(comm, seq, call) as one uint64 per row, or None where one of them does not fit its bits."""
    comm, seq, call = (df[c].to_numpy() for c in ("comm", "seq", "call"))
    if comm.size and (comm.min() < 0 or comm.max() >= 1 << (64 - SEQ_BITS - CALL_BITS) or seq.min() < 0
                      or seq.max() >= 1 << SEQ_BITS or call.max() >= 1 << CALL_BITS):
        return None
    key: np.ndarray = pack(comm.astype(np.uint64), seq.astype(np.uint64), call.astype(np.uint64))
    return key


class _Sums:
    """The shares added up so far, one row per (comm, seq, call) in packed-key order, as NumPy
    columns (a null as its reduction's identity) that each share is added to in place; keys new to
    the sums are sorted in. 1,000 M records of 64 ranks, cut in 4 (256 shares of ~650 K of the
    2.6 M instances): 63 s where each addition built the sums anew as a DataFrame."""

    def __init__(self, share: pl.DataFrame, key: np.ndarray) -> None:
        self.schema = share.schema
        share, self.key = _in_key_order(share, key)
        self.columns = {name: self._values(share, name).copy() for name in share.columns}  # added to in place

    @staticmethod
    def _values(share: pl.DataFrame, name: str) -> np.ndarray:
        column = share[name]
        # most columns hold no null: read as they are, not copied by fill_null
        filled = column.fill_null(_IDENTITY.get(name, 0)) if column.null_count() else column
        values: np.ndarray = filled.to_numpy()
        return values

    def add(self, share: pl.DataFrame, key: np.ndarray) -> None:
        share, key = _in_key_order(share, key)
        rows: slice | np.ndarray
        mine: slice | np.ndarray
        lo = int(np.searchsorted(self.key, key[0])) if key.size else 0
        if key.size and np.array_equal(self.key[lo:lo + key.size], key):
            # the instances of the sums from the share's first on, all of them: a piece of a rank
            # that took part in every collective over all ranks, as the rest of the pieces of its
            # time
            rows, mine, hit = slice(lo, lo + key.size), slice(None), np.ones(key.size, bool)
        else:
            at = np.minimum(np.searchsorted(self.key, key), max(self.key.size - 1, 0))
            hit = self.key[at] == key if self.key.size else np.zeros(key.size, bool)
            rows, mine = at[hit], np.flatnonzero(hit)
        theirs = {name: self._values(share, name) for name in share.columns}
        root = self.columns["root"]
        later = theirs["root_first"][mine] < self.columns["root_first"][rows]   # the share saw a root first
        root[rows] = np.where(later, theirs["root"][mine], root[rows])
        for names, reduce in ((_MIN, np.minimum), (_MAX, np.maximum), (_SUM, np.add)):
            for name in names:
                values = self.columns[name]
                values[rows] = reduce(values[rows], theirs[name][mine])
        if hit.all():
            return
        new = ~hit
        key = np.concatenate([self.key, key[new]])
        order = np.argsort(key, kind="stable")
        self.key = key[order]
        self.columns = {name: np.concatenate([values, theirs[name][new]])[order]
                        for name, values in self.columns.items()}

    def frame(self) -> pl.DataFrame:
        """The sums with their nulls, in the shares' columns and types."""
        found = self.columns["root_first"] != _IDENTITY["root_first"]
        out = []
        for name, dtype in self.schema.items():
            values = self.columns[name]
            if name == "root":
                out.append(nullable(values, found, name).cast(dtype))
            elif name in _IDENTITY:
                out.append(nullable(values, values != _IDENTITY[name], name).cast(dtype))
            else:
                out.append(pl.Series(name, values, dtype))
        return pl.DataFrame(out)


def seqs_of(share: pl.DataFrame) -> dict[int, int] | None:
    """Each communicator's sequence numbers as far as the share knows them (its largest plus one),
    where its keys pack (partials); else None."""
    if KEY not in share.columns and share.height:
        return None
    most = share.group_by("comm").agg(pl.col("seq").max() + 1)
    return dict(zip(most["comm"].to_list(), most["seq"].to_list()))


def summed(shares: Iterable[pl.DataFrame]) -> pl.DataFrame | None:
    """The shares added up, one row per (comm, seq, call) (partials' columns); None without any."""
    total: pl.DataFrame | None = None   # added up by group-by: keys that do not pack into 64 bits
    sums: _Sums | None = None
    for share in shares:
        if KEY in share.columns:
            key, share = share[KEY].to_numpy(), share.drop(KEY)
        else:
            key = _packed(share)
        if total is not None:
            key = None
        if key is None:
            if sums is not None:
                total, sums = sums.frame(), None
            total = share if total is None else _add_up_grouped(pl.concat([total, share]))
        elif sums is None:
            sums = _Sums(share, key)
        else:
            sums.add(share, key)
    return sums.frame() if sums is not None else total


def _in_key_order(df: pl.DataFrame, key: np.ndarray) -> tuple[pl.DataFrame, np.ndarray]:
    if key.size < 2 or bool((key[1:] > key[:-1]).all()):
        return df, key
    order = np.argsort(key)
    return df[order], key[order]


def _add_up_grouped(shares: pl.DataFrame) -> pl.DataFrame:
    """_add_up for keys that do not pack into 64 bits."""
    return shares.group_by("comm", "seq", "call").agg(
        pl.col("first").min(),
        pl.col("root").sort_by("root_first", nulls_last=True).first(),
        pl.col("root_first").min(),
        pl.col("bytes").sum(), pl.col("recv_count").sum(), pl.col("recv_bytes").sum(), pl.col("ranks").sum(),
        pl.col("t_first_enter_ns").min(), pl.col("t_last_enter_ns").max(),
        pl.col("t_first_leave_ns").min(), pl.col("t_last_leave_ns").max(),
    )
