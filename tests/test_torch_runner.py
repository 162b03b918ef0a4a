"""The PyTorch runner (pipelines/runners/torch.py): one fresh worker process per scenario.

A tiny IR network (input [1,3,32,32], conv_bn_act, inverted_residual, classifier) is exported
as TorchScript (.pt) and lite (.ptl) in fp32 and int8. Checked: records parse and follow the
latbench-run schema, e2e runs are positive and as many as asked, op mode names the graph's
operators and their per-run sum stays below the run's own clock (and inside its window),
every thread the worker sees has exactly the requested CPU set, the Chrome trace has the
native tracks, and bad input fails with one line naming the model.
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from generators import blocks as B
from generators.ir import Graph
from pipelines.runners import torch as trn
from pipelines.runners.records import read_records
from pipelines.runners.torch_zygote import run_torch
from support.worker_records import check_run_records

ROOT = Path(__file__).resolve().parents[1]
ALLOWED = sorted(os.sched_getaffinity(0))
SHAPE = [1, 3, 32, 32]


def tiny_graph() -> Graph:
    g = Graph(name="torch-runner-tiny", source="test")
    x = g.input(SHAPE)
    x = B.conv_bn_act(g, x, 16, 3, stride=2, act="relu")
    x = B.inverted_residual(g, x, 16, expansion=2)
    x = B.classifier(g, x, num_classes=10)
    return g.set_outputs(x).validate()


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory) -> dict[str, Path]:
    from generators.export import torch_module as tm

    out = tmp_path_factory.mktemp("torch-artifacts")
    g = tiny_graph()
    arts = {}
    for prec in ("fp32", "int8"):
        arts[f"pt-{prec}"] = Path(tm.export_torchscript(g, out / f"{prec}.pt", prec)["path"])
        arts[f"ptl-{prec}"] = Path(tm.export_lite(g, out / f"{prec}.ptl", prec)["path"])
    return arts


def run(model, **kw):
    kw.setdefault("input_shapes", [SHAPE])
    kw.setdefault("timeout", 120)
    return run_torch(model, **kw)


def check_schema(res, runs: int, warmup: int) -> None:
    check_run_records(res, runs, warmup)
    meta = res.meta
    assert meta["framework"] == "pytorch" and meta["runtime_version"].startswith("2.")
    assert meta["interop_threads"] == 1


# one run of each kind, shared by the tests below (each a fresh process forked by the torch zygote)
@pytest.fixture(scope="module")
def op_runs(artifacts, tmp_path_factory) -> dict[str, object]:
    tmp = tmp_path_factory.mktemp("torch-op-runs")
    out = {}
    for key in ("pt-fp32", "ptl-fp32", "pt-int8", "ptl-int8"):
        out[key] = run(artifacts[key], cpus=ALLOWED, threads=1, mode="op", warmup=2, runs=8,
                       records_path=tmp / f"{key}.jsonl", trace_path=tmp / f"{key}.trace.json")
    return out


def test_e2e_records(artifacts, tmp_path):
    res = run(artifacts["pt-fp32"], cpus=ALLOWED, threads=1, mode="e2e", warmup=3, runs=12,
              records_path=tmp_path / "r.jsonl")
    check_schema(res, runs=12, warmup=3)
    assert res.meta["model_kind"] == "torchscript" and res.meta["precision"] == "fp32"
    assert res.meta["mode"] == "e2e" and not res.meta["profiling"]
    assert not res.ops and all(d > 0 for d in res.durations_ns())
    assert res.end["median_run_ns"] == statistics.median(res.durations_ns())
    # the file round-trips through the shared reader
    assert read_records(tmp_path / "r.jsonl") == res.records


@pytest.mark.parametrize("key", ["pt-fp32", "ptl-fp32", "pt-int8", "ptl-int8"])
def test_op_mode(op_runs, key):
    res = op_runs[key]
    check_schema(res, runs=8, warmup=2)
    meta = res.meta
    assert meta["model_kind"] == ("torchscript-lite" if key.startswith("ptl") else "torchscript")
    assert meta["precision"] == key.split("-")[1]
    ca = meta["clock_alignment"]
    assert abs(ca["offset_drift_ns"]) < 1_000_000 and ca["read_uncertainty_ns"] < 1_000_000
    names = {o["name"] for o in res.ops}
    if key.endswith("fp32"):
        assert {"aten::_convolution", "aten::linear", "aten::batch_norm", "aten::add"} <= names
    else:
        assert {"quantized::conv2d", "quantized::linear", "quantized::add", "aten::quantize_per_tensor"} <= names
    # no nested events: operator children (aten::mkldnn_convolution...) are folded in
    assert not names & {"aten::mkldnn_convolution", "aten::thnn_conv2d", "aten::addmm", "aten::empty"}
    runs = {r["run"]: r for r in res.runs}
    per_run: dict[int, list[dict]] = {}
    for o in res.ops:
        per_run.setdefault(o["run"], []).append(o)
    assert set(per_run) == set(runs)
    counts = {len(v) for v in per_run.values()}
    assert len(counts) == 1 and res.end["ops_per_run"] == sorted(counts)
    for i, ops in per_run.items():
        r = runs[i]
        assert [o["order"] for o in ops] == list(range(len(ops)))
        assert sum(o["duration_ns"] for o in ops) < r["duration_ns"]
        for o in ops:  # aligned to CLOCK_MONOTONIC: inside the run's own window
            assert o["duration_ns"] > 0
            assert r["start_ns"] <= o["start_ns"] and o["start_ns"] + o["duration_ns"] <= r["end_ns"]
        for a, b in zip(ops, ops[1:]):
            assert a["start_ns"] + a["duration_ns"] <= b["start_ns"]
    assert 0 < res.end["op_sum_ratio"] < 1
    if key.startswith("pt-"):  # TorchScript: the module call is a runtime span around the ops
        spans = res.of_type("runtime")
        assert len(spans) == 8 and {s["name"] for s in spans} == {"forward"}


def test_trace(op_runs):
    res = op_runs["pt-fp32"]
    doc = json.loads(Path(res.trace_path).read_text())
    ev = doc["traceEvents"]
    tracks = {e["args"]["name"]: e["tid"] for e in ev if e["ph"] == "M" and e["name"] == "thread_name"}
    assert tracks == {"runs": 1, "ops": 2, "kernels": 3, "runtime": 4}
    xs = [e for e in ev if e["ph"] == "X"]
    assert sum(e["tid"] == 1 for e in xs) == 10  # 2 warm-up + 8 timed runs
    assert sum(e["tid"] == 2 for e in xs) == len(res.ops)
    assert all(e["ts"] >= 0 and e["dur"] > 0 for e in xs)


def test_affinity_all_threads(artifacts):
    cpu = ALLOWED[-1]
    res = run(artifacts["pt-fp32"], cpus=[cpu], threads=2, mode="e2e", warmup=2, runs=5)
    assert res.meta["cpus"] == [cpu] and res.meta["threads"] == 2
    for rec in (res.meta, res.end):
        threads = rec["thread_affinity"]
        assert rec["affinity_ok"] and len(threads) >= 2  # main + torch's intra-op worker
        assert all(t["cpus"] == [cpu] for t in threads), threads
        assert sum(t["role"] == "main" for t in threads) == 1


def test_int8_engine_and_speed(artifacts):
    fp = run(artifacts["ptl-fp32"], cpus=ALLOWED[:1], threads=1, warmup=3, runs=20)
    q = run(artifacts["ptl-int8"], cpus=ALLOWED[:1], threads=1, warmup=3, runs=20, engine="x86")
    assert q.meta["engine"] == "x86" and q.meta["engine_requested"] == "x86"
    assert q.meta["precision"] == "int8" and fp.meta["precision"] == "fp32"
    assert all(d > 0 for d in q.durations_ns() + fp.durations_ns())


def test_input_shape_from_sidecar(artifacts, tmp_path):
    model = tmp_path / "torchscript_fp32.pt"
    model.write_bytes(artifacts["pt-fp32"].read_bytes())
    (tmp_path / "torchscript_fp32.facts.json").write_text(json.dumps({"inputs": [{"name": "input", "shape": SHAPE}]}))
    res = run_torch(model, cpus=ALLOWED, warmup=1, runs=2, timeout=120)
    assert res.meta["input_shapes"] == [SHAPE]


def _fails(model, kind, **kw):
    with pytest.raises(trn.TorchRunError) as info:
        run(model, warmup=0, runs=1, **kw)
    msg = str(info.value)
    assert "\n" not in msg and str(model) in msg, msg
    assert info.value.kind == kind, (info.value.kind, msg)
    return msg


def test_errors_one_line(artifacts, tmp_path):
    good = artifacts["pt-fp32"]
    assert "not found" in _fails(tmp_path / "missing.pt", "model_missing")
    bad = tmp_path / "corrupt.pt"
    bad.write_bytes(b"this is not a zip archive" * 10)
    _fails(bad, "model_invalid")
    badl = tmp_path / "corrupt.ptl"
    badl.write_bytes(good.read_bytes()[:500])
    _fails(badl, "model_invalid")
    assert "impossible CPU set" in _fails(good, "cpus", cpus=[max(ALLOWED) + 64])
    _fails(good, "cpus", cpus="0-x")
    assert "unknown engine" in _fails(good, "usage", engine="tpu")
    assert "unknown mode" in _fails(good, "usage", mode="kernel")
    assert "input shape unknown" in _fails(good, "usage", input_shapes=None)


def test_worker_imports_torch_after_pinning():
    """The worker module imports nothing of torch at module level (so main() can pin first)."""
    code = "import sys, pipelines.runners.torch; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.strip() == "False"


WIDE = [1, 3, 224, 224]  # a 3x3 convolution to 192 channels: a 38.5 MB output, above glibc's mmap ceiling (32 MiB)

_PLAIN_FAULTS = """
import resource, sys, torch
m = torch.jit.load(sys.argv[1]).eval()
x = torch.randn(*map(int, sys.argv[2].split(",")))
with torch.inference_mode():
    for _ in range(3):
        m(x)
    f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(5):
        m(x)
