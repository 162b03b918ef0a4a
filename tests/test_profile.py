"""`latbench profile` (pipelines/profile.py): a user's model file through the measure stage's
instrument on the host CPU and GPU and on a phone (the suite's adbd emulator), a Keras-style
file with a free batch dimension, and one-line errors for what cannot be profiled."""
from __future__ import annotations

import copy
import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from pipelines.profile import ProfileError, ProfileRequest, model_id_of, run_profile, static_tflite, summary_lines
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
    assert p.reused is None and "reused" not in text
    # the same file again resumes: nothing is measured twice, and the report says so
    rec_path = p.out / f"{r['model_id']}.json"
    written = rec_path.stat().st_mtime_ns
    again = run_profile(cfg, ProfileRequest(dynamic_tflite, out=tmp_path / "out"), progress=False,
                        on_process=lambda *a: seen.append(a))
    assert len(seen) == 2 and again.record["e2e"]["samples_ns"] == r["e2e"]["samples_ns"]
    assert rec_path.stat().st_mtime_ns == written and again.reused
    assert re.search(rf"^reused the stored record from \d{{4}}-\d\d-\d\d \d\d:\d\d:\d\d \({re.escape(str(rec_path))}, "
                     r"kept with the load check off\); measure anew with --fresh$",
                     "\n".join(summary_lines(again)), re.MULTILINE)
    # --fresh removes the stored record and traces and measures anew
    fresh = run_profile(cfg, ProfileRequest(dynamic_tflite, out=tmp_path / "out", fresh=True), progress=False,
                        on_process=lambda *a: seen.append(a))
    assert len(seen) == 4 and fresh.reused is None and "reused" not in "\n".join(summary_lines(fresh))
    assert rec_path.stat().st_mtime_ns != written
    assert fresh.record["e2e"]["start_ns"] != r["e2e"]["start_ns"] and fresh.record["e2e"]["samples_ns"] != r["e2e"]["samples_ns"]
    assert fresh.trace("op").is_file() and fresh.trace("kernel").is_file()


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
    assert p.release is None and "release:" not in "\n".join(summary_lines(p))  # the host release: CPU only


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
        text = "\n".join(summary_lines(p))
        assert "load and speed probe: not read (load is read on the host only" in text
        assert p.release is None and "release:" not in text  # the host release says nothing of a phone
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


# ---------------------------------------------------------------- an honest report
def test_median_interval_exists_however_few_processes_ran():
    """pipelines/stats.py median_interval: the distribution-free CI of the process medians with
    enough processes, a t-interval with 2 to 5, a seeded bootstrap over one process's runs."""
    from scipy.stats import t as student_t

    from pipelines.stats import median_ci, median_interval

    rng = np.random.default_rng(1)
    procs = [list(1e6 * (1 + 0.05 * k) + rng.normal(0, 2e4, 30)) for k in range(7)]
    seven = median_interval(procs)
    medians = np.array([np.median(p) for p in procs]) / 1e6
    assert seven["kind"] == "order-statistic" and (seven["low_ms"], seven["high_ms"]) == pytest.approx(median_ci(medians)[:2])
    two = median_interval(procs[:2])
    half = student_t.ppf(0.975, 1) * medians[:2].std(ddof=1) / math.sqrt(2)
    assert two["kind"] == "t" and two["processes"] == 2 and two["runs"] == 60
    assert math.isclose(two["low_ms"], max(medians[:2].mean() - half, 0.0)) and two["low_ms"] >= 0
    assert math.isclose(two["high_ms"], medians[:2].mean() + half)
    one = median_interval(procs[:1])
    assert one["kind"] == "bootstrap" and one["low_ms"] <= medians[0] <= one["high_ms"] < medians[1]
    assert one == median_interval(procs[:1])  # seeded: the same runs give the same interval
    assert median_interval([[5e6]])["low_ms"] == median_interval([[5e6]])["high_ms"] == 5.0  # one run: no spread
    with pytest.raises(ValueError, match="level"):
        median_interval(procs, level=1.5)


def _one_process(cfg):
    c = copy.deepcopy(cfg)
    c.measure.processes = c.measure.stopping.max_processes = 1
    return c


