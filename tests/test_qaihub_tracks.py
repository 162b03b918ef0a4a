"""The board's tracks on Qualcomm AI Hub's published measurements (issue 57), on the shared copy
imported alone: they freeze the committed splits; ``min_networks`` keeps out the scenarios that
measured too few of the networks; ``device-transfer`` (a new device from a few of its
measurements) shows a predictor every other AI Hub device whole and the target's draw only; the
cross-runtime track finds each QNN scenario's TFLite counterpart on the same NPU although the
source leaves cores and threads blank."""
from __future__ import annotations

import numpy as np
import pytest

from leaderboard.protocols import PROTOCOLS, counterpart
from leaderboard.run import predict_track
from leaderboard.tracks import TRACKS, TrackError, Unavailable, compute_split, parse_track, read_split, resolve

QAIHUB_TRACKS = ("qaihub-kfold", "qaihub-new-device-n5", "qaihub-new-device-n10", "qaihub-runtime-transfer-n5")
TARGET = "qaihub-galaxys24-qnndlc-npu-float"


@pytest.fixture(scope="module")
def roots(qaihub_public):
    return {"public": str(qaihub_public)}


def test_the_tracks_freeze_the_committed_splits(roots):
    for name in QAIHUB_TRACKS:
        track = TRACKS.get(name)
        data = resolve(track, roots)
        assert not isinstance(data, Unavailable), data
        assert compute_split(data).folds == read_split(track).folds, name
        sc = data.dataset.scenarios.set_index("scenario_id")
        for sid in data.scenario_ids:
            assert len(data.measured(sid)) >= track.min_networks, (name, sid)
        assert TARGET in data.scenario_ids, name
        if name != "qaihub-runtime-transfer-n5":
            assert sc.loc[data.scenario_ids, "device"].nunique() >= 12 and "npu" in set(sc.loc[data.scenario_ids, "accelerator"])


def test_min_networks_keeps_out_thin_scenarios_and_is_checked(roots):
    spec = {"name": "t", "version": 1, "title": "t", "data": "public", "models": {"source": ["pytorch", "zoo"]},
            "scenarios": {"dataset": "qai-hub-models"}, "protocol": "kfold", "params": {"k": 5, "seed": 0}}
    every = resolve(parse_track(spec, "t.yaml"), roots)
    thin = [s for s in every.scenario_ids if len(every.measured(s)) < 8]
    assert thin  # the source measures some networks on a few devices only
    kept = resolve(parse_track({**spec, "min_networks": 8}, "t.yaml"), roots)
    assert set(kept.scenario_ids) == set(every.scenario_ids) - set(thin)
    gone = resolve(parse_track({**spec, "min_networks": 100}, "t.yaml"), roots)
    assert isinstance(gone, Unavailable) and "at least 100 networks per scenario" in gone.reason
    with pytest.raises(TrackError, match=r"t.yaml: min_networks: expected an int >= 0"):
        parse_track({**spec, "min_networks": -1}, "t.yaml")
    # a track without the key keeps the hash its frozen split was written with
    assert parse_track(spec, "t.yaml").spec_hash() != parse_track({**spec, "min_networks": 8}, "t.yaml").spec_hash()
    assert parse_track({**spec, "min_networks": 0}, "t.yaml").spec_hash() == parse_track(spec, "t.yaml").spec_hash()


def test_device_transfer_params_are_checked():
    check = PROTOCOLS.get("device-transfer").check
    p = dict(TRACKS.get("qaihub-new-device-n5").params)
    check(p)
    for bad, msg in (({"draws": []}, "draws"), ({"n_train": 0}, "n_train"), ({"test_fraction": 0}, "test_fraction"),
                     ({"sources": ["x"]}, "sources")):
        with pytest.raises(ValueError, match=msg):
            check({**p, **bad})


class _Spy:
    """Records what it was shown; predicts 1 ms."""

    seen: list = []

    def fit(self, X, y):
        _Spy.seen.append((X.scenario_id, X.model_ids, X.dataset.e2e.copy(), getattr(X.dataset, "transfer_sources", ())))
        return self

    def predict(self, X):
        return np.ones(len(X))


def test_a_new_device_sees_the_other_devices_whole_and_its_draw_only(roots):
    track = TRACKS.get("qaihub-new-device-n5")
    data = resolve(track, roots)
    split = read_split(track)
    folds = split.for_scenario(TARGET)
    assert [f.fold for f in folds] == [0, 1, 2] and {len(f.train) for f in folds} == {5}
    assert len({f.test for f in folds}) == 1 and not set(folds[0].test) & set(folds[0].train)
    _Spy.seen = []
    preds = predict_track(data, split, lambda: _Spy(), only=[TARGET])
    assert len(_Spy.seen) == 3 and set(preds["fold"]) == {0, 1, 2}
    sc = data.dataset.scenarios.set_index("scenario_id")
    full = data.dataset.e2e
    readable = full[full["model_id"].isin(data.dataset.buildable())].groupby("scenario_id")["model_id"].nunique()
    others = sorted(s for s in sc.index if sc.loc[s, "device"] != "galaxy_s24" and sc.loc[s, "dataset"] == "qai-hub-models"
                    and readable.get(s, 0) >= 5)  # as many readable networks as the draw, at least
    assert any(0 < readable.get(s, 0) < 5 for s in sc.index if sc.loc[s, "device"] != "galaxy_s24")  # thin ones left out
    test = set(data.ids(folds[0].test))
    for sid, train, e2e, declared in _Spy.seen:
        assert sid == TARGET and list(declared) == others
        assert set(e2e.loc[e2e["scenario_id"] == TARGET, "model_id"]) == set(train)
        assert not set(e2e["scenario_id"]) & (set(sc.index[sc["device"] == "galaxy_s24"]) - {TARGET})
        # the other devices whole, the test networks included; their networks without IR left out
        src = e2e[e2e["scenario_id"].isin(others)]
        visible = full["scenario_id"].isin(others) & full["model_id"].isin(data.dataset.buildable())
        assert len(src) == visible.sum() < full["scenario_id"].isin(others).sum() and test <= set(src["model_id"])
        assert all(m.startswith("qaihub:") for m in set(full["model_id"]) - data.dataset.buildable())


