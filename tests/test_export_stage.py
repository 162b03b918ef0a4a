"""The export stage: artifacts per model and format, recorded failures, skipping, resuming."""
import csv
import json
import os
import signal
import subprocess
import sys
import time

import pytest
import yaml

from generators.ir import Graph
from pipelines.config import compose, validate, write_params
from pipelines.export import run_export
from pipelines.generate import run_generate

FORMATS = ["nnmeter_ir", "tflite_fp32", "tflite_int8", "torchscript_fp32"]


def small_params(data_dir, formats=FORMATS, n=3):
    raw = compose(["generator=[nasbench201]", f"generator.nasbench201.n={n}", f"data_dir={data_dir}",
                   f"export.formats=[{','.join(formats)}]", "export.workers=2"])
    return raw, validate(raw)


def manifest(out):
    return list(csv.DictReader((out / "manifest.csv").open()))


def test_exports_every_format_then_skips_what_is_done_and_records_a_bad_model(tmp_path):
    _, cfg = small_params(tmp_path / "data")
    run_generate(cfg, progress=False)
    models = tmp_path / "data" / "models"
    # A tampered IR file: the stage records its failure for every format and goes on.
    victim = sorted((models / "nasbench201").glob("*.json"))[0]
    doc = json.loads(victim.read_text())
    doc["nodes"][3]["attrs"]["out_channels"] = 7
    bad = models / "nasbench201" / ("f" * 16 + ".json")
    bad.write_text(json.dumps(doc))

    counts = run_export(cfg, progress=False)
    assert counts == {"ok": 3 * len(FORMATS), "failed": len(FORMATS), "skipped": 0}
    rows = manifest(tmp_path / "data" / "artifacts")
    assert len(rows) == 4 * len(FORMATS)
    for r in rows:
        if r["model_id"] == bad.stem:
            assert r["status"] == "failed" and r["error"].startswith("IRError: ") and "node" in r["error"]
        else:
            assert r["status"] == "ok" and int(r["bytes"]) > 0 and r["checks"] == "passed"
    art = tmp_path / "data" / "artifacts"
    for r in rows:
        if r["status"] == "ok":
            facts = json.loads((art / r["model_id"] / f"{r['format']}.facts.json").read_text())
            g = Graph.load(models / "nasbench201" / f"{r['model_id']}.json")
            assert facts["model_id"] == g.model_id and facts["exporter_version"]
            if r["format"].startswith("tflite"):
                assert facts["checks"] == {"op_counts": True, "params": True, "output_shapes": True}
    assert not list(art.rglob("*.tmp"))

    again = run_export(cfg, progress=False)
    assert again == {"ok": 0, "failed": 0, "skipped": 4 * len(FORMATS)}


