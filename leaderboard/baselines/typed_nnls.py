"""``typed_nnls``: end-to-end latency as a non-negative combination of per-network op sums, with
convolutions typed by kernel and stride; on a scenario whose training networks carry op times
(the USC GPU files), an op lookup table learned from those times as well.

The USC op-wise Lasso (:mod:`.usc_opwise`) fits one linear model per op type through the sum of
a network's ops, so one conv2d model spans 1x1, 3x3 and 7x7 kernels at stride 1 and 2, whose
efficiencies differ several-fold. Here each typed op (``conv_k3_s1``, ``dw_k5_s2``, ...) gets
its own op count, FLOPs, memory and sqrt-MACs sums, fitted by non-negative least squares on
relative error with a small ridge (:class:`TypedNnls`). With training op times the lookup table
enters alone or beside the sums (``target="hybrid"``); ``target="auto"`` chooses the fit and the
ridge by inner cross-validation on the training networks only. docs/predictors.md has the fit,
the optional op sums and the choice in full.
"""
from __future__ import annotations

import weakref
from typing import Any

import numpy as np

from .base import MIN_MS, Networks, Predictor, register_predictor
from .features import CONFIGS, COLUMNS, op_frame
from .usc_opwise import OpTimes

TARGETS = ("auto", "ops", "e2e", "hybrid")
_STATS = ("n", "flops", "mem", "root")
_COLS = [COLUMNS.index(c) for c in ("kernel", "stride", "in_channels", "out_channels", "flops", "memory")]
STEM_CHANNELS = 4  # a convolution reading at most this many channels is a stem (the image: RGB)
STEM_ACCELERATORS = ("cpu",)  # stem="cpu": typed apart only in scenarios on that accelerator


def typed_op(op_type: str, kernel: float, stride: float, in_channels: float | None = None) -> str:
    """The refined type of an op: convolutions by kernel (capped) and stride (1 or 2+). Given
    ``in_channels``, a convolution of the image (<= STEM_CHANNELS channels) is a ``stem_k*_s*``:
    XNNPACK runs the common 3x3/2 one as a dedicated kernel and any other as a GEMM with K = 3 k^2,
    whose time per MAC differs several-fold from the body's convolutions (DLA's 7x7/1 stem at
    224x224 holds 20% of its MACs: priced as a body conv, DLA comes out far too fast)."""
    s = 1 if stride <= 1 else 2
    if op_type == "conv2d" and in_channels is not None and in_channels <= STEM_CHANNELS:
        return f"stem_k{min(int(kernel), 7)}_s{s}"
    if op_type == "conv2d":
        return f"conv_k{min(int(kernel), 5)}_s{s}"
    if op_type == "dwconv2d":
        return f"dw_k{min(int(kernel), 7)}_s{s}"
    if op_type == "group_conv2d":
        return f"gconv_k{min(int(kernel), 3)}"
    return op_type


def _typed_rows(frame: Any, stem: bool = False, narrow: float = 0.0) -> tuple[list[str], np.ndarray]:
    """The typed op of every row of an op frame, and its (out_channels, flops, memory) columns
    (out_channels for network_sums' narrow surcharge, decoded once here). ``narrow`` > 0:
    a body convolution with at most that many output channels is typed apart (``conv_k3_s1_n``):
    a GEMM whose N is below the kernels' register tile runs at a lower MAC rate (DenseNet's
    growth-rate-32 3x3 convs: typed_nnls priced them with the wide ones and came out low)."""
    if not len(frame.config):
        return [], np.zeros((0, 3))
    cols = CONFIGS.columns(frame.config)[:, _COLS]
    keys = [typed_op(t, k, s, c if stem else None)
            for t, (k, s, c) in zip(frame.op_types().tolist(), cols[:, :3].tolist())]
    if narrow > 0:
        keys = [k + "_n" if k.startswith("conv_k") and oc <= narrow else k for k, oc in zip(keys, cols[:, 3].tolist())]
    return keys, cols[:, 3:]


FOLDABLE = frozenset({"batchnorm", "relu", "relu6"})  # what a converter folds into the convolution before it


