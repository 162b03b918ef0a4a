"""Your own measurements, from a CSV to `latbench predict`, without a file of the package changing
(issue 56): a USC-format CSV of a phone the catalog lacks, in a folder of its own, is described in
a catalog of the user's, imported, given a track of its own from a template, scored, and put on the
user's shelf, where `latbench predict` finds it.

The CSV is a fixture: a dozen pytorchcv networks with made-up, distinct latencies (the mechanics
are under test, not a predictor's accuracy); usc_lasso is the predictor, the quickest to fit.
"""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODELS = ["squeezenet_v1_0", "squeezenet_v1_1", "mobilenet_wd4", "mobilenet_wd2", "mobilenet_w3d4", "mobilenet_w1",
          "mobilenetv2_wd4", "mobilenetv2_wd2", "mobilenetv2_w3d4", "mobilenetv2_w1", "shufflenetv2_wd2",
          "shufflenetv2_w1"]


def _package_state() -> str:
    """What git sees of the package (tracked changes and untracked files), the user's data aside."""
    out = subprocess.run(["git", "status", "--porcelain", "--", "leaderboard", "pipelines", "shelf", "conf",
                          "params.yaml", "dvc.yaml", "generators"], cwd=ROOT, capture_output=True, text=True)
    return out.stdout if out.returncode == 0 else "(no git)"


def test_a_phone_of_yours_goes_from_csv_to_predict_without_changing_the_package(tmp_path, monkeypatch, capsys):
    from leaderboard.cli import main as board
    from pipelines.cli import main as latbench

    before = _package_state()
    phones = tmp_path / "phones"
    phones.mkdir()
    rows = ["model,FLOPS,myphone|1large|float|mean,myphone|1large|float|std"]
    rows += [f"{m},{100_000_000 * (i + 1)},{2000 + 757 * i + 31 * (i % 3)}.5,{5 + i}.25" for i, m in enumerate(MODELS)]
    (phones / "cnn_real_e2e_tflite.csv").write_text("\n".join(rows) + "\n")
    cat, params, data = tmp_path / "catalog.yaml", tmp_path / "params.yaml", tmp_path / "data"
    tracks, splits, entries, results, shelf = (tmp_path / n for n in ("tracks", "splits", "entries", "results", "shelf"))
    for k in ("LATBENCH_TRACKS", "LATBENCH_SPLITS", "LATBENCH_SHELF", "LATBENCH_CATALOG", "LATBENCH_PUBLIC_DATA"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.chdir(tmp_path)  # the user's data/... defaults land here, not in the checkout

    assert latbench(["devices", "add", "--no-adb", "myphone", "--model", "Maker X1", "--soc", "SoC 9", "--cluster",
                     "large:1:3.0", "--cluster", "small:4:2.0", "--source", "usc=myphone", "--catalog", str(cat)]) == 0
    assert latbench(["compose", "public.datasets=[usc]", f"public.usc.path={phones}", f"public.catalog={cat}",
                     f"data_dir={data}", "-o", str(params)]) == 0
    assert latbench(["import-public", "--params", str(params), "-q"]) == 0
    public = data / "public"
    common = ["--public", str(public)]
    tr = ["--tracks", str(tracks), "--splits", str(splits)]
    assert board([*common, "track", "new", "--template", "usc-real-kfold", "--target", "myphone", "--name",
                  "myphone-kfold", "--out", str(tracks)]) == 0
    assert board([*common, "train", "--predictor", "usc_lasso", "--track", "myphone-kfold", *tr,
                  "--out", str(entries)]) == 0
    assert board([*common, "evaluate", "--entries", str(entries), *tr, "--results", str(results)]) == 0
    assert (splits / "public" / "myphone-kfold.v1.json").is_file()
    r = json.loads((results / "myphone-kfold" / "usc_lasso.json").read_text())
    sid = "usc-myphone-tflite-cpu-1large-fp32"
    assert list(r["result"]["per_scenario"]) == [sid]
    assert latbench(["shelf", "build", "--track", "myphone-kfold", *tr, "--public", str(public), "--results",
                     str(results), "--out", str(shelf), "-q"]) == 0
    index = json.loads((shelf / "INDEX.json").read_text())
    assert index["scenarios"][sid]["predictor"] == "usc_lasso"
    assert index["scenarios"][sid]["training"]["track"] == "myphone-kfold"
    capsys.readouterr()
    monkeypatch.setenv("LATBENCH_SHELF", str(shelf))
    assert latbench(["predict", "--list"]) == 0
    listed = [line for line in capsys.readouterr().out.splitlines() if line.startswith(sid)]
    assert len(listed) == 1 and "board track myphone-kfold" in listed[0]
    assert _package_state() == before
