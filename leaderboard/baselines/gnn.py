"""A graph convolutional network on the IR graph: the BRP-NAS latency predictor, whole-graph.

BRP-NAS (Dudziak et al., NeurIPS'20, Sec. 3) predicts latency with a GCN over the cell graph;
nn-Meter (MobiSys'21, Sec. 7.1, baseline 3) extends it to non-cell networks by encoding every
node of the full model graph with its layer configuration. This is that extended form over the
IR: one-hot operator type plus log-scaled shape and cost features per node
(:func:`node_features`), the symmetrically normalised adjacency with self loops, residual GCN
layers, and an additive readout (the network's latency is a sum of per-node contributions, so
networks larger than the training ones extrapolate by adding nodes), trained on log latency with
an L1 loss (the relative error the metrics count).

Training is seeded and deterministic (same data and seed, bit-identical predictions on the same
machine and thread count). A graph's features and normalised edges are computed once per process
(:func:`_featurized`) and the sparse product back-propagates through the same symmetric matrix
(:func:`_symmetric_spmm`). docs/predictors.md has the architecture, training, defaults and why.

Saving goes through :func:`.persist.save_predictor`: ``gnn.pt`` holds the module's
``state_dict`` (tensors only, read back with ``weights_only=True``) and ``predictor.json`` the
hyperparameters, op vocabulary, normalisation statistics and library versions: no pickled
Python objects.
"""
from __future__ import annotations

import contextlib
import weakref
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

    __slots__ = ("onehot", "numeric", "edges", "weights", "row_counts", "__weakref__")

    def __init__(self, graph: Any, vocab: Sequence[str]):
        self.onehot, self.numeric = node_features(graph, vocab)
        self.edges, self.weights = normalized_edges(graph)
        self.row_counts = np.bincount(self.edges[0], minlength=len(self.onehot))  # CSR row lengths
        for a in (self.onehot, self.numeric, self.edges, self.weights, self.row_counts):
            a.setflags(write=False)  # shared by every fit on this graph (see _featurized)


_FEATURIZED: "weakref.WeakKeyDictionary[Any, dict[tuple[str, ...], tuple[int, _Featurized]]]" = \
    weakref.WeakKeyDictionary()


def _featurized(graph: Any, vocab: Sequence[str]) -> _Featurized:
    """:class:`_Featurized` of a graph, remembered per graph object and vocabulary: a track fits
    the same networks in every fold and scenario (675 fits on the USC 5-fold track), and the
    features depend on the graph alone (standardisation is applied per fit, on a copy)."""
    key = tuple(vocab)
    per_graph = _FEATURIZED.setdefault(graph, {})
    hit = per_graph.get(key)
    if hit is None or hit[0] != len(graph.nodes):  # IR graphs only grow
        hit = per_graph[key] = (len(graph.nodes), _Featurized(graph, vocab))
    return hit[1]


@contextlib.contextmanager
def _torch_mode(threads: int | None, flush_denormals: bool = False, deterministic: bool = True) -> Iterator[Any]:
    """Deterministic algorithms (and optionally a thread count, and subnormal floats read and
    written as zero on the calling thread) for the block; restores them (torch has no getter for
    the last: it is switched off again, which is torch's default). ``deterministic=False`` leaves
    torch's setting as it is: a forward pass of dense layers on the CPU has one algorithm, and
    switching the setting imports torch's compiler configuration (``torch._inductor``, about a
    second: most of a one-file ``latbench predict``)."""
    import torch

    prev_det, prev_threads = torch.are_deterministic_algorithms_enabled(), torch.get_num_threads()
    if deterministic:
        torch.use_deterministic_algorithms(True)
    if threads:
        torch.set_num_threads(int(threads))
    if flush_denormals:
        torch.set_flush_denormal(True)
    try:
        yield torch
    finally:
        if deterministic:
            torch.use_deterministic_algorithms(prev_det)
        torch.set_num_threads(prev_threads)
        if flush_denormals:
            torch.set_flush_denormal(False)


