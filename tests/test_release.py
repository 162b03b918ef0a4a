"""The release that travels: a tiny sweep -> assemble -> datasets/<name>-v<N>/ -> a fresh data
folder (another machine) measures only the pairs the release does not hold, and assembles
them with the released rows into one dataset.

Three NAS-Bench-201 cells are generated and exported; two are measured (e2e, TFLite fp32,
one core), assembled and released; the fresh folder has all three.
"""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pipelines.assemble import run_assemble
from pipelines.config import compose, validate, write_params
from pipelines.dataset import load_dataset
from pipelines.measure import run_measure
from pipelines.devices.host import processor_description
from pipelines.release import (PROCESSOR_IDENTITY, Release, ReleaseConfig, ReleaseError, check_one_machine,
                               processor_slug, release_for_machine, reused_pairs)
from pipelines.release_writer import write_release
from support.sweeps import exported_sweep, tiny_sweep_cfg

ROOT = Path(__file__).resolve().parents[1]
SID = "host-tflite-cpu-1large-fp32"


def _cfg(data: Path, release: Path, *more: str):
    return tiny_sweep_cfg(data, release, *more)


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> Path:
    return exported_sweep(tmp_path_factory, "release", _cfg)


def _ids(data: Path) -> list[str]:
    return sorted(p.stem for p in (data / "models").glob("*/*.json"))


def test_a_released_sweep_continues_elsewhere_without_measuring_a_pair_twice(exported, tmp_path):
    release = tmp_path / "datasets" / "tiny-v1"
    ids = _ids(exported)
    assert len(ids) == 3
    # machine A measures two of the three networks, assembles and releases them
    first = tmp_path / "a"
    shutil.copytree(exported, first)
    cfg = _cfg(first, release, f"measure.models=[{ids[0]},{ids[1]}]")
    assert run_measure(cfg, "tflite", "fp32", "1large", progress=False)["ok"] == 2
    run_assemble(cfg, progress=False)
    manifest = write_release(first / "dataset", release)
    assert (manifest["name"], manifest["version"]) == ("tiny", 1)
    assert manifest["pairs_per_scenario"] == {SID: 2} and manifest["bytes"] < 2**20
    assert {p.name for p in release.iterdir()} >= {"DATASET.md", "RELEASE.json", "e2e.parquet", "models.parquet",
                                                   "scenarios.parquet"}
    assert Release(release).pairs() == {(ids[0], SID), (ids[1], SID)}
    # the speed probe's reference of the records travels with the release (pipelines/speed_probe.py)
    ref = Release(release).probe_reference("host")
    assert len(ref) == 1 and 0 < next(iter(ref.values())) < 0.1, ref
    # so does the processor's description (family, model, stepping, ISA flags) its records carry
    here = processor_description()
    assert Release(release).machine("host") == manifest["machine"]["host"]
    assert {k: manifest["machine"]["host"][k] for k in (*PROCESSOR_IDENTITY, "isa", "flags_sha256")} == \
        {k: here[k] for k in (*PROCESSOR_IDENTITY, "isa", "flags_sha256")}
    ds = load_dataset(release)
    e = ds.e2e
    assert len(e) == 2 and e["host"].notna().all() and e["runtime_version"].notna().all()
    assert e["load_observed"].all() and e["foreign_busy_frac"].notna().all() and e["source_file"].notna().all()

    # machine B: a fresh data folder with all three networks and no measurements
    second = tmp_path / "b"
    shutil.copytree(exported, second)
    cfg_b = _cfg(second, release)
    r = run_measure(cfg_b, "tflite", "fp32", "1large", progress=False)
    assert (r["ok"], r["released"], r["skipped"]) == (1, 2, 2)
    out = second / "measurements" / "host" / SID
    assert sorted(p.stem for p in out.glob("*.json") if p.name != "SCENARIO.json") == [ids[2]]
    log = (out / "measure.log").read_text()
    assert "(2 of them in the release" in log
    assert "speed probe: starting from the release's reference CPU" in log
    # assembled: the released rows and the new one, one row per pair
    run_assemble(cfg_b, progress=False)
    both = load_dataset(second / "dataset")
    assert sorted(both.e2e["model_id"]) == ids and sorted(both.models["model_id"]) == ids
    assert list(both.scenarios["scenario_id"]) == [SID]

    # re-measuring released pairs is an explicit choice
    cfg_c = _cfg(second, release, "release.reuse=false")
    r = run_measure(cfg_c, "tflite", "fp32", "1large", progress=False)
    assert (r["ok"], r["released"], r["skipped"]) == (2, 0, 1)


