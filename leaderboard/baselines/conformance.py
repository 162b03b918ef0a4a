"""The predictor contract as a check anyone can run on their own class (scikit-learn's
``check_estimator`` is the model): ``check_predictor(MyPredictor)``.

It fits and predicts on a small slice of the committed host release (``datasets/host-v1``,
which every checkout has) and checks what the leaderboard relies on (base.py): the scikit-learn
parameter API and ``clone``; ``fit`` returns self and leaves the parameters alone; ``predict``
gives one finite, positive float64 per network and an empty array for no networks; a seed makes
it deterministic; wrong input (not :class:`Networks`, misaligned or non-positive ``y``, predicting
before fitting) is a clear error; a predictor that says it prices networks part by part
(``predict_parts``) sums to its prediction; one that can be saved predicts the same after
loading. Every failed check is listed, one line each, in a :class:`ConformanceError`.
"""
from __future__ import annotations

import inspect
import tempfile
from pathlib import Path
from typing import Any, Callable

import numpy as np

from .base import PREDICTORS, Networks

RELEASE = Path(__file__).resolve().parents[2] / "datasets" / "host-v1"
SCENARIO = "host-tflite-cpu-1large-fp32"
NETWORKS = 40


class ConformanceError(AssertionError):
    """The checks a predictor class failed, one line each."""

    def __init__(self, name: str, failures: list[str]):
        self.failures = failures
        super().__init__(f"{name}: {len(failures)} check(s) failed:\n" + "\n".join(f"- {f}" for f in failures))


