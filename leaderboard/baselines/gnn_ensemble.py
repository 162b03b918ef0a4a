"""``gnn_ensemble``: :mod:`.gnn` trained ``members`` times from different seeds, predictions averaged.

**Why.** One GNN's error on held-out networks is part bias, part the luck of its seed: the
initial weights and the order of the mini-batches. GNNs that differ only in ``random_state``
score differently on the same networks, and the geometric mean of their predictions scores
better than most of them: averaging members that err independently cancels the seed's share of
the error; the bias stays. This is a deep ensemble (Lakshminarayanan et al., NeurIPS'17) without
their variance head, at the size they use; five seeds were all that was tried, so no size was
picked for its test score.

**Fit.** Member ``i`` is :class:`.gnn.GNNPredictor` with every parameter given here and
``random_state + i``, fitted on the same networks. **Predict.** ``exp(mean_i log yhat_i)``:
the members predict log latency, and the mean in log space is the one the L1 loss on log
latency makes unbiased. Fitting costs ``members`` times a GNN's, so the board trains it on the
host tracks and the AI Hub tracks, not on the USC and HELP tracks.

**Training length (``epochs=240``, ``batch_size=16``; the GNN's own defaults are 40 and 8).**
The GNN's defaults were chosen on the USC real CNNs and HELP's small training sets; the host
tracks train on up to 900 networks, where 40 epochs stop short. The longer schedule was chosen on
an inner split of host-random's *training* networks (800 fit / 100 validation, seeded; the
track's test networks were not looked at), one GNN per setting: longer training helped most at
int8 and not at all on PyTorch (whose labels' noise dominates), more epochs than 240 gave
nothing, and batches of 16 bought the same gain for less time than batches of 8. The single
``gnn`` keeps its defaults: its entries on the public tracks were trained with them.

**Subnormal floats** are read and written as zero (``flush_denormals=True``, unlike the single
``gnn``): late in a long fit they slow each step on Intel cores (gnn.py).

Saving: each member's state as :mod:`.gnn` writes it, its weights in ``gnn<i>.pt``.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .base import Networks, Predictor, register_predictor
from .gnn import GNNPredictor


@register_predictor("gnn_ensemble")
class GnnEnsemble(Predictor):
    """``members`` GNNs from seeds ``random_state`` .. ``random_state + members - 1``, their
    predictions averaged in log space; every other parameter is the GNN's (see :mod:`.gnn`)."""

    persist_libraries = ("torch",)
    e2e_only = True  # graphs and training e2e only (base.Predictor.e2e_only)
    # the tracks the board enters it on, and why not the others (leaderboard.run.note_absent_predictors)
    board_tracks = (("host-*", "qaihub-*"), "five GNNs cost five times one, so the board trains it on the host "
                    "tracks and on the AI Hub tracks (30 networks a scenario); one GNN takes 2.3 hours of the USC "
                    "and HELP tracks on this 2-core VM")

    def __init__(self, members: int = 5, hidden: int = 48, layers: int = 4, dropout: float = 0.0, lr: float = 3e-3,
                 weight_decay: float = 1e-5, epochs: int = 240, batch_size: int = 16, random_state: int = 0,
                 threads: int | None = None, readout: str = "additive", loss: str = "l1", min_steps: int = 200,
                 flush_denormals: bool = True):
        self.members = members
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

    def _member(self, i: int) -> GNNPredictor:
        params = self.get_params(deep=False)
        params.pop("members")
        params["random_state"] = int(self.random_state) + i
        return GNNPredictor(**params)

    def fit(self, X: Networks, y: Any) -> "GnnEnsemble":
        X = self._check_X(X)
        y = self._check_y(X, y)
        if int(self.members) < 1:
            raise ValueError(f"members: must be >= 1, got {self.members}")
        self.members_ = [self._member(i).fit(X, y) for i in range(int(self.members))]
        return self

    def predict(self, X: Networks) -> np.ndarray:
        X = self._check_X(X)
        if not hasattr(self, "members_"):
            raise RuntimeError("gnn_ensemble: not fitted (call fit first)")
        logs = np.stack([np.log(m.predict(X)) for m in self.members_])
        return np.exp(logs.mean(axis=0))

    # ------------------------------------------------------------ persistence (see persist.py)
    def _get_state(self, store) -> dict:
        if not hasattr(self, "members_"):
            raise RuntimeError("gnn_ensemble: not fitted (call fit first)")
        return {"members": [m._get_state(store, model_file=f"gnn{i}.pt") for i, m in enumerate(self.members_)]}

    def _set_state(self, s: dict, store) -> None:
        from .persist import StateError

        states = s.get("members")
        if not isinstance(states, list) or len(states) != int(self.members):
            raise StateError(f"members: expected a list of {self.members} member states")
        members = []
        for i, st in enumerate(states):
            if not isinstance(st, dict):
                raise StateError(f"members[{i}]: expected an object")
            m = self._member(i)
            m._set_state(st, store)
            members.append(m)
        self.members_ = members


__all__ = ["GnnEnsemble"]
