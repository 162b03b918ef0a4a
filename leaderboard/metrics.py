"""Accuracy metrics of latency predictions: the error metrics of nn-Meter and the USC study,
and the rank correlations HELP and NAS need.

Every metric takes ``(y_true, y_pred)`` (measured and predicted ms, or the unit of the track's
target; 1-D, same length, finite, > 0; :mod:`leaderboard.evaluator` checks that before calling)
and returns a float:

- ``mape``: mean absolute percentage error, in % (USC study, Sec. 5);
- ``rmspe``: root mean squared percentage error, in % (nn-Meter, Sec. 7; its ``latency_metrics``
  multiplies by 100 as we do);
- ``rmse``: root mean squared error, in ms (in MB on a peak-memory track);
- ``acc5`` / ``acc10``: share of networks whose relative error ``|pred - true| / true`` is at most
  5% / 10% (nn-Meter's headline metric; the bound is inclusive, as in nn-Meter's ``get_accuracy``),
  a fraction in [0, 1];
- ``spearman`` / ``kendall``: rank correlation (scipy's Spearman rho, Kendall tau-b), HELP's
  metric (Table 3); NaN when either side is constant (a rank correlation is undefined there).

Metrics register in :data:`METRICS` with their direction, so the board knows how to sort.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable, Mapping

import numpy as np
import pandas as pd

from foundation.registry import Registry


@dataclass(frozen=True)
class Metric:
    name: str
    fn: Callable[[np.ndarray, np.ndarray], float]
    higher_is_better: bool
    unit: str  # "%", "ms", "fraction", ""
    label: str  # column header on the board

    def __call__(self, y_true: np.ndarray, y_pred: np.ndarray) -> float:
        return float(self.fn(np.asarray(y_true, dtype="float64"), np.asarray(y_pred, dtype="float64")))

    def label_in(self, unit: str = "ms") -> str:
        """The column header on a track whose target is in ``unit`` (the track's status ``unit``):
        a metric in the target's unit (RMSE) names that unit, MB on a peak-memory track."""
        if self.unit != "ms" or unit == "ms":
            return self.label
        return self.label.removesuffix(" ms") + f" {unit}"

    def better(self, a: float, b: float) -> bool:
        """True when value ``a`` ranks above ``b`` (NaN ranks last)."""
        if np.isnan(b):
            return not np.isnan(a)
        if np.isnan(a):
            return False
        return a > b if self.higher_is_better else a < b


METRICS: Registry[Metric] = Registry("metric", entry_points="latbench.metrics")


def register_metric(name: str, higher_is_better: bool, unit: str, label: str):
    def deco(fn: Callable[[np.ndarray, np.ndarray], float]) -> Callable:
        METRICS.register(name)(Metric(name, fn, higher_is_better, unit, label))
        return fn

    return deco


def _rel(y_true: np.ndarray, y_pred: np.ndarray) -> np.ndarray:
    return (y_pred - y_true) / y_true


@register_metric("mape", higher_is_better=False, unit="%", label="MAPE %")
def mape(y_true: np.ndarray, y_pred: np.ndarray) -> float:
    return float(np.mean(np.abs(_rel(y_true, y_pred))) * 100.0)


@register_metric("rmspe", higher_is_better=False, unit="%", label="RMSPE %")
def rmspe(y_true: np.ndarray, y_pred: np.ndarray) -> float:
    return float(np.sqrt(np.mean(np.square(_rel(y_true, y_pred)))) * 100.0)


@register_metric("rmse", higher_is_better=False, unit="ms", label="RMSE ms")
def rmse(y_true: np.ndarray, y_pred: np.ndarray) -> float:
    return float(np.sqrt(np.mean(np.square(y_pred - y_true))))


def within(y_true: np.ndarray, y_pred: np.ndarray, bound: float) -> float:
    """Share of predictions with relative error at most ``bound`` (inclusive, like nn-Meter)."""
    return float(np.mean(np.abs(_rel(y_true, y_pred)) <= bound))


@register_metric("acc5", higher_is_better=True, unit="fraction", label="±5% acc")
def acc5(y_true: np.ndarray, y_pred: np.ndarray) -> float:
    return within(y_true, y_pred, 0.05)


@register_metric("acc10", higher_is_better=True, unit="fraction", label="±10% acc")
def acc10(y_true: np.ndarray, y_pred: np.ndarray) -> float:
    return within(y_true, y_pred, 0.10)


def _constant(a: np.ndarray) -> bool:
    return a.size < 2 or bool(np.all(a == a[0]))


@register_metric("spearman", higher_is_better=True, unit="", label="Spearman ρ")
def spearman(y_true: np.ndarray, y_pred: np.ndarray) -> float:
    from scipy.stats import spearmanr

    if _constant(y_true) or _constant(y_pred):
        return float("nan")
    return float(spearmanr(y_true, y_pred).statistic)


@register_metric("kendall", higher_is_better=True, unit="", label="Kendall τ")
def kendall(y_true: np.ndarray, y_pred: np.ndarray) -> float:
    from scipy.stats import kendalltau

    if _constant(y_true) or _constant(y_pred):
        return float("nan")
    return float(kendalltau(y_true, y_pred).statistic)


DEFAULT_METRICS = ("mape", "rmspe", "rmse", "acc5", "acc10", "spearman", "kendall")


def compute(y_true: np.ndarray, y_pred: np.ndarray, names: Iterable[str] = DEFAULT_METRICS) -> dict[str, float]:
    """All named metrics of one set of predictions (no input checks: see the evaluator)."""
    return {n: METRICS.get(n)(y_true, y_pred) for n in names}


def aggregate(per_scenario: Mapping[str, Mapping[str, float]], names: Iterable[str] = DEFAULT_METRICS) -> dict[str, float]:
    """The board's aggregate: the unweighted mean over scenarios of each metric (every scenario
    counts once, however many networks it has; NaN scenarios are left out of that metric's mean)."""
    df = pd.DataFrame.from_dict(dict(per_scenario), orient="index")
    out = {}
    for n in names:
        col = df[n].astype("float64") if n in df else pd.Series(dtype="float64")
        out[n] = float(col.mean()) if col.notna().any() else float("nan")
    return out


__all__ = ["METRICS", "DEFAULT_METRICS", "Metric", "register_metric", "compute", "aggregate", "within",
           "mape", "rmspe", "rmse", "acc5", "acc10", "spearman", "kendall"]
