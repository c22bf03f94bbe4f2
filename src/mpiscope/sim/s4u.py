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

# SimGrid network models, as --cfg flags. CM02 is plain max-min sharing of the
# links' bandwidth with their latency, no TCP factors: the physical link
# parameters as given (5 GB/s, 120 ns). Cross-traffic (TCP acknowledgements on
# the reverse route) is off: a torus link layer has none.
MODELS: dict[str, tuple[str, list[str]]] = {
    "CM02": (("SimGrid CM02: max-min fair sharing of link bandwidth, route latency, no TCP factors, "
             "no cross-traffic"), ["--cfg=network/model:CM02", "--cfg=network/crosstraffic:0"]),
    "LV08": (("SimGrid LV08: max-min sharing with TCP factors (latency x13.01, bandwidth x0.97) and "
             "cross-traffic"), ["--cfg=network/model:LV08"]),
}

# Measured on 2 cores, one-step Bruck on maps annealed by mpiscope map: 512 ranks (4,608 messages) in
# 4 s, 1024 ranks (10,240) in 30 s, 4096 ranks (49,152): 8.5 % of the messages after 9 CPU-minutes.
# SimGrid's max-min solver rescans every link once per sharing level, and an irregular map has
# nearly as many levels as links: each completion costs a second at 4096 ranks.
SLOW_MESSAGES = 20_000


def slow_warning(pattern: Pattern, map_name: str, steps: bool) -> str | None:
    """Why a one-step run of many messages on an irregular map may take hours, and what to do."""
    if steps or map_name == "identity" or len(pattern.src) <= SLOW_MESSAGES:
        return None
    return (f"{len(pattern.src):,} messages in flight at once on an irregular map can take hours in "
            f"SimGrid (every arrival re-solves the bandwidth sharing of the whole network); --steps "
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


def time_precision(platform: Platform, rec: np.ndarray) -> float:
    """SimGrid's event-time precision (surf/precision) for these messages: events closer than it are
    processed together, and each costs a solve of the whole sharing problem.

    SimGrid's 1 ns makes irregular maps slow (a 512-rank Bruck on an annealed map: 27 s of CPU, with
    one solve per message). The link latency is the bound SimGrid itself recommends (it warns below
    it) and cuts that to 4 s, for a change of the simulated time below 1e-4 (bench/sim_scale.py);
    it is capped at 1/1000 of a lower bound on the simulated time (the busiest node's bytes over its
    links' bandwidth), so that short runs keep SimGrid's full accuracy.
    """
    remote = rec["src"] != rec["dst"]
    sent = np.bincount(rec["src"][remote], weights=rec["bytes"][remote].astype(np.float64))
    links = 1 if platform.kind == "fat-tree" else 2 * max(1, sum(d > 1 for d in platform.dims))
    bound = float(sent.max()) / (platform.bandwidth_Bps * links) if sent.size else 0.0
    return max(SIMGRID_PRECISION_S, min(platform.latency_s, bound / 1000))


def run_pattern(platform: Platform, pattern: Pattern, node_of_rank: np.ndarray, map_name: str,
                steps: bool = False, model: str = "CM02", precision_s: float | None = None) -> SimResult:
    """Simulate the pattern on the platform with the map; one-step unless `steps`; `precision_s`
    replaces the default event-time precision (time_precision)."""
    if len(pattern.src) == 0:
        raise SimError(f"pattern {pattern.name} has no messages; give a pattern that communicates")
    driver = s4u_driver()
    rec = messages_on_hosts(platform, pattern, node_of_rank)
    precision_s = time_precision(platform, rec) if precision_s is None else precision_s
    with tempfile.TemporaryDirectory(prefix="mpiscope-sim-") as tmp:
        work = Path(tmp)
        (work / "platform.xml").write_text(platform.xml())
        rec.tofile(work / "messages.bin")
        precision = f"--cfg=surf/precision:{precision_s!r}"
        cmd = [str(driver), str(work / "platform.xml"), str(work / "messages.bin"), str(work / "out.tsv"),
               *(["--steps"] if steps else []), *MODELS[model][1], precision, "--log=root.thres:warning"]
        done = run_simulator(cmd, f"simulating {pattern.name} (S4U)", total=float(len(rec)),
                             on_line=_progress)
        if done.returncode != 0 or not (work / "out.tsv").is_file():
            raise SimError(f"the SimGrid driver failed on {pattern.name} ({first_error(done.stderr_tail)}); "
                           f"rerun with -v to see its command line")
        sim_time, step_end, links = _read_output(work / "out.tsv")
    src_node, dst_node = node_of_rank[pattern.src], node_of_rank[pattern.dst]
    return SimResult(
        engine="s4u", what=f"pattern {pattern.name}", platform=platform, map_name=map_name,
        model=MODELS[model][0], simulated_time_s=sim_time, wall_s=done.wall_s,
        peak_memory_bytes=done.peak_rss_bytes, messages=len(rec),
        bytes_total=float(rec["bytes"].sum()), step_end_s=step_end, links=links,
        tie_messages=platform.tie_messages(src_node, dst_node),
        extra={"mode": "steps" if steps else "one-step",
               "time_precision_s": precision_s})


def _progress(line: str, bar: Any) -> bool:
    if not line.startswith("progress "):
        return False
    parts = line.split()
    bar.update(completed=float(parts[1]), description=f"simulating: t = {float(parts[3]) * 1e3:.3f} ms")
    return True


def _read_output(path: Path) -> tuple[float, dict[int, float], LinkLoads]:
    sim_time, steps, links = 0.0, {}, []
    for line in path.read_text().splitlines():
        key, *vals = line.split("\t")
        if key == "simulated_time_s":
            sim_time = float(vals[0])
        elif key == "step_end_s":
            steps[int(vals[0])] = float(vals[1])
        elif key == "link":
            links.append((vals[0], float(vals[1])))
    return sim_time, steps, LinkLoads.of(links)
