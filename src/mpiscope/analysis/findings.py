"""Findings: the diagnosis in plain words, each with its evidence and what to do.

Every finding carries `seconds`, the time it costs summed over the ranks concerned
(rank-seconds), so that findings of different kinds sort on one scale. Findings
under MIN_SHARE of the run's rank-seconds (the sum of every rank's time from
MPI_Init to MPI_Finalize) are dropped, except hot spots, which name a structure
rather than a cost. More ranks than CPUs on a host is not a finding of the program but of
the run: oversubscribed_finding() gives it apart (Diagnosis.oversubscribed), since its
time-sharing is inside every finding here. A run is called communication-bound when its ranks spend
COMM_BOUND_SHARE of their time or more in MPI without waiting for another rank
(moving data, or the MPI's own overhead).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from mpiscope.analysis.hotspots import HotSpot
from mpiscope.analysis.imbalance import ALONE_SHARE, Imbalance, done_alone
from mpiscope.analysis.waitstates import BARRIER, BROADCAST, COMM_CREATE, NXN, REDUCE, WINDOW_NXN, waited_by_rank
from mpiscope.trace import ONE_SIDED_GETS, ONE_SIDED_PUTS
from mpiscope.trace.placement import Crowded
from mpiscope.units import scaled

MIN_SHARE = 0.01
COMM_BOUND_SHARE = 0.25
# The late rank's extra computation before its late call explains a wait when it is
# at least this share of the mean wait; below, the text says the rank was held up earlier.
DELAY_EXPLAINS = 0.1
# A wait at least this share of which the late rank spent still inside MPI_Init is the start-up's.
START_UP_EXPLAINS = 0.5
START_UP_ADVICE = ("nothing to change in the program for this wait: the ranks left MPI_Init at different times "
                   "(processes started and connected one after another); it does not grow with the run")
# Below this imbalance (100·(max − mean)/max over the run) the spread of computation is within
# what scheduling noise gives a balanced program on a shared node: no finding.
IMBALANCE_MIN_PCT = 5.0
# A hot spot delays the others through its messages: only these waits are laid at its door
# (a wait at a barrier or N×N collective for the same rank has other causes).
POINT_TO_POINT_WAITS = ("late_sender", "late_sender_wrong_order", "late_receiver")
# Waits whose only advice is to rebalance: wrong advice where the late rank did not compute longer.
REBALANCE_ONLY = ("late_sender", "wait_at_nxn", "wait_at_fence")
# A rank's thread waiting for a message of another of its threads: no share of work between ranks moves it.
OWN_THREADS_ADVICE = ("the wait is between threads of one rank, so rebalancing ranks does not shorten it: let the "
                      "waiting thread work meanwhile (post the receive with MPI_Irecv, complete it when it is needed), "
                      "or share the sending thread's work among the rank's threads")
# Up to this many phases, rebalancing takes the worst (S-CAT's mm: one product); beyond, all of them.
FEW_PHASES = 3
HOT_SPOT_ADVICE = ("distribute the master's work: several masters, or hand out work in larger pieces or from "
                   "the workers to each other, so that no single rank handles most messages")

LABEL = {"late_sender": "late sender", "late_sender_wrong_order": "late sender, wrong order",
         "late_receiver": "late receiver", "wait_at_barrier": "wait at barrier", "wait_at_nxn": "wait at N×N",
         "late_broadcast": "late broadcast", "early_reduce": "early reduce", "early_broadcast": "early broadcast",
         "wait_at_fence": "wait at fence"}


@dataclass(frozen=True)
class Finding:
    kind: str
    text: str
    seconds: float
    ranks: list[int]
    suggestion: str
    evidence: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "text": self.text, "seconds": self.seconds, "ranks": self.ranks,
                "suggestion": self.suggestion, **self.evidence}


def short_site(site: str | None) -> str:
    """A call site as a sentence names it: a C++ function without its return type, template
    arguments and parameters ("miniFE::dot (Vector_functions.hpp:221)", not the 200 characters
    of the demangled name), short or long, so that one diagnosis names every site alike; the
    evidence keeps the whole name."""
    if not site:
        return "?"
    cut = site.rfind(" (")
    if cut <= 0:
        return site
    kept, depth = [], 0
    for ch in site[:cut]:
        if ch in "<(":
            depth += 1
        elif ch in ">)":
            depth = max(depth - 1, 0)
        elif depth == 0:
            kept.append(ch)
    words = "".join(kept).split()
    return f"{words[-1]}{site[cut:]}" if words else site


def fmt_s(seconds: float) -> str:
    """0.2 -> '0.200 s', 0.04 -> '40.0 ms' (text only; the JSON keeps the numbers)."""
    if abs(float(f"{seconds:.3g}")) >= 1:  # (0.9997 s is 1.000 s, not 1e+03 ms)
        return f"{seconds:.3f} s"
    return scaled(seconds * 1e9, (("ms", 1e6), ("µs", 1e3)), "ns")


def fmt_ranks(ranks: list[int]) -> str:
    """[0, 1, 2, 5] -> 'ranks 0-2, 5'; [3] -> 'rank 3'."""
    if len(ranks) == 1:
        return f"rank {ranks[0]}"
    parts, i = [], 0
    while i < len(ranks):
        j = i
        while j + 1 < len(ranks) and ranks[j + 1] == ranks[j] + 1:
            j += 1
        parts.append(str(ranks[i]) if i == j else f"{ranks[i]}-{ranks[j]}")
        i = j + 1
    return "ranks " + ", ".join(parts)


def _rebalance(trace: str, ranks: int) -> str:
    return f"balance that work: mpiscope rebalance {trace} --shares ROWSx{ranks}"


def _suggestion(pattern: str, trace: str, ranks: int) -> str:
    rebalance = _rebalance(trace, ranks)
    return {
        "late_sender": rebalance,
        "late_sender_wrong_order": f"receive the messages in the order they arrive: an MPI_Irecv per sender "
                                   f"and MPI_Waitany or MPI_Waitall (MPI_ANY_SOURCE only where any order of "
                                   f"the messages is correct), and {rebalance}",
        "wait_at_barrier": f"{rebalance}; or drop the barrier if nothing depends on it",
        "wait_at_nxn": rebalance,
        "wait_at_fence": rebalance,
        # --bcast adaptive moves late non-roots to the leaves; the root stays first: it cannot help here
        "late_broadcast": "the broadcast cannot start before its root: move work off the root, or have the root "
                          "broadcast as soon as its data is ready",
        "early_reduce": f"the root arrives first: give the root more of the work, or {rebalance}",
        "early_broadcast": f"the MPI held the root until its receivers came: broadcast with MPI_Ibcast and complete "
                           f"it where its result is needed, so that the root works meanwhile, or {rebalance}",
    }[pattern]


def _late_receiver_advice(call: str, otherwise: str) -> str:
    """A late receiver's cure on the sender's side: a blocking send can go on (MPI_Isend); one already
    nonblocking waits in its completion, which can come later (NPB BT's MPI_Isend + MPI_Wait was told
    to use MPI_Isend)."""
    if call.startswith(("MPI_Wait", "MPI_Test")):
        send = "complete the send later (its MPI_Wait after more of the computation)"
    else:
        send = "let the send go on (MPI_Isend, or MPI_Send below the eager limit)"
    return f"post the receive before the computation (MPI_Irecv early) or {send}, or {otherwise}"


def _crowded_first(advice: str) -> str:
    """Rebalancing advice where ranks took turns on the CPUs: the longer computation the advice
    would move may be a rank's turn waiting for a CPU, so the first step is another recording."""
    return ("record again with no more ranks than CPUs per host first: with more, each rank's "
            f"computation includes waiting for a CPU; then, if it remains, {advice}")


