"""Per-host CPUs from the rank files' headers: the union of the ranks' affinity masks; counts
where a host has more CPUs than the mask covers; unknown (None) for files written before the
fields existed, which then never make an oversubscription finding."""

from __future__ import annotations

import numpy as np

from mpiscope.trace import record as R
from mpiscope.trace.placement import Crowded, host_cpus, oversubscribed, placement


def _header(host: str, online: int, cpus: list[int], allowed: int | None = None) -> np.void:
    h = np.zeros(1, R.FILE_HEADER_DTYPE)
    h["hostname"], h["cpus_online"] = host.encode(), online
    h["cpus_allowed"] = len(cpus) if allowed is None else allowed
    for c in cpus:
        if c < 256:
            h["cpu_mask"][0, c // 64] |= np.uint64(1) << np.uint64(c % 64)
    h["mpi_library"] = b"MPICH Version:\t 5.0.2"
    return h[0]


def test_union_of_masks_counts_each_cpu_once() -> None:
    assert host_cpus([_header("a", 8, [0, 1]), _header("a", 8, [1, 2])]) == 3
    assert host_cpus([_header("a", 8, [0]), _header("a", 8, [0]), _header("a", 8, [0])]) == 1
    assert host_cpus([_header("a", 512, [300, 301], allowed=2)]) == 2  # beyond the mask: the count
    assert host_cpus([_header("a", 0, [])]) is None  # written before the fields existed


def test_manifest_names_hosts_and_the_crowded_ones() -> None:
    headers = {0: _header("a", 2, [0, 1]), 1: _header("a", 2, [0, 1]), 2: _header("a", 2, [0, 1]),
               3: _header("b", 4, [0, 1, 2, 3])}
    p = placement(headers)
    assert p == {"hosts": {"a": {"ranks": 3, "cpus": 2, "cpus_online": 2},
                           "b": {"ranks": 1, "cpus": 4, "cpus_online": 4}},
                 "mpi_library": ["MPICH Version: 5.0.2"]}
    manifest = {"placement": p, "hosts": {"0": "a", "1": "a", "2": "a", "3": "b"}}
    assert oversubscribed(manifest) == [Crowded("a", [0, 1, 2], 2, 2)]
    old = {r: _header("a", 0, []) for r in range(3)}
    assert oversubscribed({"placement": placement(old), "hosts": {"0": "a", "1": "a", "2": "a"}}) == []
    assert oversubscribed({}) == []


def test_threads_in_mpi_crowd_a_host_too() -> None:
    """2 ranks of 3 threads in MPI each on 2 CPUs took turns on them as 6 ranks would (an MPI spins
    while it waits), and nothing said so; the finding names the threads."""
    import polars as pl

    from mpiscope.analysis.findings import oversubscribed_finding

    p = placement({0: _header("a", 2, [0, 1]), 1: _header("a", 2, [0, 1])})
    manifest = {"placement": p, "hosts": {"0": "a", "1": "a"}}
    assert oversubscribed(manifest) == [] and oversubscribed(manifest, {0: 1, 1: 1}) == []
    (crowded,) = oversubscribed(manifest, {0: 3, 1: 3})
    assert crowded == Crowded("a", [0, 1], 2, 2, 6) and crowded.runners == 6
    times = pl.DataFrame({"rank": [0, 1], "app_ns": [600_000_000] * 2, "mpi_ns": [0, 0]})
    f = oversubscribed_finding(times, [crowded])
    assert f is not None and f.text.startswith("more threads in MPI than CPUs: 2 ranks with 6 threads in MPI on")
    assert "about 800 ms" in f.text and "fewer threads calling MPI" in f.suggestion
