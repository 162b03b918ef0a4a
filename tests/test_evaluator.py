"""The OGB-style evaluator: fixed input format, one-line errors that say what is wrong."""
from __future__ import annotations

import numpy as np
import pytest

from leaderboard.evaluator import EvaluationError, Evaluator

GROUPS = {"a": {"device": "p"}, "b": {"device": "p"}, "c": {"device": "q"}}


@pytest.fixture
def ev():
    return Evaluator("usc-gpu-oplevel", {k: {"device": v["device"], "framework": "tflite"} for k, v in GROUPS.items()})


def test_formats_are_documented(ev):
    assert "scenario_id" in ev.expected_input_format and "y_pred" in ev.expected_input_format
    assert "aggregate" in ev.expected_output_format


def test_scores_per_scenario_aggregate_and_groups(ev):
    y = np.array([1.0, 2.0, 4.0, 8.0, 1.0, 3.0])
    p = np.array([1.1, 2.0, 4.0, 8.0, 2.0, 3.0])
    out = ev.eval({"scenario_id": ["a", "a", "b", "b", "c", "c"], "y_true": y, "y_pred": p})
    assert out["n"] == {"a": 2, "b": 2, "c": 2}
    assert out["per_scenario"]["a"]["mape"] == pytest.approx(5.0)
    assert out["per_scenario"]["b"]["acc5"] == 1.0
    assert out["aggregate"]["mape"] == pytest.approx((5.0 + 0.0 + 50.0) / 3)
    assert out["groups"]["device"]["p"]["mape"] == pytest.approx(2.5)


@pytest.mark.parametrize("bad, message", [
    ([1, 2], "input: expected a dict"),
    ({"scenario_id": ["a"], "y_true": [1.0]}, "input: missing key(s) y_pred"),
    ({"scenario_id": ["a"], "y_true": [1.0], "y_pred": [1.0], "seed": [0]}, "input: unexpected key(s) seed"),
    ({"scenario_id": ["a"], "y_true": [1.0], "y_pred": [1.0], "fold": [0, 1]}, "input: lengths differ: scenario_id 1, fold 2"),
    ({"scenario_id": ["a"], "y_true": [1.0], "y_pred": [1.0], "fold": [-1]}, "fold: expected ints >= 0, position 0 is -1"),
    ({"scenario_id": ["a"], "y_true": [1.0], "y_pred": [1.0], "fold": [0.5]}, "fold: expected ints >= 0, position 0 is 0.5"),
    ({"scenario_id": ["a", "a"], "y_true": [1.0], "y_pred": [1.0, 2.0]}, "input: lengths differ: scenario_id 2, y_true 1, y_pred 2"),
    ({"scenario_id": ["a"], "y_true": [[1.0]], "y_pred": [1.0]}, "y_true: expected a 1-D sequence, got shape (1, 1)"),
    ({"scenario_id": ["a", "a"], "y_true": [1.0, 2.0], "y_pred": [1.0, float("nan")]}, "y_pred: 1 value(s) NaN"),
    ({"scenario_id": ["a"], "y_true": [1.0], "y_pred": [0.0]}, "y_pred: 1 value(s) zero"),
    ({"scenario_id": ["a"], "y_true": [-1.0], "y_pred": [1.0]}, "y_true: 1 value(s) negative"),
    ({"scenario_id": ["a"], "y_true": [1.0], "y_pred": [np.inf]}, "y_pred: 1 value(s) infinite"),
    ({"scenario_id": ["a"], "y_true": [1.0], "y_pred": ["fast"]}, "y_pred: expected numbers, position 0 is 'fast'"),
    ({"scenario_id": ["zz"], "y_true": [1.0], "y_pred": [1.0]}, "scenario_id: 'zz' is not a scenario of track usc-gpu-oplevel"),
    ({"scenario_id": [], "y_true": [], "y_pred": []}, "input: no predictions"),
    ({"scenario_id": "a", "y_true": [1.0], "y_pred": [1.0]}, "scenario_id: expected a 1-D sequence"),
])
def test_wrong_input_says_exactly_what(ev, bad, message):
    with pytest.raises(EvaluationError) as e:
        ev.eval(bad)
    assert str(e.value).startswith(message)
    assert "\n" not in str(e.value)


def test_repeated_draws_are_scored_per_fold_then_averaged(ev):
    """A track of repeated draws (seeds): each fold is its own board; the figures are the mean over
    folds and the spread is their sample standard deviation (not the pooled predictions' score)."""
    y = np.array([1.0, 2.0, 4.0, 8.0])
    good = np.array([1.0, 2.0, 4.0, 8.0])  # fold 0: exact
    off = np.array([1.2, 2.4, 4.8, 9.6])  # fold 1: 20% high everywhere
    out = ev.eval({"scenario_id": ["a", "a", "c", "c"] * 2, "y_true": np.concatenate([y, y]),
                   "y_pred": np.concatenate([good, off]), "fold": [0, 0, 0, 0, 1, 1, 1, 1]})
    s = out["seeds"]
    assert s["folds"] == [0, 1]
    assert s["per_fold"]["0"]["mape"] == pytest.approx(0.0) and s["per_fold"]["1"]["mape"] == pytest.approx(20.0)
    assert out["aggregate"]["mape"] == pytest.approx(10.0)
    assert s["aggregate_std"]["mape"] == pytest.approx(np.std([0.0, 20.0], ddof=1))
    assert out["per_scenario"]["a"]["acc10"] == pytest.approx(0.5)  # 100% in fold 0, 0% in fold 1
    assert s["per_scenario_std"]["c"]["acc10"] == pytest.approx(np.std([1.0, 0.0], ddof=1))
    assert out["n"] == {"a": 2, "c": 2}  # networks per scenario, not rows
    # a rank correlation is scored within a fold: both folds rank perfectly
    assert out["aggregate"]["spearman"] == pytest.approx(1.0) and s["aggregate_std"]["spearman"] == pytest.approx(0.0)


def test_result_records_the_scenarios_attributes(ev):
    out = ev.eval({"scenario_id": ["a", "c"], "y_true": [1.0, 2.0], "y_pred": [1.0, 2.0]})
    assert out["scenarios"] == {"a": {"device": "p", "framework": "tflite"}, "c": {"device": "q", "framework": "tflite"}}