def _explained(r: dict[str, Any]) -> bool:
    """A delay well below the wait does not explain it: the late rank was itself held up before."""
    return bool(r["delay_ns"] > DELAY_EXPLAINS * r["wait_ns"] / r["instances"])


def _alone(r: dict[str, Any]) -> bool:
    """The late rank's computation before its call was work the waiting ones had none of: they computed
    under ALONE_SHARE of it before their waits (imbalance.done_alone's measure, per waiting call)."""
    cause = r.get("cause_compute_ns") or 0
    return bool(cause > 0 and cause - r["delay_ns"] < ALONE_SHARE * cause)


def _held_up_advice(rank: int, crowded: bool | None) -> str:
    # rebalancing moves computation, and rank `rank` did not compute longer: the delay is elsewhere
    advice = f"find what held rank {rank} up before (the critical path leads there) rather than rebalance"
    if crowded is False:  # each rank had a CPU: taking turns on them is not the cause
        return advice
    more = "here more ranks than CPUs shared a host" if crowded else "with more ranks than CPUs"
    return f"{advice}; {more}: waits like this can be the ranks taking turns on the CPUs"


def _start_up(r: dict[str, Any]) -> bool:
    """The late rank was still inside MPI_Init for most of the wait (wait_findings' start_up, per
    waiting call): the MPI's start-up held it, not the program."""
    return bool(r.get("start_up"))


