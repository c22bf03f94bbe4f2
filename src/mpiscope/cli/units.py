"""Sizes as users write them on the command line (65536, 64K, 1M, 4GiB)."""

from __future__ import annotations

import re

from mpiscope.errors import UsageError

_UNITS = {"": 1, "b": 1, "k": 2**10, "kb": 2**10, "kib": 2**10, "m": 2**20, "mb": 2**20, "mib": 2**20,
          "g": 2**30, "gb": 2**30, "gib": 2**30, "t": 2**40, "tb": 2**40, "tib": 2**40}


def parse_bytes(text: str, option: str) -> int:
    """Bytes of a size such as 65536, 64K, 1M or 4GiB (binary units); `option` names it in the error."""
    m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([a-z]*)", text.strip().lower())
    if not m or m.group(2) not in _UNITS:
        raise UsageError(f"{option} {text!r} is not a size in bytes; write e.g. 65536, 64K, 512M or 4GiB")
    return int(float(m.group(1)) * _UNITS[m.group(2)])
