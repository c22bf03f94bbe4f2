"""`mpiscope map --verify`: the identity (x,y,z order) map and a given map, simulated on the same platform.

RMATT judged its maps this way in OpenNSIM (001 §7.3, Table 3): 22.3 ms for
the x,y,z order, 5.5 ms for RMATT's map. SimGrid's flow model is not
OpenNSIM's router model, so the figure to compare is the ratio.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from mpiscope.mapping.patterns import Pattern
from mpiscope.sim.platform import Platform
from mpiscope.sim.result import SimResult
from mpiscope.sim.s4u import run_pattern

# 001 §7.3, Table 3 (4096-rank one-step Bruck, 16x16x16 torus, 5 GB/s, 120 ns).
PAPER = {"identity_time_s": 22.3e-3, "optimised_time_s": 5.5e-3, "ratio": 5.5 / 22.3,
         "simulator": "OpenNSIM (router level)"}


def verify_map(platform: Platform, pattern: Pattern, node_of_rank: npt.NDArray[np.int64],
               steps: bool = False, model: str = "CM02") -> tuple[SimResult, SimResult, dict[str, Any]]:
    """Simulate both maps; returns both results and the JSON block with their times and ratio."""
    identity = np.arange(pattern.nranks, dtype=np.int64) // platform.ranks_per_node
    ident = run_pattern(platform, pattern, identity, "identity", steps, model)
    mapped = run_pattern(platform, pattern, node_of_rank, "optimised", steps, model)
    block = {
        "engine": "s4u",
        "network": platform.describe(),
        "bandwidth_Bps": platform.bandwidth_Bps,
        "latency_s": platform.latency_s,
        "model": ident.model,
        "mode": "steps" if steps else "one-step",
        "identity_time_s": ident.simulated_time_s,
        "optimised_time_s": mapped.simulated_time_s,
        "ratio": mapped.simulated_time_s / ident.simulated_time_s if ident.simulated_time_s else None,
        "wall_s": ident.wall_s + mapped.wall_s,
        "identity": ident.to_json(),
        "optimised": mapped.to_json(),
        "paper": PAPER,
    }
    return ident, mapped, block