def _cause_text(r: dict[str, Any]) -> str:
    late = f"rank {r['cause_rank']}"
    where = f"{r['cause_call']} at {short_site(r['cause_callsite'])}"
    if _start_up(r):
        return (f"{late} was still inside MPI_Init for {fmt_s(r['in_init_ns'] / 1e9)} of it (mean per waiting "
                f"call), then went on to {where}: the MPI's start-up, not the program's work")
    if _explained(r):
        # delay_ns is a mean per waiting call; the wait before it is their sum (put_pscw: "waited 20 ms
        # ..., 24 times; rank 0 computed 834 µs longer" read as 4 % explained, not all of it)
        each = " (mean per waiting call)" if r["instances"] > 1 else ""
        return f"{late} computed {fmt_s(r['delay_ns'] / 1e9)} longer{each} before {where}"
    return (f"{late} did not compute noticeably longer just before {where}: it was held up earlier "
            f"(see the critical path)")


def wait_findings(waits: pl.DataFrame, trace: str, ranks: int, hot: frozenset[int] = frozenset(),
                  crowded: bool | None = None) -> list[Finding]:
    """One finding per waiting call site and cause: who waited, where, for whom, and why. Waits for
    a hot spot (a master serving the others) are cured by spreading its work, not by rebalancing.
    `crowded`: more ranks than CPUs shared a host (None: not known)."""
    keys = ["pattern", "call", "callsite", "cause_rank", "cause_call", "cause_callsite", "start_up"]
    waits = waits.with_columns(pl.lit(0, pl.Int64).alias(c) for c in ("in_init_ns", "cause_compute_ns")
                               if c not in waits.columns)  # made-up waits may lack them
    # a wait most of which the late rank spent still inside MPI_Init is a finding of its own (the same
    # call site's later waits are the program's)
    start_up = (pl.col("in_init_ns") >= START_UP_EXPLAINS * pl.col("wait_ns")).fill_null(False).alias("start_up")
    groups = (waits.with_columns(start_up).group_by(keys).agg(pl.col("wait_ns").sum(), pl.len().alias("instances"),
                                       pl.col("rank").unique().sort().alias("ranks"), pl.col("delay_ns").mean(),
                                       pl.col("cause_from_callsite").drop_nulls().first(),
                                       pl.col("reorderable").mean().alias("reorderable"),
                                       pl.col("in_init_ns").mean(), pl.col("cause_compute_ns").mean())
              .with_columns(pl.col(c).cast(pl.Utf8) for c in ("pattern", "call", "callsite", "cause_call",
                                                              "cause_callsite", "cause_from_callsite")))
    out = []
    for r in groups.iter_rows(named=True):  # one row per call site and cause, not per event
        p, who = r["pattern"], fmt_ranks(r["ranks"])
        seconds = r["wait_ns"] / 1e9
        whom = {"late_broadcast": f"the root, rank {r['cause_rank']}",
                "early_reduce": f"rank {r['cause_rank']}, the first to contribute",
                "early_broadcast": f"rank {r['cause_rank']}, the last to receive",
                "late_receiver": f"rank {r['cause_rank']} to post its receive"}.get(p, f"rank {r['cause_rank']}")
        own_threads = p in POINT_TO_POINT_WAITS and r["ranks"] == [r["cause_rank"]]
        if own_threads:
            whom = f"another thread of rank {r['cause_rank']}"
        n = r["instances"]  # waiting calls: with several ranks waiting, more than the instances waited at
        often = f"{n:,} time{'s' if n != 1 else ''}" if len(r["ranks"]) == 1 else f"{n:,} waiting calls"
        text = (f"{who} waited {fmt_s(seconds)} in {r['call']} at {short_site(r['callsite'])} for {whom} "
                f"({LABEL[p]}, {often}); {_cause_text(r)}")
        evidence = {"pattern": p, "call": r["call"], "callsite": r["callsite"], "instances": r["instances"],
                    "cause_rank": r["cause_rank"], "cause_call": r["cause_call"],
                    "cause_callsite": r["cause_callsite"], "cause_from_callsite": r["cause_from_callsite"],
                    "delay_seconds_per_instance": r["delay_ns"] / 1e9, "start_up": bool(r["start_up"])}
        # a message that came first but is received after this rank's next send is most likely for a
        # later step: receiving it first is not the program's choice, so only the late sender's advice holds
        in_step_order = p == "late_sender_wrong_order" and r["reorderable"] < 0.5
        if in_step_order:
            text += ("; the message that came first is received only after this rank's next send or "
                     "collective, most likely for a later step")
        if _start_up(r):
            advice = START_UP_ADVICE
        elif own_threads:
            advice = OWN_THREADS_ADVICE
        elif r["cause_rank"] in hot and p in POINT_TO_POINT_WAITS:
            text += f"; rank {r['cause_rank']} is a hot spot that the others wait for"
            advice = HOT_SPOT_ADVICE
        elif (p in REBALANCE_ONLY or in_step_order) and not _explained(r):
            advice = _held_up_advice(r["cause_rank"], crowded)
        elif p == "wait_at_barrier" and not _explained(r):  # the barrier's other cure still holds
            advice = f"{_held_up_advice(r['cause_rank'], crowded)}; or drop the barrier if nothing depends on it"
        elif p == "late_receiver":  # the cure for the send's side holds; rebalancing only if the receiver computed
            later = _explained(r) and _rebalance(trace, ranks)
            advice = _late_receiver_advice(r["call"], later or _held_up_advice(r["cause_rank"], crowded))
            if crowded and later:
                advice = _crowded_first(advice)
        else:
            advice = _suggestion("late_sender" if in_step_order else p, trace, ranks)
            # no share of rows moves work one rank does alone before a collective all of them wait in
            if p in ("wait_at_nxn", "wait_at_fence", "wait_at_barrier") and _alone(r):
                advice = (f"share out the work rank {r['cause_rank']} does alone before {r['cause_call']} (the "
                          f"waiting ranks computed next to nothing meanwhile), or let them go on with work that "
                          f"does not need its result")
            if crowded and "mpiscope rebalance" in advice:
                advice = _crowded_first(advice)
        out.append(Finding(p, text, seconds, r["ranks"], advice, evidence))
    return out


