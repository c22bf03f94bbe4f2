"""Where roofline results live, and saving them without losing earlier ones.

`measure`, `bench` and `plot` chain through `mpiscope-roofline/` in the
working directory. A default file that exists is moved to
`mpiscope-roofline/history/` (with its modification time in the name)
before the new one is written; a file named with --out is never replaced
without --force.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from mpiscope.errors import UsageError
from mpiscope.output import write_atomic

DEFAULT_DIR = Path("mpiscope-roofline")
MACHINE = DEFAULT_DIR / "machine.toml"
BENCH = DEFAULT_DIR / "bench.json"
PLOT = DEFAULT_DIR / "roofline"          # .png and .html


def save(path: Path, data: bytes, default: Path, force: bool) -> Path | None:
    """Write atomically; return where an earlier default file was kept, if any."""
    kept = None
    if path.exists() and not force:
        if path != default:
            raise UsageError(f"{path} exists; add --force to replace it or choose another --out")
        stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(path.stat().st_mtime))
        kept = path.parent / "history" / f"{path.stem}-{stamp}{path.suffix}"
        kept.parent.mkdir(parents=True, exist_ok=True)
        path.replace(kept)
    write_atomic(path, data)
    return kept


def json_bytes(payload: dict[str, Any]) -> bytes:
    """Payloads hold no NaN or infinity (an undefined figure is None), so this is strict JSON."""
    return (json.dumps(payload, indent=2, allow_nan=False) + "\n").encode()


def load_json(path: Path, what: str, schema: str, hint: str) -> dict[str, Any]:
    try:
        data = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise UsageError(f"{what} {path} not found; {hint}") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise UsageError(f"{what} {path} is unreadable ({e}); {hint}") from e
    if not isinstance(data, dict) or data.get("schema") != schema:
        raise UsageError(f"{what} {path} is not a {schema} file; {hint}")
    return data
