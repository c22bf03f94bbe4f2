"""Read the raw per-rank files of a trace directory (raw/rank-NNNNNN.*).

A rank file may end anywhere: a rank killed by SIGKILL leaves whole blocks
with a zero tail, a copied or damaged file may stop mid-block. Everything up
to the last whole, committed record is read; damage is reported as warnings
naming the rank, and only a file that is not a rank file at all raises
TraceCorrupt.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from mpiscope.errors import TraceCorrupt, TraceNotFound
from mpiscope.trace import record as R

_RANK_FILE = re.compile(r"rank-(\d+)\.msc$")


@dataclass
class CommDef:
    local_id: int
    kind: int
    gid: int
    my_rank: int
    ranks: np.ndarray          # world ranks of the (local) group, in comm-rank order
    remote: np.ndarray         # remote group of an intercommunicator


@dataclass
class RankFile:
    rank: int
    header: np.void
    blocks: list[np.ndarray]   # committed records of each block (views of the mapped file), per thread in order
    block_thread: list[int]    # thread index of each block
    block_ticks: np.ndarray    # clock calibration pairs of the blocks (first and latest of each)
    block_ns: np.ndarray
    comms: list[CommDef]
    state: int
    warnings: list[str] = field(default_factory=list)

    @property
    def cut_off(self) -> bool:
        return self.state != R.STATE_FINISHED

    @property
    def size(self) -> int:
        return sum(b.size for b in self.blocks)

    @property
    def records(self) -> np.ndarray:
        return np.concatenate(self.blocks) if self.blocks else np.zeros(0, R.REC_DTYPE)

    @property
    def thread(self) -> np.ndarray:
        return np.repeat(np.array(self.block_thread, np.uint16), [b.size for b in self.blocks])


def _header(data: np.ndarray, path: Path) -> np.void:
    if data.size < R.HEADER_PAGE:
        raise TraceCorrupt(f"{path} is too short to be an mpiscope rank file; "
                           f"record the program again with mpiscope run")
    hdr: np.void = np.frombuffer(data[: R.FILE_HEADER_DTYPE.itemsize].tobytes(), R.FILE_HEADER_DTYPE)[0]
    if int(hdr["magic"]) != R.FILE_MAGIC:
        raise TraceCorrupt(f"{path} is not an mpiscope rank file (bad magic); "
                           f"remove it or record the program again with mpiscope run")
    geometry = (int(hdr["header_bytes"]), int(hdr["block_bytes"]))
    if R.GEOMETRY.get(int(hdr["version"])) != geometry or int(hdr["rec_bytes"]) != R.REC_BYTES:
        raise TraceCorrupt(f"{path} was written by another version of mpiscope (format "
                           f"{int(hdr['version'])}); read it with that version or record again")
    rank, size = int(hdr["rank"]), int(hdr["world_size"])
    named = _RANK_FILE.search(path.name)
    if not 0 <= rank < size <= R.MAX_WORLD or (named and int(named[1]) != rank):
        raise TraceCorrupt(f"{path} has a damaged header (rank {rank} of {size}); "
                           f"remove it or record the program again with mpiscope run")
    return hdr


def read_rank_file(path: Path, ncalls: int) -> RankFile:
    """All committed records of one rank file; `ncalls` bounds valid call ids.

    The file is memory-mapped: records are views, copied once, later, into
    the merged columns."""
    try:
        data = np.memmap(path, dtype=np.uint8, mode="r") if path.stat().st_size else np.zeros(0, np.uint8)
    except (OSError, ValueError) as e:
        raise TraceCorrupt(f"cannot read {path} ({e}); check the file's permissions") from e
    hdr = _header(data, path)
    rank = int(hdr["rank"])
    warnings: list[str] = []
    header_bytes, block_bytes, recs_per_block = R.layout(int(hdr["version"]))
    nblocks = -(-max(0, data.size - header_bytes) // block_bytes)
    # (thread, seq) -> records, calibration ticks and ns; of a block found
    # twice (ring slot and copy), the copy with more records
    found: dict[tuple[int, int], tuple[np.ndarray, tuple[int, int], tuple[int, int]]] = {}
    damaged = bad_calls = 0
    for b in range(nblocks):
        start = header_bytes + b * block_bytes
        end = min(start + block_bytes, data.size)
        nrec = min(recs_per_block, max(0, end - start - R.BLOCK_HEADER_BYTES) // R.REC_BYTES)
        if end - start < block_bytes and nrec:
            warnings.append(f"rank {rank}: the file ends inside a block; read up to its last whole record")
        if nrec == 0:
            continue
        bh = np.frombuffer(data[start: start + R.BLOCK_HEADER_BYTES].tobytes(), R.BLOCK_HEADER_DTYPE)[0]
        if int(bh["magic"]) != R.BLOCK_MAGIC or int(bh["rank"]) != rank:
            damaged += bool(data[start: start + R.BLOCK_HEADER_BYTES].any())
            continue
        recs = data[start + R.BLOCK_HEADER_BYTES: start + R.BLOCK_HEADER_BYTES + nrec * R.REC_BYTES].view(R.REC_DTYPE)
        calls = recs["call"]
        zero = np.flatnonzero(calls == 0)  # committed records form a prefix of the block
        recs = recs[: zero[0] if zero.size else nrec]
        bad = recs["call"] >= ncalls
        if bad.any():
            bad_calls += int(bad.sum())
            recs = recs[~bad]
        key = (int(bh["thread"]), int(bh["seq"]))
        if key not in found or recs.size > found[key][0].size:
            found[key] = (recs, (int(bh["tick0"]), int(bh["tick_last"])), (int(bh["ns0"]), int(bh["ns_last"])))
    if damaged:
        warnings.append(f"rank {rank}: {damaged} damaged block(s) skipped")
    if bad_calls:
        warnings.append(f"rank {rank}: {bad_calls} record(s) with unknown call ids skipped")
    keys = sorted(found)
    return RankFile(rank=rank, header=hdr, blocks=[found[k][0] for k in keys], block_thread=[k[0] for k in keys],
                    block_ticks=np.array([t for k in keys for t in found[k][1]], np.uint64),
                    block_ns=np.array([n for k in keys for n in found[k][2]], np.uint64),
                    comms=read_comm_defs(path.with_suffix(".comms"), rank, warnings),
                    state=int(hdr["state"]), warnings=warnings)


def read_comm_defs(path: Path, rank: int, warnings: list[str]) -> list[CommDef]:
    if not path.exists():
        warnings.append(f"rank {rank}: no communicator file; only MPI_COMM_WORLD is known")
        return []
    raw = path.read_bytes()
    out: list[CommDef] = []
    pos = 0
    while pos + R.COMMDEF_DTYPE.itemsize <= len(raw):
        d = np.frombuffer(raw, dtype=R.COMMDEF_DTYPE, count=1, offset=pos)[0]
        n = int(d["size"]) + int(d["remote_size"])
        end = pos + R.COMMDEF_DTYPE.itemsize + 4 * n
        if int(d["magic"]) != R.COMMDEF_MAGIC or end > len(raw):
            warnings.append(f"rank {rank}: communicator file damaged after {len(out)} entries")
            break
        ranks = np.frombuffer(raw, dtype="<i4", count=n, offset=pos + R.COMMDEF_DTYPE.itemsize)
        out.append(CommDef(int(d["id"]), int(d["kind"]), int(d["gid"]), int(d["my_rank"]),
                           ranks[: int(d["size"])].copy(), ranks[int(d["size"]):].copy()))
        pos = end
    return out


def rank_files(trace_dir: Path) -> list[Path]:
    raw = Path(trace_dir) / "raw"
    if not raw.is_dir():
        raise TraceNotFound(f"{trace_dir} holds no raw/ directory of rank files; record a trace first: "
                            f"mpiscope run --out {trace_dir} -- mpiexec -n 4 ./app")
    files = sorted(p for p in raw.iterdir() if _RANK_FILE.search(p.name))
    if not files:
        raise TraceNotFound(f"{raw} holds no rank files (the program may not have called MPI_Init "
                            f"under mpiscope); check the program and record again")
    return files
