"""Collectives' received bytes (events' recv_bytes) against what the MPI standard defines,
on tests/mpi/programs/coll_recv.c, with MPICH and Open MPI.

What a rank receives is what the collective writes into its receive buffer: a gather's
root all n pieces, its own included ("as if ... the root had executed n calls to
MPI_Recv"), and with MPI_IN_PLACE the n-1 others, its own "already in the correct place";
an allgather likewise at every rank; an alltoall in place the whole buffer (the data "is
taken from the receive buffer and replaced by the received data"); a scatter's root its
own piece (none in place, none on an intercommunicator); a reduction's root or every rank
the result; an exscan nothing at rank 0 (its receive buffer is undefined there); a
neighbourhood collective a block per in-neighbour, none from MPI_PROC_NULL (MPI-3.1 §7.6).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import polars as pl
import pytest
from tests.conftest import MPICH, Mpi, mpiscope_cli
from tests.unit.export_readback import check_otf2, read_otf2

from mpiscope.export.otf2 import export_otf2
from mpiscope.mpi.build import compile_program
from mpiscope.trace import Trace, open_trace

N, ROOT, INT, DOUBLE = 4, 1, 4, 8
PROGRAM = Path(__file__).parent / "programs" / "coll_recv.c"


def cnt(i: int) -> int:  # coll_recv.c's CNT, C2, S2
    return i + 1


def c2(a: int, b: int) -> int:
    return a + 2 * b + 1


def s2(a: int, b: int) -> int:
    return a + b + 1


TOTAL = sum(cnt(i) for i in range(N))
Expect = Callable[[int], int]


def blocking() -> dict[str, Expect]:
    """Section A of the program (and C's nonblocking variants of it)."""
    return {
        "Bcast": lambda r: 0 if r == ROOT else 3 * INT,
        "Gather": lambda r: N * 2 * INT if r == ROOT else 0,
        "Gatherv": lambda r: TOTAL * INT if r == ROOT else 0,
        "Scatter": lambda r: 2 * INT,
        "Scatterv": lambda r: cnt(r) * INT,
        "Allgather": lambda r: N * 2 * INT,
        "Allgatherv": lambda r: TOTAL * INT,
        "Alltoall": lambda r: N * 2 * INT,
        "Alltoallv": lambda r: sum(c2(j, r) for j in range(N)) * INT,
        "Alltoallw": lambda r: sum(c2(j, r) * (DOUBLE if j % 2 else INT) for j in range(N)),
        "Reduce": lambda r: 3 * INT if r == ROOT else 0,
        "Allreduce": lambda r: 3 * INT,
        "Reduce_scatter": lambda r: cnt(r) * INT,
        "Reduce_scatter_block": lambda r: 2 * INT,
        "Scan": lambda r: 3 * INT,
        "Exscan": lambda r: 0 if r == 0 else 3 * INT,
    }


def in_place() -> dict[str, Expect]:
    """Section B: MPI_IN_PLACE."""
    return {
        "Gather": lambda r: (N - 1) * 2 * INT if r == ROOT else 0,
        "Gatherv": lambda r: (TOTAL - cnt(ROOT)) * INT if r == ROOT else 0,
        "Scatter": lambda r: 0 if r == ROOT else 2 * INT,
        "Scatterv": lambda r: 0 if r == ROOT else cnt(r) * INT,
        "Allgather": lambda r: (N - 1) * 2 * INT,
        "Allgatherv": lambda r: (TOTAL - cnt(r)) * INT,
        "Alltoall": lambda r: N * 2 * INT,
        "Alltoallv": lambda r: sum(s2(r, j) for j in range(N)) * INT,
        "Alltoallw": lambda r: sum(s2(r, j) for j in range(N)) * INT,
        "Reduce": lambda r: 3 * INT if r == ROOT else 0,
        "Allreduce": lambda r: 3 * INT,
        "Reduce_scatter": lambda r: cnt(r) * INT,
        "Reduce_scatter_block": lambda r: 2 * INT,
        "Scan": lambda r: 3 * INT,
        "Exscan": lambda r: 0 if r == 0 else 3 * INT,
    }


def below(r: int) -> int:  # 1 where the non-periodic line has a neighbour
    return int(r > 0)


def above(r: int) -> int:
    return int(r < N - 1)


def expected(mpi4: bool, large: bool) -> dict[str, list[Expect]]:
    """Per call, the received bytes of each of its occurrences on a rank, in program order."""
    a, b = blocking(), in_place()
    out: dict[str, list[Expect]] = {f"MPI_{c}": [f] for c, f in a.items()}
    for c, f in b.items():
        out[f"MPI_{c}"].append(f)
    out |= {f"MPI_I{c[0].lower()}{c[1:]}": [f] for c, f in a.items()}
    half = N // 2
    out["MPI_Neighbor_allgather"] = [lambda r: (below(r) + above(r)) * 2 * INT, lambda r: 0 if r == 0 else 2 * INT]
    out["MPI_Neighbor_allgatherv"] = [lambda r: (below(r) + above(r)) * 2 * INT]
    out["MPI_Neighbor_alltoall"] = [lambda r: (below(r) + above(r)) * 2 * INT]
    for c in ("MPI_Neighbor_alltoallv", "MPI_Neighbor_alltoallw", "MPI_Ineighbor_alltoallv"):
        out[c] = [lambda r: (below(r) * 1 + above(r) * 3) * INT]  # 1 int from below, 3 from above
    # the intercommunicator: world rank 0 is the root of the even side, the odd side receives
    out["MPI_Bcast"].append(lambda r: 3 * INT if r % 2 else 0)
    out["MPI_Gather"].append(lambda r: half * 2 * INT if r == 0 else 0)
    out["MPI_Scatter"].append(lambda r: 2 * INT if r % 2 else 0)
    out["MPI_Reduce"].append(lambda r: 3 * INT if r == 0 else 0)
    out["MPI_Allgather"].append(lambda r: half * 2 * INT)
    if mpi4:  # an *_init call: what one instance receives
        out["MPI_Bcast_init"] = [a["Bcast"]]
        out["MPI_Gatherv_init"] = [a["Gatherv"]]
        out["MPI_Allgather_init"] = [b["Allgather"]]
        out["MPI_Exscan_init"] = [a["Exscan"]]
        # the Bcast's own MPI_Start (twice) is that rank's part in its instances; the Startall of
        # the other three starts three instances, which no one row can stand for: it carries the sum
        out["MPI_Start"] = [a["Bcast"]] * 2
        out["MPI_Startall"] = [lambda r: a["Gatherv"](r) + b["Allgather"](r) + a["Exscan"](r)] * 2
    if large:
        out["MPI_Bcast_c"] = [a["Bcast"]]
        out["MPI_Gatherv_c"] = [a["Gatherv"]]
        out["MPI_Allgatherv_c"] = [b["Allgatherv"]]
        out["MPI_Alltoallv_c"] = [a["Alltoallv"]]
        out["MPI_Reduce_scatter_c"] = [a["Reduce_scatter"]]
    return out


def record(mpi: Mpi, tmp_path: Path) -> Trace:
    prog = compile_program(PROGRAM, mpicc=str(mpi.mpicc), out_dir=tmp_path / "bin")
    env = mpi.environ()
    if mpi.lib_dir:
        env["MPISCOPE_LIB_DIR"] = str(mpi.lib_dir)
    done = mpiscope_cli(["run", "--out", str(tmp_path / "t"), "--", *mpi.launch(N), str(prog)], env=env)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-3000:]
    return open_trace(tmp_path / "t")


