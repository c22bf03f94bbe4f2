"""Write raw trace directories without running MPI: for benchmarks of the
merge at scales a laptop cannot run, and for tests of the readers.

The files are byte-for-byte what libmpiscope writes (record.h), with the
monotonic-ns clock; `halo_trace()` builds a consistent program (nonblocking
ring exchange + allreduce per iteration) with any number of ranks and events.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
from crc32c import crc32c

from mpiscope.capture.manifest import write_manifest
from mpiscope.errors import NativeBuildError
from mpiscope.mpi.find import lib_dir
from mpiscope.trace import record as R


def calls_table() -> list[dict[str, Any]]:
    try:
        calls: list[dict[str, Any]] = json.loads((lib_dir() / "calls.json").read_text())
        return calls
    except (NativeBuildError, OSError) as e:
        raise NativeBuildError(f"the call table is not available ({e}); build the native parts first") from e


def call_id(calls: list[dict[str, Any]], name: str) -> int:
    return int(next(c["id"] for c in calls if c["name"] == name))


def write_rank_file(path: Path, rank: int, size: int, records: np.ndarray, state: int = R.STATE_FINISHED,
                    t_end_ns: int = 0, version: int = R.FORMAT_VERSION) -> None:
    """One rank file (one thread) holding `records` (REC_DTYPE), in the
    layout of format `version` (sparse where the recorder leaves a hole)."""
    header_bytes, block_bytes, recs_per_block = R.layout(version)
    hdr = np.zeros(1, R.FILE_HEADER_DTYPE)
    hdr["magic"], hdr["version"] = R.FILE_MAGIC, version
    hdr["header_bytes"], hdr["block_bytes"], hdr["rec_bytes"] = header_bytes, block_bytes, R.REC_BYTES
    hdr["rank"], hdr["world_size"], hdr["clock_kind"], hdr["state"] = rank, size, R.CLOCK_MONOTONIC_NS, state
    hdr["hostname"], hdr["boot_id"] = b"synthetic", b"synthetic-boot"
    end = t_end_ns or (int(records["t_leave"].max()) if records.size else 0)
    hdr["ns_init"] = hdr["tick_init"] = int(records["t_enter"].min()) if records.size else 1
    hdr["ns_end"] = hdr["tick_end"] = end
    nblocks = max(1, -(-records.size // recs_per_block))
    hdr["nblocks"] = nblocks
    body = np.zeros((nblocks, block_bytes), dtype=np.uint8)
    bh = np.zeros(nblocks, R.BLOCK_HEADER_DTYPE)
    bh["magic"], bh["version"], bh["rank"], bh["seq"] = R.BLOCK_MAGIC, version, rank, np.arange(nblocks)
    body[:, : R.BLOCK_HEADER_BYTES] = bh.view(np.uint8).reshape(nblocks, R.BLOCK_HEADER_BYTES)
    padded = np.zeros(nblocks * recs_per_block, R.REC_DTYPE)
    padded[: records.size] = records
    body[:, R.BLOCK_HEADER_BYTES: R.BLOCK_HEADER_BYTES + recs_per_block * R.REC_BYTES] = \
        padded.view(np.uint8).reshape(nblocks, -1)
    if version >= R.CRC_SINCE:  # sealed as the recorder's writer thread and MPI_Finalize seal them
        for b in range(nblocks):
            n = min(recs_per_block, max(0, records.size - b * recs_per_block))
            bh[b]["crc_records"] = n
            head_bytes = bh[b: b + 1].view(np.uint8)[: R.BLOCK_CRC_BYTES].tobytes()
            records_bytes = body[b, R.BLOCK_HEADER_BYTES: R.BLOCK_HEADER_BYTES + n * R.REC_BYTES].tobytes()
            bh[b]["crc"] = crc32c(records_bytes, crc32c(head_bytes))
        body[:, : R.BLOCK_HEADER_BYTES] = bh.view(np.uint8).reshape(nblocks, R.BLOCK_HEADER_BYTES)
        if state == R.STATE_FINISHED:
            hdr["crc"] = crc32c(hdr.view(np.uint8)[: R.HEADER_CRC_BYTES].tobytes())
            hdr["sealed"] = R.SEALED_MAGIC
    with open(path, "wb") as f:
        head = np.zeros(R.HEADER_PAGE, np.uint8)
        head[: R.FILE_HEADER_DTYPE.itemsize] = hdr.view(np.uint8)
        head.tofile(f)
        f.seek(header_bytes)
        body.tofile(f)


def write_world_comm(path: Path, rank: int, size: int) -> None:
    d = np.zeros(1, R.COMMDEF_DTYPE)
    d["magic"], d["id"], d["gid"], d["size"], d["my_rank"] = R.COMMDEF_MAGIC, 0, 1, size, rank
    d["crc"] = crc32c(d.tobytes() + np.arange(size, dtype="<i4").tobytes())
    path.write_bytes(d.tobytes() + np.arange(size, dtype="<i4").tobytes())


def halo_trace(out: Path, ranks: int, events: int, seed: int = 0) -> int:
    """A ring exchange (Irecv left, Isend right, Waitall with two completions)
    and an Allreduce per iteration, on every rank; about `events` records in
    all. Returns the number of records written."""
    calls = calls_table()
    ids = {n: call_id(calls, n) for n in ("MPI_Irecv", "MPI_Isend", "MPI_Waitall", "MPI_Allreduce")}
    sub_complete = call_id(calls, "sub:complete")
    per_iter = 6
    iters = max(1, events // (ranks * per_iter))
    rng = np.random.default_rng(seed)
    (out / "raw").mkdir(parents=True, exist_ok=True)
    for rank in range(ranks):
        it = np.arange(iters)
        base = 1_000_000 + it * 20_000 + rank * 7
        rec = np.zeros((iters, per_iter), R.REC_DTYPE)
        kinds = [ids["MPI_Irecv"], ids["MPI_Isend"], ids["MPI_Waitall"], sub_complete, sub_complete,
                 ids["MPI_Allreduce"]]
        offsets = [0, 300, 600, 600, 600, 12_000]
        lengths = [200, 200, 5_000, 5_000, 5_000, 3_000]
        jitter = rng.integers(0, 100, size=iters)
        for j, (k, o, ln) in enumerate(zip(kinds, offsets, lengths)):
            rec["call"][:, j] = k
            rec["t_enter"][:, j] = base + o + jitter
            rec["t_leave"][:, j] = base + o + ln + jitter
            rec["comm"][:, j] = 0
            rec["peer"][:, j] = R.PEER_NONE
            rec["tag"][:, j] = R.TAG_NONE
            rec["callsite"][:, j] = 0x401000 + 16 * j
        left, right = (rank - 1) % ranks, (rank + 1) % ranks
        req_recv, req_send = 2 * it + 1, 2 * it + 2
        rec["peer"][:, 0], rec["tag"][:, 0], rec["bytes"][:, 0], rec["req"][:, 0] = left, 7, 4096, req_recv
        rec["peer"][:, 1], rec["tag"][:, 1], rec["bytes"][:, 1], rec["req"][:, 1] = right, 7, 4096, req_send
        # Waitall's completions: the receive carries its status envelope.
        rec["req"][:, 3], rec["peer"][:, 3], rec["tag"][:, 3], rec["bytes"][:, 3] = req_recv, left, 7, 4096
        rec["req"][:, 4] = req_send
        rec["tag"][:, 5], rec["bytes"][:, 5] = it, 8  # collective sequence number, 8 bytes
        flat = rec.ravel()
        write_rank_file(out / "raw" / f"rank-{rank:06d}.msc", rank, ranks, flat)
        write_world_comm(out / "raw" / f"rank-{rank:06d}.comms", rank, ranks)
    write_manifest(out, {"run_id": "synthetic", "command": ["synthetic halo", str(ranks), str(events)],
                         "calls": calls, "ranks": ranks, "merged": False})
    return iters * per_iter * ranks