def test_a_session_keeps_the_released_failures_it_did_not_attempt(exported, tmp_path):
    """A session measuring part of the grid (``measure.models``, a PyTorch-only sweep) does not
    attempt the release's failed pairs: its assembly keeps them in failures.csv and keeps the
    failed network's model row; a session that measures the pair again replaces the failure."""
    import csv

    release = tmp_path / "datasets" / "fail-v1"
    ids = _ids(exported)
    first = tmp_path / "a"
    shutil.copytree(exported, first)
    (first / "artifacts" / ids[2] / "tflite_fp32.tflite").write_bytes(b"not a flatbuffer")
    cfg = _cfg(first, release)
    r = run_measure(cfg, "tflite", "fp32", "1large", progress=False)
    assert (r["ok"], r["failed"]) == (2, 1)
    run_assemble(cfg, progress=False)
    write_release(first / "dataset", release)

    def failed(folder: Path) -> list[tuple[str, str]]:
        with (folder / "failures.csv").open() as f:
            return [(row["model_id"], row["scenario_id"]) for row in csv.DictReader(f)]

    assert failed(release) == [(ids[2], SID)]
    second = tmp_path / "b"
    shutil.copytree(exported, second)
    cfg_b = _cfg(second, release, f"measure.models=[{ids[0]},{ids[1]}]")
    r = run_measure(cfg_b, "tflite", "fp32", "1large", progress=False)
    assert (r["ok"], r["released"], r["failed"]) == (0, 2, 0)
    run_assemble(cfg_b, progress=False)
    assert failed(second / "dataset") == [(ids[2], SID)]
    ds = load_dataset(second / "dataset")
    assert sorted(ds.models["model_id"]) == ids and sorted(ds.e2e["model_id"]) == ids[:2]
    # measured here, the pair's fresh row replaces the released failure
    r = run_measure(_cfg(second, release), "tflite", "fp32", "1large", progress=False)
    assert (r["ok"], r["released"]) == (1, 2)
    run_assemble(cfg_b, progress=False)
    assert failed(second / "dataset") == []
    assert sorted(load_dataset(second / "dataset").e2e["model_id"]) == ids


def test_a_released_row_the_speed_probe_never_judged_is_measured_again(exported, tmp_path):
    """``release.remeasure_outdated`` (the release protocol): a released row without the speed
    probe's verdict (measured before the probe existed) counts as not released, is measured
    again, and the fresh row replaces it at assemble; judged rows stay skipped."""
    import pandas as pd

    release = tmp_path / "datasets" / "old-v1"
    ids = _ids(exported)[:2]
    first = tmp_path / "a"
    shutil.copytree(exported, first)
    cfg = _cfg(first, release, f"measure.models=[{','.join(ids)}]")
    assert run_measure(cfg, "tflite", "fp32", "1large", progress=False)["ok"] == 2
    run_assemble(cfg, progress=False)
    write_release(first / "dataset", release)
    # the first row as a release from before the probe has it
    e = pd.read_parquet(release / "e2e.parquet")
    e.loc[e["model_id"] == ids[0], "probe_slowdown"] = None
    e.to_parquet(release / "e2e.parquet", index=False)
    assert Release(release).pairs() == {(ids[0], SID), (ids[1], SID)}
    assert Release(release).pairs(current_only=True) == {(ids[1], SID)}

    second = tmp_path / "b"
    shutil.copytree(exported, second)
    plain = _cfg(second, release, f"measure.models=[{','.join(ids)}]")
    assert not plain.release.remeasure_outdated  # the default: every released row is reused
    cfg_b = _cfg(second, release, f"measure.models=[{','.join(ids)}]", "release.remeasure_outdated=true")
    r = run_measure(cfg_b, "tflite", "fp32", "1large", progress=False)
    assert (r["ok"], r["released"]) == (1, 1)
    run_assemble(cfg_b, progress=False)
    rows = load_dataset(second / "dataset").e2e.set_index("model_id")
    assert sorted(rows.index) == sorted(ids) and rows["probe_slowdown"].notna().all()


