"""Fortran entry points (mpif.h / `use mpi`) for the table's calls.

An MPI's Fortran bindings may call the C PMPI_ functions directly (Open MPI's
do), so the C wrappers never see a Fortran program: its symbols are wrapped
too, in the four spellings compilers use (mpi_send, mpi_send_, mpi_send__,
MPI_SEND) and those of `use mpi_f08` (mpi_send_f08_; MPICH: mpi_send_f08ts_). Each entry converts the Fortran arguments to C values for the
record (handles through PMPI_*_f2c, statuses through PMPI_Status_f2c) and
calls the MPI's own Fortran PMPI routine, so Fortran sentinels (MPI_IN_PLACE,
MPI_BOTTOM, MPI_STATUS_IGNORE) keep their meaning. The record code is the C
wrapper's (parts.py). Calls written by hand in C are wrapped in
runtime/fortran.c; the MPI-4 large-count variants have no mpif.h binding.
"""

from __future__ import annotations

import re

from parts import LEFT, TableError, inplace_buffer, outcome, parts

HANDLES = {"MPI_Comm": "Comm", "MPI_Datatype": "Type", "MPI_Op": "Op", "MPI_Info": "Info",
           "MPI_Group": "Group", "MPI_Win": "Win", "MPI_Request": "Request", "MPI_Message": "Message",
           "MPI_File": "File"}
SPELLINGS = ["{l}", "{l}_", "{l}__", "{u}"]


def _kind(decl: str, name: str) -> tuple[str, str]:
    """(C type without the name, shape) of a parameter; shape is scalar/pointer/array."""
    t = " ".join(re.sub(rf"\b{name}\b", "", decl).split())
    if t.endswith("[]"):
        return t[:-2].strip(), "array"
    if t.endswith("*"):
        return t[:-1].strip(), "pointer"
    return t, "scalar"


def _fortran_param(decl: str, name: str) -> tuple[str, list[str], list[str]]:
    """Fortran declaration, C conversions before the call, refreshes after it."""
    ctype, shape = _kind(decl, name)
    base = ctype.replace("const ", "")
    f = f"{name}_f"
    if base == "void":
        return f"{ctype} *{f}", [f"{ctype} *{name} = {f};"], []
    if base in HANDLES and shape == "scalar":
        return f"MPI_Fint *{f}", [f"{base} {name} = PMPI_{HANDLES[base]}_f2c(*{f});"], []
    if base in HANDLES and shape == "pointer":  # in/out handle: value before, refreshed after
        conv = f"PMPI_{HANDLES[base]}_f2c(*{f})"
        return f"MPI_Fint *{f}", [f"{base} {name}_v = {conv};", f"{base} *{name} = &{name}_v;"], \
            [f"{name}_v = {conv};"]
    if base == "MPI_Datatype" and shape == "array":
        return f"const MPI_Fint *{f}", [f"const MPI_Datatype *{name} = msc_f2c_types({f}, c_types);"], []
    if base == "int" and shape == "scalar":
        return f"MPI_Fint *{f}", [f"int {name} = (int)*{f};"], []
    if base == "int" and shape == "pointer":  # an output (flag)
        return f"MPI_Fint *{f}", [f"int {name}_v = 0;", f"int *{name} = &{name}_v;"], [f"{name}_v = (int)*{f};"]
    if base == "int" and shape == "array":
        return f"const MPI_Fint *{f}", [f"const int *{name} = (const int *){f};"], []
    if base == "MPI_Aint" and shape == "scalar":
        return f"MPI_Aint *{f}", [f"MPI_Aint {name} = *{f};"], []
    if base == "MPI_Offset" and shape == "scalar":  # INTEGER(KIND=MPI_OFFSET_KIND)
        return f"MPI_Offset *{f}", [f"MPI_Offset {name} = *{f};"], []
    if base == "MPI_Offset" and shape == "pointer":  # an output (a file's size)
        return f"MPI_Offset *{f}", [f"MPI_Offset {name}_v = 0;", f"MPI_Offset *{name} = &{name}_v;"], \
            [f"{name}_v = *{f};"]
    if base == "MPI_Aint" and shape == "array":
        return f"const MPI_Aint *{f}", [f"const MPI_Aint *{name} = {f};"], []
    if base == "MPI_Status" and shape == "pointer":
        return f"MPI_Fint *{f}", [], []
    if base == "char" and shape == "pointer":  # a file name: its length comes after ierr (fortran_wrapper)
        return f"const char *{f}", [], []
    raise TableError(f"no Fortran mapping for parameter '{decl}'")


