"""``additive_mlp``: a network's latency as the sum of its operators' times, each operator's time an
MLP of its description, the whole fitted to end-to-end latency alone.

**Why.** nn-Meter's insight is that a network's time is the sum of the kernels the runtime
executes; a whole-graph regression such as the GNN must learn that latency adds up. This
predictor keeps that structure and learns the per-operator costs from e2e sums, so it needs no
kernel records: the units are the operators LiteRT runs (:func:`.kernel_rows.xnnpack_kernels`:
XNNPACK operators, the convolution variant XNNPACK picks, builtin kernels), described by their
sizes, MACs, weights and memory traffic (:func:`.kernel_rows.with_costs`). For scenarios whose
kernels the deduction does not know (PyTorch, the GPU delegate, and int8: it deduces LiteRT's
fp32 operators) the same operators are the units; their costs are learned from that scenario's
latencies, so only the decomposition is borrowed, not the times. docs/predictors.md says how
well that works and where it does not.

**Model.** Per operator ``o`` of network ``n``: ``t_o = exp(f(x_o))``, ``f`` an MLP (``layers``
hidden layers of ``hidden`` SiLU units) of ``x_o`` = the log1p of :data:`NUMERIC` standardized on
the training operators, plus a one-hot of the operator type (the training networks' types; an
unseen type has an all-zero one-hot). ``latency_n = sum_o t_o + exp(b)``, ``b`` a learned
per-network overhead. Loss: mean squared error of log latency (errors relative, like MAPE).
Adam with a cosine learning rate, mini-batches of ``batch_size`` networks (all of them when
``None``); ``members`` fits from seeds ``random_state + i`` are averaged in log space
(:mod:`.gnn_ensemble`'s reason: it cancels the seed's share of the error).

**Parameters** (``conf/predictor/additive_mlp.yaml``) were chosen on an inner split of
host-random's *training* networks (the track's test networks were not looked at);
docs/predictors.md says what was chosen.

``predict_parts`` gives each operator's predicted time (``kernel_index``, ``kernel``,
``kernel_type`` and the description columns, like nn-Meter's); a network's prediction is their
sum plus ``overhead_ms_``.

**Torch trains, numpy predicts.** ``fit`` trains each member with torch (float32) and keeps its
weights as numpy arrays (``weights_``); ``predict`` and ``predict_parts`` evaluate the MLP with
numpy in float64 from those weights (:func:`log_times`), the one inference path, whether the
predictor was just fitted or loaded, so a saved predictor predicts without importing torch
(`latbench predict` on a shelf entry, benchmarks/bench_predict_cli.py). Saving: the feature scaling
and vocabulary as JSON, each member's weights, named as torch's ``state_dict`` names them, as
numpy arrays ``member<i>.npz``.
"""
from __future__ import annotations

import contextlib
from typing import Any, Sequence

import numpy as np
import pandas as pd

from .base import Networks, Predictor, register_predictor
from .gnn import _torch_mode
from .kernel_rows import DESC_COLUMNS, cached_xnnpack_kernels, with_costs

#: An operator's numeric description (log1p, then standardized): sizes, then the costs with_costs adds.
NUMERIC = ("hw", "out_hw", "cin", "cout", "k", "s", "groups", "n_inputs", "flops", "params", "memory")


def network_operators(X: Networks) -> pd.DataFrame:
    """One row per operator of each network of ``X``, in execution order: ``model_id``,
    ``kernel_index``, :data:`DESC_COLUMNS`, ``kernel``, ``nodes`` and the costs."""
    frames = []
    for m, graph in zip(X.model_ids, X.graphs()):
        d = cached_xnnpack_kernels(graph)[1]
        frames.append(d.assign(model_id=m, kernel_index=np.arange(len(d))))
    cols = ["model_id", "kernel_index", *DESC_COLUMNS, "kernel", "nodes"]
    ops = pd.concat(frames, ignore_index=True)[cols] if frames else pd.DataFrame(columns=cols)
    return with_costs(ops)  # once for all rows: per network it costs more than the deduction


