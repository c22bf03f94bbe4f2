"""The report page in Chromium: load-to-first-paint and redraw times of the time-line over pans
and zooms at every zoom level (issue 17: <= 50 ms per redraw on a 64-rank, 10-million-event trace).

    python bench/page_timing.py TRACE/report.html [--samples 6] [--json FILE]
    python bench/page_timing.py 'http://127.0.0.1:PORT/?token=T'       # a running `mpiscope view`

From Python (bench/report_scale.py): `from page_timing import measure_page` (this directory on
sys.path) and `measure_page(path_or_url) -> dict` with `first_paint_ms`, `redraw_ms_p50`,
`redraw_ms_p95`, `redraw_ms_max`, `redraws`, `levels` (per zoom level: span, modes, p95) and
`console_errors`. Uses Debian's /usr/bin/chromium (or $MPISCOPE_CHROMIUM) through Playwright for
Python; nothing is downloaded.

A redraw is one call of the time-line's draw() (timed in the page with performance.now()): the
rows painted from the bin pyramid or the single events, the axis, labels, messages. Tile loading
is not a redraw: the page keeps drawing what it has and redraws when a tile arrives.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

CHROMIUM = Path(os.environ.get("MPISCOPE_CHROMIUM", "/usr/bin/chromium"))
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]

# Zoom by halves from the whole run down to ~2 µs; at each level `samples` windows (inside the
# report's full-detail windows for half of them, so the single-event mode is measured too),
# each zoomed to and then panned by a tenth.
SWEEP = """
async ({samples, seed}) => {
  let s = seed >>> 0;
  const rnd = () => { s = (s + 0x6D2B79F5) >>> 0; let t = s; t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61); return ((t ^ (t >>> 14)) >>> 0) / 4294967296; };
  const tl = mpiscope.timeline, data = mpiscope.data, span = data.meta.span_ns;
  const wins = data.detail && !data.detail.complete ? (data.detail.windows || []) : [];
  const redraws = () => mpiscope.perf.redraws;
  const levels = [];
  for (let k = 0; span / Math.pow(2, k) >= 2000; k++) {
    const w = span / Math.pow(2, k), times = [], modes = {};
    for (let i = 0; i < (k === 0 ? 1 : samples); i++) {
      let c = rnd() * span;
      if (wins.length && i % 2 === 0) { const [a, b] = wins[Math.floor(rnd() * wins.length)]; c = a + rnd() * (b - a); }
      for (const shift of [0, 0.1 * w]) {
        const n0 = redraws().length;
        await tl.zoomTo(c - w / 2 + shift, c + w / 2 + shift);
        times.push(...redraws().slice(n0));
        const m = tl.view().mode;
        modes[m] = (modes[m] || 0) + 1;
      }
    }
    times.sort((a, b) => a - b);
    levels.push({ span_ns: w, modes, redraws: times.length,
                  p95_ms: times[Math.min(times.length - 1, Math.floor(0.95 * times.length))] || 0,
                  max_ms: times[times.length - 1] || 0 });
  }
  await tl.zoomTo(0, span);
  const nav = performance.getEntriesByType("navigation")[0];
  return { levels, all: redraws().slice(), dcl: nav ? nav.domContentLoadedEventEnd : null };
}
"""


def _percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    v = sorted(values)
    return v[min(len(v) - 1, int(q * len(v)))]


def measure_page(target: str | Path, samples: int = 6, seed: int = 1, viewport: tuple[int, int] = (1440, 1000),
                 chromium: Path = CHROMIUM) -> dict[str, Any]:
    """Open a report file or a `view` URL in headless Chromium and time its first paint and
    redraws (see the module docstring for the keys)."""
    from playwright.sync_api import sync_playwright

    url = str(target) if str(target).startswith(("http://", "https://", "file://")) else Path(target).resolve().as_uri()
    errors: list[str] = []
    with tempfile.TemporaryDirectory(prefix="mpiscope-chromium-") as profile, sync_playwright() as p:
        ctx = p.chromium.launch_persistent_context(profile, executable_path=str(chromium), headless=True,
                                                   args=CHROMIUM_ARGS, viewport={"width": viewport[0], "height": viewport[1]})
        try:
            page = ctx.new_page()
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(url, timeout=120_000)
            page.wait_for_function("() => window.mpiscope && window.mpiscope.readyState !== 'loading'", timeout=120_000)
            page.evaluate("window.mpiscope.ready")
            first_paint = float(page.evaluate("mpiscope.perf.firstPaintMs"))
            first_redraw = float(page.evaluate("mpiscope.perf.redraws[0]"))
            sweep = page.evaluate(SWEEP, {"samples": samples, "seed": seed})
        finally:
            ctx.close()
    times = [float(t) for t in sweep["all"]]
    return {
        "url": url, "first_paint_ms": first_paint, "first_redraw_ms": first_redraw,
        "dom_content_loaded_ms": sweep["dcl"], "redraws": len(times),
        "redraw_ms_p50": _percentile(times, 0.5), "redraw_ms_p95": _percentile(times, 0.95),
        "redraw_ms_max": max(times, default=0.0), "levels": sweep["levels"], "console_errors": errors,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("page", help="report HTML file or view URL")
    ap.add_argument("--samples", type=int, default=6, help="windows per zoom level")
    ap.add_argument("--json", help="write the figures as JSON to FILE (- for stdout)")
    a = ap.parse_args()
    r = measure_page(a.page, samples=a.samples)
    r = {"schema": "mpiscope.bench.page_timing/1", "machine": platform.machine(), "cpus": os.cpu_count(),
         "chromium": str(CHROMIUM), **r}
    print(f"page: {r['url'][:100]}")
    print(f"first paint: {r['first_paint_ms']:.0f} ms after navigation (first redraw {r['first_redraw_ms']:.1f} ms)")
    print(f"redraws: {r['redraws']}, median {r['redraw_ms_p50']:.1f} ms, p95 {r['redraw_ms_p95']:.1f} ms, "
          f"max {r['redraw_ms_max']:.1f} ms (target <= 50 ms)")
    for lv in r["levels"]:
        modes = ", ".join(f"{k} {v}" for k, v in sorted(lv["modes"].items()))
        print(f"  window {lv['span_ns'] / 1e6:12.6f} ms: p95 {lv['p95_ms']:6.1f} ms, max {lv['max_ms']:6.1f} ms ({modes})")
    if r["console_errors"]:
        print(f"console errors: {r['console_errors'][:3]}")
    if a.json:
        text = json.dumps(r, indent=1)
        if a.json == "-":
            print(text)
        else:
            Path(a.json).write_text(text + "\n")
    print(f"median of levels' p95: {statistics.median(lv['p95_ms'] for lv in r['levels']):.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