def test_the_interval_is_printed_with_one_and_with_two_processes(cfg, dynamic_tflite, tmp_path):
    """Two processes are too few for the distribution-free interval (6 at 95%): a t-interval over
    their medians; one process: a bootstrap over its runs, said to cover within-process noise only."""
    two = run_profile(cfg, ProfileRequest(dynamic_tflite, out=tmp_path / "two"), progress=False)
    assert two.record["e2e"]["processes"] == 2 and math.isnan(two.record["e2e"]["medians_ci_low_ms"])
    text = "\n".join(summary_lines(two))
    m = re.search(r"^e2e  median (\S+) ms, 95% interval (\S+)-(\S+) ms \(t-interval over the 2 process medians; "
                  r"the distribution-free one needs 6 processes\)$", text, re.MULTILINE)
    assert m and float(m.group(2)) <= float(m.group(1)) <= float(m.group(3)), text
    assert "nan" not in text.lower()
    one = run_profile(_one_process(cfg), ProfileRequest(dynamic_tflite, out=tmp_path / "one"), progress=False)
    assert one.record["e2e"]["processes"] == 1
    text = "\n".join(summary_lines(one))
    runs = one.record["e2e"]["n"]
    m = re.search(rf"^e2e  median (\S+) ms, 95% interval (\S+)-(\S+) ms \(bootstrap over the {runs} runs of 1 process: "
                  r"within-process noise only, the drift between processes is not in it", text, re.MULTILINE)
    assert m and float(m.group(2)) <= float(m.group(1)) <= float(m.group(3)), text
    assert "nan" not in text.lower()


def test_the_probe_reading_and_the_release_machine_are_printed(cfg, dynamic_tflite, tmp_path):
    """The probe's slow-down over the kept processes and its reference; on the host CPU, this
    machine's probe readings against the release's probe_reference_s, said plainly when slower."""
    from pipelines.profile import release_line

    p = run_profile(cfg, ProfileRequest(dynamic_tflite, out=tmp_path / "o"), progress=False)
    text = "\n".join(summary_lines(p))
    cpu = p.record["scenario"]["cpus"][0]
    assert re.search(rf"^probe: over the 4 kept processes the pinned cores ran the speed probe a median \d+% and at "
                     rf"most \d+% slower than their fastest \(reference CPU {cpu} \d\.\d{{3}} ms\); no limit "
                     r"\(measure\.load\.max_slowdown: null\)$", text, re.MULTILINE), text
    assert re.search(r"^load: other processes used at most \d+% of the pinned cores \(limit 15%", text, re.MULTILINE)
    assert p.release["label"] == "datasets/host-v1" and p.release["processors"] == ["AMD EPYC"]
    assert re.search(rf"^release: the speed probe here \(median of 8 readings around the kept processes\) against "
                     rf"datasets/host-v1's reference: CPU {cpu} \d\.\d{{3}} ms vs 0\.650 ms \(\d\.\d\dx\): ", text, re.MULTILINE)
    readings = [v for x in [*(pp["load"] for pp in p.record["e2e"]["per_process"]), p.record["op"]["load"],
                            p.record["kernel"]["load"]] for side in ("before_s", "after_s") for v in x["probe"][side].values()]
    here = float(np.median(readings))
    # a release machine twice as fast as this one: host predictions read fast here
    slower = release_line(p.record, {**p.release, "probe_reference_s": {str(cpu): here / 2}})
    assert "(2.00x): this machine reads 100% slower than the release's machine, AMD EPYC, so host predictions " \
           "(latbench predict), priced on that machine, read fast here" in slower
    faster = release_line(p.record, {**p.release, "probe_reference_s": {str(cpu): here * 2}})
    assert "(0.50x): this machine reads 50% faster than the release's machine" in faster and "read slow here" in faster
    same = release_line(p.record, {**p.release, "probe_reference_s": {str(cpu): here}})
    assert "(1.00x): as fast as the release's machine, AMD EPYC, within 10%" in same
    other = release_line(p.record, {**p.release, "probe_reference_s": {str(cpu + 1): here}})
    assert other == f"release: datasets/host-v1 has no probe reference for CPU(s) {cpu}"
    assert release_line(p.record, None) is None


