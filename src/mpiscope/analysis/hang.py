"""A run stopped while ranks were blocked in MPI (a time limit, Ctrl-C, the batch system): what each
was waiting for, and whether they waited for each other (a deadlock) or for a rank outside MPI.

The recorder writes a blocking call's envelope at entry and the merge keeps the time each rank was
stopped (manifest "ended_ns"), so a call that never returned says how long it waited and for whom:
a blocking send or receive for its peer (a receive from MPI_ANY_SOURCE for any rank of its
communicator), a collective for the ranks of its communicator that never entered it, a wait for the
peers of its rank's pending requests. Those ranks form a wait-for graph. A rank outside MPI when
stopped could still act; a blocked rank is released when all it waits for can act (any one, for a
receive from any source or a wait on one of several requests); the ranks never released are
deadlocked. Waiting for a rank whose peer is unknown never counts as a deadlock: the diagnosis says
less rather than something false.

Only calls blocked for HUNG_NS or more count: a run stopped by a time limit while it progressed has
ranks inside calls that were about to return.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from mpiscope.analysis.findings import Finding, fmt_ranks, fmt_s, short_site
from mpiscope.trace import FINALIZE_CALLS, Trace

HUNG_NS = 1_000_000_000

SENDS = frozenset({"MPI_Send", "MPI_Bsend", "MPI_Ssend", "MPI_Rsend", "MPI_Sendrecv", "MPI_Sendrecv_replace"})
RECEIVES = frozenset({"MPI_Recv", "MPI_Probe", "MPI_Mprobe"})
WAITS = frozenset({"MPI_Wait", "MPI_Waitall", "MPI_Waitany", "MPI_Waitsome"})


@dataclass
class Blocked:
    """The call a rank was stopped in, and the ranks it waited for."""
    rank: int
    call: str
    callsite: str
    waited_ns: int
    waits_for: list[int]     # empty: not known
    any_of: bool             # released by any one of waits_for, not only by all of them
    what: str                # for whom, in words ("a message from rank 0 (tag 7)")


def _base(call: str) -> str:
    return call[:-2] if call.endswith("_c") else call


def _comm_name(comm: int | None) -> str:
    return "MPI_COMM_WORLD" if comm == 0 else f"communicator {comm}"


def hang_finding(trace: Trace) -> Finding | None:
    """The finding on a run stopped while ranks were blocked for HUNG_NS or more, else None."""
    states = {int(r): s for r, s in (trace.manifest.get("rank_states") or {}).items()}
    ended = trace.stopped_ns
    if not ended or "MPI_Abort" in states.values():
        return None
    events = trace.events()
    stuck = (events.filter(pl.col("t_leave_ns").is_null() & pl.col("rank").is_in(list(ended)))
             .select("event", "rank", "thread", pl.col("call").cast(pl.Utf8), "t_enter_ns", "comm", "peer", "tag",
                     pl.col("callsite").cast(pl.Utf8), "coll_id").collect(engine="streaming"))
    stuck = stuck.filter(~pl.col("call").is_in(list(FINALIZE_CALLS)))
    stuck = stuck.with_columns((pl.col("rank").replace_strict(ended, return_dtype=pl.Int64)
                                - pl.col("t_enter_ns")).alias("waited_ns"))
    stuck = stuck.filter(pl.col("waited_ns") >= HUNG_NS).sort("rank", "t_enter_ns").unique("rank", keep="first",
                                                                                           maintain_order=True)
    if not stuck.height:
        return None
    members = {c: r for c, r in trace.comms().select("comm", "ranks").collect().iter_rows()}
    # one scan for every blocked wait's pending requests, one for the ranks that entered each
    # instance concerned (1,024 ranks blocked in a barrier: two scans, not 1,024)
    waiting = stuck.filter(pl.col("call").is_in(list(WAITS)))  # (the waits have no large-count forms)
    pending = (events.filter(pl.col("rank").is_in(waiting["rank"].implode()) & pl.col("request").is_not_null()
                             & pl.col("t_complete_ns").is_null() & pl.col("completed_by").is_null()
                             & pl.col("rc").is_null())
               .select("rank", "thread", "t_enter_ns", "peer", "comm", "coll_id").collect(engine="streaming"))
    instances = pl.concat([stuck["coll_id"], pending["coll_id"]]).drop_nulls().unique()
    entered = {c: set(r) for c, r in events.filter(pl.col("coll_id").is_in(instances.implode()))
               .group_by("coll_id").agg(pl.col("rank").unique()).collect(engine="streaming").iter_rows()}
    blocked = {row["rank"]: _blocked(row, pending, entered, members) for row in stuck.iter_rows(named=True)}
    # a rank inside MPI_Finalize has finished its communication, as one that returned from it
    finalizing = set(events.filter(pl.col("t_leave_ns").is_null() & pl.col("call").cast(pl.Utf8).is_in(
        list(FINALIZE_CALLS))).select("rank").collect(engine="streaming")["rank"].to_list())
    finished = {r for r, s in states.items() if s == "finished"} | finalizing
    outside = {r for r in ended if r not in blocked and r not in finished}  # it could still have acted
    stuck_ranks = _never_released(blocked, outside)
    return _finding(blocked, _cycle(blocked, stuck_ranks) if stuck_ranks else [], outside, finished, events, ended)


def _blocked(row: dict, pending_requests: pl.DataFrame, entered: dict[int, set[int]],
             members: dict[int, list[int]]) -> Blocked:
    """Whom the blocked call `row` waits for; pending_requests: the requests not completed of the
    blocked waits' ranks; entered: the ranks that entered each instance concerned."""
    rank, call, comm = row["rank"], _base(row["call"]), row["comm"]
    everyone = [r for r in (members.get(comm) or []) if r != rank]
    site, waited = row["callsite"] or "?", row["waited_ns"]
    if row["coll_id"] is not None:
        missing = [r for r in everyone if r not in entered.get(row["coll_id"], set())]
        what = (f"{fmt_ranks(missing)} of {_comm_name(comm)}, which never entered it" if missing
                else f"the ranks of {_comm_name(comm)}, which all entered it")
        return Blocked(rank, row["call"], site, waited, missing, False, what)
    if call in SENDS | RECEIVES:
        tag = f" (tag {row['tag']})" if row["tag"] is not None else ""
        if call in SENDS:
            return Blocked(rank, row["call"], site, waited, [row["peer"]] if row["peer"] is not None else [], False,
                           f"rank {row['peer']} to receive its message{tag}")
        if row["peer"] is not None:
            return Blocked(rank, row["call"], site, waited, [row["peer"]], False, f"a message from rank {row['peer']}{tag}")
        return Blocked(rank, row["call"], site, waited, everyone, True,
                       f"a message from any rank of {_comm_name(comm)}{tag}")
    if call in WAITS:
        pending = pending_requests.filter((pl.col("rank") == rank) & (pl.col("thread") == row["thread"])
                                          & (pl.col("t_enter_ns") < row["t_enter_ns"]))
        peers: set[int] = set()
        known = pending.height > 0
        for p in pending.iter_rows(named=True):
            if p["coll_id"] is not None:
                peers |= {r for r in (members.get(p["comm"]) or [])
                          if r not in entered.get(p["coll_id"], set()) and r != rank}
            elif p["peer"] is not None:
                peers.add(p["peer"])
            else:
                known = False  # MPI_ANY_SOURCE, a persistent request's start: whom is not recorded
        ranks = sorted(peers) if known else []
        what = (f"its {pending.height} pending request{'s' if pending.height != 1 else ''} with {fmt_ranks(ranks)}"
                if ranks else f"its {pending.height} pending requests" if pending.height else "a request")
        return Blocked(rank, row["call"], site, waited, ranks, True, what)
    return Blocked(rank, row["call"], site, waited, [], False, "")


