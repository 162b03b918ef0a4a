"""Repeated draws on the HELP few-shot track: the split holds one fold per seed, predictions carry
the fold, the validator wants every fold, the evaluator shows the mean and the spread."""
from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
import yaml

from leaderboard.protocols import PROTOCOLS
from leaderboard.submission import SubmissionError, validate
from leaderboard.tracks import SPLITS_DIR, TRACKS, Split, read_split

ROOT = Path(__file__).resolve().parents[1]
PUBLIC = ROOT / "data" / "public"
ENTRY = ROOT / "leaderboard" / "entries" / "public" / "flops"

needs_public = pytest.mark.skipif(not (PUBLIC / "e2e.parquet").is_file(),
                                  reason="the public data is not imported here (dvc repro import-public)")


def test_n10_split_holds_three_seeds_with_one_test_set():
    track = TRACKS.get("help-nb201-n10")
    assert track.params["seeds"] == [0, 1, 2]
    split = read_split(track)
    assert split is not None and split.repeated
    for sid in {f.scenario_id for f in split.folds}:
        folds = split.for_scenario(sid)
        assert [f.fold for f in folds] == [0, 1, 2]
        assert len({f.test for f in folds}) == 1 and len(folds[0].test) == 800
        assert len({f.train for f in folds}) == 3 and all(len(f.train) == 10 for f in folds)
    # seed 0 draws what the one-seed version drew: the board's earlier figures stay comparable
    old = Split.read(SPLITS_DIR / "public" / "help-nb201-n10.v1.json")
    assert {f.scenario_id: f.train for f in old.folds} == {f.scenario_id: f.train for f in split.folds if f.fold == 0}
    # the single-draw tracks are not repeated
    assert not read_split(TRACKS.get("help-nb201-n100")).repeated
    assert not read_split(TRACKS.get("usc-real-kfold")).repeated


@pytest.mark.parametrize("params, message", [
    ({"n_train": 10, "seed": 0, "seeds": [1], "pool": [0, 900], "test": [900, 1900], "trim": 0.1}, "seed/seeds: give exactly one"),
    ({"n_train": 10, "seeds": [1, 1], "pool": [0, 900], "test": [900, 1900], "trim": 0.1}, "seeds: expected a non-empty list of distinct"),
    ({"n_train": 10, "seeds": [], "pool": [0, 900], "test": [900, 1900], "trim": 0.1}, "seeds: expected a non-empty list"),
])
def test_seed_parameters_are_checked(params, message):
    with pytest.raises(ValueError) as e:
        PROTOCOLS.get("help-nb201").check(params)
    assert str(e.value).startswith(message)


def _n10_rows() -> pd.DataFrame:
    d = pd.read_parquet(ENTRY / "predictions.parquet")
    return d[d["track"] == "help-nb201-n10"].reset_index(drop=True)


@needs_public
def test_validator_wants_every_fold_of_a_repeated_track(tmp_path):
    meta = tmp_path / "metadata.yaml"
    meta.write_text(yaml.safe_dump({"method": "x", "authors": "a", "code": "https://example.org/x",
                                    "training_data": "track training split only", "seeds": [0, 1, 2]}))
    rows = _n10_rows()
    assert sorted(rows["fold"].unique()) == [0, 1, 2]
    ok = tmp_path / "ok.parquet"
    rows.to_parquet(ok, index=False)
    checked = validate(ok, meta)
    assert sorted(checked.tracks["help-nb201-n10"]["fold"].unique()) == [0, 1, 2]

    one = tmp_path / "one.parquet"
    rows[rows["fold"] == 0].to_parquet(one, index=False)
    with pytest.raises(SubmissionError) as e:
        validate(one, meta)
    assert any("fold 1: 800 test network(s) not predicted" in p for p in e.value.problems)

    nofold = tmp_path / "nofold.csv"
    rows[rows["fold"] == 0].drop(columns="fold").to_csv(nofold, index=False)
    with pytest.raises(SubmissionError) as e:
        validate(nofold, meta)
    assert any("fold: missing on 3200 row(s)" in p for p in e.value.problems)
