"""Devices are data (issue 19): the device catalog (pipelines/devices/catalog.yaml) and its use by
the USC and HELP importers and the adb device kind.

Checked: the catalog loads and names every device of the public data (../shared/external); the
known devices import exactly as before the catalog (digests of the tables taken with the code
that held the devices, tests/data/device_catalog/); a device missing from the catalog imports
with its rows, a blank description and a warning naming the catalog file; filters accept a
dataset's name or the catalog's (``1080ti_1`` / ``1080ti``) and a filter matching nothing is an
error naming it; a malformed catalog is an error naming the file and the key; a phone described
from its sysfs (recorded, and over adb with the adbd emulator) is written into a catalog and
read back.
"""
from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

import device_catalog_inputs as dci
from pipelines.dataset import HelpConfig, PublicDataError, UscConfig, import_help, import_usc
from pipelines.dataset import help as help_mod
from pipelines.dataset import usc as usc_mod
from pipelines.devices import catalog as cat_mod
from pipelines.devices.android import describe_phone, entry_from_phone, sysfs_tree
from pipelines.devices.catalog import (
    CATALOG_PATH,
    CatalogEntry,
    CatalogError,
    CpuCluster,
    SourceInfo,
    add_device,
    load_catalog,
    lookup,
)
from pipelines.devices.topology import read_clusters

DATA = Path(__file__).resolve().parent / "data"
BEFORE = DATA / "device_catalog"
SYSFS = DATA / "sysfs"
CATALOG_FILE = "pipelines/devices/catalog.yaml"


def _header(path: Path) -> list[str]:
    return path.read_text().splitlines()[0].split(",")


def _msgs(result) -> list[str]:
    """The problem lines but the assumptions (what a folder outside the pulled copy does not
    state: tests/test_public_user_data.py checks those)."""
    return [str(p) for p in result.problems if p.kind != "assumption"]


def _not_in_catalog(name: str) -> str:
    """The end of the warning of a device the catalog lacks (the suite's catalog alone)."""
    return (f"device {name!r} is not in the device catalog ({CATALOG_FILE}): imported with a blank device description; "
            f"describe it with `latbench devices add --no-adb --catalog FILE {name} --model ...` (a catalog of yours; "
            "the import reads it with public.catalog or $LATBENCH_CATALOG)")


def _sids(result) -> set[str]:
    return set(result["scenarios"]["scenario_id"])


# ---------------------------------------------------------------- the catalog
def test_catalog_describes_every_device_of_the_public_data(usc_dir, help_dir):
    cat = load_catalog()
    assert cat.path == CATALOG_PATH and cat.where == CATALOG_FILE
    usc_names = {c.split("|")[0] for f in sorted(usc_dir.glob("*.csv")) for c in _header(f) if "|" in c}
    help_names = {c[:-3] for c in _header(help_dir / "latency.csv") if c.endswith("_ms")}
    assert usc_names == {"pixel4", "s10", "a03s", "iphonexs"} and "1080ti_1" in help_names
    for n in usc_names | set(dci.USC_CLUSTERS):
        m = cat.resolve("usc", n)
        assert m is not None and m.entry.name == n and m.entry.clusters and m.entry.soc and m.entry.gpu, n
    for n in help_names | set(dci.help_names()):
        m = cat.resolve("help", n)
        assert m is not None and m.entry.source("help").accelerator, n
    # what the code held: clusters (tag, cores) and clocks; Pixel 4's from the SOURCE.md
    for n, clusters in dci.USC_CLUSTERS.items():
        assert [(c.tag, c.cores) for c in cat[n].clusters] == clusters
    assert cat["pixel4"].cpu == "1x large 2.84 GHz + 3x med 2.42 GHz + 4x small 1.78 GHz"
    assert "SOURCE.md" in cat["pixel4"].origin and cat["iphonexs"].note.startswith("iOS:")
    assert cat["pixel2"].source("help").note == "phone CPU, values in whole milliseconds"
    assert cat["pixel3"].source("help").framework == "tflite"
    # the one table from the datasets' names to the catalog's (= the scenario ids')
    table = cat.source_names()
    assert ("help", "1080ti_{batch}", "1080ti") in table and ("usc", "pixel4", "pixel4") in table
    assert len({(d, n) for d, n, _ in table}) == len(table)
    m = cat.resolve("help", "1080ti_32")
    assert (m.entry.name, m.batch) == ("1080ti", 32)
    assert cat.resolve("help", "1080ti") is None and cat.resolve("help", "onefusion") is None
    with pytest.raises(ValueError, match="not a batch size"):
        cat.resolve("help", "titanxp_0")
    assert lookup("s10").model == "Samsung Galaxy S10" and lookup("pixel5") is None


