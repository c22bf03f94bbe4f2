"""The merged tables: their columns are public (README, section "Trace tables").

Rename a column only with a SCHEMA bump. Times are ns on rank 0's clock
(CLOCK_MONOTONIC of rank 0's host), ranks are world ranks.
"""

from __future__ import annotations

SCHEMA = "mpiscope.trace/5"  # 2: events' and collectives' recv_bytes; 3: events' count, inside_ns, rc;
# 4: the same columns, stored with times as offsets (storage.py), events and messages possibly datasets;
# 5: the same columns, events' entries stored as gaps, messages' and collectives' times derived from
# the events, strings without the Arrow schema (storage.py)

EVENTS = {
    "event": "row id, in (rank, t_enter_ns) order",
    "rank": "world rank",
    "thread": "thread index within the rank (0 = first thread that called MPI)",
    "call": "MPI function, e.g. MPI_Isend",
    "t_enter_ns": "entry time",
    "t_leave_ns": "exit time",
    "comm": "communicator (or window) id, 0 = MPI_COMM_WORLD; see comms.parquet",
    "peer": "peer as world rank (destination, source, RMA target); null if none or MPI_ANY_SOURCE",
    "tag": "tag; null if none or MPI_ANY_TAG",
    "bytes": "bytes: of the message for point-to-point (a nonblocking receive: of its buffer, as posted; "
    "its completion's row and messages.parquet have the message's); sent by this rank for collectives",
    "recv_bytes": "collectives (and *_init calls of persistent ones): bytes this rank received, as the MPI "
    "standard defines its receive buffer; null for other calls and in traces recorded before format 4",
    "root": "root as world rank for rooted collectives",
    "request": "request id tying a nonblocking start to its completion (rank-local)",
    "t_complete_ns": "for nonblocking starts: exit time of the call that completed the request (an MPI_Startall "
    "whose requests several calls completed: the last of them, and no completed_by)",
    "completed_by": "for nonblocking starts: event id of that call",
    "coll_id": "collective instance (collectives.parquet) of a collective call",
    "callsite": "caller of the MPI function: function (file:line), or module+offset",
    "count": "calls the row stands for: 1, or the unsuccessful calls of a polling loop (MPI_Test, MPI_Testany, "
    "MPI_Testsome, MPI_Testall, MPI_Iprobe, MPI_Improbe, MPI_Parrived from one call site in a row) folded into one row that "
    "spans from the first entry to the last exit",
    "inside_ns": "for a folded polling loop: the time spent inside its calls; null for other rows "
    "(t_leave_ns - t_enter_ns)",
    "rc": "the error code the call returned; null on success. A call that failed is no message and no part "
    "of a collective instance",
}

MESSAGES = {
    "src": "sender (world rank)", "dst": "receiver (world rank)", "tag": "tag",
    "comm": "communicator id", "bytes": "bytes sent",
    "t_send_enter_ns": "send call entered", "t_send_leave_ns": "send completed (blocking send exit, "
    "or exit of the Wait/Test that completed a nonblocking send)",
    "t_recv_enter_ns": "receive posted (Recv/Irecv/Mprobe entry)",
    "t_recv_leave_ns": "exit of the call that delivered the message",
    "send_event": "event id of the send", "recv_event": "event id of the receive",
}

COLLECTIVES = {
    "coll_id": "instance id", "call": "MPI function", "comm": "communicator id",
    "root": "root (world rank), null if none", "bytes": "bytes sent, summed over ranks",
    "recv_bytes": "bytes received, summed over ranks (null in traces recorded before format 4)",
    "ranks": "ranks seen in this instance", "comm_size": "ranks of the communicator",
    "t_first_enter_ns": "first rank entered", "t_last_enter_ns": "last rank entered",
    "t_first_leave_ns": "first rank left (completed)", "t_last_leave_ns": "last rank left (completed)",
}

# Roles (calls.json) by what they mean for matching.
SEND_ROLES = ("send", "isend")          # a call that posts a message (Sendrecv: its send half)
RECV_ROLES = ("recv",)                  # blocking receive, envelope from its status
COMPLETE_ROLES = ("complete",)          # Wait/Test/Waitany/Testany and sub:complete
