"""Results of the broadcast experiments: the records of bcast_exp.c arranged as
000's tables, the figures 000 reports (cuts, overheads, shares) computed from
them, and the JSON payload (schema mpiscope.bench.bcast/1).

Ori is the binomial tree over the identity table (000's "without dynamic
optimisation"), Opt the adaptive broadcast, Ide the binomial tree over the
best static table from the start; the MPI's own MPI_Bcast is reported beside
them as "library".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mpiscope.bench import bcast_paper as paper

SCHEMA = "mpiscope.bench.bcast/1"
ORI, OPT, IDE, LIB = "binomial", "adaptive", "ideal", "library"
Record = dict[str, Any]


@dataclass
class BcastResult:
    experiment: str
    run_id: str
    ranks: int
    simulated: bool
    mpi: str
    params: dict[str, Any]
    records: list[Record]
    platform: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)

    def rows(self) -> list[Record]:
        return [r for r in self.records if not r.get("header")]

    def summary(self) -> dict[str, Any]:
        if self.experiment == "max-effect":
            return {s: max_effect_summary(self.rows(), s) for s in self.load_sets()}
        if self.experiment == "random":
            return random_summary(self.rows())
        return {}

    def load_sets(self) -> list[str]:
        return sorted({str(r["load_set"]) for r in self.rows() if "load_set" in r})

    def to_json(self) -> dict[str, Any]:
        return {"schema": SCHEMA, "run_id": self.run_id, "experiment": self.experiment, "ranks": self.ranks,
                "simulated": self.simulated, "mpi": self.mpi, "platform": self.platform, "params": self.params,
                "records": self.rows(), "summary": self.summary(), "notes": self.notes}


def cell(rows: list[Record], variant: str, **key: Any) -> Record | None:
    for r in rows:
        if r["variant"] == variant and all(r.get(k) == v for k, v in key.items()):
            return r
    return None


def ratio(a: Record | None, b: Record | None, what: str) -> float | None:
    if a is None or b is None or not b[what]:
        return None
    return float(a[what]) / float(b[what])


# ---- max-effect ----

def max_effect_summary(rows: list[Record], load_set: str) -> dict[str, Any]:
    """000 §5.1's figures for one load set: the cuts at the heaviest load, the overhead without load,
    Optimised against Ideal (SPEC §9.1 and the acceptance of issue 19)."""
    mine = [r for r in rows if r.get("load_set") == load_set]
    columns = sorted({int(r["column"]) for r in mine})
    sizes = sorted({int(r["bytes"]) for r in mine})
    heaviest, none_ = (columns[-1], columns[0]) if columns else (-1, -1)

    def cut(size: int, column: int, what: str) -> float | None:
        q = ratio(cell(mine, OPT, bytes=size, column=column), cell(mine, ORI, bytes=size, column=column), what)
        return None if q is None else 100.0 * (1.0 - q)

    avg_cuts = {paper.size_label(s): cut(s, heaviest, "average_s") for s in sizes if s <= 128 << 10}
    overall_cuts = {paper.size_label(s): cut(s, heaviest, "overall_s") for s in sizes}
    overhead = {paper.size_label(s): ratio(cell(mine, OPT, bytes=s, column=none_),
                                           cell(mine, ORI, bytes=s, column=none_), "overall_s") for s in sizes}
    opt_ide = [ratio(cell(mine, OPT, bytes=s, column=c), cell(mine, IDE, bytes=s, column=c), "overall_s")
               for s in sizes for c in columns]
    known = [q for q in opt_ide if q is not None]
    valid_avg = [v for v in avg_cuts.values() if v is not None]
    valid_ovh = [abs(v - 1) for v in overhead.values() if v is not None]
    return {
        "average_cut_heaviest_pct": avg_cuts,
        "average_cut_heaviest_min_le_128k_pct": min(valid_avg) if valid_avg else None,
        "overall_cut_heaviest_pct": overall_cuts,
        "overall_cut_heaviest_8mb_pct": overall_cuts.get("8MB"),
        "no_load_opt_over_ori_overall": overhead,
        "no_load_max_deviation_pct": 100.0 * max(valid_ovh) if valid_ovh else None,
        "opt_over_ide_overall_max": max(known) if known else None,
        "paper": paper.KEY_RESULTS,
    }


def max_effect_table(rows: list[Record], load_set: str, what: str) -> list[tuple[int, list[tuple[
        float | None, ...]]]]:
    """Per size: per load column (Ori, Opt, Ide, library) in ms."""
    mine = [r for r in rows if r.get("load_set") == load_set]
    columns = sorted({int(r["column"]) for r in mine})
    out = []
    for size in sorted({int(r["bytes"]) for r in mine}):
        cells = []
        for c in columns:
            vals = [cell(mine, v, bytes=size, column=c) for v in (ORI, OPT, IDE, LIB)]
            cells.append(tuple(None if r is None else 1e3 * float(r[what]) for r in vals))
        out.append((size, cells))
    return out


def paper_cell(size: int, column: int, what: str) -> paper.Cell | None:
    table = paper.OVERALL_MS if what == "overall_s" else paper.AVERAGE_MS
    label = paper.size_label(size)
    return table[label][column] if label in table and 0 <= column < 5 else None


# ---- random loads ----

def random_ratios(rows: list[Record], size: int, what: str) -> np.ndarray:
    """Opt/Ori of every pattern at this size, sorted (000 Figs. 13-14)."""
    ori = {r["pattern"]: r[what] for r in rows if r["variant"] == ORI and r["bytes"] == size}
    opt = {r["pattern"]: r[what] for r in rows if r["variant"] == OPT and r["bytes"] == size}
    return np.sort(np.array([opt[p] / ori[p] for p in ori if p in opt and ori[p]], dtype=float))


def random_summary(rows: list[Record]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for size in sorted({int(r["bytes"]) for r in rows}):
        for what, name in (("overall_s", "overall"), ("average_s", "average")):
            q = random_ratios(rows, size, what)
            if not q.size:
                continue
            label = paper.size_label(size)
            out[f"{label}_{name}"] = {
                "patterns": int(q.size), "le_0.95": float(np.mean(q <= 0.95)), "ge_1.05": float(np.mean(q >= 1.05)),
                "within_5pct": float(np.mean((q > 0.95) & (q < 1.05))), "median": float(np.median(q)),
                "best": float(q[0]), "worst": float(q[-1]), "paper": paper.RANDOM_SHARES.get((label, name), {}),
            }
    return out


# ---- sparse product ----

def sparse_rows(rows: list[Record]) -> list[Record]:
    """Means over runs per (processes, matrix, variant), with 000 Table 3's cell where it has one."""
    keys = sorted({(int(r["ranks"]), int(r["n"]), float(r["density"]), float(r["slope"])) for r in rows})
    out = []
    for ranks, n, density, slope in keys:
        for variant in (ORI, OPT, IDE, LIB):
            mine = [r for r in rows if r["variant"] == variant and int(r["ranks"]) == ranks and int(r["n"]) == n
                    and float(r["density"]) == density and float(r["slope"]) == slope]
            if not mine:
                continue
            row = {"ranks": ranks, "n": n, "density": density, "slope": slope, "variant": variant,
                   "runs": len(mine)}
            for what in ("work_s", "bcast_s", "total_s"):
                row[what] = float(np.mean([r[what] for r in mine]))
            ref = paper.SPARSE.get((n, density, slope), {}).get(ranks)
            index = {ORI: 0, OPT: 1, IDE: 2}.get(variant)
            if ref is not None and index is not None:
                row["paper_us"] = {"work": ref[0][index], "bcast": ref[1][index], "total": ref[2][index]}
            out.append(row)
    return out