def fortran_wrapper(entry: dict) -> str:
    p = parts(entry)
    fparams, before, after = [], [], []
    needs_types = False
    for decl, name in p.params:
        fdecl, conv, refresh = _fortran_param(decl, name)
        if name == inplace_buffer(entry) and ("bytes_inplace" in entry or "recv_bytes_inplace" in entry):
            # Fortran's MPI_IN_PLACE is not C's; MPICH's mpi_x_f08ts_ pass a
            # descriptor, whose first member is the address.
            address = f"cdesc ? *(void *const *){name}_f : {name}_f"
            conv = [f"const void *{name} = msc_f_in_place({address}) ? MPI_IN_PLACE : {name}_f;"]
        fparams.append((fdecl, name))
        before += conv
        after += refresh
        needs_types |= "msc_f2c_types" in " ".join(conv)
    real_args = [f"{n}_f" for _, n in p.params]
    pre = list(p.pre)
    if p.status:
        # Fortran's MPI_STATUS_IGNORE is its own sentinel; supply a status to read the envelope from.
        pre.append(f"MPI_Fint msc_fst_[MPI_F_STATUS_SIZE]; MPI_Fint *st_f = (r && msc_f_status_ignored("
                   f"{p.status}_f)) ? msc_fst_ : {p.status}_f;")
        real_args[[n for _, n in p.params].index(p.status)] = "st_f"
        after.append("MPI_Status msc_st_; MPI_Status *st = &msc_st_;")
        after.append("if (r && rc == MPI_SUCCESS) PMPI_Status_f2c(st_f, st);")
    lower = p.call.lower()
    # A CHARACTER argument's length is passed hidden, after all the others (gfortran and Intel: a
    # size_t each, in the order of the arguments), and handed on to the MPI's routine as it came.
    lengths = [f"{n}_len" for d, n in p.params if _kind(d, n)[0].replace("const ", "") == "char"]
    sig = ", ".join(d for d, _ in fparams) + (", " if fparams else "") + "MPI_Fint *ierr" + \
        "".join(f", size_t {n}" for n in lengths)
    types = ", ".join(re.sub(r"\s*\*?\s*\w+_f$", " *", d).strip() for d, _ in fparams) + \
        (", " if fparams else "") + "MPI_Fint *" + ", size_t" * len(lengths)
    lines = [f"typedef void (*msc_fn_{lower})({types});",
             f"static void msc_f_{lower}(void *site, MSC_UNUSED int cdesc, msc_fn_{lower} real, {sig})", "{",
             f"    struct msc_rec *r = msc_enter({p.cid}, site);"]
    if needs_types:
        comm = entry.get("comm")
        lines.append(f"    int32_t c_types = r ? msc_f_peers(PMPI_Comm_f2c(*{comm}_f)) : 0;")
    # Not every converted argument is read by the record code.
    lines += ["    MSC_UNUSED " + x for x in before] + ["    " + x for x in pre]
    lines.append(f"    real({', '.join(real_args + ['ierr'] + lengths)});")
    lines.append("    " + LEFT)
    lines.append("    MSC_UNUSED int rc = *ierr;")
    lines += ["    " + x for x in after + p.after]
    lines.append("    if (r) {")
    lines += ["        " + x for x in p.post]
    lines.append("        " + p.leave)
    lines += ["        " + x for x in outcome(entry)]
    lines.append("    }")
    lines.append("}")
    argnames = ", ".join([f"{n}_f" for _, n in fparams] + ["ierr"] + lengths)
    for spelling in SPELLINGS:
        name = spelling.format(l=lower, u=p.call.upper())
        real = spelling.format(l="p" + lower, u="P" + p.call.upper())
        lines += [f"MSC_API void {name}({sig})", "{",
                  f"    static msc_fn_{lower} real;",
                  f"    if (!real) *(void **)&real = msc_fortran_symbol(\"{real}\");",
                  f"    msc_f_{lower}(__builtin_return_address(0), 0, real, {argnames});", "}"]
    # The `use mpi_f08` entry points: handles are derived types holding the
    # INTEGER handle, passed by reference as it is; ierror is OPTIONAL. MPICH
    # passes choice buffers as descriptors (TS 29113) to mpi_x_f08ts_; they
    # go to the MPI untouched.
    # A CHARACTER argument of theirs is no hidden-length string (bind(C) procedures): not wrapped.
    suffixes = [] if lengths else ["_f08_"] + (["_f08ts_"] if any(
        _kind(d, n)[0].replace("const ", "") == "void" for d, n in p.params) else [])
    for suffix in suffixes:
        lines += [f"MSC_API void {lower}{suffix}({sig})", "{",
                  f"    static msc_fn_{lower} real;",
                  f"    if (!real) *(void **)&real = msc_fortran_symbol(\"p{lower}{suffix}\");",
                  "    MPI_Fint msc_ierr_;",
                  "    if (!ierr) ierr = &msc_ierr_;",
                  f"    msc_f_{lower}(__builtin_return_address(0), {int(suffix == '_f08ts_')}, real, {argnames});",
                  "}"]
    return "\n".join(lines) + "\n"


def fortran_wrappers(table: list[dict]) -> list[tuple[str, str]]:
    """(guard, code) of each Fortran entry point's functions (gen.source writes them)."""
    wrapped = [e for e in table if (not e.get("hand") or e.get("fortran")) and e["mpi"] < "4"]
    return [("MSC_HAVE_FORTRAN", fortran_wrapper(e)) for e in wrapped]