COLUMNS_SINCE_DIGESTS = ("host", "load_observed", "foreign_busy_frac", "steal_frac", "loadavg_max", "cpu_freq_khz",
                         "remeasured", "probe_slowdown", "graph_passes", "page_faults_per_run", "peak_memory_min_mb",
                         "peak_memory_max_mb", "layers", "layers_npu", "layers_gpu", "layers_cpu")


def test_known_devices_import_exactly_as_before_the_catalog(tmp_path, usc_dir, help_dir):
    """Every table of the public import and of inputs naming every device the code knew gives
    the digests taken with that code (tests/data/device_catalog/, device_catalog_inputs.py)."""
    import pandas as pd

    before = json.loads((BEFORE / "digests_before.json").read_text())
    runs = {
        "synthetic-usc": lambda: import_usc(UscConfig(path=str(dci.write_usc(tmp_path / "usc")), rebuild_ir=False)),
        "synthetic-help": lambda: import_help(HelpConfig(path=str(dci.write_help(tmp_path / "help")),
                                                         rebuild_ir=False)),
        "usc": lambda: import_usc(UscConfig(path=str(usc_dir), rebuild_ir=False)),
        "help": lambda: import_help(HelpConfig(path=str(help_dir), rebuild_ir=False)),
    }
    frames = []
    for name, run in runs.items():
        r = run()
        assert not [m for m in _msgs(r) if "file not found" not in m], (name, _msgs(r))
        frames.append(r["scenarios"])
        for table, (rows, digest) in before[name].items():
            # columns added to the schema since the digests were taken (the machine's load, the speed probe,
            # the PyTorch runs' page faults, AI Hub's memory and layer placement; empty for these data) are
            # left out, so the rest must still be exactly as before
            df = r[table].drop(columns=[c for c in COLUMNS_SINCE_DIGESTS if c in r[table].columns])
            if name.startswith("synthetic-") and len(df):
                # a folder of the tests' own states no commit: its rows say "unknown" (the digests were taken when
                # every row carried the importer's commit: the USC pin, HELP's none)
                assert (df["source_commit"] == "unknown").all(), (name, table)
                df = df.assign(source_commit=usc_mod.COMMIT if name == "synthetic-usc" else None)
            assert (len(df), dci.digest(df)) == (rows, digest), (name, table)
    cols = ["dataset", "device", "device_model", "soc", "cpu", "gpu", "accelerator", "framework", "batch"]
    now = pd.concat(frames, ignore_index=True)[cols].drop_duplicates()
    now = now.sort_values(cols[:2] + ["accelerator", "batch"], kind="stable")
    assert now.to_csv(index=False) == (BEFORE / "devices_before.csv").read_text()


