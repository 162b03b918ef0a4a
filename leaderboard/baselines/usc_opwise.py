"""The USC study's op-wise predictors (Li, Paolieri, Golubchik, Section 4.2): one latency model per
op type, end-to-end latency = T_overhead + the sum of the predicted op latencies.

``usc_lasso`` (non-negative Lasso on the mean squared percentage error, Eq. (1), alpha by grid
search), ``usc_rf`` (random forest), ``usc_gbdt`` (LightGBM) here; ``usc_mlp`` in :mod:`.mlp`;
``lookup`` in :mod:`.lookup` shares the machinery (:class:`OpWisePredictor`).

**Where the op models learn from.** ``target="auto"`` picks per fit:

- ``"ops"`` when the training networks have measured op times in the scenario (the dataset's
  ops table, e.g. the USC GPU op files): each op model is fitted on the ops of its type (ops
  without a time, e.g. fused into another op's kernel, are left out), and
  ``T_overhead = mean(e2e - sum of measured op times)`` over the training networks whose ops
  were all measured (the paper's definition, Fig. 9). Op times that sum to more than
  :data:`MAX_OPS_OVER_E2E` times the e2e latency were measured in another configuration than
  the e2e run (the host's op records run LiteRT's builtin kernels, XNNPACK off: well over e2e): a
  large negative T_overhead would follow (it gave negative latencies), so ``auto`` treats them
  as absent and fits e2e (``mode_why_`` says why) and ``target="ops"`` refuses them.
- ``"e2e"`` when they have only end-to-end times (the public USC CPU data; the paper measured CPU
  op times with the TFLite benchmark tool, but the published files hold only e2e for CPUs): the
  op models are fitted *through the sum*. A linear op model sums over a network into a linear
  function of per-type op counts and feature sums, so the non-negative Lasso of Eq. (1) is
  fitted directly on e2e latencies with T_overhead as one more non-negative intercept
  (:func:`.linear.split_e2e`). ``usc_lasso`` *is* that fit. The non-linear models cannot be
  fitted through a sum, so they are fitted on op times apportioned from it: each training
  network's ``e2e - T_overhead`` is divided among its ops in proportion to the Lasso split's op
  predictions, and the models learn those. Ops come from the IR (``Dataset.graph``) then.
- ``"ir"``: as ``"e2e"``, on the ops of the IR graph as the scenario ran it even where the
  ops table has rows (the host's: the framework's own operators, e.g. a layer norm's MEAN, RSQRT
  and MULs, no batch norm, which LiteRT folds). A caller that holds IR graphs only (the shelf,
  ``latbench predict``) asks about IR ops, so the models must have learnt IR ops.

**Op types.** A model per op type seen at least ``min_ops`` times in training; rarer types of one
category share a pooled model (``<category>:*``). At prediction, an op type not seen in training
uses its category's pooled model, else the category's model with the most training ops; an op
of a category with no model at all counts 0 (its time is then part of T_overhead, like the
element-wise ops the USC TFLite GPU files do not record). An op marked ``fused`` in the ops table
(no kernel of its own) counts 0. Predicted op times are clipped at 0, a network's sum at
``base.MIN_MS``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

import numpy as np
import pandas as pd

from .base import MIN_MS, Networks, Predictor, register_predictor
from .features import CONFIGS, OpFrame, category_of, op_frame
from .linear import ALPHAS, LinearOpModel, split_e2e
from .trees import ForestOpModel, LightGbmOpModel

#: Op times summing to more than this multiple of the e2e latency (median over the training
#: networks) cannot be the e2e run's: T_overhead would be negative, and large. ``auto`` then fits
#: e2e, ``target="ops"`` refuses. The USC GPU op files sum to 0.55-1.00x; the host's op records
#: (builtin kernels, XNNPACK off, while the e2e run uses XNNPACK) to well over this bound.
MAX_OPS_OVER_E2E = 1.25


@dataclass(frozen=True)
class OpTimes:
    """The training networks' measured op times in a scenario, and whether they can model e2e:
    ``has_times`` per op row (timed, not fused), ``full`` per network (every unfused op timed),
    ``sums`` per network, ``ratio`` the median of sum / e2e over the full networks."""

    has_times: np.ndarray
    full: np.ndarray
    sums: np.ndarray
    ratio: float
    n_full: int

    @classmethod
    def of(cls, frame: OpFrame, y: np.ndarray) -> "OpTimes":
        has = frame.measured[frame.net] & np.isfinite(frame.latency) & ~frame.fused
        full = frame.measured.copy()
        for n in np.unique(frame.net[frame.measured[frame.net] & ~frame.fused & ~np.isfinite(frame.latency)]):
            full[n] = False  # an op without a time that is not fused: the sum would be short
        rows = np.flatnonzero(has)
        sums = np.bincount(frame.net[rows], weights=frame.latency[rows], minlength=len(y))
        ratio = float(np.median(sums[full] / y[full])) if full.any() else 1.0
        return cls(has, full, sums, ratio, int(full.sum()))

    @property
    def usable(self) -> bool:
        """Timed ops whose sum can be the e2e latency plus an overhead (see MAX_OPS_OVER_E2E)."""
        return bool(self.has_times.any()) and self.ratio <= MAX_OPS_OVER_E2E

    def why(self, scenario_id: str) -> str:
        return (f"{scenario_id}: the training networks' op times sum to {self.ratio:.2f}x their e2e latency (median "
                f"over {self.n_full} networks): they were not measured the way the e2e run executes (e.g. the host's "
                "op records: builtin kernels with XNNPACK off), so e2e = T_overhead + sum of ops cannot hold")


OP_MODELS: dict[str, type] = {"linear": LinearOpModel, "forest": ForestOpModel, "lightgbm": LightGbmOpModel}
TARGETS = ("auto", "ops", "e2e", "ir")


def register_op_model(kind: str, cls: type) -> type:
    """Op model kinds by name, so a saved predictor's state names the class that reads it."""
    OP_MODELS[kind] = cls
    return cls


