"""The record-filling code of each table entry, shared by the C and Fortran
wrappers: which arguments fill which record fields (see gen.py for the table
and the byte-expression grammar)."""

from __future__ import annotations

import re
from dataclasses import dataclass

SEQ_FAMILIES = {"coll", "nbc", "neighbor"}
# Isendrecv's completion status describes its receive half.
REQUEST_KIND = {"isend": "MSC_REQ_SEND", "irecv": "MSC_REQ_RECV", "imrecv": "MSC_REQ_RECV",
                "isendrecv": "MSC_REQ_SENDRECV"}
# The request kind of a nonblocking call that moves no message, by family (else a collective's).
FAMILY_REQUEST_KIND = {"rma": "MSC_REQ_RMA", "io": "MSC_REQ_OTHER"}


class TableError(Exception):
    pass


def parse_params(proto: str) -> list[tuple[str, str]]:
    """Split 'const void *buf, int count' into (declaration, name) pairs ('void': none)."""
    params: list[tuple[str, str]] = []
    if proto.strip() == "void":
        return params
    for decl in (p.strip() for p in proto.split(",")):
        if decl == "...":
            params.append((decl, ""))
            continue
        m = re.search(r"(\w+)\s*(\[\s*\])?$", decl)
        if not m:
            raise TableError(f"cannot find the argument name in '{decl}'")
        params.append((decl, m.group(1)))
    return params


def byte_expr(expr: str, call: str) -> str:
    expr = expr.replace(" ", "")
    forms = [
        (r"0", lambda m: "0"),
        (r"(\w+)\*(\w+)", lambda m: f"msc_bytes({m[1]}, {m[2]})"),
        (r"P\*(\w+)\*(\w+)", lambda m: f"(uint64_t)msc_npeers(c) * msc_bytes({m[1]}, {m[2]})"),
        (r"sum\((\w+)\)\*(\w+)", lambda m: f"msc_vbytes(c, {m[1]}, {m[2]})"),
        (r"mycount\((\w+)\)\*(\w+)", lambda m: f"msc_mybytes(c, {m[1]}, {m[2]})"),
        (r"wsum\((\w+),(\w+)\)", lambda m: f"msc_wbytes(c, {m[1]}, {m[2]})"),
        (r"\(P-1\)\*(\w+)\*(\w+)", lambda m: f"(uint64_t)msc_npeers_but_me(c) * msc_bytes({m[1]}, {m[2]})"),
        (r"others\((\w+)\)\*(\w+)", lambda m: f"msc_otherbytes(c, {m[1]}, {m[2]})"),
        (r"intra\*(\w+)\*(\w+)", lambda m: f"(msc_is_inter(c) ? 0 : msc_bytes({m[1]}, {m[2]}))"),
        (r"notfirst\*(\w+)\*(\w+)", lambda m: f"(msc_my_rank(c) > 0 ? msc_bytes({m[1]}, {m[2]}) : 0)"),
        (r"deg\*(\w+)\*(\w+)", lambda m: f"(uint64_t)msc_live_nbrs(c, msc_outdeg(c)) * msc_bytes({m[1]}, {m[2]})"),
        (r"degsum\((\w+)\)\*(\w+)", lambda m: f"msc_degvbytes(c, {m[1]}, {m[2]}, msc_outdeg(c))"),
        (r"degwsum\((\w+),(\w+)\)", lambda m: f"msc_degwbytes(c, {m[1]}, {m[2]}, msc_outdeg(c))"),
        (r"indeg\*(\w+)\*(\w+)", lambda m: f"(uint64_t)msc_live_nbrs(c, msc_indeg(c)) * msc_bytes({m[1]}, {m[2]})"),
        (r"indegsum\((\w+)\)\*(\w+)", lambda m: f"msc_degvbytes(c, {m[1]}, {m[2]}, msc_indeg(c))"),
        (r"indegwsum\((\w+),(\w+)\)", lambda m: f"msc_degwbytes(c, {m[1]}, {m[2]}, msc_indeg(c))"),
        (r"size\((\w+)\)", lambda m: f"msc_bytes(1, {m[1]})"),
        (r"(\w+)\*(\w+)\*(\w+)", lambda m: f"(uint64_t)({m[1]} > 0 ? {m[1]} : 0) * msc_bytes({m[2]}, {m[3]})"),
        (r"(\w+)", lambda m: f"(uint64_t)({m[1]})"),
    ]
    for pattern, emit in forms:
        m = re.fullmatch(pattern, expr)
        if m:
            return emit(m)
    raise TableError(f"{call}: cannot read byte expression '{expr}'")