def sample(release: str | Path = RELEASE, scenario: str = SCENARIO, n: int = NETWORKS) -> tuple[Networks, np.ndarray]:
    """``n`` networks of ``scenario`` (every n-th of the release's, in id order) and their latency."""
    from pipelines.dataset.load import load_dataset

    ds = load_dataset(release)
    ids = sorted(ds.e2e_for(scenario)["model_id"])
    X = Networks.of_scenario(ds, scenario, ids[:: max(1, len(ids) // n)][:n])
    return X, X.y()


def check_predictor(predictor: type | str, params: dict[str, Any] | None = None,
                    data: tuple[Networks, np.ndarray] | None = None) -> None:
    """Run every check on ``predictor`` (a class, or a registered name) built with ``params``
    (small settings keep it quick); raise :class:`ConformanceError` listing the failures."""
    cls = PREDICTORS.get(predictor) if isinstance(predictor, str) else predictor
    params = dict(params or {})
    X, y = data or sample()
    half = np.arange(len(X)) % 2 == 0
    failures: list[str] = []

    def check(what: str, fn: Callable[[], Any]) -> Any:
        try:
            return fn()
        except Exception as e:  # a failed check, named; the others still run
            failures.append(f"{what}: {type(e).__name__}: {' '.join(str(e).split())[:300]}")
            return None

    def make() -> Any:
        return cls(**params)

    check("constructor", lambda: _params_api(cls, make()))
    fitted = check("fit", lambda: _fit(make(), X[half], y[half]))
    if fitted is not None:
        check("predict", lambda: _predict(fitted, X[~half]))
        check("predict_parts", lambda: _parts(fitted, X[~half]))
        check("clone", lambda: _clone(fitted, params))
        check("save and load", lambda: _save_load(fitted, X[~half]))
    check("wrong input", lambda: _wrong_input(make(), X, y))
    if "random_state" in make().get_params():
        check("seed", lambda: _seeded(cls, params, X, y))
    if failures:
        raise ConformanceError(getattr(cls, "name", cls.__name__), failures)


def _params_api(cls: type, p: Any) -> None:
    if not all(callable(getattr(p, m, None)) for m in ("get_params", "set_params")):
        raise TypeError("a predictor has scikit-learn's estimator API, get_params and set_params (derive from "
                        "leaderboard.baselines.Predictor, or from sklearn.base.BaseEstimator)")
    sig = [n for n, q in inspect.signature(cls.__init__).parameters.items()
           if n != "self" and q.kind not in (q.VAR_POSITIONAL, q.VAR_KEYWORD)]
    if sorted(p.get_params()) != sorted(sig):
        raise ValueError(f"get_params() {sorted(p.get_params())} is not the constructor's keywords {sorted(sig)}")


def _fit(p: Any, X: Networks, y: np.ndarray) -> Any:
    before = repr(p.get_params())
    out = p.fit(X, y)
    if out is not p:
        raise ValueError("fit must return self")
    if repr(p.get_params()) != before:
        raise ValueError("fit changed the constructor's parameters (store fitted state in attributes ending in _)")
    return p


def _predict(p: Any, X: Networks) -> None:
    pred = p.predict(X)
    if not isinstance(pred, np.ndarray) or pred.dtype != np.float64 or pred.shape != (len(X),):
        raise ValueError(f"predict must return a float64 array of shape ({len(X)},), got "
                         f"{type(pred).__name__} {getattr(pred, 'dtype', '')} {getattr(pred, 'shape', '')}")
    if not np.all(np.isfinite(pred)) or not np.all(pred > 0):
        raise ValueError("predict must return finite latencies > 0 ms (the board refuses others)")
    empty = p.predict(X[:0])
    if not isinstance(empty, np.ndarray) or empty.shape != (0,):
        raise ValueError("predict on no networks must return an empty array")


def _parts(p: Any, X: Networks) -> None:
    if not hasattr(p, "predict_parts"):
        return
    parts = p.predict_parts(X)
    if not {"model_id", "predicted_ms"} <= set(parts.columns):
        raise ValueError("predict_parts must give model_id and predicted_ms columns")
    sums = parts.groupby("model_id")["predicted_ms"].sum().reindex(list(X.model_ids), fill_value=0.0)
    np.testing.assert_allclose(sums.to_numpy() + getattr(p, "overhead_ms_", 0.0), p.predict(X), rtol=1e-9)


def _clone(p: Any, params: dict[str, Any]) -> None:
    from sklearn.base import clone

    c = clone(p)
    if c is p or c.get_params() != p.get_params():
        raise ValueError("clone must give a new predictor with the same parameters")
    if any(k.endswith("_") and not k.startswith("_") for k in vars(c)):
        raise ValueError("a clone of a fitted predictor must be unfitted (no attributes ending in _)")
    try:
        p.set_params(no_such_parameter=1)
    except ValueError:
        return
    raise ValueError("set_params must refuse an unknown parameter with ValueError")


def _save_load(p: Any, X: Networks) -> None:
    if not hasattr(p, "_get_state"):
        return  # saving is optional: a predictor without it is retrained, not loaded
    from .persist import load_predictor, save_predictor

    with tempfile.TemporaryDirectory() as tmp:
        q = load_predictor(save_predictor(p, Path(tmp) / "saved"))
        np.testing.assert_array_equal(q.predict(X), p.predict(X))


def _wrong_input(p: Any, X: Networks, y: np.ndarray) -> None:
    for what, call, kinds in (
            ("predict before fit", lambda: p.predict(X), (RuntimeError, ValueError, AttributeError)),
            ("fit on a plain array", lambda: p.fit(np.zeros((len(y), 3)), y), (TypeError, ValueError)),
            ("fit with y of another length", lambda: p.fit(X, y[:-1]), (ValueError,)),
            ("fit with latencies <= 0", lambda: p.fit(X, -y), (ValueError,))):
        try:
            call()
        except kinds:
            continue
        except Exception as e:
            raise ValueError(f"{what}: raised {type(e).__name__}, expected one of "
                             f"{', '.join(k.__name__ for k in kinds)}") from None
        raise ValueError(f"{what}: no error")


def _seeded(cls: type, params: dict[str, Any], X: Networks, y: np.ndarray) -> None:
    a = cls(**{**params, "random_state": 3}).fit(X, y).predict(X)
    b = cls(**{**params, "random_state": 3}).fit(X, y).predict(X)
    np.testing.assert_array_equal(a, b, err_msg="the same random_state must give the same predictions")


__all__ = ["ConformanceError", "check_predictor", "sample"]
