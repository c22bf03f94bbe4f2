"""The diagnosis of a trace: wait states and their causes, the critical path, load
imbalance, hot spots, and the findings in plain words (`mpiscope diagnose`).

    from mpiscope.analysis.diagnose import diagnose
    d = diagnose(open_trace("trace"))
    d.to_json()      # "schema": "mpiscope.diagnose/1"; the report embeds it
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import polars as pl

from mpiscope.analysis.critical import CriticalPath, critical_path
from mpiscope.analysis.hang import hang_finding
from mpiscope.analysis.findings import (
    FileIo,
    Finding,
    build_findings,
    fmt_ranks,
    oversubscribed_finding,
    short_site,
)
from mpiscope.analysis.frames import Frames, file_io_rows, load_frames, rank_times
from mpiscope.analysis.hotspots import HOT_SPOT_RATIO, HotSpot, hot_spots
from mpiscope.analysis.imbalance import Imbalance, phases_of
from mpiscope.analysis.waitstates import (
    DEFAULT_EAGER_LIMIT,
    busy_calls,
    observed_eager_limit,
    unattributed_ns,
    wait_events,
    wait_state_rows,
    waited_by_rank,
)
from mpiscope.errors import UsageError
from mpiscope.mpi.find import implementation_of
from mpiscope.trace import Trace, collective_file_io_calls, file_io_calls, no_calls
from mpiscope.trace.placement import Crowded, cpus_known, oversubscribed

SCHEMA = "mpiscope.diagnose/1"


@dataclass(frozen=True)
class Diagnosis:
    run_id: str
    trace_dir: str
    ranks: int
    eager_limit: int
    per_rank: pl.DataFrame          # rank, app_ns, mpi_ns, wait_ns
    wait_states: pl.DataFrame       # wait_state_rows()
    critical_path: CriticalPath
    imbalance: Imbalance | None
    hot_spots: list[HotSpot]
    findings: list[Finding]
    notes: list[str] = field(default_factory=list)
    # more ranks than CPUs on a host: a fact of the run, inside every finding, so said apart
    oversubscribed: Finding | None = None
    # a run that did not reach MPI_Finalize everywhere (ended_early): the findings cover it up to there
    ended_early: str | None = None

    def to_json(self) -> dict[str, Any]:
        if self.imbalance is not None:
            imbalance = self.imbalance.to_json()
        else:
            imbalance = {"phase_count": 0, "grouped": False, "phases_per_entry": 1, "phases": [], "total": None}
        return {
            "schema": SCHEMA,
            "run_id": self.run_id,
            "trace_dir": self.trace_dir,
            "ranks": self.ranks,
            "eager_limit_bytes": self.eager_limit,
            "wait_states": self.wait_states.to_dicts(),
            "imbalance": imbalance,
            "hot_spots": [h.to_json() for h in self.hot_spots],
            "hot_spot_ratio": HOT_SPOT_RATIO,
            "critical_path": self.critical_path.to_json(),
            "findings": [f.to_json() for f in self.findings],
            "per_rank": [{"rank": r["rank"], "app_seconds": r["app_ns"] / 1e9, "mpi_seconds": r["mpi_ns"] / 1e9,
                          "io_seconds": r["io_ns"] / 1e9, "wait_seconds": r["wait_ns"] / 1e9}
                         for r in self.per_rank.iter_rows(named=True)],
            "notes": self.notes,
            "oversubscribed": self.oversubscribed.to_json() if self.oversubscribed else None,
            "ended_early": self.ended_early,
        }


def diagnose(trace: Trace, eager_limit: int | None = None) -> Diagnosis:
    """Diagnose a trace; `eager_limit` (bytes): the smallest MPI_Send/Isend that waits for its receive
    (None: what the trace shows, where below DEFAULT_EAGER_LIMIT, else that)."""
    hosts = len(set(trace.manifest.get("hosts", {}).values()))
    if trace.event_count == 0 and trace.manifest.get("counts"):
        raise UsageError(no_calls(trace))
    f = load_frames(trace)
    crowded = oversubscribed(trace.manifest, threads_in_mpi(f)) if cpus_known(trace.manifest) else None
    notes = []
    if eager_limit is None:
        seen = observed_eager_limit(f)
        eager_limit = DEFAULT_EAGER_LIMIT
        if seen is not None and seen < DEFAULT_EAGER_LIMIT:
            eager_limit = seen
            notes.append(f"eager limit {seen:,} B, from the trace: its blocking sends of that size and more waited "
                         f"for their receives, smaller ones did not (--eager-limit sets it)")
        elif seen is None and hosts <= 1 and (mpi := mpi_of(trace)) in ONE_HOST_EAGER_LIMITS:
            eager_limit = ONE_HOST_EAGER_LIMITS[mpi]
            notes.append(f"eager limit {eager_limit:,} B assumed, {mpi}'s on one host: the trace's sends do not show "
                         f"one (--eager-limit sets it)")
    d = diagnose_frames(f, eager_limit, hosts, crowded)
    hung = hang_finding(trace)  # a stopped run's blocked ranks come before what the run did until then
    return replace(d, notes=notes + d.notes, ended_early=ended_early(trace, f),
                   findings=[hung, *d.findings] if hung else d.findings)


# Where a trace's sends show no eager limit, that of the MPI's shared-memory transport for a run on one
# host (Open MPI 4's vader BTL: 4 KiB, ompi_info; MPICH 4.0 and 5.0 wait from 8 KiB, measured); across
# hosts the network's, not known here: DEFAULT_EAGER_LIMIT. With 64 KiB a LAMMPS run whose ranks sent
# 4-64 KiB to a late receiver read "communication-bound, mostly in MPI_Send" on Open MPI.
ONE_HOST_EAGER_LIMITS = {"Open MPI": 4096, "MPICH": 8192}


def threads_in_mpi(f: Frames) -> dict[int, int] | None:
    """Per rank, its threads that called MPI (None where every rank called from one)."""
    if f.threads_most() <= 1:
        return None
    counts = f.events.group_by("rank").agg(pl.col("thread").n_unique())
    return dict(zip(counts["rank"].to_list(), counts["thread"].to_list()))


def mpi_of(trace: Trace) -> str:
    """The MPI the run used ("Open MPI", "MPICH", ...): the rank files' library, else the one built for."""
    ran = (trace.manifest.get("placement") or {}).get("mpi_library") or []
    return implementation_of(ran[0])[0] if ran else str((trace.manifest.get("mpi") or {}).get("implementation"))


