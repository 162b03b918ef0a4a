"""Fitting a calibration's predictor and stating its accuracy.

Two kinds of candidate are scored by k-fold cross-validation over the calibration networks (the
held-out networks are not looked at until the chosen one is fitted):

- **from scratch**: the shelf's candidate predictors (:data:`shelf.readers.READERS`) that the
  measured data can train: ``additive_mlp`` learns operator costs from e2e latencies alone; the
  op-wise USC models need op rows (a calibration measured with ``--granularity op``). Each with
  the parameters of ``conf/predictor/<name>.yaml``.
- **transfer from the zoo**: every shelf entry (the committed shelf's and the user's) of a
  scenario with the same framework, accelerator and precision, its predictions on the
  calibration networks rescaled as ``a * p + b`` (``a > 0``, ``b >= 0``: a faster or slower
  device, a fixed overhead), fitted by non-negative least squares on relative errors. A device
  like one the zoo knows needs only those two numbers; the cross-validation says whether it is.

The candidate with the lowest cross-validated MAPE is fitted on every calibration network and
its error on the held-out networks is what the entry states.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from . import CalibrateError

TRANSFER = "transfer:"  # candidate name prefix of a rescaled zoo entry


@dataclass
class Scored:
    name: str  # a predictor name, or TRANSFER + source scenario
    cv_mape: float
    seconds: float
    detail: dict[str, Any] = field(default_factory=dict)


def folds(n: int, k: int, seed: int) -> list[np.ndarray]:
    """Test index arrays of a seeded k-fold split of ``n`` networks."""
    order = np.random.default_rng(seed).permutation(n)
    return [order[i::k] for i in range(min(k, n))]


def mape(y: np.ndarray, p: np.ndarray) -> float:
    return float(100.0 * np.mean(np.abs(p - y) / y))


# ---------------------------------------------------------------- from scratch
def scratch_names(dataset: Any, scenario_id: str) -> list[str]:
    """The shelf candidates the measured tables can train (see the module doc)."""
    from ..readers import OPWISE, READERS

    has_ops = len(dataset.ops_for(scenario_id)) > 0
    return [n for n, r in READERS.items() if r is not OPWISE or has_ops]


def make(name: str, dataset: Any, scenario_id: str, overrides: dict[str, Any] | None = None) -> Any:
    """Predictor ``name`` with ``conf/predictor/<name>.yaml``'s parameters (and ``overrides``)."""
    from leaderboard.baselines import make_predictor
    from leaderboard.train import predictor_params

    from ..build import fit_params

    return make_predictor(name, **fit_params(name, predictor_params(name, overrides), dataset, scenario_id))


def fit_scratch(name: str, dataset: Any, scenario_id: str, ids: Sequence[str],
                overrides: dict[str, Any] | None = None) -> Any:
    from leaderboard.baselines import Networks

    X = Networks(dataset, tuple(ids), scenario_id)
    return make(name, dataset, scenario_id, overrides).fit(X, X.y())


def cv_scratch(name: str, dataset: Any, scenario_id: str, ids: Sequence[str], k: int, seed: int,
               overrides: dict[str, Any] | None = None) -> Scored:
    from leaderboard.baselines import Networks

    t0 = time.perf_counter()
    ids = list(ids)
    y = Networks(dataset, tuple(ids), scenario_id).y()
    pred = np.full(len(ids), np.nan)
    for test in folds(len(ids), k, seed):
        train = [ids[i] for i in np.setdiff1d(np.arange(len(ids)), test)]
        est = fit_scratch(name, dataset, scenario_id, train, overrides)
        pred[test] = est.predict(Networks(dataset, tuple(ids[i] for i in test), scenario_id))
    return Scored(name, mape(y, pred), time.perf_counter() - t0)


# ---------------------------------------------------------------- transfer from the zoo
def _scenario_parts(scenario_id: str) -> tuple[str, ...]:
    return tuple(scenario_id.split("-"))


