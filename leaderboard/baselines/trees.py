"""Tree op models: a random forest kept as plain arrays, and LightGBM boosters kept as their text.

The forest is fitted with scikit-learn and then *copied out* into arrays (children, split feature,
threshold, leaf value per node). Predictions and saved files use only these arrays, so a saved
forest loads and predicts identically under any later scikit-learn (nn-Meter's pickled forests
broke when scikit-learn's Tree layout changed). The traversal reproduces scikit-learn's: inputs
are compared as float32 (``x <= threshold`` goes left), all trees advance together, vectorized.

The USC study trains every model on the mean squared percentage error (Section 4.2). Trees fit
that badly when op times span five orders of magnitude (0.5 us to 100 ms): with weights ``1/y^2``
the fastest ops outweigh the slowest by 1e10 and, in our runs, every leaf collapsed to the fast
ops' times (a 40x under-prediction of convolutions). Both tree models therefore learn
``log(latency)`` with the squared error: ``(log yhat - log y)^2`` equals the squared percentage
error to first order (``log(yhat/y) ~ (yhat - y)/y``) and keeps the relative view the paper
wants, without the numerical collapse.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np


def log_target(y: np.ndarray) -> np.ndarray:
    y = np.asarray(y, dtype="float64")
    if np.any(~np.isfinite(y)) or np.any(y <= 0):
        raise ValueError("op latencies must be finite and > 0 to fit a tree op model")
    return np.log(y)


@dataclass
class ForestOpModel:
    """A random forest as arrays: all trees' nodes concatenated, ``roots`` their first nodes."""

    left: np.ndarray  # -1 at a leaf
    right: np.ndarray
    feature: np.ndarray
    threshold: np.ndarray
    value: np.ndarray
    roots: np.ndarray
    kind: str = field(default="forest", init=False)

    @classmethod
    def fit(cls, F: np.ndarray, y: np.ndarray, n_estimators: int = 10, min_samples_split: int = 5,
            max_depth: int | None = None, seed: int = 0) -> "ForestOpModel":
        from sklearn.ensemble import RandomForestRegressor

        rf = RandomForestRegressor(n_estimators=n_estimators, min_samples_split=min_samples_split,
                                   max_depth=max_depth, random_state=seed, n_jobs=1)
        rf.fit(F, log_target(y))
        return cls.from_sklearn(rf)

    @classmethod
    def from_sklearn(cls, rf) -> "ForestOpModel":
        parts = {k: [] for k in ("left", "right", "feature", "threshold", "value")}
        roots, off = [], 0
        for est in rf.estimators_:
            t = est.tree_
            leaf = t.children_left == -1
            parts["left"].append(np.where(leaf, -1, t.children_left + off))
            parts["right"].append(np.where(leaf, -1, t.children_right + off))
            parts["feature"].append(np.where(leaf, 0, t.feature))
            parts["threshold"].append(t.threshold.astype("float64"))
            parts["value"].append(t.value[:, 0, 0].astype("float64"))
            roots.append(off)
            off += t.node_count
        arr = {k: np.concatenate(v) for k, v in parts.items()}
        return cls(arr["left"].astype(np.int64), arr["right"].astype(np.int64), arr["feature"].astype(np.int64),
                   arr["threshold"], arr["value"], np.asarray(roots, dtype=np.int64))

    def predict(self, F: np.ndarray) -> np.ndarray:
        X = np.asarray(F, dtype=np.float32).astype("float64")  # scikit-learn compares float32 inputs
        n = len(X)
        if n == 0:
            return np.zeros(0)
        if X.ndim != 2 or (len(self.feature) and int(self.feature.max()) >= X.shape[1]):
            raise ValueError(f"forest splits on feature {int(self.feature.max())}; the input has shape {X.shape}")
        node = np.repeat(self.roots[:, None], n, axis=1)  # [trees, n]
        rows = np.broadcast_to(np.arange(n), node.shape)
        active = self.left[node] != -1
        while active.any():
            nd = node[active]
            go_left = X[rows[active], self.feature[nd]] <= self.threshold[nd]
            node[active] = np.where(go_left, self.left[nd], self.right[nd])
            active = self.left[node] != -1
        return np.exp(self.value[node].mean(axis=0))

    def state(self, store, prefix: str) -> dict:
        return {"kind": self.kind, "left": self.left.tolist(), "right": self.right.tolist(),
                "feature": self.feature.tolist(), "threshold": self.threshold.tolist(),
                "value": self.value.tolist(), "roots": self.roots.tolist()}

    @classmethod
    def from_state(cls, s: dict, store, at: str = "") -> "ForestOpModel":
        """Arrays checked so that traversal always ends: every child comes after its node (as
        scikit-learn numbers them), inside the arrays; leaves have no children."""
        from .persist import StateError, array

        left = array(s, "left", at, dtype="int64", lo=-1)
        n = len(left)
        if n == 0 or n > 50_000_000:
            raise StateError(f"{at}.left: {n} nodes" if at else f"left: {n} nodes")
        right = array(s, "right", at, dtype="int64", lo=-1, length=n)
        feature = array(s, "feature", at, dtype="int64", lo=0, hi=1_000_000, length=n)
        threshold = array(s, "threshold", at, length=n)
        value = array(s, "value", at, length=n)
        roots = array(s, "roots", at, dtype="int64", lo=0, hi=n - 1)
        idx = np.arange(n)
        leaf = left == -1
        where = f"{at}: " if at else ""
        if len(roots) == 0:
            raise StateError(f"{where}roots: no trees")
        if np.any(leaf != (right == -1)):
            raise StateError(f"{where}node {int(np.flatnonzero(leaf != (right == -1))[0])}: one child only")
        inner = ~leaf
        bad = inner & ((left <= idx) | (right <= idx) | (left >= n) | (right >= n))
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise StateError(f"{where}node {i}: children {int(left[i])}, {int(right[i])} must come after it, "
                             f"within the {n} nodes (a loop or a dangling child)")
        return cls(left, right, feature, threshold, value, roots)


