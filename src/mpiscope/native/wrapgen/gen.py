"""Generate libmpiscope's wrappers from calls.toml.

usage: gen.py calls.toml OUTDIR

Writes OUTDIR/calls_gen.h (call ids), OUTDIR/wrappers_gen_K.c (one PMPI wrapper
per table entry without `hand = true`), OUTDIR/fortran_gen_K.c (their Fortran
entry points, fortran.py), K < SOURCES, and OUTDIR/calls.json (id -> name,
family, role: what the merge needs to interpret a record). Run by CMake; the
outputs are build products, never committed.

Byte expressions (`bytes`, `bytes_root`, `bytes_inplace`: what the call sends;
`recv_bytes`, `recv_bytes_root`, `recv_bytes_inplace`: what a collective
receives, or what an Isendrecv's receive half asks for):
    0 | ARG | N*T | P*N*T | (P-1)*N*T | sum(N)*T | others(N)*T | mycount(N)*T
    | wsum(N,TS) | intra*N*T | notfirst*N*T
    | deg*N*T | degsum(N)*T | degwsum(N,TS) | indeg*N*T | indegsum(N)*T
    | indegwsum(N,TS) | size(T)
N and TS are argument names (counts and datatypes), P is the number of peers
of the communicator (its size, or the remote size of an intercommunicator);
others(N) sums N over them but this rank, mycount(N) is this rank's N;
intra: 0 on an intercommunicator; notfirst: 0 at rank 0; deg and indeg are the
out- and in-degree of the attached topology (neighbours that are
MPI_PROC_NULL, at a non-periodic Cartesian border, neither send nor receive).
The *_root expressions hold at the root, *_inplace ones where the in-place
buffer (`inplace`, default sendbuf) is MPI_IN_PLACE. A collective without
`recv_bytes` receives what it sends.
"""

from __future__ import annotations

import json
import sys
import tomllib
from pathlib import Path

from fortran import fortran_wrappers
from parts import LEFT, SEQ_FAMILIES, TableError, outcome, parts

FIRST_TABLE_ID = 16
# Records that are not MPI calls: parts of one call split over several records.
SUB_RECORDS = {
    1: ("sub:recv", "recv_part"),      # receive half of a Sendrecv
    2: ("sub:complete", "complete"),   # one request finished inside Waitall/some, Testall/some
    3: ("sub:psend", "psend"),         # a persistent send started by Start/Startall
    4: ("sub:block", "tool"),          # the recorder switched buffer blocks
    5: ("sub:precv", "precv"),         # a persistent receive started by Start/Startall
    6: ("sub:pstart", "pstart"),       # any other request started by Start/Startall
    7: ("sub:immediate", "immediate"), # an earlier request was a shared, already complete object
    8: ("sub:pcoll", "pcoll"),         # a persistent collective started by Start/Startall: one instance
    9: ("sub:recv_bytes", "coll_recv"),  # bytes received by the collective (or pcoll start) before it,
                                         # where they differ from those it sent
    10: ("sub:rc", "rc"),              # the call before it failed: its return code (tag)
    11: ("sub:count", "count"),        # the poll before it stands for `bytes` unsuccessful calls in a row
                                       # (msc_poll_missed), `callsite` ticks inside them; its times are
                                       # those of the run's first two calls
}
STARTS = {"psend", "precv", "pstart", "pcoll"}
# Roles of the hand-written calls (the table gives no roles for them).
HAND_ROLES = {"MPI_Wait": "complete", "MPI_Test": "complete", "MPI_Waitany": "complete",
              "MPI_Testany": "complete"}



def role_of(entry: dict) -> str:
    """What a record of this call means to the merge."""
    if entry["name"] in HAND_ROLES:
        return HAND_ROLES[entry["name"]]
    if "msg" in entry:
        return entry["msg"]
    if "persistent" in entry:
        return "p" + entry["persistent"] + "_init"
    family = entry["family"]
    if family == "io":  # to the merge a file call is one call of this rank, as local ones are
        return "local"
    if family in SEQ_FAMILIES:
        return "coll"
    if "create" in entry:
        return "create"
    if "newwin" in entry:
        return "create_win"
    return family


def c_wrapper(entry: dict, large: bool = False) -> str:
    p = parts(entry, large)
    args, pre = list(p.args), list(p.pre)
    if p.status:
        pre.append(f"MPI_Status msc_st_; MPI_Status *st = (r && {p.status} == MPI_STATUS_IGNORE) ? &msc_st_ : {p.status};")
        args[args.index(p.status)] = "st"
    decls = ", ".join(d for d, _ in p.params) or "void"
    body = [f"MSC_API int {p.call}({decls})", "{",
            f"    struct msc_rec *r = msc_enter({p.cid}, __builtin_return_address(0));"]
    body += ["    " + line for line in pre]
    body.append(f"    int rc = P{p.call}({', '.join(args)});")
    body.append(f"    {LEFT}")
    body += ["    " + line for line in p.after]
    body.append("    if (r) {")
    body += ["        " + line for line in p.post]
    body.append("        " + p.leave)
    body += ["        " + line for line in outcome(entry)]
    body.append("    }")
    body.append("    return rc;")
    body.append("}")
    return "\n".join(body)


