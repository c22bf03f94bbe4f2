"""The roofline as a log-log PNG (matplotlib, no display needed), drawn from chart.chart_data()."""

from __future__ import annotations

import io
import textwrap
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

# kind -> (colour, line width, line style); ceilings take the next colour of their CYCLE
STYLE: dict[str, tuple[str, float, str]] = {
    "roof": ("black", 2.2, "-"),
    "roof-alt": ("0.35", 1.4, "-."),
    "ceiling-compute": ("tab:green", 1.3, "--"),
    "ceiling-bandwidth": ("tab:blue", 1.3, ":"),
    "system": ("tab:blue", 2.0, "-"),
}
CYCLE = {"roof-alt": ["0.35", "tab:red", "tab:olive", "tab:gray"],
         "system": ["tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple", "tab:brown", "tab:gray"],
         "ceiling-bandwidth": ["tab:blue", "tab:cyan", "tab:brown", "tab:pink"],
         "ceiling-compute": ["tab:green", "tab:olive", "darkgreen"]}


def render_png(d: dict[str, Any]) -> bytes:
    fig, ax = plt.subplots(figsize=(8.5, 6.0), dpi=110)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(*d["x_range"])
    ax.set_ylim(*d["y_range"])
    used = {k: 0 for k in CYCLE}
    for line in d["lines"]:
        xs, ys = zip(*line["xy"])
        kind = line["kind"]
        color, width, style = STYLE[kind]
        if kind in CYCLE:
            color, used[kind] = CYCLE[kind][used[kind] % len(CYCLE[kind])], used[kind] + 1
        ax.plot(xs, ys, label=line["label"], color=color, lw=width, ls=style)
    for r in d["ridges"]:
        ax.axvline(r["intensity"], color="0.6", lw=0.8, ls="--")
        ax.annotate(f"ridge I = {r['intensity']:.3g}", (r["intensity"], r["gflops"]), textcoords="offset points",
                    xytext=(6, -16), fontsize=9, color="0.3")
    ok = [p for p in d["points"] if not p["above_roof"] and p["gflops"]]
    bad = [p for p in d["points"] if p["above_roof"]]
    bench = [p for p in ok if p["series"] == "benchmark"]
    if bench:
        ax.scatter([p["intensity"] for p in bench], [p["gflops"] for p in bench], s=36, color="tab:orange",
                   edgecolor="black", zorder=5, label="benchmark (004 §4.2)")
    for p in ok:
        if p["series"] == "application":
            ax.scatter([p["intensity"]], [p["gflops"]], marker="*", s=160, color="tab:purple", edgecolor="black",
                       zorder=6)
            ax.annotate(p["label"], (p["intensity"], p["gflops"]), textcoords="offset points", xytext=(9, -14),
                        fontsize=9, color="tab:purple")
    for p in bad:
        ax.scatter([p["intensity"]], [p["gflops"]], marker="X", s=90, color="red", zorder=7)
        ax.annotate("above the roof:\nmeasurement error", (p["intensity"], p["gflops"]), textcoords="offset points",
                    xytext=(8, 6), fontsize=8, color="red")
    for w in d["what_ifs"]:
        ax.annotate("", xy=w["to"], xytext=w["from"], arrowprops={"arrowstyle": "->", "color": "tab:purple"})
        ax.scatter([w["to"][0]], [w["to"][1]], s=60, facecolor="none", edgecolor="tab:purple", zorder=6)
        ax.annotate(f"{w['label']}\nI = {w['to'][0]:.3g}, {w['to'][1]:.4g} GF/s", w["to"],
                    textcoords="offset points", xytext=(-10, 10), ha="right", fontsize=8, color="tab:purple")
    m = d["machine"]
    if d["overlay"]:
        ax.set_title("Communication rooflines of several systems (as 004 Fig. 5)", fontsize=11)
    else:
        where = "ranks on one host, shared memory" if m["shared_memory"] else f"{m['nodes'] or '?'} nodes"
        ax.set_title(f"Communication roofline: {m['name']} ({where})", fontsize=11)
    ax.set_xlabel("communication intensity I (flop per inter-node byte sent + received)")
    ax.set_ylabel("GF/s per node")
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    buf = io.BytesIO()
    fig.tight_layout()
    if d["errors"]:
        # the chart's own warning: a reader of the PNG alone must see it too
        lines = [ln for e in d["errors"][:3] for ln in textwrap.wrap(e, 150)]
        lines += ["..."] if len(d["errors"]) > 3 else []
        fig.subplots_adjust(bottom=0.1 + 0.025 * len(lines))
        fig.text(0.01, 0.01, "\n".join(lines), color="red", fontsize=7, va="bottom")
    fig.savefig(buf, format="png")
    plt.close(fig)
    return buf.getvalue()
