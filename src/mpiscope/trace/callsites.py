"""Call-site addresses -> "function (file:line)", mpiP's per-call-site view.

Each rank saved /proc/self/maps (raw/rank-N.maps), so a return address gives
(module, offset) even with address-space randomisation; binutils' addr2line
turns that into a function and a line where the module has debug info.
Only distinct (module, offset) pairs are resolved, one addr2line run per
module.
"""

from __future__ import annotations

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


def _label(module: str, off: int, func: str, where: str) -> str:
    name = Path(module).name
    if where and not where.startswith("??"):
        return f"{func} ({Path(where.rsplit(':', 1)[0]).name}:{where.rsplit(':', 1)[1]})"
    if func and func != "??":
        return f"{func} ({name}+{off:#x})"
    return f"{name}+{off:#x}"


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
        resolved = _addr2line(module, sorted(offs))
        for off in offs:
            func, where = resolved.get(off, ("??", "??:0"))
            names[(module, off)] = _label(module, off, func, where)
    return [names[located[(r, a)]] if (r, a) in located else (f"{a:#x}" if a else "")
            for r, a in zip(ranks, addrs)]


def callsite_column(trace_dir: Path, rank: np.ndarray, addr: np.ndarray) -> pl.Series:
    """The `callsite` column: labels resolved once per distinct (rank, address)."""
    code, first = native.factorize(addr, rank)  # key (rank, address): a hash table, one pass, no sort
    labels = resolve_callsites(trace_dir, rank[first].tolist(), addr[first].tolist())
    return pl.Series("callsite", labels, dtype=pl.Categorical).gather(pl.Series(code.view(np.uint32)))
