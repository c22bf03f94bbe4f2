"""The adaptive broadcast's swaps, as the optimisers logged them (raw/rank-N.bcast).

Each optimiser (rank 0 of a communicator) writes one line per operation that
changed its virtual-rank table: `swap|undo COMM BCAST A B INTERVAL TOTAL_NS`,
COMM its own communicator id, BCAST the first broadcast on that communicator
(1-based) that runs on the new table, A and B the world ranks whose virtual
ranks were exchanged, INTERVAL the broadcasts until the next optimisation,
TOTAL_NS the total wait the decision saw. The merge turns them into
manifest["bcast"]["swaps"], with the communicator ids of the tables.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from mpiscope.trace.columns import comm_table
from mpiscope.trace.reader import RankFile

_FILE = re.compile(r"rank-(\d+)\.bcast$")
_LINE = re.compile(r"(swap|undo) (\d+) (\d+) (-?\d+) (-?\d+) (\d+) (-?\d+)")


def bcast_swaps(trace_dir: Path, files: list[RankFile]) -> tuple[list[dict[str, Any]], list[str]]:
    """Every swap and undo of the run in (communicator, broadcast) order, and warnings for damaged lines."""
    _, local, _ = comm_table(files)
    swaps: list[dict[str, Any]] = []
    warnings: list[str] = []
    for path in sorted((Path(trace_dir) / "raw").glob("rank-*.bcast")):
        named = _FILE.search(path.name)
        if not named:
            continue
        rank = int(named[1])
        bad = 0
        for line in path.read_text(errors="replace").splitlines():
            m = _LINE.fullmatch(line.strip())
            if not m:
                bad += 1
                continue
            op, comm, bcast, a, b, interval, total = m.groups()
            swaps.append({"comm": local.get((rank, int(comm)), -1), "bcast": int(bcast), "op": op,
                          "rank_a": int(a), "rank_b": int(b), "interval": int(interval),
                          "total_wait_ns": int(total), "optimiser": rank})
        if bad:
            warnings.append(f"{path}: {bad} line(s) of the broadcast's swap log were unreadable and left out")
    swaps.sort(key=lambda s: (s["comm"], s["bcast"]))
    return swaps, warnings
