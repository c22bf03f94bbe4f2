"""Figures for `bench overlap --plot` and `bench rma --plot`, written atomically (PNG, SVG or PDF by suffix).

Overlap: one panel per operation, as 002 Figs. 1–3 show them: time_ovrlp of
the nonblocking operation against blocking time + time_CPU over the message
size, with the overlap percentage on a second axis; one line style per
asynchronous-progress setting.
"""

from __future__ import annotations

import io
import math
from pathlib import Path
from typing import TYPE_CHECKING

from mpiscope import output
from mpiscope.bench.overlap import OverlapResult
from mpiscope.bench.rma import RmaResult
from mpiscope.errors import UsageError

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

FORMATS = {".png": "png", ".svg": "svg", ".pdf": "pdf"}
STYLE = {False: "-", True: "--"}


def check_plot_path(path: Path) -> None:
    if path.suffix.lower() not in FORMATS:
        raise UsageError(f"cannot write a plot to {path}: unknown format {path.suffix or '(none)'}; "
                         f"end the file name in .png, .svg or .pdf")


def _figure(panels: int) -> tuple[Figure, list[Axes]]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cols = min(3, panels)
    rows = math.ceil(panels / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(5.2 * cols, 3.6 * rows + 0.8), squeeze=False,
                             layout="constrained")
    flat = [a for row in axes for a in row]
    for extra in flat[panels:]:
        extra.set_visible(False)
    return fig, flat[:panels]


def _save(fig: Figure, path: Path) -> None:
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format=FORMATS[path.suffix.lower()], dpi=120)
    plt.close(fig)
    output.write_atomic(path, buf.getvalue())


def _x(sizes: list[int]) -> list[float]:
    """Log axis: size 0 drawn at 0.5 B, left of 1 B."""
    return [s if s > 0 else 0.5 for s in sizes]


def _size_axis(ax: Axes) -> None:
    """Powers of two in bytes, with the 0-byte point (drawn at 0.5) labelled 0."""
    from matplotlib.ticker import FuncFormatter

    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: "0" if v == 0.5 else f"$2^{{{math.log2(v):.0f}}}$"))
    ax.set_xlabel("message size [bytes]")


def plot_overlap(result: OverlapResult, path: Path) -> None:
    ops = list(dict.fromkeys(r.op for r in result.rows))
    fig, axes = _figure(len(ops))
    legend_axes: list[Axes] = []
    for ax, op in zip(axes, ops):
        pct_ax = ax.twinx()
        legend_axes = legend_axes or [ax, pct_ax]
        for enabled in (False, True):
            rows = [r for r in result.rows if r.op == op and r.async_progress == enabled]
            if not rows:
                continue
            label = f"progress {'on' if enabled else 'off'}"
            x = _x([r.bytes for r in rows])
            ax.plot(x, [r.point.t_ovrlp_us for r in rows], STYLE[enabled], color="C0", marker=".",
                    label=f"t_ovrlp ({label})")
            ax.plot(x, [r.point.blocking_plus_cpu_us for r in rows], STYLE[enabled], color="C3", marker=".",
                    label=f"blocking + t_CPU ({label})")
            pct_ax.plot(x, [r.point.overlap_pct for r in rows], STYLE[enabled], color="C2", alpha=0.6,
                        label=f"overlap % ({label})")
        _size_axis(ax)
        ax.set_yscale("log")
        ax.set_title(op)
        ax.set_ylabel("time [µs]")
        pct_ax.set_ylim(0, 105)
        pct_ax.set_ylabel("overlap [%]", color="C2")
    lines = [ln for ax in legend_axes for ln in ax.get_lines()]
    fig.legend(lines, [str(ln.get_label()) for ln in lines], loc="outside lower center", ncol=3, fontsize="small")
    fig.suptitle(f"mpiscope bench overlap: {result.mpi}, {result.config.ranks} ranks (IMB-NBC definition)")
    _save(fig, path)


def plot_rma(result: RmaResult, path: Path) -> None:
    """Truly_passive_put (both times) and the latency of each operation per synchronisation mode."""
    ops = list(dict.fromkeys(r.op for r in result.rows))
    fig, axes = _figure(len(ops) + (1 if result.passive else 0))
    if result.passive:
        ax = axes.pop(0)
        for enabled in (False, True):
            passive = [p for p in result.passive if p.async_progress == enabled]
            if passive:
                x = _x([p.bytes for p in passive])
                name = "on" if enabled else "off"
                ax.plot(x, [p.t_pure_us for p in passive], STYLE[enabled], color="C0", marker=".",
                        label=f"t_pure, progress {name}")
                ax.plot(x, [p.t_ovrlp_us for p in passive], STYLE[enabled], color="C3", marker=".",
                        label=f"t_ovrlp, progress {name}")
        ax.set_title("truly_passive_put (ratio ≈ 2: no passive progress)")
        ax.legend(fontsize="small")
    for ax, op in zip(axes, ops):
        for enabled in (False, True):
            for color, mode in enumerate(("lock_unlock", "lock_all_flush", "aggregate")):
                rows = [r for r in result.rows if r.op == op and r.mode == mode and r.async_progress == enabled]
                if rows:
                    ax.plot(_x([r.bytes for r in rows]), [r.t_us for r in rows], STYLE[enabled], marker=".",
                            color=f"C{color}", label=f"{mode}, progress {'on' if enabled else 'off'}")
        ax.set_title(op)
        ax.legend(fontsize="x-small")
    for ax in fig.axes:
        if ax.get_visible():
            _size_axis(ax)
            ax.set_yscale("log")
            ax.set_ylabel("time per operation [µs]")
    fig.suptitle(f"mpiscope bench rma: {result.mpi}, origin rank 0, target rank 1")
    _save(fig, path)
