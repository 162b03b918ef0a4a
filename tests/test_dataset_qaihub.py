"""Qualcomm AI Hub's published measurements in the dataset schema (issue 57, the CNN part): the
importer on the copy in ../shared/external/qai-hub-models (never committed), the mapping of its
classification networks to IR, the pull source, and bad input.

The copy holds 167 model folders measured on 13 devices (it leaves some of the repository's
devices out: its SOURCE.md); one device, the Snapdragon 8 Elite QRD, has LLM entries only, which
carry no inference time, so 12 devices have e2e rows. Of the 40 classification networks, 30 are
expressed as IR (five vision transformers among them); the others have their reason
(pipelines/dataset/qaihub_models.py).
"""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pipelines.config import compose, write_params
from pipelines.dataset import PublicDataError, QaihubConfig, import_qaihub, load_dataset
from pipelines.dataset import qaihub as qh
from pipelines.dataset.pull import MISSING, SOURCES, pull
from pipelines.dataset.qaihub_models import CLASSIFICATION, NOT_EXPRESSED, PARAMS_TOLERANCE, RECIPES, USE_CASES
from pipelines.scenarios import make_scenario_id

ROOT = Path(__file__).resolve().parents[1]
SID = re.compile(r"qaihub-[a-z0-9]+-[a-z0-9]+-(npu|gpu|cpu)-[a-z0-9]+")


@pytest.fixture(scope="module")
def imported(qaihub_dir):
    """Everything, IRs rebuilt (about 15 s)."""
    return import_qaihub(QaihubConfig(path=str(qaihub_dir)))


def _copy(qaihub_dir: Path, tmp: Path, models: list[str]) -> Path:
    """A folder holding some models' perf.yaml files of the copy, to edit."""
    out = tmp / "qai-hub-models"
    for m in models:
        (out / m).mkdir(parents=True)
        shutil.copyfile(qaihub_dir / m / "perf.yaml", out / m / "perf.yaml")
    return out


# ================================================================ the import
def test_devices_runtimes_units_and_counts(imported):
    r = imported
    sc, e2e = r["scenarios"], r["e2e"]
    assert e2e["scenario_id"].isin(sc["scenario_id"]).all() and len(e2e) > 5000
    # the copy measures 13 devices; the Snapdragon 8 Elite QRD has LLM entries only (no inference time)
    assert sc["device"].nunique() == 12
    llm_only = {p.message for p in r.problems if "Snapdragon 8 Elite QRD" in (p.column or "")}
    assert llm_only and all("llm_metrics" in m for m in llm_only)
    assert {"tflite", "qnn_dlc", "onnx"} <= set(sc["framework"])
    assert set(sc["accelerator"]) == {"npu", "gpu", "cpu"}
    npu = e2e[e2e["scenario_id"].isin(sc.loc[sc["accelerator"] == "npu", "scenario_id"])]
    assert len(npu) > 0.8 * len(e2e) and (npu["layers_npu"] > 0).all()
    assert {"float", "w8a8", "w8a16"} <= set(sc["precision"])
    assert (e2e["latency_stat"] == "reported").all() and (e2e["latency_ms"] > 0).all()


