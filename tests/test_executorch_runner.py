"""The ExecuTorch runner (pipelines/runners/executorch.py on the shared worker, worker.py).

A tiny IR network (input [1,3,32,32], conv_bn_act, a nearest upsample that stays on
ExecuTorch's portable kernels, inverted_residual, classifier: two XNNPACK delegate calls around
one portable kernel) is exported as ExecuTorch fp32 and int8 and run through the real worker in
fresh processes. Checked: the records follow the latbench-run schema, the precision is read from
the program, op mode records the portable kernel and kernel mode every XNNPACK operator by
XNNPACK's name, each inside its run's window on CLOCK_MONOTONIC once the ETDump's clock is
aligned, the ETDump's overhead is measured against a program loaded without it, the Chrome trace
has the native tracks, a process pinned to one core computes on one thread and on two cores on
two, bad files fail with one line naming the model, ``latbench profile`` takes a ``.pte``, and the
measure stage measures an exported network at executorch-cpu-1large-fp32.
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("executorch")

from generators import blocks as B  # noqa: E402
from generators.ir import Graph  # noqa: E402
from pipelines.runners import executorch as etr  # noqa: E402
from pipelines.runners import runner_for  # noqa: E402
from pipelines.runners.executorch import EtRunError, run_executorch_worker  # noqa: E402
from pipelines.runners.records import read_records  # noqa: E402
from support.worker_records import check_run_records  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
ALLOWED = sorted(os.sched_getaffinity(0))
SHAPE = [1, 3, 32, 32]


def tiny_graph() -> Graph:
    g = Graph(name="et-runner-tiny", source="test")
    x = g.input(SHAPE)
    x = B.conv_bn_act(g, x, 16, 3, stride=2, act="relu")
    x = g.add("upsample", x, scale=[2, 2])  # portable: between two delegate calls
    x = B.inverted_residual(g, x, 16, expansion=2)
    x = B.classifier(g, x, num_classes=10)
    return g.set_outputs(x).validate()


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory) -> dict[str, Path]:
    from generators.export.executorch import export_executorch

    out = tmp_path_factory.mktemp("et-artifacts")
    g = tiny_graph()
    return {p: Path(export_executorch(g, out / f"executorch_{p}.pte", p)["path"]) for p in ("fp32", "int8")}


def run(model, **kw):
    kw.setdefault("timeout", 180)
    return run_executorch_worker(model, **kw)


def check_schema(res, runs: int, warmup: int) -> None:
    check_run_records(res, runs, warmup)
    meta = res.meta
    assert meta["tool"] == "latbench-executorch" and meta["framework"] == "executorch"
    assert meta["runtime"] == "executorch" and meta["runtime_version"].startswith("1.5.")
    assert meta["delegate"] == "XnnpackBackend" and meta["delegates"] == {"XnnpackBackend": 2}
    assert meta["operators"] == {"aten::upsample_nearest2d.vec_out": 1} and meta["delegate_calls"] == 2
    assert meta["input_shapes"] == [SHAPE] and meta["input_types"] == ["float32"]
    assert meta["clock"] == "CLOCK_MONOTONIC" and meta["threadpool_threads"] == meta["threads"]


@pytest.fixture(scope="module")
def profiled(artifacts, tmp_path_factory) -> dict[str, object]:
    """fp32 in op mode and in kernel mode, int8 in kernel mode: 2 warm-up, 6 timed, 3 overhead pairs."""
    tmp = tmp_path_factory.mktemp("et-profiled")
    cases = {"op": ("fp32", "op"), "kernel": ("fp32", "kernel"), "int8": ("int8", "kernel")}
    return {k: run(artifacts[p], cpus=ALLOWED[:1], threads=1, mode=mode, warmup=2, runs=6, overhead_pairs=3,
                   records_path=tmp / f"{k}.jsonl", trace_path=tmp / f"{k}.trace.json")
            for k, (p, mode) in cases.items()}


def test_the_runner_is_registered_for_the_host():
    from pipelines.devices.host import HostDevice
    from pipelines.runners import framework_by_suffix

    r = runner_for("executorch", "cpu")
    assert r.formats == {"fp32": "executorch_fp32", "int8": "executorch_int8"}
    assert r.granularities == ("e2e", "op", "kernel") and not r.missing_granularities
    assert "fp16" in r.missing_precisions and not r.android and r.suffixes == (".pte",)
    assert r.launcher() is etr.launch and "executorch" in HostDevice.frameworks
    assert framework_by_suffix()[".pte"] == "executorch"


def test_the_program_is_read_without_running_it(artifacts, tmp_path):
    fp32, int8 = (etr.read_program(artifacts[p]) for p in ("fp32", "int8"))
    assert fp32["precision"] == "fp32" and fp32["xnnpack_datatypes"] == ["xnn_datatype_fp32"]
    assert int8["precision"] == "int8" and "xnn_datatype_qint8" in int8["xnnpack_datatypes"]
    assert fp32["delegates"] == {"XnnpackBackend": 2} and fp32["instructions"] >= 3
    junk = tmp_path / "junk.pte"
    junk.write_bytes(b"\0" * 64)
    with pytest.raises(etr.PteError, match=r"junk.pte: not an ExecuTorch program \(no ET12"):
        etr.read_program(junk)


def test_e2e_records(artifacts, tmp_path):
    res = run(artifacts["fp32"], cpus=ALLOWED[:1], threads=1, warmup=3, runs=12, records_path=tmp_path / "r.jsonl")
    check_schema(res, runs=12, warmup=3)
    assert res.meta["precision"] == "fp32" and res.meta["mode"] == "e2e"
    assert not res.meta["profiling"] and not res.meta["etdump"] and "clock_alignment" not in res.meta
    assert not res.ops and not res.kernels and not res.overhead and not res.of_type("runtime")
    assert res.end["median_run_ns"] == statistics.median(res.durations_ns())
    assert read_records(tmp_path / "r.jsonl") == res.records


def _per_run(events) -> dict[int, list[dict]]:
    out: dict[int, list[dict]] = {}
    for e in events:
        out.setdefault(e["run"], []).append(e)
    return out


def _inside(events, runs) -> None:
    """Aligned to CLOCK_MONOTONIC: every event inside its own run's window."""
    for e in events:
        r = runs[e["run"]]
        assert r["start_ns"] <= e["start_ns"] and e["start_ns"] + e["duration_ns"] <= r["end_ns"], (e, r)


