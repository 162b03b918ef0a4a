"""nn-Meter's kernel-wise predictor (leaderboard/baselines/nnmeter_kernelwise.py) and its adaptive
data sampling (adaptive_sampling.py): kernel descriptions, the three training modes, the
estimator contract, JSON persistence, and Algorithm 2 on the host (a tiny real run).

Data: small imports of HELP (150 NAS-Bench-201 cells on the Xeon Gold 6226: e2e only) and of
the USC data (4 CNNs on the Pixel 4 GPU: kernel rows), read from ../shared."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from scipy.stats import spearmanr
from sklearn.base import clone

from generators.ir import Graph
from leaderboard.baselines import Networks, load_predictor, make_predictor, save_predictor
from leaderboard.baselines.adaptive_sampling import (CHANNEL_RANGE, DeviceKernelMeasurer, Prior, adaptive_sample,
                                                     fine_grained, fit_kernel_forest, kernel_graph,
                                                     relative_errors)
from leaderboard.baselines.nnmeter_kernelwise import (DESC_COLUMNS, NnMeterPredictor, describe_op_row,
                                                      graph_kernels, load_rules_for, with_costs)
from pipelines.dataset import Dataset, HelpConfig, import_help
from support.fixtures import usc_pixel4

FAST = {"n_estimators": 10, "rules": "paper"}


@pytest.fixture(scope="module")
def help_x(shared_dir) -> Networks:
    r = import_help(HelpConfig(path=str(shared_dir / "external" / "help-nasbench201"), devices=["gold_6226"],
                               indices=list(range(150))))
    return Networks.of_scenario(Dataset(dict(r)), "help-gold6226-cpu")


@pytest.fixture(scope="module")
def usc_gpu(usc_dir) -> Networks:
    models = ["resnet10", "mobilenet_wd4", "mobilenetv2_wd2", "squeezenet_v1_1"]
    return Networks.of_scenario(usc_pixel4(usc_dir, models), "usc-pixel4-tflite-gpu-fp16")


def _small_net() -> Graph:
    g = Graph("small")
    x = g.input([1, 3, 32, 32])
    a = g.add("relu", g.add("batchnorm", g.add("conv2d", x, out_channels=16, kernel=3, padding=1, bias=False)))
    b = g.add("relu6", g.add("batchnorm", g.add("conv2d", a, out_channels=16, kernel=3, padding=1, groups=16)))
    c = g.add("batchnorm", g.add("conv2d", b, out_channels=16, kernel=1))
    s = g.add("relu", g.add("add", [a, c]))
    y = g.add("fc", g.add("flatten", g.add("global_avgpool", s)), out_features=10)
    return g.set_outputs(y)


def test_xnnpack_kernels_of_an_nary_add():
    """An add of three inputs (NAS-Bench-201's cells) runs as two binary adds named after the
    exporter's partial sums; their rows are described from the lowered graph (a KeyError on
    'add/partial_0' once stopped nnmeter_xnnpack on every track with such cells)."""
    from leaderboard.baselines.nnmeter_kernelwise import xnnpack_kernels

    g = Graph("nary")
    x = g.input([1, 8, 16, 16])
    a, b, c = (g.add("conv2d", x, out_channels=8, kernel=3, padding=1) for _ in range(3))
    g.set_outputs(g.add("add", [a, b, c], name="add"))
    ops, desc = xnnpack_kernels(g)
    adds = desc[desc["kernel"].str.startswith("Add")]
    assert len(adds) == 2 and all(n.startswith("add/partial") or n == "add" for n in adds["nodes"])
    assert (adds[["hw", "cin", "cout"]].to_numpy() == [16, 8, 8]).all()


def test_kernels_and_their_features():
    g = _small_net()
    k = graph_kernels(g, load_rules_for("paper"))
    assert k["kernel"].tolist() == ["conv+bn+relu", "dwconv+bn+relu6", "conv+bn", "add+relu", "gap", "reshape", "fc"]
    costs = with_costs(k[list(DESC_COLUMNS)])
    macs = {c.name: c.macs for c in g.costs()}
    first = [n.split(",")[0] for n in k["nodes"]]
    np.testing.assert_array_equal(costs["flops"].to_numpy(), [macs[n] for n in first])  # FLOPs as the IR counts
    dw = k.iloc[1]
    assert (dw["kernel_type"], dw["hw"], dw["cin"], dw["k"], dw["s"], dw["groups"]) == ("dwconv", 32, 16, 3, 1, 16)
    # a dataset op row describing the first conv gives the same description as the IR
    row = pd.Series({"op_type": "conv2d", "in_hw": 32, "out_hw": 32, "in_channels": 3, "out_channels": 16,
                     "kernel": 3, "stride": 1, "groups": 1})
    assert describe_op_row(row) == {c: k.iloc[0][c] for c in DESC_COLUMNS}


def test_params_clone_and_errors(help_x):
    p = make_predictor("nnmeter", n_estimators=7)
    assert isinstance(p, NnMeterPredictor) and p.get_params()["n_estimators"] == 7
    assert not any(k.endswith("_") for k in vars(p))
    assert clone(p).get_params() == p.get_params()
    with pytest.raises(RuntimeError, match="not fitted"):
        p.predict(help_x[:2])
    with pytest.raises(ValueError, match="training: unknown mode"):
        make_predictor("nnmeter", training="magic").fit(help_x[:5], help_x[:5].y())
    with pytest.raises(ValueError, match="needs kernel_samples"):
        make_predictor("nnmeter", training="samples").fit(help_x[:5], help_x[:5].y())


def test_e2e_mode_on_help(help_x, tmp_path):
    """No kernel rows in HELP: the e2e mode. 100 cells train, 50 held out, 6 re-splitting rounds
    (the default 20 rounds are slower). Measured: Spearman 0.98 (6 rounds) to 0.99 (20); the
    FLOPs-linear baseline ranks such splits at ~0.91; floor 0.9."""
    y = help_x.y()
    tr, te = np.arange(len(help_x)) < 100, np.arange(len(help_x)) >= 100
    p = make_predictor("nnmeter", e2e_rounds=6, **FAST).fit(help_x[tr], y[tr])
    assert p.mode_ == "e2e" and {"conv", "relu", "add", "avgpool"} <= set(p.forests_)
    pred = p.predict(help_x[te])
    assert pred.dtype == np.float64 and pred.shape == (te.sum(),) and np.all(pred > 0)
    rho = spearmanr(pred, y[te])[0]
    print(f"nnmeter e2e mode on HELP gold_6226, 100 train / 50 test: spearman {rho:.3f}, "
          f"MAPE {100 * np.mean(np.abs(pred - y[te]) / y[te]):.1f}%")
    assert rho >= 0.9
    parts = p.predict_parts(help_x[te])
    assert {"model_id", "kernel_index", "kernel", "kernel_type", "predicted_ms"} <= set(parts.columns)
    sums = parts.groupby("model_id")["predicted_ms"].sum().reindex(help_x[te].model_ids)
    np.testing.assert_allclose(sums.to_numpy(), pred, rtol=1e-12)
    # re-splitting each network's latency over its kernels brings their sum towards it
    h = p.e2e_history_
    assert len(h) == 7 and h[-1] < h[0] / 2
    fit_err = np.abs(p.predict(help_x[tr]) - y[tr]) / y[tr]
    assert np.median(fit_err) == pytest.approx(h[-1])
    # deterministic with a seed, and the same after a save (JSON only) and load
    again = make_predictor("nnmeter", e2e_rounds=6, **FAST).fit(help_x[tr], y[tr]).predict(help_x[te])
    np.testing.assert_array_equal(again, pred)
    save_predictor(p, tmp_path / "nnm")
    assert sorted(f.name for f in (tmp_path / "nnm").iterdir()) == ["predictor.json"]
    state = json.loads((tmp_path / "nnm" / "predictor.json").read_text())["state"]
    assert "conv" in state["forests"] and isinstance(state["forests"]["conv"]["threshold"], list)
    loaded = load_predictor(tmp_path / "nnm")
    np.testing.assert_array_equal(loaded.predict(help_x[te]), pred)
    assert loaded.predict(help_x[:0]).shape == (0,)


def test_kernel_rows_mode_on_usc_gpu(usc_gpu):
    """USC's GPU kernel rows carry no IR node names: each kernel is described from its op row."""
    y = usc_gpu.y()
    p = make_predictor("nnmeter", **FAST).fit(usc_gpu[:3], y[:3])
    assert p.mode_ == "kernels"
    assert {"conv", "dwconv"} <= set(p.forests_)
    pred = p.predict(usc_gpu[3:])
    assert pred.shape == (1,) and np.all(np.isfinite(pred)) and np.all(pred > 0)
    # what it learnt are kernel times: a training network's predicted conv kernels sum to about
    # its measured conv kernels (the forests fit their training rows closely)
    X = usc_gpu[:1]
    parts = p.predict_parts(X)
    kern = usc_gpu.dataset.kernels_for(usc_gpu.scenario_id, X.model_ids[0])
    measured_conv = kern[kern["kernel_type"].str.startswith("convolution_2d")]["latency_ms"].sum()
    predicted_conv = parts[parts["kernel_type"] == "conv"]["predicted_ms"].sum()
    assert 0.7 < predicted_conv / measured_conv < 1.3