def _never_released(blocked: dict[int, Blocked], outside: set[int]) -> list[int]:
    """The blocked ranks that nothing could release: a rank that can act (outside MPI, or released)
    releases those waiting for it (all of their ranks, or one of them); a rank that had finished
    releases no one."""
    free = set(outside)
    waiting = {r: b for r, b in blocked.items()}
    changed = True
    while changed:
        changed = False
        for r, b in list(waiting.items()):
            targets = set(b.waits_for)
            if not targets or (targets & free if b.any_of else targets <= free):
                free.add(r)
                del waiting[r]
                changed = True
    return sorted(waiting)


def _cycle(blocked: dict[int, Blocked], stuck: list[int]) -> list[int]:
    """One cycle of waiting among the ranks never released, told from a receive where there is one
    ([] where they only wait for ranks that had finished)."""
    inside = set(stuck)
    ring: list[int] = []
    for start in stuck:
        path, at = [], start
        while at is not None and at not in path:
            path.append(at)
            at = next((r for r in blocked[at].waits_for if r in inside), None)
        if at is not None:
            ring = path[path.index(at):]
            break
    if not ring:
        return []
    # told from a receive where there is one: its missing send is what to add
    first = next((i for i, r in enumerate(ring) if _base(blocked[r].call) in RECEIVES), 0)
    ring = ring[first:] + ring[:first]
    return ring + [ring[0]]