def unfused(graph: Any) -> tuple[int, float]:
    """(count, output elements in millions) of a graph's batchnorm/ReLU nodes that no converter can
    fold: those not fed by a convolution or by an op folded into one. TFLite and PyTorch Mobile
    fold a conv's BN into its weights and fuse its activation; a BN-ReLU on a concatenation or a
    sum (DenseNet's pre-activation layers: 62-86 of them over 10-14 M elements) runs as its own
    element-wise passes. The op sums price batchnorm by the mostly folded ones, ~0: DenseNet came
    out low on every phone. Memoized on the graph object (graphs only grow)."""
    hit = _UNFUSED.get(graph)
    if hit is not None and hit[0] == len(graph.nodes):
        return hit[1]
    from generators.ir import split_ref

    folded: set[str] = set()
    n, elems = 0, 0.0
    for name, node in graph.nodes.items():
        if node.op not in FOLDABLE or not node.inputs:
            continue
        src = graph.nodes.get(split_ref(node.inputs[0])[0])
        if src is not None and (src.op == "conv2d" or src.name in folded):
            folded.add(name)
        else:
            n += 1
            elems += float(np.prod(node.shape)) / 1e6
    _UNFUSED[graph] = (len(graph.nodes), (n, elems))
    return n, elems


_UNFUSED: "weakref.WeakKeyDictionary[Any, tuple[int, tuple[int, float]]]" = weakref.WeakKeyDictionary()


def network_sums(X: Networks, stem: bool = False, narrow: float = 0.0, free_ew: bool = False,
                 narrow_extra: float = 0.0) -> list[dict[str, float]]:
    """Per network of ``X``: {"<typed op>:<n|flops|mem|root>": sum} from its IR. ``root`` sums the
    square root of each op's MACs: small ops use a core's lanes and caches worse than large ones,
    so time per MAC falls with op size; between the per-op constant (``n``) and the linear MACs
    term, this lets the fit bend."""
    frame = op_frame(X, source="ir")
    out: list[dict[str, float]] = [{} for _ in range(len(X))]
    keys, cols = _typed_rows(frame, stem, narrow)
    for net, key, (_, fl, mem) in zip(frame.net.tolist(), keys, cols.tolist()):
        d = out[net]
        d[key + ":n"] = d.get(key + ":n", 0.0) + 1.0
        d[key + ":flops"] = d.get(key + ":flops", 0.0) + fl / 1e6
        d[key + ":mem"] = d.get(key + ":mem", 0.0) + mem / 1e6
        d[key + ":root"] = d.get(key + ":root", 0.0) + np.sqrt(max(fl, 0.0) / 1e6)
    if narrow_extra > 0:
        # Narrow body convolutions (<= narrow_extra output channels) a second time, pooled over
        # kernels and strides into one typed op: a GEMM whose N is below the micro-kernel's
        # register tile wastes lanes, so such a conv costs its type's time plus a surcharge >= 0.
        # One pooled column, not a typing apart (``narrow``): typing apart gave every conv type
        # its own narrow columns, which few networks fill, and made usc-real-kfold worse; the
        # surcharge made it better (docs/predictors.md).
        for net, key, (c, fl, _) in zip(frame.net.tolist(), keys, cols.tolist()):
            if key.startswith("conv_k") and c <= narrow_extra:
                d = out[net]
                d["conv_narrow:n"] = d.get("conv_narrow:n", 0.0) + 1.0
                d["conv_narrow:flops"] = d.get("conv_narrow:flops", 0.0) + fl / 1e6
    if free_ew:  # the element-wise ops no converter folds (unfused), as one more typed op
        for d, mid in zip(out, X.model_ids):
            n, elems = unfused(X.dataset.graph(mid, X.scenario_id))
            if n:
                d["ew_unfused:n"], d["ew_unfused:mem"] = float(n), elems
    return out


def _lut_sums(frame: Any, keys: list[str], table: Any) -> list[dict[str, float]]:
    """Per network of an op frame: {"<typed op>:lut": the op lookup table's ms summed} (hybrid)."""
    out: list[dict[str, float]] = [{} for _ in range(frame.n_nets)]
    per_op = table._op_predictions(frame) if len(frame.config) else np.zeros(0)
    for net, key, ms in zip(frame.net.tolist(), keys, per_op.tolist()):
        if ms > 0:
            d = out[net]
            d[key + ":lut"] = d.get(key + ":lut", 0.0) + ms
    return out


