"""Quantities as people read them: a number in the unit that suits it."""

from __future__ import annotations


def scaled(x: float, units: tuple[tuple[str, float], ...], smallest: str) -> str:
    """x in the largest unit (units: largest first) it reaches once rounded to 3 significant digits,
    so that 999.7 ms reads 1 s, never 1e+03 ms; the largest unit keeps every digit (1234 s)."""
    r = float(f"{x:.3g}")
    for unit, scale in units:
        if abs(r) >= scale:
            v = r / scale
            return f"{v:.3g} {unit}" if abs(v) < 1000 else f"{x / scale:.0f} {unit}"
    return f"{x:.0f} {smallest}"
