"""`roofline place`: an application's point from a trace (004 §3), its verdict and what-ifs.

Inter-node bytes: every point-to-point message whose ranks sit on different
nodes (node = host name of the rank in the manifest), exactly; collectives
are estimated from the bytes each rank sends, times the share of the
communicator's other members that sit on other nodes. Summed over the nodes,
bytes sent equal bytes received, so the mean per node of sent + received is
2 x inter-node bytes / nodes (the convention of model.py). The rate is the
flops per node over the run's wall time (MPI_Init exit to the last
MPI_Finalize entry).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import polars as pl

from mpiscope.analysis.waitstates import collective_variants
from mpiscope.errors import UsageError
from mpiscope.roofline.model import Machine, Network, attainable, classify, what_if
from mpiscope.trace import FINALIZE_CALLS, INIT_CALLS, Trace

SCHEMA = "mpiscope.roofline/1"
# Collectives whose bytes hold a block for every member, the rank's own among them (an alltoall's, a
# scatter root's): of those, the blocks to members on other nodes leave it, not its own (NPB FT's
# alltoalls counted all 33.6 MB as inter-node where 3/4 left the ranks).
BLOCK_PER_MEMBER = sorted(collective_variants("MPI_Alltoall", "MPI_Alltoallv", "MPI_Alltoallw", "MPI_Scatter",
                                             "MPI_Scatterv", "MPI_Reduce_scatter", "MPI_Reduce_scatter_block"))


@dataclass(frozen=True)
class Traffic:
    nodes: int
    one_host: bool
    ranks_as_nodes: bool
    p2p_inter_bytes: float
    p2p_intra_bytes: float
    coll_inter_bytes: float          # estimated
    coll_intra_bytes: float
    wall_seconds: float
    per_node: list[dict[str, Any]]   # point-to-point inter-node bytes sent and received per node

    @property
    def inter_bytes_per_node(self) -> float:
        return 2.0 * (self.p2p_inter_bytes + self.coll_inter_bytes) / self.nodes


def node_map(trace: Trace, ranks_as_nodes: bool) -> dict[int, str]:
    hosts = {int(r): str(h) for r, h in trace.manifest.get("hosts", {}).items()}
    if not hosts:
        raise UsageError(f"{trace.path}/manifest.json has no host of each rank; merge the trace again "
                         f"(mpiscope merge {trace.path})")
    return {r: str(r) for r in hosts} if ranks_as_nodes else hosts


def measure_traffic(trace: Trace, ranks_as_nodes: bool = False) -> Traffic:
    nodes = node_map(trace, ranks_as_nodes)
    node_df = pl.DataFrame({"rank": list(nodes), "node": list(nodes.values())},
                           schema={"rank": pl.Int32, "node": pl.Utf8})
    # Streaming aggregates first (bytes per rank pair, collective bytes per rank and communicator,
    # the run's bounds), so a trace of any size is read in bounded memory (issue 22); the nodes
    # are joined to these small tables.
    ev = trace.events()
    is_call = pl.col("call").cast(pl.Utf8).is_in
    pairs_q = (trace.messages().group_by(pl.col("src").cast(pl.Int32), pl.col("dst").cast(pl.Int32))
               .agg(pl.col("bytes").fill_null(0).cast(pl.Float64).sum()))
    coll_q = (ev.filter(pl.col("coll_id").is_not_null() & (pl.col("bytes").fill_null(0) > 0))
              .group_by(pl.col("rank").cast(pl.Int32), "comm",
                        pl.col("call").cast(pl.Utf8).is_in(BLOCK_PER_MEMBER).alias("blocks"))
              .agg(pl.col("bytes").cast(pl.Float64).sum()))
    bounds_q = ev.select(pl.col("t_leave_ns").filter(is_call(list(INIT_CALLS))).min().alias("init"),
                         pl.col("t_enter_ns").filter(is_call(list(FINALIZE_CALLS))).max().alias("finalize"),
                         pl.col("t_enter_ns").min().alias("first"), pl.col("t_leave_ns").max().alias("last"))
    pairs, coll_sums, bounds = pl.collect_all([pairs_q, coll_q, bounds_q], engine="streaming")
    msg = (pairs.join(node_df.rename({"rank": "src", "node": "src_node"}), on="src", how="left")
           .join(node_df.rename({"rank": "dst", "node": "dst_node"}), on="dst", how="left")
           .with_columns((pl.col("src_node") != pl.col("dst_node")).fill_null(True).alias("inter")))
    inter = msg.filter(pl.col("inter"))
    sent = inter.group_by(pl.col("src_node").alias("node")).agg(pl.col("bytes").sum().alias("sent"))
    recv = inter.group_by(pl.col("dst_node").alias("node")).agg(pl.col("bytes").sum().alias("received"))
    per_node = (node_df.select("node").unique().join(sent, on="node", how="left").join(recv, on="node", how="left")
                .fill_null(0.0).sort("node"))
    members = (trace.comms().select("comm", "comm_size", "ranks").collect().explode("ranks")
               .rename({"ranks": "rank"}).with_columns(pl.col("rank").cast(pl.Int32))
               .join(node_df, on="rank").group_by("comm", "comm_size", "node").agg(pl.len().alias("same")))
    coll = (coll_sums.join(node_df, on="rank").join(members, on=["comm", "node"], how="left")
            .with_columns(pl.when(pl.col("comm_size") > 1)
                          .then((pl.col("comm_size") - pl.col("same"))
                                / (pl.col("comm_size") - pl.when("blocks").then(0).otherwise(1)))
                          .otherwise(0.0).fill_null(0.0).alias("share")))
    coll_inter = float((coll["bytes"] * coll["share"]).sum())
    b = bounds.row(0, named=True)
    start = b["init"] if b["init"] is not None else b["first"]
    end = b["finalize"] if b["finalize"] is not None else b["last"]
    wall = (float(end) - float(start)) / 1e9 if start is not None and end is not None else 0.0
    n_nodes = len(set(nodes.values()))
    return Traffic(
        nodes=n_nodes, one_host=len(set(node_map(trace, False).values())) == 1, ranks_as_nodes=ranks_as_nodes,
        p2p_inter_bytes=float(inter["bytes"].sum()),
        p2p_intra_bytes=float(msg["bytes"].sum()) - float(inter["bytes"].sum()),
        coll_inter_bytes=coll_inter, coll_intra_bytes=float(coll["bytes"].sum()) - coll_inter,
        wall_seconds=wall, per_node=per_node.to_dicts())


@dataclass(frozen=True)
class Placement:
    label: str
    machine: Machine
    network: Network
    intensity: float | None
    gflops: float | None
    flops: float | None
    flops_source: str
    traffic: Traffic | None = None
    comm_factors: list[float] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def verdict(self) -> dict[str, Any] | None:
        if self.intensity is None or self.gflops is None:
            return None
        v = classify(self.machine, self.intensity, self.gflops, self.network)
        advice = v.advice
        if v.kind == "network-bound" and self.traffic is not None:
            # 004 §3 (point E) recommends task placement; hand the trace's pattern to the mapper
            advice += f"; e.g. mpiscope map --network torus:AxBxC --trace {self.label}"
        return {"kind": v.kind, "line": v.line, "fraction": v.fraction, "advice": advice}

    def what_ifs(self) -> list[dict[str, float]]:
        if self.intensity is None:
            return []
        return [what_if(self.machine, self.intensity, f, self.network) for f in self.comm_factors]

    def to_json(self) -> dict[str, Any]:
        t = self.traffic
        roof = attainable(self.machine.peak_gflops, self.network.bw_gbps_per_direction, self.intensity) \
            if self.intensity is not None else self.machine.peak_gflops
        return {
            "schema": SCHEMA, "command": "place", "label": self.label, "machine": self.machine.name,
            "network": self.network.label, "peak_gflops": self.machine.peak_gflops,
            "bw_gbps_per_direction": self.network.bw_gbps_per_direction,
            "intensity": self.intensity, "gflops": self.gflops, "roof_gflops": roof,
            "flops": self.flops, "flops_source": self.flops_source,
            "nodes": t.nodes if t else None, "one_host": t.one_host if t else None,
            "ranks_as_nodes": t.ranks_as_nodes if t else None,
            "inter_node_bytes_per_node": t.inter_bytes_per_node if t else None,
            "p2p_inter_node_bytes": t.p2p_inter_bytes if t else None,
            "p2p_intra_node_bytes": t.p2p_intra_bytes if t else None,
            "collective_inter_node_bytes_estimated": t.coll_inter_bytes if t else None,
            "collective_intra_node_bytes_estimated": t.coll_intra_bytes if t else None,
            "wall_seconds": t.wall_seconds if t else None, "per_node": t.per_node if t else [],
            "verdict": self.verdict(), "what_ifs": self.what_ifs(), "notes": self.notes}


def place_trace(trace: Trace, machine: Machine, network: Network, flops: float, flops_source: str,
                ranks_as_nodes: bool, comm_factors: list[float]) -> Placement:
    t = measure_traffic(trace, ranks_as_nodes)
    total = t.p2p_inter_bytes + t.p2p_intra_bytes + t.coll_inter_bytes + t.coll_intra_bytes
    if total <= 0:
        raise UsageError(f"the trace {trace.path} has no byte counts (no message or collective carried bytes); "
                         f"the roofline needs the bytes nodes exchange: record a run that communicates")
    if t.wall_seconds <= 0:
        raise UsageError(f"the trace {trace.path} has no duration (no MPI_Init/MPI_Finalize times); "
                         f"record the whole run again with mpiscope run")
    notes = []
    gflops = flops / t.nodes / t.wall_seconds / 1e9
    intensity: float | None = flops / t.nodes / t.inter_bytes_per_node if t.inter_bytes_per_node > 0 else None
    if t.one_host and not ranks_as_nodes:
        notes.append(f"all {trace.ranks} ranks ran on one host ({trace.manifest['hosts'].get('0')}): every byte "
                     f"({total:.4g} B) went through shared memory, none over a network, so the intensity over "
                     f"inter-node bytes is infinite and the network roof cannot limit this run; add "
                     f"--ranks-as-nodes to place it as if each rank had a node of its own")
    elif intensity is None:
        notes.append("no byte crossed between nodes: all communication stayed inside nodes, so the network roof "
                     "cannot limit this run")
    if t.coll_inter_bytes + t.coll_intra_bytes > 0:
        notes.append(f"collective bytes are estimated from the bytes each rank sends ({t.coll_inter_bytes:.4g} B "
                     f"counted as inter-node); point-to-point bytes are exact")
    return Placement(str(trace.path), machine, network, intensity, gflops, flops, flops_source, t,
                     comm_factors, notes)