def test_a_released_pytorch_row_without_its_page_faults_is_outdated(tmp_path):
    """A runner's own protocol columns (Runner.protocol_columns): PyTorch rows count page faults
    since the workers run on jemalloc, so a released PyTorch row without the count (measured on
    glibc's malloc) is outdated like an unprobed one; a TFLite row needs no such count, and a
    scenario of no known runner needs the suite's columns only."""
    import pandas as pd

    folder = tmp_path / "r-v1"
    folder.mkdir()
    pd.DataFrame({"scenario_id": ["h-pt", "h-tfl", "h-x"], "framework": ["pytorch", "tflite", "nosuch"],
                  "accelerator": ["cpu", "cpu", "cpu"]}).to_parquet(folder / "scenarios.parquet", index=False)
    e2e = pd.DataFrame({"model_id": list("abcde"), "scenario_id": ["h-pt", "h-pt", "h-tfl", "h-tfl", "h-x"],
                        "probe_slowdown": [0.01, 0.01, 0.01, None, 0.02],
                        "page_faults_per_run": [0.5, None, None, None, None]})
    e2e.to_parquet(folder / "e2e.parquet", index=False)
    every = {("a", "h-pt"), ("b", "h-pt"), ("c", "h-tfl"), ("d", "h-tfl"), ("e", "h-x")}
    assert Release(folder).pairs() == every
    # b: PyTorch on glibc (no fault count); d: never judged by the probe
    assert Release(folder).pairs(current_only=True) == {("a", "h-pt"), ("c", "h-tfl"), ("e", "h-x")}
    # a release written before the column existed: every PyTorch row is outdated
    e2e.drop(columns="page_faults_per_run").to_parquet(folder / "e2e.parquet", index=False)
    assert Release(folder).pairs(current_only=True) == {("c", "h-tfl"), ("e", "h-x")}
    # no scenarios table, so no runner is known: the suite's own columns only
    (folder / "scenarios.parquet").unlink()
    assert Release(folder).pairs(current_only=True) == {("a", "h-pt"), ("b", "h-pt"), ("c", "h-tfl"), ("e", "h-x")}


def test_a_row_left_unsettled_by_a_smaller_cap_is_outdated(tmp_path):
    """Adaptive stopping gives up at ``max_processes``: a released row that reached a cap of 5
    with its median's interval still wide is one a protocol capped at 10 would have gone on
    measuring, so under that protocol it is measured again; a row that settled (``ci_width``),
    or reached a cap at least the current one, is reused. ``reused_pairs`` reads the settings."""
    from types import SimpleNamespace

    import pandas as pd

    folder = tmp_path / "r-v1"
    folder.mkdir()
    pd.DataFrame({"scenario_id": ["h-tfl"], "framework": ["tflite"], "accelerator": ["cpu"]}).to_parquet(
        folder / "scenarios.parquet", index=False)
    pd.DataFrame({"model_id": list("abc"), "scenario_id": ["h-tfl"] * 3, "probe_slowdown": [0.01] * 3,
                  "stop_reason": ["ci_width", "max_processes", "max_processes"],
                  "processes": [3, 5, 10]}).to_parquet(folder / "e2e.parquet", index=False)
    every = {("a", "h-tfl"), ("b", "h-tfl"), ("c", "h-tfl")}
    assert Release(folder).pairs(current_only=True) == every  # no cap given: not judged on it
    assert Release(folder).pairs(current_only=True, max_processes=5) == every
    assert Release(folder).pairs(current_only=True, max_processes=10) == {("a", "h-tfl"), ("c", "h-tfl")}

    capped = SimpleNamespace(policy="adaptive", max_processes=10)

    def settings(**kw):
        return ReleaseConfig(**({"folder": str(folder), "reuse": True, "remeasure_outdated": True} | kw))

    assert reused_pairs(settings(), capped) == {("a", "h-tfl"), ("c", "h-tfl")}
    assert reused_pairs(settings(remeasure_outdated=False), capped) == every
    assert reused_pairs(settings(reuse=False), capped) == set()
    assert reused_pairs(settings(folder=""), capped) == set()
    # a fixed number of runs has no cap to fall short of
    assert reused_pairs(settings(), SimpleNamespace(policy="fixed", max_processes=10)) == every


