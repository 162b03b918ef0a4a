"""The operator lookup table (OFA's latency lookup table; nn-Meter's operator-level baseline,
Section 6): every op configuration seen in training keeps its mean measured time, a network's
latency is the sum over its ops plus T_overhead.

**Unseen configurations** (the stated fallback): an op whose configuration is not in the table
takes the time of the *nearest configuration of the same op type* (Euclidean distance between
``log(1 + feature)`` vectors of its category's Table 2 features, each divided by its spread in
the table), scaled by the FLOPs ratio ``flops(op) / flops(nearest)`` where the category counts
FLOPs, else by the ratio of memory access. An op type missing from the table uses its
category's table as the op-wise predictors do (:mod:`.usc_opwise`); a category without any
table counts 0.

Where the scenario has only e2e times, the table is filled with op times apportioned from a
linear split of the e2e times (see :mod:`.usc_opwise`): that is what a lookup table can be
built from without op measurements.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .base import register_predictor
from .features import OP_CATEGORIES
from .usc_opwise import OpWisePredictor, register_op_model


@dataclass
class LookupOpModel:
    keys: np.ndarray  # [m, d] distinct feature rows
    value: np.ndarray  # [m] mean time (ms)
    scale_col: int  # feature column whose ratio scales a nearest-neighbour time (-1: none)
    kind: str = field(default="lookup", init=False)

    def __post_init__(self) -> None:
        self._index = {tuple(r): i for i, r in enumerate(self.keys.tolist())}
        logk = np.log1p(np.maximum(self.keys, 0))
        spread = logk.std(axis=0)
        self._spread = np.where(spread > 0, spread, 1.0)
        self._logk = logk / self._spread

    @classmethod
    def fit(cls, F: np.ndarray, y: np.ndarray, category: str) -> "LookupOpModel":
        keys, inv = np.unique(F, axis=0, return_inverse=True)
        inv = inv.reshape(-1)
        value = np.bincount(inv, weights=y) / np.bincount(inv)
        feats = OP_CATEGORIES.get(category).features
        col = feats.index("flops") if "flops" in feats and category != "concat_split" else feats.index("memory")
        return cls(keys, value, col)

    def predict(self, F: np.ndarray) -> np.ndarray:
        out = np.empty(len(F))
        miss = []
        for i, r in enumerate(F.tolist()):
            j = self._index.get(tuple(r))
            if j is None:
                miss.append(i)
            else:
                out[i] = self.value[j]
        if miss:
            q = F[miss]
            nn = self._nearest(np.log1p(np.maximum(q, 0)) / self._spread)
            base = self.keys[nn, self.scale_col]
            ratio = np.divide(q[:, self.scale_col], base, out=np.ones(len(q)), where=base > 0)
            out[miss] = self.value[nn] * ratio
        return out

    def _nearest(self, lq: np.ndarray, chunk: int = 2048) -> np.ndarray:
        """Index of each query row's nearest key (squared Euclidean distance; the first of equals).

        Exact and fast on thousands of unseen configurations (a NAS batch of new graphs): one
        matrix product bounds every distance within rounding, and only the keys within that
        bound of a row's minimum get the exact sum of squares, which decides as a direct
        comparison of all keys would, bit for bit."""
        k = self._logk
        kk = (k * k).sum(axis=1)
        out = np.full(len(lq), -1, dtype=np.int64)
        for a in range(0, len(lq), chunk):
            q = lq[a:a + chunk]
            qq = (q * q).sum(axis=1)
            approx = qq[:, None] + kk[None, :] - 2.0 * (q @ k.T)
            # the rounding of the product form is a few ulps of the norms times the feature count
            tol = 1e-9 * (qq[:, None] + kk.max()) + 1e-300
            rows, cols = np.nonzero(approx <= approx.min(axis=1, keepdims=True) + 2.0 * tol)
            exact = ((q[rows] - k[cols]) ** 2).sum(axis=1)
            order = np.lexsort((cols, exact, rows))  # by row, then distance, then key index
            first = order[np.r_[True, rows[order][1:] != rows[order][:-1]]]
            out[a + rows[first]] = cols[first]
        left = np.flatnonzero(out < 0)  # a row no key compares with (a NaN feature): as the direct pick
        if len(left):
            out[left] = ((lq[left][:, None, :] - k[None, :, :]) ** 2).sum(axis=2).argmin(axis=1)
        return out

    def state(self, store, prefix: str) -> dict:
        return {"kind": self.kind, "keys": self.keys.tolist(), "value": self.value.tolist(), "scale_col": self.scale_col}

    @classmethod
    def from_state(cls, s: dict, store, at: str = "") -> "LookupOpModel":
        from .persist import StateError, array, integer

        keys = array(s, "keys", at, ndim=2)
        if keys.shape[0] == 0 or keys.ndim != 2:
            raise StateError(f"{at + '.' if at else ''}keys: an empty table")
        value = array(s, "value", at, length=keys.shape[0])
        return cls(keys, value, integer(s, "scale_col", at, hi=keys.shape[1] - 1))


register_op_model("lookup", LookupOpModel)


@register_predictor("lookup")
class OpLookupTable(OpWisePredictor):
    """Sum of per-op table lookups (mean time per seen configuration) + T_overhead; unseen
    configurations: nearest configuration of the same type, scaled by FLOPs (see module doc)."""

    def __init__(self, target: str = "auto", min_ops: int = 1, random_state: int = 0):
        super().__init__(target=target, min_ops=min_ops, random_state=random_state)

    def _fit_op_model(self, F, y, category):
        return LookupOpModel.fit(F, y, category)


__all__ = ["LookupOpModel", "OpLookupTable"]
