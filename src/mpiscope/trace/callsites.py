"""Call-site addresses -> "function (file:line)", mpiP's per-call-site view.

Each rank saved /proc/self/maps (raw/rank-N.maps), so a return address gives
(module, offset) even with address-space randomisation; binutils' addr2line
turns that into a function and a line where the module has debug info.
Only distinct (module, offset) pairs are resolved, one addr2line run per
module.
"""

from __future__ import annotations

import functools
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import polars as pl

from mpiscope.trace import native

_MAPS_LINE = re.compile(r"^([0-9a-f]+)-([0-9a-f]+) \S+ ([0-9a-f]+) \S+ \d+\s+(/\S.*)$")


def _read_maps(path: Path) -> list[tuple[int, int, int, str]]:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return []
    out = []
    for line in text.splitlines():
        m = _MAPS_LINE.match(line)
        if m:
            out.append((int(m[1], 16), int(m[2], 16), int(m[3], 16), m[4].strip()))
    return out


def _elf_is_exec(path: str) -> bool:
    """ET_EXEC modules are linked at fixed addresses; shared objects and PIE are not."""
    try:
        with open(path, "rb") as f:
            head = f.read(18)
        return head[:4] == b"\x7fELF" and int.from_bytes(head[16:18], "little") == 2
    except OSError:
        return False


def _addr2line(module: str, offsets: list[int]) -> dict[int, tuple[str, str]]:
    tool = shutil.which("addr2line")
    if not tool or not Path(module).is_file():
        return {}
    # A return address points after the call; look up the call instruction.
    args = [tool, "-f", "-C", "-a", "-e", module] + [hex(max(o - 1, 0)) for o in offsets]
    try:
        out = subprocess.run(args, capture_output=True, text=True, timeout=120, check=False).stdout
    except (OSError, subprocess.TimeoutExpired):
        return {}
    lines = out.splitlines()
    result: dict[int, tuple[str, str]] = {}
    i = 0
    for off in offsets:
        if i + 2 >= len(lines):
            break
        func, where = lines[i + 1], lines[i + 2]
        result[off] = (func, where.split(" (discriminator")[0])
        i += 3
    return result


# nm's lines: "ADDRESS SIZE TYPE NAME" for symbols with a size; text symbols only (t, T, w, W, i).
_NM_LINE = re.compile(r"^([0-9a-f]+) ([0-9a-f]+) [tTwWi] (.+)$")


@functools.cache
def _functions(module: str) -> tuple[np.ndarray, np.ndarray, list[str]] | None:
    """The module's functions with their extents (start, end, name), from its symbol tables (the
    static one where the module has it, the dynamic one always); None without nm."""
    tool = shutil.which("nm")
    if not tool:
        return None
    found: dict[int, tuple[int, str]] = {}
    for table in ([], ["-D"]):
        try:
            out = subprocess.run([tool, *table, "-S", "-C", "--defined-only", module], capture_output=True,
                                 text=True, timeout=120, check=False).stdout
        except (OSError, subprocess.TimeoutExpired):
            continue
        for line in out.splitlines():
            m = _NM_LINE.match(line)
            if m and int(m[2], 16):
                found.setdefault(int(m[1], 16), (int(m[2], 16), m[3]))
    starts = np.array(sorted(found), dtype=np.int64)
    return starts, starts + np.array([found[a][0] for a in starts], dtype=np.int64), [found[a][1] for a in starts]


def _function_at(functions: tuple[np.ndarray, np.ndarray, list[str]], off: int) -> str | None:
    """The function whose extent holds the call instruction before return address `off`."""
    starts, ends, names = functions
    i = int(np.searchsorted(starts, off - 1, side="right")) - 1
    return names[i] if i >= 0 and off - 1 < ends[i] else None


_GFORTRAN_MODULE = re.compile(r"__(\w+?)_MOD_(\w+)")      # gfortran: __comm_MOD_exchange
_FLANG_NAME = re.compile(r"_Q((?:[MFP][a-z0-9_$]+)+)")      # LLVM flang: _QMcommPexchange
_FLANG_PART = re.compile(r"[MFP]([a-z0-9_$]+)")
_INTEL_MODULE = re.compile(r"([a-z0-9_$]+?)_mp_([a-z0-9_$]+)_")  # ifort/ifx: comm_mp_exchange_
_FORTRAN_SOURCE = re.compile(r"\.(f|for|ftn|f77|f90|f95|f03|f08|fpp)$", re.IGNORECASE)


def fortran_name(func: str, where: str) -> str:
    """A Fortran procedure as its source names it: the compilers' symbols for module procedures
    (gfortran's __MOD_, LLVM flang's _QM..P.., Intel's _mp_) as module::procedure, the trailing
    underscore of an external procedure dropped where the line is in a Fortran source file (a C
    function may end in one); anything else as it is."""
    if m := _GFORTRAN_MODULE.fullmatch(func):
        return f"{m[1]}::{m[2]}"
    if m := _FLANG_NAME.fullmatch(func):
        return "::".join(_FLANG_PART.findall(m[1]))
    if m := _INTEL_MODULE.fullmatch(func):
        return f"{m[1]}::{m[2]}"
    source = where.rsplit(":", 1)[0]
    if func.endswith("_") and not func.endswith("__") and _FORTRAN_SOURCE.search(source):
        return func[:-1]
    return func