def _build_member(torch: Any, n_in: int, hidden: int, layers: int) -> Any:
    """The per-operator MLP plus the overhead ``b`` (a parameter, so the state_dict holds it), to
    train; its weights' names and shapes are :func:`member_shapes`'."""
    mods: list[Any] = []
    width = n_in
    for _ in range(int(layers)):
        mods += [torch.nn.Linear(width, int(hidden)), torch.nn.SiLU()]
        width = int(hidden)
    mods.append(torch.nn.Linear(width, 1))
    module = torch.nn.Module()
    module.mlp = torch.nn.Sequential(*mods)
    module.overhead = torch.nn.Parameter(torch.zeros(()))
    return module


def member_shapes(n_in: int, hidden: int, layers: int) -> dict[str, tuple[int, ...]]:
    """The name and shape of each weight of one member, as :func:`_build_member`'s ``state_dict``
    names them: ``mlp.<2i>.weight`` (out x in) and ``mlp.<2i>.bias`` per linear layer, ``overhead``."""
    widths = [int(n_in), *[int(hidden)] * int(layers), 1]
    shapes: dict[str, tuple[int, ...]] = {}
    for i, (w_in, w_out) in enumerate(zip(widths[:-1], widths[1:])):
        shapes[f"mlp.{2 * i}.weight"] = (w_out, w_in)
        shapes[f"mlp.{2 * i}.bias"] = (w_out,)
    shapes["overhead"] = ()
    return shapes


def log_times(weights: dict[str, np.ndarray], feats: np.ndarray) -> np.ndarray:
    """The log time (ms) one member's MLP gives each row of ``feats`` (operators x features): its
    linear layers with SiLU between them, in float64, the forward pass of :func:`_build_member`."""
    n = sum(1 for k in weights if k.endswith(".weight"))
    x = np.asarray(feats, dtype="float64")
    for i in range(n):
        x = x @ weights[f"mlp.{2 * i}.weight"].astype("float64").T + weights[f"mlp.{2 * i}.bias"].astype("float64")
        if i < n - 1:
            with np.errstate(over="ignore"):  # exp(-x) of a large negative x is inf: x / inf = -0, SiLU's limit
                x = x / (1.0 + np.exp(-x))
    return x[:, 0]


