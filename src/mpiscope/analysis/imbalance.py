"""Load imbalance: the run cut into phases at the collectives every rank takes part in.

A phase ends at a blocking collective instance in which all world ranks take part
(every world rank was seen in it: barriers, allreduces, ... on MPI_COMM_WORLD or a
copy of it; a nonblocking collective does not synchronise at its start, so it cuts
nothing). Phase k ends at the k-th such instance; what follows the last one is a last phase,
closed by MPI_Finalize, where every rank called it and one computed TAIL_MIN_NS in it (a program
that synchronises only at its start computes all its work there: tachyon's 2.7 s read as
"balanced", in 0.8 ms of phases). The computation of rank r in phase k (spec §2) is its entry into
the closing collective minus the phase start (its leave of the opening collective;
for the first phase its leave of MPI_Init, else its first entry into MPI), minus
its time in MPI inside the phase. imbalance_pct = 100 (max - mean) / max; the
critical rank is the one that computed longest; lost = max - mean is the time the
phase would be shorter if its work were spread evenly.

    from mpiscope.analysis.imbalance import compute_phases
    phases = compute_phases(open_trace("trace")).phases     # list[Phase]

A run that synchronises every iteration has as many phases as iterations: the JSON
lists them one by one up to JSON_PHASES, beyond that in JSON_PHASES groups of
consecutive phases (computation summed over the group), with the phases that lost
most listed one by one (`worst_phases`) and the totals of the whole run.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
import polars as pl

from mpiscope.analysis.frames import Frames, load_frames, mpi_ns_before, rank_times
from mpiscope.errors import UsageError
from mpiscope.trace import FINALIZE_CALLS, START_CALLS, Trace

JSON_PHASES = 64      # phases (or groups of phases) in the JSON
TAIL_MIN_NS = 1_000_000  # the longest computation after the last collective that makes it a phase
WORST_PHASES = 10     # single phases listed by time lost when they are grouped

F64 = npt.NDArray[np.float64]


@dataclass(frozen=True)
class Phase:
    index: int
    t_start_ns: int
    t_end_ns: int
    compute_ns: list[int]        # per rank
    imbalance_pct: float
    critical_rank: int
    closing_call: str

    @property
    def lost_ns(self) -> float:
        return float(max(self.compute_ns) - np.mean(self.compute_ns)) if self.compute_ns else 0.0

    def to_json(self) -> dict[str, Any]:
        return {"index": self.index, "t_start_ns": self.t_start_ns, "t_end_ns": self.t_end_ns,
                "compute_seconds": [ns / 1e9 for ns in self.compute_ns], "imbalance_pct": self.imbalance_pct,
                "critical_rank": self.critical_rank, "lost_seconds": self.lost_ns / 1e9,
                "closing_call": self.closing_call}


def imbalance_of(compute: F64) -> tuple[float, int]:
    """(imbalance_pct, critical rank) of per-rank computation times."""
    top = float(compute.max()) if compute.size else 0.0
    return (100.0 * (top - float(compute.mean())) / top if top > 0 else 0.0), int(np.argmax(compute)) if compute.size else 0


@dataclass(frozen=True)
class Imbalance:
    ranks: int
    phases: list[Phase]
    run_compute_ns: list[int] = field(default_factory=list)  # per rank, whole run (app time - MPI time)

    def matrix_ns(self) -> npt.NDArray[np.int64]:
        """Computation per phase (rows) and rank (columns)."""
        return np.array([p.compute_ns for p in self.phases], np.int64).reshape(len(self.phases), self.ranks)

    def totals(self) -> dict[str, Any]:
        m = self.matrix_ns()
        total = m.sum(axis=0).astype(np.float64)
        pct, critical = imbalance_of(total)
        lost = float((m.max(axis=1) - m.mean(axis=1)).sum()) if m.size else 0.0
        crit_counts = np.bincount([p.critical_rank for p in self.phases], minlength=self.ranks)
        return {"phase_count": len(self.phases), "compute_seconds": (total / 1e9).tolist(), "imbalance_pct": pct,
                "critical_rank": critical, "lost_seconds": lost / 1e9,
                "critical_phases_by_rank": crit_counts.tolist(),
                "run_compute_seconds": [ns / 1e9 for ns in self.run_compute_ns]}

    def to_json(self, limit: int = JSON_PHASES) -> dict[str, Any]:
        n = len(self.phases)
        out: dict[str, Any] = {"phase_count": n, "grouped": n > limit, "phases_per_entry": 1,
                               "total": self.totals()}
        if n <= limit:
            out["phases"] = [p.to_json() for p in self.phases]
            return out
        m = self.matrix_ns()
        lost = m.max(axis=1) - m.mean(axis=1)
        groups = np.array_split(np.arange(n), limit)
        out["phases_per_entry"] = int(max(g.size for g in groups))
        out["phases"] = [self._group(g, m, lost) for g in groups]
        worst = np.argsort(-lost, kind="stable")[:WORST_PHASES]
        out["worst_phases"] = [self.phases[int(i)].to_json() for i in worst]
        return out

    def _group(self, idx: npt.NDArray[np.int64], m: npt.NDArray[np.int64], lost: F64) -> dict[str, Any]:
        first, last = self.phases[int(idx[0])], self.phases[int(idx[-1])]
        total = m[idx].sum(axis=0).astype(np.float64)
        pct, critical = imbalance_of(total)
        return {"index": first.index, "last_index": last.index, "count": int(idx.size),
                "t_start_ns": first.t_start_ns, "t_end_ns": last.t_end_ns,
                "compute_seconds": (total / 1e9).tolist(), "imbalance_pct": pct, "critical_rank": critical,
                "lost_seconds": float(lost[idx].sum()) / 1e9,
                "max_phase_imbalance_pct": max(self.phases[int(i)].imbalance_pct for i in idx),
                "closing_call": first.closing_call if first.closing_call == last.closing_call else "various"}


def compute_phases(trace: Trace) -> Imbalance:
    """The phases of a trace and each rank's computation in them; UsageError if none can be cut."""
    return phases_of(load_frames(trace, "the phase analysis"))


