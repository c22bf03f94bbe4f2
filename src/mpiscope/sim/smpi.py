"""Traces, patterns and real MPI C programs through SimGrid's SMPI (smpirun).

Ranks are placed by the host file: line r names the host of the node the map
gives rank r. Computation outside MPI is not measured from the real CPU (it
would make runs depend on the machine): a replay injects the recorded gaps as
flops, a program computes in zero simulated time unless --measure-compute
asks SMPI to time it.
"""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

import numpy as np

from mpiscope.errors import SimError
from mpiscope.sim.native import replay_program, smpi_program, smpi_tool
from mpiscope.sim.platform import Platform
from mpiscope.sim.replay import Actions
from mpiscope.sim.result import LinkLoads, SimResult
from mpiscope.sim.runner import Finished, first_error, run_simulator
from mpiscope.sim.s4u import MODELS, SIMGRID_PRECISION_S

SMPI_MODEL = ("SimGrid SMPI: piecewise bandwidth and latency factors calibrated on a real MPI cluster",
              ["--cfg=network/model:SMPI"])


def _smpirun(platform: Platform, node_of_rank: np.ndarray, model: str, program: list[str], work: Path,
             description: str, extra_cfg: list[str], precision_s: float | None) -> Finished:
    (work / "platform.xml").write_text(platform.xml())
    (work / "hosts.txt").write_text("".join(f"{h}\n" for h in platform.host_names(node_of_rank)))
    flags = SMPI_MODEL[1] if model == "SMPI" else MODELS[model][1]
    precision = f"--cfg=surf/precision:{precision_s or SIMGRID_PRECISION_S!r}"
    cmd = [smpi_tool("smpirun"), "-np", str(len(node_of_rank)), "-platform", str(work / "platform.xml"),
           "-hostfile", str(work / "hosts.txt"), *flags, *extra_cfg, precision,
           "--cfg=smpi/display-timing:yes", "--log=root.thres:warning", "--log=smpi_utils.thres:info",
           *program]
    return run_simulator(cmd, description, cwd=work)


def model_name(model: str) -> str:
    return SMPI_MODEL[0] if model == "SMPI" else MODELS[model][0]


def run_actions(platform: Platform, actions: Actions, node_of_rank: np.ndarray, map_name: str, what: str,
                model: str = "CM02", precision_s: float | None = None) -> SimResult:
    """Replay action lists (from a trace or a pattern) with replay.cpp under smpirun."""
    program = replay_program()
    with tempfile.TemporaryDirectory(prefix="mpiscope-smpi-") as tmp:
        work = Path(tmp)
        actions.write(work / "actions")
        done = _smpirun(platform, node_of_rank, model, [str(program), str(work / "actions"), "--link-loads"],
                        work, f"simulating {what} (SMPI)",
                        ["--cfg=smpi/simulate-computation:no"], precision_s)
    lines = done.stdout.splitlines()
    values = dict(line.split(" ", 1) for line in lines if line and not line.startswith("link "))
    if done.returncode != 0 or "simulated_time_s" not in values:
        raise SimError(f"the SMPI replay of {what} failed ({first_error(done.stderr_tail)}); "
                       f"rerun with -v to see the smpirun command line")
    loads = LinkLoads.of([(n, float(b)) for _, n, b in (line.split(" ") for line in lines
                                                        if line.startswith("link "))])
    return SimResult(
        engine="smpi", what=what, platform=platform, map_name=map_name, model=model_name(model),
        simulated_time_s=float(values["simulated_time_s"]), wall_s=done.wall_s,
        peak_memory_bytes=done.peak_rss_bytes,
        messages=int(values["messages"]), bytes_total=float(values["bytes"]), links=loads,
        notes=actions.notes, extra={"messages_in_input": actions.messages, "bytes_in_input": actions.bytes,
                                    "time_precision_s": precision_s or SIMGRID_PRECISION_S})


def run_program(platform: Platform, source: Path, args: list[str], node_of_rank: np.ndarray, map_name: str,
                model: str = "CM02", measure_compute: bool = False,
                precision_s: float | None = None) -> SimResult:
    """Build a C MPI program with smpicc and run it under smpirun; its stdout is kept in the result."""
    binary = smpi_program(source)
    compute = (["--cfg=smpi/simulate-computation:yes", f"--cfg=smpi/host-speed:{platform.speed_flops!r}f"]
               if measure_compute else ["--cfg=smpi/simulate-computation:no"])
    with tempfile.TemporaryDirectory(prefix="mpiscope-smpi-") as tmp:
        done = _smpirun(platform, node_of_rank, model, [str(binary), *args], Path(tmp),
                        f"simulating {source.name} (SMPI)", compute, precision_s)
    # SMPI prints "[t] [smpi_utils/INFO] Simulated time: 0.00123 seconds." at the end of a run.
    found = [re.search(r"Simulated time: ([0-9.eE+-]+) seconds", line) for line in done.stderr_tail]
    times = [float(m.group(1)) for m in found if m]
    if done.returncode != 0 or not times:
        raise SimError(f"{source.name} failed under SMPI (exit {done.returncode}: "
                       f"{first_error(done.stderr_tail)}); fix the program, or check it with mpiexec first")
    return SimResult(
        engine="smpi", what=f"program {source.name}", platform=platform, map_name=map_name,
        model=model_name(model), simulated_time_s=times[-1], wall_s=done.wall_s,
        peak_memory_bytes=done.peak_rss_bytes, messages=None, bytes_total=None,
        extra={"program_stdout": done.stdout, "measure_compute": measure_compute,
               "time_precision_s": precision_s or SIMGRID_PRECISION_S})

