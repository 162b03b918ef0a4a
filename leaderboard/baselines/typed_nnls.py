"""``typed_nnls``: end-to-end latency as a non-negative combination of per-network op sums, with
convolutions typed by kernel and stride; on a scenario whose training networks carry op times
(the USC GPU files), an op lookup table learned from those times instead.

**Why.** The USC op-wise Lasso (:mod:`.usc_opwise`) fits one linear model per op type *through
the sum* of a network's ops; its conv2d model spans 1x1, 3x3 and 7x7 kernels at stride 1 and 2,
whose efficiencies differ several-fold on XNNPACK and PyTorch Mobile (1x1 convolutions are
GEMMs, 3x3 ones may run as Winograd or im2col, strided ones waste lanes). Splitting the
convolution types by kernel and stride and giving each an op count, a FLOPs sum and a
memory-access sum lets the fit price them apart; with ~80 training networks per fold a small
ridge keeps rarely used types from absorbing noise.

**Fit (e2e).** For each network, per *typed op* (``conv_k3_s1``, ``dw_k5_s2``, ``gconv_k3``, or
the op type itself for the rest), the sums of: ops, FLOPs (MACs, in millions) and memory access
(elements, in millions), from the IR (:func:`.features.ir_config_ids`); columns present in at
least ``min_networks`` training networks are kept, plus a constant (T_overhead). Minimize the
squared relative error ``sum(((X w - y) / y)^2) + alpha * |w|^2`` (columns scaled to unit RMS)
subject to ``w >= 0`` (scipy NNLS on the augmented system). A typed op unseen in training takes
the columns of the most common seen typed op of its op type (``conv_k7_s2`` -> ``conv_k3_s2``
say); an op type never seen counts 0.

**Fit (ops).** When the training networks have op times in the scenario (``target="auto"``), an
:class:`.lookup.OpLookupTable` is fitted on them (``target="ops"``) and predicts; the op times
of the networks being predicted are never read (the leaderboard blanks them).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .base import Networks, Predictor, register_predictor
from .features import CONFIGS, COLUMNS, op_frame

TARGETS = ("auto", "ops", "e2e")
_STATS = ("n", "flops", "mem")
_COLS = [COLUMNS.index(c) for c in ("kernel", "stride", "flops", "memory")]


def typed_op(op_type: str, kernel: float, stride: float) -> str:
    """The refined type of an op: convolutions by kernel (capped) and stride (1 or 2+)."""
    s = 1 if stride <= 1 else 2
    if op_type == "conv2d":
        return f"conv_k{min(int(kernel), 5)}_s{s}"
    if op_type == "dwconv2d":
        return f"dw_k{min(int(kernel), 7)}_s{s}"
    if op_type == "group_conv2d":
        return f"gconv_k{min(int(kernel), 3)}"
    return op_type


def network_sums(X: Networks) -> list[dict[str, float]]:
    """Per network of ``X``: {"<typed op>:<n|flops|mem>": sum} from its IR."""
    frame = op_frame(X, source="ir")
    out: list[dict[str, float]] = [{} for _ in range(len(X))]
    if not len(frame.config):
        return out
    cols = CONFIGS.columns(frame.config)[:, _COLS]
    types = frame.op_types()
    for net, t, (k, s, fl, mem) in zip(frame.net.tolist(), types.tolist(), cols.tolist()):
        key = typed_op(t, k, s)
        d = out[net]
        d[key + ":n"] = d.get(key + ":n", 0.0) + 1.0
        d[key + ":flops"] = d.get(key + ":flops", 0.0) + fl / 1e6
        d[key + ":mem"] = d.get(key + ":mem", 0.0) + mem / 1e6
    return out


def _base_type(typed: str) -> str:
    return typed.split("_k")[0] if typed.startswith(("conv_k", "dw_k", "gconv_k")) else typed


@register_predictor("typed_nnls")
class TypedNnls(Predictor):
    """Non-negative least squares on relative error over per-network op sums, convolutions typed by
    kernel and stride (+ T_overhead); scenarios with training op times: op lookup table."""

    def __init__(self, target: str = "auto", alpha: float = 0.1, min_networks: int = 3, random_state: int = 0):
        self.target = target
        self.alpha = alpha
        self.min_networks = min_networks
        self.random_state = random_state  # the fit is deterministic; kept for the common interface

    def _check_params(self) -> None:
        if self.target not in TARGETS:
            raise ValueError(f"typed_nnls: target must be one of {', '.join(TARGETS)}, got {self.target!r}")
        if not isinstance(self.alpha, (int, float)) or not self.alpha >= 0:
            raise ValueError(f"typed_nnls: alpha must be a number >= 0, got {self.alpha!r}")
        if not isinstance(self.min_networks, (int, np.integer)) or self.min_networks < 1:
            raise ValueError(f"typed_nnls: min_networks must be an int >= 1, got {self.min_networks!r}")

    # ------------------------------------------------------------ fit
    def fit(self, X: Networks, y: Any) -> "TypedNnls":
        X = self._check_X(X)
        y = self._check_y(X, y)
        self._check_params()
        mode = self.target
        if mode != "e2e":
            frame = op_frame(X)
            has_times = bool((frame.measured[frame.net] & np.isfinite(frame.latency) & ~frame.fused).any())
            if mode == "ops" and not has_times:
                raise ValueError(f"typed_nnls: target='ops' but no training network has op times in {X.scenario_id}")
            mode = "ops" if has_times else "e2e"
        self.mode_ = mode
        if mode == "ops":
            from .lookup import OpLookupTable

            self.ops_model_ = OpLookupTable(target="ops", random_state=self.random_state).fit(X, y)
            return self
        sums = network_sums(X)
        present: dict[str, int] = {}
        for d in sums:
            for k, v in d.items():
                if v > 0:
                    present[k] = present.get(k, 0) + 1
        self.columns_ = sorted(k for k, c in present.items() if c >= self.min_networks)
        self._set_fallback([k for k in present if k.endswith(":n")], present)
        A = self._design(sums)
        self.coef_ = _ridge_nnls(A, y, float(self.alpha))
        return self

    def _set_fallback(self, typed_n: list[str], present: dict[str, int]) -> None:
        """For each base op type, its most common kept typed op (unseen typed ops borrow its columns)."""
        kept = {c.rsplit(":", 1)[0] for c in self.columns_}
        best: dict[str, tuple[int, str]] = {}
        for t in kept:
            b = _base_type(t)
            c = present.get(t + ":n", 0)
            if b not in best or (c, t) > best[b]:
                best[b] = (c, t)
        self.fallback_ = {b: t for b, (_, t) in sorted(best.items())}

    def _design(self, sums: list[dict[str, float]]) -> np.ndarray:
        index = {c: i for i, c in enumerate(self.columns_)}
        kept = {c.rsplit(":", 1)[0] for c in self.columns_}
        A = np.zeros((len(sums), len(self.columns_) + 1))
        A[:, 0] = 1.0  # T_overhead
        for r, d in enumerate(sums):
            for k, v in d.items():
                typed, stat = k.rsplit(":", 1)
                if typed not in kept:
                    typed = self.fallback_.get(_base_type(typed), "")
                i = index.get(f"{typed}:{stat}")
                if i is not None:
                    A[r, i + 1] += v
        return A

    # ------------------------------------------------------------ predict
    def predict(self, X: Networks) -> np.ndarray:
        X = self._check_X(X)
        if not hasattr(self, "mode_"):
            raise RuntimeError("typed_nnls: not fitted (call fit first)")
        if self.mode_ == "ops":
            return np.asarray(self.ops_model_.predict(X), dtype="float64")
        if len(X) == 0:
            return np.zeros(0)
        return np.maximum(self._design(network_sums(X)) @ self.coef_, 0.0)

    # ------------------------------------------------------------ persistence (see persist.py)
    def _get_state(self, store) -> dict:
        if self.mode_ == "ops":
            return {"mode": "ops", "ops_model": self.ops_model_._get_state(store)}
        return {"mode": "e2e", "columns": list(self.columns_), "coef": self.coef_.tolist(),
                "fallback": dict(self.fallback_)}

    def _set_state(self, s: dict, store) -> None:
        from .persist import StateError, array, mapping, text

        self.mode_ = text(s, "mode", choices=("ops", "e2e"))
        if self.mode_ == "ops":
            from .lookup import OpLookupTable

            m = OpLookupTable(target="ops", random_state=self.random_state)
            m._set_state(mapping(s, "ops_model"), store)
            self.ops_model_ = m
            return
        cols = s.get("columns")
        if not isinstance(cols, list) or not all(isinstance(c, str) and ":" in c for c in cols):
            raise StateError("columns: expected a list of '<typed op>:<stat>' names")
        self.columns_ = list(cols)
        self.coef_ = array(s, "coef", length=len(cols) + 1)
        if (self.coef_ < 0).any():
            raise StateError("coef: negative weight in a non-negative fit")
        fb = mapping(s, "fallback")
        if not all(isinstance(v, str) for v in fb.values()):
            raise StateError("fallback: expected an object of names")
        self.fallback_ = fb


def _ridge_nnls(A: np.ndarray, y: np.ndarray, alpha: float) -> np.ndarray:
    """argmin_{w >= 0} |(A w - y) / y|^2 + alpha |w * scale|^2, columns scaled to unit RMS."""
    from scipy.optimize import nnls

    R = A / y[:, None]
    scale = np.sqrt((R ** 2).mean(axis=0))
    scale = np.where(scale > 0, scale, 1.0)
    Rs = R / scale
    b = np.ones(len(y))
    if alpha > 0:
        Rs = np.vstack([Rs, np.sqrt(alpha) * np.eye(Rs.shape[1])])
        b = np.r_[b, np.zeros(Rs.shape[1])]
    w, _ = nnls(Rs, b, maxiter=50 * Rs.shape[1])
    return w / scale


__all__ = ["TypedNnls", "network_sums", "typed_op"]