def imbalance_finding(imb: Imbalance, trace: str, crowded: bool = False) -> Finding | None:
    """`crowded`: more ranks than CPUs shared a host, so a rank's computation includes its turns
    waiting for a CPU and the spread may be the scheduler's, not the program's."""
    if not imb.phases:
        return None
    tot = imb.totals()
    lost = tot["lost_seconds"]
    if lost <= 0 or tot["imbalance_pct"] < IMBALANCE_MIN_PCT:
        return None
    worst = max(imb.phases, key=lambda p: p.lost_ns)
    crit, n = tot["critical_rank"], len(imb.phases)
    comp = tot["compute_seconds"]
    mean = sum(comp) / len(comp)
    text = (f"the computation is unevenly spread over the ranks: over {n} phase{'s' if n != 1 else ''} "
            f"(cut at the collectives all ranks take part in) rank {crit} computed longest, {fmt_s(comp[crit])} "
            f"against a mean of {fmt_s(mean)} (imbalance {tot['imbalance_pct']:.1f} %); evening out every phase "
            f"would shorten the run by up to {fmt_s(lost)}; the worst is phase {worst.index} "
            f"(closed by {worst.closing_call}: imbalance {worst.imbalance_pct:.1f} %, rank {worst.critical_rank} "
            f"computed {fmt_s(max(worst.compute_ns) / 1e9)})")
    # a run of many phases (an iterative program's steps) is balanced by its steps as a whole: the worst
    # single step's shares are noise (LAMMPS: 8 of 240 rows to a rank that computed 3 times longer overall)
    phase = "all" if n > FEW_PHASES else worst.index
    suggestion = (f"give each rank work in proportion to its speed: mpiscope rebalance {trace} "
                  f"--shares ROWSx{imb.ranks} --phase {phase}")
    if done_alone([ns / 1e9 for ns in worst.compute_ns]):  # work one rank does alone: shares cannot move it
        suggestion = (f"share out the work rank {worst.critical_rank} does alone in phase {worst.index} (the others "
                      f"computed next to nothing meanwhile), or let the others go on with work that does not "
                      f"need its result")
    if crowded:
        suggestion = _crowded_first(suggestion)
    return Finding("imbalance", text, lost * imb.ranks, [crit], suggestion,
                   {"imbalance_pct": tot["imbalance_pct"], "critical_rank": crit, "worst_phase": worst.index,
                    "lost_seconds": lost})


