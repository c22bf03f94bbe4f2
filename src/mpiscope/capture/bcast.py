"""The adaptive broadcast's mode and parameters (SPEC §5): from `--bcast` and the
MPISCOPE_BCAST_* environment variables, checked before the run, handed to
libmpiscope through the environment and written into the manifest.

The names, defaults and ranges are those of native/bcast/bcast.h and
runtime/bcast.c, which read the same variables.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from mpiscope.errors import UsageError

MODES = ("library", "binomial", "adaptive")
ENV_MODE = "MPISCOPE_BCAST"


@dataclass(frozen=True)
class Param:
    name: str           # key in the manifest
    default: float | str
    lo: float = 0.0
    hi: float = 0.0
    integer: bool = False
    choices: tuple[str, ...] = ()
    meaning: str = ""

    @property
    def env(self) -> str:
        return "MPISCOPE_BCAST_" + self.name.upper().removesuffix("_S")


PARAMS = (
    Param("weight", 1, 0, 16, True, meaning="i in 000 eq. (1): NewVal = ((2^i - 1) PreVal + Wait) / 2^i"),
    Param("stable", 0, 0, 1, True, meaning="1: the mean of 3 measurements agreeing within stable_tol (000 §5.2)"),
    Param("stable_tol", 0.0625, 0, 1, meaning="how closely those 3 measurements agree (share of their mean)"),
    Param("threshold", 0.5, 0, 100, meaning="a value is reported when it changed by this share of the last sent"),
    Param("interval", 1, 1, 2**20, True, meaning="broadcasts before the first optimisation (1 max-effect, 16 sparse)"),
    Param("interval_max", 0, 0, 2**29, True, meaning="cap on the doubling interval (0: none)"),
    Param("change", 0.25, 0, 100, meaning="the interval doubles when the total wait changed by at most this share"),
    Param("halve", 1, 0, 1, True, meaning="1: ... and halves otherwise (000 §5.1); 0: it stays"),
    Param("eps", 0.01, 0, 1, meaning="zero wait: at most this share of the largest wait ..."),
    Param("eps_min_s", 1e-6, 0, 1, meaning="... or this many seconds, whichever is larger"),
    Param("report", "put", choices=("put", "send"),
          meaning="how values reach the optimiser: MPI_Put into its window (000) or a nonblocking message"),
)


def _value(p: Param, text: str) -> float | str:
    if p.choices:
        if text not in p.choices:
            raise UsageError(f"{p.env}={text} is not one of {', '.join(p.choices)}; set it to one of them "
                             f"or unset it (default {p.default})")
        return text
    try:
        number = float(text)
    except ValueError:
        number = math.nan
    whole = number.is_integer() if math.isfinite(number) else False
    if not (p.lo <= number <= p.hi) or (p.integer and not whole):
        kind = "a whole number" if p.integer else "a number"
        raise UsageError(f"{p.env}={text} is out of range; give {kind} from {p.lo:g} to {p.hi:g} "
                         f"(default {p.default})")
    return int(number) if p.integer else number


def bcast_config(mode: str | None, environ: Mapping[str, str]) -> dict[str, Any] | None:
    """The broadcast settings of a run (None: the MPI's own MPI_Bcast and no
    parameter set). `mode` is --bcast; without it MPISCOPE_BCAST counts."""
    chosen = mode if mode is not None else environ.get(ENV_MODE) or None
    if chosen is not None and chosen not in MODES:
        source = "--bcast" if mode is not None else ENV_MODE
        raise UsageError(f"{source} {chosen} is not a broadcast mode; give one of {', '.join(MODES)}")
    values = {p.name: _value(p, environ[p.env]) if environ.get(p.env) else p.default for p in PARAMS}
    if chosen is None or chosen == "library":
        return None
    return {"mode": chosen, **values}


def bcast_env(config: Mapping[str, Any]) -> dict[str, str]:
    """The environment that selects these settings in libmpiscope."""
    env = {ENV_MODE: str(config["mode"])}
    env.update({p.env: repr(config[p.name]) if isinstance(config[p.name], float) else str(config[p.name])
                for p in PARAMS})
    return env