def ended_early(trace: Trace, f: Frames) -> str | None:
    """A sentence on a run that did not reach MPI_Finalize on every rank (rank_states in the
    manifest): who called MPI_Abort and where, in which calls the others were stopped. The
    diagnosis covers the run up to there, which a reader of a crashed run's findings must know."""
    states = {int(r): s for r, s in (trace.manifest.get("rank_states") or {}).items() if s != "finished"}
    if not states:
        return None
    stuck: dict[int, str] = {}
    for where, call in (trace.manifest.get("unfinished_calls") or {}).items():
        stuck.setdefault(int(float(where)), str(call))
    parts = []
    aborts = f.events.clear()
    if "MPI_Abort" in f.call_names:
        aborts = f.events.filter(pl.col("call") == "MPI_Abort")
    for row in aborts.group_by("rank").agg(pl.col("callsite").first()).sort("rank").iter_rows(named=True):
        parts.append(f"rank {row['rank']} called MPI_Abort at {short_site(row['callsite'])}")
        states.pop(int(row["rank"]), None)
    by_what: dict[str, list[int]] = {}
    for rank, state in sorted(states.items()):
        what = ENDED.get(state, state) + (f" inside {stuck[rank]}" if rank in stuck else "")
        by_what.setdefault(what, []).append(rank)
    parts += [f"{fmt_ranks(r)} {what}" for what, r in by_what.items()]
    code = trace.manifest.get("exit_code")
    return (f"the run ended early{f' (exit code {code})' if code else ''}: " + "; ".join(parts)
            + "; the diagnosis covers the run up to there")