# Traffic too small to matter on its own: a megabyte takes a millisecond at 1 GB/s, and a
# thousand messages about as long at a microsecond each. A rank below both is a hot spot (a
# finding) only where the others waited for it.
MIN_HOT_BYTES = 1 << 20
MIN_HOT_MESSAGES = 1000


def _heavy(h: HotSpot) -> bool:
    return h.value >= (MIN_HOT_BYTES if h.measure.startswith("bytes") else MIN_HOT_MESSAGES)


def hot_spot_findings(spots: list[HotSpot], caused_ns: dict[int, int], floor_s: float = 0.0) -> list[Finding]:
    out = []
    for rank in dict.fromkeys(h.rank for h in spots):
        mine = [h for h in spots if h.rank == rank]
        if not any(_heavy(h) for h in mine) and caused_ns.get(rank, 0) / 1e9 < max(floor_s, 1e-9):
            continue
        top = mine[0]
        what = top.measure.replace("_", " ")
        text = (f"rank {rank} is a hot spot: it handles {100 * top.share:.0f} % of all {what} "
                f"({top.value:,} of {top.total:,}, {top.ratio:.1f}× the mean of the ranks)")
        waited = caused_ns.get(rank, 0) / 1e9
        if waited > 0:
            text += f"; other ranks waited {fmt_s(waited)} for it"
        out.append(Finding("hot_spot", text, waited, [rank], HOT_SPOT_ADVICE,
                           {"measures": [h.to_json() for h in mine]}))
    return out


def _busy_cure(calls: Sequence[tuple[str, int]]) -> str:
    """What cuts the busy time of the call that took most of it: fewer, larger messages for
    point-to-point; fewer, combined collectives; communicators and windows made once (a run whose
    busy time was MPI_Comm_split at start-up was told to send fewer, larger messages: it sent none)."""
    top = calls[0][0].removesuffix("_c") if calls else ""
    if top in COMM_CREATE | WINDOW_NXN or top.startswith(("MPI_Comm_", "MPI_Intercomm_")):
        return "create communicators and windows once and reuse them (each creation agrees over all its ranks)"
    if top.startswith("MPI_Win_"):  # fences, locks, flushes: a program of one window was told to create it once
        return ("synchronise the windows less often: one fence or flush per step of transfers, not per transfer, "
                "and passive target (MPI_Win_lock_all, MPI_Win_flush) where not every rank need take part")
    if top in ONE_SIDED_PUTS + ONE_SIDED_GETS:
        return "move fewer, larger one-sided transfers (a derived datatype for strided data, not one call per piece)"
    if top in NXN | BROADCAST | REDUCE | BARRIER:
        return "call collectives less often and combine them (one reduction of several values, not several)"
    return "send fewer, larger messages"