@pytest.mark.slow
def test_a_killed_export_resumes_with_one_artifact_per_pair(tmp_path, root):
    raw, cfg = small_params(tmp_path / "data", formats=["tflite_fp32", "tflite_int8"], n=4)
    params = write_params(raw, tmp_path / "params.yaml")
    run_generate(cfg, progress=False)
    art = tmp_path / "data" / "artifacts"
    cmd = [sys.executable, "-m", "pipelines.cli", "export", "--params", str(params), "-q"]
    proc = subprocess.Popen(cmd, cwd=root, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.time() + 300
    while not list(art.glob("*/*.facts.json")) and time.time() < deadline and proc.poll() is None:
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)  # the stage and its workers, mid-sweep
    proc.wait()
    done_before = len(list(art.glob("*/*.facts.json")))
    assert 0 < done_before < 8, "the kill should land mid-sweep"

    r = subprocess.run(cmd, cwd=root, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    assert f"{done_before} already done" in r.stdout  # nothing finished before the kill is redone
    rows = manifest(art)
    assert len(rows) == 8 and all(row["status"] == "ok" for row in rows)
    for row in rows:
        folder = art / row["model_id"]
        assert len(list(folder.glob(f"{row['format']}.*"))) == 2  # the artifact and its facts, once
    assert not list(art.rglob("*.tmp"))
    assert yaml.safe_load(params.read_text())["export"]["formats"] == ["tflite_fp32", "tflite_int8"]


def test_bad_export_config_is_one_line(tmp_path):
    from pipelines.config import ConfigError

    raw, _ = small_params(tmp_path)
    raw["export"]["formats"] = ["tflite_fp64"]
    with pytest.raises(ConfigError, match=r"export\.formats: unknown artifact format 'tflite_fp64' \(known: .*tflite_fp32"):
        validate(raw)
    raw["export"]["formats"] = ["tflite_fp32"]
    raw["export"]["int8_engine"] = "arm"
    with pytest.raises(ConfigError, match=r"export\.int8_engine: unknown engine 'arm'"):
        validate(raw)


def test_a_full_disk_stops_the_export_and_blames_no_model(tmp_path, monkeypatch):
    """ENOSPC while writing (also wrapped by a converter) is not the model's failure: nothing is
    recorded against it, so a rerun after freeing space exports it; the stage stops with DiskFull,
    which crosses the worker boundary. Any other failure is still the model's, recorded."""
    import errno
    import pickle

    from generators.export.formats import exporter_version
    from pipelines.export import DiskFull, _pending, export_model

    _, cfg = small_params(tmp_path / "data", formats=["tflite_fp32"], n=1)
    run_generate(cfg, progress=False)
    model = next((tmp_path / "data" / "models").glob("*/*.json"))
    out = tmp_path / "data" / "artifacts"
    folder, version = out / model.stem, exporter_version()

    def full(graph, path, **kw):
        try:
            raise OSError(errno.ENOSPC, "No space left on device")
        except OSError as e:
            raise RuntimeError("the converter failed") from e

    monkeypatch.setattr("generators.export.tflite.export_tflite", full)
    with pytest.raises(DiskFull, match="tflite_fp32.tflite: no space left on device"):
        export_model(str(model), ["tflite_fp32"], str(out), {}, version)
    assert not list(folder.glob("*.error.json"))
    assert _pending(folder, ["tflite_fp32"], version, retry_failed=False) == ["tflite_fp32"]
    e = pickle.loads(pickle.dumps(DiskFull("x: no space left on device")))
    assert isinstance(e, DiskFull) and str(e) == "x: no space left on device"

    monkeypatch.setattr("generators.export.tflite.export_tflite", lambda graph, path, **kw: 1 / 0)
    assert export_model(str(model), ["tflite_fp32"], str(out), {}, version)[0]["status"] == "failed"
    assert "ZeroDivisionError" in json.loads((folder / "tflite_fp32.error.json").read_text())["error"]
    assert _pending(folder, ["tflite_fp32"], version, retry_failed=False) == []


def test_a_worker_killed_mid_export_costs_only_the_models_in_flight(tmp_path):
    """One worker killed (the OOM killer on a VGG conversion) breaks the process pool; only the
    models in flight then are handed back to run alone, the rest go on in parallel in a fresh
    pool, each counted once. Before, every model after the crash was handed back, to run one
    pool at a time."""
    from tqdm import tqdm

    from pipelines.export import _run_pool
    from support.export_work import crash_on_victim

    names = ["a", "b", "victim", "c", "d", "e", "f", "g"]
    tasks = [(str(tmp_path / f"{n}.json"), ["tflite_fp32"]) for n in names]
    counts = {"ok": 0, "failed": 0}
    with tqdm(disable=True) as bar:
        lost = _run_pool(tasks, tmp_path, {"seconds": 0.2}, "v", 2, bar, counts, work=crash_on_victim)
    lost_names = [t[0].rsplit("/", 1)[1][:-5] for t in lost]
    assert "victim" in lost_names and len(lost) <= 2  # the victim, and at most the task beside it
    assert counts["ok"] + len(lost) == len(names)  # each model counted once or handed back
    assert {"e", "f", "g"} <= set((tmp_path / "ran.txt").read_text().split())  # they ran in the pool
