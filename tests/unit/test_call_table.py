"""calls.toml against the MPI's own mpi.h (through `mpicc -E`): every MPI-3.1
communication call is in the table, and every table prototype matches the
header's parameter types."""

from __future__ import annotations

import re
import subprocess
import tomllib
from pathlib import Path

import pytest
from tests.conftest import MPICH, OPENMPI, ROOT, require

TABLE = ROOT / "src" / "mpiscope" / "native" / "wrapgen" / "calls.toml"

P2P = ["Send", "Bsend", "Ssend", "Rsend", "Recv", "Sendrecv", "Sendrecv_replace", "Isend", "Ibsend", "Issend", "Irsend", "Irecv", "Send_init", "Bsend_init", "Ssend_init", "Rsend_init", "Recv_init", "Start", "Startall", "Probe", "Iprobe", "Mprobe", "Improbe", "Mrecv", "Imrecv", "Wait", "Waitall", "Waitany", "Waitsome", "Test", "Testall", "Testany", "Testsome", "Request_free", "Cancel"]
COLL = ["Barrier", "Bcast", "Gather", "Gatherv", "Scatter", "Scatterv", "Allgather", "Allgatherv", "Alltoall", "Alltoallv", "Alltoallw", "Reduce", "Allreduce", "Reduce_scatter", "Reduce_scatter_block", "Scan", "Exscan"]
NEIGHBOR = ["Neighbor_allgather", "Neighbor_allgatherv", "Neighbor_alltoall", "Neighbor_alltoallv", "Neighbor_alltoallw"]
COMM = ["Comm_dup", "Comm_dup_with_info", "Comm_idup", "Comm_split", "Comm_split_type", "Comm_create", "Comm_create_group", "Comm_free", "Intercomm_create", "Intercomm_merge", "Cart_create", "Cart_sub", "Graph_create", "Dist_graph_create", "Dist_graph_create_adjacent"]
RMA = ["Win_create", "Win_allocate", "Win_allocate_shared", "Win_create_dynamic", "Win_attach", "Win_detach", "Win_free", "Put", "Get", "Accumulate", "Get_accumulate", "Fetch_and_op", "Compare_and_swap", "Rput", "Rget", "Raccumulate", "Rget_accumulate", "Win_fence", "Win_post", "Win_start", "Win_complete", "Win_wait", "Win_test", "Win_lock", "Win_unlock", "Win_lock_all", "Win_unlock_all", "Win_flush", "Win_flush_all", "Win_flush_local", "Win_flush_local_all", "Win_sync"]
ENV = ["Init", "Init_thread", "Finalize", "Pcontrol", "Abort"]
MPI31 = ["MPI_" + n for n in P2P + COLL + ["I" + c.lower() for c in COLL] + ["Reduce_local"] + NEIGHBOR
         + ["I" + n.lower() for n in NEIGHBOR] + COMM + RMA + ENV]
# MPI-4.0 and 4.1 communication calls (MPI_Pready_list is left out: MPIs disagree on its prototype)
MPI4 = ["MPI_" + n for n in ["Isendrecv", "Isendrecv_replace", "Psend_init", "Precv_init", "Pready", "Pready_range",
                             "Parrived", "Session_init", "Session_finalize", "Comm_create_from_group"]
        + [c + "_init" for c in COLL + NEIGHBOR]]
MPI41 = ["MPI_" + n for n in ["Intercomm_create_from_groups", "Comm_idup_with_info", "Buffer_flush", "Buffer_iflush",
                              "Comm_attach_buffer", "Comm_detach_buffer", "Comm_flush_buffer", "Comm_iflush_buffer",
                              "Session_attach_buffer", "Session_detach_buffer", "Session_flush_buffer",
                              "Session_iflush_buffer"]]


def table() -> list[dict]:
    with TABLE.open("rb") as f:
        return tomllib.load(f)["call"]


