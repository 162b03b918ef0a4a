"""Which networks a calibration measures next.

In the spirit of nn-Meter's adaptive sampling and LitePred's sampler, a calibration starts from
a spread and adds where its model is least sure:

1. **Spread** (:func:`spread`): the first round is a k-center cover of the pool in the
   standardized feature space (:func:`shelf.calibrate.pool.features`): each pick is the network
   farthest from those already picked, starting from the one nearest the pool's median, so the
   cheap and the costly, the convolutional and the attention networks are all represented.
2. **Uncertainty** (:class:`Uncertainty`): a bootstrap ensemble of non-negative op-cost fits,
   ``latency = b + sum_t c_t * MACs_t + sum_t d_t * ops_t`` over the pool's operator types, each
   fitted on a resample of the measured networks with relative-error weights; a candidate's
   uncertainty is the spread (standard deviation) of the members' log predictions. The model is
   cheap (milliseconds), so it is refitted after every round.
3. **Batch** (:func:`next_batch`): the most uncertain candidates, discounted where they sit close
   to a network already measured or picked in the same batch (score = uncertainty x the square
   root of the distance to the nearest such network, relative to the largest), so one batch does
   not spend itself on one corner.

Held-out networks are drawn uniformly from the pool before any of this (:func:`held_out_order`)
and are never candidates: the accuracy a calibration states is on networks it did not choose.
"""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np


def _standardized(X: np.ndarray) -> np.ndarray:
    sd = X.std(axis=0)
    sd[sd == 0] = 1.0
    return (X - X.mean(axis=0)) / sd


def held_out_order(n: int, seed: int) -> list[int]:
    """A seeded permutation of the pool's indices: the held-out networks are taken from its front."""
    return [int(i) for i in np.random.default_rng(seed + 7919).permutation(n)]


def spread(X: np.ndarray, k: int, exclude: Sequence[int] = ()) -> list[int]:
    """``k`` indices of rows of ``X`` (not in ``exclude``) by greedy k-center in standardized space."""
    Z = _standardized(np.asarray(X, dtype="float64"))
    allowed = np.ones(len(Z), bool)
    allowed[list(exclude)] = False
    if not allowed.any() or k <= 0:
        return []
    centre = np.median(Z[allowed], axis=0)
    d0 = np.where(allowed, np.linalg.norm(Z - centre, axis=1), np.inf)
    first = int(np.argmin(d0))
    picked = [first]
    dist = np.linalg.norm(Z - Z[first], axis=1)
    dist[~allowed] = -np.inf
    for _ in range(min(k, int(allowed.sum())) - 1):
        dist[picked] = -np.inf
        i = int(np.argmax(dist))
        if not np.isfinite(dist[i]):
            break
        picked.append(i)
        dist = np.minimum(dist, np.linalg.norm(Z - Z[i], axis=1))
    return picked


class Uncertainty:
    """The bootstrap ensemble of non-negative op-cost fits (see the module doc)."""

    def __init__(self, members: int = 16, seed: int = 0):
        self.members = members
        self.seed = seed

    @staticmethod
    def design(X: np.ndarray, n_types: int) -> np.ndarray:
        """The raw op costs behind :func:`~shelf.calibrate.pool.features`: MACs (millions) and op
        counts per type, and a constant."""
        macs = np.expm1(X[:, 3:3 + n_types])
        ops = np.expm1(X[:, 3 + n_types:3 + 2 * n_types])
        return np.hstack([np.ones((len(X), 1)), macs, ops])

    def fit(self, X: np.ndarray, y: np.ndarray, n_types: int) -> "Uncertainty":
        from scipy.optimize import nnls

        A = self.design(np.asarray(X, dtype="float64"), n_types)
        y = np.asarray(y, dtype="float64")
        scale = A.max(axis=0)
        scale[scale == 0] = 1.0
        A = A / scale
        rng = np.random.default_rng(self.seed)
        coefs = []
        for _ in range(self.members):
            idx = rng.integers(0, len(y), len(y))
            w = 1.0 / y[idx]  # relative errors: a row's residual over its latency
            c, _ = nnls(A[idx] * w[:, None], y[idx] * w, maxiter=50 * A.shape[1])
            coefs.append(c / scale)
        self.coef_ = np.asarray(coefs)
        self.n_types_ = n_types
        return self

    def predict_members(self, X: np.ndarray) -> np.ndarray:
        """[members, n] predicted latencies (ms, floored at a microsecond)."""
        A = self.design(np.asarray(X, dtype="float64"), self.n_types_)
        return np.maximum(self.coef_ @ A.T, 1e-3)

    def score(self, X: np.ndarray) -> np.ndarray:
        """Each row's uncertainty: the standard deviation of the members' log predictions."""
        return np.log(self.predict_members(X)).std(axis=0)


def next_batch(X: np.ndarray, uncertainty: np.ndarray, measured: Sequence[int], candidates: Sequence[int],
               k: int) -> list[int]:
    """``k`` of ``candidates``: the most uncertain, discounted near networks measured or already
    picked (see the module doc)."""
    Z = _standardized(np.asarray(X, dtype="float64"))
    cand = np.asarray(list(candidates), dtype=int)
    if len(cand) == 0 or k <= 0:
        return []
    anchors = list(measured)
    if anchors:
        dist = np.min(np.linalg.norm(Z[cand][:, None, :] - Z[anchors][None, :, :], axis=2), axis=1)
    else:
        dist = np.full(len(cand), 1.0)
    u = np.asarray(uncertainty, dtype="float64")[cand]
    picked: list[int] = []
    alive = np.ones(len(cand), bool)
    for _ in range(min(k, len(cand))):
        top = dist.max() if dist.max() > 0 else 1.0
        s = np.where(alive, u * np.sqrt(np.maximum(dist, 0) / top), -np.inf)
        j = int(np.argmax(s))
        if not math.isfinite(s[j]):
            break
        picked.append(int(cand[j]))
        alive[j] = False
        dist = np.minimum(dist, np.linalg.norm(Z[cand] - Z[cand[j]], axis=1))
    return picked


__all__ = ["Uncertainty", "held_out_order", "next_batch", "spread"]
