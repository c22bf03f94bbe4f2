"""What an MPI function is, in the terms of OTF2 and of the time-line views: its region
role (as Score-P assigns them) and, for collectives, the collective operation."""

from __future__ import annotations

import re

from otf2.enums import CollectiveOp, RegionRole

from mpiscope.trace import FILE_IO_PREFIX

# MPI_Ibcast_c, MPI_Bcast_init, MPI_Ineighbor_allgather -> bcast, bcast, neighbor_allgather
_BASE = re.compile(
    r"^MPI_(?:I(?=[a-z]*(?:barrier|bcast|gather|scatter|reduce|all|scan|exscan|neighbor)))?"
    r"(?P<base>[A-Za-z_]+?)(?:_init)?(?:_c)?$"
)
_OPS = {
    "barrier": CollectiveOp.BARRIER,
    "bcast": CollectiveOp.BCAST,
    "gather": CollectiveOp.GATHER,
    "gatherv": CollectiveOp.GATHERV,
    "scatter": CollectiveOp.SCATTER,
    "scatterv": CollectiveOp.SCATTERV,
    "allgather": CollectiveOp.ALLGATHER,
    "allgatherv": CollectiveOp.ALLGATHERV,
    "alltoall": CollectiveOp.ALLTOALL,
    "alltoallv": CollectiveOp.ALLTOALLV,
    "alltoallw": CollectiveOp.ALLTOALLW,
    "allreduce": CollectiveOp.ALLREDUCE,
    "reduce": CollectiveOp.REDUCE,
    "reduce_scatter": CollectiveOp.REDUCE_SCATTER,
    "reduce_scatter_block": CollectiveOp.REDUCE_SCATTER_BLOCK,
    "scan": CollectiveOp.SCAN,
    "exscan": CollectiveOp.EXSCAN,
}
_ROLES = {
    "barrier": RegionRole.BARRIER,
    "bcast": RegionRole.COLL_ONE2ALL,
    "scatter": RegionRole.COLL_ONE2ALL,
    "scatterv": RegionRole.COLL_ONE2ALL,
    "gather": RegionRole.COLL_ALL2ONE,
    "gatherv": RegionRole.COLL_ALL2ONE,
    "reduce": RegionRole.COLL_ALL2ONE,
    "scan": RegionRole.COLL_OTHER,
    "exscan": RegionRole.COLL_OTHER,
}
_P2P = re.compile(
    r"^MPI_(I?[bsr]?send|Send|Bsend|Ssend|Rsend|I?recv|Recv|I?m?probe|Probe|Mprobe|I?mrecv|Mrecv|"
    r"I?sendrecv|Sendrecv|Start|Startall|Wait|Test|Cancel|Request_free|P?ready|Parrived|Psend|Precv)"
)


def collective_base(call: str) -> str | None:
    """The collective a call performs, lower case (neighbourhood ones as their dense
    counterpart, which is what OTF2 can name), or None."""
    m = _BASE.match(call)
    if not m:
        return None
    base = m.group("base").lower().removeprefix("neighbor_")
    return base if base in _OPS else None


def collective_op(call: str) -> CollectiveOp:
    base = collective_base(call)
    return _OPS[base] if base else CollectiveOp.BARRIER


def region_role(call: str) -> RegionRole:
    base = collective_base(call)
    if base:
        return _ROLES.get(base, RegionRole.COLL_ALL2ALL)
    if call.startswith("MPI_Win_") or call in ("MPI_Put", "MPI_Get", "MPI_Rput", "MPI_Rget"):
        return RegionRole.RMA
    if any(k in call for k in ("accumulate", "Accumulate", "Fetch_and_op", "Compare_and_swap")):
        return RegionRole.ATOMIC
    if _P2P.match(call):
        return RegionRole.POINT2POINT
    if call.startswith(FILE_IO_PREFIX):  # as Score-P marks its MPI-IO regions
        return RegionRole.FILE_IO
    return RegionRole.FUNCTION
