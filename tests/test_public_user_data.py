"""Your own data without editing the package (issue 56): USC- and HELP-format files of phones the
suite has never seen, in folders of the user's, described by a device catalog of the user's.

Checked: a catalog of yours (``latbench devices add --no-adb``, ``--catalog`` / ``public.catalog``
/ ``$LATBENCH_CATALOG``) is merged over the suite's, its faults name your file and key; the
import writes nothing under the package; rows of a folder that states no commit carry
``source_commit = "unknown"`` (a folder's PULLED.json states one); what the USC study's set-up
supplies (GPU precision and backend, units) is a problem line of kind ``assumption``, and ``-q``
still prints a summary of the problems; several folders of one importer combine, and the same
measurement in two folders is an error naming both files. The inputs are small CSVs written in
tmp_path (tests/device_catalog_inputs.py).
"""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

import device_catalog_inputs as dci
from pipelines.cli import main
from pipelines.config import compose, write_params
from pipelines.dataset import HelpConfig, PublicDataError, UscConfig, import_help, import_usc, load_dataset
from pipelines.devices.catalog import CATALOG_PATH, CatalogError, as_catalog, device_catalog

ROOT = Path(__file__).resolve().parents[1]
PHONES = {  # the file's device name -> (catalog name, clusters); none of them is in the suite's catalog
    "MyPhoneA": ("phonea", [("large", 1), ("med", 3), ("small", 4)]),
    "MyPhoneB": ("phoneb", [("large", 2), ("small", 6)]),
    "MyPhoneC": ("phonec", [("large", 4), ("small", 4)]),
}


def _package_files() -> dict[Path, tuple[int, int]]:
    """(mtime, size) of the files of the package the import could write: the catalog, the
    importers, the configuration."""
    out = {}
    for top in (ROOT / "pipelines" / "devices", ROOT / "pipelines" / "dataset", ROOT / "conf"):
        for p in top.rglob("*"):
            if p.is_file() and "__pycache__" not in p.parts:
                st = p.stat()
                out[p] = (st.st_mtime_ns, st.st_size)
    for p in (ROOT / "params.yaml", ROOT / "dvc.yaml"):
        out[p] = (p.stat().st_mtime_ns, p.stat().st_size)
    return out


def _add_phones(catalog: Path, phones: dict = PHONES) -> None:
    """The phones' entries written into ``catalog`` by `latbench devices add --no-adb`."""
    for source, (name, clusters) in phones.items():
        argv = ["devices", "add", "--no-adb", name, "--model", f"Maker {source}", "--soc", "SoC 9", "--gpu", "GPU 7",
                "--os", "android", "--source", f"usc={source}", "--catalog", str(catalog)]
        for tag, cores in clusters:
            argv += ["--cluster", f"{tag}:{cores}:2.0"]
        assert main(argv) == 0


def _usc(folder: Path, phones: list[str]) -> Path:
    return dci.write_usc(folder, {p: PHONES[p][1] for p in phones})


def _assumptions(result) -> list[str]:
    return [str(p) for p in result.problems if p.kind == "assumption"]


@pytest.fixture
def catalog(tmp_path) -> Path:
    path = tmp_path / "my_catalog.yaml"
    _add_phones(path)
    return path


# ---------------------------------------------------------------- a catalog of yours
def test_devices_add_without_adb_writes_a_catalog_of_yours(tmp_path, catalog, monkeypatch, capsys):
    before = CATALOG_PATH.read_bytes()
    cat = device_catalog(catalog)
    assert cat.where == f"pipelines/devices/catalog.yaml + {catalog}"
    e = cat["phonea"]
    assert (e.model, e.soc, e.gpu, e.os) == ("Maker MyPhoneA", "SoC 9", "GPU 7", "android")
    assert e.cpu == "1x large 2.00 GHz + 3x med 2.00 GHz + 4x small 2.00 GHz"
    assert cat.resolve("usc", "MyPhoneA").entry.name == "phonea" and "pixel4" in cat  # merged over the suite's
    assert cat.file_of("phonea") == str(catalog) and cat.file_of("pixel4") == "pipelines/devices/catalog.yaml"
    # $LATBENCH_CATALOG: what `devices add` writes by default, and what the importers read
    env_file = tmp_path / "env_catalog.yaml"
    monkeypatch.setenv("LATBENCH_CATALOG", str(env_file))
    assert main(["devices", "add", "--no-adb", "phoned", "--model", "Maker D", "--cluster", "large:8"]) == 0
    assert f"device catalog {env_file}: phoned: Maker D, 8x large" in capsys.readouterr().out
    assert as_catalog(None)["phoned"].model == "Maker D" and "phonea" not in as_catalog(None)
    monkeypatch.delenv("LATBENCH_CATALOG")
    assert "phoned" not in as_catalog(None)
    # the options are checked, each fault one line
    for argv, message in [
        (["devices", "add", "--no-adb", "x1", "--catalog", str(catalog)], "--model: required with --no-adb"),
        (["devices", "add", "--no-adb", "x1", "--model", "X", "--cluster", "large", "--catalog", str(catalog)],
         "cluster 'large': expected TAG:CORES[:GHZ]"),
        (["devices", "add", "--no-adb", "x1", "--model", "X", "--cluster", "large:0", "--catalog", str(catalog)],
         f"{catalog} (new entry): devices.x1.clusters[0].cores: expected a whole number >= 1, got 0"),
        (["devices", "add", "serial1", "x1", "--soc", "S"], "--soc: only with --no-adb"),
    ]:
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and message in err, err
    assert CATALOG_PATH.read_bytes() == before