def test_qnn_on_the_npu_reads_tflite_on_the_same_npu(roots):
    data = resolve(TRACKS.get("qaihub-runtime-transfer-n5"), roots)
    sc = data.dataset.scenarios.set_index("scenario_id")
    assert sc.loc[TARGET, ["cores", "threads"]].isna().all()  # blank in the source: blank matches blank
    assert counterpart(data.dataset, TARGET, "tflite") == "qaihub-galaxys24-tflite-npu-float"
    assert counterpart(data.dataset, "qaihub-galaxys24-qnndlc-npu-w8a8", "tflite") == "qaihub-galaxys24-tflite-npu-w8a8"


def test_latbench_predict_answers_for_the_galaxy_s24_npu(qaihub_public, tmp_path, capsys):
    """The committed shelf has AI Hub's scenarios from qaihub-kfold: `latbench predict` prices a
    ViT-B/16 on the Galaxy S24's NPU with QNN, and each S24 entry's held-out predictions reproduce
    from the shared copy's import."""
    import json

    from generators.zoo import configured
    from leaderboard.baselines import Networks
    from leaderboard.tracks import open_dataset
    from pipelines.cli import main
    from shelf.store import HELD_OUT, SHELF_DIR, Shelf

    shelf = Shelf()
    s24 = [s for s in shelf.scenarios() if s.startswith("qaihub-galaxys24-")]
    assert TARGET in s24 and any(s.endswith("-w8a8") for s in s24)
    ds = open_dataset(qaihub_public)
    names = dict(zip(ds.models["name"], ds.models["model_id"]))
    for sid in s24:
        e = shelf.entry(sid)
        assert e["training"]["track"] == "qaihub-kfold", sid
        held = json.loads((SHELF_DIR / e["folder"] / HELD_OUT).read_text())
        X = Networks(ds, tuple(names[n] for n in held["names"]), sid)
        np.testing.assert_allclose(X.y(), held["measured_ms"], rtol=1e-12, err_msg=sid)
        np.testing.assert_allclose(shelf.predictor(sid).predict(X), held["predicted_ms"], rtol=1e-5, err_msg=sid)
    path = tmp_path / "vit_b_16.json"
    path.write_text(configured("vit", {"heads": 12, "embed": 768}, "vit_b_16").to_json())
    assert main(["predict", str(path), "--scenario", TARGET]) == 0
    out = capsys.readouterr().out
    assert "vit_b_16:" in out and TARGET in out and " ms " in out and "held-out networks" in out


def test_typed_nnls_family_fits_a_scenario_whose_sibling_was_too_thin_to_fit(roots):
    """A sibling scenario with too few networks is cached without a fit; fitted as a target on
    the same networks it fits itself (it once took the empty cache entry and failed to predict)."""
    from leaderboard.baselines.base import make_predictor
    from leaderboard.train import predictor_params

    track = TRACKS.get("qaihub-kfold")
    data = resolve(track, roots)
    params = predictor_params("typed_nnls_family")
    sids = [s for s in data.scenario_ids if s.startswith("qaihub-galaxys24-")]  # siblings of one another
    preds = predict_track(data, read_split(track), lambda: make_predictor("typed_nnls_family", **params), only=sids)
    assert len(preds) == sum(len(data.measured(s)) for s in sids) and np.isfinite(preds["predicted_ms"]).all()


def test_an_op_wise_sum_that_clips_to_nothing_is_still_a_prediction(roots):
    """With 5 CNNs to learn from (the first draw of the track's v1 split, frozen before the
    transformers other than ViT-B/16 joined), the op-wise models clip every op of ViT-B/16 at 0 on
    this target; the network's sum is then MIN_MS, a prediction the board scores, not a 0 it refuses."""
    from leaderboard.baselines.base import MIN_MS, make_predictor
    from leaderboard.tracks import Split
    from leaderboard.train import predictor_params

    track = TRACKS.get("qaihub-new-device-n5")
    data = resolve(track, roots)
    sid = "qaihub-rb3gen2-tflite-npu-w8a8"
    vit = data.ids(["vit_b_16"])[0]
    v1 = Split.read(track.split_path().with_name(f"{track.name}.v1.json"))
    assert v1.version == 1 and "vit_b_16" in v1.for_scenario(sid)[0].test
    for name in ("usc_lasso", "lookup"):
        preds = predict_track(data, v1, lambda: make_predictor(name, **predictor_params(name)), only=[sid])
        assert (preds["predicted_ms"] >= MIN_MS).all(), name
        assert preds.loc[(preds["model_id"] == vit) & (preds["fold"] == 0), "predicted_ms"].tolist() == [MIN_MS], name
