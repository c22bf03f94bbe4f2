"""What a simulation answers: simulated time, per-step ends, bytes per link."""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mpiscope.sim.platform import Platform

SCHEMA = "mpiscope.sim/1"
# A cluster's loopback links (c_link_7_loopback) and SimGrid's implicit one carry intra-node bytes.
_LOOPBACK = re.compile(r".*_loopback|__loopback__")


@dataclass(frozen=True)
class LinkLoads:
    """Bytes that crossed each network link that carried any (SimGrid link names), and the bytes that
    stayed inside nodes (their loopback links)."""

    names: tuple[str, ...]
    bytes: np.ndarray               # float64, same order as names
    loopback_bytes: float = 0.0

    @classmethod
    def of(cls, pairs: list[tuple[str, float]]) -> LinkLoads:
        network = sorted((n, b) for n, b in pairs if b > 0 and not _LOOPBACK.fullmatch(n))
        return cls(tuple(n for n, _ in network), np.asarray([b for _, b in network], dtype=np.float64),
                   float(sum(b for n, b in pairs if _LOOPBACK.fullmatch(n))))

    def top(self, k: int) -> list[tuple[str, float]]:
        order = np.argsort(-self.bytes, kind="stable")[:k]
        return [(self.names[i], float(self.bytes[i])) for i in order]

    def histogram(self, bins: int = 12) -> list[dict[str, float]]:
        """Links per byte range (the paper's Fig. 11), equal-width bins from 0 to the busiest link."""
        if not len(self.bytes):
            return []
        counts, edges = np.histogram(self.bytes, bins=bins, range=(0.0, float(self.bytes.max()) or 1.0))
        return [{"from_bytes": float(edges[i]), "to_bytes": float(edges[i + 1]), "links": int(counts[i])}
                for i in range(bins)]


@dataclass(frozen=True)
class SimResult:
    engine: str                         # "s4u" | "smpi"
    what: str                           # "pattern bruck:4096", "trace DIR", "program app.c"
    platform: Platform
    map_name: str
    model: str
    simulated_time_s: float
    wall_s: float
    peak_memory_bytes: int
    messages: int | None              # None: not known (a user's program)
    bytes_total: float | None
    step_end_s: dict[int, float] = field(default_factory=dict)
    links: LinkLoads | None = None
    tie_messages: int = 0
    notes: tuple[str, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict)
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex[:12])

    def link_summary(self, top: int = 10) -> dict[str, Any] | None:
        if self.links is None:
            return None
        b = self.links.bytes
        bw_time = self.platform.bandwidth_Bps * self.simulated_time_s
        return {
            "links_used": len(b),
            "intra_node_bytes": self.links.loopback_bytes,
            "max_bytes": float(b.max()) if len(b) else 0.0,
            "mean_bytes": float(b.mean()) if len(b) else 0.0,
            # Busy share of the busiest link over the simulated time, at full bandwidth.
            "max_utilisation": float(b.max() / bw_time) if len(b) and bw_time > 0 else None,
            "busiest": [{"link": n, "where": self.platform.link_label(n), "bytes": v}
                        for n, v in self.links.top(top)],
            "histogram": self.links.histogram(),
        }

    def to_json(self, top: int = 10) -> dict[str, Any]:
        p = self.platform
        return {
            "schema": SCHEMA,
            "run_id": self.run_id,
            "engine": self.engine,
            "what": self.what,
            "network": p.describe(),
            "nodes": p.nodes,
            "ranks_per_node": p.ranks_per_node,
            "bandwidth_Bps": p.bandwidth_Bps,
            "latency_s": p.latency_s,
            "node_speed_flops": p.speed_flops,
            "map": self.map_name,
            "model": self.model,
            "routing": p.routing(),
            "messages_routed_unlike_metrics": self.tie_messages,
            "simulated_time_s": self.simulated_time_s,
            "step_end_s": {str(k): v for k, v in sorted(self.step_end_s.items())},
            "messages": self.messages,
            "bytes": self.bytes_total,
            "wall_s": self.wall_s,
            "peak_memory_bytes": self.peak_memory_bytes,
            "links": self.link_summary(top),
            "notes": list(self.notes),
            **self.extra,
        }
