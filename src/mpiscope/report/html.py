"""The page: templates/page.html.j2 with every script, style and the data inline.

The template (owned with the page's scripts) takes `title`, `style` (the CSS),
`script` (the files listed in assets/scripts.txt, concatenated in order) and
`data` (the payload as JSON, "</" escaped so no string can close the script
element that holds it). Nothing refers to anything outside the file.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup

from mpiscope.errors import MpiscopeError
from mpiscope.report.payload import jsonable

HERE = Path(__file__).resolve().parent
TEMPLATES = HERE / "templates"
ASSETS = HERE / "assets"
TEMPLATE = "page.html.j2"


class PageMissing(MpiscopeError):
    """The page's template or scripts are not installed (a broken or partial install)."""


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except OSError as e:
        raise PageMissing(f"{path} cannot be read ({e.strerror}); reinstall mpiscope (make setup)") from e


def scripts(assets: Path | None = None) -> str:
    assets = assets or ASSETS
    listing = assets / "scripts.txt"
    names = [
        ln.strip() for ln in _read(listing).splitlines() if ln.strip() and not ln.lstrip().startswith("#")
    ]
    text = "\n;\n".join(_read(assets / n) for n in names)
    # A script element ends at the first "</script" whatever the JS around it means.
    return re.sub(r"</(script)", r"<\\/\1", text, flags=re.IGNORECASE)


def styles(assets: Path | None = None) -> str:
    assets = assets or ASSETS
    listing = assets / "styles.txt"
    if listing.is_file():
        names = [
            ln.strip() for ln in _read(listing).splitlines() if ln.strip() and not ln.lstrip().startswith("#")
        ]
        files = [assets / n for n in names]
    else:
        files = sorted(assets.glob("*.css"))
    return re.sub(r"</(style)", r"<\\/\1", "\n".join(_read(f) for f in files), flags=re.IGNORECASE)


def data_json(payload: dict[str, Any]) -> str:
    return json.dumps(jsonable(payload), separators=(",", ":"), allow_nan=False).replace("</", "<\\/")


def template(templates: Path | None = None) -> jinja2.Template:
    templates = templates or TEMPLATES
    if not (templates / TEMPLATE).is_file():
        raise PageMissing(
            f"the report page template {templates / TEMPLATE} is missing; "
            f"reinstall mpiscope (make setup) or restore src/mpiscope/report/templates/"
        )
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(templates)),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
    )
    return env.get_template(TEMPLATE)


def render(payload: dict[str, Any], title: str | None = None) -> str:
    """The whole page as one string."""
    meta = payload.get("meta", {})
    title = title or f"mpiscope: {Path(meta.get('trace_dir', 'trace')).name} ({meta.get('ranks', '?')} ranks)"
    return template().render(
        title=title, style=Markup(styles()), script=Markup(scripts()), data=Markup(data_json(payload))
    )
