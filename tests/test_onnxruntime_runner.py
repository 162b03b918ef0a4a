"""The ONNX Runtime runner (pipelines/runners/onnxruntime.py on the shared worker, worker.py).

A tiny IR network (input [1,3,32,32], conv_bn_act, inverted_residual, classifier) is exported
as ONNX fp32 and int8 and run through the real worker in fresh processes. Checked: the records
follow the latbench-run schema, op mode names every node ORT ran with its execution provider,
its op events lie inside their run's window on CLOCK_MONOTONIC and the profiler's overhead is
measured against a plain session, the Chrome trace has the native tracks, a process pinned to
one core computes on one thread and on two cores on two, bad input fails with one line naming
the model, and the measure stage measures an exported network at onnxruntime-cpu-1large-fp32.
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import warnings
from pathlib import Path

import pandas as pd
import pytest

from generators import blocks as B
from generators.ir import Graph
from pipelines.runners import onnxruntime as ortr
from pipelines.runners import runner_for
from pipelines.runners.onnxruntime import OrtRunError, run_onnxruntime
from pipelines.runners.records import read_records
from support.worker_records import check_run_records

ROOT = Path(__file__).resolve().parents[1]
ALLOWED = sorted(os.sched_getaffinity(0))
SHAPE = [1, 3, 32, 32]
SLACK_NS = 1_000  # the profiler stamps whole microseconds: an op may start up to 1 us before its truncated stamp


def tiny_graph() -> Graph:
    g = Graph(name="ort-runner-tiny", source="test")
    x = g.input(SHAPE)
    x = B.conv_bn_act(g, x, 16, 3, stride=2, act="relu")
    x = B.inverted_residual(g, x, 16, expansion=2)
    x = B.classifier(g, x, num_classes=10)
    return g.set_outputs(x).validate()


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory) -> dict[str, Path]:
    from generators.export.onnx import export_onnx

    out = tmp_path_factory.mktemp("ort-artifacts")
    g = tiny_graph()
    return {p: Path(export_onnx(g, out / f"onnx_{p}.onnx", p)["path"]) for p in ("fp32", "int8")}


def run(model, **kw):
    kw.setdefault("timeout", 120)
    return run_onnxruntime(model, **kw)


def check_schema(res, runs: int, warmup: int) -> None:
    check_run_records(res, runs, warmup)
    meta = res.meta
    assert meta["tool"] == "latbench-onnxruntime" and meta["framework"] == "onnxruntime"
    assert meta["runtime"] == "onnxruntime" and meta["runtime_version"].startswith("1.31.")
    assert meta["execution_providers"] == ["CPUExecutionProvider"] and meta["interop_threads"] == 1
    so = meta["session_options"]
    assert so["graph_optimization_level"] == "ORT_ENABLE_ALL" and so["execution_mode"] == "ORT_SEQUENTIAL"
    assert so["inter_op_num_threads"] == 1 and so["intra_op_num_threads"] == meta["threads"]
    assert meta["input_shapes"] == [SHAPE] and meta["clock"] == "CLOCK_MONOTONIC"


@pytest.fixture(scope="module")
def op_runs(artifacts, tmp_path_factory) -> dict[str, object]:
    tmp = tmp_path_factory.mktemp("ort-op-runs")
    return {p: run(artifacts[p], cpus=ALLOWED[:1], threads=1, mode="op", warmup=2, runs=6, overhead_pairs=3,
                   records_path=tmp / f"{p}.jsonl", trace_path=tmp / f"{p}.trace.json") for p in artifacts}


def test_the_runner_is_registered_for_the_host():
    from pipelines.devices.host import HostDevice

    r = runner_for("onnxruntime", "cpu")
    assert r.formats == {"fp32": "onnx_fp32", "int8": "onnx_int8"} and r.granularities == ("e2e", "op")
    assert "kernel" in r.missing_granularities and "fp16" in r.missing_precisions and not r.android
    assert r.launcher() is ortr.launch and "onnxruntime" in HostDevice.frameworks


def test_e2e_records(artifacts, tmp_path):
    res = run(artifacts["fp32"], cpus=ALLOWED[:1], threads=1, warmup=3, runs=12, records_path=tmp_path / "r.jsonl")
    check_schema(res, runs=12, warmup=3)
    assert res.meta["precision"] == "fp32" and res.meta["mode"] == "e2e" and not res.meta["profiling"]
    assert res.meta["operators"]["Conv"] == 4 and res.meta["opset"] == 17
    assert not res.ops and not res.overhead and all(d > 0 for d in res.durations_ns())
    assert res.end["median_run_ns"] == statistics.median(res.durations_ns())
    assert res.end["page_faults_per_run"] < 50  # ORT's arena: no fresh pages per run
    assert read_records(tmp_path / "r.jsonl") == res.records


@pytest.mark.parametrize("precision", ["fp32", "int8"])
def test_op_mode(op_runs, precision):
    res = op_runs[precision]
    check_schema(res, runs=6, warmup=2)
    assert res.meta["precision"] == precision and res.meta["profiling"]
    ca = res.meta["clock_alignment"]
    assert "CLOCK_REALTIME" in ca["profiler_clock"] and abs(ca["offset_drift_ns"]) < 1_000_000
    assert ca["read_uncertainty_ns"] < 1_000_000
    names = {o["name"] for o in res.ops}
    # the operators ORT ran after its graph optimizations: quantized kernels in int8
    assert ({"Conv", "Gemm"} if precision == "fp32" else {"QLinearConv"}) <= names
    assert precision == "fp32" or "Conv" not in names  # no float conv behind a DequantizeLinear
    assert all(o["provider"] == "CPUExecutionProvider" and o["node_name"] and isinstance(o["node"], int)
               for o in res.ops)
    runs = {r["run"]: r for r in res.runs}
    per_run: dict[int, list[dict]] = {}
    for o in res.ops:
        per_run.setdefault(o["run"], []).append(o)
    assert set(per_run) == set(runs)
    assert len({tuple(o["node_name"] for o in ops) for ops in per_run.values()}) == 1  # the same nodes every run
    assert res.end["ops_per_run"] == [len(per_run[0])]
    for i, ops in per_run.items():
        r = runs[i]
        assert [o["order"] for o in ops] == list(range(len(ops)))
        assert sum(o["duration_ns"] for o in ops) < r["duration_ns"]
        for o in ops:  # aligned to CLOCK_MONOTONIC: inside the run's own window
            assert r["start_ns"] - SLACK_NS <= o["start_ns"] and o["start_ns"] + o["duration_ns"] <= r["end_ns"] + SLACK_NS
    assert 0 < res.end["op_sum_ratio"] < 1
    spans = res.of_type("runtime")
    assert len(spans) == 6 and {s["name"] for s in spans} == {"model_run"}
    # the profiler's overhead: profiled runs against a session without the profiler, alternating
    ov = res.overhead
    assert ov["pairs"] == 3 and ov["ratio"] > 0 and ov["median_unprofiled_ns"] > 0
    conds = [r["condition"] for r in res.of_type("run") if r["phase"] == "overhead"]
    assert sorted(conds) == ["plain"] * 3 + ["profiled"] * 3 and conds[:2] == ["plain", "profiled"]


def test_trace(op_runs):
    res = op_runs["fp32"]
    doc = json.loads(Path(res.trace_path).read_text())
    ev = doc["traceEvents"]
    tracks = {e["args"]["name"]: e["tid"] for e in ev if e["ph"] == "M" and e["name"] == "thread_name"}
    assert tracks == {"runs": 1, "ops": 2, "kernels": 3, "runtime": 4}
    xs = [e for e in ev if e["ph"] == "X"]
    assert sum(e["tid"] == 1 for e in xs) == 2 + 6 + 6  # warm-up, timed and overhead runs
    ops = [e for e in xs if e["tid"] == 2]
    assert len(ops) == len(res.ops) and all(e["args"]["provider"] == "CPUExecutionProvider" for e in ops)
    assert all(e["ts"] >= 0 and e["dur"] >= 0 for e in xs)


@pytest.mark.parametrize("cores", [1, 2])
def test_a_pinned_process_computes_on_its_threads(artifacts, cores):
    if len(ALLOWED) < cores:
        pytest.skip(f"this machine lets the tests use {len(ALLOWED)} CPU(s)")
    cpus = ALLOWED[:cores]
    res = run(artifacts["fp32"], cpus=cpus, threads=cores, warmup=2, runs=20)
    assert res.meta["cpus"] == cpus and res.meta["threads"] == cores
    for rec in (res.meta, res.end):
        assert rec["affinity_ok"] and all(t["cpus"] == cpus for t in rec["thread_affinity"])
        assert rec["compute_threads_observed"] == cores  # main + ORT's intra-op pool of cores - 1
        roles = [t["role"] for t in rec["thread_affinity"]]
        assert roles.count("main") == 1 and roles.count("runtime") == cores - 1
    assert res.end["runtime_threads_active"] == cores - 1


def test_free_dimensions_take_the_given_shape(tmp_path):
    import torch

    model = tmp_path / "free.onnx"
    conv = torch.nn.Conv2d(3, 4, 3).eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the TorchScript-based exporter's deprecation notice
        torch.onnx.export(conv, (torch.randn(1, 3, 16, 16),), str(model), dynamo=False, opset_version=17,
                          input_names=["x"], dynamic_axes={"x": {0: "batch", 2: "h", 3: "w"}})
    with pytest.raises(OrtRunError, match="free dimensions") as info:
        run(model, warmup=0, runs=1)
    assert info.value.kind == "usage"
    assert run(model, warmup=0, runs=1, input_shapes=[[1, 3, 20, 24]]).meta["input_shapes"] == [[1, 3, 20, 24]]
    (tmp_path / "free.facts.json").write_text(json.dumps({"inputs": [{"name": "x", "shape": [1, 3, 8, 8]}]}))
    assert run(model, warmup=0, runs=1).meta["input_shapes"] == [[1, 3, 8, 8]]


def _fails(model, kind, **kw):
    with pytest.raises(OrtRunError) as info:
        run(model, warmup=0, runs=1, **kw)
    msg = str(info.value)
    assert "\n" not in msg and str(model) in msg, msg
    assert info.value.kind == kind, (info.value.kind, msg)
    return msg


def test_errors_one_line(artifacts, tmp_path):
    good = artifacts["fp32"]
    assert "not found" in _fails(tmp_path / "missing.onnx", "model_missing")
    corrupt = tmp_path / "corrupt.onnx"
    corrupt.write_bytes(good.read_bytes()[:300])
    assert "ONNX" in _fails(corrupt, "model_invalid")
    junk = tmp_path / "junk.onnx"
    junk.write_bytes(b"x" * 40)
    assert "not an ONNX model" in _fails(junk, "model_invalid")
    other = tmp_path / "model.tflite"
    other.write_bytes(good.read_bytes())
    _fails(other, "model_invalid")
    assert "impossible CPU set" in _fails(good, "cpus", cpus=[max(ALLOWED) + 64])
    _fails(good, "cpus", cpus="0-x")
    assert "unknown mode" in _fails(good, "usage", mode="kernel")
    assert "does not fit" in _fails(good, "usage", input_shapes=[[1, 3, 8, 8]])


def test_the_worker_imports_onnxruntime_after_pinning():
    """The runtime's module imports neither onnxruntime nor numpy (its OpenBLAS pool) at module level."""
    code = "import sys, pipelines.runners.onnxruntime; print('onnxruntime' in sys.modules, 'numpy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.split() == ["False", "False"]


