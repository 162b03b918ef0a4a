"""``latbench calibrate`` (shelf/calibrate/): the pool, the sampling, the fit and the entry, and one
calibration end to end through the adbd emulator (the emulated phone computes on this machine:
the mechanics, not a phone's figures).

Checked: options are parsed with one-line errors; the pool is a pure function of its spec and a
calibration keeps its own; the first round spreads over the pool and later batches go where the
bootstrap model is least sure, never to a held-out network; the rescaling of a zoo entry recovers
a known scale; a user's shelf is read over the committed one, its scale applied to predictions
and breakdowns alike; and a calibration through adb measures, states its held-out accuracy from
its own held_out.json, writes an entry `latbench predict` reads, and resumes without measuring
again.
"""
from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pytest

from shelf.calibrate import CalibrateError
from shelf.calibrate.fitting import cv_transfer, fit_scale, folds, transfer_sources
from shelf.calibrate.pool import DEFAULT_SIZES, build_pool, parse_sizes
from shelf.calibrate.sampling import Uncertainty, held_out_order, next_batch, spread
from shelf.calibrate.session import Spec, State, parse_budget


# ---------------------------------------------------------------- options
def test_budget_and_pool_options_parse_or_name_the_option():
    assert parse_budget("15m") == 900 and parse_budget("1h") == 3600 and parse_budget("90s") == 90
    assert parse_budget("600") == 600
    for bad in ("soon", "5s", "30d"):
        with pytest.raises(CalibrateError, match="--budget"):
            parse_budget(bad)
    assert parse_sizes(None) == DEFAULT_SIZES
    assert parse_sizes(["synthetic=40", "zoo=2"]) == {"synthetic": 40, "zoo": 2}
    for bad in ("synthetic", "resnet=3", "zoo=0", "zoo=x"):
        with pytest.raises(CalibrateError, match="--pool"):
            parse_sizes([bad])


# ---------------------------------------------------------------- the pool
@pytest.fixture(scope="module")
def gen_cfg():
    from pipelines.config import compose, validate

    return validate(compose(["generator=[synthetic,zoo,nasbench201,pytorch,transformer,release]"])).generator


def test_pool_is_a_function_of_its_spec_and_a_calibration_keeps_its_own(gen_cfg, tmp_path):
    a = build_pool(tmp_path / "a", gen_cfg, {"synthetic": 12, "zoo": 1}, seed=1)
    b = build_pool(tmp_path / "b", gen_cfg, {"synthetic": 12, "zoo": 1}, seed=1)
    assert a.ids == b.ids and len(a.ids) > 12 and a.matrix().shape == (len(a.ids), 3 + 2 * len(a.op_types))
    assert {a.source_of(m) for m in a.ids} == {"synthetic", "zoo"}
    assert a.graph(a.ids[0]).model_id == a.ids[0]
    release = build_pool(tmp_path / "c", gen_cfg, {"synthetic": 12}, seed=0)
    assert not set(release.ids) & set(a.ids)  # seed 1 draws none of the release's (seed 0) networks
    assert build_pool(tmp_path / "a", gen_cfg, {"synthetic": 12, "zoo": 1}, seed=1).ids == a.ids  # read back
    with pytest.raises(CalibrateError, match="pool.json.*--work"):
        build_pool(tmp_path / "a", gen_cfg, {"synthetic": 13, "zoo": 1}, seed=1)


def test_state_refuses_another_calibration_in_its_work_folder(tmp_path):
    spec = Spec("host-tflite-cpu-1large-fp32", "host", {"synthetic": 10}, 1)
    s = State(tmp_path, spec)
    s.rounds.append({"round": 0, "calibration": ["a"], "held_out": ["b"], "done": True})
    s.spent_s = 12.5
    s.save()
    again = State(tmp_path, Spec("host-tflite-cpu-1large-fp32", "host", {"synthetic": 10}, 1))
    assert again.rounds == s.rounds and again.spent_s == 12.5 and again.ids("held_out") == ["b"]
    with pytest.raises(CalibrateError, match="state.json.*--work"):
        State(tmp_path, Spec("host-tflite-cpu-1large-int8", "host", {"synthetic": 10}, 1))


# ---------------------------------------------------------------- sampling
def test_spread_covers_the_pool_and_skips_the_excluded():
    rng = np.random.default_rng(0)
    X = np.vstack([rng.normal(0, 0.1, (40, 3)), rng.normal(5, 0.1, (3, 3))])  # a crowd and a far corner
    picked = spread(X, 5, exclude=[40])
    assert len(set(picked)) == 5 and 40 not in picked
    assert {41, 42} & set(picked)  # the far corner is represented, though it is 3 of 43
    assert spread(X, 0) == [] and len(spread(X, 100)) == 43


