"""`latbench profile MODEL --framework all` (pipelines/profile_compare.py): a user's ONNX file
through the IR to every runtime's format, each measured by the profile's instrument, one table
side by side; frameworks named wrongly and files no importer reads are one-line errors."""
from __future__ import annotations

import csv
from pathlib import Path

import pytest

from pipelines.profile import ProfileError, ProfileRequest
from pipelines.profile_compare import compare_runtimes, comparison_lines, parse_frameworks
from pipelines.runners import RUNNERS, frameworks
from support.profiles import quick_cfg, tiny_conv_net


@pytest.fixture(scope="module")
def cfg():
    return quick_cfg()


@pytest.fixture(scope="module")
def tiny_onnx(tmp_path_factory) -> Path:
    import torch

    out = tmp_path_factory.mktemp("onnx") / "tiny.onnx"
    torch.onnx.export(tiny_conv_net(), torch.randn(1, 3, 32, 32), str(out), dynamo=False, opset_version=17)
    return out


def test_every_runtime_side_by_side(cfg, tiny_onnx, tmp_path, native_built):
    cmp = compare_runtimes(cfg, ProfileRequest(tiny_onnx, out=tmp_path / "cmp"), parse_frameworks("all"),
                           progress=False, say=lambda line: None)
    assert [r.framework for r in cmp.rows] == list(frameworks())
    for r in cmp.rows:
        runner = RUNNERS[(r.framework, "cpu")]
        assert r.why_not is None, r.why_not
        assert r.fmt == runner.formats["fp32"] and r.e2e_ms > 0
        # the profile's own scenario and record, of the file exported from the one IR graph
        assert r.profile.scenario_id == f"host-{r.framework}-cpu-1large-fp32"
        assert r.profile.record["e2e"]["processes"] >= 2
        assert set(runner.granularities) - {"e2e"} <= {m for m in ("op", "kernel") if r.profile.record.get(m)}
    rows = list(csv.DictReader((tmp_path / "cmp" / "comparison.csv").open()))
    assert [row["framework"] for row in rows] == list(frameworks())
    assert min(float(row["vs_fastest"]) for row in rows) == pytest.approx(1.0)
    # the printed table: one line per runtime, the fastest at 1.00x, top op types without XNNPACK's numbering
    lines = comparison_lines(cmp)
    for r in cmp.rows:
        assert any(line.strip().startswith(r.title[:42]) for line in lines)
    assert any("1.00x" in line for line in lines)
    assert not any("#1" in line for line in lines)


def test_a_runtime_that_cannot_take_it_says_why(cfg, tiny_onnx, tmp_path):
    cmp = compare_runtimes(cfg, ProfileRequest(tiny_onnx, precision="fp16", out=tmp_path / "fp16"),
                           parse_frameworks("onnxruntime,executorch"), progress=False, say=lambda line: None)
    assert [r.framework for r in cmp.rows] == ["onnxruntime", "executorch"]
    for r in cmp.rows:
        assert r.profile is None and r.why_not.startswith("fp16: ")
        assert r.why_not.removeprefix("fp16: ") == RUNNERS[(r.framework, "cpu")].missing_precisions["fp16"]
    assert "fp16: " in "\n".join(comparison_lines(cmp))


def test_one_line_errors(cfg, tmp_path):
    with pytest.raises(ProfileError, match=r"--framework: unknown framework tvm \(known: all, tflite"):
        parse_frameworks("tflite,tvm")
    bad = tmp_path / "m.h5"
    bad.write_bytes(b"x")
    with pytest.raises(ProfileError, match=r"m.h5: unknown model kind '.h5'") as info:
        compare_runtimes(cfg, ProfileRequest(bad, out=tmp_path / "o"), ["tflite"], progress=False)
    assert "\n" not in str(info.value)
    with pytest.raises(ProfileError, match="--framework: the comparison runs on CPUs"):
        onnx = tmp_path / "m.json"
        compare_runtimes(cfg, ProfileRequest(onnx, device="gpu", out=tmp_path / "o"), ["tflite"], progress=False)
