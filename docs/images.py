"""Make the README's pictures of the report page: the density views of S-CAT's gallery
(003 Figs. 5, 8-11) and the time-line, from `mpiscope demo`'s reports, in Debian's chromium.

    .venv/bin/python docs/images.py [--demo DIR] [--out docs/img]

Records the gallery first (mpiscope demo --out DIR) unless DIR already holds its reports.
"""

from __future__ import annotations

import argparse
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
        browser.close()
    print(f"pictures in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
