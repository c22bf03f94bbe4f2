"""Times and sizes as the terminal and the findings print them: rounded to 3 significant digits
in each unit before the unit is chosen (not in bytes: 16,073,036 B read 15.4 MiB for 15.33), so that a value just below a unit's step reads in the next unit, never
in exponent notation (999.7 ms read "1e+03 ms"); the largest unit keeps every digit."""

from __future__ import annotations

import pytest

from mpiscope.analysis.findings import fmt_s
from mpiscope.output import fmt_bytes, fmt_ns


@pytest.mark.parametrize(("ns", "text"), [(999.7e6, "1 s"), (1234e9, "1234 s"), (40e6, "40 ms"), (5.5e3, "5.5 µs"),
                                          (999.6, "1 µs"), (12, "12 ns"), (1.5e9, "1.5 s")])
def test_times(ns: float, text: str) -> None:
    assert fmt_ns(ns) == text


@pytest.mark.parametrize(("n", "text"), [(1023.7 * 1024, "1 MiB"), (2000 * 2**30, "2000 GiB"), (512, "512 B"),
                                         (1536, "1.5 KiB"), (16_073_036, "15.3 MiB"), (14_944_084, "14.3 MiB"),
                                         (10_169_714, "9.7 MiB")])
def test_sizes(n: float, text: str) -> None:
    assert fmt_bytes(n) == text


@pytest.mark.parametrize(("s", "text"), [(0.9997, "1.000 s"), (2.5, "2.500 s"), (0.04, "40 ms"),
                                         (0.0009997, "1 ms"), (1e-7, "100 ns")])
def test_finding_seconds(s: float, text: str) -> None:
    assert fmt_s(s) == text