_CYTHON_FUNCTION = re.compile(r"__pyx_(pw|pf|f)_(\d.*)")  # a Python-visible or a cdef function
_COMPILER_CLONE = re.compile(r"(\.(constprop|isra|part|cold|lto_priv)\.\d+)+$")  # GCC's copies


def cython_name(func: str) -> str | None:
    """The dotted Python name of a Cython-generated function (mpi4py, petsc4py, ...), or None:
    __pyx_pw_6mpi4py_3MPI_4Comm_71Recv is mpi4py.MPI.Comm.Recv. Each scope (module, class) is its
    length, its name and an underscore; a Python-visible function (pw, pf) is a counter and its
    name, a cdef one (f) its name."""
    m = _CYTHON_FUNCTION.fullmatch(_COMPILER_CLONE.sub("", func))
    return ".".join(found) if m and (found := _cython_parts(m[2], [], m[1] != "f")) else None


def _cython_parts(rest: str, scopes: list[str], counted: bool) -> list[str] | None:
    """The deepest reading of `rest` as scopes and a function: a counter can look like a scope's
    length (13Distgraphcomm_3Get_dist_neighbors_count: the class, then counter 3), so a reading
    that leaves no function is undone."""
    if (d := re.match(r"\d+", rest)) is not None:
        n, after = int(d[0]), rest[d.end():]
        if len(after) > n and after[n] == "_" and after[:n].isidentifier():
            deeper = _cython_parts(after[n + 1:], [*scopes, after[:n]], counted)
            if deeper:
                return deeper
    if not scopes:
        return None
    if counted:
        f = re.fullmatch(r"\d+([A-Za-z_]\w*)", rest)
        return [*scopes, f[1]] if f else None
    return [*scopes, rest] if rest.isidentifier() else None


def _label(module: str, off: int, func: str, where: str) -> str:
    name = Path(module).name
    if python := cython_name(func):
        # a Python program's call through a Cython binding: the binding's C source and line say
        # nothing to its user, the function's Python name does
        return python
    func = fortran_name(_COMPILER_CLONE.sub("", func), where)
    if where and not where.startswith("??"):
        return f"{func} ({Path(where.rsplit(':', 1)[0]).name}:{where.rsplit(':', 1)[1]})"
    if func and func != "??":
        return f"{func} ({name}+{off:#x})"
    return f"{name}+{off:#x}"


def _names(module: str, offs: list[int]) -> dict[int, str]:
    """Labels of the return addresses `offs` in `module`. Without line information addr2line names
    the nearest symbol before an address, however far: in a stripped library that is an exported
    function the call is not in (PETSc's VecMDot read as VecView_MPI, 0x23a4 past its 415 bytes;
    CP2K's calls as cblas_dgemv, 12 MB past it). There a function is named only where its extent
    in the symbol tables holds the call; else the module and offset are."""
    resolved = _addr2line(module, offs)
    out = {}
    for off in offs:
        func, where = resolved.get(off, ("??", "??:0"))
        if func != "??" and (not where or where.startswith("??")) and (functions := _functions(module)):
            func = _function_at(functions, off) or "??"
        out[off] = _label(module, off, func, where)
    return out


def resolve_callsites(trace_dir: Path, ranks: list[int], addrs: list[int]) -> list[str]:
    """Labels of distinct (rank, address) call sites."""
    located: dict[tuple[int, int], tuple[str, int]] = {}
    maps_of: dict[int, list[tuple[int, int, int, str]]] = {}
    for rank, addr in zip(ranks, addrs):
        if rank not in maps_of:
            maps_of[rank] = _read_maps(Path(trace_dir) / "raw" / f"rank-{rank:06d}.maps")
        for start, end, offset, path in maps_of[rank]:
            if start <= addr < end:
                located[(rank, addr)] = (path, addr if _elf_is_exec(path) else addr - start + offset)
                break
    by_module: dict[str, set[int]] = {}
    for module, rel in located.values():
        by_module.setdefault(module, set()).add(rel)
    names: dict[tuple[str, int], str] = {}
    for module, offs in by_module.items():
        names.update(((module, off), label) for off, label in _names(module, sorted(offs)).items())
    return [names[located[(r, a)]] if (r, a) in located else (f"{a:#x}" if a else "")
            for r, a in zip(ranks, addrs)]


def callsite_column(trace_dir: Path, rank: np.ndarray, addr: np.ndarray) -> pl.Series:
    """The `callsite` column: labels resolved once per distinct (rank, address)."""
    code, first = native.factorize(addr, rank)  # key (rank, address): a hash table, one pass, no sort
    labels = resolve_callsites(trace_dir, rank[first].tolist(), addr[first].tolist())
    return pl.Series("callsite", labels, dtype=pl.Categorical).gather(pl.Series(code.view(np.uint32)))
