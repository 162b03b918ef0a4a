"""Folds shared by tracks are fitted once (leaderboard.run.FoldCache): a predictor that reads only
its training networks' graphs and e2e labels (``Predictor.e2e_only``) predicts a fold the same on
every track that has it, so the board fits it for the first and reads it for the others (on the
host board: host-random for host-fewshot-900 and host-random-kernels, each track for its
``-kernels`` twin).

Data: the public subset's usc-real-kfold, and a twin of it registered here: the same frozen
split, reading kernel records as the host's ``-kernels`` tracks do."""
from __future__ import annotations

import dataclasses
import json
import shutil

import numpy as np
import pandas as pd
import pytest

import leaderboard.baselines as baselines
from leaderboard.run import FoldCache, train_entry
from leaderboard.tracks import SPLITS_DIR, TRACKS
from support.fixtures import register_test_predictors

TRACK, TWIN = "usc-real-kfold", "usc-real-kfold-twin"


@pytest.fixture()
def twins(monkeypatch, tmp_path) -> list[str]:
    """TRACK and TWIN, with TRACK's committed split under both names in a splits folder."""
    track = TRACKS.get(TRACK)
    monkeypatch.setitem(TRACKS._items, TWIN, dataclasses.replace(track, name=TWIN, uses="kernels"))
    splits = tmp_path / "splits"
    shutil.copytree(SPLITS_DIR / track.data, splits / track.data)
    doc = json.loads(track.split_path().read_text())
    TRACKS.get(TWIN).split_path(splits).write_text(json.dumps({**doc, "track": TWIN}))
    return splits


def _counting(monkeypatch) -> list[str]:
    """Every fit the board makes, by predictor name."""
    fits: list[str] = []
    real = baselines.make_predictor

    def make(name, **params):
        p = real(name, **params)
        fit = p.fit
        p.fit = lambda X, y: (fits.append(name), fit(X, y))[1]
        return p

    monkeypatch.setattr(baselines, "make_predictor", make)
    return fits


def _track(out, track: str) -> pd.DataFrame:
    p = pd.read_parquet(out / "predictions.parquet")
    return p[p["track"] == track].drop(columns="track").sort_values(["scenario_id", "model_id"]).reset_index(drop=True)


def test_tracks_with_the_same_folds_fit_them_once(public, twins, tmp_path, monkeypatch):
    register_test_predictors()
    fits = _counting(monkeypatch)
    alone = train_entry("test-reported-flops", {}, [TRACK], public, tmp_path / "alone", entry="e", splits_dir=twins)
    one_track = len(fits)
    assert one_track > 1
    fits.clear()
    both = train_entry("test-reported-flops", {}, [TRACK, TWIN], public, tmp_path / "both", entry="e", splits_dir=twins)
    assert len(fits) == one_track  # the twin's folds were all read, not fitted
    pd.testing.assert_frame_equal(_track(both, TWIN), _track(both, TRACK), check_exact=True)
    pd.testing.assert_frame_equal(_track(both, TRACK), _track(alone, TRACK), check_exact=True)
    assert not (both / ".partial").exists()  # the shared folds go with the resume folders


def test_folds_of_a_resumed_track_are_shared_too(public, twins, tmp_path, monkeypatch):
    # a run stopped part-way (or one from before folds were shared) left TRACK's scenarios in its
    # resume folder: resuming reads them, and the twin reads their folds instead of fitting
    from leaderboard import run as run_mod

    register_test_predictors()
    whole = train_entry("test-reported-flops", {}, [TRACK], public, tmp_path / "whole", entry="e", splits_dir=twins)
    preds = pd.read_parquet(whole / "predictions.parquet")
    out = tmp_path / "stopped" / "e"
    split = json.loads((twins / "public" / f"{TRACK}.v{TRACKS.get(TRACK).version}.json").read_text())
    resume = run_mod._resume_folder(out, TRACK, {"predictor": "test-reported-flops", "params": {},
                                                 "split": [split["version"], split["spec_hash"]]})
    for sid, rows in preds.groupby("scenario_id"):
        rows.reset_index(drop=True).to_parquet(resume / f"{run_mod.slug(sid)}.parquet", index=False)
    fits = _counting(monkeypatch)
    both = train_entry("test-reported-flops", {}, [TRACK, TWIN], public, tmp_path / "stopped", entry="e", splits_dir=twins)
    assert fits == []
    pd.testing.assert_frame_equal(_track(both, TWIN), _track(whole, TRACK), check_exact=True)


def test_a_predictor_that_reads_more_than_training_e2e_fits_every_track(public, twins, tmp_path, monkeypatch):
    register_test_predictors()
    assert not baselines.PREDICTORS.get("test-median").e2e_only
    fits = _counting(monkeypatch)
    train_entry("test-median", {}, [TRACK], public, tmp_path / "alone", entry="e", splits_dir=twins)
    one_track = len(fits)
    fits.clear()
    train_entry("test-median", {}, [TRACK, TWIN], public, tmp_path / "both", entry="e", splits_dir=twins)
    assert one_track > 1 and len(fits) == 2 * one_track


def test_a_fold_is_found_only_with_the_same_labels_networks_and_parameters(tmp_path):
    class Release:
        path = "datasets/host-v1"

    train, test, y = ["a", "b", "c"], ["d", "e"], np.array([1.0, 2.0, 3.0])
    cache = FoldCache(tmp_path, {"predictor": "gnn", "params": {"epochs": 240}})
    cache.put(Release, "s", train, y, test, np.array([4.0, 5.0]))
    np.testing.assert_array_equal(cache.get(Release, "s", train, y, test), [4.0, 5.0])
    assert cache.get(Release, "s", train, y * (1 + 1e-12), test) is None  # a label moved
    assert cache.get(Release, "s", train[:2], y[:2], test) is None
    assert cache.get(Release, "s", train, y, test[::-1]) is None
    assert cache.get(Release, "other", train, y, test) is None
    assert FoldCache(tmp_path, {"predictor": "gnn", "params": {"epochs": 120}}).get(Release, "s", train, y, test) is None

    class OtherRelease:
        path = "datasets/host-xeon-v1"

    assert cache.get(OtherRelease, "s", train, y, test) is None