# ---------------------------------------------------------------- a device the catalog lacks
def test_usc_device_not_in_the_catalog_is_imported_with_a_warning(tmp_path):
    devices = {"pixel4": dci.USC_CLUSTERS["pixel4"], "onefusion": [("large", 2), ("small", 6)]}
    d = dci.write_usc(tmp_path / "usc", devices)
    r = import_usc(UscConfig(path=str(d), rebuild_ir=False))
    warn = [m for m in _msgs(r) if "onefusion" in m]
    # one warning per file, at the device's first column, naming the device and the catalog file
    assert len(warn) == 4, warn
    assert warn[0] == ("cnn_real_e2e_tflite.csv line 1, column 'onefusion|1large|float|mean': "
                       + _not_in_catalog("onefusion"))
    assert len(_msgs(r)) == 4
    sc = r["scenarios"].set_index("scenario_id")
    one = sc[sc["device"] == "onefusion"]
    n_sets = len(dci.usc_core_sets(devices["onefusion"])) + 1
    assert len(one) == 2 * 2 * n_sets  # two frameworks x fp32/int8 x (core sets + gpu)
    assert one[["device_model", "soc", "cpu", "gpu"]].isna().all().all()
    row = sc.loc["usc-onefusion-tflite-cpu-1large2small-fp32"]
    assert row["description"].startswith("onefusion (not in the device catalog), TFLite on the CPU: 1 large core "
                                         "+ 2 small cores, 3 threads, fp32")
    assert row["core_count"] == 3 and bool(row["heterogeneous"])
    assert sc.loc["usc-onefusion-pytorch-gpu-fp16", "description"].startswith(
        "onefusion (not in the device catalog), PyTorch Mobile Vulkan backend on the GPU, fp16")
    e2e = r["e2e"]
    assert (e2e["scenario_id"].str.startswith("usc-onefusion-")).sum() == len(dci.USC_MODELS) * len(one)
    ops = r["ops"]
    assert ops["scenario_id"].isin(["usc-onefusion-tflite-gpu-fp16", "usc-onefusion-pytorch-gpu-fp16"]).sum() == 4
    # the known device is as without the new one
    alone = import_usc(UscConfig(path=str(dci.write_usc(tmp_path / "alone", {"pixel4": devices["pixel4"]})),
                                 rebuild_ir=False))
    for t in ("scenarios", "e2e", "ops", "kernels"):
        mine = r[t][r[t]["scenario_id"].str.startswith("usc-pixel4-")].reset_index(drop=True)
        assert len(mine) and dci.digest(mine) == dci.digest(alone[t]), t
    # strict mode: a device outside the catalog is a problem like any other
    with pytest.raises(PublicDataError, match="onefusion"):
        import_usc(UscConfig(path=str(d), rebuild_ir=False, strict=True))


def test_adding_the_device_to_a_catalog_describes_it(tmp_path):
    """An entry whose catalog name differs from the file's (sources.usc.names) names the scenarios;
    a filter takes either name."""
    d = dci.write_usc(tmp_path / "usc", {"onefusion": [("large", 2), ("small", 6)]})
    catalog = tmp_path / "catalog.yaml"
    shutil.copy(CATALOG_PATH, catalog)
    entry = CatalogEntry("motoonefusion", "Motorola One Fusion", maker="Motorola", soc="Helio P60",
                         clusters=(CpuCluster("large", 2, 2.0), CpuCluster("small", 6, 2.0)), gpu="Mali G72",
                         os="android", origin="a test", sources={"usc": SourceInfo(names=("onefusion",))})
    add_device(entry, catalog)
    for wanted in ([], ["onefusion"], ["motoonefusion"]):
        r = import_usc(UscConfig(path=str(d), rebuild_ir=False, devices=wanted), catalog=catalog)
        assert [m for m in _msgs(r) if "not found" not in m] == []
        sc = r["scenarios"].set_index("scenario_id")
        row = sc.loc["usc-motoonefusion-tflite-cpu-2large-fp32"]
        assert (row["device"], row["device_model"], row["soc"]) == ("motoonefusion", "Motorola One Fusion", "Helio P60")
        assert row["cpu"] == "2x large 2.00 GHz + 6x small 2.00 GHz"
        assert row["description"].startswith("Motorola One Fusion (Helio P60), TFLite on the CPU: 2 large cores at 2.00 GHz")
    # the catalog checks core sets against the entry's clusters
    entry3 = CatalogEntry("motoonefusion", "Motorola One Fusion", clusters=(CpuCluster("large", 1, 2.0),
                                                                            CpuCluster("small", 6, 2.0)),
                          sources={"usc": SourceInfo(names=("onefusion",))})
    add_device(entry3, catalog, overwrite=True)
    r = import_usc(UscConfig(path=str(d), rebuild_ir=False), catalog=catalog)
    assert any("motoonefusion has 1 large core(s), the column uses 2; column skipped" in m for m in _msgs(r))