def test_op_mode_records_the_portable_kernels(profiled):
    res = profiled["op"]
    check_schema(res, runs=6, warmup=2)
    assert res.meta["profiling"] and res.meta["etdump"] and res.meta["mode"] == "op"
    ca = res.meta["clock_alignment"]
    assert ca["executions"] == 2 + 6 + 3 and 0 <= ca["slack_ns"] < 1_000_000  # warm-up, timed, profiled overhead
    runs = {r["run"]: r for r in res.runs}
    per_run = _per_run(res.ops)
    assert set(per_run) == set(runs) and not res.kernels
    for ops in per_run.values():  # the one portable kernel, the instruction between the delegate calls
        assert [(o["name"], o["source"], o["call"], o["order"]) for o in ops] == [
            ("upsample_nearest2d.vec_out", "portable", 1, 0)]
    _inside(res.ops, runs)
    assert res.end["ops_per_run"] == [1] and 0 < res.end["op_sum_ratio"] < 1
    spans = res.of_type("runtime")
    assert sorted({s["name"] for s in spans}) == ["DELEGATE_CALL", "Method::execute", "OPERATOR_CALL"]
    assert sum(s["name"] == "Method::execute" for s in spans) == 6  # the timed runs' (the others dropped)
    _inside(spans, runs)
    ov = res.overhead
    assert ov["mode"] == "op" and ov["pairs"] == 3 and ov["ratio"] > 0 and ov["median_unprofiled_ns"] > 0
    conds = [r["condition"] for r in res.of_type("run") if r["phase"] == "overhead"]
    assert sorted(conds) == ["plain"] * 3 + ["profiled"] * 3 and conds[:2] == ["plain", "profiled"]