def _base_type(typed: str) -> str:
    return typed.split("_k")[0] if typed.startswith(("conv_k", "dw_k", "gconv_k", "stem_k")) else typed


def _merge(a: list[dict[str, float]], b: list[dict[str, float]]) -> list[dict[str, float]]:
    return [{**x, **z} for x, z in zip(a, b)]


@register_predictor("typed_nnls")
class TypedNnls(Predictor):
    """Non-negative least squares on relative error over per-network op sums, convolutions typed by
    kernel and stride (+ T_overhead); with training op times, the fit (op sums, op lookup table or
    both) and its ridge chosen by inner cross-validation on the training networks."""

    def __init__(self, target: str = "auto", alpha: float = 0.1, min_networks: int = 3, inner_folds: int = 5,
                 cv_alphas: tuple[float, ...] | list[float] | None = None, stem: bool = False,
                 narrow: float = 0.0, cv_stem: bool = False, cv_narrow: bool = False, free_ew: bool = False,
                 narrow_extra: float = 0.0, random_state: int = 0):
        self.target = target
        self.narrow_extra = narrow_extra  # narrow convolutions' surcharge column (network_sums); 0: off
        self.stem = stem  # stem convolutions typed apart (typed_op); off: the committed typed_nnls entry
        self.narrow = narrow  # narrow convolutions typed apart (_typed_rows); 0: off
        self.cv_stem = cv_stem  # the inner CV chooses between stem and no stem typing
        self.cv_narrow = cv_narrow  # the inner CV chooses between narrow and 0
        self.free_ew = free_ew  # unfolded batchnorm/ReLU counted apart (unfused); off: the committed entry
        self.alpha = alpha
        self.min_networks = min_networks
        self.inner_folds = inner_folds
        self.cv_alphas = cv_alphas
        self.random_state = random_state  # seeds the inner folds; the fits are deterministic

    def _check_params(self) -> None:
        if self.target not in TARGETS:
            raise ValueError(f"typed_nnls: target must be one of {', '.join(TARGETS)}, got {self.target!r}")
        if not isinstance(self.alpha, (int, float)) or not self.alpha >= 0:
            raise ValueError(f"typed_nnls: alpha must be a number >= 0, got {self.alpha!r}")
        if not isinstance(self.min_networks, (int, np.integer)) or self.min_networks < 1:
            raise ValueError(f"typed_nnls: min_networks must be an int >= 1, got {self.min_networks!r}")
        if not isinstance(self.inner_folds, (int, np.integer)) or self.inner_folds == 1 or self.inner_folds < 0:
            raise ValueError(f"typed_nnls: inner_folds must be 0 (no selection) or an int >= 2, got {self.inner_folds!r}")
        if not isinstance(self.stem, (bool, np.bool_)) and self.stem not in STEM_ACCELERATORS:
            raise ValueError(f"typed_nnls: stem must be true, false or one of {', '.join(map(repr, STEM_ACCELERATORS))}, "
                             f"got {self.stem!r}")
        for name in ("narrow", "narrow_extra"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not v >= 0:
                raise ValueError(f"typed_nnls: {name} must be a number >= 0, got {v!r}")
        for name in ("cv_stem", "cv_narrow", "free_ew"):
            if not isinstance(getattr(self, name), (bool, np.bool_)):
                raise ValueError(f"typed_nnls: {name} must be true or false, got {getattr(self, name)!r}")
        if self.cv_alphas is not None and not (len(self.cv_alphas) and all(
                isinstance(a, (int, float)) and a >= 0 for a in self.cv_alphas)):
            raise ValueError(f"typed_nnls: cv_alphas must be a non-empty list of numbers >= 0, got {self.cv_alphas!r}")

    # ------------------------------------------------------------ fit
    def _stem_here(self, X: Networks) -> bool:
        """Is the stem typed apart in X's scenario? ``stem="cpu"``: only where the scenario runs on a
        CPU. Why: a CPU runs the image's 3-channel convolution at a time per MAC several-fold off
        the body's (DLA's 7x7/1 stem is far under-predicted without the typing), a GPU about as the
        body (the typing made usc-gpu-oplevel worse)."""
        if isinstance(self.stem, (bool, np.bool_)):
            return bool(self.stem)
        return X.dataset.scenario(X.scenario_id).accelerator == self.stem

    def _candidates(self, has_times: bool, stem: bool = False,
                    table_alone: bool = True) -> list[tuple[str, float, tuple[bool, float]]]:
        """(mode, alpha, typing) the inner CV chooses from: ``target`` fixes the mode unless it is
        ``auto`` (e2e always; ops and hybrid when the training networks have op times); the typing
        is (stem, narrow), with ``cv_stem`` / ``cv_narrow`` every fit but the table alone also
        without it. Why choose: on the Pixel 4's CPU the stem typing helped TFLite and hurt
        PyTorch Mobile, the narrow one helped fp32 and hurt int8; the training networks say which
        holds in a scenario."""
        if self.target == "ops" and not has_times:
            raise ValueError("typed_nnls: target='ops' but no training network has op times")
        if self.target == "hybrid" and not has_times:
            raise ValueError("typed_nnls: target='hybrid' but no training network has op times")
        modes = [self.target] if self.target != "auto" else (
            ["e2e"] + (["ops"] if table_alone else []) + ["hybrid"] if has_times else ["e2e"])
        alphas = list(self.cv_alphas) if self.cv_alphas is not None else [float(self.alpha)]
        stems = [stem] + ([False] if self.cv_stem and stem else [])
        nars = [float(self.narrow)] + ([0.0] if self.cv_narrow and self.narrow > 0 else [])
        typings = [(st, n) for st in stems for n in nars]
        return [(m, float(a), t) for m in modes for a in (alphas if m != "ops" else [0.0])
                for t in (typings if m != "ops" else [(False, 0.0)])]

    def fit(self, X: Networks, y: Any) -> "TypedNnls":
        X = self._check_X(X)
        y = self._check_y(X, y)
        self._check_params()
        frame = op_frame(X)
        times = OpTimes.of(frame, y)
        if self.target == "ops" and times.has_times.any() and not times.usable:
            raise ValueError(f"typed_nnls: target='ops': {times.why(X.scenario_id)}")
        # op times that cannot be the e2e run's (the host's: XNNPACK off, well over e2e) cannot be the
        # prediction (the table alone); inside the fit (hybrid) their sums get their own weights
        has_times = bool(times.has_times.any())
        cands = self._candidates(has_times, self._stem_here(X), table_alone=times.usable)
        typed = {t: (network_sums(X, *t, free_ew=self.free_ew, narrow_extra=self.narrow_extra), _typed_rows(frame, *t)[0]) for t in {c[2] for c in cands}}
        self.cv_mape_, self.cv_pred_ = {}, {}
        if len(cands) > 1 and self.inner_folds >= 2 and len(X) >= 2 * self.inner_folds:
            self.cv_mape_ = self._inner_cv(X, y, typed, frame, cands)
            best = min(cands, key=lambda c: (self.cv_mape_[_cand_key(*c)], cands.index(c)))
        else:  # one candidate, or too few networks to cross-validate: the mode at ``alpha``
            best = (cands[0][0], 0.0 if cands[0][0] == "ops" else float(self.alpha), cands[0][2])
        self.mode_, self.alpha_, (self.stem_, self.narrow_) = best
        self.cv_key_ = _cand_key(*best)  # the chosen fit's out-of-fold predictions: cv_pred_[cv_key_]
        sums, keys = typed[best[2]]
        self._fit_mode(X, y, sums, frame, keys, self.mode_, self.alpha_)
        return self

    def _inner_cv(self, X, y, typed, frame, cands) -> dict[str, float]:
        """MAPE (%) of every candidate over ``inner_folds`` folds of the training networks; the
        held-out networks' op times are never read (the lookup table is fitted on the others)."""
        rng = np.random.default_rng(self.random_state)
        fold = rng.permutation(np.arange(len(X)) % self.inner_folds)
        err = {_cand_key(*c): np.zeros(len(X)) for c in cands}
        self.cv_pred_ = {c: np.zeros(len(X)) for c in err}  # out-of-fold predictions (typed_nnls_family)
        for k in range(self.inner_folds):
            tr, va = np.flatnonzero(fold != k), np.flatnonzero(fold == k)
            lut = {}
            if any(c[0] != "e2e" for c in cands):
                from .lookup import OpLookupTable

                table = OpLookupTable(target="ops", random_state=self.random_state).fit(X[tr], y[tr], table_only=True)
                lut = {t: _lut_sums(frame, keys, table) for t, (_, keys) in typed.items()}
                table_pred = table.predict(X[va])
            for m, a, n in cands:
                if m == "ops":
                    p = table_pred
                else:
                    sums = typed[n][0]
                    rows = sums if m == "e2e" else _merge(sums, lut[n])
                    inner = TypedNnls(alpha=a, min_networks=self.min_networks)
                    inner._fit_sums([rows[i] for i in tr], y[tr], a)
                    p = inner._predict_sums([rows[i] for i in va])
                err[_cand_key(m, a, n)][va] = np.abs(p - y[va]) / y[va]
                self.cv_pred_[_cand_key(m, a, n)][va] = p
        return {c: round(float(e.mean() * 100), 4) for c, e in err.items()}

    def _fit_mode(self, X, y, sums, frame, keys, mode: str, alpha: float) -> None:
        if mode in ("ops", "hybrid"):
            from .lookup import OpLookupTable

            self.ops_model_ = OpLookupTable(target="ops", random_state=self.random_state).fit(
                X, y, table_only=mode == "hybrid")
        if mode == "ops":
            return
        if mode == "hybrid":
            sums = _merge(sums, _lut_sums(frame, keys, self.ops_model_))
        self._fit_sums(sums, y, alpha)

    def _fit_sums(self, sums: list[dict[str, float]], y: np.ndarray, alpha: float) -> None:
        present: dict[str, int] = {}
        for d in sums:
            for k, v in d.items():
                if v > 0:
                    present[k] = present.get(k, 0) + 1
        self.columns_ = sorted(k for k, c in present.items() if c >= self.min_networks)
        self._set_fallback([k for k in present if k.endswith(":n")], present)
        self.coef_ = _ridge_nnls(self._design(sums), y, float(alpha))

    def _predict_sums(self, sums: list[dict[str, float]]) -> np.ndarray:
        if not sums:
            return np.zeros(0)
        return np.maximum(self._design(sums) @ self.coef_, MIN_MS)

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
        sums = network_sums(X, self.stem_, self.narrow_, free_ew=self.free_ew, narrow_extra=self.narrow_extra)
        if self.mode_ == "hybrid":
            frame = op_frame(X)
            sums = _merge(sums, _lut_sums(frame, _typed_rows(frame, self.stem_, self.narrow_)[0], self.ops_model_))
        return self._predict_sums(sums)

    # ------------------------------------------------------------ persistence (see persist.py)
    def _get_state(self, store) -> dict:
        if self.mode_ == "ops":
            return {"mode": "ops", "ops_model": self.ops_model_._get_state(store)}
        s = {"mode": self.mode_, "columns": list(self.columns_), "coef": self.coef_.tolist(),
             "fallback": dict(self.fallback_), "stem": bool(self.stem_), "narrow": float(self.narrow_)}
        if self.mode_ == "hybrid":
            s["ops_model"] = self.ops_model_._get_state(store)
        return s

    def _set_state(self, s: dict, store) -> None:
        from .persist import StateError, array, mapping, text

        self.mode_ = text(s, "mode", choices=("ops", "e2e", "hybrid"))
        self.stem_, self.narrow_ = False, 0.0
        if self.mode_ in ("ops", "hybrid"):
            from .lookup import OpLookupTable

            m = OpLookupTable(target="ops", random_state=self.random_state)
            m._set_state(mapping(s, "ops_model"), store)
            self.ops_model_ = m
        if self.mode_ == "ops":
            return
        stem, nar = s.get("stem", False), s.get("narrow", 0.0)  # states written before the typings: off
        if not isinstance(stem, bool):
            raise StateError("stem: expected true or false")
        if not isinstance(nar, (int, float)) or not nar >= 0:
            raise StateError("narrow: expected a number >= 0")
        self.stem_, self.narrow_ = stem, float(nar)
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


def _cand_key(mode: str, alpha: float, typing: tuple[bool, float] = (False, 0.0)) -> str:
    """The inner CV's name of a candidate fit (cv_mape_, cv_pred_): 'e2e@0.1', 'e2e@0.1/stem/n32'."""
    stem, narrow = typing
    return f"{mode}@{alpha:g}" + ("/stem" if stem else "") + (f"/n{narrow:g}" if narrow > 0 else "")


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
