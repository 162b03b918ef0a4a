"""Conformance of every registered predictor with the contract of leaderboard/baselines/base.py
(the scikit-learn estimator API, the way check_estimator checks it): fit returns self, predict
gives one finite float64 per network, a seed makes it deterministic, get_params/set_params/clone
work, wrong input is a clear error, and a saved predictor predicts the same after loading.

Runs on a small import of the public USC data (pixel4: a CPU scenario with e2e only and the
TFLite GPU scenario with op times)."""
from __future__ import annotations

import json

import numpy as np
import pytest
from sklearn.base import clone

from leaderboard.baselines import PREDICTORS, Networks, load_predictor, make_predictor, save_predictor
from pipelines.dataset import Dataset
from support.fixtures import usc_pixel4

MODELS = ["resnet10", "resnet14", "resnet18_wd2", "mobilenet_w1", "mobilenet_wd4", "mobilenetv2_w1",
          "mobilenetv2_wd2", "squeezenet_v1_1", "regnetx002", "mnasnet_a1"]
CPU, GPU = "usc-pixel4-tflite-cpu-1large-fp32", "usc-pixel4-tflite-gpu-fp16"
# small settings so the whole file stays fast; the defaults are exercised by the CV script
FAST = {"usc_mlp": {"max_epochs": 15, "patience": 5, "units": 16}, "usc_gbdt": {"n_estimators": 20},
        "usc_rf": {"n_estimators": 3}, "usc_lasso": {"cv_folds": 2},
        # other helpers' predictors, made small the same way (only parameters they declare)
        "gnn": {"epochs": 5, "hidden": 16, "layers": 2, "min_steps": 5}, "nnmeter": {"n_estimators": 5, "e2e_rounds": 1},
        "additive_mlp": {"epochs": 20, "hidden": 16},
        "gnn_ensemble": {"members": 2, "epochs": 5, "hidden": 16, "layers": 2, "min_steps": 5}}
SEEDED = {n for n in PREDICTORS.names() if "random_state" in make_predictor(n).get_params()}


@pytest.fixture(scope="module")
def ds(usc_dir) -> Dataset:
    return usc_pixel4(usc_dir, MODELS)


def _xy(ds, scenario):
    X = Networks.of_scenario(ds, scenario)
    return X, X.y()


@pytest.mark.parametrize("scenario", [CPU, GPU])
@pytest.mark.parametrize("name", PREDICTORS.names())
def test_fit_predict_contract(ds, name, scenario):
    X, y = _xy(ds, scenario)
    p = make_predictor(name, **FAST.get(name, {}))
    tr, te = np.arange(len(X)) % 4 != 0, np.arange(len(X)) % 4 == 0
    assert p.fit(X[tr], y[tr]) is p
    pred = p.predict(X[te])
    assert isinstance(pred, np.ndarray) and pred.dtype == np.float64 and pred.shape == (te.sum(),)
    assert np.all(np.isfinite(pred))
    assert p.predict(X[:0]).shape == (0,)
    if hasattr(p, "predict_parts"):
        parts = p.predict_parts(X[te])
        assert {"model_id", "predicted_ms"} <= set(parts.columns)
        sums = parts.groupby("model_id")["predicted_ms"].sum().reindex(X[te].model_ids, fill_value=0.0)
        np.testing.assert_allclose(sums.to_numpy() + getattr(p, "overhead_ms_", 0.0), pred, rtol=1e-9)


@pytest.mark.parametrize("name", sorted(SEEDED))
def test_seed_makes_it_deterministic(ds, name):
    X, y = _xy(ds, CPU)
    a = make_predictor(name, random_state=3, **FAST.get(name, {})).fit(X, y).predict(X)
    b = make_predictor(name, random_state=3, **FAST.get(name, {})).fit(X, y).predict(X)
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("name", PREDICTORS.names())
def test_sklearn_params_and_clone(ds, name):
    p = make_predictor(name, **FAST.get(name, {}))
    params = p.get_params()
    assert params == {**make_predictor(name).get_params(), **FAST.get(name, {})}
    c = clone(p)
    assert c is not p and c.get_params() == params
    key = sorted(params)[0]
    assert p.set_params(**{key: params[key]}) is p
    with pytest.raises(ValueError):
        p.set_params(no_such_parameter=1)
    X, y = _xy(ds, CPU)
    p.fit(X, y)
    fresh = clone(p)  # a clone of a fitted predictor is unfitted, with the same parameters
    assert fresh.get_params() == params and not any(k.endswith("_") and not k.startswith("_") for k in vars(fresh))


def test_the_estimator_api_is_scikit_learns_without_importing_it(ds):
    """base.Estimator gives what sklearn's BaseEstimator and RegressorMixin gave the predictors
    (a regressor's tags, R^2 score, the repr of the parameters changed), so `latbench predict`
    loads a predictor without scikit-learn."""
    from sklearn.base import is_regressor
    from sklearn.metrics import r2_score

    p = make_predictor("flops", **FAST.get("flops", {}))
    assert is_regressor(p) and repr(make_predictor("usc_rf", n_estimators=7)) == "UscRandomForest(n_estimators=7)"
    X, y = _xy(ds, CPU)
    assert p.fit(X, y).score(X, y) == pytest.approx(r2_score(y, p.predict(X)))
    with pytest.raises(ValueError, match="Invalid parameter 'no_such' for estimator"):
        p.set_params(no_such=1)