def test_a_catalog_of_yours_is_checked_with_the_suite_s(tmp_path, catalog, capsys):
    """A name or a scenario-id spelling two devices of the merged catalog would share, a fault in an
    entry: CatalogError naming your file and the key."""
    clash = tmp_path / "clash.yaml"
    clash.write_text("version: 1\ndevices:\n  pixel_4:\n    model: Not a Pixel\n")
    with pytest.raises(CatalogError, match=rf"^{clash}: devices\.pixel_4: spelled 'pixel4' in scenario ids, as device "
                                           r"'pixel4' \(in pipelines/devices/catalog\.yaml\) is: rename one$"):
        device_catalog(clash)
    claim = tmp_path / "claim.yaml"
    claim.write_text("version: 1\ndevices:\n  mine:\n    model: Mine\n    sources:\n      usc: {names: [s10]}\n")
    with pytest.raises(CatalogError, match=rf"^{claim}: devices\.mine\.sources\.usc\.names: 's10' already names "
                                           r"device 's10' \(in pipelines/devices/catalog\.yaml\) in usc$"):
        device_catalog(claim)
    # an entry of yours replaces the suite's of that name
    own = tmp_path / "own.yaml"
    own.write_text("version: 1\ndevices:\n  pixel4:\n    model: My Pixel 4\n")
    assert device_catalog(own)["pixel4"].model == "My Pixel 4" and device_catalog()["pixel4"].model == "Google Pixel 4"
    # through import-public: one line naming the key, the file and the entry's key
    bad = tmp_path / "bad.yaml"
    bad.write_text("version: 1\ndevices:\n  mine:\n    model: Mine\n    clusters:\n      - {tag: large, cores: x}\n")
    params = _params(tmp_path, [tmp_path])
    assert main(["import-public", "--params", str(params), "--catalog", str(bad), "-q"]) == 2
    err = capsys.readouterr().err
    assert err == (f"latbench: error: public.catalog: {bad}: devices.mine.clusters[0].cores: expected a whole number "
                   ">= 1, got 'x'\n")


# ---------------------------------------------------------------- import-public on a folder of yours
def _params(tmp: Path, folders: list[Path], *extra: str) -> Path:
    paths = ",".join(str(f) for f in folders)
    raw = compose([f"data_dir={tmp / 'data'}", "public.datasets=[usc]", f"public.usc.path=[{paths}]",
                   "public.usc.rebuild_ir=false", *extra])
    p = tmp / "params.yaml"
    write_params(raw, p)
    return p


