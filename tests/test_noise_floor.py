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
    assert usc["perfect"]["known"] is False  # the CSVs do not say how many runs a mean averages
    assert set(usc["per_scenario"]) == set(ok["usc-gpu-oplevel"][0].scenario_ids)
    agg = usc["aggregate"]
    assert 0 < agg["mape"] < 20 and 0.5 < agg["acc10"] <= 1 and 0.9 < agg["spearman"] <= 1
    assert track_floor(*ok["usc-gpu-oplevel"]) == usc  # reproducible


def test_perfect_predictor_against_the_median_of_its_draws():
    """The true latency scored against a headline that is the median of k noisy draws: no error
    without spread, less error the more draws the headline pools, and the error of one draw
    (|x - mu| / x with x ~ mu (1 + 2% N)) at k = 1."""
    from leaderboard.noise import simulate_perfect

    lat = np.full(4000, 10.0)
    assert simulate_perfect(lat, 0 * lat, np.full(4000, 3), METRICS, np.random.default_rng(0))["acc10"] == 1.0
    one, five = (simulate_perfect(lat, 0.02 * lat, np.full(4000, k), ("mape",), np.random.default_rng(1), replicates=3)
                 for k in (1, 5))
    assert one["mape"] == pytest.approx(100 * 0.02 * np.sqrt(2 / np.pi), rel=0.05)
    assert five["mape"] < 0.65 * one["mape"]  # the median of 5 scatters ~0.54x as much as one draw
    mixed = simulate_perfect(lat, 0.02 * lat, np.array([1, 5] * 2000), ("mape",), np.random.default_rng(1), replicates=3)
    assert five["mape"] < mixed["mape"] < one["mape"]  # each network pools its own number of draws
    with pytest.raises(ValueError, match="draws"):
        simulate_perfect(lat[:2], lat[:2], np.array([0, 3]), ("mape",), np.random.default_rng(0))


def test_perfect_predictor_is_known_only_where_the_headline_is_explained():
    host = pd.DataFrame({"latency_ms": [5.0], "processes": [3], "between_cv": [0.01]})
    usc = pd.DataFrame({"latency_ms": [5.0], "mean_ms": [5.0], "std_ms": [0.1]})
    assert list(estimator_for(host).label_draws(host)) == [3]
    assert estimator_for(usc).label_draws is None  # the USC CSVs do not say how many runs a mean averages


def _ctx(floor):
    from leaderboard.views import Context

    sids = ["s-a", "s-b"]
    doc = {"entry": "gnn", "meta": {"kind": "baseline"},
           "result": {"per_scenario": {s: {"acc10": 0.8, "mape": 5.0} for s in sids}, "aggregate": {"acc10": 0.8, "mape": 5.0}}}
    return Context("t", {"primary": "mape", "metrics": ["mape", "acc10"]}, [doc], floor, {s: {} for s in sids})


def test_board_shows_the_perfect_predictor_beside_the_floor():
    from leaderboard.views import reference_rows, views_for

    per = {"s-a": {"mape": 1.0, "acc10": 0.99}, "s-b": {"mape": 3.0, "acc10": 0.87}}
    floor = {"known": True, "how": "draws", "replicates": 20, "per_scenario": per, "aggregate": {"mape": 2.0, "acc10": 0.93},
             "perfect": {"known": True, "how": "the true latency", "per_scenario": per, "aggregate": {"mape": 2.0, "acc10": 0.93}}}
    refs = {r["label"]: r for r in reference_rows(_ctx(floor))}
    assert refs["perfect predictor"]["aggregate"] == {"mape": 2.0, "acc10": 0.93}
    assert refs["perfect predictor"]["kind"] == "floor" and "true latency" in refs["perfect predictor"]["note"]
    table = {r["label"]: r for r in views_for(_ctx(floor))[0]["rows"]}
    assert table["perfect predictor"]["cells"] == [1.0, 3.0, 2.0]  # per scenario, then the mean
    unknown = dict(floor, perfect={"known": False, "why": "unknown"})
    assert "perfect predictor" not in {r["label"] for r in reference_rows(_ctx(unknown))}
    assert "perfect predictor" not in {r["label"] for r in views_for(_ctx(unknown))[0]["rows"]}


