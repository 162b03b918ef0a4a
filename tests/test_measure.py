"""The measure stage: records per (model, scenario), the protocol, failures, resuming a killed sweep.

Two NAS-Bench-201 cells (32x32 input, about 1 ms each) are generated and exported once per
session; every test measures them with a short protocol into its own folder.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pipelines.config import compose, validate, write_params
from pipelines.measure import run_measure

ROOT = Path(__file__).resolve().parents[1]
XNN_NAME = re.compile(r"^[A-Z][A-Za-z0-9 ]*? \((?:N[A-Z]*|ND|NC)(?:, [A-Z0-9]+)*\)(?: [A-Za-z0-9 ]+)?$")
# the machine running the tests is shared: these tests are about records and resuming, so the
# load is recorded but never refused (test_a_busy_core_... turns the check on)
QUICK = ["measure.processes=2", "measure.warmup=2", "measure.stopping.policy=fixed", "measure.stopping.runs=6",
         "measure.op_runs=3", "measure.overhead_pairs=2", "measure.load.check=false",
         "release.folder="]  # a committed release would hold these cells: measure them here


def params(data_dir: Path, *overrides: str):
    raw = compose(["generator=[nasbench201]", "generator.nasbench201.n=2", f"data_dir={data_dir}",
                   "export.formats=[tflite_fp32,tflite_int8,torchscript_fp32]", "export.workers=2",
                   *QUICK, *overrides])
    return raw, validate(raw)


@pytest.fixture(scope="session")
def exported(tmp_path_factory) -> Path:
    """A data dir with 2 generated + exported networks (copied per test: tests write into it)."""
    from pipelines.export import run_export
    from pipelines.generate import run_generate

    data = tmp_path_factory.mktemp("measure") / "data"
    _, cfg = params(data)
    run_generate(cfg, progress=False)
    counts = run_export(cfg, progress=False)
    assert counts["failed"] == 0
    return data


@pytest.fixture
def data(exported, tmp_path) -> Path:
    d = tmp_path / "data"
    shutil.copytree(exported / "models", d / "models")
    (d / "artifacts").symlink_to(exported / "artifacts")  # read-only here; tests that break one copy it
    return d


def model_ids(data: Path) -> list[str]:
    return sorted(p.stem for p in (data / "models").glob("*/*.json"))


def records(out: Path) -> dict[str, dict]:
    return {p.stem: json.loads(p.read_text()) for p in out.glob("*.json")
            if p.name != "SCENARIO.json" and not p.name.endswith((".error.json", ".trace.json"))}


def test_tflite_records_every_granularity_and_a_rerun_skips(data):
    _, cfg = params(data)
    r = run_measure(cfg, "tflite", "fp32", "1large", progress=False)
    assert r["status"] == "measured" and r["scenario_id"] == "host-tflite-cpu-1large-fp32"
    assert (r["ok"], r["failed"], r["skipped"]) == (2, 0, 0)
    out = data / "measurements" / "host" / "host-tflite-cpu-1large-fp32"
    recs = records(out)
    assert sorted(recs) == model_ids(data)
    for mid, rec in recs.items():
        assert rec["model_id"] == mid and rec["scenario"]["scenario_id"] == "host-tflite-cpu-1large-fp32"
        assert rec["scenario"]["cpus"] == [0] and rec["scenario"]["threads"] == 1
        p = rec["protocol"]
        assert p["processes"] == 2 and p["interleaved"] and p["stopping"]["policy"] == "fixed"
        assert p["stopping"]["runs"] == 6 and p["stopping"]["stop_reason"] == "fixed_runs"
        e = rec["e2e"]
        assert [len(s) for s in e["samples_ns"]] == [3, 3]
        for key in ("latency_ms", "median_of_medians_ms", "between_cv", "within_cv"):
            assert e[key] == e[key] and e[key] >= 0
        for key in ("median_ms", "mean_ms", "std_ms", "p10_ms", "p90_ms", "cv", "ci_low_ms", "ci_high_ms"):
            assert key in e["pooled"]
        assert e["pooled"]["p10_ms"] <= e["pooled"]["median_ms"] <= e["pooled"]["p90_ms"]
        assert rec["runtime"]["cpus"] == [0] and rec["runtime"]["runtime_version"]
        # op granularity: one entry per TFLite node; their sum is below the profiled run's time
        op = rec["op"]
        # (the profiler ticks in microseconds: a reshape may take 0)
        assert op["ops"] and all(o["runs"] == 3 and o["median_ms"] >= 0 for o in op["ops"])
        assert sum(o["median_ms"] for o in op["ops"]) > 0
        assert sum(o["mean_ms"] for o in op["ops"]) < op["summary"]["mean_ms"]
        assert op["overhead"]["pairs"] == 2 and op["overhead"]["ratio"] > 0
        # kernel granularity: XNNPACK operators by name
        kern = rec["kernel"]
        assert kern["kernels"] and all(XNN_NAME.match(k["name"]) for k in kern["kernels"] if k["source"] == "xnnpack")
        for mode in ("op", "kernel"):
            trace = json.loads((out / rec[mode]["trace"]).read_text())
            assert trace["traceEvents"]
    assert not (out / ".work").exists()
    log = (out / "measure.log").read_text()
    assert "2 measured, 0 failed" in log

    again = run_measure(cfg, "tflite", "fp32", "1large", progress=False)
    assert (again["ok"], again["failed"], again["skipped"]) == (0, 0, 2)
    assert records(out) == recs  # untouched


def test_adaptive_stopping_is_recorded_and_a_changed_protocol_remeasures(data):
    _, cfg = params(data, "measure.stopping.policy=adaptive", "measure.stopping.batch=5",
                    "measure.stopping.rel_width=0.5", "measure.stopping.max_processes=4",
                    "measure.granularities=[e2e]")
    r = run_measure(cfg, "tflite", "int8", "2large", progress=False)
    assert r["scenario_id"] == "host-tflite-cpu-2large-int8" and r["ok"] == 2
    out = r["out"]
    for rec in records(out).values():
        s = rec["protocol"]["stopping"]
        assert s["policy"] == "adaptive" and s["params"]["rel_width"] == 0.5
        assert s["stop_reason"] in ("ci_width", "max_processes")
        assert 2 <= rec["protocol"]["processes"] <= 4 and s["runs"] == 5 * rec["protocol"]["processes"]
        assert rec["scenario"]["cpus"] == [0, 1] and rec["runtime"]["threads"] == 2
        assert "op" not in rec and "kernel" not in rec
    _, cfg2 = params(data, "measure.granularities=[e2e]")  # fixed stopping: another protocol
    r2 = run_measure(cfg2, "tflite", "int8", "2large", progress=False)
    assert (r2["ok"], r2["skipped"]) == (2, 0)
    assert all(rec["protocol"]["stopping"]["policy"] == "fixed" for rec in records(out).values())


def test_pytorch_records_ops(data):
    _, cfg = params(data, "measure.stopping.runs=4")
    cfg.measure.models = model_ids(data)[:1]
    r = run_measure(cfg, "pytorch", "fp32", "1large", progress=False)
    assert r["ok"] == 1
    rec = next(iter(records(r["out"]).values()))
    assert rec["runtime"]["runtime"] == "torch" and rec["protocol"]["granularities"] == ["e2e", "op"]
    assert rec["op"]["ops"] and all(o["name"].startswith(("aten::", "prim::")) for o in rec["op"]["ops"])
    assert sum(o["mean_ms"] for o in rec["op"]["ops"]) < rec["op"]["summary"]["mean_ms"]


def test_failures_are_recorded_and_the_sweep_goes_on(data, tmp_path):
    # a private copy of the artifacts: one missing, one corrupt
    (data / "artifacts").unlink()
    shutil.copytree(_exported_root(data), data / "artifacts")
    a, b = model_ids(data)
    (data / "artifacts" / a / "tflite_fp32.tflite").unlink()
    (data / "artifacts" / b / "tflite_fp32.tflite").write_bytes(b"not a flatbuffer" * 64)
    _, cfg = params(data, "measure.granularities=[e2e]")
    r = run_measure(cfg, "tflite", "fp32", "1large", progress=False)
    assert (r["ok"], r["failed"]) == (0, 2)
    errs = {p.name.split(".")[0]: json.loads(p.read_text()) for p in r["out"].glob("*.error.json")}
    assert errs[a]["kind"] == "artifact_missing" and "tflite_fp32.tflite" in errs[a]["error"]
    assert errs[b]["kind"] == "model_invalid" and b in errs[b]["error"] and "\n" not in errs[b]["error"]
    # recorded failures are not retried unless asked; a repaired artifact is measured on retry
    assert run_measure(cfg, "tflite", "fp32", "1large", progress=False)["skipped"] == 2
    shutil.copy(_exported_root(data) / a / "tflite_fp32.tflite", data / "artifacts" / a / "tflite_fp32.tflite")
    cfg.measure.retry_failed = True
    r = run_measure(cfg, "tflite", "fp32", "1large", progress=False)
    assert (r["ok"], r["failed"]) == (1, 1)
    assert not (r["out"] / f"{a}.error.json").exists() and (r["out"] / f"{a}.json").exists()


def _exported_root(data: Path) -> Path:
    """The session's exported artifacts (the pristine copy)."""
    return Path(os.environ["LATBENCH_TEST_EXPORTED"]) / "artifacts"