def test_batches_go_where_the_bootstrap_is_least_sure():
    n_types = 2
    rng = np.random.default_rng(1)
    macs = rng.uniform(1, 10, (60, n_types))
    macs[50:, 1] = 0.0  # ten networks without the second op type ...
    macs[:50, 1] = rng.uniform(0, 0.05, 50)  # ... which the measured ones barely hold
    ops = np.ones((60, n_types))
    X = np.hstack([np.log1p(np.c_[macs.sum(1), macs.sum(1), macs.sum(1)]), np.log1p(macs), np.log1p(ops)])
    X[50:, 4] = np.log1p(rng.uniform(20, 40, 10))  # the ten: big second op type, never measured
    y = 0.5 + macs[:40, 0] * 2 + macs[:40, 1] * 3
    u = Uncertainty(seed=0).fit(X[:40], y, n_types).score(X)
    assert u[50:].mean() > 3 * u[40:50].mean()
    batch = next_batch(X, u, measured=range(40), candidates=range(40, 60), k=4)
    assert len(set(batch)) == 4 and set(batch) <= set(range(40, 60)) and sum(b >= 50 for b in batch) >= 3
    order = held_out_order(60, seed=1)
    assert sorted(order) == list(range(60)) and order == held_out_order(60, seed=1) != held_out_order(60, seed=2)


# ---------------------------------------------------------------- fitting
def test_the_rescaling_of_a_zoo_entry_recovers_a_known_scale():
    rng = np.random.default_rng(2)
    p = rng.uniform(1, 50, 40)
    y = 1.7 * p + 0.8
    a, b = fit_scale(p, y)
    assert a == pytest.approx(1.7, rel=1e-6) and b == pytest.approx(0.8, rel=1e-5)
    s = cv_transfer("usc-x-tflite-cpu-1large-fp32", p, y * rng.normal(1, 0.02, 40), k=5, seed=0)
    assert s.name == "transfer:usc-x-tflite-cpu-1large-fp32" and 0 < s.cv_mape < 5 and s.detail["a"] > 1.5
    with pytest.raises(CalibrateError, match="grow"):
        fit_scale(p, 100.0 - p)  # slower when the zoo says faster: no positive scale
    assert sorted(np.concatenate(folds(11, 5, 0)).tolist()) == list(range(11))


def test_transfer_sources_match_framework_accelerator_and_precision():
    class S:
        def scenarios(self):
            return ["usc-pixel4-tflite-cpu-1large-fp32", "usc-pixel4-tflite-gpu-fp16", "host-tflite-cpu-1large-int8",
                    "host-onnxruntime-cpu-1large-fp32", "host-tflite-cpu-1large-fp32"]

    assert transfer_sources(S(), "tflite", "cpu", "fp32", exclude="host-tflite-cpu-1large-fp32") == [
        "usc-pixel4-tflite-cpu-1large-fp32"]


def test_failed_networks_are_named_with_their_reason(tmp_path):
    """A round's failures are reported by name and reason: the sweep's <model>.error.json and the
    exporter's artifacts/<model>/<format>.error.json."""
    from types import SimpleNamespace as NS

    from shelf.calibrate.measuring import Bench
    from shelf.calibrate.session import failures_line

    bench = Bench(NS(measure=NS(load=NS(check=True))), NS(name="host"),
                  NS(scenario_id="host-tflite-cpu-1large-fp32", framework="tflite", accelerator="cpu", precision="fp32"),
                  tmp_path, NS(ids=["m1", "m2", "m3"]))
    assert bench.failures() == {} and failures_line({}, bench.out).startswith("no failure on record")
    bench.out.mkdir(parents=True)
    (bench.out / "m1.error.json").write_text(json.dumps({"model_id": "m1", "kind": "runtime", "error": "SIGSEGV"}))
    art = tmp_path / "artifacts" / "m2"
    art.mkdir(parents=True)
    (art / f"{bench.format}.error.json").write_text(json.dumps({"error": "IRError: no lowering"}))
    assert bench.failures() == {"m1": "runtime: SIGSEGV", "m2": "export: IRError: no lowering"}
    line = failures_line(bench.failures(), bench.out)
    assert line.startswith("2 network(s) failed") and "m1: runtime: SIGSEGV" in line and str(bench.out) in line


# ---------------------------------------------------------------- the user's shelf
def test_a_user_shelf_is_read_over_the_committed_one_with_its_scale(gen_cfg, tmp_path, monkeypatch):
    from shelf import ShelfError
    from shelf.report import list_line
    from shelf.store import SHELF_DIR, Shelf

    base = Shelf()
    sid = "host-tflite-gpu-fp32"
    user = tmp_path / "mine"
    shutil.copytree(SHELF_DIR / base.entry(sid)["folder"], user / "x")
    entry = {**base.entry(sid), "folder": "x", "origin": "calibration", "scale": {"a": 2.0, "b": 1.0, "source": sid},
             "training": {"device": "mine", "rounds": 3, "networks": 30, "transfer_from": sid}}
    (user / "INDEX.json").write_text(json.dumps({"schema": "latbench.shelf/1", "scenarios": {sid: entry}}))
    monkeypatch.setenv("LATBENCH_SHELF", str(user))
    both = Shelf.open()
    assert both.root(sid) == user and both.shadowed[sid] == SHELF_DIR and len(both.scenarios()) == len(base.scenarios())
    held = json.loads((SHELF_DIR / base.entry(sid)["folder"] / "held_out.json").read_text())
    assert held["names"]
    graph = _a_graph_for(gen_cfg)
    ms, scaled = base.predict([graph], sid)[0], both.predict([graph], sid)[0]
    assert scaled == pytest.approx(2 * ms + 1)
    assert both.breakdown(graph, sid)["predicted_ms"].sum() == pytest.approx(scaled)
    line = list_line(both, sid)
    assert "calibrated" in line and f"rescaled from {sid}" in line and "replaces the entry" in line
    monkeypatch.setenv("LATBENCH_SHELF", str(tmp_path / "none"))
    assert Shelf.open().root(sid) == SHELF_DIR  # no user shelf there: the committed one alone
    with pytest.raises(ShelfError, match="no predictor shelf"):
        Shelf.open(user=tmp_path / "none")
    entry["scale"] = {"a": -1, "b": 0}
    (user / "INDEX.json").write_text(json.dumps({"schema": "latbench.shelf/1", "scenarios": {sid: entry}}))
    with pytest.raises(ShelfError, match="scale needs a > 0"):
        Shelf.open(user=user).predict([graph], sid)


