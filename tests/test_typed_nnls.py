"""typed_nnls and the leaderboard mask it relies on (issue 17, USC real CNNs).

The mask: a predictor that learns from the training networks' other scenarios must never see a
test network's measurement in any scenario. typed_nnls: convolutions priced apart by kernel and
stride; where training op times exist the op lookup table, alone or inside the fit (hybrid),
chosen by inner cross-validation; the e2e fit where they are hidden."""
from __future__ import annotations

import numpy as np
import pytest

from leaderboard.baselines import Networks, make_predictor
from leaderboard.baselines.typed_nnls import network_sums, typed_op, unfused
from leaderboard.run import mask
from leaderboard.tracks import BLANKED
from pipelines.dataset import Dataset
from support.fixtures import usc_pixel4

MODELS = ["resnet10", "resnet14", "resnet18_wd2", "mobilenet_w1", "mobilenet_wd4", "mobilenetv2_w1",
          "mobilenetv2_wd2", "squeezenet_v1_1", "regnetx002", "mnasnet_a1", "mobilenetv2_wd4", "resnet18"]
CPU, GPU = "usc-pixel4-tflite-cpu-1large-fp32", "usc-pixel4-pytorch-gpu-fp16"


@pytest.fixture(scope="module")
def ds(usc_dir) -> Dataset:
    return usc_pixel4(usc_dir, MODELS)


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
    # a `uses: kernels` track blanks the scenario's op times and keeps its kernel records
    kern = mask(ds, GPU, test, all_ops=BLANKED["kernels"]).tables()
    assert kern["ops"].loc[kern["ops"]["scenario_id"] == GPU, "latency_ms"].isna().all()
    k = kern["kernels"]
    train_k = k[(k["scenario_id"] == GPU) & ~k["model_id"].isin(test)]
    assert len(train_k) and train_k["latency_ms"].notna().any()
    assert k.loc[(k["scenario_id"] == GPU) & k["model_id"].isin(test), "latency_ms"].isna().all()


def test_convolutions_are_typed_by_kernel_and_stride(ds):
    assert [typed_op("conv2d", 1, 1), typed_op("conv2d", 3, 2), typed_op("conv2d", 7, 2), typed_op("dwconv2d", 5, 1),
            typed_op("add", 1, 1)] == ["conv_k1_s1", "conv_k3_s2", "conv_k5_s2", "dw_k5_s1", "add"]
    (sums,) = network_sums(Networks(ds, (ds.models.set_index("name").loc["resnet18", "model_id"],), CPU))
    assert sums["conv_k7_s2:n" if "conv_k7_s2:n" in sums else "conv_k5_s2:n"] == 1  # the 7x7 stem
    assert sums["conv_k3_s1:n"] > sums["conv_k1_s2:n"] > 0  # 3x3 body convs, 1x1 strided shortcuts
    assert sums["conv_k3_s1:flops"] > 1000  # MACs in millions: resnet18's 3x3 convs are ~1.6 G


def test_stem_convolutions_are_typed_apart_only_when_asked(ds):
    """stem=True: a convolution of the image (<= 4 input channels) is a stem_k*_s*, any other
    convolution keeps its body type; the default leaves the committed typing unchanged."""
    assert typed_op("conv2d", 3, 2, 3) == "stem_k3_s2"
    assert typed_op("conv2d", 7, 1, 3) == "stem_k7_s1"
    assert typed_op("conv2d", 3, 2, 64) == "conv_k3_s2"
    assert typed_op("dwconv2d", 3, 2, 3) == "dw_k3_s2"
    X = Networks(ds, (ds.models.set_index("name").loc["resnet18", "model_id"],), CPU)
    (plain,), (stem,) = network_sums(X), network_sums(X, stem=True)
    assert stem["stem_k7_s2:n"] == 1 and not any(k.startswith("stem_") for k in plain)
    assert stem.get("conv_k5_s2:n", 0) == plain["conv_k5_s2:n"] - 1  # the stem left the body's 7x7 column
    assert sum(v for k, v in stem.items() if k.endswith(":flops")) == pytest.approx(
        sum(v for k, v in plain.items() if k.endswith(":flops")))  # same MACs, split otherwise
    Xs = Networks.of_scenario(ds, CPU)
    p = make_predictor("typed_nnls", stem=True, min_networks=1).fit(Xs, Xs.y())
    assert any(c.startswith("stem_") for c in p.columns_)
    with pytest.raises(ValueError, match="stem"):
        make_predictor("typed_nnls", stem="yes").fit(Xs, Xs.y())
    # stem="cpu": typed apart where the scenario runs on a CPU, not on its GPU (a GPU runs the stem
    # about as the body: usc-gpu-oplevel 4.00% MAPE with the typing, 3.47% without)
    Xg = Networks.of_scenario(ds, GPU)
    for X_, typed in ((Xs, True), (Xg, False)):
        q = make_predictor("typed_nnls", stem="cpu", min_networks=1, target="e2e").fit(X_, X_.y())
        assert q.stem_ is typed and any(c.startswith("stem_") for c in q.columns_) is typed, X_.scenario_id


