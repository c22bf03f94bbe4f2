"""OTF2 definitions as Score-P writes them for MPI: a system tree (machine, one node per
host), one location group (process) per rank, one location per recorded thread, a region per
MPI function (its role, paradigm MPI), a COMM_LOCATIONS group of the ranks' first threads,
one COMM_GROUP and Comm per communicator with its members in communicator-rank order, and an
RmaWin per window."""

from __future__ import annotations

from typing import Any

import otf2
import polars as pl
from otf2.enums import GroupType, LocationGroupType, LocationType, Paradigm

from mpiscope.export import streams as S
from mpiscope.export.regions import region_role
from mpiscope.trace import Trace


def comm_ranks(trace: Trace) -> tuple[pl.DataFrame, pl.DataFrame]:
    """comms.parquet, and (comm, world, local): each member's rank in the communicator's OTF2
    group. An intercommunicator's group is its two groups one after the other (the package
    cannot write OTF2's InterComm), so a peer's index in it names the right location."""
    comms = trace.comms().collect()
    local = (
        comms.select(
            "comm", pl.concat_list(pl.col("ranks"), pl.col("remote_ranks").fill_null([])).alias("world")
        )
        .explode("world")
        .drop_nulls("world")
        .with_columns(pl.int_range(pl.len()).over("comm").alias("local"))
    )
    return comms, local.with_columns(pl.col("world").cast(pl.Int64), pl.col("local").cast(pl.Int64))


def comm_parents(trace: Trace, comms: pl.DataFrame) -> dict[int, int]:
    """Each communicator's parent (the communicator of the call that created it: MPI_Comm_dup's,
    MPI_Comm_split's, MPI_Intercomm_create's local one), as Score-P writes it. The merge names the new
    communicator in the creating call's request; a parent is kept only where every member named it
    with the same parent and is a member of that parent, so a trace merged before (whose request
    held rank-local ids) gets none rather than a wrong one."""
    names = [c["name"] for c in trace.manifest.get("calls", [])
             if c.get("role") == "create" and not c.get("starts_request")]
    made = (trace.events().filter(pl.col("call").is_in(names) & pl.col("request").is_not_null())
            .select("rank", pl.col("request").alias("new"), pl.col("comm").alias("parent")).unique()
            .collect(engine="streaming"))
    members = {int(r["comm"]): set(r["ranks"] or []) | set(r["remote_ranks"] or [])
               for r in comms.iter_rows(named=True)}
    parents = {}
    for (new,), rows in made.partition_by("new", as_dict=True).items():
        parent = rows["parent"].unique()
        if parent.len() != 1 or new not in members or parent[0] not in members or parent[0] == new:
            continue
        ranks = set(rows["rank"].to_list())
        if ranks == members[new] and ranks <= members[parent[0]]:
            parents[int(new)] = int(parent[0])
    return parents


Locations = dict[tuple[int, int], Any]


def _system_tree(w: otf2.writer.Writer, trace: Trace, threads: pl.DataFrame) -> tuple[Locations, list[Any]]:
    """Machine, a node per host, a process per rank, a location per recorded thread; returns
    the locations by (rank, thread) and each rank's first one (where its MPI events go)."""
    d = w.definitions
    hosts = {int(k): str(v) for k, v in trace.manifest.get("hosts", {}).items()}
    machine = d.system_tree_node("machine", class_name="machine")
    nodes: dict[str, Any] = {}
    nranks = max(trace.ranks, S.as_int(threads["rank"].max()) + 1 if threads.height else 0)
    by_rank = {int(r): sorted(ts) for r, ts in threads.group_by("rank").agg(pl.col("thread")).iter_rows()}
    locations: Locations = {}
    for rank in range(nranks):
        host = hosts.get(rank, "node")
        if host not in nodes:
            nodes[host] = d.system_tree_node(host, class_name="node", parent=machine)
        process = d.location_group(
            f"MPI Rank {rank}", location_group_type=LocationGroupType.PROCESS, system_tree_parent=nodes[host]
        )
        for t in by_rank.get(rank) or [0]:
            name = "Master thread" if t == 0 else f"thread {t}"
            locations[rank, t] = d.location(name, type=LocationType.CPU_THREAD, group=process)
    return locations, [locations[r, (by_rank.get(r) or [0])[0]] for r in range(nranks)]


