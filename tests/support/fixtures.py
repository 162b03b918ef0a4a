"""Small real datasets and predictors for the leaderboard's tests (not used by the board).

:func:`public_subset` imports the public measurements from ``../shared/external`` into a
folder: all USC networks without rebuilding their IR (names key the splits, so the committed
split files apply) and HELP's NAS-Bench-201 indices 0-1899 on the four devices of the HELP
tracks (everything HELP's protocol touches). About 6 s. :func:`usc_pixel4` imports a few USC
networks of the Pixel 4 with their IR, for the predictor tests.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

HELP_DEVICES = ["gold_6226", "pixel2", "raspi4", "eyeriss"]


def public_subset(shared_dir: Path, out: Path, usc_devices: list[str] | None = None) -> Path:
    from pipelines.dataset.help import HelpConfig
    from pipelines.dataset.import_public import run_import
    from pipelines.dataset.usc import UscConfig

    ext = Path(shared_dir) / "external"
    run_import(UscConfig(path=str(ext / "usc-mobile-ml-benchmark"), rebuild_ir=False, devices=usc_devices or []),
               HelpConfig(path=str(ext / "help-nasbench201"), rebuild_ir=False, indices=list(range(1900)),
                          devices=HELP_DEVICES),
               out_dir=out, progress=False, card=False)
    return out


def usc_pixel4(usc_dir: Path, models: list[str]):
    """The USC networks ``models`` on the Pixel 4 (IR rebuilt), as a Dataset: the small real
    data the predictor tests fit on."""
    from pipelines.dataset import Dataset, UscConfig, import_usc

    r = import_usc(UscConfig(path=str(usc_dir), models=models, devices=["pixel4"]))
    return Dataset(dict(r))


def register_test_predictors() -> None:
    """Two cheap predictors on the data the subset has (the USC rows' reported FLOPs)."""
    from leaderboard.baselines import PREDICTORS, Predictor, register_predictor

    if "test-reported-flops" in PREDICTORS:
        return

    @register_predictor("test-reported-flops")
    class ReportedFlops(Predictor):
        """log latency = a * log(reported FLOPs) + b (a test predictor)."""

        e2e_only = True  # the networks' reported FLOPs and the training labels

        def __init__(self, degree: int = 1):
            self.degree = degree

        def _x(self, X):
            return np.log(X.models()["reported_flops"].to_numpy("float64"))

        def fit(self, X, y):
            X = self._check_X(X)
            self.coef_ = np.polyfit(self._x(X), np.log(self._check_y(X, y)), self.degree)
            return self

        def predict(self, X):
            return np.exp(np.polyval(self.coef_, self._x(self._check_X(X))))

    @register_predictor("test-median")
    class Median(Predictor):
        """The training median for every network (a test predictor)."""

        def fit(self, X, y):
            self.median_ = float(np.median(self._check_y(self._check_X(X), y)))
            return self

        def predict(self, X):
            return np.full(len(self._check_X(X)), self.median_)
