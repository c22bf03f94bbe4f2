"""What a roofline chart shows, as data: roofs, ridge, ceilings, points, what-ifs.

The PNG (plot.py) and the interactive HTML (html.py) both draw this dict,
and it is the `--json` payload of `roofline plot`. Every point is checked
against the roof of the machine it is drawn on: one above it is kept, drawn
in its own style and listed in "errors" (a measurement error), never hidden.
"""

from __future__ import annotations

import math
from typing import Any

from mpiscope.roofline.bench import effective_machine
from mpiscope.roofline.model import ABOVE_TOLERANCE, CONVENTION, Machine, attainable, ridge

SCHEMA = "mpiscope.roofline/1"


def _bw_line(bw: float, peak: float, lo: float, hi: float) -> list[list[float]]:
    """2 B I from lo up to where it meets the peak (a straight line on log-log axes)."""
    knee = peak / (2.0 * bw)
    if knee <= lo:
        return [[lo, peak], [hi, peak]]
    return [[lo, 2.0 * bw * lo], [min(knee, hi), 2.0 * bw * min(knee, hi)]]


def chart_data(m: Machine, bench: dict[str, Any] | None, apps: list[dict[str, Any]]) -> dict[str, Any]:
    m, raised = effective_machine(m, (bench or {}).get("ceilings") or {})
    net = m.networks[0]
    r = ridge(m.peak_gflops, net.bw_gbps_per_direction)
    points: list[dict[str, Any]] = []
    for p in (bench or {}).get("points", []):
        points.append({"series": "benchmark", "label": f"benchmark, I = {p['intensity']:.3g}",
                       "intensity": p["intensity"], "gflops": p["gflops"]})
    what_ifs: list[dict[str, Any]] = []
    for a in apps:
        if a.get("intensity") is None:
            continue
        points.append({"series": "application", "label": a.get("label", "application"),
                       "intensity": a["intensity"], "gflops": a.get("gflops")})
        for w in a.get("what_ifs", []):
            what_ifs.append({"label": f"{a.get('label', 'application')}: communication x {w['comm_factor']:g}",
                             "from": [a["intensity"], a.get("gflops") or w["attainable_before_gflops"]],
                             "to": [w["intensity"], w["attainable_gflops"]]})
    errors = []
    for p in points:
        p["roof_gflops"] = attainable(m.peak_gflops, net.bw_gbps_per_direction, p["intensity"])
        p["above_roof"] = p["gflops"] is not None and p["gflops"] > p["roof_gflops"] * (1.0 + ABOVE_TOLERANCE)
        if p["above_roof"]:
            errors.append(f"{p['label']}: {p['gflops']:.3g} GF/s is above the roof {p['roof_gflops']:.3g} GF/s "
                          f"at I = {p['intensity']:.3g}: a measurement error (drawn as a red X)")
    xs = [p["intensity"] for p in points] + [w["to"][0] for w in what_ifs] + [r]
    xs += [m.peak_gflops / (2 * n.bw_gbps_per_direction) for n in m.networks]
    lo = 10 ** math.floor(math.log10(min(xs) / 3.0))
    hi = 10 ** math.ceil(math.log10(max(xs) * 3.0))
    ys = [p["gflops"] for p in points if p["gflops"]] + [c.value for c in m.ceilings if c.kind == "compute"]
    ys += [2.0 * net.bw_gbps_per_direction * lo]
    ylo = 10 ** math.floor(math.log10(min(ys + [m.peak_gflops]) / 2.0))
    yhi = 10 ** math.ceil(math.log10(max(ys + [m.peak_gflops]) * 2.0))
    lines = [{"kind": "roof", "label": f"peak {m.peak_gflops:.4g} GF/s", "xy": [[lo, m.peak_gflops], [hi, m.peak_gflops]]}]
    for i, n in enumerate(m.networks):
        lines.append({"kind": "roof" if i == 0 else "roof-alt",
                      "label": f"{n.label}: 2 x {n.bw_gbps_per_direction:.4g} GB/s x I",
                      "xy": _bw_line(n.bw_gbps_per_direction, m.peak_gflops, lo, hi)})
    for c in m.ceilings:
        xy = [[lo, c.value], [hi, c.value]] if c.kind == "compute" else \
            _bw_line(c.value, m.peak_gflops, lo, hi)
        unit = "GF/s" if c.kind == "compute" else "GB/s"
        lines.append({"kind": f"ceiling-{c.kind}", "label": f"{c.label} ({c.value:.4g} {unit})", "xy": xy,
                      "meaning": c.meaning})
    bc = (bench or {}).get("ceilings") or {}
    for key, roof_value, what in (("dgemm_gflops", m.peak_gflops, "GF/s, above the peak"),
                                  ("exchange_gbps_per_direction", net.bw_gbps_per_direction,
                                   "GB/s per direction, above the network roof")):
        if bc.get(key, 0.0) > roof_value:
            errors.append(f"the sweep's own ceiling {key} = {bc[key]:.4g} {what} {roof_value:.4g}: the roof is no "
                          f"upper bound (measured on a busier machine?)")
    if "dgemm_gflops" in bc:
        v = bc["dgemm_gflops"]
        lines.append({"kind": "ceiling-compute", "label": f"products alone, during the sweep ({v:.4g} GF/s)",
                      "xy": [[lo, v], [hi, v]], "meaning": "the benchmark on its own (004 §4.3 ceiling a)"})
    if "exchange_gbps_per_direction" in bc:
        v = bc["exchange_gbps_per_direction"]
        lines.append({"kind": "ceiling-bandwidth", "label": f"exchange alone, during the sweep ({v:.4g} GB/s)",
                      "xy": _bw_line(v, m.peak_gflops, lo, hi),
                      "meaning": "the benchmark's communication on its own (004 §4.3 ceiling b)"})
    return {"schema": SCHEMA, "command": "plot", "overlay": False, "convention": CONVENTION,
            "machine": {"name": m.name, "peak_gflops": m.peak_gflops, "nodes": m.nodes,
                        "shared_memory": m.shared_memory, "peak_note": m.peak_note,
                        "bw_gbps_per_direction": net.bw_gbps_per_direction, "network": net.label},
            "ridge": {"intensity": r, "gflops": m.peak_gflops},
            "ridges": [{"label": "ridge", "intensity": r, "gflops": m.peak_gflops}],
            "x_range": [lo, hi], "y_range": [ylo, yhi], "lines": lines, "points": points,
            "what_ifs": what_ifs, "errors": errors, "notes": [raised] if raised else []}


