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

from foundation import limits


def log_target(y: np.ndarray) -> np.ndarray:
    y = np.asarray(y, dtype="float64")
    if np.any(~np.isfinite(y)) or np.any(y <= 0):
        raise ValueError("op latencies must be finite and > 0 to fit a tree op model")
    return np.log(y)


MAX_INT = np.iinfo(np.int32).max


def fit_forest(F: np.ndarray, y: np.ndarray, n_estimators: int = 100, max_depth: int | None = None,
               min_samples_split: int = 2, max_features: float | int | None = 1.0,
               random_state: int = 0) -> "ForestOpModel":
    """The forest ``RandomForestRegressor(n_estimators, max_depth, min_samples_split, max_features,
    random_state)`` fits on ``(F, y)`` (bootstrap, squared error), tree for tree the same, as arrays.

    Why not the ensemble itself: on the few hundred rows per kernel or op type our predictors give
    a forest, scikit-learn spends most of a fit outside the trees (cloning the template estimator
    through ``get_params``/``inspect.signature``, validating parameters, inputs and sample weights,
    three ``RandomState`` objects seeded from OS entropy per tree): several times what building
    a tree on a few hundred rows takes. Here the trees are drawn exactly as the
    ensemble draws them (one int32 seed per tree from ``RandomState(random_state)``; the bootstrap
    indices, then the splitter's feature order, from ``RandomState(seed)``, re-seeded rather than
    created), the inputs are checked once per forest, and each tree is built with the weights the
    ensemble gives it (bootstrap counts) by the classes ``DecisionTreeRegressor`` builds with
    (:func:`_tree_builder`), or, when this scikit-learn's are not the ones known here, by
    ``DecisionTreeRegressor.fit`` itself. ``tests/test_predictors.py`` checks that the trees equal
    the ensemble's. NaN inputs or a ``random_state`` that is not an int go to the ensemble itself."""
    X = np.asarray(F, dtype=np.float32)
    target = np.ascontiguousarray(np.asarray(y, dtype=np.float64).reshape(-1, 1))
    n = len(X)
    plain = (X.ndim == 2 and n > 0 and len(target) == n and not np.isnan(X).any() and np.all(np.isfinite(target))
             and isinstance(random_state, (int, np.integer)) and not isinstance(random_state, bool))
    if not plain:
        from sklearn.ensemble import RandomForestRegressor

        rf = RandomForestRegressor(n_estimators=n_estimators, max_depth=max_depth, min_samples_split=min_samples_split,
                                   max_features=max_features, random_state=random_state, n_jobs=1)
        return ForestOpModel.from_sklearn(rf.fit(F, y))
    master = np.random.RandomState(random_state)
    seeds = [master.randint(MAX_INT) for _ in range(n_estimators)]  # as the ensemble's _set_random_states
    build = _tree_builder(X.shape[1], max_depth, min_samples_split, max_features)
    draw = np.random.RandomState(0)  # re-seeded per tree: RandomState(seed) without the OS entropy
    split_state = np.random.RandomState(0)
    trees = []
    for seed in seeds:
        draw.seed(seed)
        idx = draw.randint(0, n, n).astype(np.int32)  # the ensemble's _generate_sample_indices
        weight = np.bincount(idx, minlength=n).astype(np.float64)
        split_state.seed(seed)  # the tree's own random state (its splitter draws from it once)
        trees.append(build(X, target, weight, split_state))
    return ForestOpModel.from_trees(trees)


_DIRECT_OK: bool | None = None  # whether the direct builder gives the ensemble's trees (probed once)