def test_import_public_reads_your_folder_and_catalog_and_changes_no_package_file(tmp_path, catalog, capsys):
    folder = _usc(tmp_path / "mine", list(PHONES))
    params = _params(tmp_path, [folder])
    before = _package_files()
    assert main(["import-public", "--params", str(params), "--catalog", str(catalog), "-q"]) == 0
    assert _package_files() == before  # nothing of the package written
    out = tmp_path / "data" / "public"
    ds = load_dataset(out)
    sc = ds.scenarios.set_index("scenario_id")
    assert set(sc["device"]) == {"phonea", "phoneb", "phonec"}  # the catalog of yours names and describes them
    assert sc.loc["usc-phonea-tflite-gpu-fp16", "description"].startswith(
        "Maker MyPhoneA (SoC 9), TFLite GPU delegate (OpenCL) on the GPU 7 GPU, fp16")
    for name, df in ds.tables().items():  # the folder states no commit
        assert (df["source_commit"] == "unknown").all(), name
    problems = pd.read_csv(out / "import_problems.csv")
    assumed = problems[problems["kind"] == "assumption"]
    gpu = assumed[assumed["file"].eq("cnn_real_e2e_tflite.csv") & assumed["message"].str.contains("GPU columns")]
    assert len(gpu) == 1 and gpu.iloc[0]["column"] == "MyPhoneA|gpu|float|mean"
    assert ("'float' = fp16, 'quant' = int8; MyPhoneA on the TFLite GPU delegate (OpenCL), MyPhoneB on the TFLite "
            "GPU delegate (OpenCL), MyPhoneC on the TFLite GPU delegate (OpenCL)") in gpu.iloc[0]["message"]
    assert set(assumed["file"]) == {"cnn_real_e2e_tflite.csv", "cnn_real_e2e_torch.csv", "cnn_real_ops_gpu_tflite.csv",
                                    "cnn_real_ops_gpu_torch.csv"}
    assert set(problems["kind"]) == {"assumption"}  # the phones are in the catalog: nothing else to say
    # -q: no progress bars, but the problems are summarised, with the file that lists them all
    text = capsys.readouterr().out
    lines = text.splitlines()
    n = len(problems)
    assert lines[0] == (f"import-public: {n} problem(s): {n} assumption; all in {out}/import_problems.csv; "
                        f"the first 5:")
    assert [ln.split(":")[0] for ln in lines[1:6]] == ["  problem (assumption)"] * 5
    assert lines[-1].endswith(f"; {n} problems (see {out}/import_problems.csv)")


def test_a_device_in_no_catalog_says_how_to_describe_it(tmp_path):
    folder = _usc(tmp_path / "mine", ["MyPhoneA"])
    r = import_usc(UscConfig(path=str(folder), rebuild_ir=False))  # the suite's catalog alone
    lines = [str(p) for p in r.problems if p.kind == "catalog"]
    assert len(lines) == 4 and lines[0] == (
        "cnn_real_e2e_tflite.csv line 1, column 'MyPhoneA|1large|float|mean': device 'MyPhoneA' is not in the device "
        "catalog (pipelines/devices/catalog.yaml): imported with a blank device description; describe it with "
        "`latbench devices add --no-adb --catalog FILE MyPhoneA --model ...` (a catalog of yours; the import reads it "
        "with public.catalog or $LATBENCH_CATALOG)")
    other = _usc(tmp_path / "other", ["MyPhoneA", "MyPhoneB"])
    _add_phones(tmp_path / "one.yaml", {"MyPhoneA": PHONES["MyPhoneA"]})
    r = import_usc(UscConfig(path=str(other), rebuild_ir=False), catalog=device_catalog(tmp_path / "one.yaml"))
    lines = sorted({str(p).split(": ", 1)[1] for p in r.problems if p.kind == "catalog"})
    assert lines == [f"device 'MyPhoneB' is not in the device catalog (pipelines/devices/catalog.yaml + "
                     f"{tmp_path / 'one.yaml'}): imported with a blank device description; describe it with "
                     f"`latbench devices add --no-adb --catalog {tmp_path / 'one.yaml'} MyPhoneB --model ...`"]


# ---------------------------------------------------------------- provenance and assumptions
def test_a_folder_states_its_commit_in_pulled_json(tmp_path, catalog):
    folder = _usc(tmp_path / "mine", ["MyPhoneA"])
    (folder / "PULLED.json").write_text(json.dumps({"repo": "https://example.org/my-phones", "rev": "abc1234"}))
    r = import_usc(UscConfig(path=str(folder), rebuild_ir=False), catalog=device_catalog(catalog))
    for name in ("models", "scenarios", "e2e", "ops", "kernels"):
        assert (r[name]["source_commit"] == "abc1234").all(), name
    assert _assumptions(r)  # not the pinned copy: the study's set-up is still assumed
    # strict mode: the assumptions are no faults of the input
    assert import_usc(UscConfig(path=str(folder), rebuild_ir=False, strict=True), catalog=device_catalog(catalog))
    (folder / "PULLED.json").write_text("[1, 2]")
    r = import_usc(UscConfig(path=str(folder), rebuild_ir=False), catalog=device_catalog(catalog))
    assert [str(p) for p in r.problems if p.kind == "provenance"] == [
        "PULLED.json: not a JSON object with a 'rev' text (the commit the files come from); the folder's rows carry "
        "source_commit 'unknown'"]
    assert (r["e2e"]["source_commit"] == "unknown").all()


