"""Cross-device transfer: the target device's latency as a non-negative mix of what the source
devices and the operator costs say (HELP's setting: other devices' full data, N target samples).

Approach (stated, as the leaderboard asks):

1. **Pre-train on the sources.** For every source scenario the track lets the predictor read
   (``dataset.transfer_sources``, set by the transfer tracks' view, :mod:`leaderboard.protocols`),
   a gradient-boosted encoder (LightGBM, log latency) learns that device's latency from the
   architecture encoding, on every network measured there (15,625 NAS-Bench-201 cells per HELP
   device). The encoder, not the raw measurement, is what the target sees: it is defined for any
   architecture and smooths the source's measurement noise (a target ranks better through a
   source's encoder than through its raw latencies).
2. **Adapt with the N target samples.** The target's latency is fitted as
   ``b + sum_k c_k * cost_k + sum_s w_s * encoder_s(arch)`` with every coefficient >= 0
   (non-negative least squares): ``cost_k`` are per-operator-kind work counts of the network
   (NAS-Bench-201: the cell's 3x3 convs, 1x1 convs and pools; other networks: MACs per op
   category and kernel from the IR). A device is thus placed in the span of the source devices
   and of a plain op-cost model, the idea behind HELP's hardware embedding (a device described by
   how it relates to known latencies) without meta-learning: with N = 10 the fit has at most a
   handful of coefficients, and the sign constraint keeps it from extrapolating wildly.
3. **Keep only the terms the N samples support.** Three candidate fits, the sources alone, the
   op costs alone, both, are scored by leave-one-out squared error on the N target rows (exact
   NNLS refits, 3 x N of them) and the best one is kept; the terms it leaves out weigh 0. Each
   extra column is variance with 10 noisy rows: on Pixel 2 (whole milliseconds, ~13% noise
   around any architecture model) the seven-coefficient mix ranks the test set worse than the
   sources alone, while on Eyeriss the sources alone rank poorly and the costs are needed. The
   choice and every candidate's error are saved with the fit.

``source_values="measured"`` puts the source scenario's *measured* latency of each network in
place of its encoder (the cross-framework track, protocol ``framework-transfer``: the network's
LiteRT latency on the same device is the input, measured for the test networks too); a network
the source did not measure is an error naming it. The default reads encoders, HELP's setting
(the sources' raw latencies rank a target worse than their encoders there).

Without sources (every other track: the view declares none) it is the op-cost part alone, an
NNLS fit on the target's training networks (one candidate: nothing is chosen). Deterministic per ``random_state`` (LightGBM with
``deterministic`` on one thread; NNLS is exact). Saved without pickles: coefficients as JSON,
encoders as LightGBM model text (:mod:`.persist`, :mod:`.trees`).
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from foundation.registry import Registry

from .base import Networks, Predictor, register_predictor

NB201_OPS = ("none", "skip_connect", "nor_conv_1x1", "nor_conv_3x3", "avg_pool_3x3")


# ---------------------------------------------------------------- architecture encodings
@dataclass(frozen=True)
class Encoding:
    """How a predictor reads networks: ``applies(X)``; ``costs(X, keys)`` the op-kind work counts
    ([n, len(keys)]); ``inputs(X, keys)`` the encoders' input rows; ``keys(X)`` the cost columns
    the training networks define (fixed at fit)."""

    name: str
    applies: Callable[[Networks], bool]
    keys: Callable[[Networks], list[str]]
    costs: Callable[[Networks, list[str]], np.ndarray]
    inputs: Callable[[Networks, list[str]], np.ndarray]


ENCODINGS: Registry[Encoding] = Registry("architecture encoding")


def _nb201_edges(X: Networks) -> np.ndarray:
    """[n, 6] op codes of the cell's edges (NB201_OPS order), from the models table's arch."""
    m = X.models()
    out = np.zeros((len(m), 6), dtype=np.int64)
    for i, arch in enumerate(m["arch"].tolist()):
        ops = [tok.split("~")[0] for node in str(arch).strip("|").split("|+|") for tok in node.strip("|").split("|")]
        if len(ops) != 6 or any(o not in NB201_OPS for o in ops):
            raise ValueError(f"{X.model_ids[i]}: arch {arch!r} is not a NAS-Bench-201 cell")
        out[i] = [NB201_OPS.index(o) for o in ops]
    return out


def _nb201_applies(X: Networks) -> bool:
    m = X.models()
    if "arch" not in m.columns or not len(m):
        return False
    return bool((m["family"] == "nasbench201").all() and m["arch"].notna().all())


_NB201_COSTS = ("nor_conv_3x3", "nor_conv_1x1", "avg_pool_3x3")  # the edges that compute

ENCODINGS.register("nb201")(Encoding(
    "nb201", _nb201_applies, lambda X: list(_NB201_COSTS),
    lambda X, keys: np.stack([(_nb201_edges(X) == NB201_OPS.index(k)).sum(1) for k in keys], 1).astype("float64"),
    lambda X, keys: _nb201_edges(X).astype("float64")))


def _ir_work(X: Networks) -> list[dict[str, float]]:
    """Per network: MACs (the IR's FLOPs per op) summed by op category and kernel size."""
    from .features import CONFIGS, COLUMNS, category_of, op_frame

    f = op_frame(X, source="ir")
    out: list[dict[str, float]] = [{} for _ in range(f.n_nets)]
    if not len(f.config):
        return out
    cols = CONFIGS.columns(f.config)
    flops, kernel = cols[:, COLUMNS.index("flops")], cols[:, COLUMNS.index("kernel")]
    types = f.op_types()
    for net, t, k, w in zip(f.net, types, kernel, flops):
        cat = category_of(t)
        key = f"{cat}-k{int(k)}" if k and k > 0 else cat
        out[net][key] = out[net].get(key, 0.0) + float(w) / 1e6
    return out


def _ir_keys(X: Networks) -> list[str]:
    return sorted({k for d in _ir_work(X) for k, v in d.items() if v > 0})


def _ir_costs(X: Networks, keys: list[str]) -> np.ndarray:
    work = _ir_work(X)
    return np.asarray([[d.get(k, 0.0) for k in keys] for d in work], dtype="float64").reshape(len(work), len(keys))


ENCODINGS.register("ir")(Encoding("ir", lambda X: True, _ir_keys, _ir_costs, _ir_costs))


GENERIC = "ir"  # reads any network, slowly (IR graphs): the fallback, tried last


def encoding_for(X: Networks) -> Encoding:
    """The first registered encoding that reads every network of X, the generic one last (a
    search space's own encoding keeps what the IR sums lose, e.g. which edge holds which op)."""
    for name in sorted(ENCODINGS.names(), key=lambda n: n == GENERIC):
        enc = ENCODINGS.get(name)
        if enc.applies(X):
            return enc
    raise ValueError(f"{X.scenario_id}: no architecture encoding reads these networks")


# ---------------------------------------------------------------- source encoders
_ENCODER_CACHE: dict[str, Any] = {}  # content key -> fitted encoder (same data + params = same model)
_CACHE_SIZE = 16


def _source_encoder(X: Networks, sid: str, enc: Encoding, keys: list[str], params: dict[str, Any]):
    from .trees import LightGbmOpModel

    src = Networks.of_scenario(X.dataset, sid)
    y = src.y()
    h = hashlib.sha256(repr((sid, enc.name, keys, sorted(params.items()))).encode())
    h.update("\n".join(src.model_ids).encode())
    h.update(np.ascontiguousarray(y).tobytes())
    key = h.hexdigest()
    hit = _ENCODER_CACHE.get(key)
    if hit is None:
        if len(src) < 2:
            raise ValueError(f"source {sid}: {len(src)} measured network(s); an encoder needs at least 2")
        hit = LightGbmOpModel.fit(enc.inputs(src, keys), y, **params)
        if len(_ENCODER_CACHE) >= _CACHE_SIZE:
            _ENCODER_CACHE.pop(next(iter(_ENCODER_CACHE)))
        _ENCODER_CACHE[key] = hit
    return hit


SOURCE_VALUES = ("encoder", "measured")


def _measured(X: Networks, sid: str) -> np.ndarray:
    """The source scenario's measured latency (ms) of each network of X, in X's order."""
    e = X.dataset.e2e_for(sid).set_index("model_id")["latency_ms"]
    missing = [i for i in X.model_ids if i not in e.index]
    if missing:
        raise ValueError(f"source {sid}: no measured latency of {', '.join(missing[:3])} "
                         f"(source_values=measured reads the source's measurement of every network)")
    return e.loc[list(X.model_ids)].to_numpy(dtype="float64")


# ---------------------------------------------------------------- the fit on the target
# The terms a target's latency may be fitted from, in the order ties are broken (fewer kinds of
# column first); the last one is every term, the fit when there is nothing to choose.
TERM_CANDIDATES: tuple[tuple[str, ...], ...] = (("sources",), ("costs",), ("costs", "sources"))
MIN_LOO = 3  # training networks needed to hold one out and still fit a slope


def _nnls_fit(A: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, float]:
    """Non-negative ``y ~ A @ coef + intercept``: (coef, intercept)."""
    from scipy.optimize import nnls

    # columns scaled to a mean of 1 on the training networks: NNLS is exact either way, the
    # scaling only keeps the solver's arithmetic well conditioned (MACs vs ms vs counts)
    scale = np.abs(A).mean(0) if len(A) else np.ones(A.shape[1])
    scale[~(scale > 0)] = 1.0
    w, _ = nnls(np.hstack([A / scale, np.ones((len(A), 1))]), y)
    return np.asarray(w[:-1] / scale, dtype="float64"), float(w[-1])


def _loo_sse(A: np.ndarray, y: np.ndarray) -> float:
    """Leave-one-out squared error (ms^2) of :func:`_nnls_fit` on the rows of A."""
    err = 0.0
    for i in range(len(y)):
        keep = np.arange(len(y)) != i
        coef, b = _nnls_fit(A[keep], y[keep])
        err += float(A[i] @ coef + b - y[i]) ** 2
    return err


@register_predictor("transfer")
class TransferPredictor(Predictor):
    """Transfer: NNLS mix of source-device encoders (LightGBM, pre-trained on the sources' full data) and op costs, fitted on the N target samples; the terms kept by leave-one-out error."""

    persist_libraries = ("lightgbm",)

    def __init__(self, n_estimators: int = 300, num_leaves: int = 31, learning_rate: float = 0.1,
                 min_child_samples: int = 20, use_sources: bool = True, select_terms: bool = True,
                 source_values: str = "encoder", random_state: int = 0):
        self.n_estimators = n_estimators
        self.num_leaves = num_leaves
        self.learning_rate = learning_rate
        self.min_child_samples = min_child_samples
        self.use_sources = use_sources
        self.select_terms = select_terms  # False: every term, the fit before the leave-one-out choice
        self.source_values = source_values  # "encoder" | "measured" (SOURCE_VALUES)
        self.random_state = random_state

    def _encoder_params(self) -> dict[str, Any]:
        return {"n_estimators": int(self.n_estimators), "num_leaves": int(self.num_leaves),
                "learning_rate": float(self.learning_rate), "min_child_samples": int(self.min_child_samples),
                "seed": int(self.random_state), "num_threads": 1}

    def _design(self, X: Networks) -> np.ndarray:
        enc = ENCODINGS.get(self.encoding_)
        if not enc.applies(X):
            raise ValueError(f"{X.scenario_id}: fitted on {self.encoding_} encodings; these networks are not")
        cols = [enc.costs(X, self.keys_)]
        if self.encoders_:
            inp = enc.inputs(X, self.keys_)
            cols += [e.predict(inp).reshape(-1, 1) for e in self.encoders_]
        elif self.sources_:  # measured source values
            cols += [_measured(X, sid).reshape(-1, 1) for sid in self.sources_]
        return np.hstack(cols) if cols else np.zeros((len(X), 0))

    def _term_columns(self) -> dict[str, np.ndarray]:
        """Column indices of the design per term: the op costs first, then one per source."""
        n = len(self.keys_)
        return {"costs": np.arange(n), "sources": np.arange(n, n + len(self.sources_))}

    def fit(self, X: Networks, y: Any) -> "TransferPredictor":
        X = self._check_X(X)
        y = self._check_y(X, y)
        if self.source_values not in SOURCE_VALUES:
            raise ValueError(f"source_values: expected one of {', '.join(SOURCE_VALUES)}, got {self.source_values!r}")
        enc = encoding_for(X)
        self.encoding_ = enc.name
        self.keys_ = enc.keys(X)
        declared = getattr(X.dataset, "transfer_sources", ()) if self.use_sources else ()
        self.sources_ = [s for s in declared if s != X.scenario_id]
        self.encoders_ = [_source_encoder(X, s, enc, self.keys_, self._encoder_params()) for s in self.sources_] \
            if self.source_values == "encoder" else []
        A = self._design(X)
        cols = self._term_columns()
        # the costs are always there (with no cost column, an intercept alone); sources if declared
        available = {"costs"} | ({"sources"} if self.sources_ else set())
        candidates = [t for t in TERM_CANDIDATES if set(t) <= available]
        # With N = 10 noisy rows, every column costs variance: on pixel2 (13% noise, whole ms)
        # the 7-coefficient mix ranks worse than the sources alone, while on eyeriss the sources
        # alone rank poorly and the costs are needed. Leave-one-out over the N rows is exact and
        # cheap for NNLS, and picks per target which terms its own samples support.
        choose = self.select_terms and len(candidates) > 1 and len(y) >= MIN_LOO
        self.loo_sse_ = {"+".join(t): _loo_sse(A[:, np.concatenate([cols[k] for k in t])], y)
                         for t in candidates} if choose else {}
        if self.loo_sse_:
            # a tie within rounding (an exact fit both ways) goes to the simpler candidate
            best = min(self.loo_sse_.values())
            self.terms_ = next(t for t in candidates if self.loo_sse_["+".join(t)] <= best * (1 + 1e-9) + 1e-12)
        else:  # no choice asked or possible, or too few rows to hold one out: every term
            self.terms_ = candidates[-1]
        used = np.concatenate([cols[k] for k in self.terms_]).astype(int)
        coef, self.intercept_ = _nnls_fit(A[:, used], y)
        self.coef_ = np.zeros(A.shape[1])
        self.coef_[used] = coef  # the terms left out weigh 0: predict keeps one design
        # a latency is > 0: where no feature of a network carries weight and the intercept is 0,
        # the fit says nothing; answer the smallest latency seen rather than 0 ms
        self.floor_ = float(y.min())
        return self

    def _check_fitted(self) -> None:
        if not hasattr(self, "coef_"):
            raise RuntimeError(f"{self.name}: not fitted (call fit first)")

    def predict(self, X: Networks) -> np.ndarray:
        X = self._check_X(X)
        self._check_fitted()
        if len(X) == 0:
            return np.zeros(0)
        pred = self._design(X) @ self.coef_ + self.intercept_
        return np.where(pred > 0, pred, self.floor_).astype("float64")

    # ------------------------------------------------------------ persistence (no pickles)
    def _get_state(self, store) -> dict:
        encoders = [e.state(store, f"encoder{i}") for i, e in enumerate(self.encoders_)]
        return {"encoding": self.encoding_, "keys": list(self.keys_), "sources": list(self.sources_),
                "source_values": self.source_values, "encoders": encoders, "terms": list(self.terms_), "loo_sse": dict(self.loo_sse_),
                "coef": self.coef_.tolist(), "intercept": self.intercept_, "floor": self.floor_}

    def _set_state(self, s: dict, store) -> None:
        from .persist import StateError, array, number, text
        from .trees import LightGbmOpModel

        self.encoding_ = text(s, "encoding", choices=tuple(ENCODINGS.names()))
        self.source_values = text(s, "source_values", choices=SOURCE_VALUES)
        keys, sources, encoders = s.get("keys"), s.get("sources"), s.get("encoders")
        for name, v in (("keys", keys), ("sources", sources)):
            if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
                raise StateError(f"{name}: expected a list of strings")
        want = len(sources) if self.source_values == "encoder" else 0
        if not isinstance(encoders, list) or len(encoders) != want or not all(isinstance(e, dict) for e in encoders):
            raise StateError(f"encoders: expected {want} object(s): one per source with {self.source_values} source values")
        self.keys_, self.sources_ = list(keys), list(sources)
        self.encoders_ = [LightGbmOpModel.from_state(e, store, f"encoders[{i}].") for i, e in enumerate(encoders)]
        terms, loo = s.get("terms"), s.get("loo_sse")
        if not isinstance(terms, list) or tuple(terms) not in TERM_CANDIDATES:
            raise StateError(f"terms: expected one of {[list(t) for t in TERM_CANDIDATES]}, got {terms!r}")
        if not isinstance(loo, dict) or not all(isinstance(v, (int, float)) and v >= 0 for v in loo.values()):
            raise StateError("loo_sse: expected a mapping of candidate -> leave-one-out squared error >= 0")
        self.terms_, self.loo_sse_ = tuple(terms), {str(k): float(v) for k, v in loo.items()}
        self.coef_ = array(s, "coef", length=len(self.keys_) + len(self.sources_))
        if np.any(self.coef_ < 0):
            raise StateError("coef: negative coefficients (the fit is non-negative)")
        cols = self._term_columns()
        if any(np.any(self.coef_[cols[k]] != 0) for k in cols if k not in self.terms_):
            raise StateError(f"coef: weight on a term the fit left out (terms {list(self.terms_)})")
        self.intercept_ = number(s, "intercept")
        self.floor_ = number(s, "floor", positive=True)


__all__ = ["ENCODINGS", "Encoding", "TransferPredictor", "encoding_for"]