class OpWisePredictor(Predictor):
    """Base of the op-wise predictors: subclasses implement ``_fit_op_model(F, y, category)``.

    Fitted attributes: ``mode_`` ("ops" or "e2e"), ``overhead_ms_`` (T_overhead), ``models_``
    (group key -> op model), ``type_key_`` (op type -> group key), ``category_default_``
    (category -> group key used for unseen types), ``key_category_``."""

    persist_libraries: tuple[str, ...] = ()

    def __init__(self, target: str = "auto", min_ops: int = 5, random_state: int = 0):
        self.target = target
        self.min_ops = min_ops
        self.random_state = random_state

    # ------------------------------------------------------------ hooks
    def _fit_op_model(self, F: np.ndarray, y: np.ndarray, category: str) -> Any:
        raise NotImplementedError

    def _check_params(self) -> None:
        if self.target not in TARGETS:
            raise ValueError(f"{self.name}: target must be one of {', '.join(TARGETS)}, got {self.target!r}")
        if not isinstance(self.min_ops, (int, np.integer)) or self.min_ops < 1:
            raise ValueError(f"{self.name}: min_ops must be an int >= 1, got {self.min_ops!r}")

    # ------------------------------------------------------------ grouping
    def _group(self, frame: OpFrame, rows: np.ndarray) -> dict[str, np.ndarray]:
        """Training ops (positions ``rows`` of the frame) by model group key; sets ``type_key_``,
        ``key_category_`` and ``category_default_``."""
        types = frame.op_types()[rows]
        uniq, counts = np.unique(types, return_counts=True) if len(types) else (np.zeros(0, object), np.zeros(0))
        self.type_key_: dict[str, str] = {}
        for t, c in zip(uniq, counts):
            self.type_key_[str(t)] = str(t) if c >= self.min_ops else f"{category_of(str(t))}:*"
        keys = np.asarray([self.type_key_[str(t)] for t in types], dtype=object)
        groups = {k: rows[keys == k] for k in sorted(set(keys.tolist()))}
        self.key_category_ = {k: k.split(":")[0] if k.endswith(":*") else category_of(k) for k in groups}
        self.category_default_ = {}
        for k, r in sorted(groups.items(), key=lambda kv: -len(kv[1])):
            cat = self.key_category_[k]
            pooled = f"{cat}:*"
            self.category_default_.setdefault(cat, pooled if pooled in groups else k)
        return groups

    def _features(self, frame: OpFrame, rows: np.ndarray, key: str) -> np.ndarray:
        return CONFIGS.features(frame.config[rows], self.key_category_[key])

    # ------------------------------------------------------------ fit
    def fit(self, X: Networks, y: Any, table_only: bool = False) -> "OpWisePredictor":
        """``table_only``: the caller uses the per-op models alone, not the network sum (typed_nnls's
        hybrid weighs the sums itself), so op times that cannot add up to e2e are fine."""
        X = self._check_X(X)
        y = self._check_y(X, y)
        self._check_params()
        frame = op_frame(X, self._ops_source())
        times = OpTimes.of(frame, y)
        mode = "e2e" if self.target == "ir" else self.target
        self.mode_why_ = ""
        if mode == "auto":
            mode = "ops" if times.usable else "e2e"
            if times.has_times.any() and not times.usable:
                self.mode_why_ = times.why(X.scenario_id)  # kept for the record; the e2e fit is the one that holds
        if mode == "ops" and not times.has_times.any():
            raise ValueError(f"{self.name}: target='ops' but no training network has op times in {X.scenario_id}")
        if mode == "ops" and not times.usable and not table_only:
            raise ValueError(f"{self.name}: target='ops': {times.why(X.scenario_id)}")
        self.mode_ = mode
        if mode == "ops":
            rows = np.flatnonzero(times.has_times)
            groups = self._group(frame, rows)
            targets = frame.latency
            full, sums = times.full, times.sums
            self.overhead_ms_ = float(np.mean(y[full] - sums[full])) if full.any() else 0.0
        else:
            rows = np.flatnonzero(~frame.fused)
            groups = self._group(frame, rows)
            alphas, folds = self._split_grid()
            split = split_e2e(frame.net, {k: self._features(frame, r, k) for k, r in groups.items()}, groups, y,
                              alphas=alphas, folds=folds, seed=self.random_state)
            self.overhead_ms_ = split.overhead_ms
            self.split_alpha_ = split.alpha
            targets = self._apportion(frame, groups, split, y)
            if self._fits_split_directly():
                self.models_ = dict(split.models)
                self.n_train_ops_ = {k: int(len(r)) for k, r in groups.items()}
                return self
        self.models_ = {}
        self.n_train_ops_ = {}
        for k, r in groups.items():
            t = targets[r]
            ok = np.isfinite(t) & (t > 0)
            if not ok.any():
                continue
            self.models_[k] = self._fit_op_model(self._features(frame, r[ok], k), t[ok], self.key_category_[k])
            self.n_train_ops_[k] = int(ok.sum())
        return self

    def _ops_source(self) -> str:
        """Where ``op_frame`` reads a network's ops: the IR alone for ``target="ir"``."""
        return "ir" if self.target == "ir" else "auto"

    def _fits_split_directly(self) -> bool:
        return False

    def _split_grid(self) -> tuple[tuple[float, ...], int]:
        """(alpha grid, CV folds) of the linear e2e split (usc_lasso uses its own parameters)."""
        return ALPHAS, 5

    def _apportion(self, frame: OpFrame, groups: dict[str, np.ndarray], split: Any, y: np.ndarray) -> np.ndarray:
        """Per-op training targets from e2e times: each network's ``e2e - T_overhead`` divided
        among its ops in proportion to the linear split's op predictions (at least 5% of the
        network's e2e is given to its ops, so a network faster than T_overhead still has some)."""
        pred = np.zeros(len(frame.config))
        for k, r in groups.items():
            m = split.models[k]
            pred[r] = np.maximum(m.predict(self._features(frame, r, k)), 0.0)
        total = np.bincount(frame.net, weights=pred, minlength=frame.n_nets)
        share = np.maximum(y - split.overhead_ms, 0.05 * y)
        scale = np.divide(share, total, out=np.zeros_like(share), where=total > 0)
        out = pred * scale[frame.net]
        for r in groups.values():  # a floor per group: the percentage loss needs targets > 0
            pos = out[r][out[r] > 0]
            if len(pos):
                out[r] = np.maximum(out[r], 1e-3 * np.median(pos))
        return out

    # ------------------------------------------------------------ predict
    def _check_fitted(self) -> None:
        if not hasattr(self, "models_"):
            raise RuntimeError(f"{self.name}: not fitted (call fit first)")

    def _key_of_type(self, op_type: str) -> str | None:
        k = self.type_key_.get(op_type)
        if k is not None:
            # A type seen in training speaks through its own group only. Its group has no model
            # when the e2e split gave all its ops 0 ms (TFLite folds/fuses them): it then
            # predicts 0 ms, as usc_lasso does. Falling back to the category's pooled model
            # would price e.g. every ADD like the few large rare ops (SLICE) that pool was fitted on.
            return k if k in self.models_ else None
        cat = category_of(op_type)
        k = self.category_default_.get(cat)
        return k if k in self.models_ else None

    def unseen_types(self, op_types: Iterable[str]) -> list[str]:
        """The op types this predictor cannot speak for: never in its training ops and in no
        category it has a model of. (A type it trained on whose ops got no time of their own,
        e.g. a batchnorm the e2e split gave 0 ms because TFLite folds it, predicts 0 ms.)"""
        return sorted(t for t in set(op_types) if t not in self.type_key_ and self._key_of_type(t) is None)

    def _config_predictions(self, configs: np.ndarray) -> np.ndarray:
        """Predicted ms of each distinct configuration id in ``configs`` (any order), by group."""
        out = np.zeros(len(configs))
        codes = CONFIGS.type_codes(configs)
        for code in np.unique(codes):
            key = self._key_of_type(CONFIGS.op_types[code])
            if key is None:
                continue
            m = codes == code
            F = CONFIGS.features(configs[m], self.key_category_[key])
            out[m] = self.models_[key].predict(F)
        return np.maximum(out, 0.0)

    def _op_predictions(self, frame: OpFrame, unique: bool = True) -> np.ndarray:
        """Predicted ms per op of the frame; each distinct configuration is evaluated once
        (``unique=False`` evaluates every op row, for benchmarks)."""
        if len(frame.config) == 0:
            return np.zeros(0)
        if unique:
            mask = np.zeros(len(CONFIGS), dtype=bool)
            mask[frame.config] = True
            ids = np.flatnonzero(mask)
            lut = np.zeros(len(CONFIGS))
            lut[ids] = self._config_predictions(ids)
            per_op = lut[frame.config]
        else:
            per_op = self._config_predictions(frame.config)
        return np.where(frame.fused, 0.0, per_op)

    def predict_frame(self, frame: OpFrame, unique: bool = True) -> np.ndarray:
        """e2e ms of every network of an op frame (for callers that featurized already)."""
        self._check_fitted()
        per_op = self._op_predictions(frame, unique)
        return np.maximum(np.bincount(frame.net, weights=per_op, minlength=frame.n_nets) + self.overhead_ms_, MIN_MS)

    def predict(self, X: Networks) -> np.ndarray:
        X = self._check_X(X)
        self._check_fitted()
        return self.predict_frame(op_frame(X, self._ops_source()))

    def predict_parts(self, X: Networks) -> pd.DataFrame:
        """One row per op: model_id, op_index, op_type, group (the model used; empty: none),
        predicted_ms. Their sum per model plus ``overhead_ms_`` is ``predict(X)``."""
        X = self._check_X(X)
        self._check_fitted()
        frame = op_frame(X, self._ops_source())
        types = frame.op_types()
        return pd.DataFrame({
            "model_id": np.asarray(X.model_ids, dtype=object)[frame.net] if len(frame.net) else np.zeros(0, object),
            "op_index": frame.op_index,
            "op_type": types,
            "group": [self._key_of_type(str(t)) or "" for t in types],
            "predicted_ms": self._op_predictions(frame),
        })

    # ------------------------------------------------------------ persistence (see persist.py)
    def _get_state(self, store) -> dict:
        self._check_fitted()
        models = {}
        for i, (k, m) in enumerate(sorted(self.models_.items())):
            models[k] = m.state(store, f"op_model_{i}")
        return {"mode": self.mode_, "overhead_ms": self.overhead_ms_, "type_key": self.type_key_,
                "key_category": self.key_category_, "category_default": self.category_default_,
                "n_train_ops": self.n_train_ops_, "models": models}

    def _set_state(self, s: dict, store) -> None:
        from .persist import StateError, integer, mapping, number, text

        self.mode_ = text(s, "mode", choices=("ops", "e2e"))
        self.overhead_ms_ = number(s, "overhead_ms")
        for key in ("type_key", "key_category", "category_default"):
            m = mapping(s, key)
            if not all(isinstance(v, str) for v in m.values()):
                raise StateError(f"{key}: expected an object of names")
            setattr(self, key + "_", m)
        counts = mapping(s, "n_train_ops")
        self.n_train_ops_ = {k: integer(counts, k, "n_train_ops") for k in counts}
        self.models_ = {}
        models = mapping(s, "models")
        for k in models:
            at = f"models.{k}"
            kind = text(models[k], "kind", at, choices=tuple(OP_MODELS))
            self.models_[k] = OP_MODELS[kind].from_state(models[k], store, at=at)


