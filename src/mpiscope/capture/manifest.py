"""manifest.json: what a trace directory holds and how it was made."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from mpiscope.errors import TraceCorrupt, TraceNotFound
from mpiscope.output import write_atomic

NAME = "manifest.json"
SCHEMA = "mpiscope.trace/5"  # trace/schema.py says what each version's tables hold
# /1: no recv_bytes columns, /2: no count, inside_ns, rc; open_trace adds them
READABLE = ("mpiscope.trace/1", "mpiscope.trace/2", "mpiscope.trace/3", "mpiscope.trace/4", SCHEMA)


def manifest_path(trace_dir: Path) -> Path:
    return Path(trace_dir) / NAME


def read_manifest(trace_dir: Path) -> dict[str, Any]:
    path = manifest_path(trace_dir)
    if Path(trace_dir).exists() and not Path(trace_dir).is_dir():
        raise TraceNotFound(f"{trace_dir} is a file, not a trace; give the directory mpiscope run wrote: "
                            f"mpiscope run --out DIR -- mpiexec -n 4 ./app")
    if not Path(trace_dir).is_dir():
        raise TraceNotFound(f"{trace_dir} does not exist; record a trace first: "
                            f"mpiscope run --out {trace_dir} -- mpiexec -n 4 ./app")
    if not path.is_file():
        raise TraceNotFound(f"{trace_dir} is not an mpiscope trace (no {NAME}); record one: "
                            f"mpiscope run --out {trace_dir} -- mpiexec -n 4 ./app")
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise TraceCorrupt(f"{path} is not valid JSON ({e}); restore it or record the trace again") from e
    schema = data.get("schema") if isinstance(data, dict) else None
    if isinstance(schema, str) and schema.startswith("mpiscope.trace/") and schema not in READABLE:
        raise TraceCorrupt(f"{path} was written by another version of mpiscope (schema {schema}; this one reads "
                           f"{', '.join(READABLE)}); open it with that version, or upgrade: pip install -U mpiscope")
    if not isinstance(data, dict) or schema not in READABLE or not isinstance(data.get("calls"), list):
        raise TraceCorrupt(f"{path} is not an mpiscope trace manifest (schema {SCHEMA}); "
                           f"record the trace again with this mpiscope")
    return data


def write_manifest(trace_dir: Path, manifest: dict[str, Any]) -> None:
    manifest["schema"] = SCHEMA
    write_atomic(manifest_path(trace_dir), (json.dumps(manifest, indent=1) + "\n").encode())
