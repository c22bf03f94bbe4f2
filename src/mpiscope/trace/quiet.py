"""Where one rank's records can be cut, so that a rank larger than a piece's share of the
budget (or of the work: few ranks on many workers) is merged in several pieces.

A piece is merged on its own (pieces.py): its records, request links, event rows,
point-to-point sides and collective shares are built from its records alone, and only
its event ids are offset by the events of the pieces before it. That gives the whole
rank's values where nothing ties a record before the cut to one after it. A cut
before a call record is quiet (native/kernels/merge/quiet.c) where

* no request id is open: every record naming an id (a start, its completion, the free
  or cancel of a request, a persistent request's starts, a matched probe's message and
  its Mrecv) lies on one side of the cut. Links go by (rank, id)
  over the whole rank (requests.py, the Mrecv lookup in p2p.c), so this keeps them;
* the call before returned, and before this one entered: folded polls that took turns
  overlap, and are laid out together (outcomes.spread_cycles);
* the rank is single-threaded and undamaged: threads' records interleave by time, not
  by position, and gaps are matched around by rank (damaged.py).

Sub-records follow their call, so a cut before a call keeps them with it. A rank with
no quiet point in a stretch (a request left open for the rest of the run) keeps that
stretch in one piece.
"""

from __future__ import annotations

from mpiscope.trace import native
from mpiscope.trace.columns import FIRST_TABLE_ID, ROLE, CallTable, block_table
from mpiscope.trace.reader import RankFile, mapped


def cuttable(f: RankFile) -> bool:
    """A rank whose records can be cut: one thread, nothing dropped or missing."""
    return not f.gaps and not f.damage.blocks and not f.damage.records and not any(f.block_thread)


def quiet_cuts(f: RankFile, calls: CallTable, most: int, release: bool = False) -> list[int]:
    """Record positions (in the rank file's order) where the pieces of at most `most` records
    after the first one start, as far as its quiet points allow; none for a rank that cannot
    be cut (cuttable) or that fits. `f` is read whole (its blocks mapped); with `release`, the
    pages of its blocks leave the process once scanned (reader.read_rank_file's), where every
    block is a view of the file."""
    if f.size <= most or not cuttable(f):
        return []
    return native.quiet_cuts(block_table([f], {f.rank: 0}), calls.role, calls.starts, FIRST_TABLE_ID,
                             ROLE["create"], ROLE["create_win"], most,
                             release and all(mapped(b) for b in f.blocks)).tolist()


def spans(records: int, cuts: list[int]) -> list[tuple[int, int]]:
    """The record ranges that cuts make of a rank's records."""
    bounds = [0, *cuts, records]
    return [(int(a), int(b)) for a, b in zip(bounds[:-1], bounds[1:])]


def longest(records: dict[int, int], cuts: dict[int, list[int]]) -> int:
    """Records of the largest piece a rank can make (a whole rank, or the longest of its spans)."""
    return max((b - a for r, n in records.items() for a, b in spans(n, cuts.get(r, []))), default=0)