def test_the_measure_stage_measures_onnxruntime(tmp_path):
    """One NAS-Bench-201 cell generated, exported as onnx_fp32 and measured at onnxruntime-cpu-1large-fp32."""
    from pipelines.config import compose, validate
    from pipelines.export import run_export
    from pipelines.generate import run_generate
    from pipelines.measure import run_measure

    cfg = validate(compose(["generator=[nasbench201]", "generator.nasbench201.n=1", f"data_dir={tmp_path / 'data'}",
                            "export.formats=[onnx_fp32]", "export.workers=1", "measure.processes=2",
                            "measure.warmup=2", "measure.stopping.policy=fixed", "measure.stopping.runs=6",
                            "measure.op_runs=3", "measure.overhead_pairs=2", "measure.load.check=false",
                            "release.folder="]))
    run_generate(cfg, progress=False)
    assert run_export(cfg, progress=False)["failed"] == 0
    r = run_measure(cfg, "onnxruntime", "fp32", "1large", progress=False)
    assert r["status"] == "measured" and r["scenario_id"] == "host-onnxruntime-cpu-1large-fp32"
    assert (r["ok"], r["failed"]) == (1, 0)
    out = Path(r["out"])
    rec = next(json.loads(p.read_text()) for p in out.glob("*.json")
               if p.name != "SCENARIO.json" and not p.name.endswith((".error.json", ".trace.json")))
    assert rec["runtime"]["runtime"] == "onnxruntime" and rec["artifact"]["format"] == "onnx_fp32"
    assert rec["protocol"]["granularities"] == ["e2e", "op"]
    assert "ORT's profiler" in rec["protocol"]["granularities_not_offered"]["kernel"]  # asked for, not offered
    assert [len(s) for s in rec["e2e"]["samples_ns"]] == [3, 3] and rec["e2e"]["latency_ms"] > 0
    op = rec["op"]
    assert op["ops"] and {"Conv", "Gemm"} <= {o["name"] for o in op["ops"]}
    assert all(o["provider"] == "CPUExecutionProvider" and o["node_name"] for o in op["ops"])
    assert sum(o["mean_ms"] for o in op["ops"]) < op["summary"]["mean_ms"]
    assert op["overhead"]["pairs"] == 2 and op["overhead"]["ratio"] > 0
    assert json.loads((out / op["trace"]).read_text())["traceEvents"]
    # assembled: every node's configuration from the record (input, weight and output shapes)
    from pipelines.assemble import run_assemble

    run_assemble(cfg, progress=False, card=False)
    ops = pd.read_parquet(tmp_path / "data" / "dataset" / "ops.parquet")
    convs = ops[ops["op_type"].isin(["conv2d", "dwconv2d", "group_conv2d"])]
    assert len(convs) and convs[["in_channels", "out_channels", "kernel", "groups", "stride", "out_hw"]].notna().all().all()
    assert set(convs["kernel"]) <= {1, 3} and set(convs["stride"]) <= {1, 2}
    fc = ops[ops["op_type"] == "fc"]
    assert list(fc["out_channels"]) == [10]  # NAS-Bench-201's CIFAR head