@pytest.mark.parametrize("name", PREDICTORS.names())
def test_wrong_input_is_a_clear_error(ds, name):
    X, y = _xy(ds, CPU)
    p = make_predictor(name, **FAST.get(name, {}))
    with pytest.raises(TypeError, match="Networks"):
        p.fit(np.zeros((len(y), 3)), y)
    with pytest.raises(ValueError, match="shape"):
        p.fit(X, y[:-1])
    with pytest.raises(ValueError, match="> 0"):
        p.fit(X, -y)
    with pytest.raises((RuntimeError, ValueError, AttributeError), match="fit"):
        p.predict(X)
    p.fit(X, y)
    with pytest.raises(TypeError, match="Networks"):
        p.predict(list(X.model_ids))


@pytest.mark.parametrize("name", [n for n in PREDICTORS.names() if hasattr(PREDICTORS.get(n), "_get_state")])
def test_save_load_predicts_the_same(ds, name, tmp_path):
    X, y = _xy(ds, GPU)
    p = make_predictor(name, **FAST.get(name, {})).fit(X, y)
    folder = save_predictor(p, tmp_path / name)
    meta = json.loads((folder / "predictor.json").read_text())
    assert meta["predictor"] == name and meta["params"] == p.get_params()
    assert {"python", "numpy", "scikit-learn"} <= set(meta["versions"])
    for f in folder.iterdir():  # no pickle of a library object: JSON, LightGBM text, a tensors-only state_dict
        assert f.suffix in (".json", ".txt", ".pt", ".npz"), f  # or numpy arrays
    q = load_predictor(folder)
    assert type(q) is type(p) and q.get_params() == p.get_params()
    np.testing.assert_array_equal(q.predict(X), p.predict(X))


# the predictors whose weights are side files: torch state_dicts (.pt), or numpy arrays (.npz) that
# our own code evaluates (additive_mlp: torch trains it, numpy predicts)
WEIGHTS_SAVED = {"usc_mlp": ".pt", "gnn": ".pt", "additive_mlp": ".npz"}


@pytest.mark.parametrize("name", sorted(WEIGHTS_SAVED))
def test_weights_of_another_shape_are_refused_naming_the_file(ds, name, tmp_path):
    from leaderboard.baselines.persist import PersistError, Store

    X, y = _xy(ds, GPU)
    folder = save_predictor(make_predictor(name, **FAST.get(name, {})).fit(X, y), tmp_path / name)
    files = sorted(folder.glob("*" + WEIGHTS_SAVED[name]))
    assert files, f"{name} saved no {WEIGHTS_SAVED[name]} weights"
    if WEIGHTS_SAVED[name] == ".pt":
        import torch

        weights = torch.load(files[0], weights_only=True)
        weights[next(iter(weights))] = torch.zeros(3, 3)  # a tensor no layer of the saved network has
        torch.save(weights, files[0])
    else:
        store = Store(folder)
        weights = store.get_arrays(files[0].name)
        weights[next(iter(weights))] = np.zeros((3, 3), np.float32)
        store.put_arrays(files[0].name, weights)
    with pytest.raises(PersistError, match="does not fit the saved network") as exc:
        load_predictor(folder)
    assert str(files[0]) in str(exc.value) and "\n" not in str(exc.value)


def _training_e2e_only(ds, scenario: str, train: Networks) -> Dataset:
    """``ds`` with nothing measured but ``train``'s e2e rows in ``scenario``: no other scenario's
    or network's e2e row, no op or kernel time anywhere (graphs and model costs stay)."""
    t = ds.tables()
    e = t["e2e"]
    t["e2e"] = e[(e["scenario_id"] == scenario) & e["model_id"].isin(train.model_ids)].reset_index(drop=True)
    for name in ("ops", "kernels"):
        t[name] = t[name].assign(latency_ms=np.nan)
    view = Dataset(t, path=ds.path, check=False)
    view._graphs = ds._graphs
    return view


def _fit_on(ds, name: str, only_training_e2e: bool):
    X, y = _xy(ds, GPU)  # a scenario with op times, which an op-wise predictor learns from
    tr, te = np.arange(len(X)) % 4 != 0, np.arange(len(X)) % 4 == 0
    view = _training_e2e_only(ds, GPU, X[tr]) if only_training_e2e else ds
    p = make_predictor(name, **FAST.get(name, {})).fit(Networks(view, X[tr].model_ids, GPU), y[tr])
    return p.predict(Networks(view, X[te].model_ids, GPU))


E2E_ONLY = [n for n in PREDICTORS.names() if PREDICTORS.get(n).e2e_only]


@pytest.mark.parametrize("name", E2E_ONLY)
def test_a_predictor_that_says_it_reads_only_training_e2e_does(ds, name):
    # the board reuses such a predictor's folds across tracks (leaderboard.run.FoldCache): its
    # predictions must not change when everything else it could read is gone
    assert set(E2E_ONLY) >= {"flops", "gnn", "gnn_ensemble", "additive_mlp"}
    np.testing.assert_array_equal(_fit_on(ds, name, only_training_e2e=True), _fit_on(ds, name, only_training_e2e=False))


def test_the_training_e2e_check_sees_a_predictor_that_reads_op_times(ds):
    # usc_lasso learns from the training networks' op times: the check above would catch it
    assert not PREDICTORS.get("usc_lasso").e2e_only
    blind, seeing = _fit_on(ds, "usc_lasso", only_training_e2e=True), _fit_on(ds, "usc_lasso", only_training_e2e=False)
    assert np.all(np.isfinite(blind)) and not np.allclose(blind, seeing, rtol=0.01)