@dataclass
class LightGbmOpModel:
    """A LightGBM booster; saved as LightGBM's own model text (stable across its releases)."""

    booster: object
    num_threads: int = 1
    kind: str = field(default="lightgbm", init=False)

    @classmethod
    def fit(cls, F: np.ndarray, y: np.ndarray, n_estimators: int = 200, min_child_samples: int = 5,
            learning_rate: float = 0.1, num_leaves: int = 31, num_threads: int = 1, seed: int = 0) -> "LightGbmOpModel":
        import lightgbm as lgb

        params = {
            "objective": "regression", "learning_rate": learning_rate, "num_leaves": num_leaves,
            "min_data_in_leaf": min_child_samples, "min_data_in_bin": 1,
            "seed": seed, "deterministic": True, "force_row_wise": True, "num_threads": num_threads,
            "verbose": -1,
        }
        data = lgb.Dataset(F, label=log_target(y), params={"verbose": -1, "min_data_in_bin": 1})
        booster = lgb.train(params, data, num_boost_round=n_estimators)
        return cls(booster, num_threads)

    def predict(self, F: np.ndarray) -> np.ndarray:
        if len(F) == 0:
            return np.zeros(0)
        return np.exp(np.asarray(self.booster.predict(F, num_threads=self.num_threads), dtype="float64"))

    def state(self, store, prefix: str) -> dict:
        name = store.put_text(f"{prefix}.lightgbm.txt", self.booster.model_to_string())
        return {"kind": self.kind, "model_file": name, "num_threads": self.num_threads}

    @classmethod
    def from_state(cls, s: dict, store, at: str = "") -> "LightGbmOpModel":
        import lightgbm as lgb

        from .persist import PersistError, integer, text

        name = text(s, "model_file", at)
        threads = integer(s, "num_threads", at, lo=1, hi=1024)
        try:
            model = checked_lightgbm_text(store.get_text(name))
        except ValueError as e:
            if isinstance(e, PersistError):
                raise
            raise PersistError(f"{store.root / name}: {e}") from None
        try:
            booster = lgb.Booster(model_str=model)
        except lgb.basic.LightGBMError as e:
            raise PersistError(f"{store.root / name}: LightGBM refused it: {str(e).splitlines()[0]}") from None
        return cls(booster, threads)


MAX_TREES = 100_000
MAX_LEAVES = 131_072
MAX_FEATURES = 100_000