@register_predictor("usc_lasso")
class UscLasso(OpWisePredictor):
    """Per-op-type non-negative Lasso on the mean squared percentage error (USC Eq. (1));
    ``alpha=None`` chooses alpha from the paper's grid [1e-5, 1e2] by ``cv_folds``-fold
    cross-validation, a number fixes it."""

    def __init__(self, target: str = "auto", min_ops: int = 5, random_state: int = 0, alpha: float | None = None,
                 cv_folds: int = 5):
        super().__init__(target=target, min_ops=min_ops, random_state=random_state)
        self.alpha = alpha
        self.cv_folds = cv_folds

    def _alphas(self) -> tuple[float, ...]:
        return ALPHAS if self.alpha is None else (float(self.alpha),)

    def _fit_op_model(self, F, y, category):
        return LinearOpModel.fit(F, y, alphas=self._alphas(), folds=self.cv_folds, seed=self.random_state)

    def _fits_split_directly(self) -> bool:
        return True

    def _split_grid(self) -> tuple[tuple[float, ...], int]:
        return self._alphas(), self.cv_folds


@register_predictor("usc_rf")
class UscRandomForest(OpWisePredictor):
    """Per-op-type random forest (scikit-learn, kept as arrays), trained on the percentage error.
    The paper tunes n_estimators in 1..10 and min_samples_split in 2..50 (5-fold CV); here they
    are parameters (sweep them with Hydra multirun)."""

    def __init__(self, target: str = "auto", min_ops: int = 5, random_state: int = 0, n_estimators: int = 10,
                 min_samples_split: int = 5, max_depth: int | None = None):
        super().__init__(target=target, min_ops=min_ops, random_state=random_state)
        self.n_estimators = n_estimators
        self.min_samples_split = min_samples_split
        self.max_depth = max_depth

    def _fit_op_model(self, F, y, category):
        return ForestOpModel.fit(F, y, n_estimators=self.n_estimators, min_samples_split=self.min_samples_split,
                                 max_depth=self.max_depth, seed=self.random_state)