def comm_bound_finding(times: pl.DataFrame, wait_ns: dict[int, int], trace: str, hosts: int = 0,
                       crowded: bool = False, unattributed: dict[str, int] | None = None,
                       busiest: Sequence[tuple[str, int]] = ()) -> Finding | None:
    """`unattributed`: time in MPI that waits for other ranks without a pattern naming it (polling,
    one-sided synchronisation: waitstates.unattributed_ns), by kind: not busy, and said so. `busiest`:
    the calls that took the busy time (waitstates.busy_calls), named with the advice that fits them."""
    app = int(times["app_ns"].sum())
    other = {k: v for k, v in (unattributed or {}).items() if v > 0}
    # time in MPI-IO is file I/O, said by its own finding: a run that writes much is not communication-bound
    busy = max(int(times["mpi_ns"].sum()) - sum(wait_ns.values()) - sum(other.values()) - _io_ns(times), 0)
    if app <= 0 or busy < COMM_BOUND_SHARE * app:
        return None
    text = (f"the ranks spend {100 * busy / app:.0f} % of their time in MPI without waiting for each other "
            f"({fmt_s(busy / 1e9)} of {fmt_s(app / 1e9)} summed over the ranks): the run is communication-bound")
    listed = [(c, ns) for c, ns in busiest if ns >= 0.05 * busy]
    named = [f"{c} ({fmt_s(ns / 1e9)})" for c, ns in listed]
    if sum(ns for _, ns in listed) > busy:  # a rank's threads in these calls at once: each counts its time
        total = sum(ns for _, ns in listed)
        named = [f"{c} ({100 * ns / total:.0f} % of their time, the threads of a rank in them at once)"
                 if k == 0 else f"{c} ({100 * ns / total:.0f} %)" for k, (c, ns) in enumerate(listed)]
    if named:
        text += ", mostly in " + (", ".join(named[:-1]) + " and " if len(named) > 1 else "") + named[-1]
    cure = _busy_cure(busiest)
    if other:
        text += ("; left out: " + " and ".join(f"{fmt_s(v / 1e9)} of {k}" for k, v in other.items())
                 + ", which waits for other ranks in ways this diagnosis does not attribute")
    if crowded:
        advice = ("record again with no more ranks than CPUs per host first: with more, their time in MPI "
                  f"includes waiting for a CPU; then {cure}")
    elif hosts == 1:  # no network between the ranks: their placement on one cannot help
        advice = f"{cure}; all ranks ran on one host, so placing them on a network will not help"
    else:
        advice = (f"place the ranks so that partners are close on a mesh or torus: mpiscope map --trace "
                  f"{trace} --network torus:XxYxZ; or {cure}")
    return Finding("communication_bound", text, busy / 1e9, times["rank"].to_list(), advice,
                   {"mpi_busy_pct": 100 * busy / app})


def _io_ns(times: pl.DataFrame) -> int:
    """Time in MPI-IO summed over the ranks (rank_times' io_ns; 0 in tables without it)."""
    return int(times["io_ns"].sum()) if "io_ns" in times.columns else 0


@dataclass(frozen=True)
class FileIo:
    """What a run's MPI-IO time went to (diagnose.file_io): the advice fits it."""
    longest: tuple[str, str, int] | None   # (call, call site, ns summed over the ranks) of the longest call site
    moving_share: float | None = None      # of the MPI-IO time, in reads and writes (the rest: open, close, sync...)
    read_share: float = 0.0                # of the reads' and writes' time, in reads
    collective_share: float = 0.0          # of the reads' and writes' time, in collective ones (_all, ordered)
    opens: int = 0                         # MPI_File_open calls
    accesses: int = 0                      # reads and writes


# A run's MPI-IO time by what it went to: (the way it moves data, what helps).
def _file_io_advice(io: FileIo) -> str:
    if io.moving_share is not None and io.moving_share < 0.5:  # opening, closing, syncing and resizing files
        if io.opens >= io.accesses:  # a file opened for each access
            return ("open each file once and keep it open rather than per access, and sync only where the data "
                    "must be on disk (an MPI_File_sync waits for the file system); the file system's metadata "
                    "server bounds the rest")
        return ("open, close and sync fewer files (write fewer, larger files: each open and close waits for the "
                "file system's metadata server), and sync only where the data must be on disk")
    verb, start = ("read", "MPI_File_iread_at_all") if io.read_share >= 0.5 else ("write", "MPI_File_iwrite_at_all")
    if io.collective_share >= 0.5:  # collective already: the MPI gathers the pieces
        return (f"{verb} less often or less, or start the {verb}s without waiting ({start}) and compute meanwhile; "
                f"the {verb}s are collective already (their aggregation is tuned by the MPI-IO hints cb_nodes and "
                f"cb_buffer_size); the file system's bandwidth bounds the rest")
    return (f"{verb} less often or less; {verb} collectively (the MPI_File_*_all calls let the MPI gather the ranks' "
            f"pieces into few large requests) or start the {verb}s without waiting ({start}) and compute "
            f"meanwhile; the file system's bandwidth bounds the rest")


