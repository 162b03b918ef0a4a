"""Your own data without editing the package (issue 56): tracks and splits in folders of the
user's, results in the user's ``data/leaderboard/``, ``scenarios=`` on a new entry, and a track
for a new device from a template (``leaderboard track new``).

Data: a tiny public data root written here (40 NAS-Bench-201-named networks, four scenarios on
three devices, no IR), so every test runs in about a second. Nothing under ``leaderboard/``
(apart from the entries the board's own training writes) may change."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from leaderboard.cli import main
from leaderboard.run import train_entry
from leaderboard.tracks import (TRACKS, TRACKS_ENV, SPLITS_ENV, TrackError, read_track, resolve, use_track_folders,
                                user_tracks)
from support.fixtures import register_test_predictors

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "leaderboard"
SCENARIOS = [("pixel7-tflite-cpu-fp32", "pixel7", "cpu"), ("pixel7-tflite-gpu-fp16", "pixel7", "gpu"),
             ("phoneb-tflite-cpu-fp32", "phoneb", "cpu"), ("1080ti-gpu", "1080ti", "gpu")]
MINE = {"name": "mine-kfold", "version": 1, "title": "my phones, 2-fold", "data": "public",
        "models": {"dataset": "help-nasbench201"},
        "scenarios": {"dataset": "help-nasbench201", "device": ["pixel7", "phoneb"]},
        "protocol": "kfold", "params": {"k": 2, "seed": 0}}


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    """A public data root: nb201-00000..19 (HELP's pool) and nb201-00900..19 (its test range)."""
    from pipelines.dataset.load import save_tables
    from pipelines.dataset.schema import conform

    out = tmp_path_factory.mktemp("tiny-public")
    idx = [*range(20), *range(900, 920)]
    models = [{"model_id": f"nb201:{i:05d}", "name": f"nb201-{i:05d}", "source": "nasbench201", "input_shape": "1x3x32x32",
               "dataset": "help-nasbench201", "reported_flops": 1000 + 37 * (i % 23)} for i in idx]
    scen = [{"scenario_id": sid, "device": dev, "accelerator": acc, "batch": 1, "description": sid,
             "dataset": "help-nasbench201"} for sid, dev, acc in SCENARIOS]
    rng = np.random.default_rng(0)
    e2e = [{"model_id": m["model_id"], "scenario_id": s["scenario_id"], "dataset": "help-nasbench201",
            "latency_ms": m["reported_flops"] / 100 * (k + 1) * rng.uniform(0.9, 1.1), "latency_stat": "median"}
           for m in models for k, s in enumerate(scen)]
    tables = {"models": models, "scenarios": scen, "e2e": e2e}
    save_tables({k: conform(k, pd.DataFrame(v)) for k, v in tables.items()}, out)
    return out


@pytest.fixture()
def user(tiny, tmp_path, monkeypatch):
    """The working directory a user runs from: a tracks folder with MINE, a splits folder, the
    roots argv; no user tracks from the environment, and none left registered afterwards."""
    monkeypatch.delenv(TRACKS_ENV, raising=False)
    monkeypatch.delenv(SPLITS_ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "tracks").mkdir()
    (tmp_path / "tracks" / "mine-kfold.yaml").write_text(yaml.safe_dump(MINE))
    register_test_predictors()
    roots = ["--public", str(tiny), "--host", str(tmp_path / "no-host-data")]
    yield tmp_path, roots
    monkeypatch.delenv(TRACKS_ENV, raising=False)
    use_track_folders()


def _package_state() -> dict[str, tuple[int, int]]:
    """Every file under leaderboard/ but the entries (the board's own training writes there)."""
    out = {}
    for dirpath, dirs, files in os.walk(PACKAGE):
        dirs[:] = [d for d in dirs if d not in ("entries", "__pycache__")]
        for f in files:
            st = (Path(dirpath) / f).stat()
            out[str(Path(dirpath, f).relative_to(PACKAGE))] = (st.st_size, st.st_mtime_ns)
    return out


def test_a_user_track_is_listed_resolved_and_split_into_the_users_folder(user, tiny, capsys, monkeypatch):
    cwd, roots = user
    before = _package_state()
    assert main([*roots, "--tracks", "tracks", "--splits", "my-splits", "tracks"]) == 0
    listed = capsys.readouterr().out
    assert "mine-kfold" in listed and "3 scenarios" in listed and "40 networks" in listed
    assert main(["track", "list", "--tracks", "tracks", "--splits", "my-splits"]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("mine-kfold"))
    assert " user " in line and "tracks/mine-kfold.yaml" in line and "my-splits/public/mine-kfold.v1.json" in line
    # the subcommand's own options, and the environment, are the same as the options before it
    assert main([*roots, "splits", "--tracks", "tracks", "--splits", "my-splits", "--track", "mine-kfold"]) == 0
    split = cwd / "my-splits" / "public" / "mine-kfold.v1.json"
    assert split.is_file() and len(json.loads(split.read_text())["folds"]) == 2
    assert "mine-kfold" in TRACKS and not TRACKS.get("mine-kfold").packaged
    data = resolve(TRACKS.get("mine-kfold"), {"public": str(tiny)})
    assert data.scenario_ids == ["phoneb-tflite-cpu-fp32", "pixel7-tflite-cpu-fp32", "pixel7-tflite-gpu-fp16"]
    monkeypatch.setenv(TRACKS_ENV, "tracks")  # without --splits: the default folder, data/leaderboard/splits
    assert main([*roots, "splits", "--track", "mine-kfold"]) == 0
    assert (cwd / "data" / "leaderboard" / "splits" / "public" / "mine-kfold.v1.json").read_text() == split.read_text()
    assert [t.name for t in user_tracks()] == ["mine-kfold"]
    # a packaged track's split stays where it is, and nothing in the package changed
    assert TRACKS.get("help-nb201-n10").split_file.parent == PACKAGE / "splits" / "public"
    assert _package_state() == before


def test_a_user_track_with_a_packaged_or_another_users_name_is_one_line_naming_both(user, tiny, capsys):
    cwd, roots = user
    (cwd / "clash").mkdir()
    packaged = yaml.safe_load((PACKAGE / "tracks" / "help-nb201-n10.yaml").read_text())
    (cwd / "clash" / "help-nb201-n10.yaml").write_text(yaml.safe_dump(packaged))
    assert main([*roots, "--tracks", "clash", "tracks"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("leaderboard: error: clash/help-nb201-n10.yaml: name: ")
    assert "leaderboard/tracks/help-nb201-n10.yaml" in err
    (cwd / "again").mkdir()
    (cwd / "again" / "mine-kfold.yaml").write_text(yaml.safe_dump(MINE))
    with pytest.raises(TrackError, match=r"^again/mine-kfold.yaml: name: 'mine-kfold' is also the track tracks/mine-kfold.yaml"):
        use_track_folders(["tracks", "again"])
    # a user file is checked as the packaged ones: the file and the key
    (cwd / "bad").mkdir()
    (cwd / "bad" / "oops.yaml").write_text(yaml.safe_dump({**MINE, "name": "oops", "params": {"k": 1, "seed": 0}}))
    assert main([*roots, "track", "list", "--tracks", "bad"]) == 2
    assert capsys.readouterr().err == "leaderboard: error: bad/oops.yaml: params: k: expected an int >= 2, got 1\n"
    with pytest.raises(TrackError, match="splits folder: inside the package"):
        use_track_folders(["tracks"], PACKAGE / "splits")
    assert "mine-kfold" not in TRACKS  # a refused folder registers nothing


def test_evaluate_and_render_use_the_users_folder_unless_told_the_board(user, capsys):
    cwd, roots = user
    before = _package_state()
    user_roots = [*roots, "--tracks", "tracks", "--splits", "splits"]
    assert main([*user_roots, "train", "--predictor", "test-median", "--track", "mine-kfold", "--out", "entries"]) == 0
    assert main([*user_roots, "evaluate", "--entries", "entries"]) == 0
    result = cwd / "data" / "leaderboard" / "results" / "mine-kfold" / "test-median.json"
    assert json.loads(result.read_text())["networks"] == 120
    assert main([*user_roots, "render"]) == 0
    assert "mine-kfold" in (cwd / "data" / "leaderboard" / "README.md").read_text()
    assert (cwd / "data" / "leaderboard" / "site" / "index.html").is_file()
    capsys.readouterr()
    # the board takes the packaged tracks only; --board and --results are one or the other
    assert main([*user_roots, "evaluate", "--board", "--entries", "entries"]) == 2
    assert "--board scores the packaged tracks only" in capsys.readouterr().err
    assert main([*roots, "render", "--board", "--results", "x"]) == 2
    assert main([*roots, "render", "--results", "nowhere"]) == 2
    assert capsys.readouterr().err.count("\n") == 2
    assert _package_state() == before


def test_scenarios_on_a_new_entry_trains_only_the_matching_ones(user, tiny, capsys):
    cwd, roots = user
    use_track_folders(["tracks"], "splits")
    out = train_entry("test-median", {}, ["mine-kfold"], {"public": str(tiny)}, cwd / "entries", scenarios="*pixel7*")
    preds = pd.read_parquet(out / "predictions.parquet")
    assert sorted(preds["scenario_id"].unique()) == ["pixel7-tflite-cpu-fp32", "pixel7-tflite-gpu-fp16"]
    run = json.loads((out / "run.json").read_text())
    assert run["subset"]["mine-kfold"]["scenarios"] == ["pixel7-tflite-cpu-fp32", "pixel7-tflite-gpu-fp16"]
    assert run["subset"]["mine-kfold"]["of"] == 3 and not run["failed"]
    meta = yaml.safe_load((out / "metadata.yaml").read_text())
    assert "mine-kfold: only the scenarios matching *pixel7* (2 of 3)" in meta["training_data"]
    # the track trained whole afterwards is whole, and says so no more
    train_entry("test-median", {}, ["mine-kfold"], {"public": str(tiny)}, cwd / "entries")
    assert "subset" not in json.loads((out / "run.json").read_text())
    assert yaml.safe_load((out / "metadata.yaml").read_text())["training_data"] == "each track's training split only"
    assert pd.read_parquet(out / "predictions.parquet")["scenario_id"].nunique() == 3
    # the board's entries take the packaged tracks only (refused before anything is written)
    with pytest.raises(ValueError, match=r"the board's entries take the packaged tracks only, not the user track mine-kfold"):
        train_entry("test-median", {}, ["mine-kfold"], {"public": str(tiny)}, PACKAGE / "entries" / "public")


def test_scenarios_matching_nothing_is_one_line_and_writes_nothing(user, capsys):
    cwd, roots = user
    argv = [*roots, "--tracks", "tracks", "train", "--predictor", "test-median", "--track", "mine-kfold",
            "--scenarios", "*pixel9*", "--scenarios", "*s99*", "--out", "entries"]
    assert main(argv) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[-1] == ("leaderboard: error: scenarios=*pixel9*,*s99*: matches no scenario of the track(s) mine-kfold; "
                       "their scenarios: phoneb-tflite-cpu-fp32, pixel7-tflite-cpu-fp32, pixel7-tflite-gpu-fp16")
    assert not (cwd / "entries").exists()


def test_leaderboard_train_refuses_in_one_line(user, tiny):
    """The Hydra app: a refused run is one line on stderr, exit 2, no traceback."""
    cwd, _ = user
    exe = Path(sys.executable).parent / "leaderboard-train"
    r = subprocess.run([str(exe), "predictor=flops", "track=mine-kfold", "tracks=tracks", f"public={tiny}",
                        "scenarios=*pixel9*", "out=entries", "hydra.run.dir=hydra"],
                       cwd=cwd, capture_output=True, text=True, timeout=120)
    assert r.returncode == 2
    assert r.stderr.strip().splitlines()[-1].startswith("leaderboard-train: error: scenarios=*pixel9*: matches no scenario")
    assert "Traceback" not in r.stderr and not (cwd / "entries").exists()


def test_track_new_from_a_template_writes_a_valid_track_and_never_overwrites(user, tiny, capsys):
    cwd, roots = user
    before = _package_state()
    new = [*roots, "track", "new", "--template", "help-transfer-n10", "--target", "pixel7", "--name", "my-phone-n10",
           "--out", "mine"]
    assert main(new) == 0
    path = cwd / "mine" / "my-phone-n10.yaml"
    track = read_track(path)
    template = TRACKS.get("help-transfer-n10")
    assert track.protocol == template.protocol and track.params == template.params
    assert track.scenarios == {"dataset": "help-nasbench201", "device": ["pixel7"]} and track.models == template.models
    text = path.read_text()
    assert main(new) == 2  # never over a file
    assert "mine/my-phone-n10.yaml exists; not overwritten" in capsys.readouterr().err
    assert path.read_text() == text
    # a glob over scenario ids; a target that is the template's source; one that is nowhere
    assert main([*new[:-6], "--target", "*pixel7-tflite-c*", "--name", "my-cpu-n10", "--out", "mine"]) == 0
    assert read_track(cwd / "mine" / "my-cpu-n10.yaml").scenarios == {
        "dataset": "help-nasbench201", "scenario_id": ["pixel7-tflite-cpu-fp32"]}
    capsys.readouterr()
    assert main([*new[:-6], "--target", "1080ti", "--name", "x", "--out", "mine"]) == 2
    assert "'1080ti' is a source device of help-transfer-n10" in capsys.readouterr().err
    assert main([*new[:-6], "--target", "pixel9", "--name", "x", "--out", "mine"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--target: 'pixel9' is no device" in err and "devices: 1080ti, phoneb, pixel7" in err
    assert main([*new[:-6], "--target", "pixel7", "--name", "help-nb201-n10", "--out", "mine"]) == 2
    assert "is the packaged track leaderboard/tracks/help-nb201-n10.yaml" in capsys.readouterr().err
    assert not (cwd / "mine" / "x.yaml").exists()
    # the written track is a track: it splits into the user's folder
    assert main([*roots, "splits", "--tracks", "mine", "--splits", "splits", "--track", "my-phone-n10"]) == 0
    split = json.loads((cwd / "splits" / "public" / "my-phone-n10.v1.json").read_text())
    assert len(split["folds"]) == 6  # 2 pixel7 scenarios x 3 seeds
    assert _package_state() == before
