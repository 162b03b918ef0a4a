"""The board's entries come from several of the project's folders (the committed public and host
entries): one baseline entry may be split over them, each folder with its own tracks; every
registered predictor missing from an available track is listed with the reason, in status.json,
the README and the site. The main job trains nothing: leaderboard/dvc.yaml scores the committed
entries on the committed release."""
from __future__ import annotations

import json
import shutil

from pathlib import Path

import pandas as pd
import yaml

from leaderboard.baselines import PREDICTORS
from leaderboard.cli import main
from support.fixtures import register_test_predictors
from leaderboard.run import ENTRIES, evaluate_entry, note_absent_predictors, train_entry, write_status
from leaderboard.tracks import DATA_ROOTS, TRACKS

ROOT = Path(__file__).resolve().parents[1]

A, B = "usc-gpu-oplevel", "usc-real-kfold"


def test_a_baseline_split_over_two_folders_is_one_entry_and_absent_predictors_say_why(public, tmp_path):
    register_test_predictors()
    train_entry("test-reported-flops", {}, [A], public, tmp_path / "public-entries", entry="flops")
    train_entry("test-reported-flops", {}, [B], public, tmp_path / "host-entries", entry="flops")
    # a predictor whose run recorded why a track failed
    lasso = tmp_path / "host-entries" / "usc_lasso"
    lasso.mkdir()
    (lasso / "run.json").write_text(json.dumps({"failed": {B: "ValueError: no op rows"}, "skipped": {}}))
    # a predictor whose predictions for a track the evaluator rejects (a predicted 0 ms)
    rf = tmp_path / "host-entries" / "usc_rf"
    shutil.copytree(tmp_path / "host-entries" / "flops", rf)
    preds = pd.read_parquet(rf / "predictions.parquet")
    preds.loc[3, "predicted_ms"] = 0.0
    preds.to_parquet(rf / "predictions.parquet", index=False)
    results = tmp_path / "results"
    roots = ["--public", public["public"], "--host", public["host"]]
    assert main([*roots, "evaluate", "--entries", str(tmp_path / "public-entries"), "--entries",
                 str(tmp_path / "host-entries"), "--results", str(results)]) == 0
    assert (results / A / "flops.json").is_file() and (results / B / "flops.json").is_file()
    rejected = json.loads((results / "rejected.json").read_text())  # usc_lasso has no predictions: not rejected
    assert list(rejected) == ["usc_rf"] and rejected["usc_rf"][0]["track"] == B
    assert rejected["usc_rf"][0]["problem"].startswith("predictions.parquet: predicted_ms: 1 value(s) zero")
    status = json.loads((results / "status.json").read_text())
    for track in (A, B):
        absent = status[track]["not_entered"]
        assert "flops" not in absent
        assert set(absent) == set(PREDICTORS.names()) - {"flops"}
    assert status[B]["not_entered"]["usc_lasso"] == "failed: ValueError: no op rows"
    # not "not trained on this track yet": the board says the evaluator's reason
    assert status[B]["not_entered"]["usc_rf"].startswith("rejected by the evaluator: predictions.parquet: predicted_ms: 1 value(s) zero")
    assert status[A]["not_entered"]["usc_rf"].startswith("not trained on this track yet")
    assert status[A]["not_entered"]["gnn"].startswith("not trained on this track yet: `leaderboard-train predictor=gnn")
    # a predictor that names the tracks it is entered on says why it is not on the others
    assert status[A]["not_entered"]["gnn_ensemble"].startswith("not entered on this track: five GNNs cost")
    readme, site = tmp_path / "README.md", tmp_path / "site"
    assert main(["render", "--results", str(results), "--readme", str(readme), "--site", str(site)]) == 0
    text = readme.read_text()
    assert "Registered predictors not on this track:" in text and "- usc\\_lasso: failed: ValueError: no op rows" in text
    assert "not-entered" in (site / "index.html").read_text()
    summary = json.loads((site / "summary.json").read_text())  # DVC's metrics
    assert set(summary[A]) == {"flops"} and "mape" in summary[A]["flops"]
    board = (site / "board.csv").read_text().splitlines()
    assert board[0] == "track,entry,label,kind,primary,mape,acc10,spearman" and len(board) == 3


