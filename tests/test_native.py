"""The native runtime (native/, latbench-run) through its Python wrapper.

Tiny Keras conv nets (fp32 and full-integer int8) are converted to .tflite in a temporary
folder; every mode runs on each. Checked: op times sum to less than the run's own clock,
kernel events name real XNNPACK operators, every thread of the measuring process has
exactly the requested CPU set (read by the binary from /proc after the model is compiled
and again at the end, and independently from outside while it runs), records and the
Chrome trace round-trip, and bad input fails with one line and a distinct exit code.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pipelines.runners import litert as nr
from support.native import build_native

ROOT = Path(__file__).resolve().parents[1]
ALLOWED = sorted(os.sched_getaffinity(0))

# "Convolution (NHWC, F32) IGEMM", "Fully Connected (NC, QS8, QC8W) GEMM", "Add (ND)",
# "Static Reshape (NC)", "Mean (ND) Reduce2": XNNPACK's operator names.
XNN_NAME = re.compile(r"^[A-Z][A-Za-z0-9 ]*? \((?:N[A-Z]*|ND|NC)(?:, [A-Z0-9]+)*\)(?: [A-Za-z0-9 ]+)?$")
TFLITE_OP = re.compile(r"^[A-Z][A-Z0-9_]*$")


@pytest.fixture(scope="session")
def runner() -> Path:
    """Builds native/ (idempotent, quick when up to date) and returns the binary."""
    path = Path(build_native().strip().splitlines()[-1])
    assert path == nr.BINARY and path.is_file()
    return path


@pytest.fixture(scope="session")
def models(tmp_path_factory) -> dict[str, Path]:
    """A small conv net (conv, depthwise, 1x1, avg-pool, residual add, GAP, dense) as
    fp32 and as full-integer int8 .tflite."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    tf = pytest.importorskip("tensorflow")
    import numpy as np

    out = tmp_path_factory.mktemp("native-models")
    inp = tf.keras.Input((24, 24, 3), batch_size=1)
    x = tf.keras.layers.Conv2D(16, 3, padding="same", activation="relu")(inp)
    x = tf.keras.layers.DepthwiseConv2D(3, padding="same", activation="relu")(x)
    x = tf.keras.layers.Conv2D(24, 1, activation="relu")(x)
    x = tf.keras.layers.AveragePooling2D(2)(x)
    y = tf.keras.layers.Conv2D(24, 3, padding="same")(x)
    x = tf.keras.layers.Add()([x, y])
    x = tf.keras.layers.GlobalAveragePooling2D()(x)
    x = tf.keras.layers.Dense(10)(x)
    model = tf.keras.Model(inp, x)

    paths = {}
    conv = tf.lite.TFLiteConverter.from_keras_model(model)
    paths["fp32"] = out / "net_fp32.tflite"
    paths["fp32"].write_bytes(conv.convert())

    rng = np.random.default_rng(0)
    conv = tf.lite.TFLiteConverter.from_keras_model(model)
    conv.optimizations = [tf.lite.Optimize.DEFAULT]
    conv.representative_dataset = lambda: ([rng.random((1, 24, 24, 3), dtype=np.float32)] for _ in range(3))
    conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    conv.inference_input_type = tf.int8
    conv.inference_output_type = tf.int8
    paths["int8"] = out / "net_int8.tflite"
    paths["int8"].write_bytes(conv.convert())
    return paths


def _check_affinity(threads: list[dict], cpus: list[int]) -> None:
    assert threads, "no thread reported"
    for t in threads:
        assert t["cpus"] == cpus, f"thread {t} is not pinned to {cpus}"


def _check_common(run: nr.NativeRun, cpus: list[int], runs: int, warmup: int) -> None:
    meta, end = run.meta, run.end
    assert run.records[0]["type"] == "meta" and run.records[-1]["type"] == "end"
    assert meta["cpus"] == cpus
    assert meta["clock"] == "CLOCK_MONOTONIC"
    assert meta["runtime"] == "litert" and meta["runtime_version"] == nr.litert_version()
    assert Path(meta["library"]).name == "libLiteRt.so"
    assert meta["affinity_ok"] and end["affinity_ok"]
    _check_affinity(meta["thread_affinity"], cpus)
    _check_affinity(end["thread_affinity"], cpus)
    assert {"main", "writer"} <= {t["role"] for t in end["thread_affinity"]}
    assert len(run.runs) == runs
    assert [r["run"] for r in run.runs] == list(range(runs))
    assert len([r for r in run.of_type("run") if r["phase"] == "warmup"]) == warmup
    for r in run.runs:
        assert r["duration_ns"] > 0 and r["end_ns"] - r["start_ns"] == r["duration_ns"]
    starts = [r["start_ns"] for r in run.runs]
    assert starts == sorted(starts)