@register_predictor("usc_gbdt")
class UscGbdt(OpWisePredictor):
    """Per-op-type gradient-boosted trees (LightGBM), trained on the percentage error. The paper
    tunes the boosting stages in 1..200 and the examples to split a node in 2..7 (5-fold CV)."""

    persist_libraries = ("lightgbm",)

    def __init__(self, target: str = "auto", min_ops: int = 5, random_state: int = 0, n_estimators: int = 200,
                 min_child_samples: int = 5, learning_rate: float = 0.1, num_leaves: int = 31, n_jobs: int = 1):
        super().__init__(target=target, min_ops=min_ops, random_state=random_state)
        self.n_estimators = n_estimators
        self.min_child_samples = min_child_samples
        self.learning_rate = learning_rate
        self.num_leaves = num_leaves
        self.n_jobs = n_jobs

    def _fit_op_model(self, F, y, category):
        return LightGbmOpModel.fit(F, y, n_estimators=self.n_estimators, min_child_samples=self.min_child_samples,
                                   learning_rate=self.learning_rate, num_leaves=self.num_leaves,
                                   num_threads=self.n_jobs, seed=self.random_state)


__all__ = ["OP_MODELS", "OpWisePredictor", "UscGbdt", "UscLasso", "UscRandomForest", "register_op_model"]