def test_usc_device_filters(tmp_path):
    d = dci.write_usc(tmp_path / "usc", {"pixel4": dci.USC_CLUSTERS["pixel4"], "onefusion": [("large", 2)]})
    r = import_usc(UscConfig(path=str(d), rebuild_ir=False, devices=["onefusion"]))  # in the data only
    assert set(r["scenarios"]["device"]) == {"onefusion"} and len(r["e2e"])
    r = import_usc(UscConfig(path=str(d), rebuild_ir=False, devices=["pixel4"]))
    assert set(r["scenarios"]["device"]) == {"pixel4"} and not [m for m in _msgs(r) if "onefusion" in m]
    # in the catalog but not in the files: a problem; the rest imports
    r = import_usc(UscConfig(path=str(d), rebuild_ir=False, devices=["pixel4", "s10"]))
    assert "(config), column 'devices': device 's10' is not in the files (devices in the files: onefusion, pixel4)" \
        in _msgs(r)
    # in neither: an error naming the filter item, the files' devices and the catalog
    with pytest.raises(PublicDataError, match=r"^devices: unknown device 'pixel5': in neither the data \(devices in "
                                              r"the files: onefusion, pixel4\) nor the device catalog "
                                              r"\(pipelines/devices/catalog\.yaml\)$"):
        import_usc(UscConfig(path=str(d), rebuild_ir=False, devices=["onefusion", "pixel5"]))
    # a filter matching nothing of the files
    with pytest.raises(PublicDataError, match=r"^devices: the filter \['s10', 'a03s'\] matches no device in the "
                                              r"data \(devices in the files: onefusion, pixel4\)$"):
        import_usc(UscConfig(path=str(d), rebuild_ir=False, devices=["s10", "a03s"]))


def test_help_filters_take_the_source_or_the_catalog_name(help_dir, tmp_path):
    r = import_help(HelpConfig(path=str(help_dir), rebuild_ir=False, indices=[0, 1, 2], devices=["1080ti_1"]))
    assert _sids(r) == {"help-1080ti-gpu"} and len(r["e2e"]) == 3 and r.problems == []
    for wanted in (["1080ti"], ["gold6226"], ["gold_6226"]):
        r = import_help(HelpConfig(path=str(help_dir), rebuild_ir=False, indices=[0], devices=wanted))
        assert len(_sids(r)) == 1 and r.problems == [], wanted
    # every batch of a GPU by the catalog's name, one by HELP's
    d = dci.write_help(tmp_path / "help", ["1080ti_1", "1080ti_32", "titanxp_1", "pixel3"])
    r = import_help(HelpConfig(path=str(d), rebuild_ir=False, devices=["1080ti"]))
    assert _sids(r) == {"help-1080ti-gpu", "help-1080ti-gpu-b32"}
    r = import_help(HelpConfig(path=str(d), rebuild_ir=False, devices=["1080ti_32", "pixel3"]))
    assert _sids(r) == {"help-1080ti-gpu-b32", "help-pixel3-tflite-cpu"}
    # matching nothing / unknown to both
    with pytest.raises(PublicDataError, match=r"^devices: the filter \['titan_rtx', '2080ti_32'\] matches no device "
                                              r"in the data \(devices in the files: 1080ti_1, 1080ti_32, pixel3, "
                                              r"titanxp_1\)$"):
        import_help(HelpConfig(path=str(d), rebuild_ir=False, devices=["titan_rtx", "2080ti_32"]))
    with pytest.raises(PublicDataError, match="^devices: unknown device '1080'"):
        import_help(HelpConfig(path=str(d), rebuild_ir=False, devices=["1080"]))
    r = import_help(HelpConfig(path=str(d), rebuild_ir=False, devices=["pixel3", "raspi4"]))
    assert _msgs(r) == ["(config), column 'devices': device 'raspi4' is not in the files "
                        "(devices in the files: 1080ti_1, 1080ti_32, pixel3, titanxp_1)"]
    assert help_mod.help_device("1080ti_1").device.name == "1080ti"


def test_help_device_not_in_the_catalog_is_imported_with_a_warning(tmp_path):
    d = dci.write_help(tmp_path / "help", ["pixel3", "a100_1", "titanxp_0"])
    r = import_help(HelpConfig(path=str(d), rebuild_ir=False))
    assert sorted(_msgs(r)) == [
        "latency.csv line 1, column 'a100_1_ms': " + _not_in_catalog("a100_1"),
        "latency.csv line 1, column 'titanxp_0_ms': unknown device 'titanxp_0': 0 is not a batch size (1..65536) for "
        "'titanxp_{batch}' (titanxp); column skipped"]
    sc = r["scenarios"].set_index("scenario_id")
    assert set(sc.index) == {"help-pixel3-tflite-cpu", "help-a1001-unknown"}
    row = sc.loc["help-a1001-unknown"]
    assert row["device"] == "a100_1" and row[["device_model", "soc", "cpu", "gpu"]].isna().all()
    assert row["description"].startswith("a100_1 (not in the device catalog), batch 1, NAS-Bench-201")
    assert (r["e2e"]["scenario_id"] == "help-a1001-unknown").sum() == 3
    r = import_help(HelpConfig(path=str(d), rebuild_ir=False, devices=["a100_1"]))  # in the data only
    assert _sids(r) == {"help-a1001-unknown"}


