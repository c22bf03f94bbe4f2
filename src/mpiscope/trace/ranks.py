"""The rank files a merge reads: which can be read and why the others cannot, and, for a merge in
pieces, each rank's records counted and a rank too large for a piece cut at quiet points (quiet.py)
in the same read."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from mpiscope.errors import TraceCorrupt
from mpiscope.trace.clocks import clock_problem
from mpiscope.trace.columns import CallTable
from mpiscope.trace.quiet import quiet_cuts
from mpiscope.trace.reader import RANK_FILE, RankFile, rank_files, read_rank_file, readahead


def read_ranks(trace_dir: Path, calls: CallTable, records: dict[int, int] | None = None,
                most: int | None = None, release: bool = False
                ) -> tuple[list[RankFile], dict[int, str], dict[int, list[int]]]:
    """The rank files that can be read, and why each other one cannot (by rank): a damaged
    rank file never stops the merge of the others. Given `records`, it is set to the records
    each file holds, the ranks of more than `most` are cut at quiet points (the third item:
    quiet.quiet_cuts), and only what a merge in pieces needs of the whole trace stays (headers,
    clocks, communicators, gaps): not the records. With `release` (_release_files), no file's
    pages stay resident once read."""
    files, missing, cuts = [], {}, {}
    paths = rank_files(trace_dir)
    known = calls.known()

    def read(i: int) -> tuple[RankFile | TraceCorrupt, str | None, int, list[int]]:
        path = paths[i]
        if records is not None and i + 2 < len(paths):  # the file after the other thread's, from disk meanwhile
            threading.Thread(target=readahead, args=(paths[i + 2],), daemon=True).start()
        try:
            f = read_rank_file(path, known, release=release)
        except TraceCorrupt as e:
            return e, None, 0, []
        problem = clock_problem(f)
        if records is None:
            return f, problem, f.size, []
        # a merge in pieces: cut the rank while its file is read (a rank file of the 1,000 M-record
        # bench trace is 750 MB, the disk reads ~1.1 GB/s: reading them all again took 33 s), then
        # unmap it (the pool would otherwise hold them all)
        cut = quiet_cuts(f, calls, most, release) if most is not None and problem is None else []
        size = f.size
        f.blocks.clear()
        return f, problem, size, cut

    # Two threads read: the files' checksums (crc32c releases the GIL), the quiet scan (the kernel
    # does) and first page faults overlap (64 files of 10 M records: 0.09 -> 0.06 s).
    with ThreadPoolExecutor(max_workers=2) as pool:
        for path, (f, problem, size, cut) in zip(paths, pool.map(read, range(len(paths)))):
            if isinstance(f, TraceCorrupt):
                missing[int(RANK_FILE.search(path.name)[1])] = reason(str(f), path)  # type: ignore[index]
                continue
            if records is not None:
                records[f.rank] = size if not problem else 0
            if cut:
                cuts[f.rank] = cut
            if problem:
                missing[f.rank] = reason(problem, path)
            else:
                files.append(f)
    if not files:
        raise TraceCorrupt(f"no rank file of {trace_dir} can be read ({'; '.join(sorted(set(missing.values())))}); "
                           f"record the program again with mpiscope run")
    return files, missing, cuts


def reason(sentence: str, path: Path) -> str:
    """A reader's sentence about one file, as a reason beside its rank: without the path and
    the advice, which the warning gives once."""
    return sentence.replace(f"{path} ", "").replace(f"rank {path.stem.split('-')[-1]}'s file ", "").split(";")[0]