def file_io_finding(times: pl.DataFrame, profile: FileIo | None) -> Finding | None:
    """Time in MPI-IO calls: file I/O, which a tracer that does not record them counts as computation;
    `profile`: what that time went to (reads or writes, collective or not, files opened), which the
    advice fits (a read-only program was told to write collectively)."""
    io, app = _io_ns(times), int(times["app_ns"].sum())
    if app <= 0 or io <= 0:
        return None
    profile = profile or FileIo(None)
    text = (f"the ranks spent {100 * io / app:.0f} % of their time in MPI-IO ({fmt_s(io / 1e9)} of "
            f"{fmt_s(app / 1e9)} summed over the ranks): file I/O, neither computation nor communication")
    advice = _file_io_advice(profile)
    if profile.longest:
        call, site, ns = profile.longest
        text += f"; the longest: {fmt_s(ns / 1e9)} in {call} at {short_site(site)}"
    if profile.moving_share is not None and profile.moving_share < 0.5:
        text += f"; {100 * (1 - profile.moving_share):.0f} % of it opening, closing, syncing or resizing files"
    # one rank doing the I/O of all (a writer rank) is a bottleneck of its own: said where one rank
    # spent at least twice its share
    top = times.sort("io_ns", "rank", descending=[True, False]).row(0, named=True)
    if times.height > 2 and top["io_ns"] * times.height >= 2 * io:
        text += f"; rank {top['rank']} alone {100 * top['io_ns'] / io:.0f} % of it"
        advice += (f"; spread the I/O over the ranks (each writes its part, collectively) rather than "
                   f"through rank {top['rank']}")
    ranks = times.filter(pl.col("io_ns") > 0)["rank"].to_list()
    return Finding("file_io", text, io / 1e9, ranks, advice, {"io_pct": 100 * io / app})


# What to do about time that waits for other ranks without a pattern naming whom (unattributed_ns' kinds)
UNATTRIBUTED_ADVICE = {
    "polling": "a polling loop that ends with a message received is its sender's wait; these loops ended "
               "otherwise (sends, nonblocking collectives such as MPI_Ibarrier or generalized requests "
               "completed, probes that found nothing)",
    "one-sided synchronisation": "post/start/complete/wait, lock, flush and unlock calls wait for the other "
                                 "side of their epoch (a flush or unlock for its target to carry out the "
                                 "operations), whom this diagnosis does not name",
}


def unattributed_finding(times: pl.DataFrame, unattributed: dict[str, int] | None, trace: str) -> Finding | None:
    """Time in polling calls and one-sided synchronisation that no pattern attributes, by kind, where
    no communication-bound finding names it: it waits for other ranks, and leaving it unsaid let a
    run that spends half its time so read as "no rank waited" (sweep: SNAP's sweeps)."""
    other = {k: v for k, v in (unattributed or {}).items() if v > 0}
    app = int(times["app_ns"].sum())
    total = sum(other.values())
    if app <= 0 or not total:
        return None
    kinds = " and ".join(f"{fmt_s(v / 1e9)} in {k}" for k, v in other.items())
    text = (f"the ranks spent {100 * total / app:.0f} % of their time waiting for other ranks in MPI calls "
            f"({kinds}, of {fmt_s(app / 1e9)} summed over the ranks) that this diagnosis does not attribute "
            f"to a late rank")
    advice = "; ".join(UNATTRIBUTED_ADVICE[k] for k in other) + \
        f": see on the time-line whom they waited for (mpiscope report {trace})"
    return Finding("unattributed_wait", text, total / 1e9, times["rank"].to_list(), advice,
                   {"unattributed_seconds": {k: v / 1e9 for k, v in other.items()}})