def test_networks_with_ir_and_the_reason_of_the_others(imported):
    m = imported["models"]
    meta = m["meta"].map(json.loads)
    folder = meta.map(lambda d: d["qaihub_model"])
    with_ir = m[m["ir"].notna()]
    # every recipe passes its checks: 30 of the 40 classification networks
    assert sorted(folder[m["ir"].notna()]) == sorted(RECIPES) and len(with_ir) == 30
    assert with_ir["model_id"].str.fullmatch(r"[0-9a-f]{16}").all() and with_ir["flops"].gt(0).all()
    for _, row in with_ir.iterrows():
        stated = RECIPES[json.loads(row["meta"])["qaihub_model"]].params
        assert abs(row["params"] / stated - 1) <= PARAMS_TOLERANCE, row["name"]
    without = m[m["ir"].isna()]
    assert without["model_id"].str.startswith("qaihub:").all() and (without["source"] == "qaihub").all()
    assert (without["input_shape"] == "unknown").all()
    reasons = dict(zip(folder[m["ir"].isna()], meta[m["ir"].isna()].map(lambda d: d["no_ir"])))
    for case in CLASSIFICATION:
        for f in USE_CASES[case]:
            assert f in RECIPES or f in NOT_EXPRESSED, f
    # the transformer operators are in the IR (issue 54): ViT-B/16, EfficientFormer-L1, MobileViT-S,
    # LeViT-128S and BEiT-B/16 have recipes; EfficientViT's linear attention divides (div is in the
    # IR now, for pytorchcv's zoo: a recipe is what it lacks)
    by_name = with_ir.set_index("name")
    vit = by_name.loc["vit_b_16"]
    assert vit["params"] == 86_567_656 and vit["source"] == "zoo" and vit["family"] == "vit"
    assert by_name.loc["zoo-efficientformer-ref", "params"] == 12_281_752
    assert by_name.loc["zoo-beit-ref", "params"] == 91_995_640 and by_name.loc["zoo-levit-ref", "family"] == "levit"
    assert by_name.loc["zoo-mobilevit_s-ref", "input_shape"] == "1x3x256x256"
    assert by_name.loc["convnext_base", "family"] == "convnext" and by_name.loc["mnasnet0_5", "params"] == 2_218_512
    assert "has its operators now, but the mapping has no recipe" in reasons["efficientvit_b2_cls"]
    assert "needs embedding, argmax," in reasons["openai_clip"] and "more than 1% apart" in reasons["gpunet"]
    assert "deformable_conv2d" in reasons["internimage"] and "layernorm" not in reasons["internimage"]
    assert "conv3d" in reasons["resnet_3d"] and "out of the scope" in reasons["yolov8_det"]
    assert "out of the scope" in reasons["llama_v3_2_1b_instruct"]
    # a network with several components is one model per component
    assert "whisper_tiny:HfWhisperEncoder" in set(m["name"])


def test_rebuilt_networks_join_the_suites_own(imported):
    """The same network has the same id whichever importer built it: pytorchcv names as USC's
    importer builds them, the zoo's reference as the suite's generator does."""
    from generators.importers.pytorch import import_pytorchcv
    from generators.zoo import reference

    m = imported["models"].set_index("name")
    assert m.loc["mobilenetv2_w1", "model_id"] == import_pytorchcv("mobilenetv2_w1").model_id
    assert m.loc["mobilenetv2_w1", "arch"] == "mobilenetv2_w1"
    assert m.loc["zoo-googlenet-ref", "model_id"] == reference("googlenet").model_id
    assert m.loc["yamnet_mobilenet_w1", "input_shape"] == "1x1x96x64"
    checks = json.loads(m.loc["resnet18", "meta"])["checks"]
    assert checks["stated"] == 11_689_512 and checks["stated_by"] == "pytorchcv (resnet18)"


def test_scenario_ids_devices_and_provenance(imported, qaihub_dir):
    sc = imported["scenarios"]
    for _, s in sc.iterrows():
        assert SID.fullmatch(s["scenario_id"]), s["scenario_id"]
        assert s["scenario_id"] == make_scenario_id(s["device"], s["accelerator"], framework=s["framework"],
                                                    precision=s["precision"], prefix="qaihub")
    # every device is the catalog's: named, with its SoC
    assert sc["device_model"].notna().all() and sc["soc"].notna().all()
    assert not [p for p in imported.problems if "not in the device catalog" in p.message]
    s24 = sc[sc["scenario_id"] == "qaihub-galaxys24-tflite-npu-float"].iloc[0]
    assert s24["device_model"] == "Samsung Galaxy S24" and s24["soc"] == "Snapdragon 8 Gen 3"
    # provenance: the row is the runtime's key in the file
    e = imported["e2e"].sample(20, random_state=0)
    for _, row in e.iterrows():
        line = (qaihub_dir / row["source_file"]).read_text().splitlines()[row["source_row"] - 1]
        assert line.strip() == row["source_column"].rsplit(".", 1)[1] + ":", (row["source_file"], row["source_row"])
    assert (e["peak_memory_min_mb"] <= e["peak_memory_max_mb"]).all()
    placed = e[["layers_npu", "layers_gpu", "layers_cpu"]].sum(axis=1)
    assert (placed == e["layers"]).all()


def test_the_llm_entries_are_problem_rows(imported):
    probs = [p for p in imported.problems if "no inference_time_milliseconds" in p.message]
    assert len(probs) == 37 == len(imported.problems)
    assert all(p.file.endswith("/perf.yaml") and p.row and p.column.startswith("precisions.") for p in probs)