# a rank's end (trace/record.py's STATE_NAMES) where the sentence on a run that ended early says it otherwise
ENDED = {"cut off": "stopped", "stopped: disk full": "stopped recording (disk full)"}


def file_io(f: Frames) -> FileIo | None:
    """What the run's MPI-IO time went to (None without MPI-IO): the call site that took longest,
    the share in reads and writes, and of those in reads and in collective ones, the files opened.
    MPI-IO time is that of file_io_rows: a wait that completed nonblocking reads or writes only is
    moving data (counted with the writes: which it completed is not kept here)."""
    codes = f.call_codes()
    io = file_io_rows(f)
    if not io.any():
        return None
    calls = f.events.filter(pl.Series(io)).with_columns((pl.col("t_leave_ns") - pl.col("t_enter_ns")).alias("ns"))
    top = (calls.group_by("call", "callsite").agg(pl.col("ns").sum())
           .sort("ns", "call", "callsite", descending=[True, False, False], nulls_last=True).row(0))
    names = f.call_names
    reads, writes = file_io_calls(names, "read"), file_io_calls(names, "write")
    # every nonblocking file access reads or writes: the waits for them move data too
    metadata = f.code_table(frozenset(file_io_calls(names)) - frozenset(reads + writes))[codes[io]]
    ns = calls["ns"].fill_null(0).to_numpy()
    call = codes[io]
    total, moved = int(ns.sum()), int(ns[~metadata].sum())
    collective = f.code_table(frozenset(collective_file_io_calls(names, moving=True)))[call]
    return FileIo((str(top[0]), str(top[1] or "?"), int(top[2] or 0)), moved / total if total > 0 else None,
                  read_share=float(ns[f.code_table(frozenset(reads))[call]].sum() / moved) if moved else 0.0,
                  collective_share=float(ns[collective].sum() / moved) if moved else 0.0,
                  opens=int(f.code_table(frozenset({"MPI_File_open"}))[call].sum()),
                  accesses=int(f.code_table(frozenset(reads + writes))[call].sum()))



def diagnose_frames(f: Frames, eager_limit: int = DEFAULT_EAGER_LIMIT, hosts: int = 0,
                    crowded: list[Crowded] | None = None) -> Diagnosis:
    if eager_limit < 0:
        raise UsageError(f"eager limit {eager_limit} is negative; give a size in bytes, e.g. --eager-limit 65536")
    if f.events.height == 0:
        raise UsageError(f"{f.path} holds no MPI calls; record a run that calls MPI: "
                         f"mpiscope run --out {f.path} --force -- mpiexec -n 4 ./app")
    notes = []
    neighbour = f.code_table(frozenset(n for n in f.call_names if "eighbor_" in n))[f.call_codes()]
    if neighbour.any():
        notes.append(f"{int(neighbour.sum())} neighbourhood collective calls are not diagnosed: the trace does not "
                     f"record the neighbours their waiting depends on")
    waits = wait_events(f, eager_limit)
    times = rank_times(f)
    try:
        imbalance: Imbalance | None = phases_of(f, times)
    except UsageError as e:
        imbalance = None
        notes.append(f"no load-imbalance phases: {e}")
    per_rank = times.select("rank", "app_ns", "mpi_ns", "io_ns").with_columns(
        pl.Series("wait_ns", waited_by_rank(waits, times.height))).sort("rank")
    spots = hot_spots(f)
    trace = str(f.path)
    io_profile = file_io(f)
    return Diagnosis(
        run_id=f.run_id, trace_dir=trace, ranks=f.ranks, eager_limit=eager_limit, per_rank=per_rank,
        wait_states=wait_state_rows(waits), critical_path=critical_path(waits, times), imbalance=imbalance,
        hot_spots=spots, findings=build_findings(waits, imbalance, spots, times, trace, hosts, crowded,
                                                 unattributed_ns(f, waits), io_profile,
                                                 busy_calls(f, waits)),
        notes=notes,
        oversubscribed=oversubscribed_finding(times, crowded or ()),
    )
