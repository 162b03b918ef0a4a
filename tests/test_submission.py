"""Submissions are data: the validator's errors, and a real submission scored end to end
(a predictor trained on a track, written as files, validated, evaluated, via the CLI)."""
from __future__ import annotations

import json

import pandas as pd
import pytest
import yaml

from leaderboard.cli import main
from support.fixtures import register_test_predictors
from leaderboard.run import train_entry
from leaderboard.submission import SubmissionError, validate

TRACK = "usc-gpu-oplevel"


@pytest.fixture(scope="session")
def entry(public, tmp_path_factory):
    register_test_predictors()
    return train_entry("test-reported-flops", {}, [TRACK], public, tmp_path_factory.mktemp("entries"))


META = {"method": "mine", "authors": ["A. Person"], "code": "https://example.org/code",
        "training_data": "track training split only", "seeds": [0, 1]}


def _write(tmp_path, df, meta=META, suffix=".csv"):
    p, m = tmp_path / f"pred{suffix}", tmp_path / "meta.yaml"
    df.to_parquet(p, index=False) if suffix == ".parquet" else df.to_csv(p, index=False)
    m.write_text(yaml.safe_dump(meta))
    return p, m


def _problems(p, m, public):
    with pytest.raises(SubmissionError) as e:
        validate(p, m, public)
    return e.value.problems


def test_a_good_submission_validates_and_scores(entry, public, tmp_path, capsys):
    df = pd.read_parquet(entry / "predictions.parquet")
    assert set(df["track"]) == {TRACK} and len(df) > 150
    p, m = _write(tmp_path, df, suffix=".parquet")
    checked = validate(p, m, public)
    assert len(checked.tracks[TRACK]) == len(df)
    assert main(["--public", public["public"], "--host", public["host"], "validate", str(p), str(m)]) == 0
    assert main(["--public", public["public"], "--host", public["host"], "evaluate", str(p), str(m)]) == 0
    res = json.loads(capsys.readouterr().out.split("valid\n")[-1])
    assert 0.8 < res[TRACK]["aggregate"]["spearman"] <= 1.0 and res[TRACK]["aggregate"]["mape"] > 0


def test_every_fault_is_reported(entry, public, tmp_path):
    df = pd.read_parquet(entry / "predictions.parquet")
    sid = df["scenario_id"].iloc[0]
    bad = df.copy()
    bad.loc[0, "predicted_ms"] = float("nan")
    bad.loc[1, "predicted_ms"] = 0.0
    bad.loc[2, "predicted_ms"] = -3.0
    bad.loc[3, "predicted_ms"] = float("inf")
    bad = pd.concat([bad, bad.iloc[[10]]], ignore_index=True)  # a duplicate
    probs = _problems(*_write(tmp_path, bad), public)
    text = "\n".join(probs)
    for what in ("NaN (missing), first at line 2", "zero, first at line 3", "negative, first at line 4",
                 "infinite, first at line 5", "1 duplicate (track, scenario_id, model_id) row(s)"):
        assert what in text, text
    missing = df.iloc[5:]
    probs = _problems(*_write(tmp_path, missing), public)
    assert any(f"{sid}: 5 test network(s) not predicted" in p for p in probs), probs
    extra = pd.concat([df, pd.DataFrame({"track": [TRACK, "no-such-track", TRACK], "scenario_id": [sid, sid, "usc-mars-gpu"],
                                         "model_id": ["pytorch:not-a-model", "x", "y"], "predicted_ms": [1.0, 1.0, 1.0]})])
    text = "\n".join(_problems(*_write(tmp_path, extra), public))
    assert "unknown track 'no-such-track'" in text
    assert "unknown scenario(s) usc-mars-gpu" in text
    assert "1 prediction(s) for networks not in the test split: pytorch:not-a-model" in text


def test_predictions_for_training_networks_are_refused(public, tmp_path):
    from leaderboard.tracks import TRACKS, read_split, resolve

    track = TRACKS.get("help-nb201-n100")  # one draw (n10 repeats its draws: tests/test_seeds.py)
    data = resolve(track, public)
    sid = data.scenario_ids[0]
    (fold,) = read_split(track).for_scenario(sid)
    ids = data.ids(fold.test) + data.ids(fold.train[:1])  # every test network, plus one it trained on
    df = pd.DataFrame({"track": track.name, "scenario_id": sid, "model_id": ids, "predicted_ms": 1.0})
    text = "\n".join(_problems(*_write(tmp_path, df), public))
    assert f"{sid}: 1 prediction(s) for training networks: {data.ids(fold.train[:1])[0]}" in text
    assert f"{data.scenario_ids[1]}: 800 test network(s) not predicted" in text


def test_metadata_faults(entry, public, tmp_path):
    df = pd.read_parquet(entry / "predictions.parquet")
    meta = dict(META)
    del meta["seeds"]
    meta["code"] = "ftp://x"
    meta["exec"] = "rm -rf /"
    text = "\n".join(_problems(*_write(tmp_path, df, meta=meta), public))
    assert "seeds: missing" in text and "code: expected a link" in text and "exec: unknown key" in text


def test_file_level_faults(public, tmp_path):
    p = tmp_path / "pred.txt"
    p.write_text("x")
    m = tmp_path / "m.yaml"
    m.write_text(yaml.safe_dump(META))
    assert "unsupported predictions format .txt" in _problems(p, m, public)[0]
    p = tmp_path / "pred.csv"
    p.write_text("track,scenario,model_id,predicted_ms,extra\n")
    text = "\n".join(_problems(p, m, public))
    assert "missing column(s) scenario_id" in text and "unexpected column(s) scenario, extra" in text
    m.write_text("!!python/object/apply:os.system ['echo hi']")
    assert any("unreadable" in x for x in _problems(p, m, public))  # safe_load: tags never execute
