"""Faults and bad input of the adb device: a phone that vanishes mid-run or mid-sweep (the adbd
emulator is SIGKILLed: its TCP connection drops as when a cable is pulled), an unknown serial, a
phone without ``taskset``, a full phone disk, a run that exceeds its timeout. Every error is one
line with a ``kind`` the measure stage records.
"""
from __future__ import annotations

import json
import os
import re
import threading
import time
from pathlib import Path

import pytest

from adbd_emulator import AdbServer, EmulatorProcess, model_files
from pipelines.devices import make_device
from pipelines.devices.topology import core_set
from pipelines.runners.records import NativeRunError
from pipelines.scenarios import Scenario
from support.adb import adb_server, exported, model  # noqa: F401 (fixtures)
from support.native import build_native


# adb_server, exported and model: support/adb.py
@pytest.fixture(scope="module", autouse=True)
def runner():
    build_native()


def emulator(tmp_path, server, **phone) -> EmulatorProcess:
    emu = EmulatorProcess(tmp_path / "phone", **phone).start()
    emulator.started.append((emu, server))
    return emu


emulator.started = []


@pytest.fixture(autouse=True)
def _stop_emulators():
    yield
    import adbutils

    for emu, server in emulator.started:
        emu.kill()
        adbutils.AdbClient(host="127.0.0.1", port=server.port).disconnect(emu.serial)
    emulator.started.clear()


def device(serial: str, server: AdbServer, **kw):
    dev = make_device({"kind": "adb", "name": "pixel4", "serial": serial, "adb_server": server.address})
    dev.retry_wait = 0.2
    for k, v in kw.items():
        setattr(dev, k, v)
    return dev


def scenario(dev, label="1large") -> Scenario:
    cs = core_set(dev.clusters(), label)
    return Scenario(dev.name, "tflite", "cpu", "fp32", cores=cs.label, cpus=cs.cpus, threads=cs.n_cores)


def one_line(err: BaseException) -> str:
    text = str(err)
    assert "\n" not in text and text
    return text


# ---------------------------------------------------------------- bad input
def test_unknown_serial_is_one_line_naming_it(adb_server):
    dev = device("NOSUCHPHONE0042", adb_server)
    with pytest.raises(NativeRunError) as e:
        dev.clusters()
    assert e.value.kind == "device_missing"
    assert re.search(r"no phone with serial 'NOSUCHPHONE0042' on the adb server 127\.0\.0\.1:\d+ .*adb devices",
                     one_line(e.value))


def test_missing_serial_is_a_config_error():
    from pipelines.config import compose, validate

    cfg = validate(compose(["device=pixel4"]))  # conf/device/pixel4.yaml leaves the serial to the user
    with pytest.raises(ValueError, match=r"^device\.serial: .*adb devices"):
        make_device(cfg.device)


def test_a_phone_without_taskset_is_refused_before_the_sweep(tmp_path, adb_server):
    emu = emulator(tmp_path, adb_server, has_taskset=False)
    dev = device(emu.serial, adb_server)
    with pytest.raises(NativeRunError) as e:
        with dev.lock(tmp_path / ".lock"):
            pass
    assert e.value.kind == "no_taskset" and "has no taskset" in one_line(e.value)


def test_a_full_phone_disk_is_one_line(tmp_path, adb_server, model):
    emu = emulator(tmp_path, adb_server, data_kb=4096)  # 4 MiB: not even the runtime fits
    dev = device(emu.serial, adb_server)
    with pytest.raises(NativeRunError) as e:
        dev.run("tflite", model, scenario=scenario(dev), warmup=1, runs=2, records_path=tmp_path / "r.jsonl",
                timeout=60)
    assert e.value.kind == "disk_full"
    assert re.search(r"disk is full: \d+ MiB free at /data/local/tmp/latbench, \d+ MiB needed", one_line(e.value))
    assert not (tmp_path / "r.jsonl").exists()


def test_a_core_set_the_phone_cannot_pin_is_kind_cpus(tmp_path, adb_server, model):
    """The emulated Snapdragon 855 lists CPU 7, which this machine's taskset cannot pin: the
    phone's own error comes back as one line of kind cpus (as on the host)."""
    if 7 in os.sched_getaffinity(0):
        pytest.skip("this machine has a CPU 7, so the emulated prime core is pinnable")
    emu = emulator(tmp_path, adb_server, profile="snapdragon855")
    dev = device(emu.serial, adb_server)
    with pytest.raises(NativeRunError) as e:
        dev.run("tflite", model, scenario=scenario(dev, "1large"), warmup=1, runs=2,
                records_path=tmp_path / "r.jsonl", timeout=60)
    assert e.value.kind == "cpus" and "0x80" in one_line(e.value)


def test_a_timeout_kills_the_process_on_the_phone(tmp_path, adb_server, model):
    emu = emulator(tmp_path, adb_server)
    dev = device(emu.serial, adb_server, timeout_slack=0.5)
    t0 = time.monotonic()
    with pytest.raises(NativeRunError) as e:
        dev.run("tflite", model, scenario=scenario(dev), warmup=1, runs=10 ** 6, records_path=tmp_path / "r.jsonl",
                timeout=1.0)
    assert e.value.kind == "timeout" and "timed out after 1.0 s" in one_line(e.value)
    assert time.monotonic() - t0 < 30
    time.sleep(0.3)
    import subprocess

    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    assert not [ln for ln in ps.splitlines() if "latbench-run" in ln and str(emu.root) in ln]  # killed


