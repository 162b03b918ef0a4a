"""The card's framework comparison (pipelines/dataset/comparisons.py framework_pairs & co.,
card.py frameworks_section): scenarios of one device pair up across frameworks only when they
differ in the framework alone, ratios are per-network medians over the networks both measured,
and the section says in one line why it is empty."""
from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from generators.ir import Graph
from pipelines.dataset.card import frameworks_section, write_card
from pipelines.dataset.comparisons import (dominant_op, framework_pairs, framework_ratio_frame, framework_wins,
                                           rank_correlation)
from pipelines.dataset.load import Dataset, load_dataset
from support.tables import frame as _frame
from pipelines.runners import runner_for

DATA = Path(__file__).resolve().parents[1] / "data" / "dataset"




def _scenario(fw: str, cores: str = "1large", precision: str = "fp32", **kw) -> dict:
    row = {"scenario_id": f"host-{fw}-cpu-{cores}-{precision}", "dataset": "latbench", "device": "host",
           "soc": "AMD EPYC", "framework": fw, "accelerator": "cpu", "cores": cores, "core_count": int(cores[0]),
           "threads": int(cores[0]), "precision": precision, "batch": 1}
    return {**row, **kw}


# per network: tflite's and onnxruntime's latency (ms) at 1large fp32; onnxruntime / tflite is
# 0.5, 1, 2, 3, 4: median 2, quartiles 1 and 3 (pandas' linear interpolation)
TFLITE = [2.0, 3.0, 1.0, 2.0, 1.0]
ORT = [1.0, 3.0, 2.0, 6.0, 4.0]
SOURCES = ["zoo", "zoo", "synthetic", "synthetic", "synthetic"]


def _dataset(frameworks: dict[str, list[float]], extra_scenarios: list[dict] = ()) -> Dataset:
    scen = [_scenario(fw) for fw in frameworks] + list(extra_scenarios)
    models = [{"model_id": f"m{i}", "dataset": "latbench", "name": f"net{i}", "source": src, "flops": 1000 * (i + 1)}
              for i, src in enumerate(SOURCES)]
    e2e = [{"model_id": f"m{i}", "scenario_id": f"host-{fw}-cpu-1large-fp32", "dataset": "latbench",
            "latency_ms": ms}
           for fw, lats in frameworks.items() for i, ms in enumerate(lats) if ms is not None]
    # a distractor measured on every network: pairs with nothing (it differs in more than the framework)
    e2e += [{"model_id": f"m{i}", "scenario_id": s["scenario_id"], "dataset": "latbench", "latency_ms": 100.0}
            for s in extra_scenarios for i in range(len(SOURCES))]
    return Dataset({"models": _frame("models", models), "scenarios": _frame("scenarios", scen),
                    "e2e": _frame("e2e", e2e)}, check=False)


def test_the_ratio_is_the_median_over_the_networks_both_measured():
    ds = _dataset({"tflite": TFLITE, "onnxruntime": ORT})
    df = framework_ratio_frame(ds)
    assert set(zip(df["a"], df["b"])) == {("tflite", "onnxruntime")}  # A: the registry's first
    assert sorted(df["ratio"]) == [0.5, 1.0, 2.0, 3.0, 4.0]
    assert df["ratio"].median() == 2.0
    by_source = df.groupby("source")["ratio"].median().to_dict()
    assert by_source == {"synthetic": 3.0, "zoo": 0.75}
    # a network one framework did not measure is left out of the pair
    missing = _dataset({"tflite": TFLITE, "onnxruntime": [None, *ORT[1:]]})
    assert framework_ratio_frame(missing)["ratio"].median() == 2.5


def test_only_scenarios_that_differ_in_the_framework_alone_pair_up():
    others = [_scenario("onnxruntime", cores="2large"), _scenario("onnxruntime", precision="int8"),
              _scenario("executorch", soc="Intel Xeon"), _scenario("pytorch", threads=2, scenario_id="host-pytorch-t2"),
              _scenario("pytorch", graph_passes="fold_bn", scenario_id="host-pytorch-passes"),
              _scenario("tflite", cores="2large")]
    ds = _dataset({"tflite": TFLITE, "onnxruntime": ORT}, others)
    pairs = framework_pairs(ds.scenarios)
    # tflite and onnxruntime at 1large fp32; and at 2large fp32, whose tflite scenario is there too
    assert pairs == [("host-tflite-cpu-1large-fp32", "host-onnxruntime-cpu-1large-fp32", "1large, 1 thread, fp32"),
                     ("host-tflite-cpu-2large-fp32", "host-onnxruntime-cpu-2large-fp32", "2large, 2 threads, fp32")]
    assert framework_pairs(ds.scenarios[ds.scenarios["framework"] == "tflite"]) == []