@register_predictor("additive_mlp")
class AdditiveMLP(Predictor):
    """Sum over the operators LiteRT runs of ``exp(MLP(operator))``, plus an overhead, fitted to
    e2e log latency; ``members`` seeds averaged in log space (see the module docstring)."""

    persist_libraries: tuple[str, ...] = ()  # numpy arrays, evaluated by our own code: torch only trains
    e2e_only = True  # graphs and training e2e only (base.Predictor.e2e_only)

    def __init__(self, members: int = 1, hidden: int = 128, layers: int = 2, lr: float = 3e-3, epochs: int = 300,
                 batch_size: int | None = 32, weight_decay: float = 0.0, random_state: int = 0,
                 threads: int | None = None):
        self.members = members
        self.hidden = hidden
        self.layers = layers
        self.lr = lr
        self.epochs = epochs
        self.batch_size = batch_size
        self.weight_decay = weight_decay
        self.random_state = random_state
        self.threads = threads

    # ------------------------------------------------------------ features
    def _features(self, ops: pd.DataFrame) -> np.ndarray:
        num = (np.log1p(ops[list(NUMERIC)].to_numpy(dtype="float64")) - self.num_mean_) / self.num_std_
        col = {t: i for i, t in enumerate(self.vocab_)}
        onehot = np.zeros((len(ops), len(self.vocab_)))
        idx = ops["kernel_type"].astype(str).map(col)
        known = idx.notna().to_numpy()
        onehot[np.flatnonzero(known), idx[known].astype(int).to_numpy()] = 1.0
        return np.hstack([num, onehot])

    @staticmethod
    def _segments(ops: pd.DataFrame, model_ids: Sequence[str]) -> np.ndarray:
        pos = {m: i for i, m in enumerate(model_ids)}
        return ops["model_id"].map(pos).to_numpy(dtype="int64")

    # ------------------------------------------------------------ fit / predict
    def fit(self, X: Networks, y: Any) -> "AdditiveMLP":
        X = self._check_X(X)
        y = self._check_y(X, y)
        if int(self.members) < 1:
            raise ValueError(f"members: must be >= 1, got {self.members}")
        if self.batch_size is not None and int(self.batch_size) < 1:
            raise ValueError(f"batch_size: must be >= 1 or null (all networks), got {self.batch_size}")
        ops = network_operators(X)
        if ops.empty:
            raise ValueError(f"{X.scenario_id}: the networks have no operators to learn from")
        self.vocab_ = sorted(ops["kernel_type"].astype(str).unique())
        logs = np.log1p(ops[list(NUMERIC)].to_numpy(dtype="float64"))
        self.num_mean_ = logs.mean(axis=0)
        self.num_std_ = np.where(logs.std(axis=0) > 1e-8, logs.std(axis=0), 1.0)
        feats = self._features(ops)
        seg = self._segments(ops, X.model_ids)
        per_op0 = float(np.log(np.mean(y) / (len(ops) / len(X))))  # start: the mean latency spread evenly
        self.weights_ = [self._fit_member(feats, seg, np.log(y), int(self.random_state) + i, per_op0)
                         for i in range(int(self.members))]
        return self

    def _fit_member(self, feats: np.ndarray, seg: np.ndarray, logy: np.ndarray, seed: int,
                    per_op0: float) -> dict[str, np.ndarray]:
        """One member trained with torch (float32); its weights as numpy arrays (:func:`member_shapes`)."""
        n = len(logy)
        order = np.argsort(seg, kind="stable")  # operators grouped by network, for mini-batches
        starts = np.searchsorted(seg[order], np.arange(n + 1))
        counts = np.diff(starts)
        with contextlib.ExitStack() as stack:
            torch = stack.enter_context(_torch_mode(self.threads))
            stack.enter_context(torch.random.fork_rng(devices=[]))
            torch.manual_seed(seed)
            module = _build_member(torch, feats.shape[1], self.hidden, self.layers)
            with torch.no_grad():
                module.mlp[-1].bias.fill_(per_op0)
                module.overhead.fill_(per_op0)
            opt = torch.optim.Adam(module.parameters(), lr=self.lr, weight_decay=self.weight_decay)
            sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=max(1, int(self.epochs)))
            F = torch.tensor(feats[order], dtype=torch.float32)
            S = torch.tensor(seg[order])
            t = torch.tensor(logy, dtype=torch.float32)
            bs = n if self.batch_size is None else min(n, int(self.batch_size))
            shuffle = np.random.default_rng(seed)
            module.train()
            for _ in range(int(self.epochs)):
                perm = np.arange(n) if bs == n else shuffle.permutation(n)
                for b in range(0, n, bs):
                    nets = np.sort(perm[b:b + bs])
                    if bs == n:
                        rows, local = slice(None), S
                    else:  # the rows of these networks' operators, and their position in the batch
                        lens = counts[nets]
                        local_np = np.repeat(np.arange(len(nets)), lens)
                        within = np.arange(lens.sum()) - (np.cumsum(lens) - lens)[local_np]
                        rows = torch.from_numpy(starts[nets][local_np] + within)
                        local = torch.from_numpy(local_np)
                    opt.zero_grad()
                    per = torch.exp(module.mlp(F[rows]).squeeze(1))
                    total = torch.zeros(len(nets)).index_add_(0, local, per) + torch.exp(module.overhead)
                    loss = torch.mean((torch.log(total) - t[torch.as_tensor(nets)]) ** 2)
                    loss.backward()
                    opt.step()
                sched.step()
            return {k: v.detach().cpu().numpy().copy() for k, v in module.state_dict().items()}

    def _check_fitted(self) -> None:
        if not hasattr(self, "weights_"):
            raise RuntimeError(f"{type(self).__name__} is not fitted: call fit (or load) first")

    def _log_parts(self, feats: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per member: each operator's log time (:func:`log_times`), and the log overhead."""
        per = np.stack([log_times(w, feats) for w in self.weights_]) if len(feats) else \
            np.zeros((len(self.weights_), 0))
        return per, self._log_overheads()

    def _log_overheads(self) -> np.ndarray:
        return np.array([float(w["overhead"]) for w in self.weights_])

    @property
    def overhead_ms_(self) -> float:
        """The ensemble's per-network overhead (the geometric mean of the members')."""
        self._check_fitted()
        return float(np.exp(np.mean(self._log_overheads())))

    def _operator_times(self, X: Networks) -> tuple[pd.DataFrame, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The operators of ``X``, each member's time for each (members x operators), their
        network, each member's sum of them per network (members x networks) and its overhead."""
        ops = network_operators(X)
        per, over = self._log_parts(self._features(ops))
        seg = self._segments(ops, X.model_ids)
        t = np.exp(per)
        totals = np.zeros((len(self.weights_), len(X)))
        for i in range(len(self.weights_)):
            np.add.at(totals[i], seg, t[i])
        return ops, t, seg, totals, np.exp(over)[:, None]

    @staticmethod
    def _ensemble(totals: np.ndarray) -> np.ndarray:
        """The members' network totals, averaged in log space."""
        return np.exp(np.log(totals).mean(axis=0)).astype("float64")

    def predict_parts(self, X: Networks) -> pd.DataFrame:
        """One row per operator: ``model_id``, ``kernel_index``, ``kernel``, ``kernel_type``, the
        description and cost columns, ``predicted_ms``. The members' network totals are averaged
        in log space; each operator gets its share of that total by the members' mean share, and
        the network's prediction is the sum of its rows plus ``overhead_ms_``."""
        X = self._check_X(X)
        self._check_fitted()
        ops, t, seg, totals, over = self._operator_times(X)
        if ops.empty:
            ops["predicted_ms"] = []
            return ops
        share = (t / totals[:, seg]).mean(axis=0)  # an operator's share of its network's operator time
        ops["predicted_ms"] = share * (self._ensemble(totals + over) - self.overhead_ms_)[seg]
        return ops

    def predict(self, X: Networks) -> np.ndarray:
        X = self._check_X(X)
        self._check_fitted()
        if not len(X):
            return np.zeros(0, dtype="float64")
        _, _, _, totals, over = self._operator_times(X)
        return self._ensemble(totals + over)

    # ------------------------------------------------------------ persistence (persist.py)
    def _get_state(self, store) -> dict:
        self._check_fitted()
        return {"numeric_features": list(NUMERIC), "vocab": list(self.vocab_), "num_mean": self.num_mean_.tolist(),
                "num_std": self.num_std_.tolist(),
                "member_files": [store.put_arrays(f"member{i}.npz", w) for i, w in enumerate(self.weights_)]}

    def _set_state(self, s: dict, store) -> None:
        from .persist import PersistError, StateError, array

        if s.get("numeric_features") != list(NUMERIC):
            raise StateError(f"numeric_features: {str(s.get('numeric_features'))[:200]} differ from this code's")
        vocab = s.get("vocab")
        if not isinstance(vocab, list) or len(vocab) > 10_000 or not all(isinstance(v, str) for v in vocab):
            raise StateError("vocab: expected a list of operator types")
        files = s.get("member_files")
        if not isinstance(files, list) or len(files) != int(self.members) or not all(isinstance(f, str) for f in files):
            raise StateError(f"member_files: expected a list of {self.members} file names")
        self.vocab_ = list(vocab)
        self.num_mean_ = array(s, "num_mean", length=len(NUMERIC))
        self.num_std_ = array(s, "num_std", length=len(NUMERIC), positive=True)
        bad = [f for f in files if not f.endswith(".npz")]
        if bad:
            raise StateError(f"member_files: {bad[0][:80]!r}: " + (
                "weights saved as torch tensors by an earlier latbench; refit the predictor (a shelf: "
                "`latbench shelf build`)" if bad[0].endswith(".pt") else "expected numpy arrays (.npz)"))
        shapes = member_shapes(len(NUMERIC) + len(self.vocab_), self.hidden, self.layers)
        self.weights_ = []
        for name in files:
            w = store.get_arrays(name)
            got = {k: tuple(v.shape) for k, v in w.items()}
            if got != shapes:
                raise PersistError(f"{store.root / name}: does not fit the saved network (weights "
                                   f"{str(sorted(got.items()))[:200]}, expected {str(sorted(shapes.items()))[:200]})")
            self.weights_.append(w)


__all__ = ["AdditiveMLP", "NUMERIC", "log_times", "member_shapes", "network_operators"]
