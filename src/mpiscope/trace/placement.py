"""Where the ranks ran: per host, its ranks and the CPUs they could run on, and the MPI
library that ran them, from the rank files' headers (native/runtime/init.c fills them at
MPI_Init). More ranks than CPUs on a host means they took turns on the CPUs: every wait and
every MPI time of such a run includes waiting for a CPU, which the diagnosis must say.

Rank files written before these fields existed read zeros: their hosts' CPUs are unknown
(None), never guessed.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

import numpy as np

MASK_CPUS = 256  # CPUs the header's affinity mask covers


def _text(raw: bytes | str) -> str:
    """A header's text field (or a manifest's host name) with its white space made single."""
    return " ".join((raw.decode(errors="replace") if isinstance(raw, bytes) else raw).split())


def host_cpus(headers: list[np.void]) -> int | None:
    """CPUs the ranks of one host could run on together: the union of their affinity
    masks, or the largest single count where a host has more CPUs than the mask covers."""
    online = [int(h["cpus_online"]) for h in headers]
    if not all(online):
        return None
    if max(online) <= MASK_CPUS:
        union = np.bitwise_or.reduce(np.stack([np.asarray(h["cpu_mask"], dtype=np.uint64) for h in headers]))
        counted = sum(int(w).bit_count() for w in union)
        if counted:
            return counted
    return max(max(int(h["cpus_allowed"]) for h in headers), 1)


def placement(headers: dict[int, np.void]) -> dict[str, Any]:
    """{"hosts": {host: {"ranks", "cpus", "cpus_online"}}, "mpi_library": [...]} for the manifest."""
    by_host: dict[str, list[int]] = defaultdict(list)
    for rank, h in sorted(headers.items()):
        by_host[_text(h["hostname"])].append(rank)
    hosts = {}
    for host, ranks in by_host.items():
        hs = [headers[r] for r in ranks]
        online = max(int(h["cpus_online"]) for h in hs)
        hosts[host] = {"ranks": len(ranks), "cpus": host_cpus(hs), "cpus_online": online or None}
    libraries = sorted({_text(h["mpi_library"]) for h in headers.values()} - {""})
    return {"hosts": hosts, "mpi_library": libraries}


def cpus_known(manifest: dict[str, Any]) -> bool:
    """Whether the rank files said how many CPUs every host gave its ranks."""
    hosts = (manifest.get("placement") or {}).get("hosts") or {}
    return bool(hosts) and all(h.get("cpus") for h in hosts.values())


@dataclass(frozen=True)
class Crowded:
    """A host that ran more ranks than it gave them CPUs."""
    host: str
    ranks: list[int]
    cpus: int          # the CPUs its ranks could run on (their affinity masks together)
    cpus_online: int   # the host's (more than `cpus`: the masks left some out)
    threads: int = 0   # its ranks' threads that called MPI, where more than its ranks

    @property
    def runners(self) -> int:
        """What took turns on the CPUs: the ranks, or their threads in MPI (an MPI spins while it waits)."""
        return max(self.threads, len(self.ranks))


def oversubscribed(manifest: dict[str, Any], threads: dict[int, int] | None = None) -> list[Crowded]:
    """Each host that ran more ranks, or with `threads` (per rank, its threads that called MPI) more
    threads in MPI, than it gave them CPUs: 2 ranks of 3 MPI threads each on 2 CPUs said nothing."""
    hosts = (manifest.get("placement") or {}).get("hosts") or {}
    ranks_of: dict[str, list[int]] = defaultdict(list)
    for rank, host in (manifest.get("hosts") or {}).items():
        ranks_of[_text(str(host))].append(int(rank))
    out = []
    for host, h in sorted(hosts.items()):
        ranks = sorted(ranks_of[host])
        in_mpi = sum((threads or {}).get(r, 1) for r in ranks)
        if h.get("cpus") and max(int(h["ranks"]), in_mpi) > int(h["cpus"]):
            out.append(Crowded(host, ranks, int(h["cpus"]), int(h.get("cpus_online") or h["cpus"]),
                               in_mpi if in_mpi > len(ranks) else 0))
    return out


def oversubscribed_sentence(host: str, ranks: int, cpus: int, threads: int = 0) -> str:
    """What the views say of such a host (`threads`: its threads in MPI, where more than its ranks)."""
    who = f"{ranks} ranks with {threads} threads in MPI" if threads else f"{ranks} ranks"
    return (f"{who} ran on the {cpus} CPU{'s' if cpus != 1 else ''} of host {host}: they took turns "
            f"on them, so their times in MPI include waiting for a CPU")