@pytest.mark.parametrize("case", ["kernel", "int8"])
def test_kernel_mode_records_the_xnnpack_operators(profiled, case):
    res = profiled[case]
    check_schema(res, runs=6, warmup=2)
    precision = "int8" if case == "int8" else "fp32"
    assert res.meta["precision"] == precision and res.meta["mode"] == "kernel"
    runs = {r["run"]: r for r in res.runs}
    per_run = _per_run(res.kernels)
    assert set(per_run) == set(runs) and res.end["kernels"] == len(res.kernels)
    first = [(k["name"], k["source"], k.get("partition"), k.get("index_in_partition")) for k in per_run[0]]
    assert all([(k["name"], k["source"], k.get("partition"), k.get("index_in_partition")) for k in ks] == first
               for ks in per_run.values())  # the same kernels in the same order every run
    for ks in per_run.values():
        assert [k["order"] for k in ks] == list(range(len(ks)))
        assert sum(k["duration_ns"] for k in ks) < runs[ks[0]["run"]]["duration_ns"]
    _inside(res.kernels, runs)
    xnn = [k for k in per_run[0] if k["source"] == "xnnpack"]
    names = [k["name"] for k in xnn]
    conv = "Convolution (NHWC, F32)" if precision == "fp32" else "Convolution (NHWC, QC8)"
    assert any(n.startswith(conv) for n in names) and any(n.startswith("Fully Connected (NC, ") for n in names)
    assert all(k["duration_ns"] % 1000 == 0 for k in xnn)  # XNNPACK's whole microseconds
    assert sorted({k["partition"] for k in xnn}) == [0, 1]
    for part in (0, 1):
        assert [k["index_in_partition"] for k in xnn if k["partition"] == part] == list(
            range(sum(k["partition"] == part for k in xnn)))
    # the portable kernel is an op and a kernel, between the two delegate calls
    portable = [k for k in per_run[0] if k["source"] == "portable"]
    assert [k["name"] for k in portable] == ["upsample_nearest2d.vec_out"] and len(res.ops) == 6
    assert first.index(("upsample_nearest2d.vec_out", "portable", None, None)) == sum(k["partition"] == 0 for k in xnn)
    assert res.overhead["mode"] == "kernel" and res.overhead["ratio"] > 0


def test_trace(profiled):
    res = profiled["kernel"]
    doc = json.loads(Path(res.trace_path).read_text())
    ev = doc["traceEvents"]
    tracks = {e["args"]["name"]: e["tid"] for e in ev if e["ph"] == "M" and e["name"] == "thread_name"}
    assert tracks == {"runs": 1, "ops": 2, "kernels": 3, "runtime": 4}
    xs = [e for e in ev if e["ph"] == "X"]
    assert sum(e["tid"] == 1 for e in xs) == 2 + 6 + 6  # warm-up, timed and overhead runs
    assert sum(e["tid"] == 2 for e in xs) == len(res.ops) and sum(e["tid"] == 3 for e in xs) == len(res.kernels)
    assert any(e["tid"] == 3 and e["name"].startswith("Convolution (NHWC, F32)") for e in xs)
    assert all(e["ts"] >= 0 and e["dur"] >= 0 for e in xs)


@pytest.mark.parametrize("cores", [1, 2])
def test_a_pinned_process_computes_on_its_threads(artifacts, cores):
    if len(ALLOWED) < cores:
        pytest.skip(f"this machine lets the tests use {len(ALLOWED)} CPU(s)")
    cpus = ALLOWED[:cores]
    res = run(artifacts["fp32"], cpus=cpus, threads=cores, warmup=2, runs=20)
    assert res.meta["cpus"] == cpus and res.meta["threads"] == cores == res.meta["threadpool_threads"]
    for rec in (res.meta, res.end):
        assert rec["affinity_ok"] and all(t["cpus"] == cpus for t in rec["thread_affinity"])
        assert rec["compute_threads_observed"] == cores  # main + ExecuTorch's threadpool of cores - 1
        roles = [t["role"] for t in rec["thread_affinity"]]
        assert roles.count("main") == 1 and roles.count("runtime") == cores - 1
    assert res.end["runtime_threads_active"] == cores - 1


def _fails(model, kind, **kw):
    with pytest.raises(EtRunError) as info:
        run(model, warmup=0, runs=1, **kw)
    msg = str(info.value)
    assert "\n" not in msg and str(model) in msg, msg
    assert info.value.kind == kind, (info.value.kind, msg)
    return msg


def test_errors_one_line(artifacts, tmp_path):
    good = artifacts["fp32"]
    assert "not found" in _fails(tmp_path / "missing.pte", "model_missing")
    corrupt = tmp_path / "corrupt.pte"
    corrupt.write_bytes(good.read_bytes()[:400])
    assert "ExecuTorch program" in _fails(corrupt, "model_invalid")
    other = tmp_path / "model.onnx"
    other.write_bytes(good.read_bytes())
    assert "not a .pte file" in _fails(other, "model_invalid")
    assert "does not fit input 0" in _fails(good, "usage", input_shapes=[[1, 3, 8, 8]])
    assert "unknown mode" in _fails(good, "usage", mode="gpu")


def test_the_worker_imports_executorch_after_pinning():
    """The runtime's module imports neither executorch nor torch at module level."""
    code = "import sys, pipelines.runners.executorch; print('executorch' in sys.modules, 'torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.split() == ["False", "False"]