@pytest.fixture(autouse=True)
def _exported_env(exported, monkeypatch):
    monkeypatch.setenv("LATBENCH_TEST_EXPORTED", str(exported))


def test_grid_points_the_device_does_not_offer_and_bad_input(data, tmp_path):
    _, cfg = params(data)
    r = run_measure(cfg, "pytorch", "fp16", "1large", progress=False)
    assert r["status"] == "not_offered" and "pytorch fp16" in r["reason"]
    assert json.loads((r["out"] / "SCENARIO.json").read_text())["status"] == "not_offered"
    ncpu = len(os.sched_getaffinity(0))
    r = run_measure(cfg, "tflite", "fp32", f"{ncpu + 1}large", progress=False)
    assert r["status"] == "not_offered" and "core set" in r["reason"]
    assert r["out"].name == f"host-tflite-cpu-{ncpu + 1}large-fp32"
    with pytest.raises(ValueError, match="^precision: unknown precision 'fp64'"):
        run_measure(cfg, "tflite", "fp64", "1large", progress=False)
    raw, _ = params(data)
    p = tmp_path / "params.yaml"
    write_params(raw, p)
    proc = subprocess.run([sys.executable, "-m", "pipelines.cli", "measure", "--framework", "tflite", "--precision",
                           "fp64", "--cores", "1large", "--params", str(p)], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 2
    assert proc.stderr.strip() == ("latbench: error: measure: precision: unknown precision 'fp64' "
                                   "(known: fp32, fp16, int8)")
    raw["measure"]["stopping"]["policy"] = "sometimes"
    write_params(raw, p)
    proc = subprocess.run([sys.executable, "-m", "pipelines.cli", "measure", "--framework", "tflite", "--precision",
                           "fp32", "--cores", "1large", "--params", str(p)], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1
    assert "measure.stopping.policy: unknown stopping policy 'sometimes'" in proc.stderr


def test_a_killed_sweep_resumes_with_one_record_per_pair(data, tmp_path):
    raw, _ = params(data, "measure.processes=3", "measure.stopping.runs=30", "measure.op_runs=20")
    p = tmp_path / "params.yaml"
    write_params(raw, p)
    out = data / "measurements" / "host" / "host-tflite-cpu-1large-fp32"
    cmd = [sys.executable, "-m", "pipelines.cli", "measure", "--framework", "tflite", "--precision", "fp32",
           "--cores", "1large", "--params", str(p), "-q"]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    deadline = time.time() + 120
    # kill once some processes are done but the sweep is not (a finished e2e process, no record of that pair yet)
    while time.time() < deadline and proc.poll() is None:
        if list(out.glob(".work/*/p1.json")):
            break
        time.sleep(0.05)
    assert proc.poll() is None, "the sweep finished before it could be killed"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    kept = list(out.glob(".work/*/p*.json"))
    assert kept
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    recs = records(out)
    assert sorted(recs) == model_ids(data)
    assert not list(out.glob("*.error.json")) and not (out / ".work").exists()
    for rec in recs.values():  # every pair has exactly the protocol's processes and runs
        assert rec["protocol"]["processes"] == 3 and [len(s) for s in rec["e2e"]["samples_ns"]] == [10, 10, 10]
    names = [p.name for p in out.iterdir() if p.name.endswith(".json") and ".trace" not in p.name]
    assert len(names) == len(set(names)) == 3  # 2 records + SCENARIO.json


def test_chunks_finish_their_pairs_before_the_next_chunk_starts(data):
    """chunk=1: each pair is measured to its end before the next pair's first process (a sweep
    stopped between chunks leaves whole pairs); chunk=0: the processes of both pairs interleave."""
    spans = {}
    for chunk in (1, 0):
        _, cfg = params(data / str(chunk), "measure.granularities=[e2e]", f"measure.chunk={chunk}")
        r = run_measure(cfg, "tflite", "fp32", "1large", models_dir=data / "models", progress=False,
                        artifacts_dir=data / "artifacts", out_root=data / str(chunk) / "measurements")
        assert r["ok"] == 2 and r["failed"] == 0
        recs = records(r["out"])
        assert {rec["protocol"]["chunk"] for rec in recs.values()} == {chunk}
        spans[chunk] = sorted((rec["e2e"]["start_ns"], rec["e2e"]["end_ns"]) for rec in recs.values())
    (a0, a1), (b0, b1) = spans[1]
    assert a1 < b0  # one after the other
    (a0, a1), (b0, b1) = spans[0]
    assert b0 < a1  # the second pair started before the first had finished


def test_a_negative_chunk_is_refused():
    with pytest.raises(ValueError, match="chunk: must be >= 0"):
        params(Path("unused"), "measure.chunk=-1")


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs this process may use")
def test_a_process_computing_on_fewer_threads_than_the_scenario_is_refused(data):
    """A real runtime process run with one thread where the scenario (2large) asks for two,
    as op mode did before the builtin kernels got their thread count: the pair fails with
    kind `threads` and no record is kept."""
    from pipelines.devices import make_device

    _, cfg = params(data, "measure.granularities=[e2e,op]")
    device = make_device(cfg.device)
    real_run = device.run

    def narrow(framework, artifact, *, scenario, mode="e2e", **kw):
        if mode == "op":  # the op process runs single-threaded, the e2e ones as asked
            from dataclasses import replace
            scenario = replace(scenario, threads=1)
        return real_run(framework, artifact, scenario=scenario, mode=mode, **kw)

    device.run = narrow
    r = run_measure(cfg, "tflite", "fp32", "2large", device=device, progress=False)
    assert (r["ok"], r["failed"]) == (0, 2)
    for p in r["out"].glob("*.error.json"):
        err = json.loads(p.read_text())
        assert err["kind"] == "threads" and "computed on 1 thread(s), the scenario asks for 2" in err["error"]
    assert not records(r["out"])
    # measured as asked, the same pairs are kept, op records included
    cfg.measure.retry_failed = True
    r = run_measure(cfg, "tflite", "fp32", "2large", progress=False)
    assert (r["ok"], r["failed"]) == (2, 0)
    for rec in records(r["out"]).values():
        assert rec["op"]["end"]["compute_threads_observed"] >= 2


def _busy_loop(cpu: int) -> subprocess.Popen:
    """Another process keeping one CPU busy (pinned there before it starts spinning)."""
    return subprocess.Popen([sys.executable, "-c", "while True: pass"],
                            preexec_fn=lambda: os.sched_setaffinity(0, {cpu}))


def test_a_busy_core_is_seen_measured_again_and_refused(data):
    """A real busy loop on the measured core: every process sees other processes' CPU time on
    its pinned core, is measured again (load.retries) and the pair is refused (kind loaded),
    never kept; the stage's output counts both. Without the loop the same pairs are kept,
    with the load each process saw in the record."""
    # processes long enough (60 runs) that /proc/stat's 10 ms ticks see the loop's share whatever
    # the scheduler does in the first milliseconds
    _, cfg = params(data, "measure.granularities=[e2e]", "measure.load.check=true", "measure.load.retries=1",
                    "measure.load.wait_s=0.1", "measure.load.max_foreign_busy=0.2", "measure.stopping.runs=60")
    cpu = sorted(os.sched_getaffinity(0))[0]  # 1large is the first allowed CPU
    loop = _busy_loop(cpu)
    try:
        time.sleep(0.3)
        r = run_measure(cfg, "tflite", "fp32", "1large", progress=False)
    finally:
        loop.kill()
        loop.wait()
    out = r["out"]
    # every pair is refused; a process the scheduler let through (the loop holds its CPU only most
    # of the time) moves on to the pair's next process, so a pair may be measured again more than once
    assert (r["ok"], r["failed"], r["refused"]) == (0, 2, 2) and r["remeasured"] >= 2
    for p in out.glob("*.error.json"):
        err = json.loads(p.read_text())
        m = re.search(r"taken under load 2 times, last: other processes used (\d+)% of CPUs \[(\d+)\]", err["error"])
        assert err["kind"] == "loaded" and m, err["error"]
        assert int(m.group(1)) >= 20 and int(m.group(2)) == cpu
    assert not records(out)
    log = (out / "measure.log").read_text()
    # each loaded process is either measured again or ends its pair's refusal
    assert log.count("loaded ") == r["remeasured"] + 2 and "(2 refused as taken under load)" in log

    cfg.measure.load.check = False  # the loop is gone; the shared test machine may still be busy
    r = run_measure(cfg, "tflite", "fp32", "1large", progress=False)  # `loaded` is retried by any rerun
    assert (r["ok"], r["failed"], r["refused"]) == (2, 0, 0)
    for rec in records(out).values():
        load = rec["load"]
        assert load["observed"] and load["processes"] == 2 and load["remeasured"] == 0
        assert load["check"]["check"] is False and load["check"]["max_foreign_busy"] == 0.2  # held to none
        assert 0 <= load["max_foreign_busy_frac"] <= 1 and load["max_loadavg"] is not None
        assert load["cpu_freq_khz"] == "unknown" or load["cpu_freq_khz"]["min"] > 0
        for proc in rec["e2e"]["per_process"]:
            assert proc["load"]["cpus"] == [cpu] and proc["load"]["own_cpu_s"] > 0


def test_a_slow_episode_seen_by_the_speed_probe_is_measured_again_and_refused(data, monkeypatch):
    """The VM's slow episodes show in no load figure, only in the speed probe. A reference no
    real probe can reach (as if the cores had once been far faster) makes every process look
    taken in an episode: each is measured again and the pair refused (kind loaded), never kept.
    With the real reference the same pairs are kept, each process with its probes recorded."""
    from pipelines import speed_probe

    _, cfg = params(data, "measure.granularities=[e2e]", "measure.load.check=true", "measure.load.retries=1",
                    "measure.load.wait_s=0.05", "measure.load.max_foreign_busy=1.0", "measure.load.max_steal=1.0",
                    "measure.load.max_slowdown=0.5", "measure.load.speed_wait_s=0.3")
    cpu = sorted(os.sched_getaffinity(0))[0]
    impossible = speed_probe.SpeedProbe([cpu])
    for _ in range(speed_probe.WINDOW):  # a history no real probe comes near: every process reads slow
        impossible.observe({cpu: 1e-7})
    impossible.calibrated = True
    monkeypatch.setitem(speed_probe._PROBES, (cpu,), impossible)
    r = run_measure(cfg, "tflite", "fp32", "1large", progress=False)
    assert (r["ok"], r["failed"], r["refused"], r["remeasured"]) == (0, 2, 2, 2)
    # before each of the 4 processes the stage waited (0.3 s at most) for the episode to pass
    assert r["speed_waits"] == 4 and r["speed_wait_s"] >= 4 * 0.3
    assert (r["out"] / "measure.log").read_text().count("slow: measuring anyway") == 4
    for p in r["out"].glob("*.error.json"):
        err = json.loads(p.read_text())
        assert err["kind"] == "loaded" and re.search(
            rf"last: CPUs \[{cpu}\] ran the speed probe \d+% slower than their fastest \(limit 50%\): a slow episode",
            err["error"]), err["error"]
    assert not records(r["out"])

    monkeypatch.setitem(speed_probe._PROBES, (cpu,), speed_probe.SpeedProbe([cpu]))
    cfg.measure.load.check = False  # the shared test machine may have an episode of its own now
    r = run_measure(cfg, "tflite", "fp32", "1large", progress=False)
    assert (r["ok"], r["failed"]) == (2, 0)
    for rec in records(r["out"]).values():
        assert rec["load"]["max_probe_slowdown"] >= 0
        for proc in rec["e2e"]["per_process"]:
            probe = proc["load"]["probe"]
            assert set(probe["before_s"]) == set(probe["after_s"]) == {str(cpu)} and probe["slowdown"] >= 0


def test_the_stage_waits_for_a_slow_episode_to_pass_before_a_process(data, monkeypatch):
    """The probe says slow for its first readings, then fast (scripted readings of the probe,
    the one part a test cannot make the VM do on demand): the stage polls until the cores run
    at speed, then measures; nothing is refused or measured twice."""
    from pipelines import speed_probe
    from pipelines.measure import observe

    class Episode(speed_probe.SpeedProbe):
        def __init__(self, cpus, slow_readings):
            super().__init__(cpus)
            self.best, self.calibrated, self.left = {c: 1.0 for c in cpus}, True, slow_readings

        def sample(self):
            self.left -= 1
            return {c: 2.0 if self.left >= 0 else 1.0 for c in self.cpus}

    _, cfg = params(data, "measure.granularities=[e2e]", "measure.load.check=true", "measure.load.max_foreign_busy=1.0",
                    "measure.load.max_steal=1.0", "measure.load.max_slowdown=0.3", "measure.load.speed_wait_s=30")
    cpu = sorted(os.sched_getaffinity(0))[0]
    monkeypatch.setitem(speed_probe._PROBES, (cpu,), Episode([cpu], slow_readings=3))
    monkeypatch.setattr(observe, "SPEED_POLL_S", 0.01)
    r = run_measure(cfg, "tflite", "fp32", "1large", progress=False)
    assert (r["ok"], r["failed"], r["remeasured"], r["speed_waits"]) == (2, 0, 0, 1)
    log = (r["out"] / "measure.log").read_text()
    assert re.search(rf"waited \d+ s for CPUs \[{cpu}\] to run at speed \(they do\)", log), log
