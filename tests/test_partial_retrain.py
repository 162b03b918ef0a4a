"""Retraining part of an entry (``scenarios=``): only the matching scenarios are fitted again and
replaced, the entry's other predictions stay as they were, and what the retrain writes equals a
whole retrain on those scenarios."""
from __future__ import annotations

import json
import shutil

import pandas as pd
import pytest
from omegaconf import OmegaConf

from leaderboard import run as run_mod
from support.fixtures import register_test_predictors
from leaderboard.run import train_entry

TRACK = "usc-real-kfold"
PRED = "test-reported-flops"


@pytest.fixture(scope="module")
def whole(public, tmp_path_factory):
    """The test predictor trained whole on the track (the subset's Pixel 4 scenarios)."""
    register_test_predictors()
    out = train_entry(PRED, {}, [TRACK], public, tmp_path_factory.mktemp("whole"), entry="e")
    return out


def _fitted(monkeypatch) -> list[str]:
    fits: list[str] = []
    real = run_mod.mask
    monkeypatch.setattr(run_mod, "mask", lambda dataset, sid, test, all_ops: (fits.append(sid), real(dataset, sid, test, all_ops))[1])
    return fits


def test_a_subset_retrain_refits_only_the_subset_and_keeps_the_rest(public, whole, tmp_path, monkeypatch):
    full = pd.read_parquet(whole / "predictions.parquet")
    gpu = full["scenario_id"].str.contains("-gpu-")
    assert gpu.any() and (~gpu).any()
    # a committed entry whose GPU predictions are stale, and one CPU scenario marked so we can see it kept
    entry = tmp_path / "e"
    shutil.copytree(whole, entry)
    stale = full.copy()
    stale.loc[gpu, "predicted_ms"] = 1.0
    kept_sid = full.loc[~gpu, "scenario_id"].iloc[0]
    stale.loc[stale["scenario_id"] == kept_sid, "predicted_ms"] = 7.0
    stale.to_parquet(entry / "predictions.parquet", index=False)
    before = pd.read_parquet(entry / "predictions.parquet")
    old_seconds = json.loads((entry / "run.json").read_text())["seconds"][TRACK]

    fits = _fitted(monkeypatch)
    train_entry(PRED, {}, [TRACK], public, tmp_path, entry="e", scenarios="*-gpu-*")
    after = pd.read_parquet(entry / "predictions.parquet")

    assert set(fits) == set(full.loc[gpu, "scenario_id"])  # nothing else was fitted
    # the rest: the same rows, value for value (the marked scenario too)
    rest = ~after["scenario_id"].str.contains("-gpu-")
    pd.testing.assert_frame_equal(after[rest].reset_index(drop=True),
                                  before[~before["scenario_id"].str.contains("-gpu-")].reset_index(drop=True),
                                  check_exact=True)
    assert (after.loc[after["scenario_id"] == kept_sid, "predicted_ms"] == 7.0).all()
    # the subset: what a whole retrain gives
    pd.testing.assert_frame_equal(after[~rest].reset_index(drop=True), full[gpu].reset_index(drop=True), check_exact=True)
    run = json.loads((entry / "run.json").read_text())
    assert run["seconds"][TRACK] == old_seconds  # the whole run's record stands
    assert run["retrained"][TRACK]["scenarios"] == ["*-gpu-*"]
    assert run["retrained"][TRACK]["count"] == int(full.loc[gpu, "scenario_id"].nunique())
    assert not (entry / ".partial").exists()

    # restore the marked CPU scenario too: afterwards the entry is the whole run's, byte for byte
    train_entry(PRED, {}, [TRACK], public, tmp_path, entry="e", scenarios=[kept_sid])
    assert (entry / "predictions.parquet").read_bytes() == (whole / "predictions.parquet").read_bytes()


def test_the_hydra_app_passes_scenarios(public, whole, tmp_path, monkeypatch):
    from leaderboard.train import run_job

    shutil.copytree(whole, tmp_path / "e")
    fits = _fitted(monkeypatch)
    cfg = OmegaConf.create({"predictor": PRED, "track": TRACK, "params": {}, "entry": "e", "out": str(tmp_path),
                            "public": public["public"], "host": public["host"], "scenarios": "*-tflite-gpu-*,*-pytorch-gpu-*"})
    run_job(cfg)
    assert sorted(set(fits)) == sorted(s for s in pd.read_parquet(whole / "predictions.parquet")["scenario_id"].unique()
                                       if "-gpu-" in s)
    assert (tmp_path / "e" / "predictions.parquet").read_bytes() == (whole / "predictions.parquet").read_bytes()


def test_a_subset_retrain_refuses_what_would_leave_a_mixed_or_incomplete_entry(public, whole, tmp_path):
    with pytest.raises(ValueError, match="matches no scenario"):
        train_entry(PRED, {}, [TRACK], public, tmp_path, entry="e", scenarios="*-no-such-*")
    # (a new entry is no refusal: it is trained on the matching scenarios only,
    # tests/test_leaderboard_user_folders.py)
    shutil.copytree(whole, tmp_path / "p")
    with pytest.raises(ValueError, match=r"metadata.yaml: entry was trained as"):
        train_entry(PRED, {"scale": 2}, [TRACK], public, tmp_path, entry="p", scenarios="*-gpu-*")
    assert (tmp_path / "p" / "predictions.parquet").read_bytes() == (whole / "predictions.parquet").read_bytes()
