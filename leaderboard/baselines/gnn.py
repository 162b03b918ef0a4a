"""A graph convolutional network on the IR graph: the BRP-NAS latency predictor, whole-graph.

BRP-NAS (Dudziak et al., NeurIPS'20, Sec. 3) predicts latency with a GCN over the cell graph
(one-hot operator per node, adjacency with self loops, 4 GCN layers, a fully connected head);
nn-Meter (MobiSys'21, Sec. 7.1, baseline 3) extends it to non-cell networks by encoding every
node of the full model graph and adding the layer configuration to each node's features. This
is that extended form over our IR:

- node features (:func:`node_features`): one-hot operator type over the op registry (plus an
  "other" slot for operators unknown when the predictor was fitted) and log-scaled shape and
  attribute features: input/output channels, input/output spatial size, kernel, stride,
  groups, fan-in, MACs ("FLOPs"), parameters, input and output elements. The numeric columns
  are standardised with the training nodes' mean and standard deviation;
- adjacency: the data-flow edges made undirected, self loops added, symmetrically normalised
  ``D^-1/2 (A + I) D^-1/2`` (Kipf & Welling's propagation rule, which BRP-NAS uses);
- an input projection, then ``layers`` residual GCN layers ``H <- H + relu(Â H W + b)``, then
  global pooling (mean and sum over the nodes: the sum keeps the additive nature of latency,
  the mean the mix of operators) and an MLP head;
- target: log latency (standardised). Latencies span orders of magnitude across networks and
  every metric that matters here is relative (MAPE, +-10% accuracy, rank correlation), so a
  squared error on log latency weights a 10% miss equally on a 1 ms and a 100 ms network;
  training on raw ms would let the largest networks dominate the loss.

Training is mini-batch Adam with a cosine learning-rate schedule, seeded: weights and dropout
draw from torch's generator seeded with ``random_state`` inside ``fork_rng`` (the caller's
random state is left as it was), shuffling from its own generator, and torch's deterministic
algorithms are switched on for the duration of ``fit``/``predict`` (restored afterwards), so
the same data and seed give bit-identical predictions on the same machine and thread count.

Defaults (hidden 96, 4 layers, 200 epochs, lr 2e-3, cosine schedule) were set by a few trials
on HELP's Xeon 6226 cells, not tuned per device (BRP-NAS uses 600 hidden units: far slower
on a 2-core machine; not tried).

Saving goes through :func:`.persist.save_predictor`: ``gnn.pt`` holds the module's
``state_dict`` (tensors only, read back with ``weights_only=True``) and ``predictor.json`` the
hyperparameters, op vocabulary, normalisation statistics and library versions: no pickled
Python objects.
"""
from __future__ import annotations

import contextlib
from typing import Any, Iterator, Sequence

import numpy as np

from .base import Networks, Predictor, register_predictor

# Numeric node features, in column order (log1p-scaled before standardisation).
NUMERIC_FEATURES = ("in_channels", "out_channels", "in_hw", "out_hw", "kernel", "stride", "groups",
                    "fan_in", "macs", "params", "in_elements", "out_elements")


def op_vocabulary() -> list[str]:
    """The operator types of the IR registry, sorted (the one-hot columns; "other" follows)."""
    from generators.ops import OPS

    return sorted(OPS)


def _spatial(shape: Sequence[int]) -> int:
    return int(shape[2]) if len(shape) == 4 else 1


