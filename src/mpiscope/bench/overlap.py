"""`mpiscope bench overlap`: nonblocking collectives overlapped with computation, IMB-NBC style.

One launch of mpiscope-bench-overlap per asynchronous-progress setting; each
reports per-rank timings that formulas.overlap_point turns into IMB's row
(and OSU's, with --definition osu) beside the blocking collective + t_CPU.
"""

from __future__ import annotations

import csv
import io
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from mpiscope.bench import catalog, runner
from mpiscope.bench.formulas import OverlapPoint, overlap_point
from mpiscope.errors import UsageError

SCHEMA = "mpiscope.bench.overlap/1"


@dataclass(frozen=True)
class OverlapConfig:
    ops: list[str]
    ranks: int = 2
    sizes: list[int] = field(default_factory=catalog.imb_sizes)
    async_progress: str = "both"          # off | on | both
    kernel_size: int = 10                 # IMB's source; the 002 article says 100
    test_calls: int = 0                   # MPI_Test every K kernel repetitions (0: none, as IMB)
    iterations: int = 1000                # IMB -iter: repetitions per size at most
    time_per_size_s: float = 10.0         # IMB -time: dynamic policy budget per size
    definition: str = "imb"               # imb | osu
    launcher_args: str = ""

    def validate(self) -> None:
        if self.ranks < 2:
            raise UsageError(f"-n {self.ranks} is too few ranks for a collective benchmark; use -n 2 or more")
        if not 1 <= self.kernel_size <= 4096:
            raise UsageError(f"--kernel-size {self.kernel_size} is out of range; give 1 to 4096 (IMB uses 10)")
        if self.test_calls < 0:
            raise UsageError(f"--test-calls {self.test_calls} is negative; give 0 (no MPI_Test) or a positive K")
        if self.iterations < 1 or self.time_per_size_s <= 0:
            raise UsageError("--iter and --time must be positive; IMB's defaults are --iter 1000 --time 10")
        for name in self.ops:
            catalog.check_buffer_limit(catalog.NBC_BY_NAME[name], self.sizes, self.ranks)

    def expected_results(self) -> int:
        """Result records one launch will produce (for the progress bar)."""
        count = 0
        for name in self.ops:
            op = catalog.NBC_BY_NAME[name]
            count += len(catalog.sizes_for(self.sizes, op.reduction)) if op.sized else 1
        return count

    def argv(self) -> list[str]:
        return ["--ops", ",".join(self.ops), "--sizes", ",".join(map(str, self.sizes)),
                "--iter", str(self.iterations), "--time", repr(self.time_per_size_s),
                "--kernel-size", str(self.kernel_size), "--test-calls", str(self.test_calls)]


@dataclass(frozen=True)
class OverlapRow:
    op: str
    bytes: int
    async_progress: bool
    n_sample: int
    point: OverlapPoint
    errors: int                 # wrong result elements, summed over ranks (must be 0)
    oversubscribed: bool

    def to_json(self, definition: str) -> dict[str, Any]:
        p = self.point
        row: dict[str, Any] = {
            "op": self.op, "bytes": self.bytes, "async_progress": self.async_progress, "n_sample": self.n_sample,
            "t_ovrlp_us": p.t_ovrlp_us, "t_pure_us": p.t_pure_us, "t_cpu_us": p.t_cpu_us,
            "overlap_pct": p.overlap_pct, "blocking_us": p.blocking_us,
            "blocking_plus_cpu_us": p.blocking_plus_cpu_us, "faster": p.faster, "imb_rank": p.rank,
            "t_test_us": p.t_test_us, "imb_reference": catalog.NBC_BY_NAME[self.op].imb_name,
            "errors": self.errors, "oversubscribed": self.oversubscribed,
        }
        if definition == "osu":
            row.update({"osu_overall_us": p.osu_overall_us, "osu_compute_us": p.osu_compute_us,
                        "osu_pure_us": p.osu_pure_us, "osu_overlap_pct": p.osu_overlap_pct})
        return row


@dataclass(frozen=True)
class SettingInfo:
    async_progress: bool
    env: dict[str, str]
    note: str
    oversubscribed: bool
    oversubscription_note: str
    kernel_mflops: float
    thread_level: int
    hosts: list[dict[str, Any]]


@dataclass(frozen=True)
class OverlapResult:
    run_id: str
    mpi: str
    config: OverlapConfig
    settings: list[SettingInfo]
    rows: list[OverlapRow]
    warnings: list[str]

    def to_json(self) -> dict[str, Any]:
        c = self.config
        return {
            "schema": SCHEMA, "run_id": self.run_id, "mpi": self.mpi, "ranks": c.ranks,
            "definition": c.definition, "kernel_size": c.kernel_size, "test_calls": c.test_calls,
            "iterations": c.iterations, "time_per_size_s": c.time_per_size_s, "sizes": c.sizes,
            "settings": [s.__dict__ for s in self.settings], "warnings": self.warnings,
            "results": [r.to_json(c.definition) for r in self.rows],
        }

    def csv_text(self) -> str:
        rows = [r.to_json(self.config.definition) for r in self.rows]
        buf = io.StringIO()
        writer = csv.DictWriter(buf, fieldnames=list(rows[0]) if rows else ["op"], lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
        return buf.getvalue()

    @property
    def failed_checks(self) -> list[OverlapRow]:
        return [r for r in self.rows if r.errors]


def _row(record: runner.Record, run: runner.Run) -> OverlapRow:
    point = overlap_point(record["t_pure"], record["t_ovrlp"], record["t_cpu"], record["t_test"],
                          record["t_blocking"])
    return OverlapRow(str(record["op"]), int(record["bytes"]), run.setting.enabled, int(record["n_sample"]), point,
                      int(sum(record["errors"])), run.oversubscribed)


def run_overlap(config: OverlapConfig, on_result: Callable[[runner.Record], None] = lambda r: None) -> OverlapResult:
    """Measure every operation and size once per asynchronous-progress setting."""
    config.validate()
    plan = runner.plan("overlap", config.ranks, config.launcher_args, config.argv(), config.async_progress)
    rows: list[OverlapRow] = []
    infos: list[SettingInfo] = []
    for setting in plan.settings:
        run = runner.run_program(plan.cmd, setting, on_result)
        rows.extend(_row(rec, run) for rec in run.results)
        note = run.oversubscription_note() if run.oversubscribed else ""
        infos.append(SettingInfo(setting.enabled, setting.env, setting.note, run.oversubscribed, note,
                                 float(run.header["kernel_mflops"]), int(run.header["thread_level"]),
                                 list(run.header["hosts"])))
    return OverlapResult(uuid.uuid4().hex[:12], plan.mpi.label, config, infos, rows, plan.warnings)