def strip_attributes(text: str) -> str:
    out, i = [], 0
    while (j := text.find("__attribute__", i)) >= 0:
        out.append(text[i:j])
        depth, k = 0, text.index("(", j)
        while True:
            depth += {"(": 1, ")": -1}.get(text[k], 0)
            k += 1
            if depth == 0:
                break
        i = k
    return "".join(out) + text[i:]


def header_prototypes(mpicc: Path) -> dict[str, str]:
    src = subprocess.run([str(mpicc), "-E", "-x", "c", "-"], input="#include <mpi.h>\n", capture_output=True,
                         text=True, check=True).stdout
    src = strip_attributes(re.sub(r"^#.*$", "", src, flags=re.MULTILINE))
    src = re.sub(r"\b(OMPI_DECLSPEC|MPICH_API_PUBLIC|extern)\b", " ", src)
    return {m[1]: m[2] for m in re.finditer(r"\bint\s+(MPI_\w+)\s*\(([^;{}]*?)\)\s*;", src)}


def param_types(params: str) -> list[str]:
    """'const int counts[], MPI_Comm comm' -> ['const int*', 'MPI_Comm'] (names dropped)."""
    out = []
    for p in (x.strip() for x in " ".join(params.split()).split(",")):
        if p in ("void", ""):
            continue
        if p == "...":
            out.append("...")
            continue
        array = re.search(r"\[\s*\w*\s*\]\s*$", p)
        words = re.findall(r"[A-Za-z_]\w*|\*", re.sub(r"\[\s*\w*\s*\]\s*$", "", p))
        if len(words) > 1 and words[-1] != "*":
            words = words[:-1]  # the parameter name
        if array:
            words.append("*")
        out.append(" ".join(words).replace(" *", "*"))
    return out


def test_table_covers_mpi31_communication_calls():
    names = {e["name"] for e in table()}
    missing = [n for n in MPI31 if n not in names]
    assert not missing, f"calls.toml lacks MPI-3.1 communication calls: {missing}"


@pytest.mark.parametrize("mpi", [MPICH, OPENMPI], ids=["mpich", "openmpi"])
def test_table_prototypes_match_mpi_h(mpi):
    require(mpi.mpicc.is_file(), f"{mpi.name}'s mpicc", "make setup")
    header = header_prototypes(mpi.mpicc)
    assert len(header) > 300, "mpi.h was not parsed"
    version = 4 if "MPI_Send_c" in header else 3
    problems = []
    for e in table():
        variants = [(e["name"], e["proto"])]
        if version >= 4 and "proto_c" in e:
            variants.append((e["name"] + "_c", e["proto_c"]))
        for name, proto in variants:
            if e["mpi"] >= "4" and version < 4:
                continue
            if name not in header:
                problems.append(f"{name} not declared in {mpi.name}'s mpi.h")
            elif param_types(proto) != param_types(header[name]):
                problems.append(f"{name}: table {param_types(proto)} != mpi.h {param_types(header[name])}")
    assert not problems, "\n".join(problems)
    for n in MPI31:
        assert n in header, f"{n} missing from {mpi.name}'s mpi.h"


@pytest.mark.parametrize("mpi", [MPICH, OPENMPI], ids=["mpich", "openmpi"])
def test_table_covers_the_mpi4_communication_calls_the_mpi_has(mpi):
    """Every MPI-4.0 and 4.1 communication call that the MPI's mpi.h declares is in the table
    (and so recorded); the `mpich` wheel declares all of them."""
    require(mpi.mpicc.is_file(), f"{mpi.name}'s mpicc", "make setup")
    header = header_prototypes(mpi.mpicc)
    names = {e["name"] for e in table()}
    missing = [n for n in MPI4 + MPI41 if n in header and n not in names]
    assert not missing, f"calls.toml lacks calls {mpi.name}'s mpi.h declares: {missing}"
    if mpi is MPICH:
        assert all(n in header for n in MPI4 + MPI41), [n for n in MPI4 + MPI41 if n not in header]
