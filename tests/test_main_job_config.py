"""The main job's configuration (the tour): the grid decides what is exported, the slow runners
measure the small networks only, the full grid and protocol are one override away, and the
board's stages score committed entries on the committed release without training."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from pipelines.config import ConfigError, compose, validate
from pipelines.export import export_formats, formats_for
from pipelines.measure import grid_formats, list_models

ROOT = Path(__file__).resolve().parents[1]


def test_the_tour_exports_what_its_grid_reads_and_the_full_grid_more():
    tour = validate(compose())
    # the tour's PyTorch, ONNX Runtime and ExecuTorch points measure the small networks only, so
    # only they get TorchScript, ONNX and ExecuTorch files
    small = frozenset({"nasbench201", "pytorch"})
    assert tour.export.formats == [] and export_formats(tour) == {
        "executorch_fp32": small, "onnx_fp32": small, "tflite_fp32": None, "torchscript_fp32": small}
    full = validate(compose(["scenario=host_full", "measure=full"]))
    assert grid_formats(full.scenario) == dict.fromkeys(["tflite_fp32", "tflite_int8", "torchscript_fp32", "torchscript_int8"])
    assert export_formats(full) == grid_formats(full.scenario)
    cpu_only = validate(compose(["scenario=host_full", "scenario.accelerators=[cpu]", "scenario.frameworks=[tflite]"]))
    assert list(export_formats(cpu_only)) == ["tflite_fp32", "tflite_int8"]
    explicit = validate(compose(["export.formats=[nnmeter_ir]"]))
    assert export_formats(explicit) == {"nnmeter_ir": None}


def test_the_release_exports_only_what_its_points_measure():
    """measure.points: no int8 point outside TFLite, PyTorch fp32 on the synthetic networks only,
    ONNX Runtime and ExecuTorch fp32 on the synthetic networks and the zoo, so the release's other
    networks get no TorchScript (its int8 export is the slowest of all) and its NAS-Bench-201
    cells, imported CNNs and transformer space no ONNX or ExecuTorch file."""
    release = validate(compose(["scenario=release", "measure=release",
                                "generator=[synthetic,zoo,nasbench201,pytorch,transformer,release]"]))
    formats = export_formats(release)
    assert formats == {"tflite_fp32": None, "tflite_int8": None, "torchscript_fp32": frozenset({"synthetic"}),
                       "onnx_fp32": frozenset({"synthetic", "zoo"}), "executorch_fp32": frozenset({"synthetic", "zoo"})}
    assert formats_for(formats, "synthetic") == ["executorch_fp32", "onnx_fp32", "tflite_fp32", "tflite_int8",
                                                 "torchscript_fp32"]
    assert formats_for(formats, "zoo") == ["executorch_fp32", "onnx_fp32", "tflite_fp32", "tflite_int8"]
    assert formats_for(formats, "nasbench201") == ["tflite_fp32", "tflite_int8"]
    assert formats_for(formats, "transformer") == ["tflite_fp32", "tflite_int8"]


def test_runner_sources_keep_the_slow_runners_on_small_networks(tmp_path):
    models = tmp_path / "models"
    for source, mid in (("synthetic", "a1"), ("nasbench201", "b2"), ("pytorch", "c3"), ("zoo", "d4")):
        (models / source).mkdir(parents=True)
        (models / source / f"{mid}.json").write_text("{}")
    cfg = validate(compose())
    assert [m for _, m in list_models(cfg, models, "tflite-cpu")] == ["b2", "c3", "a1", "d4"]
    assert list_models(cfg, models, "pytorch-cpu") == [("nasbench201", "b2"), ("pytorch", "c3")]
    assert list_models(cfg, models, "tflite-gpu") == [("nasbench201", "b2")]
    full = validate(compose(["measure=full"]))
    assert len(list_models(full, models, "tflite-gpu")) == 4


def test_an_unknown_runner_is_one_line_naming_the_key():
    raw = compose(["+measure.runner_sources.tflite-npu=[zoo]"])
    with pytest.raises(ConfigError, match=r"measure\.runner_sources\.tflite-npu: no such runner \(known: .*pytorch-cpu"):
        validate(raw)


def test_the_main_job_trains_no_predictor_and_scores_the_host_tracks_on_the_release():
    """`make run` = `dvc repro --all-pipelines`: training every predictor on the release's 1,200+
    host networks would break the main job's 15-minute bound, so no stage of either pipeline
    trains; the host tracks read the committed release (leaderboard.tracks.DATA_ROOTS)."""
    from leaderboard.tracks import DATA_ROOTS

    stages = {**yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"],
              **{f"leaderboard/{k}": v for k, v in yaml.safe_load((ROOT / "leaderboard" / "dvc.yaml").read_text())["stages"].items()}}
    trains = [name for name, st in stages.items()
              if any(t in st["cmd"] for t in ("leaderboard.train", "leaderboard-train", "leaderboard.cli train"))]
    assert trains == [] and "leaderboard/train-host" not in stages
    assert DATA_ROOTS["host"] == "datasets/host-v1" and (ROOT / DATA_ROOTS["host"] / "e2e.parquet").is_file()
    for name in ("leaderboard/splits", "leaderboard/evaluate"):  # a new release re-freezes and re-scores
        assert DATA_ROOTS["host"] in stages[name]["deps"] and "data/dataset" not in stages[name]["deps"]
