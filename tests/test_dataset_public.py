"""Public real-device data in the dataset schema (issue 5): the USC and HELP importers, the
table schemas, the loading API and card, facts of the USC paper reproduced on the imported
tables, and bad input.

The public files are read from ../shared/external (never committed). The bulk of the tests
use one import of everything without rebuilding IRs (rows keyed ``<source>:<name>``); a
handful of networks are rebuilt to check IR-hash keying.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from pipelines.dataset import (
    SCHEMAS,
    TABLES,
    Dataset,
    HelpConfig,
    PublicDataError,
    SchemaError,
    UscConfig,
    check_table,
    import_help,
    import_usc,
    load_dataset,
    run_import,
)
from pipelines.dataset import help as help_mod
from pipelines.dataset import usc as usc_mod
from pipelines.dataset.card import write_card
from pipelines.dataset.schema import Column, conform, markdown, write_table
from pipelines.scenarios import make_scenario_id

USC_FILES = ["cnn_real_e2e_tflite.csv", "cnn_real_e2e_torch.csv", "cnn_real_ops_gpu_tflite.csv",
             "cnn_real_ops_gpu_torch.csv"]


@pytest.fixture(scope="session")
def imported(tmp_path_factory, usc_dir, help_dir):
    """Both datasets imported (no IR rebuild) into a folder with the card; (folder, report)."""
    out = tmp_path_factory.mktemp("public")
    report = run_import(UscConfig(path=str(usc_dir), rebuild_ir=False),
                        HelpConfig(path=str(help_dir), rebuild_ir=False), out, progress=False)
    return out, report


@pytest.fixture(scope="session")
def ds(imported) -> Dataset:
    return load_dataset(imported[0])


def _ratios(ds: Dataset, a: str, b: str) -> pd.Series:
    c = ds.compare(a, b)
    assert len(c), (a, b)
    return c.set_index("name")["ratio"]


# ================================================================ schema
def test_schema_definitions_follow_the_conventions():
    for name in TABLES:
        s = SCHEMAS[name]
        for c in s.columns:
            assert c.name.endswith("_ms") == (c.unit == "ms"), c
            if c.unit == "ms":
                assert c.dtype == "float64", c
            if c.name.endswith("_ns"):
                assert c.dtype in ("int64", "Int64"), c
        for k in s.key:
            assert s.column(k).required
        for p in ("dataset", "source_file", "source_row", "source_column", "source_commit"):
            assert p in s.names, (name, p)
    with pytest.raises(ValueError, match="_ms"):
        Column("wall_ms", "float64", "x", unit="s")
    with pytest.raises(ValueError, match="_ms"):
        Column("wall", "float64", "x", unit="ms")
    md = markdown()
    assert all(f"### `{n}`" in md for n in TABLES)


def test_import_report_is_clean(imported):
    out, report = imported
    assert report["problems"] == []
    assert report["counts"] == {"models": 102 + 15625, "scenarios": 135 + 7, "e2e": 13618 + 109375,
                                "ops": 42387, "kernels": 41160}
    assert (out / "import_problems.csv").read_text() == "file,row,column,message,kind\n"


@pytest.mark.parametrize("name", TABLES)
def test_tables_match_their_schema(ds, name):
    df = ds.tables()[name]
    check_table(name, df)  # dtypes, required values, key unique, latencies > 0
    s = SCHEMAS[name]
    assert list(df.columns) == s.names
    assert not df.duplicated(subset=list(s.key)).any()
    for c in s.columns:
        if c.unit == "ms":
            v = df[c.name].dropna()
            assert (v > 0).all() if c.positive else (v >= 0).all()
            assert np.isfinite(v).all()


@pytest.mark.parametrize("name", TABLES)
def test_provenance_present(ds, name):
    df = ds.tables()[name]
    assert df["dataset"].notna().all() and df["source_file"].notna().all()
    usc = df[df["dataset"] == usc_mod.DATASET]
    assert (usc["source_commit"] == usc_mod.COMMIT).all()
    assert usc["source_column"].notna().all() and usc["source_row"].notna().all()
    files = set(usc["source_file"])
    assert files <= set(USC_FILES), files
    help_rows = df[df["dataset"] == help_mod.DATASET]
    assert (help_rows["source_file"] == "latency.csv").all()
    if name == "e2e":
        assert help_rows["source_row"].notna().all()
        assert set(df["latency_stat"]) == {"mean", "reported"}


def test_references_between_tables(ds):
    assert set(ds.e2e["model_id"]) <= set(ds.models["model_id"])
    assert set(ds.e2e["scenario_id"]) == set(ds.scenarios["scenario_id"])
    k = ds.ops.dropna(subset=["kernel_index"])
    keys = set(zip(ds.kernels["model_id"], ds.kernels["scenario_id"], ds.kernels["kernel_index"]))
    assert all(x in keys for x in zip(k["model_id"], k["scenario_id"], k["kernel_index"]))
    # every kernel time is counted once: summed over ops = summed over kernels
    assert ds.ops["latency_ms"].sum() == pytest.approx(ds.kernels["latency_ms"].sum(), rel=1e-12)


def test_units_are_milliseconds(ds, usc_dir, help_dir):
    # SOURCE.md: mobilenetv2_w1 on one Pixel 4 large core = 28517 (us) -> 28.5 ms
    e = ds.e2e_for("usc-pixel4-tflite-cpu-1large-fp32").set_index("model_id")
    assert e.at["pytorch:mobilenetv2_w1", "latency_ms"] == pytest.approx(28.5169)
    assert e.at["pytorch:mobilenetv2_w1", "std_ms"] == pytest.approx(0.055, abs=0.5)
    raw = pd.read_csv(usc_dir / "cnn_real_e2e_torch.csv").set_index("model")
    got = ds.e2e_for("usc-s10-pytorch-cpu-1large2med-int8").set_index("model_id")["latency_ms"]
    assert got["pytorch:resnet18"] == pytest.approx(raw.at["resnet18", "s10|1large2med|quant|mean"] / 1000)
    # a GPU kernel: bagnet9's first conv on Pixel 4, 320.4096 us
    op = ds.ops_for("usc-pixel4-tflite-gpu-fp16", "pytorch:bagnet9").iloc[0]
    assert op["latency_ms"] == pytest.approx(0.3204096) and op["kernel_name"] == "convolution_2d_0"
    # HELP is already in ms
    h = pd.read_csv(help_dir / "latency.csv").set_index("nb201_index")
    got = ds.e2e_for("help-gold6226-cpu").set_index("model_id")["latency_ms"]
    assert got["nasbench201:nb201-00042"] == pytest.approx(h.at[42, "gold_6226_ms"])
    assert len(got) == 15625


def test_check_table_reports_faults():
    good = pd.DataFrame({"model_id": ["a", "b"], "scenario_id": ["s", "s"], "latency_ms": [1.0, 2.0],
                         "latency_stat": ["mean", "mean"], "dataset": ["x", "x"]})
    df = conform("e2e", good)
    check_table("e2e", df)
    dup = conform("e2e", pd.concat([good, good.iloc[[0]]]))
    with pytest.raises(SchemaError, match=r"e2e: key \(model_id, scenario_id\) not unique.*model_id='a'"):
        check_table("e2e", dup)
    neg = df.copy()
    neg.loc[1, "latency_ms"] = -3.0
    with pytest.raises(SchemaError, match=r"e2e\.latency_ms: 1 value\(s\) not > 0, first -3\.0 at row 1"):
        check_table("e2e", neg)
    missing = df.copy()
    missing.loc[0, "dataset"] = None
    with pytest.raises(SchemaError, match=r"e2e\.dataset: 1 missing value"):
        check_table("e2e", missing)
    wrong = df.copy()
    wrong["repeats"] = ["3", "4"]
    with pytest.raises(SchemaError, match=r"e2e\.repeats: dtype .* schema says Int64"):
        check_table("e2e", wrong)
    with pytest.raises(SchemaError, match="unknown column"):
        check_table("e2e", df.assign(latency_us=1.0))
    with pytest.raises(SchemaError, match="missing column"):
        check_table("e2e", df.drop(columns=["std_ms"]))
    with pytest.raises(SchemaError, match="non-finite"):
        check_table("e2e", df.assign(latency_ms=[1.0, np.inf]))


def test_scenario_id_convention(ds):
    assert make_scenario_id("pixel4", "cpu", framework="tflite", cores="1large", precision="fp32",
                            prefix="usc") == "usc-pixel4-tflite-cpu-1large-fp32"
    assert make_scenario_id("s10", "gpu", framework="pytorch", precision="fp16", prefix="usc") == "usc-s10-pytorch-gpu-fp16"
    assert make_scenario_id("titanxp", "gpu", batch=32, prefix="help") == "help-titanxp-gpu-b32"
    assert make_scenario_id("host", "cpu", framework="litert", cores="2big", precision="int8") == "host-litert-cpu-2big-int8"
    usc = ds.scenarios[ds.scenarios["dataset"] == usc_mod.DATASET]
    pat = re.compile(r"usc-(pixel4|s10|a03s|iphonexs)-(tflite|pytorch)-(cpu-(\d+[a-z]+)+-(fp32|int8)|gpu-fp16)")
    assert all(pat.fullmatch(s) for s in usc["scenario_id"]), usc["scenario_id"].tolist()
    assert set(ds.scenarios.loc[ds.scenarios["dataset"] == help_mod.DATASET, "scenario_id"]) == {
        "help-pixel2-cpu", "help-pixel3-tflite-cpu", "help-raspi4-cpu", "help-eyeriss-asic", "help-gold6226-cpu",
        "help-titanxp-gpu", "help-1080ti-gpu"}
    s = ds.scenario("usc-s10-tflite-cpu-1large2med-fp32")
    assert (s.device, s.cores, s.core_count, s.threads, s.heterogeneous, s.precision) == ("s10", "1large2med", 3, 3, True, "fp32")
    assert s.soc == "Exynos 9820" and "2.73 GHz" in s.cpu and s.gpu == "Mali G76"
    g = ds.scenario("usc-iphonexs-pytorch-gpu-fp16")
    assert g.accelerator == "gpu" and g.cores is None and "Metal" in g.description


def test_keying_without_rebuild(ds):
    usc = ds.models[ds.models["dataset"] == usc_mod.DATASET]
    assert len(usc) == 102
    assert (usc["model_id"] == "pytorch:" + usc["name"]).all()
    assert usc[["flops", "params", "ir"]].isna().all().all()
    assert usc["reported_flops"].notna().all() and (usc["input_shape"] == "1x3x224x224").all()
    assert usc.set_index("name").at["resnet18_wd2", "family"] == "resnet"
    assert usc.set_index("name").at["mobilenetv3_large_w1", "family"] == "mobilenetv3_large"
    assert usc["family"].nunique() == 33
    nb = ds.models[ds.models["dataset"] == help_mod.DATASET].set_index("name")
    assert nb.at["nb201-00042", "model_id"] == "nasbench201:nb201-00042"
    from generators.nasbench201 import arch_str

    assert nb.at["nb201-00042", "arch"] == arch_str(42)


def test_rebuilt_networks_are_keyed_by_their_ir(usc_dir, help_dir):
    from generators.importers.pytorch import import_pytorchcv
    from generators.nasbench201 import build

    names = ["mobilenetv2_w1", "fbnet_cb", "resnet18"]
    r = import_usc(UscConfig(path=str(usc_dir), models=names, devices=["pixel4", "iphonexs"]))
    assert r.problems == []
    m = r["models"].set_index("name")
    for n in names:
        g = import_pytorchcv(n)
        assert m.at[n, "model_id"] == g.model_id
        assert m.at[n, "flops"] == g.flops and m.at[n, "params"] == g.params
        # the source's FLOPS column counts 2 x MACs (plus bias/activation terms)
        assert 2.0 <= m.at[n, "reported_flops"] / m.at[n, "flops"] < 2.01
    assert set(r["e2e"]["model_id"]) == set(m["model_id"])
    ds = Dataset(r)
    mid = m.at["mobilenetv2_w1", "model_id"]
    assert ds.graph(mid).model_id == mid  # from the stored IR
    # fbnet_cb on iPhone XS: one kernel runs a depthwise conv and the next 1x1 conv
    k = ds.kernels_for("usc-iphonexs-tflite-gpu-fp16", m.at["fbnet_cb", "model_id"])
    shared = k[k["n_ops"] == 2]
    assert len(shared) == 1 and shared.iloc[0]["kernel_type"].startswith("depthwise_conv_plus_1x1_conv")
    o = ds.ops_for("usc-iphonexs-tflite-gpu-fp16", m.at["fbnet_cb", "model_id"])
    assert o["fused"].sum() == 1 and o.loc[o["fused"], "latency_ms"].isna().all()

    h = import_help(HelpConfig(path=str(help_dir), indices=[0, 1, 42, 15624], devices=["pixel3"]))
    hm = h["models"].set_index("name")
    for i in (0, 1, 42, 15624):
        g = build(i)
        assert hm.at[f"nb201-{i:05d}", "model_id"] == g.model_id
        assert hm.at[f"nb201-{i:05d}", "flops"] == g.flops
    assert len(h["e2e"]) == 4 and set(h["scenarios"]["scenario_id"]) == {"help-pixel3-tflite-cpu"}
    hd = Dataset(h)
    mid = hm.at["nb201-00042", "model_id"]
    assert hm["ir"].isna().all() and hd.graph(mid).model_id == mid  # rebuilt from the cell string


# ================================================================ loading API and card
def test_parquet_round_trip_keeps_types(imported, ds, usc_dir):
    r = import_usc(UscConfig(path=str(usc_dir), rebuild_ir=False))
    for name in TABLES:
        got = ds.tables()[name]
        got = got[got["dataset"] == usc_mod.DATASET].reset_index(drop=True)
        pd.testing.assert_frame_equal(got, r[name].reset_index(drop=True))
    assert str(ds.e2e["latency_ms"].dtype) == "float64"
    assert isinstance(ds.e2e["model_id"].dtype, pd.StringDtype)
    assert str(ds.ops["fused"].dtype) == "boolean" and str(ds.ops["op_index"].dtype) == "int64"


def test_loading_api(ds):
    assert "usc-pixel4-tflite-cpu-1large-fp32" in ds.scenario_ids(device="pixel4", framework="tflite",
                                                                   precision=["fp32", "int8"])
    assert ds.scenario_ids(dataset=help_mod.DATASET, accelerator="gpu") == ["help-titanxp-gpu", "help-1080ti-gpu"]
    e = ds.e2e_for("usc-pixel4-tflite-cpu-1large-fp32", features=True)
    assert len(e) == 102 and {"family", "reported_flops", "name"} <= set(e.columns)
    fam = ds.by_family("usc-pixel4-tflite-cpu-1large-fp32")
    assert sorted(fam["mobilenetv2"]["name"]) == ["mobilenetv2_w1", "mobilenetv2_w3d4", "mobilenetv2_wd2", "mobilenetv2_wd4"]
    assert sum(len(v) for v in fam.values()) == 102
    assert "nasbench201" in ds.by_family()
    with pytest.raises(KeyError, match="did you mean usc-pixel4-tflite-cpu-1large-fp32"):
        ds.e2e_for("usc-pixel4-tflite-cpu-1large-fp64")
    o = ds.ops_with_features("usc-pixel4-tflite-gpu-fp16")
    assert {"op_type", "in_channels", "kernel_type", "share", "family", "device", "reported_flops",
            "reported_flops_model"} <= set(o.columns)
    assert o.groupby("model_id")["share"].sum().round(9).eq(1.0).all()
    conv = o[o["op_type"] == "dwconv2d"].iloc[0]
    assert conv["groups"] == conv["in_channels"] == conv["out_channels"]
    gap = ds.op_sum()
    assert (gap["ops"] >= gap["fused"]).all()
    m = ds.latency_matrix(["help-pixel2-cpu", "help-pixel3-tflite-cpu"])
    assert m.shape == (15625, 2)
    sub = ds.subset(usc_mod.DATASET)
    assert len(sub.models) == 102 and set(sub.e2e["dataset"]) == {usc_mod.DATASET}


def test_dataset_card(imported):
    out, report = imported
    text = (out / "DATASET.md").read_text()
    for fig in ("latency_distribution.png", "op_breakdown.png", "multicore_speedup.png", "int8_speedup.png",
                "op_gap.png"):
        assert f"]({fig})" in text and (out / fig).stat().st_size > 1000
    assert "| `e2e` | 122993 | 109375 | 13618 |" in text
    assert "no CPU op records" in text and "### `kernels`" in text
    assert "40ba833a9ca560a3035a76a5c3da504082dec001" in text


def test_card_without_ops_or_cpu_combinations_says_so_and_is_deterministic(tmp_path, help_dir):
    r = import_help(HelpConfig(path=str(help_dir), rebuild_ir=False, indices=list(range(50))))
    ds = Dataset(r)
    a, b = tmp_path / "a", tmp_path / "b"
    write_card(ds, a)
    write_card(ds, b)
    text = (a / "DATASET.md").read_text()
    assert "op_breakdown: not drawn: no op records" in text
    assert "multicore_speedup: not drawn" in text and "int8_speedup: not drawn" in text
    # the processor is part of what a device is (a release holds one): the per-device table names it
    assert "| dataset | device | processor | accelerator | scenarios |" in text
    soc = str(ds.scenarios["soc"].dropna().iloc[0]) if ds.scenarios["soc"].notna().any() else "-"
    assert f"| {soc} |" in text
    assert sorted(p.name for p in a.iterdir()) == ["DATASET.md", "latency_distribution.png"]
    for p in a.iterdir():
        assert p.read_bytes() == (b / p.name).read_bytes(), p.name
    write_table("e2e", r["e2e"], a / "e2e.parquet")
    write_table("e2e", r["e2e"], b / "e2e.parquet")
    assert (a / "e2e.parquet").read_bytes() == (b / "e2e.parquet").read_bytes()


# ================================================================ the USC paper's insights
def test_insight2_tflite_int8_faster_than_fp32_on_one_large_core_for_every_model(ds):
    r = _ratios(ds, "usc-pixel4-tflite-cpu-1large-int8", "usc-pixel4-tflite-cpu-1large-fp32")
    assert len(r) == 102
    assert (r < 1).all(), r[r >= 1]
    assert r.median() < 0.6  # measured: median int8/fp32 = 0.485, max 0.91


def test_insight2_pytorch_int8_slower_on_large_core_faster_on_small_cores(ds):
    """Fig. 4e, the QNNPACK anomaly: on Pixel 4, PyTorch Mobile int8 is slower than fp32 on one
    large core for most models, yet faster on the small cores."""
    large = _ratios(ds, "usc-pixel4-pytorch-cpu-1large-int8", "usc-pixel4-pytorch-cpu-1large-fp32")
    assert len(large) == 100
    assert (large > 1).mean() >= 0.7  # measured: 79 of 100 slower, median ratio 1.27
    for cores in ("1small", "4small"):
        small = _ratios(ds, f"usc-pixel4-pytorch-cpu-{cores}-int8", f"usc-pixel4-pytorch-cpu-{cores}-fp32")
        assert (small < 1).mean() >= 0.95, cores  # measured: 99 of 100 faster on 1 and on 4 small cores


def test_insight1_homogeneous_multicore_speedup_is_sublinear(ds):
    for fw in ("tflite", "pytorch"):
        s = _ratios(ds, f"usc-pixel4-{fw}-cpu-1med-fp32", f"usc-pixel4-{fw}-cpu-2med-fp32")  # 1 core / 2 cores
        assert (s < 2).all(), (fw, s.max())  # measured max 1.885 (tflite), 1.911 (pytorch)
        assert s.median() < 1.85, fw  # measured median 1.711 (tflite), 1.777 (pytorch)


def test_insight1_heterogeneous_cores_can_be_slower_than_the_large_core_alone(ds):
    """Galaxy S10: one large + two medium cores is slower than the large core alone for a
    sizeable share of models (inter-cluster overhead, work split equally among threads)."""
    shares = {}
    for fw in ("tflite", "pytorch"):
        r = _ratios(ds, f"usc-s10-{fw}-cpu-1large2med-fp32", f"usc-s10-{fw}-cpu-1large-fp32")
        shares[fw] = (r > 1).mean()
    assert shares["tflite"] >= 0.2 and shares["pytorch"] >= 0.15, shares  # measured 0.275 and 0.22


# ================================================================ bad input
def _faults(result) -> list[str]:
    """The problem lines but the assumptions (a copy in a test folder states no set-up:
    tests/test_public_user_data.py checks the assumptions)."""
    return [str(p) for p in result.problems if p.kind != "assumption"]


def _copy_usc(src: Path, dst: Path, lines: int = 12) -> Path:
    """The first ``lines`` lines of each USC file (header + models)."""
    dst.mkdir(parents=True, exist_ok=True)
    for f in USC_FILES:
        text = (src / f).read_text().splitlines(keepends=True)
        n = lines if "e2e" in f else lines * 6
        (dst / f).write_text("".join(text[:n]))
    return dst


def test_truncated_csv_names_file_and_row_and_the_rest_imports(tmp_path, usc_dir):
    d = _copy_usc(usc_dir, tmp_path / "usc")
    e2e = d / "cnn_real_e2e_tflite.csv"
    text = e2e.read_text()
    e2e.write_text(text[: text.rindex("\n", 0, len(text) - 1) + 1 + 200])  # line 12 cut after 200 characters
    ops = d / "cnn_real_ops_gpu_tflite.csv"
    lines = ops.read_text().splitlines(keepends=True)
    cut = lines[40].index("'Output_shape'")
    ops.write_text("".join(lines[:40]) + lines[40][:cut])  # line 41 cut inside the quoted feature
    r = import_usc(UscConfig(path=str(d), rebuild_ir=False))
    msgs = _faults(r)
    assert any(m.startswith("cnn_real_e2e_tflite.csv line 12: ") and "truncated" in m for m in msgs), msgs
    assert any(m.startswith("cnn_real_ops_gpu_tflite.csv line 41: malformed CSV") for m in msgs), msgs
    assert len(msgs) == 2, msgs
    tfl = r["e2e"][r["e2e"]["source_file"] == "cnn_real_e2e_tflite.csv"]
    assert tfl["source_row"].max() == 11 and tfl["model_id"].nunique() == 10
    assert (r["e2e"]["source_file"] == "cnn_real_e2e_torch.csv").any()
    assert r["ops"][r["ops"]["source_file"] == "cnn_real_ops_gpu_tflite.csv"]["source_row"].max() == 40
    with pytest.raises(PublicDataError, match="line 12"):
        import_usc(UscConfig(path=str(d), rebuild_ir=False, strict=True))


def test_renamed_columns_name_file_and_column(tmp_path, usc_dir):
    d = _copy_usc(usc_dir, tmp_path / "usc")
    torch_e2e = d / "cnn_real_e2e_torch.csv"
    torch_e2e.write_text(torch_e2e.read_text().replace("model,", "Model,", 1))
    tfl = d / "cnn_real_e2e_tflite.csv"
    tfl.write_text(tfl.read_text().replace("pixel4|1large|float|mean", "pixel4|1large|float|avg", 1))
    r = import_usc(UscConfig(path=str(d), rebuild_ir=False))
    msgs = _faults(r)
    assert any(m.startswith("cnn_real_e2e_torch.csv line 1, column 'model': required column missing (found 'Model'")
               for m in msgs), msgs
    assert any(m.startswith("cnn_real_e2e_tflite.csv line 1, column 'pixel4|1large|float|avg'") for m in msgs), msgs
    assert not (r["e2e"]["source_file"] == "cnn_real_e2e_torch.csv").any()  # that file is unusable
    sids = set(r["e2e"]["scenario_id"])
    assert "usc-pixel4-tflite-cpu-1large-fp32" not in sids and "usc-pixel4-tflite-cpu-1med-fp32" in sids
    assert "usc-pixel4-pytorch-gpu-fp16" in set(r["ops"]["scenario_id"])  # the PyTorch ops file is fine


def test_unknown_model_name_names_file_and_row(tmp_path, usc_dir):
    d = _copy_usc(usc_dir, tmp_path / "usc")
    tfl = d / "cnn_real_e2e_tflite.csv"
    lines = tfl.read_text().splitlines(keepends=True)
    lines[4] = "no_such_net" + lines[4][lines[4].index(","):]
    tfl.write_text("".join(lines))
    r = import_usc(UscConfig(path=str(d), rebuild_ir=False))
    msgs = _faults(r)
    assert msgs == ["cnn_real_e2e_tflite.csv line 5, column 'model': model 'no_such_net': unknown pytorchcv model "
                    "(pytorchcv.model_provider has no such name); its 1 row(s) in this file skipped"], msgs
    assert "no_such_net" not in set(r["models"]["name"])
    tfl_rows = r["e2e"][r["e2e"]["source_file"] == "cnn_real_e2e_tflite.csv"]
    assert tfl_rows["model_id"].nunique() == 10 and 5 not in set(tfl_rows["source_row"])
    # with rebuilding: the same report, the known models are rebuilt
    small = tmp_path / "small"
    small.mkdir()
    full = (usc_dir / "cnn_real_e2e_tflite.csv").read_text().splitlines(keepends=True)
    small.joinpath("cnn_real_e2e_tflite.csv").write_text("".join([lines[0], lines[4]] + [
        ln for ln in full if ln.startswith("mobilenet_wd4,")]))
    r = import_usc(UscConfig(path=str(small), devices=["pixel4"]))
    msgs = [m for m in _faults(r) if "not found" not in m]
    assert msgs == ["cnn_real_e2e_tflite.csv line 2, column 'model': model 'no_such_net': unknown pytorchcv model "
                    "(pytorchcv.model_provider has no such name); its 1 row(s) in this file skipped"]
    assert list(r["models"]["name"]) == ["mobilenet_wd4"] and ":" not in r["models"]["model_id"][0]
    assert len(r["e2e"]) == 19  # pixel4: 9 core combinations x fp32/int8 + GPU


def test_bad_cells_and_missing_files(tmp_path, usc_dir):
    d = _copy_usc(usc_dir, tmp_path / "usc")
    (d / "cnn_real_ops_gpu_torch.csv").unlink()
    tfl = d / "cnn_real_e2e_tflite.csv"
    lines = tfl.read_text().splitlines(keepends=True)
    f = lines[2].split(",")
    f[3] = "fast"  # pixel4|1large|float|mean
    f[5] = "-12"  # pixel4|1med|float|mean
    lines[2] = ",".join(f)
    tfl.write_text("".join(lines))
    r = import_usc(UscConfig(path=str(d), rebuild_ir=False))
    msgs = _faults(r)
    assert "cnn_real_e2e_tflite.csv line 3, column 'pixel4|1large|float|mean': not a number: 'fast'; cell skipped" in msgs
    assert "cnn_real_e2e_tflite.csv line 3, column 'pixel4|1med|float|mean': latency must be > 0, got -12; cell skipped" in msgs
    assert any(m.startswith("cnn_real_ops_gpu_torch.csv: file not found") for m in msgs)
    e = r["e2e"]
    assert not ((e["source_row"] == 3) & (e["scenario_id"] == "usc-pixel4-tflite-cpu-1large-fp32")).any()
    assert ((e["source_row"] == 3) & (e["scenario_id"] == "usc-pixel4-tflite-cpu-2med-fp32")).any()
    with pytest.raises(PublicDataError, match="folder not found"):
        import_usc(UscConfig(path=str(tmp_path / "nowhere")))


def test_config_validation(usc_dir, help_dir):
    with pytest.raises(ValueError, match="^pathh: unknown key"):
        usc_mod.validate_config({"pathh": "x"})
    # a device filter is checked against the files and the device catalog when importing (a
    # device of the files is welcome even when the catalog does not describe it: issue 19)
    with pytest.raises(ValueError, match="^devices: unknown device 'pixel5'"):
        import_usc(UscConfig(path=str(usc_dir), rebuild_ir=False, devices=["pixel5"]))
    with pytest.raises(ValueError, match="^rebuild_ir: expected true or false"):
        usc_mod.validate_config({"rebuild_ir": "sometimes"})  # "yes" is true to the schema, as in YAML
    with pytest.raises(ValueError, match="^indices: 15625 is not a NAS-Bench-201 index"):
        help_mod.validate_config({"indices": [15625]})
    with pytest.raises(ValueError, match="^devices: unknown device 'pixel9'"):
        import_help(HelpConfig(path=str(help_dir), rebuild_ir=False, indices=[0], devices=["pixel9"]))
    assert help_mod.help_device("titan_rtx_256").batch == 256
    assert help_mod.validate_config({"devices": ["titanxp_32"]}).devices == ["titanxp_32"]


def test_help_bad_rows(tmp_path, help_dir):
    lines = (help_dir / "latency.csv").read_text().splitlines(keepends=True)[:30]
    lines[0] = lines[0].replace("raspi4_ms", "raspi4_us")
    f = lines[5].split(",")
    f[1] = "|none~0|+|none~0|none~1|+|none~0|none~1|none~2|"  # not the cell of this index
    lines[5] = ",".join(f)
    f = lines[7].split(",")
    f[2] = "n/a"  # pixel2_ms
    lines[7] = ",".join(f)
    lines[9] = lines[8]  # index listed twice
    d = tmp_path / "help"
    d.mkdir()
    (d / "latency.csv").write_text("".join(lines[:-1]) + lines[-1][:15])  # last row cut
    r = import_help(HelpConfig(path=str(d), rebuild_ir=False))
    msgs = _faults(r)
    assert msgs[0] == "latency.csv line 1, column 'raspi4_us': not a latency column <device>_ms (milliseconds); column skipped"
    assert msgs[1].startswith("latency.csv line 6, column 'arch_str': cell string does not match index 4")
    assert msgs[2] == "latency.csv line 8, column 'pixel2_ms': not a number: 'n/a'; cell skipped"
    assert msgs[3].startswith("latency.csv line 10, column 'nb201_index': index 7 listed again (first at line 9)")
    assert msgs[4].startswith("latency.csv line 30: the file ends in the middle of this row")
    assert len(msgs) == 5
    assert len(r["models"]) == 26 and "help-raspi4-cpu" not in set(r["scenarios"]["scenario_id"])
    assert len(r["e2e"]) == 26 * 6 - 1


def test_help_original_pt_layout(tmp_path, help_dir):
    """HELP's own files: latency/<device>.pt lists in NAS-Bench-201 index order."""
    torch = pytest.importorskip("torch")
    csv = pd.read_csv(help_dir / "latency.csv")
    lat = tmp_path / "help" / "latency"
    lat.mkdir(parents=True)
    torch.save(csv["pixel2_ms"].astype(int).tolist(), lat / "pixel2.pt")
    torch.save(csv["titanxp_1_ms"].tolist()[:100], lat / "titanxp_1.pt")  # truncated
    torch.save({a: int(i) for a, i in zip(csv["arch_str"][:10], csv["nb201_index"][:10])},
               tmp_path / "help" / "str_arch2idx.pt")
    r = import_help(HelpConfig(path=str(tmp_path / "help"), rebuild_ir=False, indices=[3, 50, 150]))
    msgs = _faults(r)
    assert msgs == ["latency/titanxp_1.pt: 100 values where NAS-Bench-201 has 15625 architectures (truncated?); "
                    "the values present are imported by position"], msgs
    e = r["e2e"].set_index(["model_id", "scenario_id"])["latency_ms"]
    assert e[("nasbench201:nb201-00050", "help-pixel2-cpu")] == csv.at[50, "pixel2_ms"]
    assert e[("nasbench201:nb201-00050", "help-titanxp-gpu")] == pytest.approx(csv.at[50, "titanxp_1_ms"])
    assert ("nasbench201:nb201-00150", "help-titanxp-gpu") not in e.index
    assert len(r["models"]) == 3


