"""GPU scenarios in the measure grid (the `measure-gpu` DVC stage) and GPU kernels in the dataset.

One tiny synthetic network (16x16 input, two blocks, 8-16 channels) is generated and exported
once; the `measure-gpu@tflite-gpu-fp16` stage command from dvc.yaml measures it on this machine's GPU
(LiteRT's WebGPU accelerator on Mesa's lavapipe) and `assemble` turns the records into
dataset rows. Those tests skip, saying why, when the machine has no Vulkan device
(scripts/setup.sh installs one: docs/gpu.md). The "not offered" paths and the pure parts
(aggregation of GPU events, kernel types) run everywhere.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from pipelines import gpu
from pipelines.config import compose, validate, write_params
from pipelines.measure import aggregate_events, run_measure
from pipelines.runners import RUNNERS

ROOT = Path(__file__).resolve().parents[1]
TINY = ["generator=[synthetic]", "generator.synthetic.n=1", "generator.synthetic.input_size=16",
        "generator.synthetic.num_classes=10", "generator.synthetic.stem_channels=8",
        "generator.synthetic.num_blocks=2", "generator.synthetic.strides=[1,2]",
        "generator.synthetic.channel_ranges=[[8,16],[8,16]]", "generator.synthetic.head_channels=[16,32]",
        "generator.synthetic.block_types=[conv,dwsep]", "export.formats=[tflite_fp32]", "export.workers=1"]
# the full host grid and protocol (the main job's tour measures only NAS-Bench-201 cells on the GPU)
QUICK = ["scenario=host_full", "measure=full", "measure.processes=2", "measure.warmup=2", "measure.stopping.policy=fixed", "measure.stopping.runs=6",
         "measure.op_runs=3", "measure.overhead_pairs=2",
         "measure.load.check=false"]  # a shared test machine: the load is recorded, not refused (test_measure.py tests that)
GPU16 = "host-tflite-gpu-fp16"
KINDS = {"conv", "depthwise_conv", "winograd_input", "winograd_matmul", "winograd_output", "fully_connected", "mean",
         "pool", "elementwise", "concat", "layout_in", "layout_out", "copy", "ambiguous", "other"}


def params(data: Path, *overrides: str):
    raw = compose([*TINY, *QUICK, f"data_dir={data}", *overrides])
    return raw, validate(raw)


@pytest.fixture(scope="module")
def measured(needs_gpu, tmp_path_factory) -> Path:
    """A data dir with the tiny network exported and measured by the measure-gpu@tflite-gpu-fp16 stage
    command, run exactly as dvc.yaml spells it (with its own params file)."""
    from pipelines.export import run_export
    from pipelines.generate import run_generate

    data = tmp_path_factory.mktemp("gpu") / "data"
    raw, cfg = params(data)
    run_generate(cfg, progress=False)
    assert run_export(cfg, progress=False)["failed"] == 0
    p = data.parent / "params.yaml"
    write_params(raw, p)
    cmd = _stage("measure-gpu")["cmd"].replace("${item.framework}", "tflite").replace("${item.precision}", "fp16").split()
    assert cmd[:3] == ["python", "-m", "pipelines.cli"]
    proc = subprocess.run([sys.executable, *cmd[1:], "--params", str(p), "-q"], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert f"measure {GPU16}: 1 measured, 0 failed" in proc.stdout
    return data


def _stage(name: str) -> dict:
    return yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"][name]


def _records(out: Path) -> dict[str, dict]:
    return {p.stem: json.loads(p.read_text()) for p in out.glob("*.json")
            if p.name != "SCENARIO.json" and not p.name.endswith((".error.json", ".trace.json"))}


# ---------------------------------------------------------------- the stage on a GPU
def test_the_gpu_stage_records_e2e_and_gpu_kernels(measured):
    stage = _stage("measure-gpu")
    assert stage["matrix"] == {"framework": ["tflite"], "accelerator": ["gpu"], "precision": "${scenario.gpu_precisions}"}
    assert {"pipelines/gpu", "native/vklayer", "pipelines/measure", "${release.folder}"} <= set(stage["deps"])
    (outs,) = stage["outs"]
    (path,) = outs
    out = measured / path.replace("${data_dir}/", "").replace("${device.name}", "host").replace(
        "${item.framework}", "tflite").replace("${item.precision}", "fp16")
    info = json.loads((out / "SCENARIO.json").read_text())
    assert out.name == GPU16 and info["status"] == "measured" and info["device"]["gpu"]  # auto -> the Vulkan device
    assert info["scenario"]["accelerator"] == "gpu" and info["scenario"]["cores"] is None
    assert info["granularities"] == ["e2e", "kernel"] and "profiler" in info["granularities_not_offered"]["op"]
    (rec,) = _records(out).values()
    assert rec["artifact"]["format"] == "tflite_fp32"  # the compute precision is the GPU's, the weights fp32
    assert rec["runtime"]["accelerator"] == "gpu" and rec["runtime"]["precision"] == "fp16"
    assert rec["protocol"]["granularities"] == ["e2e", "kernel"] and "op" not in rec
    assert "op" in rec["protocol"]["granularities_not_offered"]
    assert [len(s) for s in rec["e2e"]["samples_ns"]] == [3, 3] and rec["e2e"]["latency_ms"] > 0
    kern = rec["kernel"]
    ks = kern["kernels"]
    assert [k["order"] for k in ks] == list(range(len(ks)))
    assert all(k["source"] == "gpu" and k["runs"] == 3 and k["shader_mismatch"] == 0 for k in ks)
    disp = [k for k in ks if k["kind"] == "dispatch"]
    assert len(disp) >= 3 and any(k["kind"] == "copy" for k in ks)
    for k in disp:
        assert len(k["shader"]) == 16 and len(k["groups"]) == 3 and min(k["local_size"]) >= 1
        assert k["kernel_kind"] in KINDS and isinstance(k["fused"], list)
    assert {k["kernel_kind"] for k in disp} & {"conv", "depthwise_conv", "winograd_matmul"}
    # GPU time of the kernels is part of the profiled run's time
    assert 0 < sum(k["median_ms"] for k in ks) < kern["summary"]["median_ms"]
    assert (out / kern["trace"]).is_file()


def test_assemble_puts_gpu_kernels_into_the_dataset(measured, tmp_path):
    from pipelines.assemble import run_assemble
    from pipelines.dataset import load_dataset

    r = run_assemble(data_dir=measured, out_dir=tmp_path / "ds", progress=False)
    ds = load_dataset(tmp_path / "ds")
    s = ds.scenario(GPU16)
    assert (s.accelerator, s.precision, s.framework) == ("gpu", "fp16", "tflite") and pd_na(s.cores)
    assert s.gpu and "GPU accelerator" in s.description and "fp16 compute" in s.description
    (mid,) = ds.e2e.loc[ds.e2e["scenario_id"] == GPU16, "model_id"]
    assert ds.ops[ds.ops["scenario_id"] == GPU16].empty  # no op granularity on the GPU
    rec = json.loads((measured / "measurements" / "host" / GPU16 / f"{mid}.json").read_text())
    k = ds.kernels_for(GPU16, mid)
    assert r["kernels"] == len(k) == len(rec["kernel"]["kernels"])
    for row, e in zip(k.itertuples(), rec["kernel"]["kernels"]):
        cfg = json.loads(row.config)
        assert row.kernel_name == e["name"] and row.kernel_index == e["order"]
        assert row.kernel_type == "+".join([e["kernel_kind"], *e["fused"]])
        assert row.latency_ms == pytest.approx(e["median_ms"]) and cfg["timing"] == "gpu_timestamps"
        assert {c: cfg[c] for c in ("kind", "shader", "groups", "local_size", "kernel_kind", "fused")} == \
            {c: e[c] for c in ("kind", "shader", "groups", "local_size", "kernel_kind", "fused")}
        assert pd_na(row.op_index)
    copies = k[k["config"].map(lambda c: json.loads(c)["kind"] == "copy")]
    assert len(copies) >= 1 and set(copies["kernel_type"]) == {"copy"}
    assert set(k["kernel_type"].str.split("+").str[0]) <= KINDS
    text = (tmp_path / "ds" / "DATASET.md").read_text()
    assert "### GPU scenarios" in text and f"`{GPU16}`" in text
    assert "](gpu_kernel_kinds.png)" in text and (tmp_path / "ds" / "gpu_kernel_kinds.png").stat().st_size > 1000


def pd_na(v) -> bool:
    import pandas as pd

    return v is None or bool(pd.isna(v))


# ---------------------------------------------------------------- without a GPU
def test_no_gpu_is_recorded_as_not_offered(tmp_path, monkeypatch):
    """device.gpu null, and `auto` whose probe finds nothing: SCENARIO.json says why, nothing
    is measured (no models are needed for that). So does a grid that leaves the GPU out."""
    data = tmp_path / "data"
    _, cfg = params(data, "device.gpu=null")
    r = run_measure(cfg, "tflite", "fp16", None, accelerator="gpu", progress=False)
    assert r["status"] == "not_offered" and r["out"] == data / "measurements" / "host" / GPU16
    info = json.loads((r["out"] / "SCENARIO.json").read_text())
    assert info == {"status": "not_offered", "reason": "device host has no GPU: device.gpu is null",
                    "device": "host", "framework": "tflite", "precision": "fp16", "cores": None,
                    "accelerator": "gpu"}
    assert not [p for p in r["out"].iterdir() if p.name != "SCENARIO.json"]

    why = "no Vulkan device (driver manifests: none); scripts/setup.sh installs Mesa's lavapipe"
    monkeypatch.setattr(gpu, "probe", lambda: ([], why))
    _, cfg = params(data)
    assert cfg.device.gpu == "auto"
    r = run_measure(cfg, "tflite", "fp32", None, accelerator="gpu", progress=False)
    assert r["status"] == "not_offered" and r["scenario_id"] == "host-tflite-gpu-fp32"
    assert json.loads((r["out"] / "SCENARIO.json").read_text())["reason"] == f"device host has no GPU: {why}"

    _, cfg = params(data, "device.gpu=lavapipe", "scenario.accelerators=[cpu]")
    r = run_measure(cfg, "tflite", "fp16", None, accelerator="gpu", progress=False)
    assert r["status"] == "not_offered" and "leaves out gpu" in r["reason"]
    _, cfg = params(data, "device.gpu=lavapipe")
    r = run_measure(cfg, "tflite", "int8", None, accelerator="gpu", progress=False)
    assert r["status"] == "not_offered" and "int8 is CPU-only" in r["reason"]
    assert r["out"].name == "host-tflite-gpu-int8"
    r = run_measure(cfg, "pytorch", "fp32", None, accelerator="gpu", progress=False)
    assert r["status"] == "not_offered" and "no pytorch runner for the gpu" in r["reason"]
    with pytest.raises(ValueError, match="^cores: a CPU scenario needs a core set"):
        run_measure(cfg, "tflite", "fp32", None, progress=False)


def test_scenarios_lists_the_gpu_points(tmp_path, monkeypatch, capsys):
    from pipelines.cli import main

    raw, _ = params(tmp_path / "data", "device.gpu=lavapipe")
    p = tmp_path / "params.yaml"
    write_params(raw, p)
    assert main(["scenarios", "--params", str(p)]) == 0
    out = capsys.readouterr().out
    assert "host-tflite-gpu-fp16" in out and "host-tflite-gpu-fp32" in out and "gpu lavapipe" in out
    assert "not offered: host-pytorch-gpu: the suite has no pytorch runner for the gpu" in out
    raw["device"]["gpu"] = "auto"
    write_params(raw, p)
    monkeypatch.setattr(gpu, "probe", lambda: ([], "no Vulkan loader (libvulkan.so.1)"))
    assert main(["scenarios", "--params", str(p)]) == 0
    out = capsys.readouterr().out
    assert "host-tflite-gpu-fp16 " not in out
    assert "not offered: host-tflite-gpu-fp16: device host has no GPU: no Vulkan loader (libvulkan.so.1)" in out
    # a phone config cannot ask the host's probe about its GPU
    raw["device"].update(kind="adb", serial="x")
    write_params(raw, p)
    assert main(["measure", "--params", str(p), "--framework", "tflite", "--accelerator", "gpu", "--precision",
                 "fp16"]) == 2
    assert "device.gpu: auto probes the host only" in capsys.readouterr().err


# ---------------------------------------------------------------- the pure parts
def test_gpu_events_keep_their_identity_through_aggregation():
    """aggregate_events carries the layer's and pipelines.gpu.programs' fields of GPU commands, times
    them by their GPU durations and counts runs that ran another shader at a position."""
    runs = [{"run": 0}, {"run": 1}, {"run": 2}]
    def ev(run, order, shader, ns, **kw):
        return {"run": run, "order": order, "name": f"dawn_entry_point 8x4x1 #{shader[:8]}", "source": "gpu",
                "kind": "dispatch", "shader": shader, "groups": [1, 2, 1], "local_size": [8, 4, 1],
                "duration_ns": ns, "submission": 7 + run, "gpu_begin_ns": 1, **kw}
    labels = {"kernel_kind": "conv", "fused": ["bias", "clamp"], "program": 3}
    events = [ev(r, 0, "a" * 16, ns, **labels) for r, ns in ((0, 1_000_000), (1, 3_000_000), (2, 2_000_000))]
    events += [ev(0, 1, "b" * 16, 500), ev(1, 1, "b" * 16, 700), ev(2, 1, "c" * 16, 600)]
    events.append(ev(5, 0, "a" * 16, 9_999_999))  # a warm-up run: not aggregated
    first, second = aggregate_events(events, runs)
    assert {k: first[k] for k in ("kind", "kernel_kind", "fused", "program", "shader", "groups", "local_size")} == \
        {"kind": "dispatch", "kernel_kind": "conv", "fused": ["bias", "clamp"], "program": 3, "shader": "a" * 16,
         "groups": [1, 2, 1], "local_size": [8, 4, 1]}
    assert first["runs"] == 3 and first["median_ms"] == 2.0 and first["shader_mismatch"] == 0
    assert "submission" not in first and "gpu_begin_ns" not in first  # per-run details stay in the trace
    assert "kernel_kind" not in second and second["shader_mismatch"] == 1
    assert np.isclose(second["median_ms"], 0.0006)


def test_kernel_types_of_gpu_commands_and_the_runner_table():
    from pipelines.dataset.opfeatures import kernel_type

    assert kernel_type({"source": "gpu", "kind": "dispatch", "kernel_kind": "winograd_output",
                        "fused": ["bias", "clamp", "add"], "name": "dawn_entry_point 8x4x1 #1"}) == \
        "winograd_output+bias+clamp+add"
    assert kernel_type({"source": "gpu", "kind": "copy", "kernel_kind": "copy", "fused": [], "name": "copy"}) == "copy"
    # unlabelled records (made before pipelines/gpu/programs.py) keep the layer's command kind;
    # a USC-style name is never parsed for a host GPU command
    assert kernel_type({"source": "gpu", "kind": "dispatch", "name": "convolution_2d_1_linked_:_relu_2"}) == "dispatch"
    assert kernel_type({"source": "xnnpack", "name": "Convolution (NHWC, F32) IGEMM"}) == "convolution"
    assert RUNNERS[("tflite", "gpu")].granularities == ("e2e", "kernel")
    assert "op" in RUNNERS[("tflite", "gpu")].missing_granularities
    assert "kernel" in RUNNERS[("pytorch", "cpu")].missing_granularities
    assert set(RUNNERS[("tflite", "gpu")].formats.values()) == {"tflite_fp32"}