def check_entry(entry: dict, names: set[str]) -> None:
    call = entry["name"]
    for key in ("comm", "win", "peer", "root", "tag", "request", "status", "flag", "message",
                "message_ref", "cancels", "request_of", "newcomm", "newwin", "recv_part", "recv_source", "recv_tag",
                "inplace"):
        if key in entry and entry[key] not in names:
            raise TableError(f"{call}: role {key} names '{entry[key]}', which is not an argument")


def inplace_buffer(entry: dict) -> str:
    """The argument that MPI_IN_PLACE goes in: the send buffer, but a scatter root's receive buffer."""
    return str(entry.get("inplace", "sendbuf"))


def conditional(entry: dict, call: str, key: str) -> str | None:
    """C expression of entry[key] ("bytes": what the call sends; "recv_bytes": what a collective
    receives), with KEY_root at the root and KEY_inplace where the in-place buffer (`inplace`,
    default sendbuf) is MPI_IN_PLACE, the latter first (an in-place root); None if the table
    gives no KEY. In an intercommunicator's root group the ranks that pass MPI_PROC_NULL as
    root take no part: 0."""
    if key not in entry:
        return None
    expr = byte_expr(entry[key], call)
    if f"{key}_root" in entry:
        expr = f"(msc_is_root(c, {entry['root']}) ? {byte_expr(entry[f'{key}_root'], call)} : {expr})"
    if f"{key}_inplace" in entry:
        expr = f"({inplace_buffer(entry)} == MPI_IN_PLACE ? {byte_expr(entry[f'{key}_inplace'], call)} : {expr})"
    if "root" in entry:
        expr = f"({entry['root']} == MPI_PROC_NULL ? 0 : {expr})"
    return expr


# The statement every emitter puts right after the PMPI call: the tick the
# call returned at, which `leave` stores.
LEFT = "uint64_t t_left = r ? msc_ticks() : 0;"


@dataclass
class Parts:
    """What a wrapper does around the PMPI call, independent of the binding:
    `pre` runs before it, `after` right after it (recording or not), `post`
    fills the record, `leave` closes it at `t_left` (LEFT). Statuses are bound by the emitter
    (C: substitute one for MPI_STATUS_IGNORE; Fortran: convert)."""
    call: str
    cid: str
    params: list[tuple[str, str]]
    args: list[str]
    pre: list[str]
    after: list[str]
    post: list[str]
    leave: str
    status: str | None   # the status argument, bound to the variable `st`


