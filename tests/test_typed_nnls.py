"""typed_nnls and the leaderboard mask it relies on (issue 17, USC real CNNs).

The mask: a predictor that learns from the training networks' other scenarios must never see a
test network's measurement in any scenario. typed_nnls: convolutions priced apart by kernel and
stride; the op lookup table where training op times exist, the e2e fit where they are hidden."""
from __future__ import annotations

import numpy as np
import pytest

from leaderboard.baselines import Networks, make_predictor
from leaderboard.baselines.typed_nnls import network_sums, typed_op
from leaderboard.run import mask
from pipelines.dataset import Dataset, UscConfig, import_usc

MODELS = ["resnet10", "resnet14", "resnet18_wd2", "mobilenet_w1", "mobilenet_wd4", "mobilenetv2_w1",
          "mobilenetv2_wd2", "squeezenet_v1_1", "regnetx002", "mnasnet_a1", "mobilenetv2_wd4", "resnet18"]
CPU, GPU = "usc-pixel4-tflite-cpu-1large-fp32", "usc-pixel4-pytorch-gpu-fp16"


@pytest.fixture(scope="module")
def ds(shared_dir) -> Dataset:
    r = import_usc(UscConfig(path=str(shared_dir / "external" / "usc-mobile-ml-benchmark"), models=MODELS,
                             devices=["pixel4"]))
    return Dataset(dict(r))


def test_mask_hides_test_networks_in_every_scenario(ds):
    e = ds.e2e_for(CPU)
    test = e["model_id"].tolist()[:3]
    view = mask(ds, CPU, test, all_ops=False)
    t = view.tables()
    assert not t["e2e"]["model_id"].isin(test).any()  # no scenario keeps a test network's e2e
    assert t["e2e"]["scenario_id"].nunique() == ds.e2e["scenario_id"].nunique()
    ops = t["ops"]
    assert ops.loc[ops["model_id"].isin(test), "latency_ms"].isna().all()
    assert len(ops[ops["model_id"].isin(test)]) == len(ds.ops[ds.ops["model_id"].isin(test)])  # configs stay
    train_gpu = ops[~ops["model_id"].isin(test) & (ops["scenario_id"] == GPU)]
    assert train_gpu["latency_ms"].notna().any()  # training networks' op records stay usable
    strict = mask(ds, GPU, test, all_ops=True).tables()["ops"]
    assert strict.loc[strict["scenario_id"] == GPU, "latency_ms"].isna().all()


def test_convolutions_are_typed_by_kernel_and_stride(ds):
    assert [typed_op("conv2d", 1, 1), typed_op("conv2d", 3, 2), typed_op("conv2d", 7, 2), typed_op("dwconv2d", 5, 1),
            typed_op("add", 1, 1)] == ["conv_k1_s1", "conv_k3_s2", "conv_k5_s2", "dw_k5_s1", "add"]
    (sums,) = network_sums(Networks(ds, (ds.models.set_index("name").loc["resnet18", "model_id"],), CPU))
    assert sums["conv_k7_s2:n" if "conv_k7_s2:n" in sums else "conv_k5_s2:n"] == 1  # the 7x7 stem
    assert sums["conv_k3_s1:n"] > sums["conv_k1_s2:n"] > 0  # 3x3 body convs, 1x1 strided shortcuts
    assert sums["conv_k3_s1:flops"] > 1000  # MACs in millions: resnet18's 3x3 convs are ~1.6 G


def test_ops_mode_where_training_op_times_exist_e2e_where_hidden(ds):
    X = Networks.of_scenario(ds, GPU)
    y = X.y()
    tr, te = np.arange(len(X)) % 4 != 0, np.arange(len(X)) % 4 == 0
    p = make_predictor("typed_nnls").fit(X[tr], y[tr])
    assert p.mode_ == "ops"
    ape = np.abs(p.predict(X[te]) - y[te]) / y[te]
    assert ape.mean() < 0.15
    hidden = mask(ds, GPU, list(np.asarray(X.model_ids)[te]), all_ops=True)
    Xh = Networks(hidden, tuple(np.asarray(X.model_ids)[tr]), GPU)
    q = make_predictor("typed_nnls").fit(Xh, y[tr])
    assert q.mode_ == "e2e" and (q.coef_ >= 0).all()
    assert np.all(np.isfinite(q.predict(Networks(hidden, tuple(np.asarray(X.model_ids)[te]), GPU))))


def test_e2e_fit_prices_kernel_types_apart(ds):
    """Latencies made from known per-type costs (3x3 convs 5x dearer per MAC than 1x1) are
    recovered: the fit's weights give each conv type its own price."""
    X = Networks.of_scenario(ds, CPU)
    sums = network_sums(X)
    y = np.array([2.0 + 0.01 * d.get("conv_k3_s1:flops", 0) + 0.002 * d.get("conv_k1_s1:flops", 0)
                  + 0.5 * d.get("dw_k3_s1:flops", 0) for d in sums])
    p = make_predictor("typed_nnls", alpha=0.0, min_networks=1).fit(X, y)
    np.testing.assert_allclose(p.predict(X), y, rtol=1e-3)
    w = dict(zip(p.columns_, p.coef_[1:]))
    assert w["conv_k3_s1:flops"] == pytest.approx(0.01, rel=0.05)
    assert w["conv_k1_s1:flops"] == pytest.approx(0.002, rel=0.05)


def test_bad_parameters_are_one_line_errors(ds):
    X = Networks.of_scenario(ds, CPU)
    with pytest.raises(ValueError, match="alpha"):
        make_predictor("typed_nnls", alpha=-1).fit(X, X.y())
    with pytest.raises(ValueError, match="target"):
        make_predictor("typed_nnls", target="kernels").fit(X, X.y())
