"""Read the raw per-rank files of a trace directory (raw/rank-NNNNNN.*).

A rank file may end anywhere: a rank killed by SIGKILL leaves whole blocks
with a zero tail, a copied or damaged file may stop mid-block. Everything up
to the last whole, committed record is read; damage is reported as warnings
naming the rank, and only a file that is not a rank file at all raises
TraceCorrupt.
"""

from __future__ import annotations

import mmap
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from crc32c import crc32c

from mpiscope.errors import TraceCorrupt, TraceNotFound
from mpiscope.trace import record as R
from mpiscope.trace.plausible import REASONS, Limits, reasons

RANK_FILE = re.compile(r"rank-(\d+)\.msc$")


@dataclass
class CommDef:
    local_id: int
    kind: int
    gid: int
    my_rank: int
    ranks: np.ndarray          # world ranks of the (local) group, in comm-rank order
    remote: np.ndarray         # remote group of an intercommunicator


@dataclass
class Damage:
    """What the reader dropped from one rank's files, and why."""
    blocks: int = 0
    records: int = 0
    reasons: dict[str, list[int]] = field(default_factory=dict)  # reason -> [blocks, records]
    comm_file: bool = False  # the communicator file is damaged after its last sound entry

    def drop_block(self, reason: str, records: int) -> None:
        self.blocks += 1
        self.records += records
        counts = self.reasons.setdefault(reason, [0, 0])
        counts[0] += 1
        counts[1] += records

    def drop_records(self, reason: str, records: int) -> None:
        self.records += records
        self.reasons.setdefault(reason, [0, 0])[1] += records

    def __bool__(self) -> bool:
        return bool(self.blocks or self.records or self.comm_file)

    def to_dict(self) -> dict[str, dict[str, int]]:
        return {reason: {"blocks": b, "records": r} for reason, (b, r) in self.reasons.items()}

    def sentence(self, rank: int) -> str:
        """One line for the CLI: what was dropped and why."""
        parts = [f"{b} block{'s' if b != 1 else ''} ({r:,} records): {reason}" if b else
                 f"{r:,} record{'s' if r != 1 else ''}: {reason}" for reason, (b, r) in self.reasons.items()]
        if self.comm_file:
            parts.append("damaged communicator definitions (messages on those communicators stay unmatched)")
        return f"rank {rank}: damaged raw file, dropped " + "; ".join(parts)

    def report(self, rank: int, warnings: list[str]) -> None:
        if self:
            warnings.append(self.sentence(rank))


@dataclass
class RankFile:
    rank: int
    header: np.void
    blocks: list[np.ndarray]   # committed records of each block (views of the mapped file), per thread in order
    block_thread: list[int]    # thread index of each block
    block_seq: list[int]       # its number within its thread
    block_ticks: np.ndarray    # clock calibration pairs of the blocks (first and latest of each)
    block_ns: np.ndarray
    comms: list[CommDef]
    state: int
    warnings: list[str] = field(default_factory=list)
    damage: Damage = field(default_factory=lambda: Damage())
    gaps: list[tuple[int, int]] = field(default_factory=list)  # (thread, record position): records missing there

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

    def keep(self, first: int, last: int) -> None:
        """Keep records [first, last) of those read (its blocks, in order) and no others."""
        blocks, threads, seqs = [], [], []
        at = 0
        for b, t, s in zip(self.blocks, self.block_thread, self.block_seq):
            lo, hi = max(first - at, 0), min(last - at, b.size)
            if lo < hi:
                blocks.append(b[lo:hi])
                threads.append(t)
                seqs.append(s)
            at += b.size
        self.blocks, self.block_thread, self.block_seq = blocks, threads, seqs


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
                           f"{int(hdr['version'])}) or its header is damaged; read it with that version "
                           f"or record again")
    sealed = int(hdr["sealed"]) == R.SEALED_MAGIC or int(hdr["state"]) == R.STATE_FINISHED
    if int(hdr["version"]) >= R.CRC_SINCE and sealed and \
            crc32c(data[: R.HEADER_CRC_BYTES].data) != int(hdr["crc"]):
        raise TraceCorrupt(f"{path} has a damaged header (checksum mismatch); "
                           f"remove it or record the program again with mpiscope run")
    rank, size = int(hdr["rank"]), int(hdr["world_size"])
    named = RANK_FILE.search(path.name)
    if not 0 <= rank < size <= R.MAX_WORLD or (named and int(named[1]) != rank):
        raise TraceCorrupt(f"{path} has a damaged header (rank {rank} of {size}); "
                           f"remove it or record the program again with mpiscope run")
    return hdr