def test_a_stopped_training_run_resumes_where_it_stopped(public, tmp_path, monkeypatch):
    """Each finished scenario is kept under <entry>/.partial/<track>/ while the track runs: a run
    that dies part-way fits only the scenarios left the next time, and the entry is the same as
    an uninterrupted run's; the folder goes once the track is whole."""
    import pandas as pd

    from leaderboard import run as run_mod

    register_test_predictors()
    whole = train_entry("flops", {}, [A], public, tmp_path / "whole") / "predictions.parquet"
    fits: list[str] = []
    real = run_mod.mask

    def dying_mask(dataset, sid, test, all_ops):
        fits.append(sid)
        if len(set(fits)) == 2:
            raise KeyboardInterrupt  # the run is killed in its second scenario
        return real(dataset, sid, test, all_ops)

    monkeypatch.setattr(run_mod, "mask", dying_mask)
    try:
        train_entry("flops", {}, [A], public, tmp_path / "stopped")
    except KeyboardInterrupt:
        pass
    partial = tmp_path / "stopped" / "flops" / ".partial" / A
    assert len(list(partial.glob("*.parquet"))) == 1
    spent = json.loads((partial / "spent.json").read_text())["seconds"]  # the finished scenario's time
    assert spent > 0
    monkeypatch.setattr(run_mod, "mask", lambda dataset, sid, test, all_ops: (fits.append(sid), real(dataset, sid, test, all_ops))[1])
    done_before = set(fits[:-1])
    fits.clear()
    out = train_entry("flops", {}, [A], public, tmp_path / "stopped") / "predictions.parquet"
    assert done_before and not done_before & set(fits)  # the finished scenario was not fitted again
    pd.testing.assert_frame_equal(pd.read_parquet(out), pd.read_parquet(whole))
    assert not partial.parent.exists()
    # the track's seconds count the interrupted run's finished scenario too
    assert json.loads((out.parent / "run.json").read_text())["seconds"][A] >= spent
    # other parameters: what an interrupted run left is not reused
    stale = run_mod._resume_folder(tmp_path / "x", A, {"predictor": "flops", "params": {}})
    (stale / "usc-some.parquet").write_bytes(b"")
    assert not (run_mod._resume_folder(tmp_path / "x", A, {"predictor": "flops", "params": {"a": 1}}) / "usc-some.parquet").exists()


def test_a_run_stopped_in_its_second_track_keeps_the_first_whole_track(public, tmp_path, monkeypatch):
    """The entry is written once every track has run; a track finished before the run died is
    still in <entry>/.partial/ and is not fitted again (it used to be deleted the moment it was
    whole, so a killed multi-track run lost every finished track)."""
    from leaderboard import run as run_mod

    HELP = "help-nb201-n100"  # no scenario in common with A, so every fit is one track's
    register_test_predictors()
    real = run_mod.mask
    fits: list[str] = []
    a_sids: set[str] = set()

    def dying_in_b(dataset, sid, test, all_ops):
        if sid not in a_sids and fits and fits[-1] in a_sids and len(a_sids) == len(set(fits)):
            raise KeyboardInterrupt  # killed at the first scenario after track A's last one
        fits.append(sid)
        return real(dataset, sid, test, all_ops)

    ok, _ = run_mod.available([A], public, write_splits=False)
    a_sids.update(ok[A][0].scenario_ids)
    monkeypatch.setattr(run_mod, "mask", dying_in_b)
    try:
        train_entry("flops", {}, [A, HELP], public, tmp_path)
    except KeyboardInterrupt:
        pass
    kept = tmp_path / "flops" / ".partial" / A
    assert len(list(kept.glob("*.parquet"))) == len(a_sids) and not (tmp_path / "flops" / "predictions.parquet").exists()
    fits.clear()
    monkeypatch.setattr(run_mod, "mask", lambda dataset, sid, test, all_ops: (fits.append(sid), real(dataset, sid, test, all_ops))[1])
    train_entry("flops", {}, [A, HELP], public, tmp_path)
    assert not a_sids & set(fits)  # track A came from the folder
    assert not (tmp_path / "flops" / ".partial").exists()


