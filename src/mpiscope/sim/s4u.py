"""Communication patterns through SimGrid's S4U interface, with no MPI layer.

Each message of the pattern becomes one host-to-host communication of the
native driver (native/sim/pattern_sim.cpp) on the generated platform; ranks
are placed on hosts by the map. SMPI would simulate the MPI layer as well, but
costs far more (spec §4: 1024 ranks 41 s, 4096 ranks out of reach).
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from mpiscope.errors import SimError
from mpiscope.mapping.patterns import Pattern
from mpiscope.sim.native import s4u_driver
from mpiscope.sim.platform import Platform
from mpiscope.sim.result import LinkLoads, SimResult
from mpiscope.sim.runner import first_error, run_simulator

SIMGRID_PRECISION_S = 1e-9       # SimGrid's default surf/precision (also smpirun's)
# The driver's record (struct msg in pattern_sim.cpp).
MSG_DTYPE = np.dtype([("src", "<i4"), ("dst", "<i4"), ("step", "<i4"), ("pad", "<i4"), ("bytes", "<u8")])

# SimGrid network models, as --cfg flags. CM02 is max-min sharing of the links'
# bandwidth, each flow weighted by 1/(its route's latency) as in SimGrid's
# source (so on equal links, longer routes get smaller shares), no TCP factors: the physical link
# parameters as given (5 GB/s, 120 ns). Cross-traffic (TCP acknowledgements on
# the reverse route) is off: a torus link layer has none.
MODELS: dict[str, tuple[str, list[str]]] = {
    "CM02": (("SimGrid CM02: max-min sharing of link bandwidth weighted by 1/route latency, no TCP factors, "
             "no cross-traffic"), ["--cfg=network/model:CM02", "--cfg=network/crosstraffic:0"]),
    "LV08": (("SimGrid LV08: max-min sharing with TCP factors (latency x13.01, bandwidth x0.97) and "
             "cross-traffic"), ["--cfg=network/model:LV08"]),
}

# SimGrid's event-time precision (surf/precision) for patterns, as a share of a lower bound on the
# simulated time (the busiest link's bytes over its bandwidth, computed by the driver on SimGrid's routes).
# Flows due within one precision of an event finish at that event, so the time comes out shorter by up
# to about one precision; each event costs a solve of the whole sharing problem. Measured against
# SimGrid's 1 ns on one-step Bruck (README Limits): 1/250 changes the time by -0.01 % to -0.34 %
# (identity, random and annealed maps, 512 to 4096 ranks; 1/200 reached -0.56 %) and runs the
# 4096-rank annealed map in 311 instants and about 100 s, where 120 ns had delivered 8.5 % of its
# messages after 9 minutes.
PRECISION_SHARE = 1 / 250
# One-step runs of more messages than this on an irregular map take long: the 4096-rank Bruck (49,152
# messages, 24,541 links) about 100 s, and each solve grows with the square of the links in use.
SLOW_MESSAGES = 60_000


def slow_warning(pattern: Pattern, map_name: str, steps: bool) -> str | None:
    """Why a one-step run of many messages on an irregular map may take long, and what to do."""
    if steps or map_name == "identity" or len(pattern.src) <= SLOW_MESSAGES:
        return None
    return (f"{len(pattern.src):,} messages in flight at once on an irregular map can take an hour or more "
            f"in SimGrid (every event re-solves the bandwidth sharing of the whole network); --steps "
            f"(map: --verify-steps) answers in seconds, Ctrl-C stops")


def messages_on_hosts(platform: Platform, pattern: Pattern, node_of_rank: np.ndarray) -> np.ndarray:
    """The pattern's messages as driver records, ranks replaced by the hosts the map puts them on."""
    host = platform.host_of_node(node_of_rank)
    rec = np.zeros(len(pattern.src), dtype=MSG_DTYPE)
    rec["src"] = host[np.asarray(pattern.src, dtype=np.int64)]
    rec["dst"] = host[np.asarray(pattern.dst, dtype=np.int64)]
    rec["step"] = np.asarray(pattern.step, dtype=np.int64)
    rec["bytes"] = np.asarray(pattern.bytes, dtype=np.int64)
    return rec


def run_pattern(platform: Platform, pattern: Pattern, node_of_rank: np.ndarray, map_name: str,
                steps: bool = False, model: str = "CM02", precision_s: float | None = None) -> SimResult:
    """Simulate the pattern on the platform with the map; one-step unless `steps`; `precision_s`
    replaces the default event-time precision (PRECISION_SHARE of the busiest link's time)."""
    if len(pattern.src) == 0:
        raise SimError(f"pattern {pattern.name} has no messages; give a pattern that communicates")
    driver = s4u_driver()
    rec = messages_on_hosts(platform, pattern, node_of_rank)
    with tempfile.TemporaryDirectory(prefix="mpiscope-sim-") as tmp:
        work = Path(tmp)
        (work / "platform.xml").write_text(platform.xml())
        rec.tofile(work / "messages.bin")
        precision = (f"--precision-share={PRECISION_SHARE!r}" if precision_s is None
                     else f"--cfg=surf/precision:{precision_s!r}")
        cmd = [str(driver), str(work / "platform.xml"), str(work / "messages.bin"), str(work / "out.tsv"),
               *(["--steps"] if steps else []), *MODELS[model][1], precision, "--log=root.thres:warning"]
        done = run_simulator(cmd, f"simulating {pattern.name} (S4U)", total=float(len(rec)),
                             on_line=_progress)
        if done.returncode != 0 or not (work / "out.tsv").is_file():
            raise SimError(f"the SimGrid driver failed on {pattern.name} ({first_error(done.stderr_tail)}); "
                           f"rerun with -v to see its command line")
        sim_time, step_end, links, figures = _read_output(work / "out.tsv")
    src_node, dst_node = node_of_rank[pattern.src], node_of_rank[pattern.dst]
    return SimResult(
        engine="s4u", what=f"pattern {pattern.name}", platform=platform, map_name=map_name,
        model=MODELS[model][0], simulated_time_s=sim_time, wall_s=done.wall_s,
        peak_memory_bytes=done.peak_rss_bytes, messages=len(rec),
        bytes_total=float(rec["bytes"].sum()), step_end_s=step_end, links=links,
        tie_messages=platform.tie_messages(src_node, dst_node),
        extra={"mode": "steps" if steps else "one-step", **figures,
               "time_precision_share": PRECISION_SHARE if precision_s is None else None})


def _progress(line: str, bar: Any) -> bool:
    if not line.startswith("progress "):
        return False
    parts = line.split()
    bar.update(completed=float(parts[1]), description=f"simulating: t = {float(parts[3]) * 1e3:.3f} ms")
    return True


def _read_output(path: Path) -> tuple[float, dict[int, float], LinkLoads, dict[str, float]]:
    """The driver's figures; `figures` holds the precision used, the busiest link's time and the number
    of simulated instants (each one bandwidth-sharing solve)."""
    sim_time, steps, links, figures = 0.0, {}, [], {}
    for line in path.read_text().splitlines():
        key, *vals = line.split("\t")
        if key == "simulated_time_s":
            sim_time = float(vals[0])
        elif key in ("time_precision_s", "link_bound_s"):
            figures[key] = float(vals[0])
        elif key == "instants":
            figures["simulated_instants"] = int(vals[0])
        elif key == "step_end_s":
            steps[int(vals[0])] = float(vals[1])
        elif key == "link":
            links.append((vals[0], float(vals[1])))
    return sim_time, steps, LinkLoads.of(links), figures