def oversubscribed_finding(times: pl.DataFrame, crowded: Sequence[Crowded]) -> Finding | None:
    """More ranks than CPUs on a host: each of its ranks had a CPU for at most cpus/ranks of
    its time, so the rest of that time (the finding's seconds) was spent waiting for one,
    and it is inside the waits and MPI times of every other finding."""
    if not crowded:
        return None
    app = dict(zip(times["rank"].to_list(), times["app_ns"].to_list()))
    lost = sum(app.get(r, 0) * max(0.0, 1 - c.cpus / c.runners) for c in crowded for r in c.ranks) / 1e9
    where = "; ".join(f"{len(c.ranks)} ranks" + (f" with {c.threads} threads in MPI" if c.threads else "")
                      + f" on the {c.cpus} CPU{'s' if c.cpus != 1 else ''} of host {c.host}"
                      + (f" (of its {c.cpus_online}: their affinity masks left out the others)"
                         if c.cpus < c.cpus_online else "") for c in crowded)
    # no application time (ranks killed in MPI_Init): no share of it to name. Each had its share of the
    # CPUs if all were ready to run throughout; other work on the host took more (LAMMPS: 5.7 % CPU use)
    share = (f", so about {fmt_s(lost)} of their time (summed over the ranks, at an equal share of the CPUs "
             f"each; more where other work ran on the host) went to waiting for a CPU, and that time is"
             if lost > 0 else ": the time they waited for one is")
    threads = any(c.threads for c in crowded)
    text = (f"more {'threads in MPI' if threads else 'ranks'} than CPUs: {where}. The "
            f"{'threads' if threads else 'ranks'} took turns on the CPUs{share} inside the "
            f"waits and MPI times of this diagnosis (an MPI that polls while it waits keeps a CPU busy)")
    most = min(c.cpus for c in crowded)
    advice = (f"run at most {most} rank{'s' if most != 1 else ''} per host (for instance mpiexec -n {most}), "
              f"or spread the ranks over more hosts, and record again")
    if threads:
        advice = (f"run fewer ranks, or fewer threads calling MPI, per host (at most {most} in all), or spread the "
                  f"ranks over more hosts, and record again")
    if any(c.cpus < c.cpus_online for c in crowded):
        advice = ("let the ranks use every CPU of their hosts (the launcher's binding options, taskset or the "
                  f"batch system's CPU request), or {advice}")
    ranks = sorted(r for c in crowded for r in c.ranks)
    return Finding("oversubscribed", text, lost, ranks, advice,
                   {"hosts": [{"host": c.host, "ranks": len(c.ranks), "cpus": c.cpus,
                               "cpus_online": c.cpus_online} for c in crowded]})


def build_findings(waits: pl.DataFrame, imb: Imbalance | None, spots: list[HotSpot], times: pl.DataFrame,
                   trace: str, hosts: int = 0, crowded: Sequence[Crowded] | None = None,
                   unattributed: dict[str, int] | None = None,
                   file_io: FileIo | None = None,
                   busiest: Sequence[tuple[str, int]] = ()) -> list[Finding]:
    """All findings, largest first; `hosts`: the run's hosts (0: not known); `crowded`: the
    hosts that ran more ranks than they had CPUs (trace/placement.py; None: not known);
    `busiest`: waitstates.busy_calls';
    `file_io`: file_io_finding's."""
    ranks = times.height
    wait_ns = dict(enumerate(waited_by_rank(waits, ranks).tolist()))
    # what others waited for a hot spot while it was still starting up (in MPI_Init) is not its load
    program = (pl.col("in_init_ns") < START_UP_EXPLAINS * pl.col("wait_ns")) if "in_init_ns" in waits.columns \
        else pl.lit(True)
    caused = (waits.filter(pl.col("pattern").cast(pl.Utf8).is_in(POINT_TO_POINT_WAITS) & program)
              .group_by("cause_rank").agg(pl.col("wait_ns").sum()))
    caused_ns = dict(zip(caused["cause_rank"].to_list(), caused["wait_ns"].to_list()))
    found = wait_findings(waits, trace, ranks, frozenset(h.rank for h in spots),
                          None if crowded is None else bool(crowded))
    bound = comm_bound_finding(times, wait_ns, trace, hosts, bool(crowded), unattributed, busiest)
    # the communication-bound finding names the unattributed time where it is made; else it is its own
    for extra in (imbalance_finding(imb, trace, bool(crowded)) if imb else None, bound,
                  None if bound else unattributed_finding(times, unattributed, trace),
                  file_io_finding(times, file_io)):
        if extra:
            found.append(extra)
    floor = MIN_SHARE * float(times["app_ns"].sum()) / 1e9
    found = [x for x in found if x.seconds >= floor] + hot_spot_findings(spots, caused_ns, floor)
    return sorted(found, key=lambda x: -x.seconds)