def _tail_sound(data: np.ndarray, hdr: np.void) -> bool:
    """Whether the header's placement fields (after its CRC) are as the rank wrote them: their own
    CRC holds, or there is none (files written before it, ranks that never sealed their header)."""
    first, end = R.TAIL_CRC_SPAN
    return not int(hdr["tail_crc"]) or crc32c(data[first:end].data) == int(hdr["tail_crc"])


def _without_tail(hdr: np.void) -> np.void:
    """The header with its placement fields zero, as files without them read (unknown)."""
    first, end = R.TAIL_CRC_SPAN
    raw = bytearray(hdr.tobytes())
    raw[first:end] = bytes(end - first)
    out: np.void = np.frombuffer(bytes(raw), R.FILE_HEADER_DTYPE)[0]
    return out


@dataclass
class _Block:
    recs: np.ndarray
    pairs: list[tuple[int, int]]   # calibration pairs (tick, ns) of its header that can be true
    sealed: bool                   # its CRC held
    gaps: list[int]                # positions in recs after which records were dropped


def _clock_window(hdr: np.void) -> tuple[int, int, float]:
    """(lowest, highest tick a record may hold, ns per tick) from the header's calibration pairs:
    a margin of ten minutes before MPI_Init returned (the MPI_Init call itself), and after the last pair a second for a rank that
    finished, else ten times the run so far and at least an hour (a rank that died long after
    its last pair)."""
    pairs = sorted((int(hdr[t]), int(hdr[n])) for t, n in (("tick_init", "ns_init"), ("tick_cal", "ns_cal"),
                                                           ("tick_end", "ns_end")) if int(hdr[t]) and int(hdr[n]))
    if len(pairs) < 2 or pairs[-1][0] <= pairs[0][0]:
        return 0, 2**64 - 1, 1.0
    (t0, n0), (t1, n1) = pairs[0], pairs[-1]
    rate = (n1 - n0) / (t1 - t0)
    if not 1e-3 < rate < 1e3:
        return 0, 2**64 - 1, 1.0
    after_ns = 1e9 + 0.01 * (n1 - n0) if int(hdr["state"]) == R.STATE_FINISHED else max(3.6e12, 10 * (n1 - n0))
    return max(0, int(t0 - 600e9 / rate)), min(2**64 - 1, int(t1 + after_ns / rate)), rate


def _pair_fits(tick: int, ns: int, hdr: np.void, rate: float) -> bool:
    """A block's calibration pair agrees with the header's first pair and rate (within 1 % of
    the time between them, and 10 ms): a damaged pair would skew the rank's clock."""
    t0, n0 = int(hdr["tick_init"]), int(hdr["ns_init"])
    return bool(tick and ns) and abs((ns - n0) - (tick - t0) * rate) <= 0.01 * abs(ns - n0) + 1e7


