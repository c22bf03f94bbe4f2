"""NumPy views of the raw format written by libmpiscope (native/runtime/record.h).

tests/unit/test_record_layout.py compiles a probe against record.h and checks
these offsets, so the two cannot drift apart.
"""

from __future__ import annotations

import numpy as np

FORMAT_VERSION = 6
FILE_MAGIC = 0x4543415254435353
BLOCK_MAGIC = 0x4B4C4253
COMMDEF_MAGIC = 0x46454443
SEALED_MAGIC = 0x4C414553  # the file header's CRC is set (MPI_Finalize)
HEADER_PAGE = 4096  # what the file header occupies
HEADER_BYTES = 2 << 20  # file offset of the first block (a hole after the header page)
BLOCK_BYTES = 2 << 20
BLOCK_HEADER_BYTES = 64
REC_BYTES = 48
RECS_PER_BLOCK = (BLOCK_BYTES - BLOCK_HEADER_BYTES) // REC_BYTES
# (header bytes, block bytes) of each format version the reader takes; the
# records and headers are alike in all, only where the blocks sit differs.
# From version 3 on a block may be in the file twice (the recorder's ring
# slot and its copy): readers keep the one with more records. From version 4
# on a collective's received bytes follow it in a sub:recv_bytes record where
# they differ from its sent bytes (before, they were not recorded). From
# version 5 on blocks, the file header (at a clean end) and communicator
# definitions carry a CRC-32C. From version 6 on failed calls are followed by a sub:rc
# record and polling loops are folded (sub:count; trace/outcomes.py).
GEOMETRY = {1: (4096, 1 << 20), 2: (HEADER_BYTES, BLOCK_BYTES), 3: (HEADER_BYTES, BLOCK_BYTES),
            4: (HEADER_BYTES, BLOCK_BYTES), 5: (HEADER_BYTES, BLOCK_BYTES), 6: (HEADER_BYTES, BLOCK_BYTES)}
RECV_BYTES_SINCE = 4  # the first format version that records collectives' received bytes
CRC_SINCE = 5  # the first format version with CRCs


def layout(version: int) -> tuple[int, int, int]:
    """(header bytes, block bytes, records per block) of a format version."""
    header_bytes, block_bytes = GEOMETRY[version]
    return header_bytes, block_bytes, (block_bytes - BLOCK_HEADER_BYTES) // REC_BYTES
MAX_WORLD = 1 << 24  # a header claiming more ranks is damaged

PEER_NONE, PEER_ANY, PEER_PROC_NULL, PEER_ROOT, PEER_UNKNOWN, PEER_CANCELLED = -1, -2, -3, -4, -5, -6
TAG_ANY, TAG_NONE = -1000001, -1000002
COMM_UNKNOWN = 0xFFFF

STATE_NAMES = {0: "cut off", 1: "finished", 2: "killed by a signal", 3: "MPI_Abort",
               4: "exited without MPI_Finalize", 5: "stopped: disk full"}
STATE_RUNNING, STATE_FINISHED = 0, 1
CLOCK_MONOTONIC_NS, CLOCK_TSC = 0, 1
COMM_KIND_NAMES = {0: "intra", 1: "inter", 2: "window"}

REC_DTYPE = np.dtype([
    ("t_enter", "<u8"), ("t_leave", "<u8"), ("bytes", "<u8"), ("callsite", "<u8"),
    ("req", "<u4"), ("peer", "<i4"), ("tag", "<i4"), ("comm", "<u2"), ("call", "<u2"),
])

BLOCK_HEADER_DTYPE = np.dtype([
    ("magic", "<u4"), ("version", "<u2"), ("thread", "<u2"), ("rank", "<i4"), ("seq", "<u4"),
    ("tick0", "<u8"), ("ns0", "<u8"), ("tick_last", "<u8"), ("ns_last", "<u8"), ("crc", "<u4"), ("crc_records", "<u4"),
    ("reserved", "<u8"),
])

FILE_HEADER_DTYPE = np.dtype([
    ("magic", "<u8"), ("version", "<u4"), ("header_bytes", "<u4"), ("block_bytes", "<u4"),
    ("rec_bytes", "<u4"), ("rank", "<i4"), ("world_size", "<i4"), ("pid", "<i4"),
    ("thread_level", "<i4"), ("clock_kind", "<u4"), ("state", "<u4"), ("end_signal", "<i4"),
    ("nblocks", "<u4"), ("tick_init", "<u8"), ("ns_init", "<u8"), ("tick_cal", "<u8"),
    ("ns_cal", "<u8"), ("tick_end", "<u8"), ("ns_end", "<u8"), ("offset_init_ns", "<i8"),
    ("offset_end_ns", "<i8"), ("offset_init_at_ns", "<u8"), ("offset_end_at_ns", "<u8"),
    ("sync_rtt_init_ns", "<i8"), ("sync_rtt_end_ns", "<i8"), ("dropped", "<u8"),
    ("hostname", "S64"), ("boot_id", "S40"), ("writer_cpu_ns", "<u8"), ("writer_blocks", "<u4"),
    ("blocks_sealed", "<u4"), ("sealed", "<u4"), ("crc", "<u4"),
    # after the CRC: zero (unknown) in files written before they were added; where tail_crc is not
    # zero, it covers them (cpus_online up to tail_crc)
    ("cpus_online", "<u4"), ("cpus_allowed", "<u4"), ("cpu_mask", "<u8", (4,)), ("mpi_library", "S160"),
    ("reserved", "<u4"), ("tail_crc", "<u4"),
])

COMMDEF_DTYPE = np.dtype([
    ("magic", "<u4"), ("id", "<u2"), ("kind", "<u2"), ("gid", "<u8"), ("size", "<u4"),
    ("remote_size", "<u4"), ("my_rank", "<i4"), ("crc", "<u4"),
])

assert REC_DTYPE.itemsize == REC_BYTES
assert BLOCK_HEADER_DTYPE.itemsize == BLOCK_HEADER_BYTES
assert COMMDEF_DTYPE.itemsize == 32
# the bytes each CRC covers: a block header's fields before `crc`, the file header's before `sealed`
# and its placement fields (TAIL_CRC_SPAN)


def offset_of(dtype: np.dtype, name: str) -> int:
    fields = dtype.fields
    assert fields is not None
    return int(fields[name][1])


BLOCK_CRC_BYTES = offset_of(BLOCK_HEADER_DTYPE, "crc")
HEADER_CRC_BYTES = offset_of(FILE_HEADER_DTYPE, "sealed")
TAIL_CRC_SPAN = (offset_of(FILE_HEADER_DTYPE, "cpus_online"), offset_of(FILE_HEADER_DTYPE, "tail_crc"))
