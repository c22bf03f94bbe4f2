"""000's figures for `bench bcast --plot`: the time ratios over message size
(max-effect, Figs. 8-11), the sorted ratios over load patterns (random, Figs.
13-14), and the ratios per process count (sparse, Figs. 16-18); the paper's
values, where its tables give them, dashed beside ours."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from mpiscope.bench import bcast_paper as paper
from mpiscope.bench.bcast_results import BcastResult, cell, paper_cell, random_ratios, ratio, sparse_rows
from mpiscope.bench.plot import _figure, _save

FIGS = [("overall_s", "adaptive", "Fig. 8: overall Opt/Ori"), ("overall_s", "ideal", "Fig. 9: overall Ide/Ori"),
        ("average_s", "adaptive", "Fig. 10: average Opt/Ori"), ("average_s", "ideal", "Fig. 11: average Ide/Ori")]


def _max_effect(r: BcastResult, path: Path) -> None:
    rows = r.rows()
    sets = r.load_sets()
    fig, axes = _figure(4 * len(sets))
    for k, name in enumerate(sets):
        mine = [x for x in rows if x.get("load_set") == name]
        sizes = sorted({int(x["bytes"]) for x in mine})
        loads = sorted({(int(x["column"]), int(x["load"])) for x in mine})
        for (what, variant, title), ax in zip(FIGS, axes[4 * k:4 * k + 4]):
            for c, n in loads:
                ys = [ratio(cell(mine, variant, bytes=s, column=c), cell(mine, "binomial", bytes=s, column=c), what)
                      for s in sizes]
                line = ax.plot(sizes, [np.nan if y is None else y for y in ys], marker="o", label=f"L{c} N={n}")[0]
                ref = [paper_cell(s, c, what) for s in sizes]
                idx = 1 if variant == "adaptive" else 2
                ax.plot(sizes, [x[idx] / x[0] if x else np.nan for x in ref], ls="--", color=line.get_color(),
                        alpha=0.6)
            ax.set_xscale("log", base=2)
            ax.set_xlabel("message size (bytes)")
            ax.set_ylabel("time ratio")
            ax.set_title(f"{title} ({name}; 000 dashed)", fontsize=9)
            ax.axhline(1.0, color="grey", lw=0.6)
            ax.legend(fontsize=7)
    _save(fig, path)


def _random(r: BcastResult, path: Path) -> None:
    rows = r.rows()
    sizes = sorted({int(x["bytes"]) for x in rows})
    fig, axes = _figure(len(sizes))
    for size, ax in zip(sizes, axes):
        for what, label in (("overall_s", "overall time"), ("average_s", "average time")):
            q = random_ratios(rows, size, what)
            ax.plot(np.arange(1, q.size + 1), q, label=label)
        ax.axhline(1.0, color="grey", lw=0.6)
        for y in (0.95, 1.05):
            ax.axhline(y, color="grey", lw=0.4, ls=":")
        ax.set_xlabel("pattern, best ratio first")
        ax.set_ylabel("Opt/Ori")
        ax.set_title(f"{paper.size_label(size)}: 000 Fig. {13 if size < 1024 else 14}", fontsize=9)
        ax.legend(fontsize=7)
    _save(fig, path)


def _sparse(r: BcastResult, path: Path) -> None:
    table = sparse_rows(r.rows())
    fig, axes = _figure(2)
    for what, ax in zip(("bcast_s", "total_s"), axes):
        procs = sorted({x["ranks"] for x in table})
        for k, variant in enumerate(("adaptive", "ideal")):
            ys = []
            for p in procs:
                ori = next((x for x in table if x["ranks"] == p and x["variant"] == "binomial"), None)
                mine = next((x for x in table if x["ranks"] == p and x["variant"] == variant), None)
                ys.append(mine[what] / ori[what] if ori and mine and ori[what] else np.nan)
            ax.bar(np.arange(len(procs)) + 0.4 * k, ys, width=0.4, label=f"{variant}/binomial")
        ax.set_xticks(np.arange(len(procs)) + 0.2, [str(p) for p in procs])
        ax.set_xlabel("processes")
        ax.set_ylabel("time ratio")
        ax.axhline(1.0, color="grey", lw=0.6)
        ax.set_title(f"sparse product, {what[:-2]} time (000 Figs. 16-18)", fontsize=9)
        ax.legend(fontsize=7)
    _save(fig, path)


def plot_bcast(r: BcastResult, path: Path) -> None:
    {"max-effect": _max_effect, "random": _random, "sparse": _sparse}[r.experiment](r, path)
