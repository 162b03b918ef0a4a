"""The noise floor: one measurement of a network against another, scored with the track's metrics."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from leaderboard.noise import estimator_for, simulate, track_floor

ROOT = Path(__file__).resolve().parents[1]
needs_public = pytest.mark.skipif(not (ROOT / "data" / "public" / "e2e.parquet").is_file(),
                                  reason="the public data is not imported here (dvc repro import-public)")
METRICS = ("mape", "acc10", "spearman")


def test_no_spread_means_no_error():
    lat = np.linspace(1.0, 50.0, 200)
    out = simulate(lat, np.zeros_like(lat), METRICS, np.random.default_rng(0), replicates=3)
    assert out["mape"] == pytest.approx(0.0, abs=1e-9) and out["acc10"] == 1.0 and out["spearman"] == pytest.approx(1.0)


def test_small_spread_gives_the_expected_error():
    """Two runs with a 2% coefficient of variation differ by 2/sqrt(pi) * 2% ~ 2.26% on average."""
    lat = np.full(5000, 10.0)
    out = simulate(lat, 0.02 * lat, ("mape", "acc5"), np.random.default_rng(0), replicates=5)
    assert out["mape"] == pytest.approx(200 * 0.02 / np.sqrt(np.pi), rel=0.05)
    # |a-b|/a <= 5% with a-b ~ N(0, (2.83%)^2): about 92%
    assert out["acc5"] == pytest.approx(0.923, abs=0.02)


def test_seeded_and_positive():
    lat = np.array([1.0, 2.0, 3.0, 4.0])
    a = simulate(lat, lat * 2.0, METRICS, np.random.default_rng(5))  # spreads larger than the latency itself
    b = simulate(lat, lat * 2.0, METRICS, np.random.default_rng(5))
    assert a == b and np.isfinite(a["mape"])


def test_estimator_follows_what_the_source_records():
    usc = pd.DataFrame({"latency_ms": [5.0], "mean_ms": [5.0], "std_ms": [0.1]})
    host = pd.DataFrame({"latency_ms": [5.0], "processes": [3], "between_cv": [0.01], "std_ms": [0.2], "mean_ms": [5.0]})
    help_ = pd.DataFrame({"latency_ms": [5.0], "std_ms": [np.nan], "mean_ms": [np.nan]})
    assert estimator_for(usc).name == "repeat-std"
    assert estimator_for(host).name == "processes"  # between processes, not within a run
    assert estimator_for(host).sigma_ms(host)[0] == pytest.approx(0.05)
    assert estimator_for(help_) is None
    assert estimator_for(host.assign(processes=[1])).name == "repeat-std"  # one process: no between-process spread


@needs_public
def test_public_tracks_floor():
    from leaderboard.run import available

    ok, _ = available(["help-nb201-n100", "usc-gpu-oplevel"], None, write_splits=False)
    helpf = track_floor(*ok["help-nb201-n100"])
    assert helpf["known"] is False and "unknown" in helpf["why"] and "per_scenario" not in helpf
    usc = track_floor(*ok["usc-gpu-oplevel"])
    assert usc["known"] and usc["estimator"] == ["repeat-std"]
    assert set(usc["per_scenario"]) == set(ok["usc-gpu-oplevel"][0].scenario_ids)
    agg = usc["aggregate"]
    assert 0 < agg["mape"] < 20 and 0.5 < agg["acc10"] <= 1 and 0.9 < agg["spearman"] <= 1
    assert track_floor(*ok["usc-gpu-oplevel"]) == usc  # reproducible
