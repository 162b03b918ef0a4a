"""The predictor contract every baseline (and every later predictor) follows.

``X`` is always a :class:`Networks`: the networks to predict, in one scenario, with the dataset
they come from (so op- and kernel-wise predictors reach op rows, IR graphs and model costs
through it). ``y`` is measured end-to-end latency in ms, aligned with ``X``. A predictor is a
scikit-learn estimator: the constructor only stores its keyword parameters, ``fit(X, y)``
returns self, ``predict(X)`` returns a float64 array of ms, and ``get_params``/``set_params``/
``sklearn.base.clone`` work. :class:`Estimator` gives that API without importing scikit-learn:
`latbench predict` loads a saved predictor and needs none of it (benchmarks/bench_predict_cli.py).

Predictors register themselves (``@register_predictor("flops")``) in :data:`PREDICTORS`;
``make_predictor(name, **params)`` builds one. Adding a predictor is adding one file under
``leaderboard/baselines/`` and importing it in ``leaderboard/baselines/__init__.py``, or, from a
package of one's own, an entry point in the ``latbench.predictors`` group;
``leaderboard.baselines.check_predictor`` checks a class against this contract.
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np
import pandas as pd

from foundation.registry import Registry

PREDICTORS: Registry[type] = Registry("predictor", entry_points="latbench.predictors")


def register_predictor(name: str) -> Callable[[type], type]:
    """Class decorator: registers a predictor class under ``name`` (sets ``cls.name``)."""

    def deco(cls: type) -> type:
        cls.name = name
        return PREDICTORS.register(name)(cls)

    return deco


def make_predictor(name: str, **params: Any) -> "Predictor":
    return PREDICTORS.get(name)(**params)


def sibling_scenarios(dataset: Any, scenario_id: str, same: Sequence[str]) -> list[str]:
    """The dataset's other scenarios that agree with ``scenario_id`` on the scenario columns
    ``same`` (e.g. device and framework: the same phone and framework, any core set), sorted."""
    sc = dataset.scenarios.set_index("scenario_id")
    cols = list(same)
    me = sc.loc[scenario_id, cols].astype(str)
    hit = (sc[cols].astype(str) == me).all(axis=1)
    return sorted(str(s) for s in sc.index[hit] if s != scenario_id)


@dataclass(frozen=True)
class Networks:
    """``X`` of every predictor: ``model_ids`` in scenario ``scenario_id`` of ``dataset``
    (a :class:`pipelines.dataset.load.Dataset`). Indexable like an array (an int, a slice, an
    integer or boolean array) so folds and splits are plain index arrays."""

    dataset: Any
    model_ids: tuple[str, ...]
    scenario_id: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "model_ids", tuple(str(m) for m in self.model_ids))

    @classmethod
    def of_scenario(cls, dataset: Any, scenario_id: str, model_ids: Sequence[str] | None = None) -> "Networks":
        """The networks measured end to end in a scenario (all, or the given ones in that order)."""
        if model_ids is None:
            model_ids = dataset.e2e_for(scenario_id)["model_id"].tolist()
        return cls(dataset, tuple(model_ids), scenario_id)

    def __len__(self) -> int:
        return len(self.model_ids)

    def __getitem__(self, idx: Any) -> "Networks":
        ids = np.asarray(self.model_ids, dtype=object)[idx]
        if isinstance(ids, str):
            ids = [ids]
        return Networks(self.dataset, tuple(ids), self.scenario_id)

    @property
    def shape(self) -> tuple[int]:  # lets sklearn's helpers count samples
        return (len(self),)

    def models(self) -> pd.DataFrame:
        """The models-table rows, in ``model_ids`` order (a KeyError names an unknown id)."""
        m = self.dataset.models.set_index("model_id")
        missing = [i for i in self.model_ids if i not in m.index]
        if missing:
            raise KeyError(f"models not in the dataset: {', '.join(missing[:5])}")
        return m.loc[list(self.model_ids)].reset_index()

    def y(self, value: str = "latency_ms") -> np.ndarray:
        """Measured e2e latency (ms) of these networks in the scenario, aligned with ``model_ids``."""
        e = self.dataset.e2e_for(self.scenario_id).set_index("model_id")[value]
        missing = [i for i in self.model_ids if i not in e.index]
        if missing:
            raise KeyError(f"{self.scenario_id}: no e2e measurement for {', '.join(missing[:5])}")
        return e.loc[list(self.model_ids)].to_numpy(dtype="float64")

    def ops(self) -> pd.DataFrame:
        """Op rows of these networks in the scenario (the dataset's ops table)."""
        ops = self.dataset.ops_for(self.scenario_id)
        return ops[ops["model_id"].isin(set(self.model_ids))].reset_index(drop=True)

    def graphs(self) -> list:
        """The IR graphs as the scenario ran them (stored, or rebuilt from their recipe, then the
        scenario's ``graph_passes``; cached by the dataset)."""
        return [self.dataset.graph(m, self.scenario_id) for m in self.model_ids]


#: The least latency a sum of costs answers with (ms). An op-wise model clips each op at 0, so a
#: network far outside its training ones (a ViT-B after a handful of CNNs) can sum to 0 on every
#: op; it then says "faster than anything", a value the board scores (about 100% off) where a 0
#: would be refused as no prediction.
MIN_MS = 1e-6


class Estimator:
    """scikit-learn's estimator API as :class:`sklearn.base.BaseEstimator` and ``RegressorMixin``
    give it (``get_params``/``set_params`` read the constructor's keywords, ``clone`` rebuilds from
    them, ``score`` is R^2, the tags say regressor), without importing scikit-learn here."""

    @classmethod
    def _get_param_names(cls) -> list[str]:
        if cls.__init__ is object.__init__:
            return []
        params = [q for q in inspect.signature(cls.__init__).parameters.values()
                  if q.name != "self" and q.kind != q.VAR_KEYWORD]
        if any(q.kind == q.VAR_POSITIONAL for q in params):
            raise RuntimeError(f"{cls.__name__}: a predictor's constructor takes keyword parameters, not *args")
        return sorted(q.name for q in params)

    def get_params(self, deep: bool = True) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key in self._get_param_names():
            value = getattr(self, key)
            if deep and hasattr(value, "get_params") and not isinstance(value, type):
                out.update((f"{key}__{k}", v) for k, v in value.get_params().items())
            out[key] = value
        return out

    def set_params(self, **params: Any) -> "Estimator":
        valid = self.get_params(deep=True)
        nested: dict[str, dict[str, Any]] = {}
        for key, value in params.items():
            key, delim, sub = key.partition("__")
            if key not in valid:
                raise ValueError(f"Invalid parameter {key!r} for estimator {self}. Valid parameters are: "
                                 f"{self._get_param_names()!r}.")
            if delim:
                nested.setdefault(key, {})[sub] = value
            else:
                setattr(self, key, value)
                valid[key] = value
        for key, sub_params in nested.items():
            valid[key].set_params(**sub_params)
        return self

    def __repr__(self) -> str:
        defaults = {k: q.default for k, q in inspect.signature(type(self).__init__).parameters.items()}
        changed = [f"{k}={v!r}" for k, v in self.get_params(deep=False).items()
                   if not (k in defaults and repr(defaults[k]) == repr(v))]
        return f"{type(self).__name__}({', '.join(changed)})"

    def score(self, X: Any, y: Any, sample_weight: Any = None) -> float:
        """R^2 of ``predict(X)`` against ``y`` (scikit-learn's regressor score)."""
        from sklearn.metrics import r2_score

        return float(r2_score(y, self.predict(X), sample_weight=sample_weight))

    def __sklearn_tags__(self) -> Any:
        from sklearn.utils import RegressorTags, Tags, TargetTags

        return Tags(estimator_type="regressor", target_tags=TargetTags(required=True), regressor_tags=RegressorTags())


class Predictor(Estimator):
    """Base class: subclasses implement ``fit(X: Networks, y)`` and ``predict(X) -> ms``.

    Op- or kernel-wise predictors also implement ``predict_parts(X) -> DataFrame`` with one row
    per predicted op or kernel (``model_id``, an index column, ``predicted_ms``)."""

    name: str = "predictor"
    #: True when ``fit`` reads nothing of ``X.dataset`` but the training networks' graphs and their
    #: e2e latency ``y``, and ``predict`` nothing but the graphs: a fold's predictions then depend
    #: only on the scenario, the networks and those labels, so the board fits them once for all
    #: tracks with that fold (host-random and host-fewshot-900, a track and its ``-kernels`` twin;
    #: leaderboard.run.FoldCache). tests/test_predictor_conformance.py checks the claim.
    e2e_only: bool = False

    def _check_X(self, X: Any) -> Networks:
        if not isinstance(X, Networks):
            raise TypeError(f"{type(self).__name__}: X must be a Networks (got {type(X).__name__})")
        return X

    @staticmethod
    def _check_y(X: Networks, y: Any) -> np.ndarray:
        y = np.asarray(y, dtype="float64")
        if y.shape != (len(X),):
            raise ValueError(f"y has shape {y.shape}, expected ({len(X)},) to match X")
        if not np.all(np.isfinite(y)) or np.any(y <= 0):
            raise ValueError("y must be finite latencies > 0 (ms)")
        return y