# ---------------------------------------------------------------- a malformed catalog
GOOD = """version: 1
devices:
  pixel4:
    model: Google Pixel 4
    clusters:
      - {tag: large, cores: 1, ghz: 2.84}
      - {tag: med, cores: 3, ghz: 2.42}
    sources:
      usc: {names: [pixel4]}
"""


@pytest.mark.parametrize("old, new, where, why", [
    ("cores: 3", "cores: x", "devices.pixel4.clusters[1].cores", "expected a whole number >= 1, got 'x'"),
    ("model: Google", "modle: Google", "devices.pixel4.modle", "unknown key"),
    ("    model: Google Pixel 4\n", "", "devices.pixel4.model", "required"),
    ("ghz: 2.42", "ghz: fast", "devices.pixel4.clusters[1].ghz", "expected a clock in GHz"),
    ("tag: med", "tag: large", "devices.pixel4.clusters", "cluster tag 'large' appears twice"),
    ("usc: {names: [pixel4]}", "usc: {names: pixel4}", "devices.pixel4.sources.usc.names", "expected a non-empty list"),
    ("usc: {names: [pixel4]}", "help: {accelerator: tpu}", "devices.pixel4.sources.help.accelerator",
     "expected one of cpu, gpu, asic, fpga, unknown"),
    ("usc: {names", "ucs: {names", "devices.pixel4.sources.ucs", "unknown key (known: usc, help, qaihub)"),
    ("usc: {names: [pixel4]}", "help: {graph_passes: [fold_all]}", "devices.pixel4.sources.help.graph_passes[0]",
     "unknown graph pass 'fold_all' (known: fold_constants, nb201_output_zeros_dce, zero_scale_dce)"),
    ("usc: {names: [pixel4]}", "help: {graph_passes: zero_scale_dce}", "devices.pixel4.sources.help.graph_passes",
     "expected a list of graph pass names"),
    ("version: 1", "version: 2", "version", "this code reads catalog version 1"),
])
def test_a_malformed_entry_is_an_error_naming_file_and_key(tmp_path, old, new, where, why):
    p = tmp_path / "catalog.yaml"
    assert GOOD.count(old) == 1
    p.write_text(GOOD.replace(old, new))
    with pytest.raises(CatalogError) as e:
        load_catalog(p)
    msg = str(e.value)
    assert msg.startswith(f"{p}: {where}: ") and why in msg and "\n" not in msg, msg
    # the importers stop on it with the same message
    d = dci.write_usc(tmp_path / "usc", {"pixel4": [("large", 1)]})
    with pytest.raises(CatalogError, match=re.escape(f"{p}: {where}: ")):
        import_usc(UscConfig(path=str(d), rebuild_ir=False), catalog=p)


def test_other_catalog_faults(tmp_path):
    p = tmp_path / "catalog.yaml"
    p.write_text(GOOD + "  s10:\n    model: [unclosed\n")
    with pytest.raises(CatalogError, match=rf"^{re.escape(str(p))}: malformed YAML: line \d+"):
        load_catalog(p)
    p.write_text(GOOD + "  s10:\n    model: " + "[" * 200 + "]" * 200 + "\n")  # bounded like every input
    with pytest.raises(CatalogError, match=rf"^{re.escape(str(p))}: line \d+: nested deeper than"):
        load_catalog(p)
    p.write_text(GOOD + "  other:\n    model: X\n    sources:\n      usc: {names: [pixel4]}\n")
    with pytest.raises(CatalogError, match=r"devices\.other\.sources\.usc\.names: 'pixel4' already names device 'pixel4'"):
        load_catalog(p)
    p.write_text(GOOD + "  Pixel_4:\n    model: X\n")
    with pytest.raises(CatalogError, match=r"devices\.Pixel_4: spelled 'pixel4' in scenario ids"):
        load_catalog(p)
    p.write_text(GOOD + "  2080:\n    model: X\n")
    with pytest.raises(CatalogError, match=r"devices\.2080: device names are text"):
        load_catalog(p)
    p.write_text(GOOD.replace("model: Google Pixel 4", "model: no"))
    with pytest.raises(CatalogError, match=r"devices\.pixel4\.model: expected a non-empty text, got False \(quote it"):
        load_catalog(p)
    with pytest.raises(CatalogError, match="nowhere.yaml: device catalog not readable"):
        load_catalog(tmp_path / "nowhere.yaml")