# ---------------------------------------------------------------- disconnects
def _kill_when_running(emu: EmulatorProcess, restart_after: float | None) -> threading.Thread:
    """Kills the emulator once latbench-run runs on it (its run folder exists), and starts it
    again on the same port after ``restart_after`` seconds (None: leaves it dead)."""
    def watch():
        run_dir = emu.root / "data/local/tmp/latbench/run"
        deadline = time.monotonic() + 60
        while not run_dir.exists() and time.monotonic() < deadline:
            time.sleep(0.005)
        emu.kill()
        if restart_after is not None:
            time.sleep(restart_after)
            emu.start()

    t = threading.Thread(target=watch, daemon=True)
    t.start()
    return t


def test_a_phone_that_comes_back_is_retried(tmp_path, adb_server, model):
    emu = emulator(tmp_path, adb_server)
    dev = device(emu.serial, adb_server)
    sc = scenario(dev)
    watcher = _kill_when_running(emu, restart_after=0.3)
    run = dev.run("tflite", model, scenario=sc, warmup=2, runs=40, records_path=tmp_path / "r.jsonl", timeout=120)
    watcher.join(5)
    assert len(run.runs) == 40 and run.end["affinity_ok"] is True  # a whole run from the second attempt
    assert run.meta["device"]["serial"] == emu.serial


def test_a_phone_that_stays_away_fails_with_kind_device_then_fast(tmp_path, adb_server, model):
    emu = emulator(tmp_path, adb_server)
    dev = device(emu.serial, adb_server)
    sc = scenario(dev)
    watcher = _kill_when_running(emu, restart_after=None)
    with pytest.raises(NativeRunError) as e:
        dev.run("tflite", model, scenario=sc, warmup=2, runs=40, records_path=tmp_path / "r.jsonl", timeout=120)
    watcher.join(5)
    assert e.value.kind == "device"
    assert re.search(r"device pixel4 \(serial 127\.0\.0\.1:\d+\): lost the adb connection during the run of "
                     r"tflite_fp32\.tflite \(gave up after 3 attempts\)", one_line(e.value))
    t0 = time.monotonic()  # later runs of the sweep fail at once (one reconnect attempt each)
    with pytest.raises(NativeRunError) as e2:
        dev.run("tflite", model, scenario=sc, warmup=1, runs=2, records_path=tmp_path / "r2.jsonl", timeout=120)
    assert e2.value.kind == "device" and "given up earlier" in one_line(e2.value)
    assert time.monotonic() - t0 < 10


def test_measure_sweep_records_a_vanished_phone_and_a_rerun_completes(tmp_path, adb_server, exported):
    """The emulator is killed after the first pair of a sweep: the other pair is recorded as
    failed (kind device) and the sweep ends normally; after the phone is back, a rerun measures
    what failed and leaves exactly one record per (model, scenario)."""
    from pipelines.config import compose, validate
    from pipelines.measure import run_measure

    emu = emulator(tmp_path, adb_server)
    overrides = [f"data_dir={exported}", "generator=[nasbench201]", "generator.nasbench201.n=2", "device=pixel4",
                 f"device.serial={emu.serial}", f"device.adb_server={adb_server.address}", "measure.processes=1",
                 "measure.warmup=1", "measure.stopping.policy=fixed", "measure.stopping.runs=2",
                 "measure.granularities=[e2e]", "measure.timeout=120"]
    cfg = validate(compose(overrides))
    dev = make_device(cfg.device)
    dev.retry_wait = 0.2
    calls = []
    real_run = dev.run

    def run_then_vanish(*a, **kw):  # the phone disappears as the second measuring process starts
        calls.append(a[1])
        if len(calls) == 2:
            emu.kill()
        return real_run(*a, **kw)

    dev.run = run_then_vanish
    out_root = tmp_path / "measurements" / "pixel4"
    res = run_measure(cfg, "tflite", "fp32", "1large", device=dev, progress=False, out_root=out_root)
    assert (res["ok"], res["failed"]) == (1, 1)
    out = Path(res["out"])
    errors = [json.loads(p.read_text()) for p in out.glob("*.error.json")]
    assert len(errors) == 1 and errors[0]["kind"] == "device" and "gave up after 3 attempts" in errors[0]["error"]
    assert "failed" in (out / "measure.log").read_text()

    emu.start()  # the phone is back; rerun (a device failure is worth retrying)
    cfg = validate(compose(overrides + ["measure.retry_failed=true"]))
    res2 = run_measure(cfg, "tflite", "fp32", "1large", progress=False, out_root=out_root)
    assert (res2["ok"], res2["failed"], res2["skipped"]) == (1, 0, 1)
    records = sorted(p.stem for p in out.glob("*.json") if re.fullmatch(r"[0-9a-f]{16}", p.stem))
    assert records == sorted(p.parent.name for p in model_files(exported))
    assert not list(out.glob("*.error.json"))
    assert not (out / ".work").exists() or not any((out / ".work").iterdir())