def test_onnx_features():
    from pipelines.dataset.opfeatures import onnx_features

    f = onnx_features("FusedConv", [[1, 32, 112, 112], [64, 32, 3, 3], [64]], [[1, 64, 56, 56]])
    assert f == {"op_type": "conv2d", "in_channels": 32, "in_hw": 112, "out_channels": 64, "kernel": 3, "groups": 1,
                 "out_hw": 56, "stride": 2}
    f = onnx_features("Conv", [[1, 192, 112, 112], [192, 1, 3, 3], [192]])  # a record without output shapes
    assert (f["op_type"], f["groups"], f["out_channels"], f.get("stride")) == ("dwconv2d", 192, 192, None)
    assert onnx_features("QLinearConv", [[1, 8, 4, 4], [], [], [16, 8, 1, 1]])["out_channels"] == 16
    assert onnx_features("Gemm", [[1, 1280], [1000, 1280], [1000]])["out_channels"] == 1000
    assert onnx_features("MatMul", [[1, 1280], [1280, 10]])["out_channels"] == 10
    assert onnx_features("Gemm", [[1, 1263], [1000]])["out_channels"] == 1000  # the weight prepacked
    f = onnx_features("ReorderOutput", [[1, 24, 56, 56]])
    assert (f["op_type"], f["out_channels"], f["out_hw"]) == ("reorder", 24, 56)
    assert onnx_features("Erf", [[1, 4]])["op_type"] == "erf"