print((resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0) / 5)
"""


def test_timed_runs_take_no_page_faults(tmp_path):
    """The zygote's workers run on jemalloc with its decay off (pipelines/runners/allocator.py),
    which keeps freed pages for the next run, so a timed run does not pay the kernel for fresh pages; the same
    model in a plain interpreter (glibc's malloc) does, on every run: a cost of the machine,
    not of the network. scripts/debian-packages.txt installs jemalloc."""
    from generators.export import torch_module as tm

    g = Graph(name="torch-runner-wide", source="test")
    x = g.input(WIDE)
    x = B.conv_bn_act(g, x, 192, 3, stride=1, act="relu")
    x = B.classifier(g, x, num_classes=10)
    model = Path(tm.export_torchscript(g.set_outputs(x).validate(), tmp_path / "wide.pt", "fp32")["path"])

    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    plain = subprocess.run([sys.executable, "-c", _PLAIN_FAULTS, str(model), ",".join(map(str, WIDE))],
                           capture_output=True, text=True, check=True, cwd=ROOT, env=env)
    assert float(plain.stdout.strip()) > 5000  # ~9,400 pages of 4 KiB for the output alone

    res = run(model, input_shapes=[WIDE], cpus=ALLOWED[:1], warmup=3, runs=5)
    assert res.meta["allocator"]["name"] == "jemalloc", res.meta["allocator"]
    assert res.meta["allocator"]["dirty_decay_ms"] == res.meta["allocator"]["muzzy_decay_ms"] == -1
    assert res.end["page_faults_per_run"] < 50
