"""The adaptive broadcast's settings (capture/bcast.py): defaults, environment, bad values."""

from __future__ import annotations

import pytest

from mpiscope.capture.bcast import PARAMS, bcast_config, bcast_env
from mpiscope.errors import UsageError


def test_defaults_are_000s():
    c = bcast_config("adaptive", {})
    assert c == {"mode": "adaptive", "weight": 1, "stable": 0, "stable_tol": 0.0625, "threshold": 0.5,
                 "interval": 1, "interval_max": 0, "change": 0.25, "halve": 1, "eps": 0.01, "eps_min_s": 1e-6,
                 "report": "put"}
    assert bcast_config(None, {}) is None and bcast_config("library", {}) is None


def test_environment_sets_mode_and_parameters():
    c = bcast_config(None, {"MPISCOPE_BCAST": "binomial", "MPISCOPE_BCAST_INTERVAL": "16",
                            "MPISCOPE_BCAST_EPS_MIN": "2e-6", "MPISCOPE_BCAST_REPORT": "send"})
    assert c is not None and c["mode"] == "binomial" and c["interval"] == 16 and c["eps_min_s"] == 2e-6
    env = bcast_env(c)
    assert env["MPISCOPE_BCAST"] == "binomial" and env["MPISCOPE_BCAST_INTERVAL"] == "16"
    assert float(env["MPISCOPE_BCAST_EPS_MIN"]) == 2e-6 and env["MPISCOPE_BCAST_REPORT"] == "send"
    assert {p.env for p in PARAMS} <= set(env)
    # --bcast wins over the environment's mode
    assert bcast_config("adaptive", {"MPISCOPE_BCAST": "binomial"})["mode"] == "adaptive"  # type: ignore[index]


@pytest.mark.parametrize("env, words", [
    ({"MPISCOPE_BCAST_WEIGHT": "1.5"}, ["whole number", "0 to 16"]),
    ({"MPISCOPE_BCAST_CHANGE": "nan"}, ["out of range"]),
    ({"MPISCOPE_BCAST_EPS": "2"}, ["MPISCOPE_BCAST_EPS=2", "0 to 1"]),
    ({"MPISCOPE_BCAST": "tree"}, ["MPISCOPE_BCAST tree", "adaptive"]),
])
def test_bad_values_one_sentence(env, words):
    with pytest.raises(UsageError) as e:
        bcast_config(None if "MPISCOPE_BCAST" in env else "adaptive", env)
    assert all(w in str(e.value) for w in words) and str(e.value).count(". ") == 0