def test_fixed_modes_where_training_op_times_exist_and_where_hidden(ds):
    X = Networks.of_scenario(ds, GPU)
    y = X.y()
    tr, te = np.arange(len(X)) % 4 != 0, np.arange(len(X)) % 4 == 0
    p = make_predictor("typed_nnls", target="ops").fit(X[tr], y[tr])
    assert p.mode_ == "ops"
    ape = np.abs(p.predict(X[te]) - y[te]) / y[te]
    assert ape.mean() < 0.15
    # (9 training networks are too few to judge hybrid's accuracy: the benchmark does, on the track)
    h = make_predictor("typed_nnls", target="hybrid").fit(X[tr], y[tr])
    assert h.mode_ == "hybrid" and any(c.endswith(":lut") for c in h.columns_)  # table times beside the op sums
    assert np.all(h.predict(X[te]) > 0)
    hidden = mask(ds, GPU, list(np.asarray(X.model_ids)[te]), all_ops=True)
    Xh = Networks(hidden, tuple(np.asarray(X.model_ids)[tr]), GPU)
    q = make_predictor("typed_nnls").fit(Xh, y[tr])
    assert q.mode_ == "e2e" and (q.coef_ >= 0).all()
    assert set(q.cv_mape_) == {f"e2e@{a:g}" for a in (0.01, 0.03, 0.1, 0.3, 1.0)} or q.cv_mape_ == {}
    assert np.all(np.isfinite(q.predict(Networks(hidden, tuple(np.asarray(X.model_ids)[te]), GPU))))
    with pytest.raises(ValueError, match="target='hybrid' but no training network has op times"):
        make_predictor("typed_nnls", target="hybrid").fit(Xh, y[tr])


def test_auto_chooses_the_fit_by_inner_cv_on_the_training_networks(ds):
    """target=auto scores e2e (per ridge), ops and hybrid by inner CV and keeps the best; the
    held-out networks' op times are never needed (blanking them changes nothing)."""
    X = Networks.of_scenario(ds, GPU)
    y = X.y()
    ids = list(X.model_ids)
    tr, new = ids[:-3], ids[-3:]
    Xtr = Networks(ds, tuple(tr), GPU)
    p = make_predictor("typed_nnls", inner_folds=3, cv_alphas=[0.1, 1.0]).fit(Xtr, y[:-3])
    assert set(p.cv_mape_) == {"e2e@0.1", "e2e@1", "ops@0", "hybrid@0.1", "hybrid@1"}
    best = min(p.cv_mape_, key=p.cv_mape_.get)
    assert f"{p.mode_}@{p.alpha_:g}" == best
    # the leaderboard's view (the networks to predict measured nowhere): the same choice and fit
    view = mask(ds, GPU, new, all_ops=False)
    q = make_predictor("typed_nnls", inner_folds=3, cv_alphas=[0.1, 1.0]).fit(Networks(view, tuple(tr), GPU), y[:-3])
    assert q.cv_mape_ == p.cv_mape_
    np.testing.assert_allclose(q.predict(Networks(view, tuple(new), GPU)), p.predict(Networks(ds, tuple(new), GPU)))
    # the chosen fit survives a save/load round trip
    import tempfile
    from pathlib import Path

    from leaderboard.baselines.persist import load_predictor, save_predictor

    with tempfile.TemporaryDirectory() as tmp:
        r = load_predictor(save_predictor(p, Path(tmp) / "p"))
    np.testing.assert_allclose(r.predict(X), p.predict(X))  # noqa: the whole set, seen and new


