"""Metrics: values on hand-computed arrays, edge cases, and the cross-check with nn-Meter's own
evaluation functions (skipped when nn-Meter's separate environment is absent)."""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

from leaderboard.metrics import METRICS, aggregate, compute

Y = np.array([10.0, 20.0, 40.0, 5.0])
P = np.array([11.0, 19.0, 30.0, 5.2])  # rel errors +10%, -5%, -25%, +4%


def test_values_by_hand():
    m = compute(Y, P)
    assert m["mape"] == pytest.approx(100 * (0.10 + 0.05 + 0.25 + 0.04) / 4)
    assert m["rmspe"] == pytest.approx(100 * np.sqrt((0.01 + 0.0025 + 0.0625 + 0.0016) / 4))
    assert m["rmse"] == pytest.approx(np.sqrt((1 + 1 + 100 + 0.04) / 4))
    assert m["acc5"] == pytest.approx(0.5)  # -5% (inclusive bound) and +4%
    assert m["acc10"] == pytest.approx(0.75)
    assert m["spearman"] == pytest.approx(1.0)  # same order
    assert m["kendall"] == pytest.approx(1.0)


def test_rank_metrics():
    y = np.arange(1.0, 11.0)
    assert compute(y, y[::-1], ["spearman", "kendall"]) == pytest.approx({"spearman": -1.0, "kendall": -1.0})
    assert np.isnan(METRICS.get("spearman")(y, np.ones(10)))  # constant prediction: undefined


def test_directions_and_aggregate():
    assert METRICS.get("acc10").higher_is_better and not METRICS.get("mape").higher_is_better
    assert METRICS.get("mape").better(1.0, 2.0) and METRICS.get("spearman").better(0.9, float("nan"))
    agg = aggregate({"a": {"mape": 10.0, "spearman": float("nan")}, "b": {"mape": 20.0, "spearman": 0.5}}, ["mape", "spearman"])
    assert agg == {"mape": 15.0, "spearman": 0.5}


NNMETER = os.environ.get("LATBENCH_NNMETER_PYTHON") or str(Path(__file__).resolve().parents[1] / ".venv-nnmeter/bin/python")


@pytest.mark.skipif(not Path(NNMETER).is_file(), reason="nn-Meter's environment is absent (scripts/setup-nnmeter-env.sh; "
                    "LATBENCH_NNMETER_PYTHON)")
def test_same_as_nnmeter(tmp_path):
    rng = np.random.default_rng(7)
    y = rng.uniform(1, 100, 500)
    p = y * (1 + rng.normal(0, 0.08, 500))
    p[:20] = y[:20] * 1.05  # exactly on the bound: both count it as within 5%
    np.save(tmp_path / "y.npy", y)
    np.save(tmp_path / "p.npy", p)
    # nn-Meter's own module, loaded by path: its package __init__ imports the whole framework
    # stack (about 15 s) and the metrics module needs none of it
    code = ("import json, numpy as np, os, importlib.util as u\n"
            "root = u.find_spec('nn_meter').submodule_search_locations[0]\n"
            "spec = u.spec_from_file_location('nnm_utils', os.path.join(root, 'predictor', 'prediction', 'utils.py'))\n"
            "m = u.module_from_spec(spec); spec.loader.exec_module(m); latency_metrics = m.latency_metrics\n"
            f"y = np.load({str(tmp_path / 'y.npy')!r}); p = np.load({str(tmp_path / 'p.npy')!r})\n"
            "rmse, rmspe, err, acc5, acc10, acc15 = latency_metrics(p, y)\n"
            "print(json.dumps(dict(rmse=rmse, rmspe=rmspe, acc5=acc5, acc10=acc10)))\n")
    out = subprocess.run([NNMETER, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    theirs = json.loads(out.stdout.strip().splitlines()[-1])
    ours = compute(y, p, ["rmse", "rmspe", "acc5", "acc10"])
    assert ours == pytest.approx(theirs, rel=1e-12)


def test_a_metric_in_the_targets_unit_names_that_unit():
    assert METRICS.get("rmse").label_in("MB") == "RMSE MB"  # a peak-memory track
    assert METRICS.get("rmse").label_in("ms") == METRICS.get("rmse").label == "RMSE ms"
    assert METRICS.get("mape").label_in("MB") == "MAPE %"  # relative metrics have no unit to change