def test_a_slow_core_is_measured_again_then_refused_unless_load_is_allowed(cfg, dynamic_tflite, tmp_path, monkeypatch):
    """The measure stage's load check (measure.load): a reference no real probe can reach (as if
    the core had once been far faster, test_measure.py's mechanism) makes every process read as
    taken in a slow episode: it is measured again, then the profile is refused in one line naming
    the file, what was seen and what to do, and nothing is kept. --allow-load keeps the numbers,
    with the probe's reading and a warning; a rerun reuses that record and says it was unchecked."""
    from pipelines import speed_probe
    from pipelines.measure import observe

    monkeypatch.setattr(observe, "SPEED_POLL_S", 0.01)  # the stage's wait for an episode to pass polls quickly
    c = copy.deepcopy(cfg)
    load = c.measure.load
    load.check, load.retries, load.wait_s, load.max_slowdown, load.speed_wait_s = True, 1, 0.05, 0.5, 0.3
    load.max_foreign_busy = load.max_steal = 1.0  # only the probe judges: the shared machine's load does not
    cpu = min(os.sched_getaffinity(0))  # 1large is the first allowed CPU
    impossible = speed_probe.SpeedProbe([cpu])
    for _ in range(speed_probe.WINDOW):
        impossible.observe({cpu: 1e-7})
    impossible.calibrated = True
    monkeypatch.setitem(speed_probe._PROBES, (cpu,), impossible)
    out = tmp_path / "o"
    with pytest.raises(ProfileError) as info:
        run_profile(c, ProfileRequest(dynamic_tflite, out=out), progress=False)
    msg = str(info.value)
    assert "\n" not in msg and re.fullmatch(
        rf"{re.escape(str(dynamic_tflite))}: refused: the e2e process was taken under load 2 times, last: CPUs \[{cpu}\] "
        r"ran the speed probe \d+% slower than their fastest \(limit 50%\): a slow episode of the machine "
        r"\(measure\.load\.retries 1\); close other programs and profile again, or pass --allow-load to keep the "
        r"numbers with a warning", msg), msg
    sc = out / "host-tflite-cpu-1large-fp32"
    mid = model_id_of(dynamic_tflite)
    assert not (sc / f"{mid}.json").exists() and json.loads((sc / f"{mid}.error.json").read_text())["kind"] == "loaded"
    log = (sc / "measure.log").read_text()
    assert log.count("loaded ") == 2  # measured again once, then refused
    assert log.count("slow: measuring anyway") == 2  # before each, it waited (0.3 s) for the episode to pass

    p = run_profile(c, ProfileRequest(dynamic_tflite, out=out, allow_load=True), progress=False)
    assert p.record["load"]["check"]["check"] is False and p.record["load"]["max_probe_slowdown"] > 0.5
    text = "\n".join(summary_lines(p))
    assert re.search(r"^probe: over the 4 kept processes the pinned cores ran the speed probe a median \d+% and at most "
                     r"\d+% slower than their fastest .*; limit 50% \(measure\.load\.max_slowdown\)$", text, re.MULTILINE), text
    assert re.search(r"^load check off \(--allow-load, or measure\.load\.check: false\): 4 of 4 kept processes would "
                     rf"have been measured again, e\.g\. CPUs \[{cpu}\] ran the speed probe .*: these times are slower than a quiet machine's$", text, re.MULTILINE)
    again = run_profile(c, ProfileRequest(dynamic_tflite, out=out), progress=False)  # the check on: reused, said so
    assert again.reused and ", kept with the load check off); measure anew with --fresh" in "\n".join(summary_lines(again))


def test_the_command_line_says_what_it_reused(dynamic_tflite, tmp_path, capsys):
    from pipelines.cli import main

    args = ["profile", str(dynamic_tflite), "--out", str(tmp_path / "o"), "--params", str(tmp_path / "none.yaml"),
            "--quiet", "--allow-load"]
    assert main(args) == 0
    first = capsys.readouterr().out
    assert "95% interval" in first and "probe: over the" in first and "reused" not in first
    assert main(args) == 0
    assert "measure anew with --fresh" in capsys.readouterr().out
    assert main([*args, "--fresh"]) == 0
    assert "reused" not in capsys.readouterr().out
    assert main([*args, "--framework", "all"]) == 2
    assert "latbench: error: --allow-load: not taken with --framework" in capsys.readouterr().err