def test_the_inner_cv_chooses_the_typing_and_the_choice_is_saved(ds):
    """cv_stem / cv_narrow: each ridge is scored with and without each typing; the lowest inner-CV
    MAPE wins, the fit and its predictions use that typing, and a save/load round trip keeps it."""
    X = Networks.of_scenario(ds, CPU)
    y = X.y()
    p = make_predictor("typed_nnls", inner_folds=3, cv_alphas=[0.1, 1.0], stem=True, narrow=32,
                       cv_stem=True, cv_narrow=True).fit(X, y)
    assert set(p.cv_mape_) == {f"e2e@{a}{s}{n}" for a in ("0.1", "1") for s in ("", "/stem") for n in ("", "/n32")}
    best = min(p.cv_mape_, key=p.cv_mape_.get)
    assert p.cv_key_ == best and (p.stem_ == ("/stem" in best)) and (p.narrow_ == (32.0 if "/n32" in best else 0.0))
    kinds = {c.rsplit(":", 1)[0] for c in p.columns_}
    assert any(k.startswith("stem_") for k in kinds) == p.stem_
    assert not any(k.endswith("_n") for k in kinds) or p.narrow_ > 0
    # the same typing fixed without the choice gives the same fit
    q = make_predictor("typed_nnls", inner_folds=3, alpha=p.alpha_, cv_alphas=[p.alpha_], stem=p.stem_,
                       narrow=p.narrow_).fit(X, y)
    np.testing.assert_allclose(q.predict(X), p.predict(X))
    import tempfile
    from pathlib import Path

    from leaderboard.baselines.persist import load_predictor, save_predictor

    with tempfile.TemporaryDirectory() as tmp:
        r = load_predictor(save_predictor(p, Path(tmp) / "p"))
    assert (r.stem_, r.narrow_) == (p.stem_, p.narrow_)
    np.testing.assert_allclose(r.predict(X), p.predict(X))


def test_unfused_counts_the_batchnorm_and_relu_no_converter_folds():
    """A conv's BN and ReLU fold into it; a BN-ReLU on a concatenation (DenseNet's pre-activation)
    or a ReLU on a sum does not: counted, with its output elements."""
    from generators import Graph

    g = Graph("dense", source="test")
    x = g.input([1, 3, 8, 8])
    c1 = g.add("relu", g.add("batchnorm", g.add("conv2d", x, out_channels=4, kernel=3, padding=1)))  # folded
    c2 = g.add("conv2d", c1, out_channels=4, kernel=3, padding=1)
    cat = g.add("concat", [c1, c2])
    free = g.add("relu", g.add("batchnorm", cat))  # on the concatenation: 2 unfused ops of 8x8x8
    s = g.add("relu", g.add("add", [g.add("conv2d", free, out_channels=4, kernel=1), c2]))  # on a sum: 1 of 4x8x8
    g.set_outputs(s)
    g.validate()
    assert unfused(g) == (3, pytest.approx((2 * 512 + 256) / 1e6))


def test_free_ew_adds_the_unfused_ops_as_a_typed_op(ds):
    X = Networks(ds, (ds.models.set_index("name").loc["resnet18", "model_id"],), CPU)
    (plain,), (free,) = network_sums(X), network_sums(X, free_ew=True)
    n, elems = unfused(ds.graph(X.model_ids[0]))
    assert n > 0  # resnet18's ReLU after each residual sum
    assert free["ew_unfused:n"] == n and free["ew_unfused:mem"] == pytest.approx(elems)
    assert {k: v for k, v in free.items() if not k.startswith("ew_unfused")} == plain


def test_narrow_extra_counts_narrow_convolutions_again_as_one_surcharge_op(ds):
    """narrow_extra=N: every body convolution with <= N output channels stays in its own type's
    columns and is counted a second time, pooled, as ``conv_narrow`` (count, MACs): the same
    convolutions the ``narrow`` typing puts apart; a fit can then only add time for them."""
    X = Networks(ds, (ds.models.set_index("name").loc["mobilenet_wd4", "model_id"],), CPU)
    (plain,), (extra,), (split,) = network_sums(X), network_sums(X, narrow_extra=32), network_sums(X, narrow=32)
    assert {k: v for k, v in extra.items() if not k.startswith("conv_narrow")} == plain
    narrow_n = sum(v for k, v in split.items() if k.endswith("_n:n"))
    narrow_flops = sum(v for k, v in split.items() if k.endswith("_n:flops"))
    assert narrow_n > 0  # mobilenet at width 1/4: 8-32 output channels
    assert extra["conv_narrow:n"] == narrow_n and extra["conv_narrow:flops"] == pytest.approx(narrow_flops)
    (wide,) = network_sums(Networks(ds, (ds.models.set_index("name").loc["resnet18", "model_id"],), CPU), narrow_extra=32)
    assert not any(k.startswith("conv_narrow") for k in wide)  # resnet18's convs have >= 64 channels
    Xs = Networks.of_scenario(ds, CPU)
    p = make_predictor("typed_nnls", narrow_extra=32, min_networks=1, target="e2e").fit(Xs, Xs.y())
    assert "conv_narrow:flops" in p.columns_ and (p.coef_ >= 0).all()
    for bad in (-1, True, "32"):
        with pytest.raises(ValueError, match="narrow_extra"):
            make_predictor("typed_nnls", narrow_extra=bad).fit(Xs, Xs.y())


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
    with pytest.raises(ValueError, match="inner_folds"):
        make_predictor("typed_nnls", inner_folds=1).fit(X, X.y())
    with pytest.raises(ValueError, match="cv_alphas"):
        make_predictor("typed_nnls", cv_alphas=[]).fit(X, X.y())