def load(path: Path) -> list[dict]:
    with path.open("rb") as f:
        table = tomllib.load(f)["call"]
    seen = set()
    for entry in table:
        for key in ("name", "family", "mpi", "proto"):
            if key not in entry:
                raise TableError(f"entry {entry.get('name', '?')} lacks '{key}'")
        if entry["name"] in seen:
            raise TableError(f"{entry['name']} appears twice")
        # a collective that sends data must say what it receives (the merge would take the same)
        if entry["family"] in SEQ_FAMILIES | {"pcoll"} and "bytes" in entry and "recv_bytes" not in entry:
            raise TableError(f"{entry['name']} gives bytes but no recv_bytes")
        seen.add(entry["name"])
    return table


def generate(table: list[dict], outdir: Path) -> None:
    head = "/* generated from calls.toml by gen.py; do not edit */\n"
    ids = ["#ifndef MSC_CALLS_GEN_H", "#define MSC_CALLS_GEN_H"]
    large = [dict(e, name=e["name"] + "_c", mpi="4.0") for e in table if "proto_c" in e]
    meta = [{"id": i, "name": n, "family": "tool", "role": role, "starts_request": role in STARTS}
            for i, (n, role) in SUB_RECORDS.items()]
    for i, (name, _) in SUB_RECORDS.items():
        ids.append(f"#define MSC_{name.replace('sub:', 'SUB_').upper()} {i}")
    for i, entry in enumerate(table + large, FIRST_TABLE_ID):
        ids.append(f"#define MSC_CALL_{entry['name'][4:].upper()} {i}")
        meta.append({"id": i, "name": entry["name"], "family": entry["family"], "role": role_of(entry),
                     "starts_request": "request" in entry})
    ids.append(f"#define MSC_NCALLS {FIRST_TABLE_ID + len(table) + len(large)}")
    ids.append("#endif")
    c_calls = [e for e in table if not e.get("hand")]
    # MPI-4 calls exist where the MPI has them (MSC_HAVE_MPI4, runtime.h); the
    # large-count ones only where mpi.h says MPI 4 (Open MPI 5 says 3.1 and has none).
    wrappers = ([("", c_wrapper(e)) for e in c_calls if e["mpi"] < "4"]
                + [("MSC_HAVE_MPI4", c_wrapper(e)) for e in c_calls if "4" <= e["mpi"] < "4.1"]
                + [("MPI_VERSION >= 4", c_wrapper(e, large=True)) for e in c_calls
                   if "proto_c" in e and e["mpi"] < "4.1"]
                + [("MSC_HAVE_MPI41", c_wrapper(e)) for e in c_calls if e["mpi"] >= "4.1"]  # with their large counts
                + [("MSC_HAVE_MPI41", c_wrapper(e, large=True)) for e in c_calls
                   if "proto_c" in e and e["mpi"] >= "4.1"])
    outdir.mkdir(parents=True, exist_ok=True)
    (outdir / "calls_gen.h").write_text(head + "\n".join(ids) + "\n")
    (outdir / "calls.json").write_text(json.dumps(meta, indent=1) + "\n")
    for k, share in enumerate(shares(wrappers)):
        (outdir / f"wrappers_gen_{k}.c").write_text(source(head, "runtime.h", share))
    for k, share in enumerate(shares(fortran_wrappers(table))):
        (outdir / f"fortran_gen_{k}.c").write_text(source(head, "fortran.h", share))


# Generated sources, each compiled on its own: the wrappers took 24 s as one file at -O2 and 72 s
# under ASan and UBSan, on one core while the other was idle.
SOURCES = 2


def shares(functions: list[tuple[str, str]]) -> list[list[tuple[str, str]]]:
    """SOURCES contiguous runs of (guard, code) of about equal length."""
    total = sum(len(code) for _, code in functions)
    out: list[list[tuple[str, str]]] = [[] for _ in range(SOURCES)]
    done = 0
    for guard, code in functions:
        out[min(SOURCES - 1, done * SOURCES // max(total, 1))].append((guard, code))
        done += len(code)
    return out


def source(head: str, header: str, functions: list[tuple[str, str]]) -> str:
    """One generated C file: its functions, each run under its guard's #if (none where "")."""
    lines = [head, f'#include "{header}"', ""]
    guard = ""
    for want, code in functions:
        if want != guard:
            lines += (["#endif"] if guard else []) + ([f"#if {want}"] if want else [])
            guard = want
        lines.append(code + "\n")
    lines += ["#endif"] if guard else []
    return "\n".join(lines) + "\n"


def main() -> int:
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    try:
        generate(load(Path(sys.argv[1])), Path(sys.argv[2]))
    except (TableError, KeyError, tomllib.TOMLDecodeError) as e:
        print(f"gen.py: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
