"""Pruning artifacts (pipelines/prune.py): a file goes only when the release holds its pair at
every grid point that reads it; the control set stays; export does not write a pruned file
again; assemble takes a pruned pair's rows (their op features) from the release; a re-measure
that needs the file says it was pruned; --restore brings it back through export; on a machine
where nothing was exported yet, export writes only the files a point still reads.

The tiny sweep (tests/support/sweeps.py): three NAS-Bench-201 cells exported to TFLite fp32; two
are measured at e2e and op granularity on one core, assembled and released.
"""
from __future__ import annotations

import csv
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pipelines.assemble import run_assemble
from pipelines.config import compose, write_params
from pipelines.dataset import load_dataset
from pipelines.devices import make_device
from pipelines.export import run_export
from pipelines.measure import run_measure
from pipelines.prune import PruneError, dropped_sidecar, plan, prune, readers, restorable, restore
from pipelines.release_writer import write_release
from support.sweeps import exported_sweep, tiny_sweep_cfg

ROOT = Path(__file__).resolve().parents[1]
SID = "host-tflite-cpu-1large-fp32"
ONE_CORE = ("scenario.frameworks=[tflite]", "scenario.accelerators=[cpu]", "scenario.precisions=[fp32]",
            "scenario.cores=[1large]")


def _cfg(data: Path, release: Path, *more: str, grid: tuple[str, ...] = ONE_CORE):
    return tiny_sweep_cfg(data, release, *more, granularities="[e2e,op]", grid=grid)


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> Path:
    return exported_sweep(tmp_path_factory, "prune", _cfg)


@pytest.fixture(scope="module")
def released(exported, tmp_path_factory):
    """A data folder whose first two networks are measured, assembled and released."""
    root = tmp_path_factory.mktemp("prune-released")
    data, release = root / "data", root / "datasets" / "tiny-v1"
    shutil.copytree(exported, data)
    ids = sorted(p.stem for p in (data / "models").glob("*/*.json"))
    cfg = _cfg(data, release, f"measure.models=[{ids[0]},{ids[1]}]")
    assert run_measure(cfg, "tflite", "fp32", "1large", progress=False)["ok"] == 2
    run_assemble(cfg, progress=False)
    write_release(data / "dataset", release)
    return data, release, ids


def _name(data: Path, mid: str) -> str:
    return json.loads(next((data / "models").glob(f"*/{mid}.json")).read_text())["name"]


def test_only_files_whose_every_reader_is_released(released, tmp_path):
    data, release, ids = released
    device = make_device(_cfg(data, release).device)
    cfg = _cfg(data, release)
    assert [(r.point, r.scenario_id, r.fmt) for r in readers(cfg, device)] == [("tflite-cpu-1large-fp32", SID, "tflite_fp32")]
    p = plan(cfg, device, data / "models", data / "artifacts")
    assert sorted(a.parent.name for a, *_ in p.prunable) == ids[:2]
    assert all(fmt == "tflite_fp32" and size > 0 and sc == [SID] for _, fmt, size, sc in p.prunable)
    assert p.kept == {"tflite-cpu-1large-fp32 not yet released": 1}
    # a second point reads the same file: nothing is released there, nothing goes
    two = _cfg(data, release, grid=(*ONE_CORE[:3], "scenario.cores=[1large,2large]"))
    p2 = plan(two, device, data / "models", data / "artifacts")
    assert p2.prunable == [] and p2.kept == {"tflite-cpu-2large-fp32 not yet released": 2,
                                             "several points not yet released": 1}
    # ...unless measure.points leaves that point out
    only = _cfg(data, release, "+measure.points={tflite-cpu-1large-fp32: {granularities: [e2e, op]}}",
                grid=(*ONE_CORE[:3], "scenario.cores=[1large,2large]"))
    assert len(plan(only, device, data / "models", data / "artifacts").prunable) == 2
    # the control set is measured every session: kept
    ctl = _cfg(data, release, f"release.control=[{_name(data, ids[0])}]")
    p3 = plan(ctl, device, data / "models", data / "artifacts")
    assert [a.parent.name for a, *_ in p3.prunable] == [ids[1]]
    assert p3.kept["control set (measured again every session)"] == 1
    # a sweep that measures released pairs again needs every file
    with pytest.raises(PruneError, match="release.reuse"):
        plan(_cfg(data, release, "release.reuse=false"), device, data / "models", data / "artifacts")