def occurrences(t: Trace) -> pl.DataFrame:
    """Collective calls with their occurrence index per rank and call (in entry order)."""
    return (
        t.events()
        .filter(pl.col("recv_bytes").is_not_null())
        .select("rank", pl.col("call").cast(pl.Utf8), "t_enter_ns", "event", "bytes", "recv_bytes")
        .sort("rank", "t_enter_ns", "event")
        .with_columns(pl.int_range(pl.len()).over("rank", "call").alias("k"))
        .collect()
    )


@pytest.mark.mpi(ranks=N)
@pytest.mark.parametrize("which", ["mpich", "openmpi"])
def test_recv_bytes_as_the_standard_defines(request: pytest.FixtureRequest, tmp_path: Path, which: str) -> None:
    mpi = MPICH if which == "mpich" else request.getfixturevalue("openmpi")
    t = record(mpi, tmp_path)
    ev = occurrences(t)
    calls = set(ev["call"].to_list())
    want = expected(mpi4="MPI_Bcast_init" in calls, large="MPI_Bcast_c" in calls)
    if which == "mpich":  # MPICH's headers say MPI 4 or later: both sections ran
        assert "MPI_Bcast_init" in calls and "MPI_Bcast_c" in calls
    got: dict[tuple[str, int, int], int] = {
        (c, k, r): v for c, k, r, v in ev.select("call", "k", "rank", "recv_bytes").iter_rows()
    }
    wrong = []
    for call, per_occurrence in want.items():
        for k, f in enumerate(per_occurrence):
            for r in range(N):
                if got.get((call, k, r)) != f(r):
                    wrong.append((call, k, r, got.get((call, k, r)), f(r)))
    assert not wrong, wrong  # (call, occurrence, rank, recorded, the standard's)
    assert calls <= set(want) | {"MPI_Barrier"}, calls - set(want)
    neighbour_sends(ev)
    intercomm_sends(ev)
    if "MPI_Bcast_init" in calls:
        persistent_instances(t, want)
    if which == "mpich":  # OTF2: MpiCollectiveEnd's received bytes are the events' recv_bytes
        export_otf2(t, tmp_path / "otf2")
        check_otf2(t, read_otf2(tmp_path / "otf2"))