def checked_lightgbm_text(model: str) -> str:
    """LightGBM model text, checked structurally before LightGBM parses it (a split feature
    past ``max_feature_idx`` or a child out of range aborts the process inside the library):
    numerical splits only, feature indices in range, internal children after their parents
    (no loops), every leaf and node reached once, finite numbers. Returns the text LightGBM
    should read: header without ``tree_sizes`` (so trees are parsed one after the other, not
    located by offsets) and nothing after ``end of trees``. Raises ValueError (one line)."""
    head, sep, rest = model.partition("\nTree=")
    if not sep or "\nend of trees" not in rest:
        raise ValueError("not a LightGBM model text (no trees, or no 'end of trees')")
    header = dict(line.split("=", 1) for line in head.splitlines() if "=" in line)
    if head.splitlines()[:1] != ["tree"]:
        raise ValueError("not a LightGBM model text (first line is not 'tree')")
    try:
        max_feature = int(header.get("max_feature_idx", ""))
    except ValueError:
        raise ValueError("max_feature_idx: missing or not an integer") from None
    if not 0 <= max_feature < MAX_FEATURES:
        raise ValueError(f"max_feature_idx {max_feature} out of range")
    for key in ("num_class", "num_tree_per_iteration"):
        if header.get(key, "1") != "1":
            raise ValueError(f"{key}={header.get(key)!r}: only single-output regression models are read")
    trees_text = rest.split("\nend of trees", 1)[0]
    blocks = ("Tree=" + trees_text).split("\nTree=")
    if len(blocks) > MAX_TREES:
        raise ValueError(f"{len(blocks)} trees (at most {MAX_TREES})")
    for b in blocks:
        _check_tree_block(b, max_feature)
    keep = [line for line in head.splitlines() if not line.startswith("tree_sizes=")]
    return "\n".join(keep) + "\n\nTree=" + trees_text + "\nend of trees\n"


def _check_tree_block(block: str, max_feature: int) -> None:
    lines = block.strip().splitlines()
    tree = lines[0] if lines else ""
    f = dict(line.split("=", 1) for line in lines[1:] if "=" in line)

    def ints(key: str, n: int) -> list[int]:
        try:
            v = [int(x) for x in f.get(key, "").split()]
        except ValueError:
            raise ValueError(f"{tree}: {key}: not integers") from None
        if len(v) != n:
            raise ValueError(f"{tree}: {key}: {len(v)} values, expected {n}")
        return v

    def floats(key: str, n: int) -> None:
        try:
            v = [float(x) for x in f.get(key, "").split()]
        except ValueError:
            raise ValueError(f"{tree}: {key}: not numbers") from None
        if len(v) != n or not all(math.isfinite(x) for x in v):
            raise ValueError(f"{tree}: {key}: expected {n} finite numbers")

    try:
        leaves = int(f.get("num_leaves", ""))
    except ValueError:
        raise ValueError(f"{tree}: num_leaves: missing or not an integer") from None
    if not 1 <= leaves <= MAX_LEAVES:
        raise ValueError(f"{tree}: num_leaves {leaves} out of range")
    if f.get("num_cat", "0") != "0" or f.get("is_linear", "0") != "0":
        raise ValueError(f"{tree}: categorical or linear trees are not read")
    floats("leaf_value", leaves)
    floats("shrinkage", 1)
    if leaves == 1:
        return
    n = leaves - 1
    for k in ints("split_feature", n):
        if not 0 <= k <= max_feature:
            raise ValueError(f"{tree}: split_feature {k} outside 0..{max_feature} (max_feature_idx)")
    floats("threshold", n)
    for d in ints("decision_type", n) if "decision_type" in f else []:
        if d & 1 or not 0 <= d < 16 or (d >> 2) & 3 == 3:
            raise ValueError(f"{tree}: decision_type {d}: only numerical splits are read")
    seen_nodes, seen_leaves = {0}, set()
    for side in ("left_child", "right_child"):
        for parent, c in enumerate(ints(side, n)):
            if c >= 0:
                if not parent < c < n or c in seen_nodes:
                    raise ValueError(f"{tree}: node {parent}: {side} {c} must be a later node reached once (0..{n - 1})")
                seen_nodes.add(c)
            else:
                leaf = ~c
                if not 0 <= leaf < leaves or leaf in seen_leaves:
                    raise ValueError(f"{tree}: node {parent}: {side} {c} is not a leaf reached once (0..{leaves - 1})")
                seen_leaves.add(leaf)
    if len(seen_nodes) != n or len(seen_leaves) != leaves:
        raise ValueError(f"{tree}: nodes or leaves that no split reaches")


__all__ = ["ForestOpModel", "LightGbmOpModel", "checked_lightgbm_text", "log_target"]
