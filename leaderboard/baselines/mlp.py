"""``usc_mlp``: the USC study's multi-layer perceptron op model (Section 4.2), one per op type.

Fully connected layers with ReLU after each, Adam, the mean squared percentage error as the loss,
20% of the training ops held out for validation and training stopped when the validation error
has not improved for ``patience`` epochs (the paper: 50); the weights of the best validation
epoch are kept. The paper tunes 1-6 layers of {64, 128, 256, 512} neurons, learning rate in
{5e-3, 5e-4, 5e-5} and weight decay in {1e-3, 1e-4, 1e-5}; here they are parameters (sweep them
with Hydra multirun).

Choices the paper leaves open: the inputs are ``log(1 + feature)``, standardised (the raw
features span six orders of magnitude); the output is ``scale * exp(z)`` with ``scale`` the
median training time, so predictions are positive and the relative loss is well conditioned; and
``z`` is bounded to the training times' range widened 10x each way, because an unbounded
``exp`` extrapolated one held-out network in our first 5-fold run to 3e9 times its latency.

Saved as a torch ``state_dict`` (tensors only, loaded with ``weights_only=True``) plus the
architecture and scaling as JSON; no pickled module.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .base import register_predictor
from .usc_opwise import OpWisePredictor, register_op_model


def _net(d_in: int, layers: int, units: int):
    import torch.nn as nn

    mods, d = [], d_in
    for _ in range(layers):
        mods += [nn.Linear(d, units), nn.ReLU()]
        d = units
    mods.append(nn.Linear(d, 1))
    return nn.Sequential(*mods).double()


@dataclass
class MlpOpModel:
    mu: np.ndarray
    sd: np.ndarray
    scale: float
    layers: int
    units: int
    module: object
    zmin: float = -30.0
    zmax: float = 30.0
    kind: str = field(default="mlp", init=False)

    @classmethod
    def fit(cls, F: np.ndarray, y: np.ndarray, layers: int = 2, units: int = 128, lr: float = 5e-3,
            weight_decay: float = 1e-4, max_epochs: int = 200, patience: int = 50, batch_size: int = 256,
            seed: int = 0) -> "MlpOpModel":
        import torch

        Z = np.log1p(np.maximum(F, 0))
        mu, sd = Z.mean(axis=0), Z.std(axis=0)
        sd = np.where(sd > 0, sd, 1.0)
        scale = float(np.median(y))
        zmin, zmax = float(np.log(np.min(y) / scale) - np.log(10)), float(np.log(np.max(y) / scale) + np.log(10))
        threads = torch.get_num_threads()
        torch.set_num_threads(1)  # tiny matrices: threads only contend
        try:
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(seed)
                net = _net(F.shape[1], layers, units)
                x = torch.from_numpy((Z - mu) / sd)
                t = torch.from_numpy(np.asarray(y, dtype="float64"))
                gen = np.random.default_rng(seed)
                perm = gen.permutation(len(y))
                n_val = int(round(0.2 * len(y))) if len(y) >= 5 else 0
                val, tr = perm[:n_val], perm[n_val:]
                opt = torch.optim.Adam(net.parameters(), lr=lr, weight_decay=weight_decay)

                def loss_of(idx):
                    z = net(x[idx]).squeeze(1).clamp(zmin, zmax)
                    return (((scale * torch.exp(z)) - t[idx]) / t[idx]).pow(2).mean()

                best, best_state, since = np.inf, None, 0
                for _ in range(max_epochs):
                    order = tr[gen.permutation(len(tr))]
                    for lo in range(0, len(order), batch_size):
                        opt.zero_grad()
                        loss = loss_of(torch.from_numpy(order[lo:lo + batch_size]))
                        loss.backward()
                        opt.step()
                    with torch.no_grad():
                        v = float(loss_of(torch.from_numpy(val if n_val else tr)))
                    if v < best - 1e-12:
                        best, since = v, 0
                        best_state = {k: p.detach().clone() for k, p in net.state_dict().items()}
                    else:
                        since += 1
                        if since >= patience:
                            break
                if best_state is not None:
                    net.load_state_dict(best_state)
        finally:
            torch.set_num_threads(threads)
        net.eval()
        return cls(mu, sd, scale, layers, units, net, zmin, zmax)

    def predict(self, F: np.ndarray) -> np.ndarray:
        import torch

        if len(F) == 0:
            return np.zeros(0)
        x = torch.from_numpy((np.log1p(np.maximum(F, 0)) - self.mu) / self.sd)
        with torch.no_grad():
            z = self.module(x).squeeze(1).clamp(self.zmin, self.zmax)
        return self.scale * np.exp(z.numpy())

    def state(self, store, prefix: str) -> dict:
        name = store.put_tensors(f"{prefix}.mlp.pt", self.module.state_dict())
        return {"kind": self.kind, "mu": self.mu.tolist(), "sd": self.sd.tolist(), "scale": self.scale,
                "layers": self.layers, "units": self.units, "d_in": len(self.mu), "state_dict": name,
                "zmin": self.zmin, "zmax": self.zmax}

    @classmethod
    def from_state(cls, s: dict, store, at: str = "") -> "MlpOpModel":
        from .persist import array, integer, number, text

        d_in = integer(s, "d_in", at, lo=1, hi=100_000)
        layers, units = integer(s, "layers", at, hi=64), integer(s, "units", at, lo=1, hi=16_384)
        mu, sd = array(s, "mu", at, length=d_in), array(s, "sd", at, length=d_in, positive=True)
        name = text(s, "state_dict", at)
        net = store.load_module(name, _net(d_in, layers, units))
        return cls(mu, sd, number(s, "scale", at, positive=True), layers, units, net, number(s, "zmin", at),
                   number(s, "zmax", at))


register_op_model("mlp", MlpOpModel)


@register_predictor("usc_mlp")
class UscMlp(OpWisePredictor):
    """Per-op-type MLP (torch) trained on the mean squared percentage error (see module doc)."""

    persist_libraries = ("torch",)

    def __init__(self, target: str = "auto", min_ops: int = 5, random_state: int = 0, layers: int = 2,
                 units: int = 128, lr: float = 5e-3, weight_decay: float = 1e-4, max_epochs: int = 200,
                 patience: int = 50, batch_size: int = 256):
        super().__init__(target=target, min_ops=min_ops, random_state=random_state)
        self.layers = layers
        self.units = units
        self.lr = lr
        self.weight_decay = weight_decay
        self.max_epochs = max_epochs
        self.patience = patience
        self.batch_size = batch_size

    def _fit_op_model(self, F, y, category):
        return MlpOpModel.fit(F, y, layers=self.layers, units=self.units, lr=self.lr,
                              weight_decay=self.weight_decay, max_epochs=self.max_epochs, patience=self.patience,
                              batch_size=self.batch_size, seed=self.random_state)


__all__ = ["MlpOpModel", "UscMlp"]