def neighbour_sends(ev: pl.DataFrame) -> None:
    """What a neighbourhood collective sends leaves out MPI_PROC_NULL neighbours too."""
    line = ev.filter(pl.col("call") == "MPI_Neighbor_alltoallv").sort("rank")
    assert line["bytes"].to_list() == [(below(r) * 3 + above(r) * 1) * INT for r in range(N)]
    star = ev.filter((pl.col("call") == "MPI_Neighbor_allgather") & (pl.col("k") == 1)).sort("rank")
    assert star["bytes"].to_list() == [(N - 1) * 2 * INT if r == 0 else 0 for r in range(N)]


def intercomm_sends(ev: pl.DataFrame) -> None:
    """On the intercommunicator (each call's last occurrence) the even side's root (world rank
    0, MPI_ROOT) sends in a broadcast and a scatter, and nothing in a gather or a reduction; the
    ranks beside it (MPI_PROC_NULL) take no part; the odd side sends in a gather and a reduction."""
    want = {
        "MPI_Bcast": lambda r: 3 * INT if r == 0 else 0,
        "MPI_Gather": lambda r: 2 * INT if r % 2 else 0,
        "MPI_Scatter": lambda r: (N // 2) * 2 * INT if r == 0 else 0,
        "MPI_Reduce": lambda r: 3 * INT if r % 2 else 0,
    }
    for call, f in want.items():
        got = ev.filter(pl.col("call") == call).filter(pl.col("k") == pl.col("k").max()).sort("rank")
        assert got["bytes"].to_list() == [f(r) for r in range(N)], call


def persistent_instances(t: Trace, want: dict[str, list[Expect]]) -> None:
    """Each start of a persistent collective is an instance; its received bytes, summed over
    the ranks, are those of its *_init call's."""
    colls = t.collectives().filter(pl.col("call").cast(pl.Utf8).str.ends_with("_init")).collect()
    assert colls.height == 8  # four persistent collectives, started twice
    for row in colls.iter_rows(named=True):
        assert row["recv_bytes"] == sum(want[str(row["call"])][0](r) for r in range(N)), row