def test_problems_file_lists_problems(tmp_path, usc_dir, help_dir):
    d = _copy_usc(usc_dir, tmp_path / "usc", lines=4)
    tfl = d / "cnn_real_e2e_tflite.csv"
    tfl.write_text(tfl.read_text().replace("bninception", "bn_inception", 1))
    out = tmp_path / "out"
    rep = run_import(UscConfig(path=str(d), rebuild_ir=False), None, out, progress=False, card=False)
    rows = pd.read_csv(out / "import_problems.csv")
    assert list(rows.columns) == ["file", "row", "column", "message", "kind"]
    rows = rows[rows["kind"] != "assumption"]  # the copy's folder states no set-up (test_public_user_data.py)
    assert rows.iloc[0].tolist()[:3] == ["cnn_real_e2e_tflite.csv", 3, "model"] and rows.iloc[0]["kind"] == "input"
    assert len([p for p in rep["problems"] if p.kind != "assumption"]) == 1
    ds = load_dataset(out)
    assert "bn_inception" not in set(ds.models["name"]) and len(ds.e2e) and len(ds.ops)
    assert json.loads(ds.models["meta"].iloc[0]) == {"pytorchcv": "bagnet9"}


def test_original_repository_file_names(tmp_path, usc_dir):
    """The original repository's names (dataset/tflite_cnn_e2e.csv ... at 40ba833) import the same."""
    small = _copy_usc(usc_dir, tmp_path / "local")
    orig = tmp_path / "orig" / "dataset"
    orig.mkdir(parents=True)
    for local, original in zip(USC_FILES, ["tflite_cnn_e2e.csv", "torch_cnn_e2e.csv", "tflite_cnn_ops_gpu.csv",
                                           "torch_cnn_ops_gpu.csv"]):
        (orig / original).write_bytes((small / local).read_bytes())
    a = import_usc(UscConfig(path=str(small), rebuild_ir=False))
    b = import_usc(UscConfig(path=str(tmp_path / "orig"), rebuild_ir=False))
    assert _faults(b) == [] and set(b["e2e"]["source_file"]) == {"dataset/tflite_cnn_e2e.csv", "dataset/torch_cnn_e2e.csv"}
    for name in TABLES:
        pd.testing.assert_frame_equal(a[name].drop(columns=["source_file"]), b[name].drop(columns=["source_file"]))


def test_docs_describe_every_column(root):
    text = (root / "docs" / "dataset.md").read_text()
    assert markdown() in text  # the schema section is the generated one
    for name in TABLES:
        for c in SCHEMAS[name].columns:
            assert f"`{c.name}`" in text, (name, c.name)
