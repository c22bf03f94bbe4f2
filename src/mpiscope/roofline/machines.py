"""Machine descriptions: small TOML files, the paper's five systems shipped in `machines/`.

A file holds the peak per node and one `[[network]]` table per bandwidth
level (the first is the roof used for verdicts), optional `[[ceiling]]`
tables (measured lines under the roofs, 004 §4.3) and the paper's printed
ridge points, so that `systems` can set them beside the computed ones.
"""

from __future__ import annotations

import math
import tomllib
from importlib import resources
from pathlib import Path
from typing import Any

import tomli_w

from mpiscope.errors import UsageError
from mpiscope.roofline.model import Ceiling, Machine, Network, ridge

SCHEMA = "mpiscope.machine/1"


def builtin_dir() -> Path:
    return Path(str(resources.files("mpiscope.roofline") / "machines"))


def builtin_names() -> list[str]:
    return sorted(p.stem for p in builtin_dir().glob("*.toml"))


def builtin(key: str) -> Machine:
    path = builtin_dir() / f"{key.lower()}.toml"
    if not path.is_file():
        raise UsageError(f"no built-in system '{key}'; choose one of {', '.join(builtin_names())} "
                         f"or give your own file with --machine FILE")
    return load_machine(path)


def load_machine(path: Path) -> Machine:
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise UsageError(f"machine file {path} not found; run mpiscope roofline measure or give an existing "
                         f"file (mpiscope roofline systems lists the built-in ones)") from None
    except (OSError, UnicodeDecodeError) as e:
        raise UsageError(f"cannot read machine file {path} ({e}); check its permissions") from e
    except tomllib.TOMLDecodeError as e:
        raise UsageError(f"machine file {path} is not valid TOML ({e}); fix that line") from e
    return parse_machine(data, str(path))


def _number(table: dict[str, Any], key: str, where: str, example: str, positive: bool = True) -> float:
    if key not in table:
        raise UsageError(f"{where} has no {key}; add a line `{key} = {example}`")
    value = table[key]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise UsageError(f"{where}: {key} = {value!r} is not a number; write it as `{key} = {example}`")
    if positive and value <= 0:
        raise UsageError(f"{where}: {key} is {value}, but it must be greater than 0; give the real value "
                         f"(`{key} = {example}`)")
    return float(value)


def _optional(table: dict[str, Any], key: str, where: str) -> float | None:
    return _number(table, key, where, "1.0") if key in table else None


def parse_machine(data: dict[str, Any], where: str) -> Machine:
    if not isinstance(data.get("name"), str) or not data["name"].strip():
        raise UsageError(f"machine file {where} has no name; add a line `name = \"my cluster\"`")
    peak = _number(data, "peak_gflops", f"machine file {where}", "236.0  # GF/s per node")
    nets = data.get("network")
    if not isinstance(nets, list) or not nets:
        raise UsageError(f"machine file {where} has no [[network]] table; add one with "
                         f"`bw_gbps_per_direction = 5.0` (GB/s per direction per node)")
    networks = []
    for i, n in enumerate(nets):
        label = str(n.get("label", f"network {i + 1}"))
        w = f"machine file {where}, network '{label}'"
        networks.append(Network(
            label=label,
            bw_gbps_per_direction=_number(n, "bw_gbps_per_direction", w, "5.0  # GB/s per direction"),
            ports=int(_number(n, "ports", w, "1")) if "ports" in n else 1,
            ridge_paper=_optional(n, "ridge_paper", w), ridge_paper_text=_optional(n, "ridge_paper_text", w),
            derivable=bool(n.get("derivable", True)), note=str(n.get("note", ""))))
    ceilings = []
    for i, c in enumerate(data.get("ceiling", [])):
        label = str(c.get("label", f"ceiling {i + 1}"))
        w = f"machine file {where}, ceiling '{label}'"
        kind = c.get("kind")
        if kind not in ("compute", "bandwidth"):
            raise UsageError(f"{w}: kind = {kind!r}; write kind = \"compute\" (with gflops) or "
                             f"kind = \"bandwidth\" (with bw_gbps_per_direction)")
        key = "gflops" if kind == "compute" else "bw_gbps_per_direction"
        ceilings.append(Ceiling(kind, label, _number(c, key, w, "1.0"), str(c.get("meaning", ""))))
    nodes = data.get("nodes")
    return Machine(
        name=data["name"], peak_gflops=peak, networks=tuple(networks), ceilings=tuple(ceilings),
        topology=str(data.get("topology", "")), nodes=int(nodes) if isinstance(nodes, int) else None,
        notes=str(data.get("notes", "")), peak_note=str(data.get("peak_note", "")),
        source=str(data.get("source", "")), shared_memory=bool(data.get("shared_memory", False)),
        measured=dict(data.get("measured", {})))