def _a_graph_for(gen_cfg):
    """A NAS-Bench-201 cell: the kind of network host-tflite-gpu-fp32's entry was fitted on."""
    import dataclasses

    from generators.catalog import SOURCES

    return next(SOURCES.get("nasbench201").generate(dataclasses.replace(gen_cfg.nasbench201, n=1), 5))


# ---------------------------------------------------------------- end to end, through adb
def test_calibration_through_adb_measures_fits_states_and_resumes(tmp_path):
    from adbd_emulator import AdbServer, EmulatorProcess
    from leaderboard.metrics import compute
    from pipelines.config import compose, validate
    from pipelines.devices import make_device
    from pipelines.measure import stage_scenario
    from shelf.calibrate import calibrate
    from shelf.store import Shelf

    from support.native import build_native

    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("the emulated phone needs two CPUs of this machine (a small and a large cluster)")
    build_native()  # the runtime the phone is given
    server = AdbServer().start()
    emu = EmulatorProcess(tmp_path / "phone").start()
    try:
        cfg = validate(compose([
            "generator=[nasbench201]", "device=pixel4", f"device.serial={emu.serial}",
            f"device.adb_server={server.address}", "measure.processes=1", "measure.warmup=1",
            "measure.stopping.policy=fixed", "measure.stopping.runs=3", "measure.granularities=[e2e]",
            "measure.points={}", "measure.timeout=120",
            "measure.load.check=false"]))  # the emulated phone computes on this shared test machine
        device = make_device(cfg.device)
        device.retry_wait = 0.2
        scenario = stage_scenario(device, "tflite", "fp32", "1large").scenario
        lines: list[str] = []
        # a short fit: the mechanics, not the predictor's accuracy, are under test
        kw = dict(work=tmp_path / "work", shelf_dir=tmp_path / "shelf", budget_s=120,
                  pool_sizes={"nasbench201": 24}, seed=1, first=10, batch=4, holdout=0.25, reserve_s=110, zoo=None,
                  folds=2, params={"additive_mlp": {"epochs": 20}}, say=lines.append, progress=False)
        out = calibrate(cfg, device, scenario, **kw)
    finally:
        emu.kill()
        server.stop()
    sid = scenario.scenario_id
    assert sid == "pixel4-tflite-cpu-1large-fp32" and out.rounds == 1  # the reserve leaves room for one round
    assert (out.calibration, out.held_out) == (10, 3) and any(l.startswith("round 0: measured 13 of 13") for l in lines)
    e = json.loads((tmp_path / "shelf" / "INDEX.json").read_text())["scenarios"][sid]
    assert e["origin"] == "calibration" and e["predictor"] == "additive_mlp" and e["training"]["networks"] == 10
    assert e["training"]["generator_sources"] == {"nasbench201": 10} and "additive_mlp" in e["training"]["cv"]
    held = json.loads((tmp_path / "shelf" / e["folder"] / "held_out.json").read_text())
    state = json.loads((tmp_path / "work" / "state.json").read_text())
    assert sorted(held["model_ids"]) == sorted(state["rounds"][0]["held_out"])
    assert not set(held["model_ids"]) & set(state["rounds"][0]["calibration"])
    again = compute(np.asarray(held["measured_ms"]), np.asarray(held["predicted_ms"]), ["mape"])["mape"]
    assert e["accuracy"]["mape"] == pytest.approx(again) and e["accuracy"]["held_out_networks"] == 3
    shelf = Shelf.open(user=tmp_path / "shelf")
    from generators.ir import Graph

    g = Graph.load(next((tmp_path / "work" / "models" / "nasbench201").glob("*.json")))
    assert shelf.predict([g], sid)[0] > 0
    # resumed with the same spec: nothing measured again, the same entry fitted (no phone needed)
    lines.clear()
    out2 = calibrate(cfg, device, scenario, **kw)
    assert out2.calibration == 10 and any("resuming" in l for l in lines) and not any(l.startswith("round") for l in lines)
