"""The public conformance check (leaderboard.baselines.check_predictor) and the entry points
through which a predictor from another package joins the registry without editing the suite."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from foundation.registry import Registry, RegistryError
from leaderboard.baselines import ConformanceError, Predictor, check_predictor
from leaderboard.baselines.conformance import sample

ROOT = Path(__file__).resolve().parents[1]

# a predictor as an outside author writes it: the median training latency, scaled by FLOPs
OUTSIDE = '''
import numpy as np
from leaderboard.baselines import Predictor


class FlopsRatio(Predictor):
    def __init__(self, scale=1.0):
        self.scale = scale

    def fit(self, X, y):
        X = self._check_X(X)
        y = self._check_y(X, y)
        f = X.models()["flops"].to_numpy(dtype="float64")
        self.ms_per_flop_ = float(np.median(y / np.maximum(f, 1.0)))
        return self

    def predict(self, X):
        X = self._check_X(X)
        if not hasattr(self, "ms_per_flop_"):
            raise RuntimeError("FlopsRatio: fit it first")
        f = X.models()["flops"].to_numpy(dtype="float64")
        return (self.scale * self.ms_per_flop_ * np.maximum(f, 1.0)).astype("float64")
'''


@pytest.fixture(scope="module")
def data():
    return sample()


def test_the_suites_own_predictors_pass(data):
    check_predictor("flops", data=data)
    check_predictor("usc_lasso", {"cv_folds": 2}, data=data)  # a saved one: the save-and-load check runs


def test_a_broken_predictor_is_told_every_fault(data):
    class Broken(Predictor):
        def __init__(self, alpha=1.0):
            self.alpha = alpha

        def fit(self, X, y):
            self.alpha = 2.0  # changes its parameter, returns nothing

        def predict(self, X):
            return [0.0] * len(X)

    with pytest.raises(ConformanceError) as e:
        check_predictor(Broken, data=data)
    text = str(e.value)
    assert "fit: ValueError: fit must return self" in text
    assert "wrong input: ValueError: predict before fit: no error" in text


def _install(tmp: Path, module: str, source: str, entry: str) -> Path:
    """A package installed the plain way: its module and a dist-info with entry_points.txt."""
    (tmp / f"{module}.py").write_text(source)
    info = tmp / f"{module}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {module}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[latbench.predictors]\n{entry}\n")
    return tmp


def test_an_entry_point_registers_a_predictor_and_it_passes_the_check(tmp_path):
    site = _install(tmp_path, "outside_pred", OUTSIDE, "flops_ratio = outside_pred:FlopsRatio")
    code = textwrap.dedent("""
        from leaderboard.baselines import PREDICTORS, check_predictor, make_predictor
        assert "flops_ratio" in PREDICTORS.names(), PREDICTORS.names()
        check_predictor("flops_ratio")
        print("ok", type(make_predictor("flops_ratio", scale=2.0)).__name__)
    """)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(ROOT)])}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)
    assert r.returncode == 0 and r.stdout.strip() == "ok FlopsRatio", r.stderr[-2000:]


def test_an_entry_point_that_cannot_load_is_one_line_naming_it(tmp_path, monkeypatch):
    site = _install(tmp_path, "broken_pred", "raise ImportError('no such thing')\n", "broken = broken_pred:Nope")
    monkeypatch.syspath_prepend(str(site))
    reg = Registry("predictor", entry_points="latbench.predictors")
    with pytest.raises(RegistryError) as e:
        reg.names()
    msg = str(e.value)
    assert "\n" not in msg and "'broken' (entry point broken_pred:Nope in group latbench.predictors)" in msg
    assert "ImportError: no such thing" in msg
