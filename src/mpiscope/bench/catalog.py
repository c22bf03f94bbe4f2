"""What the benchmarks measure: operations, their IMB names, message sizes.

Bad input here (an unknown operation, a size out of range) becomes one
UsageError sentence naming the problem and the fix.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from mpiscope.errors import UsageError

INT_MAX = 2**31 - 1
MAX_SIZE = 2**30
MAX_SIZES = 64     # MSC_MAX_SIZES in native/bench/common.h
FLOAT_BYTES = 4    # IMB's red_data_type is MPI_FLOAT


@dataclass(frozen=True)
class NbcOp:
    name: str
    imb_name: str | None     # the IMB-NBC benchmark, None for mpiscope extensions
    blocking: str            # the blocking counterpart timed beside it
    reduction: bool          # MPI_FLOAT elements: sizes are multiples of 4 (IMB)
    size_blocks: int         # largest buffer in units of size: 1, or 0 = one per rank
    sized: bool = True       # ibarrier has no message


# IMB-NBC's 13 default benchmarks (src_c/IMB_bnames_nbc.h), then mpiscope's extensions.
NBC_OPS: tuple[NbcOp, ...] = (
    NbcOp("ibcast", "Ibcast", "MPI_Bcast", False, 1),
    NbcOp("iallgather", "Iallgather", "MPI_Allgather", False, 0),
    NbcOp("iallgatherv", "Iallgatherv", "MPI_Allgatherv", False, 0),
    NbcOp("igather", "Igather", "MPI_Gather", False, 0),
    NbcOp("igatherv", "Igatherv", "MPI_Gatherv", False, 0),
    NbcOp("iscatter", "Iscatter", "MPI_Scatter", False, 0),
    NbcOp("iscatterv", "Iscatterv", "MPI_Scatterv", False, 0),
    NbcOp("ialltoall", "Ialltoall", "MPI_Alltoall", False, 0),
    NbcOp("ialltoallv", "Ialltoallv", "MPI_Alltoallv", False, 0),
    NbcOp("ireduce", "Ireduce", "MPI_Reduce", True, 1),
    NbcOp("ireduce_scatter", "Ireduce_scatter", "MPI_Reduce_scatter", True, 0),
    NbcOp("iallreduce", "Iallreduce", "MPI_Allreduce", True, 1),
    NbcOp("ibarrier", "Ibarrier", "MPI_Barrier", False, 1, sized=False),
    NbcOp("ialltoallw", None, "MPI_Alltoallw", False, 0),
    NbcOp("ireduce_scatter_block", None, "MPI_Reduce_scatter_block", True, 0),
    NbcOp("iscan", None, "MPI_Scan", True, 1),
    NbcOp("iexscan", None, "MPI_Exscan", True, 1),
)
NBC_BY_NAME = {op.name: op for op in NBC_OPS}
NBC_GROUPS = {"all": [op.name for op in NBC_OPS], "imb": [op.name for op in NBC_OPS if op.imb_name]}


@dataclass(frozen=True)
class RmaOp:
    name: str
    imb_name: str
    single_element: bool     # IMB's SingleElementTransfer: one 4-byte element
    reduction: bool


# The passive-target operations of IMB-RMA this tool measures (src_cpp/RMA/RMA_benchmark.cpp).
RMA_OPS: tuple[RmaOp, ...] = (
    RmaOp("put", "Unidir_put", False, False),
    RmaOp("get", "Unidir_get", False, False),
    RmaOp("accumulate", "Accumulate", False, True),
    RmaOp("get_accumulate", "Get_accumulate", False, True),
    RmaOp("fetch_and_op", "Fetch_and_op", True, True),
    RmaOp("compare_and_swap", "Compare_and_swap", True, False),
    RmaOp("truly_passive_put", "Truly_passive_put", False, False),
)
RMA_BY_NAME = {op.name: op for op in RMA_OPS}
RMA_GROUPS = {"all": [op.name for op in RMA_OPS]}


def select_ops(requested: list[str] | None, known: Mapping[str, object], groups: Mapping[str, list[str]],
               verb: str) -> list[str]:
    """Names from --ops (comma lists, groups such as `all`), in catalog order."""
    names: set[str] = set()
    for item in requested or ["all"]:
        for name in filter(None, (n.strip().lower() for n in item.split(","))):
            if name in groups:
                names.update(groups[name])
            elif name in known:
                names.add(name)
            else:
                choices = ", ".join([*groups, *known])
                raise UsageError(f"unknown operation {name!r} for mpiscope bench {verb}; choose from: {choices}")
    return [n for n in known if n in names]


def imb_sizes(max_log: int = 22) -> list[int]:
    """IMB's default message sizes: 0, then 2^0 … 2^22 bytes (4 MiB)."""
    return [0] + [1 << i for i in range(max_log + 1)]


_UNITS = {"": 1, "b": 1, "k": 2**10, "kb": 2**10, "kib": 2**10, "m": 2**20, "mb": 2**20, "mib": 2**20,
          "g": 2**30, "gb": 2**30, "gib": 2**30}


def _one_size(text: str) -> int:
    m = re.fullmatch(r"(\d+)\s*([a-z]*)", text.strip().lower())
    if not m or m.group(2) not in _UNITS:
        raise UsageError(f"message size {text!r} is not a number of bytes; write sizes like 0,1024,4K,1M "
                         f"or a power-of-two range like 1:4M")
    size = int(m.group(1)) * _UNITS[m.group(2)]
    if size > MAX_SIZE:
        raise UsageError(f"message size {text} is out of range (largest: 1 GiB); give sizes from 0 to 1G")
    return size


def parse_sizes(text: str | None) -> list[int]:
    """`--sizes`: comma-separated sizes (4K, 1M) and power-of-two ranges (0:4M); default IMB's."""
    if text is None:
        return imb_sizes()
    sizes: list[int] = []
    for item in filter(None, (t.strip() for t in text.split(","))):
        if ":" in item:
            lo_text, hi_text = item.split(":", 1)
            lo, hi = _one_size(lo_text), _one_size(hi_text)
            if hi < lo:
                raise UsageError(f"size range {item} runs backwards; write the smaller size first, e.g. 1:4M")
            if lo == 0:
                sizes.append(0)
            p = 1
            while p <= hi:
                if p >= lo:
                    sizes.append(p)
                p *= 2
        else:
            sizes.append(_one_size(item))
    if not sizes:
        raise UsageError("--sizes is empty; give at least one size, e.g. --sizes 0,1K,1M")
    unique = sorted(set(sizes))
    if len(unique) > MAX_SIZES:
        raise UsageError(f"--sizes lists {len(unique)} sizes; give at most {MAX_SIZES} per run")
    return unique


def sizes_for(sizes: list[int], reduction: bool) -> list[int]:
    """Reductions use MPI_FLOAT: IMB rounds sizes up to whole elements and drops duplicates."""
    if not reduction:
        return sizes
    return sorted({-(-s // FLOAT_BYTES) * FLOAT_BYTES for s in sizes})


def check_buffer_limit(op: NbcOp, sizes: list[int], ranks: int) -> None:
    """MPI counts and displacements are ints: one rank's buffer must hold at most INT_MAX bytes."""
    if not op.sized:
        return
    blocks = ranks if op.size_blocks == 0 else op.size_blocks
    largest = max(sizes)
    if largest * blocks > INT_MAX:
        fit = INT_MAX // blocks
        raise UsageError(f"{op.name} with {largest} bytes on {ranks} ranks needs a {largest * blocks}-byte buffer, "
                         f"beyond MPI's int counts; use sizes up to {fit} bytes or fewer ranks")