@pytest.mark.parametrize("precision", ["fp32", "int8"])
@pytest.mark.parametrize("mode", ["e2e", "op", "kernel"])
def test_modes(runner, models, precision, mode, tmp_path):
    cpus = ALLOWED[:2]
    runs, warmup = 8, 2
    run = nr.run_native(models[precision], cpus=cpus, threads=len(cpus), mode=mode, warmup=warmup,
                        runs=runs, precision=precision, records_path=tmp_path / "r.jsonl",
                        trace_path=tmp_path / "t.json")
    _check_common(run, cpus, runs, warmup)
    meta = run.meta
    assert meta["mode"] == mode and meta["precision"] == precision == meta["precision_detected"]
    assert meta["cpu_kernel_mode"] == ("builtin" if mode == "op" else "xnnpack")
    assert meta["model_ops"] >= 8
    dur = {r["run"]: r["duration_ns"] for r in run.runs}

    if mode == "e2e":
        assert not run.ops and not run.kernels and not meta["profiling"]
        return
    assert all(r["profiled"] for r in run.runs)
    if mode == "op":
        assert not run.kernels
        for i in range(runs):
            ops = [o for o in run.ops if o["run"] == i]
            # one event per TFLite node, every node once, in execution order
            assert sorted(o["node"] for o in ops) == list(range(meta["model_ops"]))
            assert [o["order"] for o in ops] == list(range(len(ops)))
            assert all(TFLITE_OP.match(o["name"]) for o in ops)
            assert sum(o["duration_ns"] for o in ops) < dur[i]
            for o in ops:  # inside the run, on the same clock
                assert run.runs[i]["start_ns"] - 1000 <= o["start_ns"] <= run.runs[i]["end_ns"]
        names = {o["name"] for o in run.ops}
        assert {"CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED"} <= names
    else:
        assert run.kernels
        for i in range(runs):
            ks = [k for k in run.kernels if k["run"] == i]
            assert [k["order"] for k in ks] == list(range(len(ks)))
            assert sum(k["duration_ns"] for k in ks) < dur[i]
            for k in ks:
                if k["source"] == "xnnpack":
                    assert XNN_NAME.match(k["name"]), k["name"]
                    assert "start_ns" not in k and k["partition"] >= 0 and k["index_in_partition"] >= 0
                else:  # a node XNNPACK did not take: a TFLite builtin kernel with its node
                    assert k["source"] == "builtin" and TFLITE_OP.match(k["name"])
                    assert k["node"] >= 0 and k["start_ns"] > 0
        xnn = [k["name"] for k in run.kernels if k["source"] == "xnnpack"]
        dtype = "F32" if precision == "fp32" else "QC8"
        assert any(n.startswith(f"Convolution (NHWC, {dtype})") for n in xnn), xnn
        assert any(n.startswith("Fully Connected (NC") for n in xnn), xnn
        assert all(o["node"] >= 0 for o in run.ops)  # only the builtin nodes appear as ops