def test_the_board_stages_score_the_committed_host_entries():
    stages = yaml.safe_load((ROOT / "leaderboard" / "dvc.yaml").read_text())["stages"]
    assert DATA_ROOTS["host"] in stages["splits"]["deps"] and "data/dataset" not in stages["splits"]["deps"]
    ev = stages["evaluate"]
    assert ev["cmd"].split("--entries")[1:] == [" leaderboard/entries/public ", " leaderboard/entries/host ",
                                                " leaderboard/submissions"]
    assert {"leaderboard/entries/public", "leaderboard/entries/host", "leaderboard/submissions",
            DATA_ROOTS["host"]} <= set(ev["deps"])
    named = [str(d) for st in stages.values() for d in (*st.get("deps", []), *st.get("outs", []))]
    assert not [d for d in named if "data/dataset" in d or "data/leaderboard" in d]  # nothing per machine
    assert ENTRIES == {"public": "leaderboard/entries/public", "host": "leaderboard/entries/host"}
    assert (ROOT / ENTRIES["host"]).is_dir()  # committed (DVC refuses a missing dependency)


def test_every_committed_host_split_is_what_the_release_freezes():
    """Every host track's split is in git and is what the committed release gives. The main
    job's splits stage freezes a missing split from the release as it is now: a file left out of a
    commit (or a track that selects by dataset, after the release grew) gives other folds, and
    the main job rejects every entry of that track. A track whose folds change takes a new
    version and its entries are refitted."""
    from leaderboard.run import available
    from leaderboard.tracks import compute_split

    host = [n for n in TRACKS.names() if TRACKS.get(n).data == "host"]
    assert [n for n in host if not TRACKS.get(n).split_file.is_file()] == []  # committed, not frozen anew
    ok, skipped = available(host, None, write_splits=False)
    assert not skipped, skipped
    differ = [n for n, (data, split) in ok.items() if compute_split(data).folds != split.folds]
    assert differ == [], f"{differ}: the committed split is not what the release freezes"


def test_a_host_track_on_the_release_scores_an_entry_and_lists_the_missing_predictors(public, tmp_path, monkeypatch):
    """A predictor trained on a host track of the release is scored; every other registered
    predictor is listed with the command that trains it into the committed host entries."""
    monkeypatch.delenv("LATBENCH_HOST_DATA", raising=False)
    roots = {"public": public["public"], "host": DATA_ROOTS["host"]}
    splits, entries, results = tmp_path / "splits", tmp_path / "host-entries", tmp_path / "results"
    entry = train_entry("flops", {}, ["host-random"], roots, entries, splits_dir=splits)
    assert (splits / "host" / f"host-random.v{TRACKS.get('host-random').version}.json").is_file()
    write_status(roots, results, splits)
    (doc,) = evaluate_entry(entry, roots, results, splits).values()
    assert doc["track"] == "host-random" and doc["networks"] >= 100 and doc["result"]["aggregate"]["mape"] > 0
    status = note_absent_predictors(results, [entries])
    assert status["host-random"]["available"] and status["host-random"]["networks"] >= 1000
    absent = status["host-random"]["not_entered"]
    assert set(absent) == set(PREDICTORS.names()) - {"flops"}
    assert absent["gnn"] == ("not trained on this track yet: `leaderboard-train predictor=gnn track=host-random "
                             "out=leaderboard/entries/host`")
    assert status["help-nb201-n10"]["not_entered"]["gnn"].endswith("out=leaderboard/entries/public`")
    assert absent["gnn_ensemble"].startswith("not trained on this track yet")  # host-* is its scope


def test_a_track_that_fails_whole_drops_its_old_predictions(public, tmp_path, monkeypatch):
    """A whole-track retrain that fails leaves no predictions of that track behind (the code can
    no longer make them; stale ones would be scored as if it could): run.json says why, and the
    other tracks keep theirs."""
    from leaderboard import run as run_mod

    HELP = "help-nb201-n10"
    train_entry("flops", {}, [A, HELP], public, tmp_path)
    before = pd.read_parquet(tmp_path / "flops" / "predictions.parquet")
    assert {A, HELP} <= set(before["track"])
    real = run_mod.predict_track

    def failing_on_a(data, split, make, **kw):
        if data.track.name == A:
            raise ValueError("op times sum to 2.4x e2e")
        return real(data, split, make, **kw)

    monkeypatch.setattr(run_mod, "predict_track", failing_on_a)
    train_entry("flops", {}, [A], public, tmp_path)
    after = pd.read_parquet(tmp_path / "flops" / "predictions.parquet")
    assert A not in set(after["track"]) and (after["track"] == HELP).sum() == (before["track"] == HELP).sum()
    run = json.loads((tmp_path / "flops" / "run.json").read_text())
    assert run["failed"] == {A: "ValueError: op times sum to 2.4x e2e"}
    assert not (tmp_path / "flops" / ".partial").exists()  # nothing finished: nothing left to resume
