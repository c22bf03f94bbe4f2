"""001 Fig. 11: how many links carry how many bytes, per map, as a PNG."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import numpy.typing as npt

from mpiscope.output import write_atomic


def link_histogram_png(path: str | Path, loads: dict[str, npt.NDArray[np.float64]], routing: str,
                       bins: int = 60) -> None:
    """One step histogram per map over the links with traffic; the right end of each is its maxlink."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    top = max(float(v.max(initial=0.0)) for v in loads.values()) or 1.0
    edges = np.linspace(0.0, top, bins + 1)
    fig, ax = plt.subplots(figsize=(8, 4.5), dpi=110)
    for name, v in loads.items():
        used = v[v > 0]
        ax.hist(used / 2**20, bins=(edges / 2**20).tolist(), histtype="step", linewidth=1.6,
                label=f"{name} (maxlink {used.max(initial=0) / 2**20:.2f} MiB)")
    ax.set_xlabel("bytes through the link (MiB)")
    ax.set_ylabel("links")
    ax.set_title("Bytes per link (001 Fig. 11)", fontsize=11)
    ax.text(0.99, -0.16, f"routing: {routing}", transform=ax.transAxes, ha="right", fontsize=7, color="0.4")
    ax.legend(fontsize=8)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    write_atomic(Path(path), buf.getvalue())