def test_the_pinned_copy_keeps_its_commit_and_states_no_assumption(usc_dir):
    from pipelines.dataset import usc as usc_mod

    r = import_usc(UscConfig(path=str(usc_dir), rebuild_ir=False, models=["resnet18"], devices=["pixel4"]))
    assert r.problems == [] and (r["e2e"]["source_commit"] == usc_mod.COMMIT).all()


def test_help_assumes_batch_one_for_a_name_without_one(tmp_path):
    folder = dci.write_help(tmp_path / "help", ["pixel3", "1080ti_32"], indices=(0, 1))
    r = import_help(HelpConfig(path=str(folder), rebuild_ir=False))
    assert _assumptions(r) == ["latency.csv line 1: assumed HELP's convention, which the file does not state: "
                               "batch 1 for pixel3 (the name states no batch)"]
    assert (r["e2e"]["source_commit"] == "unknown").all()


# ---------------------------------------------------------------- several folders
def test_two_folders_of_one_importer_combine(tmp_path, catalog):
    a = _usc(tmp_path / "a", ["MyPhoneA"])
    b = _usc(tmp_path / "b", ["MyPhoneB"])
    (b / "PULLED.json").write_text('{"rev": "b0b0b0b"}')
    r = import_usc(UscConfig(path=[str(a), str(b)], rebuild_ir=False), catalog=device_catalog(catalog))
    e2e = r["e2e"]
    assert set(r["scenarios"]["device"]) == {"phonea", "phoneb"} and len(r["models"]) == 2
    files = set(e2e["source_file"])
    assert f"{a}/cnn_real_e2e_tflite.csv" in files and f"{b}/cnn_real_e2e_torch.csv" in files
    commits = e2e.assign(dev=e2e["scenario_id"].str.split("-").str[1]).groupby("dev")["source_commit"].unique()
    assert list(commits["phonea"]) == ["unknown"] and list(commits["phoneb"]) == ["b0b0b0b"]
    alone = import_usc(UscConfig(path=str(a), rebuild_ir=False), catalog=device_catalog(catalog))
    assert len(e2e[e2e["scenario_id"].str.startswith("usc-phonea-")]) == len(alone["e2e"])
    # HELP: one device over two folders (other architectures) is one scenario
    h1 = dci.write_help(tmp_path / "h1", ["pixel3"], indices=(0, 1))
    h2 = dci.write_help(tmp_path / "h2", ["pixel3", "raspi4"], indices=(2, 3))
    r = import_help(HelpConfig(path=[str(h1), str(h2)], rebuild_ir=False))
    assert sorted(r["scenarios"]["scenario_id"]) == ["help-pixel3-tflite-cpu", "help-raspi4-cpu"]
    assert len(r["e2e"]) == 6 and len(r["models"]) == 4
    assert set(r["e2e"]["source_file"]) == {f"{h1}/latency.csv", f"{h2}/latency.csv"}


def test_the_same_measurement_in_two_folders_is_an_error_naming_both(tmp_path, catalog):
    a = _usc(tmp_path / "a", ["MyPhoneA"])
    b = _usc(tmp_path / "b", ["MyPhoneA", "MyPhoneB"])
    with pytest.raises(PublicDataError, match=rf"^usc\.path: network 'mobilenetv2_w1' in scenario "
                                              rf"usc-phonea-tflite-cpu-1large-fp32 is in both {a}/cnn_real_e2e_tflite"
                                              rf"\.csv line 2 and {b}/cnn_real_e2e_tflite\.csv line 2"):
        import_usc(UscConfig(path=[str(a), str(b)], rebuild_ir=False), catalog=device_catalog(catalog))
    h1 = dci.write_help(tmp_path / "h1", ["pixel3"], indices=(0, 1))
    h2 = dci.write_help(tmp_path / "h2", ["pixel3"], indices=(1, 2))
    with pytest.raises(PublicDataError, match=rf"^help\.path: nb201-00001 on help-pixel3-tflite-cpu is in both "
                                              rf"{h1}/latency\.csv line 3, column 'pixel3_ms' and {h2}/latency\.csv "
                                              r"line 2, column 'pixel3_ms'"):
        import_help(HelpConfig(path=[str(h1), str(h2)], rebuild_ir=False))
    with pytest.raises(PublicDataError, match=rf"^usc\.path: {a} and {a}/ are the same folder"):
        import_usc(UscConfig(path=[str(a), f"{a}/"], rebuild_ir=False))
    with pytest.raises(ValueError, match=r"^path: expected a folder path or a non-empty list of them, got \[\]"):
        import_usc(UscConfig(path=[], rebuild_ir=False))
