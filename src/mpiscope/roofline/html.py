"""The roofline as one self-contained, interactive HTML file: an SVG drawn by inline JavaScript from
the chart data (hover for values, click the legend to hide a series); no network access, no CDN."""

from __future__ import annotations

import html
import json
from importlib import resources
from typing import Any


def render_html(d: dict[str, Any]) -> bytes:
    template = (resources.files("mpiscope.roofline") / "assets" / "roofline.html").read_text()
    # "</" cannot end the <script> element early once escaped
    data = json.dumps(d, allow_nan=False).replace("</", "<\\/")
    title = html.escape(d["machine"]["name"])
    return template.replace("__TITLE__", title).replace("__DATA__", data).encode()