# ---------------------------------------------------------------- phones into the catalog
def _sd855(tmp_path):
    return read_clusters(sysfs_tree((SYSFS / "snapdragon855.txt").read_text(), tmp_path / "sysfs"))


PROPS = {"ro.product.model": "Pixel 4", "ro.product.manufacturer": "Google", "ro.soc.model": "SM8150",
         "ro.soc.manufacturer": "Qualcomm", "ro.board.platform": "msmnile"}


def test_a_phone_described_by_its_sysfs_round_trips_through_a_catalog(tmp_path):
    entry = entry_from_phone("mypixel", PROPS, _sd855(tmp_path), gpu="Adreno 640")
    assert (entry.model, entry.maker, entry.soc, entry.gpu) == ("Google Pixel 4", "Google", "Qualcomm SM8150",
                                                                "Adreno 640")
    assert [(c.tag, c.cores, c.cpus) for c in entry.clusters] == [("large", 1, (7,)), ("med", 3, (4, 5, 6)),
                                                                  ("small", 4, (0, 1, 2, 3))]
    assert entry.clusters[0].max_freq_khz == 2841600 and entry.clusters[0].ghz == 2.84
    # into a copy of the suite's catalog: appended, everything else (comments too) kept
    p = tmp_path / "catalog.yaml"
    shutil.copy(CATALOG_PATH, p)
    before = p.read_text()
    assert add_device(entry, p) == p
    text = p.read_text()
    assert text.startswith(before) and "  mypixel:\n" in text[len(before):]
    assert "    - {tag: large, cores: 1, ghz: 2.84, cpus: [7], max_freq_khz: 2841600}\n" in text
    cat = load_catalog(p)
    assert cat["mypixel"].same_as(entry) and cat["mypixel"] == entry
    assert set(cat.names()) == set(load_catalog().names()) | {"mypixel"}
    # the same entry again: nothing changes; a different one is refused unless told
    add_device(entry, p)
    assert p.read_text() == text
    other = entry_from_phone("mypixel", {**PROPS, "ro.product.model": "Pixel 4 XL"}, _sd855(tmp_path))
    with pytest.raises(CatalogError, match=r"catalog\.yaml: devices\.mypixel: already describes a device "
                                           r"\(Google Pixel 4, Qualcomm SM8150\) differently; pass overwrite=True"):
        add_device(other, p)
    assert p.read_text() == text
    add_device(other, p, overwrite=True)
    assert load_catalog(p)["mypixel"].model == "Google Pixel 4 XL"
    # replacing an entry in the middle of the file keeps the rest
    s10 = load_catalog(p)["s10"]
    from dataclasses import replace

    add_device(replace(s10, gpu="Mali-G76 MP12"), p, overwrite=True)
    cat = load_catalog(p)
    assert cat["s10"].gpu == "Mali-G76 MP12" and cat["pixel4"] == load_catalog()["pixel4"]
    assert list(cat.names()) == [*load_catalog().names(), "mypixel"]
    assert "# ---------------------------------------------------------------- HELP" in p.read_text()
    # a new file
    q = tmp_path / "new" / "devices.yaml"
    add_device(entry, q)
    assert load_catalog(q)["mypixel"] == entry and len(load_catalog(q)) == 1


def test_describe_phone_prefers_the_catalog(tmp_path):
    clusters = _sd855(tmp_path)
    known = describe_phone("pixel4", PROPS, clusters)
    assert known["described_by"] == "catalog" and known["soc"] == "Snapdragon 855" and known["gpu"] == "Adreno 640"
    assert known["cpu"] == "1x large 2.84 GHz + 3x med 2.42 GHz + 4x small 1.78 GHz" and "catalog_mismatch" not in known
    new = describe_phone("mypixel", PROPS, clusters, gpu="Adreno 640")
    assert new["described_by"] == "phone" and new["soc"] == "Qualcomm SM8150"
    assert new["cpu"] == "1x large 2.84 GHz + 3x med 2.42 GHz + 4x small 1.79 GHz"
    s10 = describe_phone("s10", PROPS, clusters)
    assert s10["catalog_mismatch"] == (f"{CATALOG_FILE}: devices.s10 has clusters 2x large + 2x med + 4x small, "
                                       "the phone 1x large + 3x med + 4x small")


