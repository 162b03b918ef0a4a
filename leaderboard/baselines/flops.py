"""nn-Meter's network-level baselines (Zhang et al., MobiSys'21, Section 6, "FLOPs" and
"FLOPs+MAC"): end-to-end latency as a linear function of the network's FLOPs, or of its FLOPs and
memory access cost.

FLOPs are the IR's multiply-accumulates of convolutions and FC layers (``models.flops``), memory
access the bytes read and written at fp32 (``models.memory_bytes_fp32``: feature maps in and out of
every node plus parameters); both from the models table where filled, else computed from the IR
graph (cached per graph object, which the views of a dataset that train each scenario share).
The fit is least squares with non-negative coefficients and intercept (``scipy.optimize.nnls``):
a cost per FLOP, per byte or per inference cannot be negative, and an unconstrained fit over
latencies spanning 100x puts small networks below zero (on the USC real CNNs it predicted
negative ms for ~190 of them, which the leaderboard rejects).
Features are in GFLOPs and GB so the coefficients read as ms per GFLOP / GB. The costs are the
network's as written, also in a scenario whose toolchain rewrote it (``scenarios.graph_passes``,
HELP's raspi4): the reference every predictor is compared with is the naive one, as in the FLOPs
rows HELP and nn-Meter publish.
"""
from __future__ import annotations

import weakref
from typing import Any

import numpy as np
import pandas as pd

from .base import Networks, Predictor, register_predictor

_COSTS: "weakref.WeakKeyDictionary[Any, dict[str, tuple[float, float]]]" = weakref.WeakKeyDictionary()
_GRAPH_COSTS: "weakref.WeakKeyDictionary[Any, tuple[int, tuple[int, int]]]" = weakref.WeakKeyDictionary()


def graph_costs(graph: Any) -> tuple[int, int]:
    """(MACs, bytes of memory access at fp32) of an IR graph, remembered per graph object (a
    graph that grew since is counted again, as :func:`.features.ir_config_ids` does)."""
    hit = _GRAPH_COSTS.get(graph)
    if hit is None or hit[0] != len(graph.nodes):
        s = graph.summary()  # one pass over the nodes for both
        hit = _GRAPH_COSTS[graph] = (len(graph.nodes), (s["flops"], s["memory_bytes"]["fp32"]))
    return hit[1]


def network_costs(X: Networks) -> np.ndarray:
    """[n, 2]: (GFLOPs as MACs, GB of memory access at fp32) per network of X."""
    cache = _COSTS.setdefault(X.dataset, {})
    missing = [m for m in X.model_ids if m not in cache]
    if missing:
        models = X.dataset.models.set_index("model_id")
        unknown = [m for m in missing if m not in models.index]
        if unknown:
            raise KeyError(f"models not in the dataset: {', '.join(unknown[:5])}")
        rows = models.loc[missing, ["flops", "memory_bytes_fp32"]]
        for mid, f, mem in zip(missing, rows["flops"], rows["memory_bytes_fp32"]):
            if pd.isna(f) or pd.isna(mem):  # imported without IR costs: count them on the graph
                f, mem = graph_costs(X.dataset.graph(mid))
            cache[mid] = (float(f) / 1e9, float(mem) / 1e9)
    return np.asarray([cache[m] for m in X.model_ids], dtype="float64").reshape(-1, 2)


class _LinearCost(Predictor):
    columns: tuple[int, ...] = (0,)
    e2e_only = True  # graphs and training e2e only (base.Predictor.e2e_only)

    def __init__(self, fit_intercept: bool = True):
        self.fit_intercept = fit_intercept

    def fit(self, X: Networks, y: Any) -> "_LinearCost":
        from scipy.optimize import nnls

        X = self._check_X(X)
        y = self._check_y(X, y)
        F = network_costs(X)[:, list(self.columns)]
        A = np.hstack([F, np.ones((len(F), 1))]) if self.fit_intercept else F
        w, _ = nnls(A, y)
        self.coef_ = np.asarray(w[: F.shape[1]], dtype="float64")
        self.intercept_ = float(w[-1]) if self.fit_intercept else 0.0
        return self

    def predict(self, X: Networks) -> np.ndarray:
        X = self._check_X(X)
        if not hasattr(self, "coef_"):
            raise RuntimeError(f"{self.name}: not fitted (call fit first)")
        return network_costs(X)[:, list(self.columns)] @ self.coef_ + self.intercept_

    def _get_state(self, store) -> dict:
        return {"coef": self.coef_.tolist(), "intercept": self.intercept_}

    def _set_state(self, s: dict, store) -> None:
        from .persist import array, number

        self.coef_ = array(s, "coef", length=len(self.columns))
        self.intercept_ = number(s, "intercept")


@register_predictor("flops")
class FlopsLinear(_LinearCost):
    """e2e ms = a * GFLOPs + b."""

    columns = (0,)


@register_predictor("flops_mac")
class FlopsMacLinear(_LinearCost):
    """e2e ms = a * GFLOPs + c * GB of memory access + b."""

    columns = (0, 1)


__all__ = ["FlopsLinear", "FlopsMacLinear", "network_costs"]