def test_kernel_rows_without_configurations(usc_gpu):
    """Kernel rows that name no op (the host's XNNPACK kernels): auto learns from e2e, as the
    docstring says; asking for kernels mode explicitly is an error naming the scenario."""
    t = usc_gpu.dataset.tables()
    t["ops"] = t["ops"].assign(kernel_index=pd.array([pd.NA] * len(t["ops"]), dtype="Int64"))
    X = Networks(Dataset(t), usc_gpu.model_ids, usc_gpu.scenario_id)
    assert set(X.model_ids) <= set(X.dataset.kernels_for(X.scenario_id)["model_id"])  # kernel rows exist
    p = make_predictor("nnmeter", e2e_rounds=2, **FAST).fit(X[:3], X[:3].y())
    assert p.mode_ == "e2e"
    assert np.all(p.predict(X[3:]) > 0)
    with pytest.raises(ValueError, match=f"{X.scenario_id}: no kernel rows with op configurations"):
        make_predictor("nnmeter", training="kernels", **FAST).fit(X[:3], X[:3].y())


# ---------------------------------------------------------------- adaptive sampling (Algorithm 2)
def test_fine_grained_sampling_keeps_hw_k_s():
    pts = pd.DataFrame([{"kernel_type": "conv", "hw": 56, "out_hw": 56, "cin": 24, "cout": 64, "k": 3, "s": 1,
                         "groups": 1, "n_inputs": 1}])
    new = fine_grained(pts, 10, np.random.default_rng(0))
    assert len(new) == 10 and set(new["hw"]) == {56} and set(new["k"]) == {3} and set(new["s"]) == {1}
    lo, hi = CHANNEL_RANGE
    assert new["cin"].between(np.floor(lo * 24), np.ceil(hi * 24)).all()  # the paper's [9, 28] for 24
    assert new["cout"].between(np.floor(lo * 64), np.ceil(hi * 64)).all()  # and [25, 76] for 64
    assert new["cin"].nunique() > 3