def test_records_and_trace_round_trip(runner, models, tmp_path):
    rec, trace = tmp_path / "k.jsonl", tmp_path / "k.trace.json"
    run = nr.run_native(models["int8"], cpus=ALLOWED[:1], mode="kernel", warmup=1, runs=3,
                        overhead_pairs=3, records_path=rec, trace_path=trace)
    lines = [ln for ln in rec.read_text().splitlines() if ln]
    assert len(lines) == len(run.records)
    assert nr.read_records(rec) == run.records
    # the writer emits canonical compact JSON: parse -> dump reproduces each line exactly
    for line, r in zip(lines, run.records):
        if r["type"] in ("run", "op", "kernel", "runtime"):
            assert json.dumps(r, separators=(",", ":"), ensure_ascii=False) == line
    doc = json.loads(trace.read_text())
    events = doc["traceEvents"]
    tracks = {e["tid"]: e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    assert set(tracks.values()) == {"runs", "ops", "kernels", "runtime"}
    tid = {v: k for k, v in tracks.items()}
    xs = [e for e in events if e["ph"] == "X"]
    assert len([e for e in xs if e["tid"] == tid["runs"]]) == len(run.of_type("run"))
    assert len([e for e in xs if e["tid"] == tid["kernels"]]) == len(run.kernels)
    assert len([e for e in xs if e["tid"] == tid["ops"]]) == len(run.ops)
    for e in xs:
        assert e["dur"] >= 0 and isinstance(e["ts"], float)
    # kernels without a start time are laid out back to back inside their run
    for r in run.runs:
        ks = [e for e in xs if e["tid"] == tid["kernels"] and e["args"]["run"] == r["run"]]
        runs_x = [e for e in xs if e["tid"] == tid["runs"] and e["name"] == f"run {r['run']} (timed)"]
        assert len(runs_x) == 1 and ks
        run_start, run_end = runs_x[0]["ts"], runs_x[0]["ts"] + runs_x[0]["dur"]
        for e in ks:
            assert run_start - 1.0 <= e["ts"] and e["ts"] + e["dur"] <= run_end + 1.0
            if "partition" in e["args"]:
                assert "sequential" in e["args"]["start"]
    ov = run.overhead
    assert ov["pairs"] == 3 and ov["median_unprofiled_ns"] > 0 and ov["median_profiled_ns"] > 0
    assert 0.2 < ov["ratio"] < 10 and 0.2 < ov["median_recording_ratio"] < 10
    conds = [r["condition"] for r in run.of_type("run") if r["phase"] == "overhead"]
    assert sorted(conds) == sorted(["plain", "armed", "profiled"] * 3)


def test_e2e_overhead_compares_instrumented_runs_with_a_block(runner, models):
    """e2e mode's own cost: runs timed one by one (as the timed runs) against runs timed as one block."""
    run = nr.run_native(models["fp32"], cpus=ALLOWED[:1], mode="e2e", warmup=1, runs=2, overhead_pairs=4)
    ov = run.overhead
    assert ov["mode"] == "e2e" and ov["pairs"] == 4 and ov["runs_per_condition"] == 5
    assert ov["baseline"].startswith("block")
    conds = [r["condition"] for r in run.of_type("run") if r["phase"] == "overhead"]
    assert conds.count("instrumented") == 4 * 5 and conds.count("block") == 4
    blocks = [r["duration_ns"] for r in run.of_type("run") if r.get("condition") == "block"]
    assert min(blocks) // 5 <= ov["median_unprofiled_ns"] <= max(blocks) // 5 + 1  # per run of a block
    assert 0.2 < ov["ratio"] < 10


@pytest.mark.parametrize("mode", ["e2e", "kernel"])
def test_affinity_of_every_thread(runner, models, mode, tmp_path):
    """The binary's own report (meta/end) and an outside look at /proc/<pid>/task while it runs."""
    cpus = [ALLOWED[-1]]
    threads = 2  # more runtime threads than CPUs: the pool must still stay inside the set
    rec = tmp_path / "a.jsonl"
    argv = nr.build_argv(models["fp32"], records=rec, cpus=cpus, threads=threads, mode=mode, warmup=2,
                         runs=4000 if mode == "e2e" else 1500)
    proc = subprocess.Popen(argv, stderr=subprocess.PIPE, text=True)
    seen: dict[int, list[int]] = {}
    try:
        deadline = time.monotonic() + 20
        while proc.poll() is None and time.monotonic() < deadline:
            for tid in os.listdir(f"/proc/{proc.pid}/task") if os.path.isdir(f"/proc/{proc.pid}/task") else []:
                try:
                    status = Path(f"/proc/{proc.pid}/task/{tid}/status").read_text()
                except OSError:
                    continue
                m = re.search(r"^Cpus_allowed_list:\s*(\S+)", status, re.M)
                if m:
                    seen[int(tid)] = _parse_cpu_list(m.group(1))
            time.sleep(0.02)
    finally:
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    run = nr.NativeRun(records=nr.read_records(rec))
    _check_common(run, cpus, 4000 if mode == "e2e" else 1500, 2)
    roles = [t["role"] for t in run.meta["thread_affinity"]]
    assert roles.count("runtime") >= 1, "XNNPACK's pool thread is missing from the report"
    assert len(seen) >= 3, f"saw only {seen} from outside"
    for tid, got in seen.items():
        assert got == cpus, f"thread {tid} had CPU set {got}, expected {cpus}"


@pytest.mark.skipif(len(ALLOWED) < 2, reason="needs two CPUs this process may use")
@pytest.mark.parametrize("precision", ["fp32", "int8"])
def test_op_mode_computes_with_the_requested_threads(runner, models, precision, tmp_path):
    """Op mode runs LiteRT's builtin kernels: with --threads 2 their pool threads exist, run
    and stay inside the set; with --threads 1 there is none (before the "cpu_delegate"
    option they ran single-threaded whatever --threads said: main + writer only)."""
    cpus = ALLOWED[:2]
    two = nr.run_native(models[precision], cpus=cpus, threads=2, mode="op", warmup=2, runs=5)
    one = nr.run_native(models[precision], cpus=cpus, threads=1, mode="op", warmup=2, runs=5)
    pool = [t for t in two.end["thread_affinity"] if t["role"] == "runtime"]
    assert pool, f"no compute worker thread in a 2-thread op process: {two.end['thread_affinity']}"
    assert any(t["cpu_time_ns"] > 0 for t in pool) and two.end["runtime_threads_active"] >= 1
    _check_affinity(pool, cpus)
    assert two.end["compute_threads_observed"] == 1 + len(pool) >= 2
    assert one.end["compute_threads_observed"] == 1
    assert [t["role"] for t in one.end["thread_affinity"]].count("runtime") == 0


def _parse_cpu_list(s: str) -> list[int]:
    out: list[int] = []
    for part in s.split(","):
        a, _, b = part.partition("-")
        out += list(range(int(a), int(b or a) + 1))
    return out


def _raw(runner: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(runner), *args], capture_output=True, text=True)


