"""typed_nnls_family (issue 17): typed_nnls times a per-family correction learned from the
training networks' out-of-fold residuals, pooled over the sibling scenarios of the phone. It must
learn a family's bias, leave unseen families alone, and never read a network it predicts: fitted
on the leaderboard's masked view or on the whole data with the same training networks, it gives
the same predictions."""
from __future__ import annotations

import numpy as np
import pytest

from leaderboard.baselines import Networks, make_predictor
from leaderboard.run import mask
from pipelines.dataset import Dataset
from support.fixtures import usc_pixel4

MODELS = ["resnet10", "resnet14", "resnet18_wd2", "resnet18", "mobilenet_w1", "mobilenet_wd4", "mobilenetv2_w1",
          "mobilenetv2_wd2", "mobilenetv2_wd4", "squeezenet_v1_1", "regnetx002", "mnasnet_a1"]
CPU = "usc-pixel4-tflite-cpu-1large-fp32"


@pytest.fixture(scope="module")
def ds(usc_dir) -> Dataset:
    return usc_pixel4(usc_dir, MODELS)


def _fam(X):
    m = X.models()
    return dict(zip(m["model_id"], m["family"]))


def test_corrects_by_the_shrunk_mean_of_a_familys_out_of_fold_residuals(ds):
    """pool=none: each family's correction is sum(log(y / oof)) / (n + shrink) over its training
    networks, oof being typed_nnls's own inner-CV predictions; an unseen family is left alone."""
    X = Networks.of_scenario(ds, CPU)
    y = X.y()
    fam = _fam(X)
    keep = np.array([fam[m] != "squeezenet" for m in X.model_ids])
    tr = keep & (np.arange(len(X)) != [i for i, m in enumerate(X.model_ids) if fam[m] == "resnet"][0])
    p = make_predictor("typed_nnls_family", pool="none", inner_folds=2, shrink=1.5).fit(X[tr], y[tr])
    b = p.base_
    oof = b.cv_pred_[f"{b.mode_}@{b.alpha_:g}"]
    r = np.log(y[tr] / oof)
    trained = np.asarray(X.model_ids)[tr]
    for f in {fam[m] for m in trained}:
        sel = np.array([fam[m] == f for m in trained])
        assert p.family_log_[f] == pytest.approx(r[sel].sum() / (sel.sum() + 1.5))
    assert "squeezenet" not in p.family_log_
    held = ~tr
    ratio = dict(zip(np.asarray(X.model_ids)[held], p.predict(X[held]) / b.predict(X[held])))
    for m, q in ratio.items():
        assert q == pytest.approx(np.exp(p.family_log_.get(fam[m], 0.0)))
    assert any(fam[m] == "squeezenet" and q == pytest.approx(1.0) for m, q in ratio.items())
    assert any(fam[m] == "resnet" and q != pytest.approx(1.0) for m, q in ratio.items())


def test_the_gate_scores_each_shrink_on_networks_it_did_not_learn_from(ds):
    """cv_shrinks: every candidate (and no correction) is scored by leave-one-network-out on the
    scenario's own out-of-fold residuals; the lowest MAPE wins, and 'off' leaves typed_nnls alone."""
    X = Networks.of_scenario(ds, CPU)
    y = X.y()
    p = make_predictor("typed_nnls_family", pool="none", inner_folds=2, cv_shrinks=[0.5, 2.0, 8.0]).fit(X, y)
    b = p.base_
    r = np.log(y / b.cv_pred_[f"{b.mode_}@{b.alpha_:g}"])
    fam = _fam(X)
    f = np.array([fam[m] for m in X.model_ids])
    want = {"off": np.abs(np.exp(-r) - 1).mean() * 100}
    for s in (0.5, 2.0, 8.0):
        c = np.array([(r[f == f[i]].sum() - r[i]) / ((f == f[i]).sum() - 1 + s) for i in range(len(r))])
        want[f"{s:g}"] = np.abs(np.exp(c - r) - 1).mean() * 100
    assert p.gate_mape_ == pytest.approx(want, abs=1e-4)
    best = min(want, key=want.get)
    if best == "off":
        assert p.family_log_ == {} and np.allclose(p.predict(X), b.predict(X))
    else:
        assert p.shrink_ == float(best)
    # a shared family bias is kept; residuals that cancel within each family switch it off
    g = make_predictor("typed_nnls_family", cv_shrinks=[0.5, 8.0])
    fams = {f"n{i}": f"f{i // 4}" for i in range(12)}
    shared = {m: 0.2 * (1 if int(m[1:]) < 8 else -1) + 0.01 * (int(m[1:]) % 2) for m in fams}
    opposed = {m: 0.2 * (1 if int(m[1:]) % 2 else -1) for m in fams}
    for own, want_off in ((shared, False), (opposed, True)):
        sums = {}
        for m, v in own.items():
            t = sums.setdefault(fams[m], [0.0, 0.0])
            t[0] += v
            t[1] += 1.0
        assert (g._gate(own, own, fams, sums) is None) == want_off
    with pytest.raises(ValueError, match="cv_shrinks"):
        make_predictor("typed_nnls_family", cv_shrinks=[-1]).fit(X, y)


@pytest.mark.parametrize("params", [{}, {"cv_shrinks": [1.0, 2.0], "stem": True, "free_ew": True}])
def test_siblings_never_read_the_networks_it_predicts(ds, params):
    """On the masked view (test networks measured nowhere) and on the whole data, the same
    training networks give the same fit: the sibling scenarios are read for those only (also
    with the inner gate and the stem typing, the committed configuration)."""
    X = Networks.of_scenario(ds, CPU)
    ids = list(X.model_ids)
    tr, te = ids[:-3], ids[-3:]
    y = X.y()[:-3]
    view = mask(ds, CPU, te, all_ops=False)
    a = make_predictor("typed_nnls_family", inner_folds=2, **params).fit(Networks(view, tuple(tr), CPU), y)
    b = make_predictor("typed_nnls_family", inner_folds=2, **params).fit(Networks(ds, tuple(tr), CPU), y)
    if "cv_shrinks" in params:
        assert a.gate_mape_ == b.gate_mape_
    assert a.sibling_weights_ and a.sibling_weights_ == b.sibling_weights_  # siblings were pooled
    assert a.family_log_ == pytest.approx(b.family_log_)
    np.testing.assert_allclose(a.predict(Networks(view, tuple(te), CPU)), b.predict(Networks(ds, tuple(te), CPU)))


def test_bad_parameters_are_one_line_errors(ds):
    X = Networks.of_scenario(ds, CPU)
    for bad, match in [({"shrink": -1}, "shrink"), ({"pool": "all"}, "pool"), ({"min_corr": 2}, "min_corr"),
                       ({"alpha": -1}, "alpha")]:
        with pytest.raises(ValueError, match=match):
            make_predictor("typed_nnls_family", **bad).fit(X, X.y())