def test_latbench_profile_takes_a_pte(artifacts, tmp_path):
    from pipelines.config import compose, validate
    from pipelines.profile import ProfileError, ProfileRequest, run_profile, summary_lines

    cfg = validate(compose(["measure.warmup=2", "measure.op_runs=3", "measure.overhead_pairs=2"]))
    cfg.measure.processes = 2
    cfg.measure.stopping.max_processes = 2
    model = tmp_path / "mine.pte"
    model.write_bytes(artifacts["int8"].read_bytes())
    p = run_profile(cfg, ProfileRequest(model, out=tmp_path / "out"), progress=False)
    assert p.scenario_id == "host-executorch-cpu-1large-int8"  # the precision read from the program
    r = p.record
    assert r["artifact"]["format"] == "executorch_int8" and r["e2e"]["latency_ms"] > 0
    assert [o["name"] for o in r["op"]["ops"]] == ["upsample_nearest2d.vec_out"]
    assert any(k["name"].startswith("Convolution (NHWC, QC8)") and k["source"] == "xnnpack"
               for k in r["kernel"]["kernels"])
    text = "\n".join(summary_lines(p))
    assert "ExecuTorch's portable kernels" in text and "top kernels" in text and "trace (kernel):" in text
    with pytest.raises(ProfileError, match=r"mine.pte: .*does not fit input 0"):
        run_profile(cfg, ProfileRequest(model, shape=[1, 3, 8, 8], out=tmp_path / "bad"), progress=False)
    junk = tmp_path / "junk.pte"
    junk.write_bytes(b"x" * 40)
    with pytest.raises(ProfileError, match=r"junk.pte: not an ExecuTorch program") as info:
        run_profile(cfg, ProfileRequest(junk, out=tmp_path / "j"), progress=False)
    assert "\n" not in str(info.value)


def test_the_measure_stage_measures_executorch(tmp_path):
    """One NAS-Bench-201 cell generated, exported as executorch_fp32 and measured at executorch-cpu-1large-fp32."""
    from pipelines.config import compose, validate
    from pipelines.export import run_export
    from pipelines.generate import run_generate
    from pipelines.measure import run_measure

    cfg = validate(compose(["generator=[nasbench201]", "generator.nasbench201.n=1", f"data_dir={tmp_path / 'data'}",
                            "export.formats=[executorch_fp32]", "export.workers=1", "measure.processes=2",
                            "measure.warmup=2", "measure.stopping.policy=fixed", "measure.stopping.runs=6",
                            "measure.op_runs=3", "measure.overhead_pairs=2", "measure.load.check=false",
                            "release.folder="]))
    run_generate(cfg, progress=False)
    assert run_export(cfg, progress=False)["failed"] == 0
    r = run_measure(cfg, "executorch", "fp32", "1large", progress=False)
    assert r["status"] == "measured" and r["scenario_id"] == "host-executorch-cpu-1large-fp32"
    assert (r["ok"], r["failed"]) == (1, 0)
    out = Path(r["out"])
    rec = next(json.loads(p.read_text()) for p in out.glob("*.json")
               if p.name != "SCENARIO.json" and not p.name.endswith((".error.json", ".trace.json")))
    assert rec["runtime"]["runtime"] == "executorch" and rec["artifact"]["format"] == "executorch_fp32"
    assert rec["protocol"]["granularities"] == ["e2e", "op", "kernel"]
    assert [len(s) for s in rec["e2e"]["samples_ns"]] == [3, 3] and rec["e2e"]["latency_ms"] > 0
    kernels = rec["kernel"]["kernels"]
    assert kernels and all(k["source"] in ("xnnpack", "portable") for k in kernels)
    assert any(k["name"].startswith("Convolution (NHWC, F32)") for k in kernels)
    assert sum(k["mean_ms"] for k in kernels) < rec["kernel"]["summary"]["mean_ms"]
    assert rec["kernel"]["overhead"]["pairs"] == 2 and rec["kernel"]["overhead"]["ratio"] > 0
    assert json.loads((out / rec["kernel"]["trace"]).read_text())["traceEvents"]
    # the kernel process records the op rows too: the op part is that process's, no op process ran
    assert rec["op"]["trace"] == rec["kernel"]["trace"] and rec["op"]["kernels"] == []
    assert rec["op"]["ops"] == rec["kernel"]["ops"] and rec["op"]["summary"] == rec["kernel"]["summary"]
    assert not (out / f"{rec['model_id']}.op.trace.json").exists()
