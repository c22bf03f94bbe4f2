"""Quantities as people read them: a number in the unit that suits it."""

from __future__ import annotations


def scaled(x: float, units: tuple[tuple[str, float], ...], smallest: str) -> str:
    """x in the largest unit (units: largest first) it reaches once rounded to 3 significant digits,
    so that 999.7 ms reads 1 s, never 1e+03 ms; the largest unit keeps every digit (1234 s)."""
    for unit, scale in units:
        # rounded in the unit itself: rounding x first and dividing after misread binary units
        # (16,073,036 B -> 16,100,000 -> "15.4 MiB" for 15.33)
        v = x / scale
        if abs(float(f"{v:.3g}")) >= 1:
            return f"{v:.3g} {unit}" if abs(v) < 999.5 else f"{v:.0f} {unit}"
    return f"{x:.0f} {smallest}"
