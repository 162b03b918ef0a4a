"""`latbench profile` (pipelines/profile.py): a user's model file through the measure stage's
instrument on the host CPU and GPU and on a phone (the suite's adbd emulator), a Keras-style
file with a free batch dimension, and one-line errors for what cannot be profiled."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pipelines.profile import ProfileError, ProfileRequest, run_profile, static_tflite, summary_lines
from support.profiles import quick_cfg, tiny_conv_net

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))


@pytest.fixture(scope="module")
def cfg():
    return quick_cfg()


@pytest.fixture(scope="module")
def dynamic_tflite(tmp_path_factory) -> Path:
    """A Keras model converted the usual way: its batch dimension is None (-1 in the file)."""
    out = tmp_path_factory.mktemp("keras") / "keras_dyn.tflite"
    code = ("import tensorflow as tf, sys\n"
            "m = tf.keras.Sequential([tf.keras.Input((16, 16, 3)), tf.keras.layers.Conv2D(8, 3, activation='relu'),"
            " tf.keras.layers.GlobalAveragePooling2D(), tf.keras.layers.Dense(10)])\n"
            "open(sys.argv[1], 'wb').write(tf.lite.TFLiteConverter.from_keras_model(m).convert())\n")
    subprocess.run([sys.executable, "-c", code, str(out)], check=True, capture_output=True,
                   env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    return out


@pytest.fixture(scope="module")
def torchscript(tmp_path_factory) -> Path:
    import torch

    out = tmp_path_factory.mktemp("ts") / "tiny.pt"
    torch.jit.trace(tiny_conv_net(), torch.randn(1, 3, 16, 16)).save(str(out))
    return out


def test_free_batch_dimension_resolves_to_one_and_runs(dynamic_tflite, tmp_path, native_built):
    from ai_edge_litert.tools import flatbuffer_utils

    sig = flatbuffer_utils.read_model(str(dynamic_tflite)).subgraphs[0].tensors
    assert any(t.shapeSignature is not None and -1 in list(t.shapeSignature) for t in sig)
    # the runtime refuses the file as it is (what a user hits with latbench-run)
    bare = subprocess.run([str(native_built), "--model", str(dynamic_tflite), "--runs", "1", "--records",
                           str(tmp_path / "r.jsonl")], capture_output=True, text=True)
    assert bare.returncode != 0 and "tensor buffer" in bare.stderr
    fixed, note = static_tflite(dynamic_tflite, tmp_path / "static.tflite")
    assert fixed != dynamic_tflite and "-1x16x16x3 -> 1x16x16x3" in note
    tensors = flatbuffer_utils.read_model(str(fixed)).subgraphs[0].tensors
    assert not any(t.shapeSignature is not None and -1 in list(t.shapeSignature) for t in tensors)
    ok = subprocess.run([str(native_built), "--model", str(fixed), "--runs", "1", "--records", str(tmp_path / "r.jsonl")],
                        capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    # a batch of 4 propagates through the graph: the output is 4x10
    b4, _ = static_tflite(dynamic_tflite, tmp_path / "b4.tflite", [4, 16, 16, 3])
    from ai_edge_litert.interpreter import Interpreter

    it = Interpreter(model_path=str(b4))
    it.allocate_tensors()
    assert list(it.get_output_details()[0]["shape"]) == [4, 10]
    with pytest.raises(ProfileError, match=r"--shape 1x3x3 does not fit input .* of shape -1x16x16x3"):
        static_tflite(dynamic_tflite, tmp_path / "bad.tflite", [1, 3, 3])


def test_profile_tflite_on_the_host(cfg, dynamic_tflite, tmp_path, native_built):
    seen = []
    p = run_profile(cfg, ProfileRequest(dynamic_tflite, out=tmp_path / "out"), progress=False,
                    on_process=lambda sid, k, proc: seen.append((sid, k, len(proc["samples_ns"]))))
    assert p.scenario_id == "host-tflite-cpu-1large-fp32"
    assert [(s, k) for s, k, _ in seen] == [(p.scenario_id, 0), (p.scenario_id, 1)]  # the live view saw each process
    r = p.record
    assert r["source"] == "profile" and r["e2e"]["latency_ms"] > 0 and r["e2e"]["processes"] == 2
    assert [o["name"] for o in r["op"]["ops"]] == ["CONV_2D", "MEAN", "FULLY_CONNECTED"]
    assert any("Convolution" in k["name"] for k in r["kernel"]["kernels"])
    for mode in ("op", "kernel"):
        trace = json.loads(p.trace(mode).read_text())
        assert trace["traceEvents"]
    text = "\n".join(summary_lines(p))
    assert "top ops (3 in the op process" in text and "CONV_2D" in text and "outside any op" in text
    assert "top kernels" in text and "trace (op):" in text and "-1x16x16x3 -> 1x16x16x3" in text
    src = json.loads((p.out / "source.json").read_text())
    assert src["model_file"] == str(dynamic_tflite.resolve()) and src["model_id"] == r["model_id"]
    # the same file again resumes: nothing is measured twice
    again = run_profile(cfg, ProfileRequest(dynamic_tflite, out=tmp_path / "out"), progress=False,
                        on_process=lambda *a: seen.append(a))
    assert len(seen) == 2 and again.record["e2e"]["samples_ns"] == r["e2e"]["samples_ns"]


def test_profile_torchscript_needs_a_shape_and_reports_ops(cfg, torchscript, tmp_path):
    with pytest.raises(ProfileError, match=r"tiny.pt: a TorchScript file does not say its input shape: pass --shape"):
        run_profile(cfg, ProfileRequest(torchscript, out=tmp_path / "o"), progress=False)
    p = run_profile(cfg, ProfileRequest(torchscript, shape=[1, 3, 16, 16], out=tmp_path / "o"), progress=False)
    assert p.scenario_id == "host-pytorch-cpu-1large-fp32"
    names = [o["name"] for o in p.record["op"]["ops"]]
    assert "aten::_convolution" in names and "aten::linear" in names
    text = "\n".join(summary_lines(p))
    assert "kernels: not offered here: torch.profiler reports operators" in text


def test_profile_on_the_host_gpu(cfg, dynamic_tflite, tmp_path, needs_gpu):
    p = run_profile(cfg, ProfileRequest(dynamic_tflite, device="gpu", out=tmp_path / "g"), progress=False)
    assert p.scenario_id == "host-tflite-gpu-fp32"
    kernels = p.record["kernel"]["kernels"]
    assert kernels and all(k["source"] == "gpu" for k in kernels)
    assert "ops: not offered here" in "\n".join(summary_lines(p))


def test_profile_on_a_phone_over_adb(cfg, tmp_path, tmp_path_factory, native_built):
    """The same command through adb: the real adb server and client, the emulator as the phone."""
    from adbd_emulator import AdbServer, EmulatorProcess, exported_models, model_files
    from pipelines.devices import make_device

    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("the emulated phone needs two CPUs of this machine (a small and a large cluster)")
    model = model_files(exported_models(tmp_path_factory))[0]
    server = AdbServer().start()
    emu = EmulatorProcess(tmp_path / "phone").start()
    try:
        dev = make_device({"kind": "adb", "name": "pixel4", "serial": emu.serial, "adb_server": server.address})
        p = run_profile(cfg, ProfileRequest(model, device=emu.serial, adb_server=server.address, out=tmp_path / "a"),
                        device=dev, progress=False)
        assert p.scenario_id == "pixel4-tflite-cpu-1large-fp32"
        assert p.record["runtime"]["device"]["model"] == "Pixel 4" and p.record["op"]["ops"]
        assert not (emu.root / "data/local/tmp/latbench").exists()  # the phone is left clean
    finally:
        emu.kill()
        server.stop()


def test_one_line_errors(cfg, tmp_path):
    from pipelines.cli import main

    keras = tmp_path / "m.h5"
    keras.write_bytes(b"x")
    with pytest.raises(ProfileError, match=r"m.h5: unknown model kind '.h5' \(profile takes .tflite, .pt, .ptl, .*\.onnx"):
        run_profile(cfg, ProfileRequest(keras), progress=False)
    onnx = tmp_path / "m.onnx"
    onnx.write_bytes(b"x" * 10)
    with pytest.raises(ProfileError, match=r"m.onnx: .*ONNX") as info:
        run_profile(cfg, ProfileRequest(onnx, out=tmp_path / "o"), progress=False)
    assert "\n" not in str(info.value)
    junk = tmp_path / "junk.tflite"
    junk.write_bytes(b"not a flatbuffer")
    with pytest.raises(ProfileError, match=r"junk.tflite: not a TFLite flatbuffer"):
        run_profile(cfg, ProfileRequest(junk, out=tmp_path / "j"), progress=False)
    with pytest.raises(ProfileError, match=r"--device: expected host, gpu or an adb serial"):
        run_profile(cfg, ProfileRequest(junk, device="a phone"), progress=False)
    assert main(["profile", str(tmp_path / "none.tflite")]) == 2
    assert main(["profile", str(junk), "--shape", "1xqx3"]) == 2