def machine_to_toml(m: Machine) -> bytes:
    doc: dict[str, Any] = {"schema": SCHEMA, "name": m.name, "peak_gflops": m.peak_gflops}
    for key in ("peak_note", "topology", "source", "notes"):
        if getattr(m, key):
            doc[key] = getattr(m, key)
    if m.nodes is not None:
        doc["nodes"] = m.nodes
    doc["shared_memory"] = m.shared_memory
    doc["network"] = [{k: v for k, v in {
        "label": n.label, "bw_gbps_per_direction": n.bw_gbps_per_direction, "ports": n.ports,
        "ridge_paper": n.ridge_paper, "note": n.note}.items() if v not in (None, "")} for n in m.networks]
    if m.ceilings:
        doc["ceiling"] = [{"kind": c.kind, "label": c.label,
                           ("gflops" if c.kind == "compute" else "bw_gbps_per_direction"): c.value,
                           "meaning": c.meaning} for c in m.ceilings]
    if m.measured:
        doc["measured"] = m.measured
    header = f"# {m.name}: written by mpiscope roofline measure ({SCHEMA}); edit freely.\n"
    return (header + tomli_w.dumps(doc)).encode()


def rounds_to(value: float, printed: float) -> bool:
    """Whether `value` rounds to `printed` at the precision it was printed with (6.55 is not 6.4)."""
    decimals = len(repr(printed).split(".")[1].rstrip("0")) if "." in repr(printed) else 0
    return abs(value - printed) <= 0.5 * 10.0 ** -decimals + 1e-9


def system_rows(machines: list[tuple[str, Machine]]) -> list[dict[str, Any]]:
    """One row per (system, network level): computed ridge beside the paper's, inconsistencies flagged."""
    rows = []
    for key, m in machines:
        for n in m.networks:
            r = ridge(m.peak_gflops, n.bw_gbps_per_direction)
            flags = []
            deviation = None
            if n.ridge_paper is not None:
                deviation = (r - n.ridge_paper) / n.ridge_paper
                if not n.derivable:
                    flags.append(f"printed {n.ridge_paper:g} is not derivable from the printed bandwidths "
                                 f"(computed {r:.3g})")
                elif not rounds_to(r, n.ridge_paper):
                    flags.append(f"computed {r:.3g} does not round to the printed {n.ridge_paper:g} "
                                 f"({100 * deviation:+.1f} %)")
            if n.ridge_paper_text is not None and not rounds_to(r, n.ridge_paper_text):
                flags.append(f"the paper's text prints {n.ridge_paper_text:g}, its table "
                             f"{n.ridge_paper if n.ridge_paper is not None else '-'}, computed {r:.3g}")
            rows.append({
                "key": key, "system": m.name, "network": n.label, "name": f"{m.name} ({n.label})",
                "peak_gflops": m.peak_gflops, "bw_gbps_per_direction": n.bw_gbps_per_direction,
                "ports": n.ports, "ridge": r, "ridge_paper": n.ridge_paper,
                "ridge_paper_text": n.ridge_paper_text, "ridge_deviation": deviation,
                "inconsistent": bool(flags), "flags": flags, "note": n.note,
                "topology": m.topology, "nodes": m.nodes})
    return rows