def parts(entry: dict, large: bool = False) -> Parts:
    """The pieces of the wrapper of a call, or of its MPI-4 large-count variant (NAME_c)."""
    call = entry["name"] + ("_c" if large else "")
    params = parse_params(entry["proto_c" if large else "proto"])
    names = {n for _, n in params}
    check_entry(entry, names)
    cid = "MSC_CALL_" + call[4:].upper()
    args = [n for _, n in params]
    family = entry["family"]
    handle = entry.get("comm") or entry.get("win")
    free = entry.get("free")
    deref = "*" if free else ""
    lookup = "msc_win_id" if "win" in entry and "comm" not in entry else "msc_comm_id"
    if free:
        # A handle being freed is not registered if unknown: a Fortran MPI_COMM_FREE unbinds it
        # before MPICH's binding calls the C MPI_Comm_free, which registered it anew.
        lookup = f"msc_{free}_known"
    sequenced = bool(handle) and (family in SEQ_FAMILIES or entry.get("create") in ("coll", "idup")
                                  or "newwin" in entry)
    pcoll = entry.get("persistent") == "coll"  # its starts are numbered collectives
    collective = family in SEQ_FAMILIES or pcoll

    pre: list[str] = []
    post: list[str] = []
    after: list[str] = []
    # A blocking point-to-point call writes the envelope it was asked for at entry: a rank killed
    # inside it (a deadlock ended by a time limit) still shows whom it was waiting for. The
    # communicator's id is looked up either way; this only does it before the call.
    at_entry = family == "p2p" and "peer" in entry and "request" not in entry and "flag" not in entry
    if handle:
        if sequenced or free or pcoll or "newcomm" in entry:
            # Communicator bookkeeping goes on while recording is paused, so
            # that ids and collective numbering stay consistent across ranks.
            pre.append(f"uint16_t c = msc_tracking ? {lookup}({deref}{handle}) : MSC_COMM_UNKNOWN;")
            if sequenced:
                pre.append("int32_t seq = msc_tracking ? msc_seq_next(c) : 0;")
                # known before the call: a rank stuck in a collective shows which one
                pre.append("if (r) { r->comm = c; r->tag = seq; }")
            if free:
                pre.append(f"if (msc_tracking) msc_{free}_forget(*{handle});")
        elif at_entry:
            pre.append(f"uint16_t c = r ? {lookup}({handle}) : MSC_COMM_UNKNOWN;")
        else:
            post.append(f"uint16_t c = {lookup}({handle});")
        if not sequenced and not at_entry:
            post.append("r->comm = c;")
    elif "message_ref" in entry or "cancels" in entry or "request_of" in entry:
        # The communicator comes from the message or request table.
        post.append("r->comm = c;")
    elif any(re.search(r"\b(P|sum|wsum|mycount|others|intra|notfirst|deg\w*|indeg\w*)\b", entry.get(k, ""))
             for k in ("bytes", "recv_bytes")):
        raise TableError(f"{call}: byte expression needs a communicator")
    status = entry.get("status") or entry.get("recv_part")
    if "message_ref" in entry:
        pre.append("uint16_t c = MSC_COMM_UNKNOWN;")
        pre.append(f"uint32_t mid = r ? msc_msg_lookup(*{entry['message_ref']}, &c) : 0;")
    # A call on a pending request: the record names it. A cancel is marked
    # while recording is paused too, since the completion may be recorded.
    acted_on = f"*{entry['cancels']}" if "cancels" in entry else entry.get("request_of")
    if acted_on:
        pre.append("struct msc_reqinfo ri = {.comm = MSC_COMM_UNKNOWN};")
        pre.append(f"if ({'msc_tracking' if 'cancels' in entry else 'r'}) msc_req_lookup({acted_on}, &ri);")
        pre.append("uint16_t c = ri.comm;")
    if "cancels" in entry:
        after.append("if (rc == MPI_SUCCESS) msc_req_cancel_asked(&ri);")

    # What the program asked for; a status, when it has the message, says what came.
    asked: list[str] = []
    if "peer" in entry:
        asked.append(f"r->peer = msc_world_rank(c, {entry['peer']});")
    if "root" in entry:
        post.append(f"r->peer = msc_world_root(c, {entry['root']});")
    if "tag" in entry:
        asked.append(f"r->tag = msc_tag({entry['tag']});")
    if "bytes" in entry:
        expr = conditional(entry, call, "bytes")
    rexpr = conditional(entry, call, "recv_bytes") if collective else None
    if "bytes" in entry and rexpr == expr:
        rexpr = None  # receives what it sends (an allreduce): the merge's default, no work here
    # Otherwise a receive's post-call work is on the critical path of the reply
    # it sends next, so the asked-for envelope is only worked out when no
    # status replaces it.
    if at_entry:
        known = ["r->comm = c;"] + asked + ([f"r->bytes = {expr};"] if "bytes" in entry else [])
        pre.append("if (r) {\n        " + "\n        ".join(known) + "\n    }")
        if "status" in entry:  # the status has the bytes that came; the count only bounds them
            post.append("if (rc == MPI_SUCCESS) msc_status_envelope(r, c, st);")
    elif "flag" in entry:
        post.append(f"if (rc != MPI_SUCCESS || !*{entry['flag']}) msc_no_message(r);")
        post.append("else msc_status_envelope(r, c, st);")
    elif "status" in entry:  # the status has the bytes that came; the count only bounds them
        post.append("if (rc == MPI_SUCCESS) msc_status_envelope(r, c, st);")
        failed = asked + ([f"r->bytes = {expr};"] if "bytes" in entry else [])
        post.append("else {\n            " + "\n            ".join(failed) + "\n        }")
    else:
        post.extend(asked)
    if "bytes" in entry and "status" not in entry and not at_entry:
        post.append(f"r->bytes = {expr};")
    if "message" in entry:
        cond = f"*{entry['flag']} && " if "flag" in entry else ""
        post.append(f"if (rc == MPI_SUCCESS && {cond}1) r->req = msc_msg_start(*{entry['message']}, c);")
    if "message_ref" in entry:
        if "request" in entry:  # Imrecv: the request takes the message's id
            post.append(f"r->req = rc == MPI_SUCCESS ? msc_req_start_id(*{entry['request']}, MSC_REQ_RECV, c, mid) : 0;")
        else:
            post.append("r->req = mid;")
    elif pcoll:
        # Registered while recording is paused too: every rank numbers its starts.
        root = f"msc_world_root(c, {entry['root']})" if "root" in entry else "MSC_PEER_NONE"
        sent = expr if "bytes" in entry else "0"
        after.append(f"if (msc_tracking && rc == MPI_SUCCESS) msc_req_persist_coll(*{entry['request']}, c, {root}, "
                     f"{sent}, {rexpr or sent}, {cid});")
    elif "persistent" in entry:
        kind = "MSC_REQ_PSEND" if entry["persistent"] == "send" else "MSC_REQ_PRECV"
        post.append(f"if (rc == MPI_SUCCESS) msc_req_persist(*{entry['request']}, {kind}, c, r->peer, r->tag, r->bytes);")
    elif "request" in entry:
        kind = REQUEST_KIND.get(entry.get("msg", ""), FAMILY_REQUEST_KIND.get(family, "MSC_REQ_COLL"))
        comm = "c" if handle else "MSC_COMM_UNKNOWN"  # a nonblocking file access has no communicator
        post.append(f"r->req = rc == MPI_SUCCESS ? msc_req_start(*{entry['request']}, {kind}, {comm}) : 0;")
        if kind == "MSC_REQ_SENDRECV":
            post.append(f"if (rc == MPI_SUCCESS) msc_req_asked(*{entry['request']}, msc_world_rank(c, "
                        f"{entry['recv_source']}), msc_tag({entry['recv_tag']}), "
                        f"{byte_expr(entry['recv_bytes'], call)});")
    if acted_on:
        post.append("r->req = ri.id;")

    leave = "msc_leave_at(r, t_left);"
    if rexpr:
        # A collective's received bytes go in a record of their own after its record
        # (the 48-byte record has no field to spare), and only where they differ from
        # what it sends: the merge reads a collective without one as receiving what it
        # sent (an allreduce, a barrier). Point-to-point wrappers are unchanged.
        post.append(f"uint64_t rb = {rexpr};")
        leave = ("struct msc_span sp = msc_leave_at(r, t_left);\n"
                 "        if (rb != r->bytes) msc_emit_recv_bytes(&sp, rb);")
    if "recv_part" in entry:
        leave = ("struct msc_span sp = msc_leave_at(r, t_left);\n"
                 "        if (rc == MPI_SUCCESS) msc_emit_recv(&sp, c, st);")
    if "newcomm" in entry:
        how = entry["create"]
        new = entry["newcomm"]
        if how == "inter":
            after.append(f"uint16_t nc = (msc_tracking && rc == MPI_SUCCESS) ? msc_intercomm_created({handle}, local_leader, peer_comm, remote_leader, tag, *{new}) : MSC_COMM_UNKNOWN;")
        elif how == "group":
            after.append(f"uint16_t nc = (msc_tracking && rc == MPI_SUCCESS) ? msc_comm_created_group(c, tag, *{new}) : MSC_COMM_UNKNOWN;")
        elif how == "idup":  # its record keeps the request id, not the new comm's
            after.append(f"if (msc_tracking && rc == MPI_SUCCESS) msc_comm_created(c, seq, *{new}, 1);")
        else:
            after.append(f"uint16_t nc = (msc_tracking && rc == MPI_SUCCESS) ? msc_comm_created(c, seq, *{new}, 0) : MSC_COMM_UNKNOWN;")
        if "request" not in entry:  # Comm_idup keeps its request id
            post.append("r->req = nc;")
    if "newwin" in entry:
        after.append(f"uint16_t nc = (msc_tracking && rc == MPI_SUCCESS) ? msc_win_created(c, seq, *{entry['newwin']}) : MSC_COMM_UNKNOWN;")
        post.append("r->req = nc;")

    return Parts(call, cid, params, args, pre, after, post, leave, status)


def outcome(entry: dict) -> list[str]:
    """After a call's record is complete: its error code where it failed, else, for a probe or test
    that found nothing, the note that folds polling loops into one record (issue 23). The C and the
    Fortran wrappers both end so (the Fortran ones did not: a failed Fortran send was a message, and a
    Fortran MPI_Iprobe loop left a record per call, 1.5 million for NPB's 2 ms wait)."""
    lines = ["if (MSC_UNLIKELY(rc != MPI_SUCCESS)) msc_emit_rc(r, rc);"]
    flag = entry.get("flag") or entry.get("polls")  # polls: a flag that is no message found (MPI_Parrived)
    if flag:
        lines.append(f"else if (!*{flag}) msc_poll_missed(r);")
    return lines