def _tree_builder(n_features: int, max_depth: int | None, min_samples_split: int, max_features: float | int | None):
    """``build(X float32 [n, f], y float64 [n, 1], weight float64 [n], random_state) -> sklearn Tree``
    of a ``DecisionTreeRegressor(max_depth, min_samples_split, max_features, random_state)`` fitted
    with those sample weights. Builds with the Cython classes ``DecisionTreeRegressor._fit``
    creates (squared-error criterion, best splitter, depth-first builder) when they are there and,
    probed once per process on a small forest, give the same trees as ``RandomForestRegressor``;
    else (another scikit-learn: private classes change) through ``DecisionTreeRegressor.fit``."""
    global _DIRECT_OK
    import numbers

    from sklearn import config_context
    from sklearn.tree import DecisionTreeRegressor

    def public(X, y, weight, random_state):
        with config_context(skip_parameter_validation=True):
            tree = DecisionTreeRegressor(max_depth=max_depth, min_samples_split=min_samples_split,
                                         max_features=max_features, random_state=random_state)
            return tree.fit(X, y, sample_weight=weight, check_input=False).tree_

    if not isinstance(min_samples_split, numbers.Integral) or isinstance(max_features, str):
        return public
    if max_features is None:
        n_split = n_features
    elif isinstance(max_features, numbers.Integral):
        n_split = int(max_features)
    else:
        n_split = max(1, int(max_features * n_features)) if max_features > 0 else 0
    try:
        from sklearn.tree._criterion import MSE
        from sklearn.tree._splitter import BestSplitter
        from sklearn.tree._tree import DepthFirstTreeBuilder, Tree
    except ImportError:
        return public
    depth = MAX_INT if max_depth is None else int(max_depth)
    outputs = np.ones(1, dtype=np.intp)

    def direct(X, y, weight, random_state):
        splitter = BestSplitter(MSE(1, len(X)), n_split, 1, 0.0, random_state, None)
        tree = Tree(X.shape[1], outputs, 1)
        builder = DepthFirstTreeBuilder(splitter, max(int(min_samples_split), 2), 1, 0.0, depth, 0.0)
        builder.build(tree, X, y, weight, None)
        return tree

    if _DIRECT_OK is None:
        _DIRECT_OK = _probe_direct()
    return direct if _DIRECT_OK else public


def _probe_direct() -> bool:
    """True when :func:`_tree_builder`'s direct build gives ``RandomForestRegressor``'s trees on a
    small forest with ties, repeated rows and a depth limit (a few ms, once per process)."""
    from sklearn.ensemble import RandomForestRegressor

    global _DIRECT_OK
    rng = np.random.RandomState(7)
    F = np.round(rng.lognormal(size=(60, 4)), 1)
    F[:20] = F[20:40]
    y = rng.normal(size=60)
    _DIRECT_OK = True  # the probe's own fit_forest calls build directly
    try:
        for depth, split, feats in ((None, 2, 1.0), (4, 5, 0.5)):
            rf = RandomForestRegressor(n_estimators=3, max_depth=depth, min_samples_split=split, max_features=feats,
                                       random_state=3, n_jobs=1).fit(F, y)
            ours = fit_forest(F, y, n_estimators=3, max_depth=depth, min_samples_split=split, max_features=feats,
                              random_state=3)
            ref = ForestOpModel.from_sklearn(rf)
            if not all(np.array_equal(getattr(ours, k), getattr(ref, k))
                       for k in ("left", "right", "feature", "threshold", "value", "roots")):
                return False
    except (TypeError, ValueError, AttributeError):  # another signature or layout
        return False
    return True


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
        return fit_forest(F, log_target(y), n_estimators=n_estimators, min_samples_split=min_samples_split,
                          max_depth=max_depth, random_state=seed)

    @classmethod
    def from_sklearn(cls, rf) -> "ForestOpModel":
        """A fitted ``RandomForestRegressor`` (or a list of fitted sklearn ``Tree`` objects)."""
        return cls.from_trees([est.tree_ for est in rf.estimators_] if hasattr(rf, "estimators_") else rf)

    @classmethod
    def from_trees(cls, trees) -> "ForestOpModel":
        parts = {k: [] for k in ("left", "right", "feature", "threshold", "value")}
        roots, off = [], 0
        for t in trees:
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


MAX_TREES = limits.TREES
MAX_LEAVES = limits.TREE_LEAVES
MAX_FEATURES = limits.TREE_FEATURES


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


__all__ = ["ForestOpModel", "LightGbmOpModel", "checked_lightgbm_text", "fit_forest", "log_target"]