def test_bad_input(runner, models, tmp_path):
    good = str(models["fp32"])
    rec = str(tmp_path / "x.jsonl")
    corrupt = tmp_path / "corrupt.tflite"
    corrupt.write_bytes(os.urandom(3000))
    truncated = tmp_path / "truncated.tflite"
    truncated.write_bytes(models["fp32"].read_bytes()[: models["fp32"].stat().st_size // 2])
    cases = [
        (["--model", str(tmp_path / "missing.tflite")], 3, "not found"),
        (["--model", str(corrupt)], 4, "not a valid .tflite"),
        (["--model", str(truncated)], 4, "not a valid .tflite"),
        (["--model", good, "--cpus", str(os.cpu_count())], 5, "does not exist"),
        (["--model", good, "--cpus", "4096"], 5, "no such CPU"),
        (["--model", good, "--precision", "int4"], 2, "unknown precision"),
        (["--model", good, "--precision", "int8"], 2, "does not match"),
        (["--model", good, "--mode", "layer"], 2, "unknown mode"),
        (["--model", good, "--runs", "0"], 2, "--runs"),
        (["--model", good, "--records", str(tmp_path / "no" / "such" / "dir.jsonl")], 7, "cannot write"),
    ]
    for args, code, text in cases:
        if "--records" not in args:
            args = [*args, "--records", rec]
        if "--runs" not in args:
            args = [*args, "--warmup", "0", "--runs", "1"]
        p = _raw(runner, *args)
        lines = p.stderr.splitlines()
        assert p.returncode == code, (args, p.returncode, p.stderr)
        assert len(lines) == 1 and lines[0].startswith("latbench-run: error: ") and text in lines[0], (args, lines)


def test_wrapper_errors(runner, models, tmp_path, monkeypatch):
    missing = tmp_path / "gone.tflite"
    with pytest.raises(nr.NativeRunError) as e:
        nr.run_native(missing, runs=1, warmup=0)
    assert e.value.kind == "model_missing" and str(missing) in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(nr.NativeRunError) as e:
        nr.run_native(models["fp32"], runs=1, warmup=0, precision="int4")
    assert e.value.kind == "usage" and str(models["fp32"]) in str(e.value)
    with pytest.raises(nr.NativeRunError) as e:
        nr.run_native(models["fp32"], runs=1, warmup=0, cpus=[4096])
    assert e.value.kind == "cpus" and str(models["fp32"]) in str(e.value)
    monkeypatch.setenv("LATBENCH_NATIVE_RUNNER", str(tmp_path / "nope" / "latbench-run"))
    with pytest.raises(nr.NativeNotBuiltError, match="scripts/setup.sh"):
        nr.run_native(models["fp32"])


def test_help_and_build_is_idempotent(runner):
    p = _raw(runner, "--help")
    assert p.returncode == 0
    for word in ("--cpus", "--threads", "--mode", "e2e|op|kernel", "--overhead-pairs", "Exit codes"):
        assert word in p.stdout
    t0 = time.monotonic()
    q = subprocess.run([str(ROOT / "native" / "build.sh")], capture_output=True, text=True)
    assert q.returncode == 0 and q.stdout.strip() == str(runner)
    assert time.monotonic() - t0 < 10
