"""The main job's configuration (the tour): the grid decides what is exported, the slow runners
measure the small networks only, and the full grid and protocol are one override away."""
from __future__ import annotations

import pytest

from pipelines.config import ConfigError, compose, validate
from pipelines.export import export_formats
from pipelines.measure import grid_formats, list_models


def test_the_tour_exports_what_its_grid_reads_and_the_full_grid_more():
    tour = validate(compose())
    assert tour.export.formats == [] and export_formats(tour) == ["tflite_fp32", "torchscript_fp32"]
    full = validate(compose(["scenario=host_full"]))
    assert grid_formats(full.scenario) == ["tflite_fp32", "tflite_int8", "torchscript_fp32", "torchscript_int8"]
    cpu_only = validate(compose(["scenario=host_full", "scenario.accelerators=[cpu]", "scenario.frameworks=[tflite]"]))
    assert export_formats(cpu_only) == ["tflite_fp32", "tflite_int8"]
    explicit = validate(compose(["export.formats=[nnmeter_ir]"]))
    assert export_formats(explicit) == ["nnmeter_ir"]


def test_runner_sources_keep_the_slow_runners_on_small_networks(tmp_path):
    models = tmp_path / "models"
    for source, mid in (("synthetic", "a1"), ("nasbench201", "b2"), ("pytorch", "c3"), ("zoo", "d4")):
        (models / source).mkdir(parents=True)
        (models / source / f"{mid}.json").write_text("{}")
    cfg = validate(compose())
    assert [m for _, m in list_models(cfg, models, "tflite-cpu")] == ["b2", "c3", "a1", "d4"]
    # synthetic on PyTorch too: host-shift-real trains on synthetic networks in every scenario
    assert list_models(cfg, models, "pytorch-cpu") == [("nasbench201", "b2"), ("pytorch", "c3"), ("synthetic", "a1")]
    assert list_models(cfg, models, "tflite-gpu") == [("nasbench201", "b2")]
    full = validate(compose(["measure=full"]))
    assert len(list_models(full, models, "tflite-gpu")) == 4


def test_an_unknown_runner_is_one_line_naming_the_key():
    raw = compose(["+measure.runner_sources.tflite-npu=[zoo]"])
    with pytest.raises(ConfigError, match=r"measure\.runner_sources\.tflite-npu: no such runner \(known: .*pytorch-cpu"):
        validate(raw)
