"""Write raw trace directories without running MPI: for benchmarks of the
merge at scales a laptop cannot run, and for tests of the readers.

The files are byte-for-byte what libmpiscope writes (record.h), with the
monotonic-ns clock; `halo_trace()` builds a consistent program (nonblocking
ring exchange + allreduce per iteration) with any number of ranks and events.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Self

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
    with RankFileWriter(path, rank, size, state, t_end_ns, version) as w:
        w.write(records)


class RankFileWriter:
    """A rank file written block by block as records arrive (`write`, then `close`), so
    that a rank of any length takes a few blocks of memory; the bytes are those
    write_rank_file writes for all the records at once."""

    def __init__(self, path: Path, rank: int, size: int, state: int = R.STATE_FINISHED, t_end_ns: int = 0,
                 version: int = R.FORMAT_VERSION) -> None:
        self.rank, self.size, self.state, self.t_end_ns, self.version = rank, size, state, t_end_ns, version
        self.header_bytes, self.block_bytes, self.recs_per_block = R.layout(version)
        self.pending: list[np.ndarray] = []
        self.npending = self.nblocks = 0
        self.t_first: int | None = None
        self.t_last = 0
        self.file = open(path, "wb")  # noqa: SIM115 (closed by close or __exit__)
        self.file.seek(self.header_bytes)  # the header goes in last, when the blocks are counted

    def write(self, records: np.ndarray) -> None:
        if records.size:
            t_first = int(records["t_enter"].min())
            self.t_first = t_first if self.t_first is None else min(self.t_first, t_first)
            self.t_last = max(self.t_last, int(records["t_leave"].max()))
        self.pending.append(records)
        self.npending += records.size
        full = self.npending // self.recs_per_block * self.recs_per_block
        if full:
            both = self.pending[0] if len(self.pending) == 1 else np.concatenate(self.pending)
            self._blocks(both[:full])
            self.pending, self.npending = [both[full:].copy()], self.npending - full

    def close(self) -> None:
        if self.npending or not self.nblocks:  # a file has one block at least (empty if no record)
            self._blocks(np.concatenate(self.pending) if self.pending else np.zeros(0, R.REC_DTYPE))
        self.pending, self.npending = [], 0
        self.file.seek(0)
        _file_header(self).tofile(self.file)
        self.file.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        if exc[0] is None:
            self.close()
        else:
            self.file.close()

    def _blocks(self, records: np.ndarray) -> None:
        """Write `records` as whole blocks (the last one maybe part filled)."""
        version, rpb = self.version, self.recs_per_block
        nblocks = max(1, -(-records.size // rpb))
        body = np.zeros((nblocks, self.block_bytes), dtype=np.uint8)
        bh = np.zeros(nblocks, R.BLOCK_HEADER_DTYPE)
        bh["magic"], bh["version"], bh["rank"] = R.BLOCK_MAGIC, version, self.rank
        bh["seq"] = self.nblocks + np.arange(nblocks)
        padded = np.zeros(nblocks * rpb, R.REC_DTYPE)
        padded[: records.size] = records
        body[:, R.BLOCK_HEADER_BYTES: R.BLOCK_HEADER_BYTES + rpb * R.REC_BYTES] = \
            padded.view(np.uint8).reshape(nblocks, -1)
        if version >= R.CRC_SINCE:  # sealed as the recorder's writer thread seals them
            for b in range(nblocks):
                n = min(rpb, max(0, records.size - b * rpb))
                bh[b]["crc_records"] = n
                head_bytes = bh[b: b + 1].view(np.uint8)[: R.BLOCK_CRC_BYTES].tobytes()
                records_bytes = body[b, R.BLOCK_HEADER_BYTES: R.BLOCK_HEADER_BYTES + n * R.REC_BYTES].tobytes()
                bh[b]["crc"] = crc32c(records_bytes, crc32c(head_bytes))
        body[:, : R.BLOCK_HEADER_BYTES] = bh.view(np.uint8).reshape(nblocks, R.BLOCK_HEADER_BYTES)
        body.tofile(self.file)
        self.nblocks += nblocks


def _file_header(w: RankFileWriter) -> np.ndarray:
    """The header page of a finished writer, sealed (as MPI_Finalize seals it) when finished."""
    hdr = np.zeros(1, R.FILE_HEADER_DTYPE)
    hdr["magic"], hdr["version"] = R.FILE_MAGIC, w.version
    hdr["header_bytes"], hdr["block_bytes"], hdr["rec_bytes"] = w.header_bytes, w.block_bytes, R.REC_BYTES
    hdr["rank"], hdr["world_size"], hdr["clock_kind"], hdr["state"] = w.rank, w.size, R.CLOCK_MONOTONIC_NS, w.state
    hdr["hostname"], hdr["boot_id"] = b"synthetic", b"synthetic-boot"
    hdr["ns_init"] = hdr["tick_init"] = 1 if w.t_first is None else w.t_first
    hdr["ns_end"] = hdr["tick_end"] = w.t_end_ns or w.t_last
    hdr["nblocks"] = w.nblocks
    if w.version >= R.CRC_SINCE and w.state == R.STATE_FINISHED:
        hdr["crc"] = crc32c(hdr.view(np.uint8)[: R.HEADER_CRC_BYTES].tobytes())
        hdr["sealed"] = R.SEALED_MAGIC
    head = np.zeros(R.HEADER_PAGE, np.uint8)
    head[: R.FILE_HEADER_DTYPE.itemsize] = hdr.view(np.uint8)
    return head


def write_world_comm(path: Path, rank: int, size: int) -> None:
    d = np.zeros(1, R.COMMDEF_DTYPE)
    d["magic"], d["id"], d["gid"], d["size"], d["my_rank"] = R.COMMDEF_MAGIC, 0, 1, size, rank
    d["crc"] = crc32c(d.tobytes() + np.arange(size, dtype="<i4").tobytes())
    path.write_bytes(d.tobytes() + np.arange(size, dtype="<i4").tobytes())


HALO_PER_ITER = 6  # records per iteration of halo_trace's program


def halo_trace(out: Path, ranks: int, events: int, seed: int = 0) -> int:
    """A ring exchange (Irecv left, Isend right, Waitall with two completions)
    and an Allreduce per iteration, on every rank; about `events` records in
    all. Returns the number of records written. Written in bounded memory
    (stream_halo_trace)."""
    return stream_halo_trace(out, ranks, events, seed)


def stream_halo_trace(out: Path, ranks: int, events: int, seed: int = 0,
                      chunk_iters: int | None = 8 * R.RECS_PER_BLOCK // HALO_PER_ITER) -> int:
    """halo_trace's files, byte for byte, each rank written `chunk_iters` iterations at
    a time (None: all at once). Memory: the chunk (8 blocks, ~50 MiB by default) plus
    8 bytes per iteration of one rank (its jitter, drawn whole so that the random
    stream is halo_trace's): ~20 MiB for 10^9 records on 64 ranks."""
    calls = calls_table()
    ids = {n: call_id(calls, n) for n in ("MPI_Irecv", "MPI_Isend", "MPI_Waitall", "MPI_Allreduce")}
    kinds = [ids["MPI_Irecv"], ids["MPI_Isend"], ids["MPI_Waitall"], call_id(calls, "sub:complete"),
             call_id(calls, "sub:complete"), ids["MPI_Allreduce"]]
    iters = max(1, events // (ranks * HALO_PER_ITER))
    step = iters if chunk_iters is None else max(1, chunk_iters)
    rng = np.random.default_rng(seed)
    (out / "raw").mkdir(parents=True, exist_ok=True)
    for rank in range(ranks):
        jitter = rng.integers(0, 100, size=iters)
        with RankFileWriter(out / "raw" / f"rank-{rank:06d}.msc", rank, ranks) as w:
            for first in range(0, iters, step):
                it = np.arange(first, min(iters, first + step))
                w.write(_halo_records(rank, ranks, it, jitter[it], kinds).ravel())
        write_world_comm(out / "raw" / f"rank-{rank:06d}.comms", rank, ranks)
    write_manifest(out, {"run_id": "synthetic", "command": ["synthetic halo", str(ranks), str(events)],
                         "calls": calls, "ranks": ranks, "merged": False})
    return iters * HALO_PER_ITER * ranks


def _halo_records(rank: int, ranks: int, it: np.ndarray, jitter: np.ndarray, kinds: list[int]) -> np.ndarray:
    """The records of iterations `it` of one rank, (iterations, HALO_PER_ITER)."""
    # ranks start 7 ns apart, in runs of 256: a rank's left neighbour's send (300 ns in) must
    # come before its receive completes (5,600 ns in), which one stagger over 1,024 ranks broke
    # (every 1023 -> 0 message received 1.9 us before it was sent)
    base = 1_000_000 + it * 20_000 + (rank % 256) * 7
    rec = np.zeros((it.size, HALO_PER_ITER), R.REC_DTYPE)
    offsets = [0, 300, 600, 600, 600, 12_000]
    lengths = [200, 200, 5_000, 5_000, 5_000, 3_000]
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
    return rec