def test_pruned_files_stay_pruned_and_the_data_keeps_their_features(released, tmp_path):
    src, release, ids = released
    data = tmp_path / "data"
    shutil.copytree(src, data)
    cfg = _cfg(data, release)
    before = load_dataset(data / "dataset")
    ops_before = before.ops[before.ops["model_id"].isin(ids[:2])].sort_values(["model_id", "op_index"])
    assert ops_before["in_channels"].notna().any()  # features read from the .tflite files

    p = plan(cfg, make_device(cfg.device), data / "models", data / "artifacts")
    assert prune(p, str(release)) == 2
    for mid in ids[:2]:
        folder = data / "artifacts" / mid
        assert not (folder / "tflite_fp32.tflite").exists()
        side = json.loads(dropped_sidecar(folder, "tflite_fp32").read_text())
        assert side["scenarios"] == [SID] and side["bytes"] > 0 and side["release"] == str(release)
    assert list((data / "artifacts" / ids[2]).glob("*.tflite"))

    # export leaves them pruned and says so in the manifest
    assert run_export(cfg, progress=False)["ok"] == 0
    assert not list((data / "artifacts" / ids[0]).glob("*.tflite"))
    rows = {r["model_id"]: r for r in csv.DictReader((data / "artifacts" / "manifest.csv").open())}
    assert rows[ids[0]]["status"] == "dropped" and SID in rows[ids[0]]["error"] and rows[ids[2]]["status"] == "ok"

    # assemble takes the pruned pairs from the release: the op features survive the file
    run_assemble(cfg, progress=False)
    after = load_dataset(data / "dataset")
    ops_after = after.ops[after.ops["model_id"].isin(ids[:2])].sort_values(["model_id", "op_index"])
    cols = ["model_id", "op_index", "op_type", "in_channels", "out_channels", "kernel", "latency_ms"]
    assert ops_after[cols].reset_index(drop=True).equals(ops_before[cols].reset_index(drop=True))

    # measuring a released pair again (here, where its record is gone) needs the file: the failure
    # names the pruning
    (data / "measurements" / "host" / SID / f"{ids[0]}.json").unlink()
    again = _cfg(data, release, "release.reuse=false", f"measure.models=[{ids[0]}]")
    r = run_measure(again, "tflite", "fp32", "1large", progress=False)
    assert r["failed"] == 1
    err = json.loads((data / "measurements" / "host" / SID / f"{ids[0]}.error.json").read_text())
    assert err["kind"] == "artifact_missing" and "pruned" in err["error"] and "--restore" in err["error"]

    # --restore forgets only what a grid point still needs: nothing while both pairs are released,
    # the one network the re-measure asks for, and both once a point is added that reads them
    dev, models, arts = make_device(cfg.device), data / "models", data / "artifacts"
    assert restorable(cfg, dev, models, arts) == []
    assert restorable(again, dev, models, arts) == [dropped_sidecar(arts / ids[0], "tflite_fp32")]
    two = _cfg(data, release, grid=(*ONE_CORE[:3], "scenario.cores=[1large,2large]"))
    assert restore(restorable(two, dev, models, arts)) == 2
    assert run_export(cfg, progress=False)["ok"] == 2
    assert all(list((data / "artifacts" / mid).glob("*.tflite")) for mid in ids)


def test_a_fresh_machine_exports_only_what_a_point_still_reads(released, tmp_path):
    src, release, ids = released
    data = tmp_path / "data"
    shutil.copytree(src, data)
    shutil.rmtree(data / "artifacts")  # a new machine: the IR files and the release, no artifact
    cfg = _cfg(data, release)
    p = plan(cfg, make_device(cfg.device), data / "models", data / "artifacts")
    assert sorted(a.parent.name for a, *_ in p.prunable) == ids[:2] and p.unwritten == 2 and p.bytes == 0
    assert p.kept == {}  # nothing present is kept: the third network's file is simply not written yet
    assert prune(p, str(release)) == 2
    for mid in ids[:2]:
        side = json.loads(dropped_sidecar(data / "artifacts" / mid, "tflite_fp32").read_text())
        assert side["written"] is False and side["bytes"] == 0 and side["scenarios"] == [SID]
    assert run_export(cfg, progress=False)["ok"] == 1  # the unreleased network alone
    assert [mid for mid in ids if (data / "artifacts" / mid / "tflite_fp32.tflite").is_file()] == ids[2:]
    # a point added later that reads them restores them, as it does a pruned file
    dev, models, arts = make_device(cfg.device), data / "models", data / "artifacts"
    two = _cfg(data, release, grid=(*ONE_CORE[:3], "scenario.cores=[1large,2large]"))
    assert restore(restorable(two, dev, models, arts)) == 2
    assert run_export(cfg, progress=False)["ok"] == 2


def test_the_command(released, tmp_path):
    src, release, ids = released
    data = tmp_path / "data"
    shutil.copytree(src, data)
    params = tmp_path / "params.yaml"
    raw = compose(["generator=[nasbench201]", "generator.nasbench201.n=3", f"data_dir={data}",
                   "export.formats=[tflite_fp32]", *ONE_CORE, f"release.folder={release}",
                   "release.reuse=true"])
    write_params(raw, params)
    run = [sys.executable, "-m", "pipelines.cli", "prune", "--params", str(params)]
    proc = subprocess.run([*run, "--dry-run"], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("prune: would delete 2 files") and "1 tflite-cpu-1large-fp32 not yet released" in proc.stdout
    assert all(list((data / "artifacts" / mid).glob("*.tflite")) for mid in ids)
    proc = subprocess.run(run, capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0 and proc.stdout.startswith("prune: deleted 2 files"), proc.stderr
    proc = subprocess.run([*run, "--restore"], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0 and proc.stdout.startswith("prune: 0 dropped sidecars removed")
    raw["scenario"]["cores"] = ["1large", "2large"]  # a point added later reads both files
    write_params(raw, params)
    proc = subprocess.run([*run, "--restore"], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0 and proc.stdout.startswith("prune: 2 dropped sidecars removed")
    # a control network that is not generated: one line naming the key, nothing deleted
    raw["release"]["control"] = ["no-such-net"]
    write_params(raw, params)
    proc = subprocess.run(run, capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "release.control" in proc.stderr
