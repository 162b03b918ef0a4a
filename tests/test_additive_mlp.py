"""additive_mlp: a network's latency as the sum of its XNNPACK operators' MLP-predicted times,
learnt from end-to-end latency alone (leaderboard/baselines/additive_mlp.py). On the released
host networks: it recovers per-operator costs that are additive by construction, learns the
measured host labels, averages its members in log space, and copes with an operator type it
never saw."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from scipy.stats import spearmanr

from leaderboard.baselines import Networks, make_predictor
from leaderboard.baselines.additive_mlp import network_operators

SMALL = {"epochs": 400, "hidden": 64}


@pytest.fixture(scope="module")
def host():
    """host-v1 at TFLite fp32 on one large core: 160 synthetic networks, the last 30 held out."""
    from pipelines.dataset.load import load_dataset

    ds = load_dataset(Path(__file__).resolve().parents[1] / "datasets" / "host-v1")
    sid = "host-tflite-cpu-1large-fp32"
    names = sorted(ds.models.loc[ds.models["source"] == "synthetic", "model_id"])[:160]
    return ds, sid, Networks(ds, tuple(names[:130]), sid), Networks(ds, tuple(names[130:]), sid)


def _true_parts(ops):
    """A cost per operator that adds up by construction: per type, a power of its work."""
    scale = {"conv": 2e-6, "conv1x1": 1e-6, "dwconv": 4e-6}
    work = ops["flops"].to_numpy(float) + ops["memory"].to_numpy(float)
    return np.array([scale.get(t, 3e-6) for t in ops["kernel_type"]]) * work ** 0.9 + 0.002


def test_recovers_additive_operator_costs(host):
    """Labels that are a sum of per-operator costs: the held-out networks' totals and the
    operators' own times (which the fit never saw) come back."""
    ds, sid, train, test = host
    ops_tr, ops_te = network_operators(train), network_operators(test)
    y_tr = ops_tr.assign(t=_true_parts(ops_tr)).groupby("model_id")["t"].sum().reindex(list(train.model_ids)) + 0.05
    y_te = ops_te.assign(t=_true_parts(ops_te)).groupby("model_id")["t"].sum().reindex(list(test.model_ids)) + 0.05
    p = make_predictor("additive_mlp", **SMALL).fit(train, y_tr.to_numpy())
    err = np.abs(p.predict(test) / y_te.to_numpy() - 1)
    parts = p.predict_parts(test)
    truth = _true_parts(ops_te)
    misplaced = np.abs(parts["predicted_ms"].to_numpy() - truth).sum() / truth.sum()  # time put on the wrong operator
    rho = spearmanr(parts["predicted_ms"], truth)[0]
    print(f"additive_mlp on additive labels: held-out MAPE {100 * err.mean():.2f}%, per-operator Spearman {rho:.3f}, "
          f"{100 * misplaced:.1f}% of the operators' time misplaced")
    assert err.mean() < 0.05 and rho > 0.85 and misplaced < 0.15
    assert list(parts.columns[:3]) == ["model_id", "kernel_index", "kernel_type"]
    assert (parts["predicted_ms"] > 0).all()


def test_learns_the_host_labels(host):
    ds, sid, train, test = host
    p = make_predictor("additive_mlp", **SMALL).fit(train, train.y())
    pred, truth = p.predict(test), test.y()
    mape = 100 * np.mean(np.abs(pred / truth - 1))
    flops = make_predictor("flops").fit(train, train.y()).predict(test)
    mape_flops = 100 * np.mean(np.abs(flops / truth - 1))
    print(f"additive_mlp on 130 host networks, 30 held out: MAPE {mape:.2f}% (flops {mape_flops:.2f}%)")
    assert mape < 10 and mape < mape_flops and spearmanr(pred, truth)[0] > 0.95


def test_members_average_in_log_space(host):
    ds, sid, train, test = host
    small = {**SMALL, "epochs": 40}
    ens = make_predictor("additive_mlp", members=2, random_state=4, **small).fit(train, train.y())
    singles = [make_predictor("additive_mlp", random_state=s, **small).fit(train, train.y()).predict(test) for s in (4, 5)]
    np.testing.assert_allclose(ens.predict(test), np.sqrt(singles[0] * singles[1]), rtol=1e-6)
    assert not np.allclose(singles[0], singles[1])  # the seed matters, so the average does something
    for bad in ({"members": 0}, {"batch_size": 0}):
        with pytest.raises(ValueError, match=next(iter(bad))):
            make_predictor("additive_mlp", **{**small, **bad}).fit(train, train.y())


def test_an_operator_type_it_never_saw(host):
    """Trained without any network that has a depthwise convolution, it still predicts one that
    has (the type's one-hot is all zero: the MLP answers from the sizes and costs)."""
    ds, sid, train, test = host
    ops = network_operators(train)
    with_dw = set(ops.loc[ops["kernel_type"] == "dwconv", "model_id"])
    plain = Networks(ds, tuple(m for m in train.model_ids if m not in with_dw), sid)
    assert len(plain) >= 10 and len(with_dw)
    p = make_predictor("additive_mlp", **{**SMALL, "epochs": 40}).fit(plain, plain.y())
    assert "dwconv" not in p.vocab_
    pred = p.predict(Networks(ds, tuple(sorted(with_dw))[:5], sid))
    assert np.all(np.isfinite(pred)) and np.all(pred > 0)


def test_predicts_with_numpy_what_its_torch_module_computes(host, monkeypatch):
    """Torch trains, numpy predicts: on committed shelf entries, the numpy forward of the saved
    weights (log_times) is the torch module they were trained in, to float64's precision when the
    module runs in float64, and to float32's (a few 1e-6 of a network's time) in float32, as predict
    ran before (issue 55)."""
    import torch

    from leaderboard.baselines import additive_mlp
    from leaderboard.baselines.additive_mlp import _build_member, log_times
    from shelf.store import Shelf

    ds, sid, _, _ = host
    zoo = Networks(ds, tuple(sorted(ds.models.loc[ds.models["source"] == "zoo", "model_id"])[:3]), sid)
    ops = network_operators(zoo)
    shelf = Shelf()
    for entry in ("usc-pixel4-tflite-cpu-1large-fp32", "help-raspi4-cpu", "host-tflite-cpu-1large-int8"):
        assert shelf.entry(entry)["predictor"] == "additive_mlp"
        est = shelf.predictor(entry)
        feats = est._features(ops)
        modules = []
        for w in est.weights_:
            m = _build_member(torch, feats.shape[1], est.hidden, est.layers)
            m.load_state_dict({k: torch.from_numpy(v) for k, v in w.items()})
            modules.append(m.eval())
            with torch.no_grad():
                ref = m.double().mlp(torch.from_numpy(feats)).squeeze(1).numpy()
            np.testing.assert_allclose(log_times(w, feats), ref, rtol=1e-12, atol=1e-12, err_msg=entry)
        ours = est.predict(zoo)

        def torch32(w, f, m=dict(zip(map(id, est.weights_), modules))):
            with torch.no_grad():
                return m[id(w)].float().mlp(torch.tensor(f, dtype=torch.float32)).squeeze(1).double().numpy()

        with monkeypatch.context() as mp:
            mp.setattr(additive_mlp, "log_times", torch32)
            np.testing.assert_allclose(ours, est.predict(zoo), rtol=5e-6, err_msg=entry)
