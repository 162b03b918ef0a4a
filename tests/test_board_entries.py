"""The board's entries come from several of the project's folders (the committed public entries,
the host entries the main job trains): one baseline entry may be split over them, each folder
with its own tracks; every registered predictor missing from an available track is listed with
the reason, in status.json, the README and the site."""
from __future__ import annotations

import json

from leaderboard.baselines import PREDICTORS
from leaderboard.cli import main
from support.fixtures import register_test_predictors
from leaderboard.run import train_entry

A, B = "usc-gpu-oplevel", "usc-real-kfold"


def test_a_baseline_split_over_two_folders_is_one_entry_and_absent_predictors_say_why(public, tmp_path):
    register_test_predictors()
    train_entry("test-reported-flops", {}, [A], public, tmp_path / "public-entries", entry="flops")
    train_entry("test-reported-flops", {}, [B], public, tmp_path / "host-entries", entry="flops")
    # a predictor whose run recorded why a track failed
    lasso = tmp_path / "host-entries" / "usc_lasso"
    lasso.mkdir()
    (lasso / "run.json").write_text(json.dumps({"failed": {B: "ValueError: no op rows"}, "skipped": {}}))
    results = tmp_path / "results"
    roots = ["--public", public["public"], "--host", public["host"]]
    assert main([*roots, "evaluate", "--entries", str(tmp_path / "public-entries"), "--entries",
                 str(tmp_path / "host-entries"), "--results", str(results)]) == 0
    assert (results / A / "flops.json").is_file() and (results / B / "flops.json").is_file()
    assert json.loads((results / "rejected.json").read_text()) == {}  # usc_lasso has no predictions: not rejected
    status = json.loads((results / "status.json").read_text())
    for track in (A, B):
        absent = status[track]["not_entered"]
        assert "flops" not in absent
        assert set(absent) == set(PREDICTORS.names()) - {"flops"}
    assert status[B]["not_entered"]["usc_lasso"] == "failed: ValueError: no op rows"
    assert status[A]["not_entered"]["gnn"].startswith("not trained on this track yet: `leaderboard-train predictor=gnn")
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
    monkeypatch.setattr(run_mod, "mask", lambda dataset, sid, test, all_ops: (fits.append(sid), real(dataset, sid, test, all_ops))[1])
    done_before = set(fits[:-1])
    fits.clear()
    out = train_entry("flops", {}, [A], public, tmp_path / "stopped") / "predictions.parquet"
    assert done_before and not done_before & set(fits)  # the finished scenario was not fitted again
    pd.testing.assert_frame_equal(pd.read_parquet(out), pd.read_parquet(whole))
    assert not partial.parent.exists()
    # other parameters: what an interrupted run left is not reused
    stale = run_mod._resume_folder(tmp_path / "x", A, {"predictor": "flops", "params": {}})
    (stale / "usc-some.parquet").write_bytes(b"")
    assert not (run_mod._resume_folder(tmp_path / "x", A, {"predictor": "flops", "params": {"a": 1}}) / "usc-some.parquet").exists()