def overlay_data(machines: list[Machine]) -> dict[str, Any]:
    """Several systems' roofs on one chart, each with its first network (004 Fig. 5)."""
    knees = [ridge(m.peak_gflops, m.networks[0].bw_gbps_per_direction) for m in machines]
    ridges: list[dict[str, Any]] = [{"label": m.name, "intensity": k, "gflops": m.peak_gflops}
                                    for m, k in zip(machines, knees)]
    lo = 10 ** math.floor(math.log10(min(knees) / 30.0))
    hi = 10 ** math.ceil(math.log10(max(knees) * 30.0))
    peaks = [m.peak_gflops for m in machines]
    lines = []
    for m, k in zip(machines, knees):
        bw = m.networks[0].bw_gbps_per_direction
        lines.append({"kind": "system", "label": f"{m.name}: {m.peak_gflops:.4g} GF/s, 2 x {bw:.4g} GB/s x I",
                      "xy": [[lo, 2.0 * bw * lo], [k, m.peak_gflops], [hi, m.peak_gflops]]})
    ylo = 10 ** math.floor(math.log10(min(2.0 * m.networks[0].bw_gbps_per_direction * lo for m in machines)))
    return {"schema": SCHEMA, "command": "plot", "overlay": True, "convention": CONVENTION,
            "machine": {"name": ", ".join(m.name for m in machines), "peak_gflops": None, "nodes": None,
                        "shared_memory": False, "peak_note": "", "bw_gbps_per_direction": None, "network": ""},
            "ridge": ridges[0], "ridges": ridges, "x_range": [lo, hi],
            "y_range": [ylo, 10 ** math.ceil(math.log10(max(peaks) * 2.0))], "lines": lines, "points": [],
            "what_ifs": [], "errors": [], "notes": []}
