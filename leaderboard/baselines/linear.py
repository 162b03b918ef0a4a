"""Non-negative Lasso on the mean squared percentage error (USC study, Section 4.2, Eq. (1)), its
grid over alpha, and the split of end-to-end latency into per-op-type linear terms.

Eq. (1): ``w* = argmin (1/N) sum_i ((w.x_i - y_i) / y_i)^2 + alpha ||w||_1`` s.t. ``w >= 0``.
With ``w >= 0`` the L1 norm is the linear term ``alpha * sum(w)``, so the problem is a quadratic
with non-negativity bounds. We solve it exactly: with ``G = A^T V A / N + eps I`` (``V`` the
weights ``1/y^2``) and ``c = A^T V y / N - alpha p / 2`` (``p`` marks penalised columns),
``theta^T G theta - 2 c^T theta`` equals ``||L^T theta - L^-1 c||^2`` up to a constant
(``G = L L^T``), which scipy's NNLS (Lawson-Hanson active set) minimises. Deterministic and free
of iteration-count tuning.

Features are divided by their training standard deviation but not centred: the paper
standardises ``(x - mu) / sigma``; centring only moves the intercept, and leaving it out keeps
every feature >= 0, so with ``w >= 0`` and an intercept ``b >= 0`` no op is ever predicted to
take negative time. Intercepts are not penalised (as in scikit-learn's Lasso).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from threadpoolctl import threadpool_limits

# The matrices here are small (at most a few hundred columns): BLAS threads only add contention,
# which on a loaded 2-core machine makes a small Cholesky orders of magnitude slower.
_one_blas_thread = threadpool_limits.wrap(limits=1, user_api="blas")

ALPHAS = tuple(float(a) for a in np.logspace(-5, 2, 8))  # the paper's grid range [1e-5, 1e2]


@_one_blas_thread
def nonneg_lasso(A: np.ndarray, y: np.ndarray, alpha: float, penalize: np.ndarray | None = None,
                 weights: np.ndarray | None = None) -> np.ndarray:
    """argmin_theta>=0 (1/N) sum_i v_i (A_i theta - y_i)^2 + alpha sum_j p_j theta_j, with
    v_i = 1/y_i^2 (the percentage error) unless ``weights`` are given."""
    from scipy.linalg import cholesky, solve_triangular  # fitting only: predicting reads no scipy
    from scipy.optimize import nnls

    A = np.asarray(A, dtype="float64")
    y = np.asarray(y, dtype="float64")
    n, d = A.shape
    v = 1.0 / y**2 if weights is None else np.asarray(weights, dtype="float64")
    p = np.ones(d) if penalize is None else np.asarray(penalize, dtype="float64")
    Av = A * v[:, None]
    G = Av.T @ A / n
    c = Av.T @ y / n - alpha * p / 2
    scale = np.trace(G) / max(d, 1)
    G[np.diag_indices(d)] += 1e-10 * (scale if scale > 0 else 1.0)  # columns that are all zero stay solvable
    L = cholesky(G, lower=True)
    theta, _ = nnls(L.T, solve_triangular(L, c, lower=True), maxiter=50 * d)
    return theta


def _mape(pred: np.ndarray, y: np.ndarray) -> float:
    return float(np.mean(np.abs(pred - y) / y))


@_one_blas_thread
def choose_alpha(A: np.ndarray, y: np.ndarray, penalize: np.ndarray, groups: np.ndarray | None = None,
                 alphas: tuple[float, ...] = ALPHAS, folds: int = 5, seed: int = 0,
                 predict=None) -> tuple[float, dict[float, float]]:
    """Grid search over ``alphas`` by ``folds``-fold cross-validation (MAPE of the held-out
    rows, or of the held-out ``groups``' sums when rows are grouped); ties go to the larger
    alpha (the sparser model). Returns (alpha, {alpha: mean MAPE}). Fewer than 2*folds rows: the
    smallest alpha, no search."""
    n = len(y)
    if n < 2 * folds:
        return alphas[0], {}
    rng = np.random.default_rng(seed)
    fold = rng.permutation(np.arange(n) % folds)
    scores = {}
    for a in alphas:
        errs = []
        for k in range(folds):
            tr, te = fold != k, fold == k
            theta = nonneg_lasso(A[tr], y[tr], a, penalize)
            errs.append(_mape(A[te] @ theta, y[te]))
        scores[a] = float(np.mean(errs))
    best = min(scores.values())
    alpha = max(a for a, s in scores.items() if s <= best * (1 + 1e-9))
    return alpha, scores


@dataclass
class LinearOpModel:
    """A per-op linear model ``b + w . (x / sigma)`` with ``w, b >= 0`` (the Lasso op model)."""

    sigma: np.ndarray
    coef: np.ndarray
    intercept: float
    alpha: float = 0.0
    kind: str = field(default="linear", init=False)

    @staticmethod
    def scale_of(F: np.ndarray) -> np.ndarray:
        s = F.std(axis=0)
        return np.where(s > 0, s, 1.0)

    @classmethod
    def fit(cls, F: np.ndarray, y: np.ndarray, alphas: tuple[float, ...] = ALPHAS, folds: int = 5,
            seed: int = 0) -> "LinearOpModel":
        sigma = cls.scale_of(F)
        A = np.column_stack([np.ones(len(F)), F / sigma])
        pen = np.r_[0.0, np.ones(F.shape[1])]
        alpha, _ = choose_alpha(A, y, pen, alphas=alphas, folds=folds, seed=seed)
        theta = nonneg_lasso(A, y, alpha, pen)
        return cls(sigma, theta[1:], float(theta[0]), alpha)

    def predict(self, F: np.ndarray) -> np.ndarray:
        return self.intercept + (F / self.sigma) @ self.coef

    def state(self, store, prefix: str) -> dict:
        return {"kind": self.kind, "sigma": self.sigma.tolist(), "coef": self.coef.tolist(),
                "intercept": self.intercept, "alpha": self.alpha}

    @classmethod
    def from_state(cls, s: dict, store, at: str = "") -> "LinearOpModel":
        from .persist import array, number

        sigma = array(s, "sigma", at, positive=True)
        return cls(sigma, array(s, "coef", at, length=len(sigma)), number(s, "intercept", at), number(s, "alpha", at))


@dataclass
class E2eSplit:
    """End-to-end latency written as overhead + sum over op groups of per-op linear terms,
    fitted on networks' e2e times alone (no op times): ``models[key]`` predicts one op of group
    ``key``; ``overhead_ms`` is the constant per network."""

    models: dict[str, LinearOpModel]
    overhead_ms: float
    alpha: float
    cv_mape: dict[float, float]


@_one_blas_thread
def split_e2e(net: np.ndarray, feats: dict[str, np.ndarray], rows: dict[str, np.ndarray],
              y: np.ndarray, alphas: tuple[float, ...] = ALPHAS, folds: int = 5, seed: int = 0) -> E2eSplit:
    """Fit per-op linear models of every op group from e2e latencies only.

    A linear op model sums over a network: ``sum_ops (b + w.x/sigma) = b * n_ops + w . (sum_ops x)
    / sigma``. So e2e_i = T + sum_k (b_k n_ik + w_k . S_ik / sigma_k) is linear in the parameters,
    and Eq. (1) applies unchanged at the network level, with the per-group op counts and
    feature sums as columns and the overhead ``T`` as one more non-negative, unpenalised
    intercept. ``rows[k]`` are the op positions of group ``k`` (into ``net``), ``feats[k]``
    their feature matrices. alpha is chosen by ``folds``-fold cross-validation over networks."""
    n = len(y)
    cols = [np.ones(n)]
    pen = [0.0]
    layout = []
    for k in sorted(rows):
        F = feats[k]
        sigma = LinearOpModel.scale_of(F)
        idx = net[rows[k]]
        counts = np.bincount(idx, minlength=n).astype("float64")
        sums = np.zeros((n, F.shape[1]))
        np.add.at(sums, idx, F / sigma)
        cols.append(counts)
        pen.append(0.0)
        cols.extend(sums.T)
        pen.extend([1.0] * F.shape[1])
        layout.append((k, sigma, F.shape[1]))
    A = np.column_stack(cols)
    penalize = np.asarray(pen)
    alpha, scores = choose_alpha(A, y, penalize, alphas=alphas, folds=folds, seed=seed)
    theta = nonneg_lasso(A, y, alpha, penalize)
    models, j = {}, 1
    for k, sigma, d in layout:
        models[k] = LinearOpModel(sigma, theta[j + 1:j + 1 + d], float(theta[j]), alpha)
        j += 1 + d
    return E2eSplit(models, float(theta[0]), alpha, scores)


__all__ = ["ALPHAS", "E2eSplit", "LinearOpModel", "choose_alpha", "nonneg_lasso", "split_e2e"]