def _symmetric_spmm():
    """``spmm(adj, h) = adj @ h`` for a sparse CSR ``adj`` that is symmetric, whose backward
    multiplies by ``adj`` itself (the gradient of ``adj @ h`` is ``adj^T @ grad``): torch's own
    backward builds the transpose on every step. CSR rather than COO: torch's COO product has a
    fixed cost per call, whatever the width, several times CSR's on a batch of USC networks."""
    import torch

    class SymmetricSpMM(torch.autograd.Function):
        @staticmethod
        def forward(ctx, adj, h):
            ctx.adj = adj
            return adj @ h

        @staticmethod
        def backward(ctx, grad):
            return None, ctx.adj @ grad

    return SymmetricSpMM.apply


def _build_module(in_dim: int, hidden: int, layers: int, dropout: float, readout: str = "meansum",
                  y_mean: float = 0.0, y_std: float = 1.0):
    import torch
    from torch import nn

    spmm = _symmetric_spmm()

    class GCN(nn.Module):
        """GCN layers + additive (per-node log-sum-exp) or mean/sum readout (see the module docstring)."""

        def __init__(self) -> None:
            super().__init__()
            self.inp = nn.Linear(in_dim, hidden)
            self.convs = nn.ModuleList(nn.Linear(hidden, hidden) for _ in range(layers))
            self.drop = nn.Dropout(dropout)
            if readout == "meansum":
                self.head = nn.Sequential(nn.Linear(2 * hidden, hidden), nn.ReLU(), nn.Linear(hidden, 1))
            else:
                self.head = nn.Sequential(nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, 1))
                self.register_buffer("y_mean", torch.tensor(float(y_mean)))
                self.register_buffer("y_std", torch.tensor(float(y_std)))

        def forward(self, x, adj, segment, n_graphs: int, inv_count):
            h = torch.relu(self.inp(x))
            for conv in self.convs:
                h = h + self.drop(torch.relu(conv(spmm(adj, h))))
            if readout == "additive":
                s = self.head(h).squeeze(1)  # each node's log ms
                top = torch.full((n_graphs,), -torch.inf).scatter_reduce(0, segment, s.detach(), "amax")
                lse = top + torch.log(torch.zeros(n_graphs).index_add_(0, segment, torch.exp(s - top[segment])))
                return (lse - self.y_mean) / self.y_std
            summed = torch.zeros(n_graphs, h.shape[1], dtype=h.dtype).index_add_(0, segment, h)
            # sum scaled by a constant (~1/typical node count) keeps activations O(1)
            pooled = torch.cat([summed * inv_count[:, None], summed / 100.0], dim=1)
            return self.head(pooled).squeeze(1)

    return GCN()