def test_through_import_public_into_a_folder(tmp_path, qaihub_dir):
    """The stage's path: parquet tables, the problems file and the card; a store_ir=False import
    keeps the IR of the networks its arch cannot rebuild."""
    raw = compose([f"data_dir={tmp_path / 'data'}", "public.datasets=[qaihub]", f"public.qaihub.path={qaihub_dir}",
                   "public.qaihub.models=[resnet18,inception_v3,vit]", "public.qaihub.devices=[galaxy_s24]",
                   "public.qaihub.store_ir=false"])
    params = tmp_path / "params.yaml"
    write_params(raw, params)
    proc = subprocess.run([sys.executable, "-m", "pipelines.cli", "import-public", "--params", str(params), "-q"],
                          capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert proc.returncode == 0, proc.stderr
    out = tmp_path / "data" / "public"
    ds = load_dataset(out)
    assert set(ds.scenarios["device"]) == {"galaxy_s24"}
    m = ds.models.set_index("name")
    assert set(m.index) == {"resnet18", "inceptionv3_gp", "vit_b_16"}
    assert m["ir"].isna()["resnet18"] and m.loc["resnet18", "arch"] == "resnet18"  # arch rebuilds it
    assert ds.graph(m.loc["resnet18", "model_id"]).model_id == m.loc["resnet18", "model_id"]
    assert not m["ir"].isna()["inceptionv3_gp"] and not m["ir"].isna()["vit_b_16"]  # no arch rebuilds them: kept
    assert (out / "import_problems.csv").read_text() == "file,row,column,message,kind\n"
    assert "qai-hub-models" in (out / "DATASET.md").read_text()


# ================================================================ the pull source
def test_the_pull_source_pins_the_files_the_importer_reads(qaihub_dir):
    src = SOURCES["qaihub"]
    assert src.rev == qh.COMMIT and src.folder == "qai-hub-models"
    upstream, copy = dict(src.md5), dict(src.copy_md5)
    folders = sorted(p.parent.name for p in qaihub_dir.glob("*/perf.yaml"))
    assert sorted(k.split("/")[2] for k in upstream if k.endswith("/perf.yaml")) == folders
    assert sorted(k.split("/")[0] for k in copy if k.endswith("/perf.yaml")) == folders
    assert src.copy_fault(qaihub_dir) is None  # this machine's copy is the pinned one


def test_pull_links_the_pinned_copy_and_refuses_another(tmp_path, qaihub_dir):
    shared = qaihub_dir.parent
    got = pull(["qaihub"], root=tmp_path / "external", shared=shared, fetch=False)
    assert got == {"qaihub": f"linked {qaihub_dir}"}
    assert (tmp_path / "external" / "qai-hub-models" / "resnet18" / "perf.yaml").is_file()
    # a copy with one file edited is not the pinned one: not linked, and (offline) nothing fetched
    other = tmp_path / "other" / "qai-hub-models"
    shutil.copytree(qaihub_dir, other)
    p = other / "resnet18" / "perf.yaml"
    p.chmod(0o644)
    p.write_text(p.read_text() + "\n")
    got = pull(["qaihub"], root=tmp_path / "external2", shared=other.parent, fetch=False)["qaihub"]
    assert got.startswith(f"missing: the copy at {other} is not the pinned one (resnet18/perf.yaml: MD5 ")
    assert got.endswith("and fetching is off") and "\n" not in got
    assert (tmp_path / "external2" / "qai-hub-models" / MISSING).is_file()


# ================================================================ bad input
def _edit(path: Path, old: str, new: str, count: int = 1) -> None:
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, count))


def _edit_nth(path: Path, old: str, new: str, n: int) -> None:
    """Replace the n-th (1-based) occurrence of ``old``."""
    parts = path.read_text().split(old)
    assert len(parts) > n
    path.write_text(old.join(parts[:n]) + new + old.join(parts[n:]))


