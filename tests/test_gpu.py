"""GPU scenarios without a GPU: LiteRT's WebGPU accelerator on Mesa's lavapipe, kernel
records from the Vulkan timestamp layer, and nnPerf's clock synchronization (its own tests,
synthetic and real streams, are in tests/test_clocksync.py).

The tests that run a model on the GPU skip, saying why, when this machine has no Vulkan
device (scripts/setup.sh installs one: docs/gpu.md).
"""
from __future__ import annotations

import json
import os
import subprocess

import numpy as np

from pipelines import gpu
from pipelines.runners import litert as nr



# ---------------------------------------------------------------- the runtime on the GPU
def _outputs(model, accelerator, precision, tmp_path) -> np.ndarray:
    out = tmp_path / f"out-{accelerator}-{precision}.bin"
    nr.run_native(model, accelerator=accelerator, precision=precision if accelerator == "gpu" else None,
                  warmup=1, runs=2, extra_args=["--dump-outputs", str(out)], timeout=300)
    return np.fromfile(out, dtype=np.float32)


def test_gpu_fp32_matches_cpu(needs_gpu, tiny_gpu_model, tmp_path):
    cpu = _outputs(tiny_gpu_model, "cpu", "fp32", tmp_path)
    fp32 = _outputs(tiny_gpu_model, "gpu", "fp32", tmp_path)
    fp16 = _outputs(tiny_gpu_model, "gpu", "fp16", tmp_path)
    assert cpu.shape == fp32.shape == (10,)
    assert np.abs(fp32 - cpu).max() <= 1e-6
    # fp16 compute really is fp16: close, but not bit-equal
    assert 0 < np.abs(fp16 - cpu).max() < 1e-2


def test_gpu_e2e_records(needs_gpu, tiny_gpu_model, tmp_path):
    run = nr.run_native(tiny_gpu_model, accelerator="gpu", precision="fp16", warmup=2, runs=5,
                        records_path=tmp_path / "e2e.jsonl", timeout=300)
    meta = run.meta
    assert meta["accelerator"] == "gpu" and meta["fully_accelerated"] is True
    assert meta["gpu"]["precision"] == "fp16" and meta["gpu"]["device"]
    assert meta["gpu"]["kernel_timing"] is False
    assert len(run.runs) == 5 and all(r["duration_ns"] > 0 for r in run.runs)
    assert not run.kernels


def test_gpu_kernel_records_and_sync(needs_gpu, tiny_gpu_model, tmp_path):
    trace = tmp_path / "k.trace.json"
    run = nr.run_native(tiny_gpu_model, accelerator="gpu", precision="fp32", mode="kernel", warmup=2, runs=6,
                        records_path=tmp_path / "k.jsonl", trace_path=trace, timeout=300)
    g = run.meta["gpu"]
    assert g["kernel_timing"] and g["layer_active"] and g["sync"]["injected"] == 3
    by_run = gpu.kernels_by_run(run)
    assert sorted(by_run) == [r["run"] for r in run.runs]
    n_ops = run.meta["model_ops"]
    # the sync's own stated uncertainty (its 2-sigma band at the end): under CI's load one kernel
    # was mapped 63 us past its run's end, a run of ~3 ms
    tol = run.end["gpu"]["sync"]["sigma_ns"]
    sequences = set()
    for r in run.runs:
        ks = by_run[r["run"]]
        disp = gpu.dispatches(ks)
        # fusion: at most one dispatch per TFLite op, plus the layout conversions of the
        # input and output; and every op is computed by at least one of them
        assert 3 <= len(disp) <= n_ops + 2, [k["name"] for k in disp]
        sequences.add(tuple(k["shader"] for k in disp))
        assert all(k["entry"] and k["shader_words"] > 0 and min(k["local_size"]) >= 1 for k in disp)
        # kernel GPU time is part of the run
        assert sum(k["duration_ns"] for k in ks) < r["duration_ns"]
        # synchronized onto the host clock: inside the run (to within the sync's sigma), ordered,
        # not overlapping
        for k in ks:
            assert k["start_ns"] <= k["end_ns"], k
            assert r["start_ns"] - tol <= k["start_ns"] and k["end_ns"] <= r["end_ns"] + tol, \
                (k["start_ns"] - r["start_ns"], r["end_ns"] - k["end_ns"], tol, run.end["gpu"]["sync"])
            assert k["in_run"] is True
        for a, b in zip(ks, ks[1:]):
            assert a["end_ns"] <= b["start_ns"]
    assert len(sequences) == 1, "the same model ran different kernels in different runs"
    end = run.end["gpu"]
    assert end["dropped"] == 0 and end["kernels_recorded"] == len(gpu.gpu_kernels(run))
    # every pair of an idle GPU is tested; in 8 runs on a loaded host all may be rejected
    # against the injected pairs' sigma before its first renewal (k = 8 pairs): the fit
    # then stays the injector's, which the kernels above were mapped with
    sync = end["sync"]
    assert sync["observed"] > 0 and sync["accepted"] + sync["rejected"] == sync["observed"]
    # the trace: valid JSON, a "gpu" track holding one event per kernel
    events = json.loads(trace.read_text())["traceEvents"]
    gpu_tid = next(e["tid"] for e in events if e.get("name") == "thread_name" and e["args"]["name"] == "gpu")
    assert sum(1 for e in events if e.get("ph") == "X" and e.get("tid") == gpu_tid) == len(gpu.gpu_kernels(run))


