"""The cross-framework track (protocol framework-transfer) and the transfer predictor's measured
source values, on the committed host release.

Protocol: each target runtime's scenario (ONNX Runtime, ExecuTorch) gets one fold per draw, every fold testing host-random's
test networks, each drawing its own 10 training networks from the rest; the source is the target's
LiteRT counterpart (same device, cores, threads, precision, batch). What a predictor sees (the
protocol's view, as leaderboard-train builds it): the counterpart whole, the test networks'
LiteRT latencies included, and only the drawn rows of the target. Predictor: with
``source_values=measured`` the source column is the counterpart's measured latency, a network
it did not measure is an error naming it, and the fit saves and loads.
"""
from __future__ import annotations

import numpy as np
import pytest

from leaderboard.baselines import Networks, load_predictor, make_predictor, save_predictor
from leaderboard.protocols import PROTOCOLS, ProtocolError, counterpart
from leaderboard.run import board_view, predict_track
from leaderboard.tracks import TRACKS, compute_split, read_split, resolve

NAME = "host-framework-transfer-n10"
TARGETS = ("host-onnxruntime-cpu-1large-fp32", "host-executorch-cpu-1large-fp32")
TARGET, SOURCE = TARGETS[0], "host-tflite-cpu-1large-fp32"


@pytest.fixture(scope="module")
def track():
    data = resolve(TRACKS.get(NAME))
    return data, compute_split(data)


def test_draws_repeat_on_host_randoms_test_set(track):
    data, split = track
    assert sorted(data.scenario_ids) == sorted(TARGETS)
    random = read_split(TRACKS.get("host-random"))
    for target in TARGETS:
        folds = split.for_scenario(target)
        assert [f.fold for f in folds] == [0, 1, 2] and split.repeated
        assert {len(f.train) for f in folds} == {10} and len({f.train for f in folds}) == 3
        test = set(folds[0].test)
        assert all(set(f.test) == test and not test & set(f.train) for f in folds)
        assert test == set(random.folds[0].test)  # the same test networks as host-random
    # each target draws its own training networks
    assert split.for_scenario(TARGETS[0])[0].train != split.for_scenario(TARGETS[1])[0].train
    assert read_split(TRACKS.get(NAME)).folds == split.folds  # the committed split is this protocol's


def test_the_source_is_the_counterpart(track):
    data, _ = track
    assert {counterpart(data.dataset, t, "tflite") for t in TARGETS} == {SOURCE}
    with pytest.raises(ProtocolError, match=r"host-tflite-cpu-1large-fp32 is itself a tflite scenario"):
        counterpart(data.dataset, SOURCE, "tflite")
    with pytest.raises(ProtocolError, match=r"has 0 mnn counterpart\(s\)"):
        counterpart(data.dataset, TARGET, "mnn")


def test_params_are_checked():
    check = PROTOCOLS.get("framework-transfer").check
    p = dict(TRACKS.get(NAME).params)
    check(p)
    for bad, msg in (({"draws": []}, "draws"), ({"draws": [0, 0]}, "draws"), ({"source_framework": ""}, "source_framework"),
                     ({"n_train": 0}, "n_train"), ({"test_fraction": 1.5}, "test_fraction"), ({"seeds": [0]}, "seeds")):
        with pytest.raises(ValueError, match=msg):
            check({**p, **bad})


class _Spy:
    """Records what it was shown; predicts 1 ms."""

    seen: list = []

    def fit(self, X, y):
        e = X.dataset.e2e
        _Spy.seen.append((X.model_ids, e.copy(), getattr(X.dataset, "transfer_sources", ())))
        return self

    def predict(self, X):
        return np.ones(len(X))


def test_a_predictor_sees_the_counterpart_and_the_draw_only(track):
    data, split = track
    _Spy.seen = []
    preds = predict_track(data, split, lambda: _Spy())
    assert len(_Spy.seen) == 3 * len(TARGETS) and set(preds["fold"]) == {0, 1, 2}
    full = data.dataset.e2e
    test = set(data.ids(split.for_scenario(TARGET)[0].test))
    targets = []
    for train, e2e, declared in _Spy.seen:
        assert declared == (SOURCE,)
        (target,) = set(e2e["scenario_id"]) - {SOURCE}  # no other scenario of the host
        targets.append(target)
        assert set(e2e.loc[e2e["scenario_id"] == target, "model_id"]) == set(train)
        src = e2e[e2e["scenario_id"] == SOURCE]
        assert len(src) == (full["scenario_id"] == SOURCE).sum() and test <= set(src["model_id"])
    assert sorted(targets) == sorted(TARGETS * 3)


def test_measured_source_values(track, tmp_path):
    data, split = track
    f = split.for_scenario(TARGET)[0]
    train, test = data.ids(f.train), data.ids(f.test)
    view = board_view(data, TARGET, train, test)
    X, Q = Networks(view, tuple(train), TARGET), Networks(view, tuple(test), TARGET)
    p = make_predictor("transfer", source_values="measured").fit(X, X.y())
    assert p.sources_ == [SOURCE] and p.encoders_ == []
    litert = view.e2e_for(SOURCE).set_index("model_id")["latency_ms"]
    # ten networks support the LiteRT latency alone (leave-one-out): the answer is affine in it
    assert p.terms_ == ("sources",) and p.coef_[-1] > 0
    expect = p.coef_[-1] * litert.loc[list(test)].to_numpy() + p.intercept_
    np.testing.assert_allclose(p.predict(Q), np.where(expect > 0, expect, p.floor_), rtol=1e-12)
    folder = save_predictor(p, tmp_path / "measured")
    np.testing.assert_array_equal(load_predictor(folder).predict(Q), p.predict(Q))
    # a network the source did not measure: one line naming it
    t = view.tables()
    t["e2e"] = t["e2e"][~((t["e2e"]["scenario_id"] == SOURCE) & (t["e2e"]["model_id"] == test[0]))]
    from pipelines.dataset.load import Dataset

    short = Dataset(t, check=False)
    short._graphs = view._graphs
    short.transfer_sources = (SOURCE,)
    with pytest.raises(ValueError, match=rf"source {SOURCE}: no measured latency of {test[0]}"):
        p.predict(Networks(short, (test[0],), TARGET))
    with pytest.raises(ValueError, match="source_values: expected one of encoder, measured"):
        make_predictor("transfer", source_values="raw").fit(X, X.y())
