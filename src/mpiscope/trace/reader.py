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
    records: np.ndarray        # REC_DTYPE, per thread in recording order, threads concatenated
    thread: np.ndarray         # uint16 thread index of each record
    block_ticks: np.ndarray    # clock calibration pairs of the blocks (first and latest of each)
    block_ns: np.ndarray
    comms: list[CommDef]
    state: int
    warnings: list[str] = field(default_factory=list)

    @property
    def cut_off(self) -> bool:
        return self.state != R.STATE_FINISHED


def _header(data: np.ndarray, path: Path) -> np.void:
    if data.size < R.FILE_HEADER_DTYPE.itemsize:
        raise TraceCorrupt(f"{path} is too short to be an mpiscope rank file; "
                           f"record the program again with mpiscope run")
    hdr = data[: R.FILE_HEADER_DTYPE.itemsize].view(R.FILE_HEADER_DTYPE)[0]
    if int(hdr["magic"]) != R.FILE_MAGIC:
        raise TraceCorrupt(f"{path} is not an mpiscope rank file (bad magic); "
                           f"remove it or record the program again with mpiscope run")
    if int(hdr["version"]) != R.FORMAT_VERSION or int(hdr["rec_bytes"]) != R.REC_BYTES \
            or int(hdr["block_bytes"]) != R.BLOCK_BYTES or int(hdr["header_bytes"]) != R.HEADER_BYTES:
        raise TraceCorrupt(f"{path} was written by another version of mpiscope (format "
                           f"{int(hdr['version'])}); read it with that version or record again")
    return hdr


def read_rank_file(path: Path, ncalls: int) -> RankFile:
    """All committed records of one rank file; `ncalls` bounds valid call ids."""
    try:
        data = np.fromfile(path, dtype=np.uint8)
    except OSError as e:
        raise TraceCorrupt(f"cannot read {path} ({e.strerror}); check the file's permissions") from e
    hdr = _header(data, path)
    rank = int(hdr["rank"])
    warnings: list[str] = []
    body = data[R.HEADER_BYTES:]
    nblocks, rest = divmod(body.size, R.BLOCK_BYTES)
    if rest >= R.BLOCK_HEADER_BYTES + R.REC_BYTES:
        # A file cut inside a block: keep the whole records before the cut.
        tail = np.zeros(R.BLOCK_BYTES, dtype=np.uint8)
        tail[:rest] = body[nblocks * R.BLOCK_BYTES:]
        body = np.concatenate([body[: nblocks * R.BLOCK_BYTES], tail])
        nblocks += 1
        warnings.append(f"rank {rank}: the file ends inside a block; read up to its last whole record")
    blocks = body[: nblocks * R.BLOCK_BYTES].reshape(nblocks, R.BLOCK_BYTES)
    bh = np.ascontiguousarray(blocks[:, : R.BLOCK_HEADER_BYTES]).view(R.BLOCK_HEADER_DTYPE).ravel()
    good = (bh["magic"] == R.BLOCK_MAGIC) & (bh["rank"] == rank)
    damaged = (~good) & (blocks[:, : R.BLOCK_HEADER_BYTES].any(axis=1))
    if damaged.any():
        warnings.append(f"rank {rank}: {int(damaged.sum())} damaged block(s) skipped")
    recs = blocks[:, R.BLOCK_HEADER_BYTES: R.BLOCK_HEADER_BYTES + R.RECS_PER_BLOCK * R.REC_BYTES]
    recs = recs.view(R.REC_DTYPE)  # (nblocks, RECS_PER_BLOCK), rows strided by block
    calls = recs["call"]
    # A block is valid up to its first uncommitted (zero) record.
    valid = np.cumprod(calls != 0, axis=1, dtype=np.uint8).astype(bool) & good[:, None]
    bad_call = valid & (calls >= ncalls)
    if bad_call.any():
        warnings.append(f"rank {rank}: {int(bad_call.sum())} record(s) with unknown call ids skipped")
        valid &= ~bad_call
    order = np.lexsort((bh["seq"], bh["thread"]))
    valid = valid[order]
    records = recs[order][valid]
    thread = np.repeat(bh["thread"][order], valid.sum(axis=1))
    state = int(hdr["state"])
    return RankFile(rank=rank, header=hdr, records=records, thread=thread,
                    block_ticks=np.concatenate([bh["tick0"][good], bh["tick_last"][good]]),
                    block_ns=np.concatenate([bh["ns0"][good], bh["ns_last"][good]]),
                    comms=read_comm_defs(path.with_suffix(".comms"), rank, warnings),
                    state=state, warnings=warnings)


def read_comm_defs(path: Path, rank: int, warnings: list[str]) -> list[CommDef]:
    if not path.exists():
        warnings.append(f"rank {rank}: no communicator file; only MPI_COMM_WORLD is known")
        return []
    raw = path.read_bytes()
    out, pos = [], 0
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