def test_gpu_errors_are_one_line(native_built, tiny_gpu_model, tmp_path):
    env = dict(os.environ, VK_ICD_FILENAMES=str(tmp_path / "none.json"), VK_DRIVER_FILES=str(tmp_path / "none.json"))
    argv = nr.build_argv(tiny_gpu_model, records=tmp_path / "r.jsonl", accelerator="gpu", runs=1, warmup=0)
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 6
    assert "no Vulkan device" in proc.stderr.strip().splitlines()[-1]
    for extra, what in ((["--mode", "op"], "op-level"), (["--precision", "int8"], "int8")):
        proc = subprocess.run(argv + extra, capture_output=True, text=True, timeout=60)
        assert proc.returncode == 2 and what in proc.stderr, proc.stderr


def test_host_device_runs_a_gpu_scenario(needs_gpu, tiny_gpu_model, tmp_path):
    """device.gpu set -> the grid offers GPU scenarios -> HostDevice.run measures one."""
    from pipelines.devices import HostDevice, make_device
    from pipelines.scenarios import ScenarioGridConfig, expand_grid

    dev = make_device({"kind": "host", "name": "host", "gpu": "lavapipe"})
    assert isinstance(dev, HostDevice) and dev.gpu == "lavapipe"
    grid = ScenarioGridConfig(accelerators=["cpu", "gpu"], precisions=["fp32", "fp16", "int8"], cores=["1large"])
    scenarios = expand_grid(dev.clusters(), grid, device=dev.name, gpu=dev.gpu)
    gpu_ids = sorted(s.scenario_id for s in scenarios if s.accelerator == "gpu")
    assert gpu_ids == ["host-tflite-gpu-fp16", "host-tflite-gpu-fp32"]
    sc = next(s for s in scenarios if s.scenario_id == "host-tflite-gpu-fp16")
    run = dev.run("tflite", tiny_gpu_model, scenario=sc, mode="e2e", warmup=1, runs=3, records_path=tmp_path / "r.jsonl",
                  timeout=300)
    assert run.meta["accelerator"] == "gpu" and run.meta["gpu"]["precision"] == "fp16"
    assert len(run.runs) == 3


# ---------------------------------------------------------------- the GPU-path probe
def test_the_probe_runs_a_model_on_the_gpu_not_just_finds_a_vulkan_device(tmp_path, native_built):
    """A Vulkan device that LiteRT's accelerator cannot use (Debian's own Mesa 22.3) must count as
    no GPU: the probe's last step is a real compile-and-run, and its failure is the reason."""
    bad = tmp_path / "not-a-model.tflite"
    bad.write_bytes(b"\0" * 64)
    why = gpu.smoke_run(bad)
    assert why is not None and why.startswith("the GPU path cannot run a tiny model: ") and str(bad) in why
    assert "\n" not in why
    devices, reason = gpu.probe()
    if devices and reason is None:  # where the probe says yes, its own model runs on the GPU
        assert gpu.PROBE_MODEL.is_file()
        run = nr.run_native(gpu.PROBE_MODEL, accelerator="gpu", precision="fp32", warmup=0, runs=2, timeout=120)
        assert len(run.runs) == 2 and run.meta["gpu"]["validation"]["ok"]