def test_add_phone_over_adb_writes_the_catalog(tmp_path):
    """The CLI's call: read a phone over adb (the adbd emulator playing a Snapdragon 855 phone)
    and write its entry."""
    from adbd_emulator import AdbServer, EmulatorProcess

    from pipelines.devices.adb import add_phone

    srv = AdbServer().start()
    try:
        with EmulatorProcess(tmp_path / "phone", profile="snapdragon855") as emu:
            p = tmp_path / "catalog.yaml"
            entry = add_phone(emu.serial, "flame", adb_server=srv.address, gpu="Adreno 640", path=p)
            # the same through the command line: the same entry again is no change; a different
            # one under that name is refused (one line, exit 2) unless --overwrite
            from pipelines.cli import main

            argv = ["devices", "add", emu.serial, "flame", "--adb-server", srv.address, "--catalog", str(p)]
            assert main([*argv, "--gpu", "Adreno 640"]) == 0
            assert main([*argv, "--gpu", "Mali-G76"]) == 2
            import adbutils

            adbutils.AdbClient(host="127.0.0.1", port=srv.port).disconnect(emu.serial)
    finally:
        srv.stop()
    assert entry == entry_from_phone("flame", PROPS, _sd855(tmp_path), gpu="Adreno 640")
    assert load_catalog(p)["flame"] == entry
    assert "serial" not in p.read_text() and emu.serial not in p.read_text()


def test_catalog_module_has_no_device_tables_left_in_the_importers():
    """The importers hold no device descriptions of their own (issue 19)."""
    from pipelines.dataset import usc

    assert not hasattr(usc, "DEVICES") and not hasattr(help_mod, "DEVICES")
    assert cat_mod.load_catalog() is cat_mod.load_catalog()  # cached while the file is unchanged


def test_help_pt_layout_keeps_a_device_the_catalog_lacks(tmp_path):
    """HELP's own layout (latency/<device>.pt): a file of an unknown device is imported too."""
    import torch

    lat = tmp_path / "help" / "latency"
    lat.mkdir(parents=True)
    torch.save([1.5] * 15625, lat / "pixel3.pt")
    torch.save([2.5] * 15625, lat / "jetson_nano.pt")
    r = import_help(HelpConfig(path=str(tmp_path / "help"), rebuild_ir=False, indices=[0, 7]))
    assert _msgs(r) == ["latency/jetson_nano.pt: " + _not_in_catalog("jetson_nano")]
    assert _sids(r) == {"help-pixel3-tflite-cpu", "help-jetsonnano-unknown"} and len(r["e2e"]) == 4
    r = import_help(HelpConfig(path=str(tmp_path / "help"), rebuild_ir=False, indices=[0], devices=["pixel3"]))
    assert _sids(r) == {"help-pixel3-tflite-cpu"} and _msgs(r) == []


def test_two_file_names_of_one_catalog_device_are_not_merged(tmp_path):
    """A catalog mapping two of a file's device names to one entry would give both the same
    scenarios: the second name's columns are skipped with a problem."""
    d = dci.write_usc(tmp_path / "usc", {"onefusion": [("large", 2)], "one_fusion": [("large", 2)]})
    catalog = tmp_path / "catalog.yaml"
    add_device(CatalogEntry("motoonefusion", "Motorola One Fusion", clusters=(CpuCluster("large", 2, 2.0),),
                            sources={"usc": SourceInfo(names=("onefusion", "one_fusion"))}), catalog)
    r = import_usc(UscConfig(path=str(d), rebuild_ir=False), catalog=catalog)
    bad = [m for m in _msgs(r) if "one_fusion" in m]
    assert bad and all("would name scenarios as device 'onefusion' does (usc-motoonefusion-...); its columns are "
                       "skipped" in m for m in bad), bad
    assert set(r["scenarios"]["source_column"].str.split("|").str[0]) == {"onefusion"}