def _comms(
    w: otf2.writer.Writer, comms: pl.DataFrame, firsts: list[Any], parents: dict[int, int]
) -> tuple[dict[int, int], dict[int, int]]:
    """Score-P's layout: the ranks' first locations form the COMM_LOCATIONS group; a
    communicator's COMM_GROUP lists its members in communicator-rank order; its parent (comm_parents)
    is defined before it. Returns the Comm and RmaWin refs by trace id."""
    d = w.definitions
    d.group(
        "MPI_COMM_WORLD locations", group_type=GroupType.COMM_LOCATIONS, paradigm=Paradigm.MPI, members=firsts
    )

    groups: dict[tuple[int, ...], Any] = {}

    def comm_group(name: str, members: list[int]) -> Any:
        """One COMM_GROUP per list of members, shared by the communicators that have it: the otf2
        package writes each group by a scan of all of them (a program that duplicated MPI_COMM_WORLD
        10,000 times took 135 s to export, 70,000 times more than 10 minutes)."""
        key = tuple(members)
        if key not in groups:
            groups[key] = d.group(name, group_type=GroupType.COMM_GROUP, paradigm=Paradigm.MPI,
                                  members=[firsts[m] for m in members if 0 <= m < len(firsts)])
        return groups[key]

    comm_refs: dict[int, int] = {}
    win_refs: dict[int, int] = {}
    by_members: dict[tuple[int, ...], Any] = {}
    made: dict[int, Any] = {}
    rows = {int(r["comm"]): r for r in comms.filter(pl.col("kind") != "window").iter_rows(named=True)}

    def define(cid: int, below: tuple[int, ...] = ()) -> Any:
        if cid not in made:
            row, up = rows[cid], parents.get(cid)
            parent = define(up, below + (cid,)) if up in rows and up not in below else None
            members, remote = list(row["ranks"] or []), list(row["remote_ranks"] or [])
            name = "MPI_COMM_WORLD" if cid == 0 else f"comm {cid}"
            made[cid] = d.comm(name, group=comm_group(f"{name} group", members + remote), parent=parent)
        return made[cid]

    for cid in sorted(rows):
        c = define(cid)
        if rows[cid]["kind"] != "inter":
            by_members.setdefault(tuple(rows[cid]["ranks"] or []), c)
        comm_refs[cid] = int(c._ref)
    for row in comms.filter(pl.col("kind") == "window").sort("comm").iter_rows(named=True):
        wid, key = int(row["comm"]), tuple(row["ranks"] or [])
        if key not in by_members:  # a window over members no recorded communicator has
            by_members[key] = d.comm(f"window {wid} comm", group=comm_group(f"window {wid} group", list(key)))
        win_refs[wid] = int(d.rma_win(f"window {wid}", comm=by_members[key])._ref)
    return comm_refs, win_refs


def write_definitions(
    w: otf2.writer.Writer,
    trace: Trace,
    calls: list[str],
    used: list[int],
    threads: pl.DataFrame,
    comms: pl.DataFrame,
    parents: dict[int, int],
) -> tuple[Locations, dict[int, int], dict[int, int], dict[int, int]]:
    """Write the definitions; return locations by (rank, thread), region refs by call code,
    Comm refs and RmaWin refs by trace id."""
    locations, firsts = _system_tree(w, trace, threads)
    regions = {
        code: int(
            w.definitions.region(
                calls[code],
                canonical_name=calls[code],
                region_role=region_role(calls[code]),
                paradigm=Paradigm.MPI,
            )._ref
        )
        for code in used
    }
    comm_refs, win_refs = _comms(w, comms, firsts, parents)
    return locations, regions, comm_refs, win_refs
