"""Launcher files that make a rank map usable (001 §6, Fig. 5: `mpirun -machinefile tng.map`).

Open MPI rankfile, MPICH/Hydra machinefile, Slurm `--distribution=arbitrary`
hostfile, and the rank,node,coords CSV. Host names come from `--hosts FILE`
(one name per node in node order, x fastest, or `x:y:z name` lines); without
it nodes are called node0, node1, ...
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import numpy.typing as npt

from mpiscope.errors import UsageError
from mpiscope.mapping.mapfile import write_map_csv
from mpiscope.mapping.topology import Network
from mpiscope.output import write_atomic

IntArray = npt.NDArray[np.int64]

SUFFIXES = {"csv": ".csv", "rankfile": ".rankfile", "machinefile": ".machinefile", "slurm": ".slurm-hosts"}


def default_hosts(network: Network) -> list[str]:
    return [f"node{i}" for i in range(network.nodes)]


def read_hosts(path: str | Path, network: Network) -> list[str]:
    """Host name of every node: a plain list in node order, or `x:y:z name` lines in any order."""
    path = Path(path)
    try:
        lines = [ln.split("#")[0].strip() for ln in path.read_text().splitlines()]
    except OSError as e:
        raise UsageError(f"cannot read hosts file {path} ({e.strerror}); give one host name per node") from e
    lines = [ln for ln in lines if ln]
    if lines and all(len(ln.split()) == 2 and ":" in ln.split()[0] for ln in lines):
        hosts: list[str | None] = [None] * network.nodes
        for ln in lines:
            where, name = ln.split()
            try:
                c = [int(x) for x in where.split(":")]
            except ValueError as e:
                raise UsageError(f"hosts file {path}: {where!r} is not a coordinate x:y:z") from e
            if len(c) != network.ndim or any(not 0 <= v < s for v, s in zip(c, network.dims)):
                raise UsageError(f"hosts file {path}: coordinate {where} is outside {network.spec}")
            hosts[int(network.node_of(c))] = name
        missing = [i for i, h in enumerate(hosts) if h is None]
        if missing:
            raise UsageError(f"hosts file {path} names {network.nodes - len(missing)} of the {network.nodes} nodes "
                             f"of {network.spec}; add the missing ones, e.g. node {missing[0]}")
        return [h for h in hosts if h is not None]
    if len(lines) != network.nodes or any(len(ln.split()) != 1 for ln in lines):
        raise UsageError(f"hosts file {path} has {len(lines)} names but {network.spec} has {network.nodes} nodes; "
                         f"give one host name per line, in node order (x fastest)")
    return lines


def _slots(network: Network, node_of_rank: IntArray) -> IntArray:
    """Slot of each rank within its node (0.. ranks_per_node-1), by rank order."""
    slot = np.zeros(node_of_rank.size, dtype=np.int64)
    seen = np.zeros(network.nodes, dtype=np.int64)
    for r, n in enumerate(node_of_rank.tolist()):
        slot[r] = seen[n]
        seen[n] += 1
    return slot


def rankfile(network: Network, node_of_rank: IntArray, hosts: list[str]) -> str:
    """Open MPI: `mpirun --map-by rankfile:file=F` (or `-rf F`)."""
    slot = _slots(network, node_of_rank)
    return "".join(f"rank {r}={hosts[n]} slot={s}\n" for r, (n, s) in enumerate(zip(node_of_rank.tolist(),
                                                                                     slot.tolist())))


def machinefile(node_of_rank: IntArray, hosts: list[str]) -> str:
    """MPICH/Hydra `mpiexec -f F`: hosts in rank order, consecutive ranks on one host merged as host:count."""
    out: list[str] = []
    names = [hosts[n] for n in node_of_rank.tolist()]
    i = 0
    while i < len(names):
        j = i
        while j < len(names) and names[j] == names[i]:
            j += 1
        out.append(f"{names[i]}:{j - i}\n")
        i = j
    return "".join(out)


def slurm_hostfile(node_of_rank: IntArray, hosts: list[str]) -> str:
    """Slurm: SLURM_HOSTFILE=F srun --distribution=arbitrary: one host per rank, in rank order."""
    return "".join(f"{hosts[n]}\n" for n in node_of_rank.tolist())


def output_paths(prefix: str | Path) -> dict[str, Path]:
    p = Path(prefix)
    return {k: p.with_name(p.name + s) for k, s in SUFFIXES.items()}


def write_launchers(prefix: str | Path, network: Network, node_of_rank: IntArray,
                    hosts: list[str]) -> dict[str, Path]:
    paths = output_paths(prefix)
    write_map_csv(paths["csv"], network, node_of_rank)
    write_atomic(paths["rankfile"], rankfile(network, node_of_rank, hosts).encode())
    write_atomic(paths["machinefile"], machinefile(node_of_rank, hosts).encode())
    write_atomic(paths["slurm"], slurm_hostfile(node_of_rank, hosts).encode())
    return paths