def test_a_failed_job_and_bad_values_are_problem_rows(tmp_path, qaihub_dir):
    root = _copy(qaihub_dir, tmp_path, ["mobilenet_v2", "resnet18"])
    f = root / "mobilenet_v2" / "perf.yaml"  # its first three jobs: a failed one, a time < 0, a unit unknown
    _edit_nth(f, "job_status: Passed", "job_status: Failed", 1)
    _edit_nth(f, "inference_time_milliseconds:", "inference_time_milliseconds: -1 #", 2)
    _edit_nth(f, "primary_compute_unit: NPU", "primary_compute_unit: DSP", 3)
    g = root / "resnet18" / "perf.yaml"  # a time of over an hour, and a memory range beyond the bound
    _edit_nth(g, "inference_time_milliseconds:", "inference_time_milliseconds: 99999999 #", 1)
    _edit_nth(g, "      min: ", "      min: 7000000 #", 3)
    good = import_qaihub(QaihubConfig(path=str(_copy(qaihub_dir, tmp_path / "good", ["mobilenet_v2", "resnet18"])),
                                      rebuild_ir=False))
    r = import_qaihub(QaihubConfig(path=str(root), rebuild_ir=False))
    by = {p.message.split(";")[0]: p for p in r.problems}
    failed = next(p for m, p in by.items() if "job status 'Failed'" in m)
    assert failed.file == "mobilenet_v2/perf.yaml" and failed.row and failed.column.endswith(".job_status")
    lines = f.read_text().splitlines()
    assert lines[failed.row - 1].strip() == "job_status: Failed"
    assert any("primary_compute_unit 'DSP' is none of NPU, GPU, CPU" in m for m in by)
    assert any("inference_time_milliseconds '-1' is not a time > 0" in m for m in by)
    assert any("above 3.6e+06 ms (limits.LATENCY_MS" in m and p.file == "resnet18/perf.yaml" for m, p in by.items())
    assert any("limits.MEMORY_MB" in m for m in by)
    assert len(r["e2e"]) == len(good["e2e"]) - 4  # the memory fault leaves its row, memory empty
    assert r["e2e"]["peak_memory_min_mb"].isna().sum() == 1
    with pytest.raises(PublicDataError, match=r"^qai-hub-models: \d+ problem\(s\) in the input \(strict mode\)"):
        import_qaihub(QaihubConfig(path=str(root), rebuild_ir=False, strict=True))


def test_a_malformed_perf_yaml_is_one_problem_naming_the_file(tmp_path, qaihub_dir):
    root = _copy(qaihub_dir, tmp_path, ["mobilenet_v2", "resnet18", "squeezenet1_1"])
    (root / "mobilenet_v2" / "perf.yaml").write_text("precisions:\n  float: [unclosed\n")
    (root / "resnet18" / "perf.yaml").write_text("- just\n- a list\n")
    r = import_qaihub(QaihubConfig(path=str(root), rebuild_ir=False))
    probs = {p.file: p for p in r.problems}
    assert set(probs) == {"mobilenet_v2/perf.yaml", "resnet18/perf.yaml"}
    bad = probs["mobilenet_v2/perf.yaml"]
    assert bad.message.startswith("malformed YAML: line ") and bad.message.endswith("; file skipped")
    assert "\n" not in str(bad)
    assert "no `precisions` mapping" in probs["resnet18/perf.yaml"].message
    assert set(r["models"]["name"]) == {"squeezenet_v1_1"} and len(r["e2e"]) > 0
    # a level of the wrong kind: the problem names its key path, the rest of the file imports
    _edit(root / "squeezenet1_1" / "perf.yaml", "          QCS8275 (Proxy):\n", "          QCS8275 (Proxy): 5\n"
          "          QCS8275-X:\n")
    r = import_qaihub(QaihubConfig(path=str(root), rebuild_ir=False))
    p = next(p for p in r.problems if p.file == "squeezenet1_1/perf.yaml" and "expected a mapping" in p.message)
    assert p.column.endswith("performance_metrics.QCS8275 (Proxy)") and "expected a mapping of runtimes" in p.message
    with pytest.raises(PublicDataError, match="no <model>/perf.yaml"):
        import_qaihub(QaihubConfig(path=str(tmp_path)))


def test_a_device_outside_the_catalog_imports_blank_with_a_problem(tmp_path, qaihub_dir):
    root = _copy(qaihub_dir, tmp_path, ["squeezenet1_1"])
    _edit(root / "squeezenet1_1" / "perf.yaml", "Samsung Galaxy S24:", "Samsung Galaxy S99:", count=-1)
    r = import_qaihub(QaihubConfig(path=str(root), rebuild_ir=False))
    p = next(p for p in r.problems if "Galaxy S99" in p.message)
    assert "not in the device catalog" in p.message and p.file == "squeezenet1_1/perf.yaml" and p.row
    sc = r["scenarios"].set_index("scenario_id")
    blank = sc.loc["qaihub-samsunggalaxys99-tflite-npu-float"]
    assert blank["device"] == "Samsung Galaxy S99" and blank.isna()["device_model"] and blank.isna()["soc"]
    assert "not in the device catalog" in blank["description"]
    with pytest.raises(PublicDataError, match="devices: unknown device 'nope'"):
        import_qaihub(QaihubConfig(path=str(root), rebuild_ir=False, devices=["nope"]))
