"""Make the README's pictures of the report page: the density views of S-CAT's gallery
(003 Figs. 5, 8-11) and the time-line, from `mpiscope demo`'s reports, and the adaptive
broadcast's section, from examples/bcast_load.c recorded with --bcast adaptive (4 ranks,
rank 2 sleeping 20 ms before each of 100 broadcasts), in Debian's chromium.

    .venv/bin/python docs/images.py [--demo DIR] [--out docs/img]

Records the gallery first (mpiscope demo --out DIR) unless DIR already holds its reports.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

from playwright.sync_api import Page, sync_playwright

GALLERY = ("mm", "lu", "sor", "ep", "nqueens")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]


def open_report(page: Page, html: Path) -> None:
    page.goto(html.resolve().as_uri())
    page.wait_for_function("() => window.mpiscope && window.mpiscope.readyState !== 'loading'", timeout=60_000)


def adaptive_bcast_report(out: Path) -> Path:
    """The report of bcast_load.c run with --bcast adaptive (recorded unless out holds it)."""
    html = out / "report.html"
    if html.is_file():
        return html
    from mpiscope.mpi.build import compile_program
    from mpiscope.mpi.find import find_launcher

    src = Path(__file__).resolve().parent.parent / "src" / "mpiscope" / "examples" / "bcast_load.c"
    prog = compile_program(src, out_dir=out.parent)
    # waiting ranks yield their core (4 ranks on this machine's 2): MPICH's progress throttle
    env = {**os.environ, "MPIR_CVAR_CH4_PROGRESS_THROTTLE": "1"}
    subprocess.run([sys.executable, "-m", "mpiscope", "run", "--bcast", "adaptive", "--out", str(out), "--force", "--",
                    find_launcher() or "mpiexec", "-n", "4", str(prog), "100", "256", "20000"], check=True, env=env)
    subprocess.run([sys.executable, "-m", "mpiscope", "report", str(out), "-o", str(html)], check=True)
    return html


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--demo", type=Path, default=Path("/tmp/mpiscope-demo-images"))
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "img")
    ap.add_argument("--chromium", default="/usr/bin/chromium")
    args = ap.parse_args()
    if not all((args.demo / n / "report.html").is_file() for n in GALLERY):
        subprocess.run([sys.executable, "-m", "mpiscope", "demo", "--out", str(args.demo)], check=True)
    args.out.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=args.chromium, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1200, "height": 900}, device_scale_factor=1)
        for name in GALLERY:
            open_report(page, args.demo / name / "report.html")
            if name == "mm":  # its idle low ranks show as time spent waiting in the gather
                page.click("#density-metric button[data-metric=mpi]")
            page.locator("#sec-overview .panel").screenshot(
                path=str(args.out / f"density-{name}.png"))
        open_report(page, args.demo / "sor" / "report.html")
        page.locator("#sec-timeline").screenshot(path=str(args.out / "timeline-sor.png"))
        page.set_viewport_size({"width": 1400, "height": 1000})
        page.screenshot(path=str(args.out / "report-sor.png"))
        open_report(page, adaptive_bcast_report(args.demo / "bcast"))
        page.set_viewport_size({"width": 1200, "height": 1600})  # the whole section below the page's header
        page.evaluate("document.getElementById('sec-bcast').scrollIntoView({block: 'center'})")
        page.locator("#sec-bcast .panel").screenshot(path=str(args.out / "report-bcast.png"))
        browser.close()
    print(f"pictures in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