def test_board_shows_the_retest_perfect_predictor_with_its_sessions():
    from leaderboard.views import reference_rows, views_for

    per = {"s-a": {"mape": 1.0, "acc10": 0.99}, "s-b": {"mape": 3.0, "acc10": 0.87}}
    floor = {"known": True, "how": "draws", "replicates": 20, "per_scenario": per, "aggregate": {"mape": 2.0, "acc10": 0.93},
             "perfect_retest": {"known": True, "how": "a second session", "per_scenario": {"s-a": per["s-a"]},
                                "aggregate": {}, "sessions": {"s-a": "20261128T-retest"}, "not_retested": ["s-b"]}}
    refs = {r["label"]: r for r in reference_rows(_ctx(floor))}
    row = refs["perfect predictor (retest)"]
    assert row["aggregate"] == {"mape": None, "acc10": None}  # not every scenario was measured again
    assert "20261128T-retest" in row["note"] and "not retested: s-b" in row["note"]
    table = {r["label"]: r for r in views_for(_ctx(floor))[0]["rows"]}
    assert table["perfect predictor (retest)"]["cells"] == [1.0, None, None]
    assert "perfect predictor" not in refs  # the processes estimate is a row of its own, absent here


def test_the_retest_perfect_predictor_removes_half_of_each_networks_move(tmp_path):
    """retest.csv beside the dataset: a scenario whose every test network was measured again in
    one session gets the perfect predictor of labels whose own error is the residual over sqrt 2;
    a scenario missing a test network in every session gets none, and no aggregate is given."""
    from types import SimpleNamespace

    from pipelines.control import append_history
    from leaderboard.noise import retest_perfect

    names = ["n0", "n1", "n2", "n3"]
    e = pd.DataFrame({"model_id": ["m0", "m1", "m2", "m3"], "name": names, "latency_ms": [10.0] * 4})
    data = SimpleNamespace(dataset=SimpleNamespace(path=tmp_path), track=SimpleNamespace(metrics=["mape", "acc10"]),
                           scenario_ids=["s-a", "s-b"], measured=lambda sid: e)
    split = SimpleNamespace(test_names=lambda sid: names)
    assert retest_perfect(data, split) is None  # no retest.csv
    moved = {"m0": 12.0, "m1": 12.0, "m2": 12.0 * 1.12, "m3": 12.0 / 1.3}  # a session 20% slower; two moved
    append_history(tmp_path / "retest.csv", [
        {"session": "s1", "scenario_id": "s-a", "model_id": m, "latency_ms": v} for m, v in moved.items()]
        + [{"session": "s1", "scenario_id": "s-b", "model_id": m, "latency_ms": 10.0} for m in ["m0", "m1", "m2"]])
    r = retest_perfect(data, split)
    assert set(r["per_scenario"]) == {"s-a"} and r["not_retested"] == ["s-b"] and r["aggregate"] == {}
    # the median ratio is 1.2 (m0, m1 and one of the movers between): residuals 0, 0, log 1.12, -log 1.3
    assert r["per_scenario"]["s-a"]["acc10"] == pytest.approx(0.75)
    res = np.array([0, 0, np.log(1.12), -np.log(1.3)]) - np.median([0, 0, np.log(1.12), -np.log(1.3)])
    assert r["per_scenario"]["s-a"]["mape"] == pytest.approx(100 * np.mean(np.abs(np.exp(-res / np.sqrt(2)) - 1)))
    assert r["sessions"] == {"s-a": "s1"}


def test_host_track_perfect_predictor_bounds_the_floor():
    """On the released host data the perfect predictor (true latency against the median of the
    row's processes) scores better than one process against another, on every scenario."""
    from leaderboard.run import available

    ok, why = available(["host-random"], None, write_splits=False)
    if "host-random" not in ok:
        pytest.skip(f"host-random has no data here: {why}")
    f = track_floor(*ok["host-random"])
    assert f["perfect"]["known"] and set(f["perfect"]["per_scenario"]) == set(f["per_scenario"])
    for sid, floor in f["per_scenario"].items():
        best = f["perfect"]["per_scenario"][sid]
        assert best["mape"] < floor["mape"] and best["acc10"] >= floor["acc10"], sid