def test_prior_from_zoo_networks():
    from generators.zoo import reference

    prior = Prior.from_graphs([reference("mobilenetv2"), reference("resnet")], "conv", rules="paper")
    assert prior.counts.sum() >= 50  # every conv kernel of both networks
    s = prior.sample(30, np.random.default_rng(0))
    for d in ("hw", "k", "s", "cin", "cout"):  # each dimension drawn from the zoo's values
        assert set(s[d]) <= set(prior.configs[d])
    # a sampled configuration is a single-kernel network that the rules see as one kernel
    g = kernel_graph(s.iloc[0].to_dict())
    k = graph_kernels(g, load_rules_for("paper"))
    assert k["kernel"].tolist() == ["conv+bn+relu"]
    assert {c: k.iloc[0][c] for c in DESC_COLUMNS} == s.iloc[0].to_dict()


def test_adaptive_sampling_on_host_trains_the_predictor(help_x, tmp_path):
    """A tiny real run: 3 test + 5 prior conv kernels measured on core 0, one fine-grained round
    (2 samples) around the worst test point (threshold 0 forces it), then the predictor trains."""
    from pipelines.runners.litert import BINARY

    if not BINARY.is_file():
        pytest.skip(f"the native runtime is not built ({BINARY}); see native/README")
    from generators.zoo import reference

    prior = Prior.from_graphs([reference("mobilenetv1")], "conv", rules="paper")
    measure = DeviceKernelMeasurer(tmp_path / "kernels", runs=3, warmup=1)
    res = adaptive_sample(prior, measure, n_initial=5, n_test=3, m=2, n_worst=1, error_threshold=0.0,
                          max_iterations=1, n_estimators=10, seed=0)
    s = res.samples
    assert len(res.history) == 2 and (s["latency_ms"] > 0).all()
    assert len(list((tmp_path / "kernels").glob("*.records.jsonl"))) == len(s)  # every sample was measured
    # the fine-grained samples sit around the test points the first model got most wrong
    first = s[(s["iteration"] == 0)]
    train, test = first[first["split"] == "train"], first[first["split"] == "test"]
    f = fit_kernel_forest(train[list(DESC_COLUMNS)], train["latency_ms"].to_numpy(), 10, 0)
    err = relative_errors(f, test[list(DESC_COLUMNS)], test["latency_ms"].to_numpy())
    worst = test.iloc[np.argsort(-err)[:1]]
    fine = s[s["stage"] == "fine"]
    assert len(fine) == 2
    assert set(map(tuple, fine[["hw", "k", "s"]].to_numpy())) <= set(map(tuple, worst[["hw", "k", "s"]].to_numpy()))
    # the predictor trains on the measured kernels (no network-level data needed)
    path = res.save(tmp_path / "conv.parquet")
    p = make_predictor("nnmeter", training="samples", kernel_samples=str(path), **FAST).fit(help_x[:3], help_x[:3].y())
    assert p.mode_ == "samples" and list(p.forests_) == ["conv"]
    parts = p.predict_parts(help_x[:3])
    conv = parts[parts["kernel_type"] == "conv"]
    assert len(conv) and np.all(np.isfinite(conv["predicted_ms"])) and (conv["predicted_ms"] > 0).all()