def test_the_section_names_both_frameworks_and_its_figures():
    ds = _dataset({"tflite": TFLITE, "onnxruntime": ORT})
    title, body = frameworks_section(ds)
    assert title == "Frameworks on the same device"
    for fw in ("tflite", "onnxruntime"):
        assert runner_for(fw, "cpu").title in body
    assert "| `onnxruntime` / `tflite` | all | 5 | 2.00x | 1.00-3.00 | 20% |" in body
    assert "| `onnxruntime` / `tflite` | zoo | 2 | 0.75x |" in body
    # wins: tflite is the faster on m1 (tie goes to the first), m2, m3, m4; onnxruntime on m0
    assert "| `tflite` | 4 of 5 (80%) |" in body and "| `onnxruntime` | 1 of 5 (20%) |" in body


def test_pytorch_is_named_the_legacy_runtime():
    ds = _dataset({"tflite": TFLITE, "pytorch": [3 * x for x in TFLITE]})
    _, body = frameworks_section(ds)
    assert "PyTorch (TorchScript, legacy)" in body and "ExecuTorch is PyTorch's on-device runtime" in body
    assert "| `pytorch` (legacy) / `tflite` | all | 5 | 3.00x |" in body


def test_an_empty_section_says_why_in_one_line():
    _, alone = frameworks_section(_dataset({"tflite": TFLITE}))
    assert alone.startswith("Not compared: no two frameworks") and "\n" not in alone
    # a point shared by two frameworks without a network in common
    _, disjoint = frameworks_section(_dataset({"tflite": [1.0, 1.0, None, None, None],
                                               "onnxruntime": [None, None, 1.0, 1.0, 1.0]}))
    assert disjoint.startswith("Not compared: 1 CPU point(s)") and "\n" not in disjoint
    # different points only: no pair
    _, apart = frameworks_section(_dataset({"tflite": TFLITE}, [_scenario("onnxruntime", precision="int8")]))
    assert apart.startswith("Not compared: no two frameworks")


def test_the_card_carries_the_section(tmp_path):
    card = write_card(_dataset({"tflite": TFLITE, "onnxruntime": ORT}), tmp_path).read_text()
    assert "### Frameworks on the same device" in card and "ONNX Runtime (CPU execution provider)" in card


def _ir(groups: int) -> str:
    g = Graph("t", source="test")
    x = g.input([1, 8, 16, 16])
    y = g.add("conv2d", x, out_channels=8, kernel=[3, 3], padding=1, groups=groups)
    y = g.add("conv2d", y, out_channels=8, kernel=[1, 1])  # 8x fewer MACs than a full 3x3
    g.set_outputs(y)
    return g.to_json()


def test_the_dominant_op_is_read_from_the_ir():
    assert dominant_op(_ir(1)) == "conv2d"
    assert dominant_op(_ir(2)) == "group_conv2d"  # 3x3 with 4 inputs per group: 36 vs 8 MACs per output
    assert dominant_op(_ir(8)) == "dwconv2d"  # depthwise: 9 MACs per output against the 1x1's 8
    assert dominant_op(None) is None and dominant_op("{") is None


def test_wins_and_their_trend_with_size():
    ds = _dataset({"tflite": TFLITE, "onnxruntime": ORT})
    w = framework_wins(ds).set_index("framework")
    assert w.loc["tflite", "wins"] == 4 and w.loc["onnxruntime", "networks"] == 5
    assert w.loc["onnxruntime", "vs_best_other"] == 2.0
    assert rank_correlation(pd.Series([1, 2, 3, 4]), pd.Series([4, 3, 2, 1])) == pytest.approx(-1.0)
    assert rank_correlation(pd.Series([1, 2, 3]), pd.Series([1, 2, 3])) is None  # too few


def test_the_main_job_dataset_compares_four_frameworks():
    if not (DATA / "e2e.parquet").is_file():
        pytest.skip(f"the main job's dataset is not on this machine: {DATA}/e2e.parquet not found "
                    "(built by the main job's assemble stage)")
    ds = load_dataset(DATA)
    if ds.scenarios["framework"].nunique() < 2:
        pytest.skip(f"{DATA} has one framework: nothing to compare")
    _, body = frameworks_section(ds)
    assert not body.startswith("Not compared")
    for fw in sorted(ds.scenarios.loc[ds.scenarios["accelerator"] == "cpu", "framework"].unique()):
        assert runner_for(fw, "cpu").title.rstrip(")") in body
    w = framework_wins(ds)
    assert (w.groupby(["device", "point"])["wins"].sum() == w.groupby(["device", "point"])["networks"].first()).all()


if __name__ == "__main__":
    pytest.main([__file__])
