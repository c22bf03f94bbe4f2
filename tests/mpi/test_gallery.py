"""The S-CAT gallery (003 §4-5): each example recorded with 4 ranks, its feature asserted from the tables.

mm: low ranks finish early (003 Table 2's profile replayed); nqueens: the master is the hot spot;
ep: communication only at the end; sor: a barrier every sweep; lu: one pivot-row broadcast per step.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from tests.conftest import EXAMPLES

from mpiscope.mpi.build import compile_program

GALLERY = ("mm", "lu", "sor", "ep", "nqueens")
CALL = pl.col("call").cast(pl.Utf8)


@pytest.mark.parametrize("name", GALLERY)
def test_compiles_without_warnings(name: str, tmp_path: Path) -> None:
    compile_program(EXAMPLES / f"{name}.c", extra=["-Wall", "-Wextra", "-Werror"], out_dir=tmp_path)


@pytest.mark.mpi(ranks=4)
def test_mm_low_ranks_finish_first(run_traced) -> None:
    # a fixed per-row cost well above the real work: the order holds however loaded the machine is
    t = run_traced("mm", 4, args=["--n", "256", "--row-ms", "8"])
    # the end of a rank's computation is its entry into the gather of C
    ends = (t.events().filter(CALL == "MPI_Gatherv").select("rank", "t_enter_ns").sort("t_enter_ns")
            .collect()["rank"].to_list())
    assert ends[0] == 0 and ends[-1] == 3, ends


@pytest.mark.mpi(ranks=4)
def test_nqueens_master_is_the_hot_spot(run_traced) -> None:
    m = run_traced("nqueens", 4, args=["--n", "11"]).messages().select("src", "dst").collect()
    to_master = m.filter(pl.col("dst") == 0).height
    assert to_master > m.height / 2, (to_master, m.height)
    assert set(m.filter(pl.col("src") == 0)["dst"].unique()) == {1, 2, 3}


@pytest.mark.mpi(ranks=4)
def test_ep_communicates_only_in_the_last_tenth(run_traced) -> None:
    ev = run_traced("ep", 4, args=["--seconds", "2"]).events().collect()
    per_rank = ev.group_by("rank").agg(
        pl.col("t_leave_ns").filter(CALL == "MPI_Init").min().alias("start"),
        pl.col("t_enter_ns").filter(CALL == "MPI_Finalize").min().alias("end"),
        pl.col("t_enter_ns").filter(~CALL.is_in(["MPI_Init", "MPI_Finalize"])).min().alias("first"),
    ).with_columns(((pl.col("first") - pl.col("start")) / (pl.col("end") - pl.col("start"))).alias("at"))
    assert per_rank.height == 4 and per_rank["at"].min() >= 0.9, per_rank.sort("rank").to_dicts()
    assert set(ev.filter(~CALL.is_in(["MPI_Init", "MPI_Finalize"]))["call"].cast(pl.Utf8)) == {"MPI_Reduce"}


@pytest.mark.mpi(ranks=4)
def test_sor_has_a_barrier_every_sweep(run_traced) -> None:
    t = run_traced("sor", 4, args=["--n", "128", "--sweeps", "30"])
    barriers = t.collectives().filter(CALL == "MPI_Barrier").collect()
    assert barriers.height == 30 and (barriers["ranks"] == 4).all()
    # halo rows: 2 colours x 2 directions x 3 neighbour pairs per sweep
    assert t.messages().select(pl.len()).collect().item() == 30 * 2 * 2 * 3


@pytest.mark.mpi(ranks=4)
def test_lu_broadcasts_one_pivot_row_per_step(run_traced) -> None:
    bcasts = (run_traced("lu", 4, args=["--n", "128"]).collectives().filter(CALL == "MPI_Bcast")
              .sort("t_first_enter_ns").collect())
    assert bcasts["root"].to_list() == [k % 4 for k in range(128)]