def read_rank_file(path: Path, calls: int | np.ndarray, span: tuple[int, int] | None = None,
                   release: bool = False) -> RankFile:
    """The records of one rank file that can be trusted; `calls` is the number of call ids
    or a bool per call id (known calls). With `span` (first, last), only those records (a piece
    of a rank cut at quiet points: quiet.py, of a sound file): where every block is sealed,
    their blocks alone are read; no gaps are told.

    A block whose CRC holds is kept whole; one whose CRC fails is dropped; the records of a
    block without a CRC are kept where plausible.py finds them possible. The file is
    memory-mapped: the records of sound blocks are views, copied once, later, into the merged
    columns. With `release`, each block's pages leave this process once it is checked (its views
    fault them back in from the page cache): a large file's pages need not be resident at once."""
    known = np.ones(calls, bool) if isinstance(calls, int) else np.asarray(calls, bool)
    try:
        data = np.memmap(path, dtype=np.uint8, mode="r") if path.stat().st_size else np.zeros(0, np.uint8)
    except (OSError, ValueError) as e:
        raise TraceCorrupt(f"cannot read {path} ({e}); check the file's permissions") from e
    hdr = _header(data, path)
    rank, version = int(hdr["rank"]), int(hdr["version"])
    warnings: list[str] = []
    if not _tail_sound(data, hdr):
        hdr = _without_tail(hdr)
        warnings.append(f"rank {rank}: the header's record of where the rank ran is damaged (checksum "
                        f"mismatch); its host's CPUs and its MPI library are taken as unknown")
    damage = Damage()
    comms = read_comm_defs(path.with_suffix(".comms"), rank, warnings, version, damage)
    header_bytes, block_bytes, recs_per_block = R.layout(version)
    nblocks = -(-max(0, data.size - header_bytes) // block_bytes)
    tick_lo, tick_hi, rate = _clock_window(hdr)
    registered = np.full(1 << 16, damage.comm_file, bool)  # a damaged table cannot tell: every id may be true
    registered[[0, 1] + [c.local_id for c in comms]] = True
    limits = Limits(known, int(hdr["world_size"]), tick_lo, tick_hi, registered,
                    max_request=2 * nblocks * recs_per_block + 16)
    chosen, skipped = _span_blocks(path, data.size, header_bytes, block_bytes, nblocks, rank, version, span) \
        if span else (None, 0)
    # (thread, seq) -> the block; of a block found twice (ring slot and copy), the sealed one, else
    # the one with more records
    found: dict[tuple[int, int], _Block] = {}
    failed: dict[tuple[int, int], int] = {}  # blocks whose CRC failed: the records they claim
    checked = header_bytes
    for b in (range(nblocks) if chosen is None else chosen):
        start = header_bytes + b * block_bytes
        if release:
            checked = release_pages(data, checked, start)
        end = min(start + block_bytes, data.size)
        nrec = min(recs_per_block, max(0, end - start - R.BLOCK_HEADER_BYTES) // R.REC_BYTES)
        if end - start < block_bytes and nrec:
            warnings.append(f"rank {rank}: the file ends inside a block; read up to its last whole record")
        if nrec == 0:
            continue
        head = data[start: start + R.BLOCK_HEADER_BYTES]
        bh = np.frombuffer(head.tobytes(), R.BLOCK_HEADER_DTYPE)[0]
        body = data[start + R.BLOCK_HEADER_BYTES: start + R.BLOCK_HEADER_BYTES + nrec * R.REC_BYTES]
        if int(bh["magic"]) != R.BLOCK_MAGIC or int(bh["rank"]) != rank:
            if head.any():  # all zero: a ring slot the writer emptied
                damage.drop_block("block header damaged", _committed(body.view(R.REC_DTYPE)).size)
            continue
        key = (int(bh["thread"]), int(bh["seq"]))
        sealed_records = int(bh["crc_records"]) if version >= R.CRC_SINCE else 0
        if sealed_records > nrec and end - start < block_bytes:
            sealed_records = 0  # the file ends inside the block (a copy cut short): check what is there
        if sealed_records:
            n = sealed_records * R.REC_BYTES
            if sealed_records > nrec or crc32c(body[:n].data, crc32c(head[: R.BLOCK_CRC_BYTES].data)) != int(bh["crc"]):
                # damage, unless another copy is sound (a ring slot the writer was zeroing when the
                # rank died, or a copy it had not finished writing)
                failed[key] = max(failed.get(key, 0), _committed(body.view(R.REC_DTYPE)).size)
                continue
            block = _Block(_committed(body[:n].view(R.REC_DTYPE)), [], True, [])
        else:
            block = _checked(_committed(body.view(R.REC_DTYPE)), limits, damage)
        block.pairs = [p for p in ((int(bh["tick0"]), int(bh["ns0"])), (int(bh["tick_last"]), int(bh["ns_last"])))
                       if block.sealed or _pair_fits(*p, hdr, rate)]
        old = found.get(key)
        if old is None or (block.sealed, block.recs.size) > (old.sealed, old.recs.size):
            found[key] = block
    for key, records in failed.items():
        if key not in found or (not found[key].sealed and found[key].recs.size < records):
            damage.drop_block("checksum mismatch", records - (found[key].recs.size if key in found else 0))
    if release:
        release_pages(data, checked, data.size)
    keys = sorted(found)
    blocks = [found[k] for k in keys]
    gaps = _gaps(keys, blocks, set(failed) - set(found))
    damage.report(rank, warnings)
    f = RankFile(rank=rank, header=hdr, blocks=[b.recs for b in blocks], block_thread=[k[0] for k in keys],
                 block_seq=[k[1] for k in keys],
                 block_ticks=np.array([t for b in blocks for t, _ in b.pairs], np.uint64),
                 block_ns=np.array([n for b in blocks for _, n in b.pairs], np.uint64),
                 comms=comms, state=int(hdr["state"]), warnings=warnings, damage=damage,
                 gaps=gaps if span is None else [])
    if span is not None:
        f.keep(span[0] - skipped, span[1] - skipped)
    return f


def readahead(path: Path, span: tuple[int, int] | None = None) -> None:
    """Ask the kernel to bring the blocks of records [first, last) of a rank file (all of it
    without `span`) into the page cache, and return: a merge in pieces has the next piece's
    file read from disk while it works on this one (the bench's 1,000 M-record trace, 45 GB on
    a disk that reads ~1.1 GB/s, waited 36 s for its two reads of every piece). A file that
    cannot be read is left to read_rank_file to say so."""
    try:
        with open(path, "rb") as file:
            fd = file.fileno()
            ranges = [(0, 0)]  # (offset, length); 0: to the end of the file
            if span is not None:
                head = os.pread(fd, R.FILE_HEADER_DTYPE.itemsize, 0)
                hdr = np.frombuffer(head, R.FILE_HEADER_DTYPE)[0]
                header_bytes, block_bytes, _ = R.layout(int(hdr["version"]))
                size = os.fstat(fd).st_size
                nblocks = -(-max(0, size - header_bytes) // block_bytes)
                chosen, _ = _span_blocks(path, size, header_bytes, block_bytes, nblocks, int(hdr["rank"]),
                                         int(hdr["version"]), span)
                if chosen is not None:
                    ranges = [(header_bytes + b * block_bytes, block_bytes) for b in chosen]
            for offset, length in ranges:
                os.posix_fadvise(fd, offset, length, os.POSIX_FADV_WILLNEED)
    except (OSError, ValueError, KeyError):
        return


def _span_blocks(path: Path, size: int, header_bytes: int, block_bytes: int, nblocks: int, rank: int,
                 version: int, span: tuple[int, int]) -> tuple[list[int] | None, int]:
    """The blocks (in file order) that hold records [first, last) of the file's records in (thread,
    seq) order, and the records before the first of them; (None, 0) where a block's records cannot
    be counted from its header (not sealed, damaged, found twice, cut short): then all are read.
    The headers are read, not mapped: a page of the mapping brings its whole folio of the page
    cache into the process (2 MiB here, a block: all 716 MB of a 15.6 M-record rank's file)."""
    if version < R.CRC_SINCE or nblocks == 0 or header_bytes + nblocks * block_bytes > size:
        return None, 0
    with open(path, "rb") as file:
        raw = b"".join(os.pread(file.fileno(), R.BLOCK_HEADER_BYTES, header_bytes + b * block_bytes)
                       for b in range(nblocks))
    if len(raw) != nblocks * R.BLOCK_HEADER_BYTES:
        return None, 0
    heads = np.frombuffer(raw, R.BLOCK_HEADER_DTYPE)
    used = heads["magic"] == R.BLOCK_MAGIC
    empty = ~np.frombuffer(raw, np.uint8).reshape(nblocks, -1).any(axis=1)  # a ring slot the writer emptied
    if not (used | empty).all() or (heads["rank"][used] != rank).any() or (heads["crc_records"][used] == 0).any():
        return None, 0
    index = np.flatnonzero(used)
    key = (heads["thread"][index].astype(np.int64) << 32) | heads["seq"][index].astype(np.int64)
    order = np.argsort(key, kind="stable")
    if (np.diff(key[order]) == 0).any():
        return None, 0
    count = heads["crc_records"][index][order].astype(np.int64)
    end = np.cumsum(count)
    begin = end - count
    keep = (end > span[0]) & (begin < span[1])
    if not keep.any():
        return [], 0
    return index[order][keep].tolist(), int(begin[keep][0])


def release_pages(data: np.ndarray, start: int, end: int) -> int:
    """Take the pages of bytes [start, end) of a mapped rank file out of this process (they stay
    in the page cache); returns where the next release starts."""
    if end > start and isinstance(data, np.memmap):
        data._mmap.madvise(mmap.MADV_DONTNEED, start, end - start)  # type: ignore[attr-defined]
    return max(start, end)


def mapped(a: np.ndarray) -> bool:
    """Whether an array is a view of a mapped file (not a copy: a copy of a memmap is a memmap
    too, without its map)."""
    base: object = a
    while base is not None:
        if isinstance(base, mmap.mmap) or getattr(base, "_mmap", None) is not None:
            return True
        base = getattr(base, "base", None)
    return False


def _committed(recs: np.ndarray) -> np.ndarray:
    """The committed prefix of a block's records (the recorder commits them in order)."""
    zero = np.flatnonzero(recs["call"] == 0)
    return recs[: zero[0]] if zero.size else recs


def _checked(recs: np.ndarray, limits: Limits, damage: Damage) -> _Block:
    """An unsealed block: its plausible records, and where the others were."""
    code = reasons(recs, limits)
    bad = code != 0
    if not bad.any():
        return _Block(recs, [], False, [])
    for c, n in zip(*np.unique(code[bad], return_counts=True)):
        damage.drop_records(REASONS[int(c)], int(n))
    kept = np.flatnonzero(~bad)
    # a gap follows kept record k where the next kept record is not k + 1 (or records after k were dropped)
    after = np.r_[kept[1:], recs.size] != kept + 1
    gaps = (np.flatnonzero(after) + 1).tolist()
    if bad[0]:
        gaps.insert(0, 0)
    return _Block(recs[~bad], [], False, gaps)


def _gaps(keys: list[tuple[int, int]], blocks: list[_Block], lost: set[tuple[int, int]]) -> list[tuple[int, int]]:
    """(thread, position in the file's records) of every place records are missing: a block
    seq missing before a kept block of its thread, one dropped after its last kept block,
    and records dropped inside a block. The position is that of the first record after the
    gap (or the end of the thread's records)."""
    gaps: list[tuple[int, int]] = []
    pos = 0
    last_seq: dict[int, int] = {}
    last_end: dict[int, int] = {}
    for (thread, seq), block in zip(keys, blocks):
        if seq != last_seq.get(thread, -1) + 1:
            gaps.append((thread, pos))
        gaps += [(thread, pos + g) for g in block.gaps]
        last_seq[thread] = seq
        pos += block.recs.size
        last_end[thread] = pos
    for thread, seq in lost:
        if seq > last_seq.get(thread, -1):
            gaps.append((thread, last_end.get(thread, pos)))
    return sorted(set(gaps), key=lambda g: (g[1], g[0]))


def read_comm_defs(path: Path, rank: int, warnings: list[str], version: int = R.FORMAT_VERSION,
                   damage: Damage | None = None) -> list[CommDef]:
    """The communicator definitions of a rank. From format 5 on each carries a CRC: a damaged
    one is skipped, and reading goes on at the next sound definition."""
    if not path.exists():
        warnings.append(f"rank {rank}: no communicator file; only MPI_COMM_WORLD is known")
        return []
    raw = path.read_bytes()
    out: list[CommDef] = []
    pos = skipped = 0
    while pos + R.COMMDEF_DTYPE.itemsize <= len(raw):
        d = np.frombuffer(raw, dtype=R.COMMDEF_DTYPE, count=1, offset=pos)[0]
        n = int(d["size"]) + int(d["remote_size"])
        end = pos + R.COMMDEF_DTYPE.itemsize + 4 * n
        if _commdef_sound(raw, pos, end, d, version):
            ranks = np.frombuffer(raw, dtype="<i4", count=n, offset=pos + R.COMMDEF_DTYPE.itemsize)
            out.append(CommDef(int(d["id"]), int(d["kind"]), int(d["gid"]), int(d["my_rank"]),
                               ranks[: int(d["size"])].copy(), ranks[int(d["size"]):].copy()))
            pos = end
        elif version >= R.CRC_SINCE:  # look for the next sound definition
            skipped += 1
            pos += 4
        else:
            skipped = 1
            break
    if skipped and damage is not None:  # said in the rank's one line about its damage
        damage.comm_file = True
    elif skipped:
        warnings.append(f"rank {rank}: communicator file damaged; {len(out)} sound entries read")
    return out


def _commdef_sound(raw: bytes, pos: int, end: int, d: np.void, version: int) -> bool:
    if int(d["magic"]) != R.COMMDEF_MAGIC or end > len(raw):
        return False
    if version < R.CRC_SINCE:
        return True
    entry = bytearray(raw[pos:end])
    crc_at = R.offset_of(R.COMMDEF_DTYPE, "crc")
    entry[crc_at: crc_at + 4] = bytes(4)
    return crc32c(bytes(entry)) == int(d["crc"])


def rank_files(trace_dir: Path) -> list[Path]:
    raw = Path(trace_dir) / "raw"
    if not raw.is_dir():
        raise TraceNotFound(f"{trace_dir} holds no raw/ directory of rank files; record a trace first: "
                            f"mpiscope run --out {trace_dir} -- mpiexec -n 4 ./app")
    files = sorted(p for p in raw.iterdir() if RANK_FILE.search(p.name))
    if not files:
        raise TraceNotFound(f"{raw} holds no rank files (the program may not have called MPI_Init "
                            f"under mpiscope); check the program and record again")
    return files