@pytest.fixture(scope="module")
def host_fp32():
    """The released host records at TFLite fp32 on one large core (XNNPACK kernel records):
    160 synthetic networks, the last 30 held out."""
    from pathlib import Path

    from pipelines.dataset.load import load_dataset

    release = Path(__file__).resolve().parents[1] / "datasets" / "host-v1"
    ds = load_dataset(release)
    sid = "host-tflite-cpu-1large-fp32"
    names = sorted(ds.models.loc[ds.models["source"] == "synthetic", "model_id"])[:160]
    return ds, sid, tuple(names[:130]), tuple(names[130:])


def test_xnnpack_kernels_learn_from_the_host_kernel_records(host_fp32, tmp_path):
    """nn-Meter's protocol on the host: LiteRT's operators deduced, matched to the training
    networks' kernel records, one forest per kernel type, predictions summed. The held-out
    networks' records are hidden (their times blanked) and teach nothing."""
    from leaderboard.run import mask

    ds, sid, train, test = host_fp32
    view = mask(ds, sid, test, all_ops=False)
    y = Networks(ds, train, sid).y()
    p = make_predictor("nnmeter_xnnpack", n_estimators=30).fit(Networks(view, train, sid), y)
    assert p.mode_ == "kernels" and p.target == "efficiency"
    assert p.kernel_networks_["aligned"] + p.kernel_networks_["not_aligned"] == len(train)  # none of the test's
    assert p.kernel_networks_["aligned"] >= 0.95 * len(train)
    assert {"conv", "conv1x1", "dwconv", "builtin_mirror_pad"} <= set(p.forests_)
    assert p.source_scenario_ is None and p.calibration_ is None and p.intercept_ms_ == 0
    truth = Networks(ds, test, sid).y()
    pred = p.predict(Networks(view, test, sid))
    np.testing.assert_allclose(p.predict_parts(Networks(view, test, sid)).groupby("model_id")["predicted_ms"].sum()
                               .reindex(list(test)), pred)  # nn-Meter's plain sum
    mape = 100 * np.mean(np.abs(pred / truth - 1))
    # calibrate: a scale per kernel type (and an intercept) fitted to the training networks' e2e
    cal = make_predictor("nnmeter_xnnpack", n_estimators=30, calibrate=True).fit(Networks(view, train, sid), y)
    assert cal.mode_ == "kernels" and "conv" in cal.calibration_ and cal.intercept_ms_ >= 0
    cal_pred = cal.predict(Networks(view, test, sid))
    save_predictor(cal, tmp_path / "nxc")  # saved and loaded alike: the calibration, no sibling scenario
    loaded = load_predictor(tmp_path / "nxc")
    assert loaded.source_scenario_ is None and loaded.calibration_ == cal.calibration_
    np.testing.assert_array_equal(loaded.predict(Networks(view, test, sid)), cal_pred)
    mape_cal = 100 * np.mean(np.abs(cal_pred / truth - 1))
    print(f"nnmeter_xnnpack on 130 host networks' kernel records, 30 held out: MAPE {mape:.2f}% "
          f"(calibrated {mape_cal:.2f}%), Spearman {spearmanr(pred, truth)[0]:.3f}")
    assert mape < 8 and spearmanr(pred, truth)[0] > 0.95 and mape_cal < mape
    parts = p.predict_parts(Networks(view, test[:1], sid))
    assert parts["kernel"].iloc[0].startswith("Convolution") and parts["nodes"].iloc[0].startswith("stem")
    # the same forests on log latency (nn-Meter's own target) do worse on these networks
    lat = make_predictor("nnmeter_xnnpack", n_estimators=30, target="latency").fit(Networks(view, train, sid), y)
    assert 100 * np.mean(np.abs(lat.predict(Networks(view, test, sid)) / truth - 1)) > mape
    save_predictor(p, tmp_path / "nx")
    loaded = load_predictor(tmp_path / "nx")
    assert loaded.target == "efficiency" and type(loaded.rules_).__name__ == "XnnpackDetector"
    np.testing.assert_array_equal(loaded.predict(Networks(view, test, sid)), pred)
    # a track that hides every kernel time of the scenario: the e2e mode over the same kernels
    hidden = mask(ds, sid, test, all_ops=True)
    e2e = make_predictor("nnmeter_xnnpack", n_estimators=10, e2e_rounds=2).fit(Networks(hidden, train, sid), y)
    assert e2e.mode_ == "e2e"
    with pytest.raises(ValueError, match="target"):
        make_predictor("nnmeter_xnnpack", target="speed").fit(Networks(view, train, sid), y)


