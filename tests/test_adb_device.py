"""The adb device against the real adb server and the real adbutils client, with the test
suite's adbd emulator (tests/adbd_emulator.py) playing the phone.

Checked: the emulator speaks adb to the real server (shell, push, pull, list, stat); the device
reads a phone's clusters over adb exactly as from the recorded dump; one run pushes the runtime,
its library and the model, pins with ``taskset`` (every thread of the measuring process on the
scenario's CPUs), pulls records and trace, cleans up, and carries the phone's provenance; its
records have the same form as the host's; and the full ``measure`` stage runs through it.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path

import pytest

from adbd_emulator import AdbServer, EmulatorProcess
from pipelines.devices import AdbDevice, DeviceBusy, make_device
from pipelines.devices.android import sysfs_tree
from pipelines.devices.topology import read_clusters
from pipelines.runners.litert import run_native
from pipelines.scenarios import Scenario
from support.adb import adb_server, exported, model  # noqa: F401 (fixtures)
from support.native import build_native

DATA = Path(__file__).resolve().parent / "data" / "sysfs"


# ---------------------------------------------------------------- fixtures
# adb_server, exported and model (a NAS-Bench-201 network, fp32 .tflite): support/adb.py
@pytest.fixture(scope="module")
def runner() -> Path:
    return Path(build_native().strip().splitlines()[-1])


def _disconnect(server: AdbServer, serial: str) -> None:
    import adbutils

    adbutils.AdbClient(host="127.0.0.1", port=server.port).disconnect(serial)


@pytest.fixture
def phone(tmp_path, adb_server):
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("the emulated phone needs two CPUs of this machine (a small and a large cluster)")
    emu = EmulatorProcess(tmp_path / "phone").start()
    yield emu
    emu.kill()
    _disconnect(adb_server, emu.serial)


def device_for(emu: EmulatorProcess, server: AdbServer, **kw) -> AdbDevice:
    dev = make_device({"kind": "adb", "name": "pixel4", "serial": emu.serial, "adb_server": server.address})
    dev.retry_wait = 0.2
    for k, v in kw.items():
        setattr(dev, k, v)
    return dev


def scenario_on(dev: AdbDevice, label: str) -> Scenario:
    from pipelines.devices.topology import core_set

    cs = core_set(dev.clusters(), label)
    return Scenario(dev.name, "tflite", "cpu", "fp32", cores=cs.label, cpus=cs.cpus, threads=cs.n_cores)


# ---------------------------------------------------------------- the emulator and adb
def test_emulator_speaks_adb_to_the_real_server(phone, adb_server, tmp_path):
    import adbutils

    client = adbutils.AdbClient(host="127.0.0.1", port=adb_server.port)
    assert "connected" in client.connect(phone.serial, timeout=5)
    assert {d.serial: d.state for d in client.list()}[phone.serial] == "device"
    d = client.device(phone.serial)
    assert d.getprop("ro.product.model") == "Pixel 4"
    assert d.shell("cd /data/local/tmp && pwd") == "/data/local/tmp"
    blob = os.urandom(300_000)  # several sync DATA chunks and several adb WRTE packets
    d.sync.push(blob, "/data/local/tmp/x/blob.bin", mode=0o600)
    assert d.sync.stat("/data/local/tmp/x/blob.bin").size == len(blob)
    assert [f.path for f in d.sync.list("/data/local/tmp/x") if f.path not in (".", "..")] == ["blob.bin"]
    assert hashlib.sha256(d.sync.read_bytes("/data/local/tmp/x/blob.bin")).digest() == hashlib.sha256(blob).digest()
    assert (phone.root / "data/local/tmp/x/blob.bin").read_bytes() == blob  # the sandbox is the phone's disk
    r = d.shell2("ls /data/local/tmp/nothing-here")
    assert r.returncode != 0


def test_clusters_over_adb_are_those_of_the_recorded_phone(tmp_path, adb_server):
    with EmulatorProcess(tmp_path / "s855", profile="snapdragon855") as emu:
        dev = device_for(emu, adb_server)
        local = read_clusters(sysfs_tree((DATA / "snapdragon855.txt").read_text(), tmp_path / "local"))
        assert dev.clusters() == local
        assert [(c.name, c.cpus) for c in dev.clusters()] == [("large", (7,)), ("medium", (4, 5, 6)),
                                                              ("small", (0, 1, 2, 3))]
        assert [cs.mask for cs in dev.core_combinations() if cs.heterogeneous] == ["0x90", "0xb0", "0xf0"]
        info = dev.describe()
        assert info["kind"] == "adb" and info["cores"] == 8 and info["model"] == "Pixel 4"
        assert info["android_release"] == "12" and info["serial"] == emu.serial
    _disconnect(adb_server, emu.serial)


# ---------------------------------------------------------------- one run
def test_run_pushes_pins_pulls_cleans_and_records_provenance(phone, adb_server, runner, model, tmp_path):
    dev = device_for(phone, adb_server)
    sc = scenario_on(dev, "1large")
    out = tmp_path / "out"
    with dev.lock(tmp_path / "locks" / ".lock"):
        run = dev.run("tflite", model, scenario=sc, mode="kernel", warmup=1, runs=4, overhead_pairs=1,
                      records_path=out / "r.jsonl", trace_path=out / "t.json", timeout=120)
        work = phone.root / "data/local/tmp/latbench"
        assert sorted(p.name for p in work.iterdir()) == ["latbench-run", "libLiteRt.so"]  # model and run gone
        assert phone.state()["fixed_performance_mode"] is True
        with pytest.raises(DeviceBusy, match="already running"):  # one sweep per phone, even from elsewhere
            with device_for(phone, adb_server).lock(tmp_path / "other" / ".lock"):
                pass
    assert not (phone.root / "data/local/tmp/latbench").exists()  # the sweep's end removes work_dir
    assert phone.state()["fixed_performance_mode"] is False

    # pinned: the runtime read every thread's CPU set back from the OS
    assert run.meta["cpus"] == list(sc.cpus) and run.meta["threads"] == 1
    assert run.end["affinity_ok"] is True
    assert all(t["cpus"] == list(sc.cpus) for t in run.end["thread_affinity"])
    assert len(run.runs) == 4 and len(run.kernels) > 0 and run.overhead is not None
    assert run.argv[:2] == ["taskset", sc.mask]
    # pulled: the file on this machine is what the NativeRun holds; the trace is a Chrome trace
    assert [json.loads(ln) for ln in (out / "r.jsonl").read_text().splitlines()] == run.records
    assert json.loads((out / "t.json").read_text())["traceEvents"]
    # provenance from the phone
    d = run.meta["device"]
    assert (d["model"], d["android_release"], d["sdk"], d["serial"]) == ("Pixel 4", "12", "31", phone.serial)
    cpu = f"cpu{sc.cpus[0]}"
    assert d["governor"] == {cpu: "schedutil"} and d["freq_khz_before"][cpu] == 2841600
    assert d["freq_khz_after"][cpu] == 2841600 and d["taskset_mask"] == sc.mask
    assert d["thermal_before"]["status"] == 0 and d["thermal_after"]["status_name"] == "none"
    assert d["thermal_before"]["max_cpu_c"] > 0 and d["fixed_performance_mode"] is True


def test_records_have_the_form_of_host_records(phone, adb_server, runner, model, tmp_path):
    dev = device_for(phone, adb_server)
    sc = scenario_on(dev, "1large1small")
    phone_run = dev.run("tflite", model, scenario=sc, mode="op", warmup=1, runs=3,
                        records_path=tmp_path / "p.jsonl", trace_path=tmp_path / "p.json", timeout=120)
    host_run = run_native(model, cpus=list(sc.cpus), threads=sc.threads, mode="op", warmup=1, runs=3,
                          precision="fp32", records_path=tmp_path / "h.jsonl", trace_path=tmp_path / "h.json")

    def form(run):
        return [(r["type"], sorted(set(r) - {"device"})) for r in run.records]

    assert form(phone_run) == form(host_run)
    assert set(phone_run.meta) - set(host_run.meta) == {"device"}
    assert phone_run.meta["threads"] == 2 and phone_run.end["affinity_ok"] is True


def test_thermal_status_and_an_android10_phone_are_recorded_as_they_are(phone, adb_server, runner, model,
                                                                       tmp_path):
    st = phone.state()
    st["props"]["ro.build.version.sdk"], st["props"]["ro.build.version.release"] = "29", "10"
    phone.set_state(props=st["props"], thermal_status=3)  # severe; Android 10 has no fixed performance mode
    dev = device_for(phone, adb_server)
    run = dev.run("tflite", model, scenario=scenario_on(dev, "1small"), warmup=1, runs=2,
                  records_path=tmp_path / "r.jsonl", timeout=120)
    d = run.meta["device"]
    assert d["thermal_before"]["status"] == 3 and d["thermal_before"]["status_name"] == "severe"
    assert d["fixed_performance_mode"] is False and d["android_release"] == "10"


# ---------------------------------------------------------------- the measure stage through adb
def measure_cfg(data: Path, serial: str, server: str, extra=()):
    from pipelines.config import compose, validate

    return validate(compose([
        "generator=[nasbench201]", "generator.nasbench201.n=2", f"data_dir={data}", "export.formats=[tflite_fp32]",
        "device=pixel4", f"device.serial={serial}", f"device.adb_server={server}",
        "measure.processes=1", "measure.warmup=1", "measure.stopping.policy=fixed", "measure.stopping.runs=3",
        "measure.granularities=[e2e,kernel]", "measure.op_runs=2", "measure.overhead_pairs=0",
        "measure.timeout=120",
        # the host half of the form comparison runs on the shared test machine: its load is
        # recorded, not refused (test_measure.py tests the refusal)
        "measure.load.check=false", *extra]))


def record_files(out: Path) -> list[Path]:
    """The per-pair records of a scenario folder (``<model_id>.json``)."""
    return sorted(p for p in out.glob("*.json") if re.fullmatch(r"[0-9a-f]{16}\.json", p.name))


def record_form(obj, path=""):
    """The keys of a record, recursively (lists: the form of their first element)."""
    if isinstance(obj, dict):
        out = set()
        for k, v in obj.items():
            out.add(f"{path}.{k}")
            out |= record_form(v, f"{path}.{k}")
        return out
    if isinstance(obj, list) and obj and isinstance(obj[0], (dict, list)):
        return record_form(obj[0], path + "[]")
    return set()


def test_measure_stage_runs_through_adb_like_on_the_host(exported, phone, adb_server, runner, tmp_path):
    from pipelines.devices import HostDevice
    from pipelines.measure import run_measure

    cfg = measure_cfg(exported, phone.serial, adb_server.address)
    res = run_measure(cfg, "tflite", "fp32", "1large", progress=False, out_root=tmp_path / "m" / "pixel4")
    assert res["status"] == "measured" and (res["ok"], res["failed"]) == (2, 0)
    out = Path(res["out"])
    assert out.name == "pixel4-tflite-cpu-1large-fp32"
    records = [json.loads(p.read_text()) for p in record_files(out)]
    assert len(records) == 2 and not list(out.glob("*.error.json"))
    for rec in records:
        assert rec["e2e"]["latency_ms"] > 0 and len(rec["e2e"]["samples_ns"]) == 1
        assert rec["kernel"]["kernels"] and rec["runtime"]["device"]["model"] == "Pixel 4"
        assert rec["runtime"]["device"]["taskset_mask"] == rec["scenario"]["mask"]
    scen = json.loads((out / "SCENARIO.json").read_text())
    assert scen["device"]["kind"] == "adb" and scen["device"]["clusters"][0]["name"] == "large"

    # the host measures the same pairs: same record form (the phone adds its device state:
    # runtime.device.* and, per e2e process, e2e.per_process[].device.*)
    host = HostDevice(name="pixel4")
    cfg.measure.models = [records[0]["model_id"]]  # one pair is enough to compare the form
    hres = run_measure(cfg, "tflite", "fp32", "1large", device=host, progress=False,
                       out_root=tmp_path / "h" / "pixel4")
    hrec = json.loads(record_files(Path(hres["out"]))[0].read_text())
    phone_form, host_form = record_form(records[0]), record_form(hrec)
    phone_only = ("runtime.device", "per_process[].device")
    # what the machine was doing is read on the host only (machine_load.py): both records say
    # whether it was observed, the host's with the figures, the phone's with the reason
    for load in (".load.observed", ".e2e.per_process[].load.observed", ".kernel.load.observed"):
        assert load in phone_form and load in host_form
    assert ".e2e.per_process[].load.foreign_busy_s" in host_form and ".e2e.per_process[].load.reason" in phone_form
    assert ({k for k in phone_form if not any(p in k for p in phone_only) and ".load." not in k}
            == {k for k in host_form if ".load." not in k})
    assert any(k.startswith(".e2e.per_process[].device.") for k in phone_form)
    assert not (phone.root / "data/local/tmp/latbench").exists()