def _finding(blocked: dict[int, Blocked], cycle: list[int], outside: set[int],
             finished: set[int], events: pl.LazyFrame, ended: dict[int, int]) -> Finding:
    groups: dict[tuple[str, str, str], list[int]] = {}
    for r, b in sorted(blocked.items()):
        groups.setdefault((b.call, b.callsite, b.what), []).append(r)
    longest = max(b.waited_ns for b in blocked.values())
    said = "; ".join(f"{fmt_ranks(r)} waited {fmt_s(max(blocked[x].waited_ns for x in r) / 1e9)} in {call} at "
                     f"{short_site(site)}" + (f" for {what}" if what else "")
                     for (call, site, what), r in groups.items())
    evidence = {"blocked": [{"rank": b.rank, "call": b.call, "callsite": b.callsite, "waited_ns": b.waited_ns,
                             "waits_for": b.waits_for} for b in blocked.values()],
                "cycle": cycle, "outside_mpi": sorted(outside), "finished": sorted(finished)}
    if cycle:
        deadlocked = sorted(set(cycle))
        text = (f"deadlock: when the run was stopped, {fmt_ranks(deadlocked)} waited for each other "
                f"({' -> '.join(map(str, cycle))}): {said}")
        return Finding("deadlock", text, sum(blocked[r].waited_ns for r in deadlocked) / 1e9, deadlocked,
                       _deadlock_cure(blocked, cycle), evidence)
    waited_on = sorted({t for b in blocked.values() for t in b.waits_for} - set(blocked))
    tails = []
    for r in waited_on:
        if r in outside:
            last = (events.filter((pl.col("rank") == r) & pl.col("t_leave_ns").is_not_null())
                    .select(pl.col("call").cast(pl.Utf8), pl.col("callsite").cast(pl.Utf8), "t_leave_ns")
                    .sort("t_leave_ns").tail(1).collect())
            if last.height:
                gap = (ended[r] - last["t_leave_ns"][0]) / 1e9
                tails.append(f"rank {r} was outside MPI for the last {fmt_s(gap)}, since {last['call'][0]} at "
                             f"{short_site(last['callsite'][0])}")
    done = [r for r in waited_on if r in finished]
    if done:
        tails.append(f"{fmt_ranks(done)} had finished (MPI_Finalize)")
    text = f"the run was stopped while ranks were blocked in MPI: {said}" + (f"; {'; '.join(tails)}" if tails else "")
    cure = ("find what " + fmt_ranks([r for r in waited_on if r in outside]) + " did after its last MPI call: "
            "a loop that never ends or a hang outside MPI (a debugger's backtrace of that rank shows where)"
            if any(r in outside for r in waited_on) else
            "the ranks waited for calls that never came: check that every send has its receive (source, tag, "
            "communicator) and that every rank calls the same collectives in the same order")
    return Finding("hang", text, longest / 1e9, sorted(blocked), cure, evidence)


def _deadlock_cure(blocked: dict[int, Blocked], cycle: list[int]) -> str:
    """What to change, from the first wait of the cycle."""
    a, b = blocked[cycle[0]], blocked[cycle[1]]
    ca, cb = _base(a.call), _base(b.call)
    if ca in SENDS and cb in SENDS:
        return (f"ranks {a.rank} and {b.rank} both send before they receive: a message above the eager limit waits "
                f"for its receive. Use MPI_Sendrecv, or post MPI_Irecv before the send")
    if ca in WAITS:
        return (f"rank {b.rank} went on to {b.call} at {short_site(b.callsite)} without the send or receive that "
                f"rank {a.rank}'s pending requests in {a.call} at {short_site(a.callsite)} need: add it on rank "
                f"{b.rank}, or make the requests' peers and tags those of messages that come")
    if ca in RECEIVES:
        return (f"rank {b.rank} never sent what rank {a.rank} receives in {a.call} at {short_site(a.callsite)}: "
                f"rank {b.rank} went on to {b.call} at {short_site(b.callsite)}. Add the send on rank {b.rank}, or "
                f"make the receive's source and tag those of a message sent")
    return (f"rank {b.rank} never called what rank {a.rank} waits for in {a.call} at {short_site(a.callsite)}: "
            f"it waits in {b.call} at {short_site(b.callsite)}. Every rank of a communicator must call its "
            f"collectives in the same order, and every receive needs its send")
