"""Launcher files parse with real launchers; the MPI-parallel OPTIM runs as a 3-rank job."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from tests.conftest import MPICH, Mpi, mpiscope_cli, require

# Each rank writes its own file: the ranks' stdout lines may interleave.
RANK_PY = ("import sys; from mpi4py import MPI; c = MPI.COMM_WORLD; "
           "open(f'{sys.argv[1]}/rank{c.Get_rank()}', 'w').write(str(c.Get_size()))")


def write_map(tmp_path: Path, ranks_per_node: int, ranks: int) -> dict[str, Path]:
    (tmp_path / "hosts").write_text("localhost\n")
    done = mpiscope_cli(["map", "--network", "torus:1", "--ranks-per-node", str(ranks_per_node), "--pattern",
                         f"ring:{ranks}", "--hosts", str(tmp_path / "hosts"), "--max-rounds", "10",
                         "--out", str(tmp_path / "tng"), "--json", "-"])
    assert done.returncode == 0, done.stderr
    return {k: Path(v) for k, v in json.loads(done.stdout)["outputs"].items()}


@pytest.mark.mpi(ranks=2)
def test_hydra_machinefile(tmp_path: Path) -> None:
    paths = write_map(tmp_path, 2, 2)
    assert paths["machinefile"].read_text() == "localhost:2\n"
    assert paths["slurm"].read_text() == "localhost\nlocalhost\n"
    done = subprocess.run([str(MPICH.mpiexec), "-f", str(paths["machinefile"]), "-n", "2", sys.executable, "-c",
                           RANK_PY, str(tmp_path)], check=False, capture_output=True, text=True, timeout=120,
                          env=MPICH.environ())
    assert done.returncode == 0, done.stderr
    assert [(tmp_path / f"rank{r}").read_text() for r in (0, 1)] == ["2", "2"]


@pytest.mark.mpi(ranks=2)
@pytest.mark.openmpi
def test_openmpi_rankfile(tmp_path: Path, openmpi: Mpi) -> None:
    paths = write_map(tmp_path, 2, 2)
    assert paths["rankfile"].read_text() == "rank 0=localhost slot=0\nrank 1=localhost slot=1\n"
    hello = tmp_path / "hello.c"
    hello.write_text('#include <mpi.h>\n#include <stdio.h>\nint main(int c, char **v) { int r, n; char p[4096]; '
                     'MPI_Init(&c, &v); MPI_Comm_rank(MPI_COMM_WORLD, &r); MPI_Comm_size(MPI_COMM_WORLD, &n); '
                     'snprintf(p, sizeof p, "%s/rank%d", v[1], r); FILE *f = fopen(p, "w"); '
                     'fprintf(f, "%d", n); fclose(f); MPI_Finalize(); return 0; }\n')
    exe = tmp_path / "hello"
    subprocess.run([str(openmpi.mpicc), str(hello), "-o", str(exe)], check=True, timeout=120,
                   env=openmpi.environ())
    done = subprocess.run([str(openmpi.mpiexec), "--map-by", f"rankfile:file={paths['rankfile']}", "-n", "2",
                           str(exe), str(tmp_path)], check=False, capture_output=True, text=True, timeout=120,
                          env=openmpi.environ())
    assert done.returncode == 0, done.stdout + done.stderr
    assert [(tmp_path / f"rank{r}").read_text() for r in (0, 1)] == ["2", "2"]


@pytest.mark.mpi(ranks=3)
def test_mpi_parallel_search_with_3_ranks(tmp_path: Path) -> None:
    require((Path(sys.executable).parent / "mpiexec").is_file(), "the mpich wheel's mpiexec", "make setup")
    cmd = [str(MPICH.mpiexec), "-n", "3", sys.executable, "-m", "mpiscope", "map", "--network", "torus:4x4x4",
           "--pattern", "bruck:64", "--max-rounds", "3000", "--rounds-per-step", "1000", "--json", "-"]
    done = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=180, env=MPICH.environ(), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    d = json.loads(done.stdout)                      # only the master prints
    a = d["anneal"]
    assert a["workers"] == 2 and a["rounds"] == 3000 and a["moves_evaluated"] == 3000 * 2 * a["tries"]
    assert a["moves_accepted"] > 0 and d["result"]["eval"] <= a["initial_objective"]