@register_predictor("gnn")
class GNNPredictor(Predictor):
    """BRP-NAS-style GCN over the whole IR graph predicting log latency (see module docstring).

    Parameters: ``hidden`` units per layer, ``layers`` GCN layers, ``dropout``, ``lr`` and
    ``weight_decay`` of Adam, ``epochs``, ``batch_size`` graphs per step, ``min_steps`` (fewest
    optimizer steps: more epochs when the epochs would make fewer), ``random_state`` (weights,
    shuffling, dropout), ``threads`` (torch intra-op threads during fit/predict; None leaves
    torch's setting), ``readout`` (``additive`` | ``meansum``), ``loss`` (``l1`` | ``mse``),
    ``flush_denormals`` (subnormal floats as zero during fit/predict, on the calling thread: all
    of the work with ``threads=1``). Late in a long fit the activations and gradients carry
    subnormal floats, which Intel cores multiply through a slow microcode path: flushing them
    makes a long fit on a Xeon core markedly faster, and moves the predictions no more than
    another seed does. Off by default: the committed ``gnn`` entries were trained without it."""

    persist_libraries = ("torch",)
    e2e_only = True  # graphs and training e2e only (base.Predictor.e2e_only)

    def __init__(self, hidden: int = 48, layers: int = 4, dropout: float = 0.0, lr: float = 3e-3,
                 weight_decay: float = 1e-5, epochs: int = 40, batch_size: int = 8, random_state: int = 0,
                 threads: int | None = None, readout: str = "additive", loss: str = "l1", min_steps: int = 200,
                 flush_denormals: bool = False):
        self.hidden = hidden
        self.layers = layers
        self.dropout = dropout
        self.lr = lr
        self.weight_decay = weight_decay
        self.epochs = epochs
        self.batch_size = batch_size
        self.random_state = random_state
        self.threads = threads
        self.readout = readout
        self.loss = loss
        self.min_steps = min_steps
        self.flush_denormals = flush_denormals

    # ------------------------------------------------------------ data
    def _featurize(self, X: Networks) -> list[_Featurized]:
        return [_featurized(g, self.vocab_) for g in X.graphs()]

    def _inputs(self, items: Sequence[_Featurized]) -> list[np.ndarray]:
        """Each graph's network input (one-hot + standardised numeric columns, float32)."""
        return [np.concatenate([it.onehot, ((it.numeric - self.num_mean_) / self.num_std_).astype(np.float32)], axis=1)
                for it in items]

    def _batch(self, torch: Any, items: Sequence[_Featurized], inputs: Sequence[np.ndarray]):
        """The graphs as one disconnected graph: node rows stacked, adjacency block-diagonal (CSR)."""
        import warnings

        cols, ws, counts = [], [], []
        offset = 0
        for it in items:
            n = len(it.onehot)
            cols.append(it.edges[1] + offset)
            ws.append(it.weights)
            counts.append(n)
            offset += n
        # each graph's edges are sorted by (row, col) and later graphs have larger rows: the
        # stacked edges are in CSR order; a row's entries are counted from the graphs' own rows
        crow = np.concatenate([[0], np.cumsum(np.concatenate([it.row_counts for it in items]))])
        x = torch.from_numpy(np.concatenate(inputs))
        with warnings.catch_warnings():  # "sparse CSR support is in beta": the product used is stable
            warnings.simplefilter("ignore", UserWarning)
            adj = torch.sparse_csr_tensor(torch.from_numpy(crow), torch.from_numpy(np.concatenate(cols)),
                                          torch.from_numpy(np.concatenate(ws)), (offset, offset))
        segment = torch.from_numpy(np.repeat(np.arange(len(items), dtype=np.int64), counts))
        inv_count = 1.0 / torch.tensor(counts, dtype=torch.float32)
        return x, adj, segment, len(items), inv_count

    # ------------------------------------------------------------ fit / predict
    def fit(self, X: Networks, y: Any) -> "GNNPredictor":
        X = self._check_X(X)
        y = self._check_y(X, y)
        if self.readout not in ("additive", "meansum"):
            raise ValueError(f"readout: {self.readout!r} is not one of additive, meansum")
        if self.loss not in ("l1", "mse"):
            raise ValueError(f"loss: {self.loss!r} is not one of l1, mse")
        self.vocab_ = op_vocabulary()
        items = self._featurize(X)
        allnum = np.concatenate([it.numeric for it in items])
        self.num_mean_ = allnum.mean(axis=0)
        self.num_std_ = np.where(allnum.std(axis=0) > 1e-8, allnum.std(axis=0), 1.0)
        logy = np.log(y)
        self.y_mean_, self.y_std_ = float(logy.mean()), float(logy.std() or 1.0)
        target = (logy - self.y_mean_) / self.y_std_
        inputs = self._inputs(items)
        with contextlib.ExitStack() as stack:
            torch = stack.enter_context(_torch_mode(self.threads, self.flush_denormals))
            stack.enter_context(torch.random.fork_rng(devices=[]))
            torch.manual_seed(self.random_state)  # weights and dropout
            module = _build_module(len(self.vocab_) + 1 + len(NUMERIC_FEATURES), self.hidden, self.layers,
                                   self.dropout, self.readout, self.y_mean_, self.y_std_)
            if self.readout == "additive":  # start at the mean latency spread evenly over the nodes
                with torch.no_grad():
                    module.head[-1].bias.fill_(self.y_mean_ - float(np.log(np.mean([len(it.onehot) for it in items]))))
            opt = torch.optim.Adam(module.parameters(), lr=self.lr, weight_decay=self.weight_decay)
            self.epochs_ = self._epochs(len(items))
            sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=max(1, self.epochs_))
            shuffle = torch.Generator().manual_seed(self.random_state + 1)
            t = torch.tensor(target, dtype=torch.float32)
            module.train()
            self.loss_curve_ = []
            for _ in range(self.epochs_):
                perm = torch.randperm(len(items), generator=shuffle).numpy()
                total = 0.0
                for start in range(0, len(items), self.batch_size):
                    sel = perm[start:start + self.batch_size]
                    batch = self._batch(torch, [items[i] for i in sel], [inputs[i] for i in sel])
                    opt.zero_grad()
                    err = module(*batch) - t[sel]
                    loss = torch.mean(torch.abs(err)) if self.loss == "l1" else torch.mean(err ** 2)
                    loss.backward()
                    opt.step()
                    total += loss.item() * len(sel)
                sched.step()
                self.loss_curve_.append(total / len(items))
            module.eval()
        self.module_ = module
        return self

    def _epochs(self, n: int) -> int:
        """``epochs``, or more when that many epochs make fewer than ``min_steps`` optimizer steps
        (few training networks: HELP's 10 fill a single batch, one step per epoch)."""
        per_epoch = -(-n // max(1, int(self.batch_size)))
        return max(int(self.epochs), -(-int(self.min_steps) // max(1, per_epoch)))

    def _check_fitted(self) -> None:
        if not hasattr(self, "module_"):
            raise RuntimeError(f"{type(self).__name__} is not fitted: call fit (or load) first")

    def predict(self, X: Networks) -> np.ndarray:
        X = self._check_X(X)
        self._check_fitted()
        items = self._featurize(X)
        inputs = self._inputs(items)
        out = np.empty(len(items), dtype=np.float64)
        with _torch_mode(self.threads, self.flush_denormals) as torch, torch.no_grad():
            for start in range(0, len(items), 256):
                chunk = items[start:start + 256]
                z = self.module_(*self._batch(torch, chunk, inputs[start:start + 256])).double().numpy()
                out[start:start + len(chunk)] = np.exp(z * self.y_std_ + self.y_mean_)
        return out

    # ------------------------------------------------------------ persistence (persist.py)
    def _get_state(self, store, model_file: str = "gnn.pt") -> dict:
        """Fitted state as JSON plus the module's state_dict in ``model_file`` (tensors only)."""
        self._check_fitted()
        return {"model_file": store.put_tensors(model_file, self.module_.state_dict()),
                "vocab": list(self.vocab_), "numeric_features": list(NUMERIC_FEATURES),
                "num_mean": self.num_mean_.tolist(), "num_std": self.num_std_.tolist(),
                "y_mean": self.y_mean_, "y_std": self.y_std_, "readout": self.readout}

    def _set_state(self, s: dict, store) -> None:
        from .persist import StateError, array, number, text

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
        readout = s.get("readout", "meansum")  # files without it were saved before the additive readout
        if readout not in ("additive", "meansum"):
            raise StateError(f"readout: {str(readout)[:100]!r} is not one of additive, meansum")
        self.readout = readout
        module = _build_module(len(self.vocab_) + 1 + len(NUMERIC_FEATURES), self.hidden, self.layers, self.dropout,
                               readout)
        self.module_ = store.load_module(name, module)


__all__ = ["GNNPredictor", "NUMERIC_FEATURES", "node_features", "normalized_edges", "op_vocabulary"]