def test_the_release_protocol_measures_the_committed_glibc_pytorch_rows_again(tmp_path):
    """On the committed releases, what a release sweep (conf/measure/release.yaml) measures again
    is exactly their PyTorch rows without a fault count (glibc's malloc): host-v1's 1,000
    synthetic pairs until an EPYC session measures them on jemalloc; none of host-xeon-v1's.
    Every other row is reused (all were judged by the probe, none fell short of the cap)."""
    for name in ("host-v1", "host-xeon-v1"):
        folder = ROOT / "datasets" / name
        cfg = validate(compose(["scenario=release", "measure=release", "release=sweep", f"release.folder={folder}",
                                f"data_dir={tmp_path / 'data'}"]))
        e = load_dataset(folder).e2e
        glibc = e["scenario_id"].str.contains("-pytorch-") & e["page_faults_per_run"].isna()
        outdated = Release(folder).pairs() - reused_pairs(cfg.release, cfg.measure.stopping)
        assert outdated == set(zip(e.loc[glibc, "model_id"], e.loc[glibc, "scenario_id"])), name


def test_release_stage_and_bad_names(exported, tmp_path):
    with pytest.raises(ReleaseError, match="named <name>-v<N>"):
        write_release(exported, tmp_path / "datasets" / "host")
    data = tmp_path / "d"
    shutil.copytree(exported, data)
    cfg = _cfg(data, tmp_path / "datasets" / "x-v2", f"measure.models=[{_ids(exported)[0]}]")
    run_measure(cfg, "tflite", "fp32", "1large", progress=False)
    run_assemble(cfg, progress=False)
    raw = compose(["generator=[nasbench201]", f"data_dir={data}", f"release.folder={tmp_path / 'datasets' / 'x-v2'}"])
    p = tmp_path / "params.yaml"
    write_params(raw, p)
    proc = subprocess.run([sys.executable, "-m", "pipelines.release_writer", "--params", str(p)], capture_output=True,
                          text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("release x-v2: 1 e2e rows in 1 scenarios")
    assert json.loads((tmp_path / "datasets" / "x-v2" / "RELEASE.json").read_text())["version"] == 2
    raw["release"]["folder"] = str(tmp_path / "datasets" / "nover")
    write_params(raw, p)
    proc = subprocess.run([sys.executable, "-m", "pipelines.release_writer", "--params", str(p)], capture_output=True,
                          text=True, cwd=ROOT)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "named <name>-v<N>" in proc.stderr


def test_the_release_configuration(tmp_path):
    """conf/{scenario,measure,generator}/release.yaml: the issue's network counts and scenario
    points; a grid point the points leave out records why and measures nothing; a bad point
    is one line naming the key."""
    from pipelines.config import ConfigError

    over = ["scenario=release", "measure=release", "release=sweep", "generator=[synthetic,zoo,nasbench201,pytorch,transformer,release]",
            f"data_dir={tmp_path / 'data'}"]
    cfg = validate(compose(over))
    g = cfg.generator
    assert (g.synthetic.n, g.zoo.variants, len(g.zoo.families), g.nasbench201.n, len(g.pytorch.models),
            g.transformer.n) == (1000, 30, 15, 100, 102, 500)
    assert g.zoo.include_reference
    pts = cfg.measure.points
    assert {k: (v.granularities, v.sources) for k, v in pts.items()} == {
        "tflite-cpu-1large-fp32": (["e2e", "op", "kernel"], []), "tflite-cpu-1large-int8": (["e2e", "op", "kernel"], []),
        "tflite-cpu-2large-fp32": (["e2e"], ["synthetic", "transformer", "zoo"]), "pytorch-cpu-1large-fp32": (["e2e"], ["synthetic"]),
        "onnxruntime-cpu-1large-fp32": (["e2e", "op"], ["synthetic", "zoo"]),
        "executorch-cpu-1large-fp32": (["e2e", "op", "kernel"], ["synthetic", "zoo"]),
        "tflite-gpu-fp32": (["e2e", "kernel"], ["nasbench201"])}
    assert cfg.scenario.accelerators == ["cpu", "gpu"] and cfg.scenario.gpu_precisions == ["fp32"]
    assert cfg.measure.load.check and cfg.release.remeasure_outdated
    # every point measures some network of the control set (its drift between sessions)
    names = set(cfg.release.control)
    assert any(n.startswith("nb201-") for n in names) and any(n.startswith("synthetic-") for n in names)
    r = run_measure(cfg, "pytorch", "int8", "1large", progress=False)
    assert r["status"] == "not_offered" and "measure.points" in r["reason"] and "pytorch-cpu-1large-int8" in r["reason"]
    with pytest.raises(ConfigError, match=r"^params: measure\.points\.tflite-fp32: a grid point is"):
        validate(compose([*over, "+measure.points.tflite-fp32.granularities=[e2e]"]))
    with pytest.raises(ConfigError, match=r"^params: measure\.points\.tflite-cpu-1large-fp32\.granularities: must include e2e"):
        validate(compose([*over, "measure.points.tflite-cpu-1large-fp32.granularities=[op]"]))


def test_a_release_holds_one_machine(exported, tmp_path):
    """Rows of one device name measured on two processors (sessions that landed on other
    machines) are refused when the release is written, and the sweep's early check names the
    processor the release was measured on."""
    import pandas as pd

    data = tmp_path / "d"
    shutil.copytree(exported, data)
    cfg = _cfg(data, tmp_path / "datasets" / "one-v1", f"measure.models=[{_ids(exported)[0]}]")
    run_measure(cfg, "tflite", "fp32", "1large", progress=False)
    run_assemble(cfg, progress=False)
    write_release(data / "dataset", tmp_path / "datasets" / "one-v1")
    here = str(pd.read_parquet(data / "dataset" / "scenarios.parquet")["soc"].iloc[0])
    assert Release(tmp_path / "datasets" / "one-v1").machine_mismatch("host", here) is None
    manifest = json.loads((tmp_path / "datasets" / "one-v1" / "RELEASE.json").read_text())
    assert manifest["processors"] == {"host": [here]}
    why = Release(tmp_path / "datasets" / "one-v1").machine_mismatch("host", "Other CPU 9000")
    assert why and f"measured on {here}; this machine is Other CPU 9000" in why
    assert Release(tmp_path / "datasets" / "none-v1").machine_mismatch("host", "Other CPU 9000") is None
    # each processor grows a release of its own: this one finds its release, another starts one
    assert release_for_machine("host", here, tmp_path / "datasets") == tmp_path / "datasets" / "one-v1"
    assert release_for_machine("host", "Other CPU 9000", tmp_path / "datasets") == \
        tmp_path / "datasets" / "host-other-9000-v1"
    assert release_for_machine("phone", here, tmp_path / "datasets").name.startswith("phone-")

    scen = pd.read_parquet(data / "dataset" / "scenarios.parquet")
    other = scen.copy()
    other["soc"] = "Other CPU 9000"
    other["scenario_id"] = other["scenario_id"] + "-t1"
    pd.concat([scen, other], ignore_index=True).to_parquet(data / "dataset" / "scenarios.parquet", index=False)
    with pytest.raises(ReleaseError, match=r"device 'host' ran on 2 processors \(.*Other CPU 9000: "):
        write_release(data / "dataset", tmp_path / "datasets" / "two-v1")
    assert not (tmp_path / "datasets" / "two-v1").exists()


@pytest.mark.parametrize("model, slug", [("AMD EPYC", "epyc"), ("Intel(R) Xeon(R) Processor", "xeon"),
                                         ("Intel(R) Core(TM) i7-8700 CPU @ 3.20GHz", "i7-8700-3-20ghz"),
                                         ("AMD EPYC 7B13 64-Core Processor", "epyc-7b13-64-core"), ("(R)", "cpu")])
def test_processor_slug_names_a_new_release(model, slug):
    assert processor_slug(model) == slug


@pytest.mark.parametrize("folder", sorted(p.name for p in (ROOT / "datasets").glob("*-v*")))
def test_a_committed_release_loads_checked_with_provenance_per_row(folder):
    """Every committed release reads with ``load_dataset`` (schema checked), its manifest counts
    what its tables hold, one processor per device, and each e2e row names the record it came
    from and the host that measured it."""
    path = ROOT / "datasets" / folder
    ds = load_dataset(path)
    manifest = json.loads((path / "RELEASE.json").read_text())
    e = ds.e2e
    assert manifest["pairs_per_scenario"] == {str(k): int(v) for k, v in e.groupby("scenario_id").size().items()}
    assert manifest["rows"]["e2e"] == len(e) and manifest["rows"]["models"] == len(ds.models)
    check_one_machine(ds.scenarios, path)  # raises ReleaseError naming the device and its processors
    for column in ("source_file", "host", "runtime_version"):
        assert e[column].notna().all(), f"{folder}: e2e rows without {column}"
    assert set(e["model_id"]) <= set(ds.models["model_id"])


def test_the_epyc_release_holds_the_synthetic_space_at_every_cpu_point():
    """Issue 18's check on datasets/host-v1 (AMD EPYC): >= 1,000 synthetic networks with e2e
    rows at TFLite fp32 1-large (with op rows), int8 1-large, fp32 2-large and PyTorch fp32
    1-large; the 100 NAS-Bench-201 cells on the software GPU; every row judged by the speed probe."""
    ds = load_dataset(ROOT / "datasets" / "host-v1")
    synthetic = set(ds.models.loc[ds.models["source"] == "synthetic", "model_id"])
    for sid in ("host-tflite-cpu-1large-fp32", "host-tflite-cpu-1large-int8", "host-tflite-cpu-2large-fp32",
                "host-pytorch-cpu-1large-fp32"):
        measured = set(ds.e2e.loc[ds.e2e["scenario_id"] == sid, "model_id"]) & synthetic
        assert len(measured) >= 1000, f"{sid}: {len(measured)} synthetic networks"
    cells = set(ds.models.loc[ds.models["source"] == "nasbench201", "model_id"])
    assert len(set(ds.e2e.loc[ds.e2e["scenario_id"] == "host-tflite-gpu-fp32", "model_id"]) & cells) >= 100
    assert ds.e2e["probe_slowdown"].notna().all()
    with_ops = set(ds.ops.loc[ds.ops["scenario_id"] == "host-tflite-cpu-1large-fp32", "model_id"]) & synthetic
    assert len(with_ops) >= 1000


def test_a_release_keeps_its_changes_file(tmp_path):
    """CHANGES.md (a release's history, written by hand) survives writing the release again."""
    src = Path(__file__).resolve().parents[1] / "datasets" / "host-xeon-v1"
    out = tmp_path / "datasets" / "xeon-v1"
    write_release(src, out)
    (out / "CHANGES.md").write_text("# xeon-v1\n\n## 2026-12-05\n- measured again\n")
    write_release(src, out)
    assert (out / "CHANGES.md").read_text() == "# xeon-v1\n\n## 2026-12-05\n- measured again\n"