def transfer_sources(shelf: Any, framework: str, accelerator: str, precision: str,
                     exclude: str | None = None) -> list[str]:
    """Shelf scenarios of the same framework, accelerator and precision (scenario ids name them)."""
    out = []
    for sid in shelf.scenarios():
        parts = _scenario_parts(sid)
        if sid == exclude or len(parts) < 4:
            continue
        if framework in parts and accelerator in parts and parts[-1] == precision:
            out.append(sid)
    return out


def fit_scale(p: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """(a, b) >= 0 minimising the relative squared error of ``a * p + b`` against ``y``."""
    from scipy.optimize import nnls

    w = 1.0 / y
    A = np.stack([p * w, w], axis=1)
    (a, b), _ = nnls(A, np.ones_like(y))
    if a <= 0:
        raise CalibrateError("transfer: the zoo's predictions do not grow with the measured latencies")
    return float(a), float(b)


def cv_transfer(source: str, p: np.ndarray, y: np.ndarray, k: int, seed: int) -> Scored:
    t0 = time.perf_counter()
    pred = np.full(len(y), np.nan)
    for test in folds(len(y), k, seed):
        train = np.setdiff1d(np.arange(len(y)), test)
        try:
            a, b = fit_scale(p[train], y[train])
        except CalibrateError:
            return Scored(TRANSFER + source, float("inf"), time.perf_counter() - t0)
        pred[test] = a * p[test] + b
    a, b = fit_scale(p, y)
    return Scored(TRANSFER + source, mape(y, pred), time.perf_counter() - t0, {"a": a, "b": b})


def zoo_predictions(shelf: Any, source: str, graphs: Sequence[Any]) -> np.ndarray | None:
    """The shelf entry's predictions of ``graphs``, or None when it cannot price one of them."""
    from .. import ShelfError

    try:
        p = np.asarray(shelf.predict(list(graphs), source), dtype="float64")
    except ShelfError:
        return None
    return p if np.all(np.isfinite(p)) and np.all(p > 0) else None


def score_candidates(dataset: Any, scenario_id: str, ids: Sequence[str], graphs: Sequence[Any], y: np.ndarray,
                     shelf: Any, parts: tuple[str, str, str], k: int = 5, seed: int = 0,
                     say: Callable[[str], None] = lambda line: None, exclude: str | None = None,
                     params: dict[str, dict[str, Any]] | None = None) -> list[Scored]:
    """Every candidate with its cross-validated MAPE on the calibration networks, best first;
    ``params``: predictor name -> parameter overrides of a from-scratch candidate."""
    scored = []
    for name in scratch_names(dataset, scenario_id):
        s = cv_scratch(name, dataset, scenario_id, ids, k, seed, (params or {}).get(name))
        say(f"  {name}: cross-validated MAPE {s.cv_mape:.1f}% ({s.seconds:.0f} s)")
        scored.append(s)
    if shelf is not None:
        for src in transfer_sources(shelf, *parts, exclude=exclude):
            p = zoo_predictions(shelf, src, graphs)
            if p is None:
                continue
            s = cv_transfer(src, p, y, k, seed)
            scored.append(s)
        best_t = sorted((s for s in scored if s.name.startswith(TRANSFER)), key=lambda s: s.cv_mape)[:3]
        for s in best_t:
            say(f"  {s.name}: cross-validated MAPE {s.cv_mape:.1f}% (x{s.detail.get('a', float('nan')):.3f} "
                f"+ {s.detail.get('b', float('nan')):.3f} ms)")
    if not scored:
        raise CalibrateError(f"{scenario_id}: no candidate predictor can be fitted on these measurements")
    return sorted(scored, key=lambda s: s.cv_mape)


__all__ = ["Scored", "TRANSFER", "cv_scratch", "cv_transfer", "fit_scale", "fit_scratch", "folds", "mape",
           "score_candidates", "scratch_names", "transfer_sources", "zoo_predictions"]