def test_xnnpack_kernels_transfer_to_two_cores(host_fp32, tmp_path):
    """A scenario without kernel records of its own (TFLite fp32 on two large cores) whose
    sibling at one large core shows the training networks' records: nnmeter_xnnpack learns the
    kernels there and fits a scale per kernel type (and an intercept) to the training networks'
    two-core latencies (transfer mode). The held-out networks' records are hidden in every
    scenario and teach nothing; the scales say two cores run convolutions faster; it beats the
    e2e mode on the same networks; saved and loaded alike. nnmeter keeps transfer off."""
    from leaderboard.run import mask

    ds, one, train, test = host_fp32
    sid = "host-tflite-cpu-2large-fp32"
    view = mask(ds, sid, test, all_ops=True)  # as host-random (uses: e2e) shows it
    y = Networks(ds, train, sid).y()
    p = make_predictor("nnmeter_xnnpack", n_estimators=30).fit(Networks(view, train, sid), y)
    assert p.mode_ == "transfer" and p.source_scenario_ == one
    assert p.kernel_networks_["aligned"] + p.kernel_networks_["not_aligned"] == len(train)  # none of the test's
    assert 0.3 < p.calibration_["conv"] < 0.9 and "*" in p.calibration_ and p.intercept_ms_ >= 0
    truth = Networks(ds, test, sid).y()
    pred = p.predict(Networks(view, test, sid))
    parts = p.predict_parts(Networks(view, test, sid))
    np.testing.assert_allclose(parts.groupby("model_id")["predicted_ms"].sum().reindex(list(test)) + p.intercept_ms_,
                               pred)
    mape = 100 * np.mean(np.abs(pred / truth - 1))
    e2e = make_predictor("nnmeter_xnnpack", n_estimators=30, transfer=False).fit(Networks(view, train, sid), y)
    assert e2e.mode_ == "e2e"
    mape_e2e = 100 * np.mean(np.abs(e2e.predict(Networks(view, test, sid)) / truth - 1))
    print(f"2 large cores, 130 training networks, 30 held out: transfer MAPE {mape:.2f}%, e2e mode {mape_e2e:.2f}%")
    assert mape < 10 and mape < mape_e2e
    save_predictor(p, tmp_path / "nx2")
    loaded = load_predictor(tmp_path / "nx2")
    assert loaded.source_scenario_ == one and loaded.calibration_ == p.calibration_
    np.testing.assert_array_equal(loaded.predict(Networks(view, test, sid)), pred)
    saved = json.loads((tmp_path / "nx2" / "predictor.json").read_text())
    saved["state"]["calibration"]["scales"]["conv"] = -0.5  # a file from elsewhere: refused, naming the key
    (tmp_path / "nx2" / "predictor.json").write_text(json.dumps(saved))
    with pytest.raises(ValueError, match="calibration.scales"):
        load_predictor(tmp_path / "nx2")
    assert make_predictor("nnmeter", n_estimators=10, e2e_rounds=1).fit(Networks(view, train, sid), y).mode_ == "e2e"