def _sync_events(f: Frames) -> pl.DataFrame:
    """The events taking part in blocking collective instances of all world ranks:
    event, rank, coll_id, in event order."""
    ev = f.events.select("event", "rank", "coll_id", "call").filter(pl.col("coll_id").is_not_null())
    nonblocking = f.code_table(frozenset(n for n in f.call_names if n.startswith("MPI_I")) | set(START_CALLS))
    ev = ev.filter(~pl.Series(nonblocking[ev["call"].to_physical().to_numpy()]))
    full = (ev.group_by("coll_id").agg(pl.col("rank").n_unique().alias("n"), pl.len().alias("rows"))
            .filter((pl.col("n") == f.ranks) & (pl.col("rows") == f.ranks)).select("coll_id"))
    return ev.join(full, on="coll_id", how="semi").sort("event")


def phases_of(f: Frames, times: pl.DataFrame | None = None) -> Imbalance:
    """The phases of Frames; `times`: their rank_times() if already made."""
    sync = _sync_events(f)
    times = rank_times(f) if times is None else times
    enter, leave = f.column("t_enter_ns"), f.column("t_leave_ns")
    before = mpi_ns_before(f)
    start = times["t_start_ns"].fill_null(0).to_numpy()
    first_of_rank = np.searchsorted(f.column("rank"), np.arange(f.ranks))

    def computed(r: npt.NDArray[np.int64], prev: npt.NDArray[np.int64], e: npt.NDArray[np.int64]) -> tuple[
            npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """(phase start, computation) of ranks r closing a phase at event e, opened by their event prev
        (-1: the rank's start)."""
        opened = prev >= 0
        t0 = np.where(opened, leave[np.maximum(prev, 0)], start[r])
        from_event = np.where(opened, prev + 1, first_of_rank[r])
        return t0, np.maximum(enter[e] - t0 - (before[e] - before[from_event]), 0)

    e, r = sync["event"].to_numpy(), sync["rank"].to_numpy()
    prev = np.concatenate([[-1], e[:-1]])
    prev = np.where(np.concatenate([[False], r[:-1] == r[1:]]), prev, -1)  # the rank's previous sync event
    t0, compute = computed(r, prev, e)
    instances, k = np.unique(sync["coll_id"].to_numpy(), return_inverse=True)
    mat = np.zeros((instances.size, f.ranks), np.int64)
    mat[k, r] = compute
    t_start = np.full(instances.size, np.iinfo(np.int64).max)
    np.minimum.at(t_start, k, t0)
    t_end = np.zeros(instances.size, np.int64)
    np.maximum.at(t_end, k, enter[e])
    closing = f.events["call"].gather(e[np.unique(k, return_index=True)[1]]).cast(pl.Utf8).to_list()
    tail = _tail(f, e, r, computed)
    if tail is not None:
        mat = np.vstack([mat, tail[2]])
        t_start, t_end = np.append(t_start, tail[0]), np.append(t_end, tail[1])
        closing.append(tail[3])
    if not mat.shape[0]:
        raise UsageError(f"{f.path} has no blocking collective that all {f.ranks} ranks take part in (a "
                         f"nonblocking one does not mark where a phase ends), so its run cannot be cut into "
                         f"phases; add an MPI_Barrier (or any blocking collective on MPI_COMM_WORLD) at the end "
                         f"of each phase and record again, or give the times: mpiscope rebalance --times ...")
    top = mat.max(axis=1).astype(np.float64)
    pct = np.divide(100.0 * (top - mat.mean(axis=1)), top, out=np.zeros_like(top), where=top > 0)
    critical = mat.argmax(axis=1)
    rows, ts, te, pcts, crits = mat.tolist(), t_start.tolist(), t_end.tolist(), pct.tolist(), critical.tolist()
    phases = [Phase(i, ts[i], te[i], rows[i], pcts[i], crits[i], closing[i])  # one object per phase, the API's
              for i in range(mat.shape[0])]
    run_compute = (times["app_ns"] - times["mpi_ns"]).clip(lower_bound=0).to_list()
    return Imbalance(f.ranks, phases, run_compute)


I64 = npt.NDArray[np.int64]


def _tail(f: Frames, sync_event: I64, sync_rank: I64,
          computed: Callable[[I64, I64, I64], tuple[I64, I64]]) -> tuple[int, int, I64, str] | None:
    """(start, end, computation per rank) of the phase from each rank's last sync event (or its start)
    to its MPI_Finalize (MPI_Session_finalize), where every rank called it once and one computed
    TAIL_MIN_NS; and that call's name."""
    code = f.code_table(FINALIZE_CALLS)
    fin = np.flatnonzero(code[f.call_codes()])
    ranks = f.column("rank")[fin]
    if fin.size != f.ranks or np.unique(ranks).size != f.ranks:
        return None
    fin = fin[np.argsort(ranks, kind="stable")]
    last = np.full(f.ranks, -1, np.int64)
    np.maximum.at(last, sync_rank, sync_event)
    r = np.arange(f.ranks)
    t0, compute = computed(r, last, fin)
    if compute.max() < TAIL_MIN_NS:
        return None
    return int(t0.min()), int(f.column("t_enter_ns")[fin].max()), compute, f.call_names[f.call_codes()[fin[0]]]


# A phase where a rank computed less than this share of the longest computed next to nothing: its
# work was not spread by rows (Graph500's rank 0 generates the graph alone while the others wait),
# so shares in proportion to speed would give that rank none and predict a 99.9 % gain.
ALONE_SHARE = 0.01


def done_alone(compute_s: Sequence[float]) -> bool:
    """Some rank computed next to nothing in a phase another spent real time in (ALONE_SHARE)."""
    return len(compute_s) > 1 and max(compute_s) > 0 and min(compute_s) < ALONE_SHARE * max(compute_s)