def node_features(graph: Any, vocab: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """One row per IR node: ``(one_hot [n, len(vocab)+1], numeric [n, len(NUMERIC_FEATURES)])``,
    numeric already log1p-scaled (standardisation is the predictor's, fitted on training data)."""
    index = {op: i for i, op in enumerate(vocab)}
    costs = {c.name: c for c in graph.costs()}
    nodes = list(graph.nodes.values())
    onehot = np.zeros((len(nodes), len(vocab) + 1), dtype=np.float32)
    num = np.zeros((len(nodes), len(NUMERIC_FEATURES)), dtype=np.float64)
    for i, node in enumerate(nodes):
        onehot[i, index.get(node.op, len(vocab))] = 1.0
        ins = graph.input_shapes(node)
        x = ins[0] if ins else node.shape
        out = node.shape
        k = node.attrs.get("kernel", [1, 1])
        s = node.attrs.get("stride", [1, 1])
        c = costs[node.name]
        num[i] = (x[1] if len(x) > 1 else 1, out[1] if len(out) > 1 else 1, _spatial(x), _spatial(out),
                  k[0], s[0], node.attrs.get("groups", 1), len(node.inputs), c.macs, c.params,
                  c.input_elements, c.output_elements)
    return onehot, np.log1p(num)


def normalized_edges(graph: Any) -> tuple[np.ndarray, np.ndarray]:
    """Edges of ``D^-1/2 (A + I) D^-1/2`` with A the undirected data-flow adjacency:
    ``(index [2, E] int64 as (row, col), weight [E] float32)``, self loops included."""
    from generators.ir import split_ref

    pos = {name: i for i, name in enumerate(graph.nodes)}
    pairs = set()
    for node in graph.nodes.values():
        j = pos[node.name]
        for ref in node.inputs:
            i = pos[split_ref(ref)[0]]
            if i != j:
                pairs.add((i, j))
                pairs.add((j, i))
    n = len(pos)
    pairs.update((i, i) for i in range(n))
    idx = np.array(sorted(pairs), dtype=np.int64).T
    deg = np.bincount(idx[0], minlength=n).astype(np.float64)
    w = 1.0 / np.sqrt(deg[idx[0]] * deg[idx[1]])
    return idx, w.astype(np.float32)


class _Featurized:
    """A graph ready for the network: node features and normalised edges (numeric unscaled)."""

    __slots__ = ("onehot", "numeric", "edges", "weights")

    def __init__(self, graph: Any, vocab: Sequence[str]):
        self.onehot, self.numeric = node_features(graph, vocab)
        self.edges, self.weights = normalized_edges(graph)


@contextlib.contextmanager
def _torch_mode(threads: int | None) -> Iterator[Any]:
    """Deterministic algorithms (and optionally a thread count) for the block; restores both."""
    import torch

    prev_det, prev_threads = torch.are_deterministic_algorithms_enabled(), torch.get_num_threads()
    torch.use_deterministic_algorithms(True)
    if threads:
        torch.set_num_threads(int(threads))
    try:
        yield torch
    finally:
        torch.use_deterministic_algorithms(prev_det)
        torch.set_num_threads(prev_threads)


def _build_module(in_dim: int, hidden: int, layers: int, dropout: float):
    import torch
    from torch import nn

    class GCN(nn.Module):
        """GCN layers + mean/sum readout + MLP head (see the module docstring)."""

        def __init__(self) -> None:
            super().__init__()
            self.inp = nn.Linear(in_dim, hidden)
            self.convs = nn.ModuleList(nn.Linear(hidden, hidden) for _ in range(layers))
            self.drop = nn.Dropout(dropout)
            self.head = nn.Sequential(nn.Linear(2 * hidden, hidden), nn.ReLU(), nn.Linear(hidden, 1))

        def forward(self, x, adj, segment, n_graphs: int, inv_count):
            h = torch.relu(self.inp(x))
            for conv in self.convs:
                h = h + self.drop(torch.relu(conv(torch.sparse.mm(adj, h))))
            summed = torch.zeros(n_graphs, h.shape[1], dtype=h.dtype).index_add_(0, segment, h)
            # sum scaled by a constant (~1/typical node count) keeps activations O(1)
            pooled = torch.cat([summed * inv_count[:, None], summed / 100.0], dim=1)
            return self.head(pooled).squeeze(1)

    return GCN()


@register_predictor("gnn")
class GNNPredictor(Predictor):
    """BRP-NAS-style GCN over the whole IR graph predicting log latency (see module docstring).

    Parameters: ``hidden`` units per layer, ``layers`` GCN layers, ``dropout``, ``lr`` and
    ``weight_decay`` of Adam, ``epochs``, ``batch_size`` graphs per step, ``random_state``
    (weights, shuffling, dropout), ``threads`` (torch intra-op threads during fit/predict;
    None leaves torch's setting)."""

    persist_libraries = ("torch",)

    def __init__(self, hidden: int = 96, layers: int = 4, dropout: float = 0.0, lr: float = 2e-3,
                 weight_decay: float = 1e-5, epochs: int = 200, batch_size: int = 32, random_state: int = 0,
                 threads: int | None = None):
        self.hidden = hidden
        self.layers = layers
        self.dropout = dropout
        self.lr = lr
        self.weight_decay = weight_decay
        self.epochs = epochs
        self.batch_size = batch_size
        self.random_state = random_state
        self.threads = threads

    # ------------------------------------------------------------ data
    def _featurize(self, X: Networks) -> list[_Featurized]:
        return [_Featurized(g, self.vocab_) for g in X.graphs()]

    def _batch(self, torch: Any, items: Sequence[_Featurized]):
        xs, rows, cols, ws, seg, counts = [], [], [], [], [], []
        offset = 0
        for gi, it in enumerate(items):
            n = len(it.onehot)
            num = (it.numeric - self.num_mean_) / self.num_std_
            xs.append(np.concatenate([it.onehot, num.astype(np.float32)], axis=1))
            rows.append(it.edges[0] + offset)
            cols.append(it.edges[1] + offset)
            ws.append(it.weights)
            seg.append(np.full(n, gi, dtype=np.int64))
            counts.append(n)
            offset += n
        x = torch.from_numpy(np.concatenate(xs))
        idx = torch.from_numpy(np.stack([np.concatenate(rows), np.concatenate(cols)]))
        adj = torch.sparse_coo_tensor(idx, torch.from_numpy(np.concatenate(ws)), (offset, offset),
                                      check_invariants=False).coalesce()
        segment = torch.from_numpy(np.concatenate(seg))
        inv_count = 1.0 / torch.tensor(counts, dtype=torch.float32)
        return x, adj, segment, len(items), inv_count

    # ------------------------------------------------------------ fit / predict
    def fit(self, X: Networks, y: Any) -> "GNNPredictor":
        X = self._check_X(X)
        y = self._check_y(X, y)
        self.vocab_ = op_vocabulary()
        items = self._featurize(X)
        allnum = np.concatenate([it.numeric for it in items])
        self.num_mean_ = allnum.mean(axis=0)
        self.num_std_ = np.where(allnum.std(axis=0) > 1e-8, allnum.std(axis=0), 1.0)
        logy = np.log(y)
        self.y_mean_, self.y_std_ = float(logy.mean()), float(logy.std() or 1.0)
        target = (logy - self.y_mean_) / self.y_std_
        with contextlib.ExitStack() as stack:
            torch = stack.enter_context(_torch_mode(self.threads))
            stack.enter_context(torch.random.fork_rng(devices=[]))
            torch.manual_seed(self.random_state)  # weights and dropout
            module = _build_module(len(self.vocab_) + 1 + len(NUMERIC_FEATURES), self.hidden, self.layers,
                                   self.dropout)
            opt = torch.optim.Adam(module.parameters(), lr=self.lr, weight_decay=self.weight_decay)
            sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=max(1, self.epochs))
            shuffle = torch.Generator().manual_seed(self.random_state + 1)
            t = torch.tensor(target, dtype=torch.float32)
            module.train()
            self.loss_curve_ = []
            for _ in range(self.epochs):
                perm = torch.randperm(len(items), generator=shuffle).numpy()
                total = 0.0
                for start in range(0, len(items), self.batch_size):
                    sel = perm[start:start + self.batch_size]
                    batch = self._batch(torch, [items[i] for i in sel])
                    opt.zero_grad()
                    loss = torch.mean((module(*batch) - t[sel]) ** 2)
                    loss.backward()
                    opt.step()
                    total += loss.item() * len(sel)
                sched.step()
                self.loss_curve_.append(total / len(items))
            module.eval()
        self.module_ = module
        return self

    def _check_fitted(self) -> None:
        if not hasattr(self, "module_"):
            raise RuntimeError(f"{type(self).__name__} is not fitted: call fit (or load) first")

    def predict(self, X: Networks) -> np.ndarray:
        X = self._check_X(X)
        self._check_fitted()
        items = self._featurize(X)
        out = np.empty(len(items), dtype=np.float64)
        with _torch_mode(self.threads) as torch, torch.no_grad():
            for start in range(0, len(items), 256):
                chunk = items[start:start + 256]
                z = self.module_(*self._batch(torch, chunk)).double().numpy()
                out[start:start + len(chunk)] = np.exp(z * self.y_std_ + self.y_mean_)
        return out

    # ------------------------------------------------------------ persistence (persist.py)
    def _get_state(self, store) -> dict:
        """Fitted state as JSON plus the module's state_dict in ``gnn.pt`` (tensors only)."""
        self._check_fitted()
        return {"model_file": store.put_tensors("gnn.pt", self.module_.state_dict()),
                "vocab": list(self.vocab_), "numeric_features": list(NUMERIC_FEATURES),
                "num_mean": self.num_mean_.tolist(), "num_std": self.num_std_.tolist(),
                "y_mean": self.y_mean_, "y_std": self.y_std_}

    def _set_state(self, s: dict, store) -> None:
        from .persist import PersistError, StateError, array, number, text

        if s.get("numeric_features") != list(NUMERIC_FEATURES):
            raise StateError(f"numeric_features: {str(s.get('numeric_features'))[:200]} differ from this code's")
        vocab = s.get("vocab")
        if not isinstance(vocab, list) or len(vocab) > 100_000 or not all(isinstance(v, str) for v in vocab):
            raise StateError("vocab: expected a list of op names")
        self.vocab_ = list(vocab)
        n = len(NUMERIC_FEATURES)
        self.num_mean_ = array(s, "num_mean", length=n)
        self.num_std_ = array(s, "num_std", length=n, positive=True)
        self.y_mean_, self.y_std_ = number(s, "y_mean"), number(s, "y_std", positive=True)
        name = text(s, "model_file")
        module = _build_module(len(self.vocab_) + 1 + len(NUMERIC_FEATURES), self.hidden, self.layers, self.dropout)
        try:
            module.load_state_dict(store.get_tensors(name))
        except RuntimeError as e:  # shapes or names that do not fit the network
            raise PersistError(f"{store.root / name}: does not fit the saved network ({str(e).splitlines()[0]})"[:400]) from None
        module.eval()
        self.module_ = module


__all__ = ["GNNPredictor", "NUMERIC_FEATURES", "node_features", "normalized_edges", "op_vocabulary"]
