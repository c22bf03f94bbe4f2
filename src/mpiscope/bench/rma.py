"""`mpiscope bench rma`: passive-target one-sided latency, bandwidth and the truly-passive test.

Two ranks: the origin (0) times its operations while the target (1) waits in
MPI_Barrier, as IMB-RMA does; Truly_passive_put repeats the Put loop while
the target computes outside MPI and reports both times and their ratio.
"""

from __future__ import annotations

import csv
import io
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from mpiscope.bench import catalog, runner
from mpiscope.bench.formulas import bandwidth_mb_s, passive_ratio
from mpiscope.errors import UsageError

SCHEMA = "mpiscope.bench.rma/1"
RANKS = 2
MODES = ("lock_unlock", "lock_all_flush", "aggregate")


@dataclass(frozen=True)
class RmaConfig:
    ops: list[str]
    ranks: int = RANKS
    sizes: list[int] = field(default_factory=catalog.imb_sizes)
    async_progress: str = "both"
    iterations: int = 1000
    time_per_size_s: float = 10.0
    launcher_args: str = ""

    def validate(self) -> None:
        if self.ranks != RANKS:
            raise UsageError(f"-n {self.ranks}: the RMA benchmarks use exactly one origin and one target; "
                             f"run them with -n 2")
        if self.iterations < 1 or self.time_per_size_s <= 0:
            raise UsageError("--iter and --time must be positive; IMB's defaults are --iter 1000 --time 10")

    def expected_results(self) -> int:
        count = 0
        for name in self.ops:
            op = catalog.RMA_BY_NAME[name]
            n = 1 if op.single_element else len(catalog.sizes_for(self.sizes, op.reduction))
            count += n if name == "truly_passive_put" else n * len(MODES)
        return count

    def argv(self) -> list[str]:
        return ["--ops", ",".join(self.ops), "--sizes", ",".join(map(str, self.sizes)),
                "--iter", str(self.iterations), "--time", repr(self.time_per_size_s)]


@dataclass(frozen=True)
class RmaRow:
    """One operation, synchronisation mode and size: time per operation at the origin."""

    op: str
    mode: str
    bytes: int
    async_progress: bool
    n_sample: int
    t_us: float
    errors: int
    oversubscribed: bool

    def to_json(self) -> dict[str, Any]:
        return {"op": self.op, "mode": self.mode, "bytes": self.bytes, "async_progress": self.async_progress,
                "n_sample": self.n_sample, "t_us": self.t_us, "bandwidth_mb_s": bandwidth_mb_s(self.bytes, self.t_us),
                "errors": self.errors, "oversubscribed": self.oversubscribed}


@dataclass(frozen=True)
class PassiveRow:
    """Truly_passive_put at one size: target in MPI_Barrier (t_pure) vs computing (t_ovrlp)."""

    bytes: int
    async_progress: bool
    n_sample: int
    t_pure_us: float
    t_ovrlp_us: float
    errors: int
    oversubscribed: bool

    @property
    def ratio(self) -> float:
        return passive_ratio(self.t_pure_us, self.t_ovrlp_us)

    def to_json(self) -> dict[str, Any]:
        return {"op": "truly_passive_put", "bytes": self.bytes, "async_progress": self.async_progress,
                "n_sample": self.n_sample, "t_pure_us": self.t_pure_us, "t_ovrlp_us": self.t_ovrlp_us,
                "ratio": self.ratio, "errors": self.errors, "oversubscribed": self.oversubscribed}


@dataclass(frozen=True)
class RmaResult:
    run_id: str
    mpi: str
    config: RmaConfig
    settings: list[dict[str, Any]]
    rows: list[RmaRow]
    passive: list[PassiveRow]
    warnings: list[str]

    def to_json(self) -> dict[str, Any]:
        c = self.config
        return {"schema": SCHEMA, "run_id": self.run_id, "mpi": self.mpi, "ranks": c.ranks,
                "iterations": c.iterations, "time_per_size_s": c.time_per_size_s, "sizes": c.sizes,
                "settings": self.settings, "warnings": self.warnings,
                "results": [r.to_json() for r in self.rows] + [p.to_json() for p in self.passive]}

    def csv_text(self) -> str:
        rows = self.to_json()["results"]
        names: list[str] = []
        for row in rows:
            names.extend(k for k in row if k not in names)
        buf = io.StringIO()
        writer = csv.DictWriter(buf, fieldnames=names or ["op"], lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
        return buf.getvalue()

    @property
    def failed_checks(self) -> list[str]:
        bad = [f"{r.op} {r.bytes} B" for r in self.rows if r.errors]
        return bad + [f"truly_passive_put {p.bytes} B" for p in self.passive if p.errors]


def run_rma(config: RmaConfig, on_result: Callable[[runner.Record], None] = lambda r: None) -> RmaResult:
    config.validate()
    plan = runner.plan("rma", config.ranks, config.launcher_args, config.argv(), config.async_progress)
    rows: list[RmaRow] = []
    passive: list[PassiveRow] = []
    infos: list[dict[str, Any]] = []
    us = 1e6
    for setting in plan.settings:
        run = runner.run_program(plan.cmd, setting, on_result)
        over = run.oversubscribed
        for rec in run.results:
            wrong = int(sum(rec["errors"]))
            if rec["op"] == "truly_passive_put":
                # IMB prints the maximum over ranks: the origin's times (the target reports 0)
                passive.append(PassiveRow(int(rec["bytes"]), setting.enabled, int(rec["n_sample"]),
                                          max(rec["t_pure"]) * us, max(rec["t_ovrlp"]) * us, wrong, over))
            else:
                rows.append(RmaRow(str(rec["op"]), str(rec["mode"]), int(rec["bytes"]), setting.enabled,
                                   int(rec["n_sample"]), max(rec["t_op"]) * us, wrong, over))
        infos.append({"async_progress": setting.enabled, "env": setting.env, "note": setting.note,
                      "oversubscribed": over, "oversubscription_note": run.oversubscription_note() if over else "",
                      "thread_level": int(run.header["thread_level"]), "hosts": run.header["hosts"]})
    return RmaResult(uuid.uuid4().hex[:12], plan.mpi.label, config, infos, rows, passive, plan.warnings)
