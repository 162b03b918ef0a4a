"""The conformance route ``tflite-litert-torch`` (generators/importers/conformance.py): a pytorchcv
model converted to .tflite by litert-torch, which lives in an environment of its own
(scripts/setup-litert-torch-env.sh) and runs as a subprocess.

Where that environment is absent the route states it, naming the script that creates it, and
never falls back to another converter; that test always runs. Where it is present, one small
pytorchcv model goes through it and must import (its NCHW input transposed to NHWC inside the
file, its max pool padded by -inf), count the source's MACs within 1% and compute what the file
computes; a default run of the zoo does not take the route.
"""
from __future__ import annotations

import pytest

from generators.importers.conformance import LITERT_TORCH_SETUP, MACS_TOLERANCE, OUTPUT_TOLERANCE, ROUTES, ZOOS, SourceModel, check

ROUTE = "tflite-litert-torch"


def test_an_absent_environment_is_a_reason_naming_the_setup_script(tmp_path, monkeypatch):
    missing = tmp_path / "no-venv" / "bin" / "python"
    monkeypatch.setenv("LATBENCH_LITERT_TORCH_PYTHON", str(missing))
    src = SourceModel("pytorchcv", "resnet18", None, [1, 3, 224, 224], 0)  # the route fails before it reads the model
    case = check(src, ROUTE, tmp_path)
    assert case.status == "not converted" and not case.conforms
    assert case.error == (f"ConverterUnavailable: no litert-torch environment (LATBENCH_LITERT_TORCH_PYTHON={missing} "
                          f"does not exist): run {LITERT_TORCH_SETUP}")
    assert list(tmp_path.iterdir()) == []  # nothing converted, nothing left behind


def test_without_the_variable_the_repository_environment_is_the_default(tmp_path, monkeypatch):
    from generators.importers import conformance

    monkeypatch.delenv("LATBENCH_LITERT_TORCH_PYTHON", raising=False)
    monkeypatch.setattr(conformance, "_ROOT", tmp_path)  # a checkout without .venv-litert-torch
    case = check(SourceModel("pytorchcv", "resnet18", None, [1, 3, 224, 224], 0), ROUTE, tmp_path)
    assert case.status == "not converted"
    assert case.error == (f"ConverterUnavailable: no litert-torch environment ({tmp_path}/.venv-litert-torch/bin/python "
                          f"does not exist): run {LITERT_TORCH_SETUP}")


def test_the_route_runs_only_when_named():
    z = ZOOS.get("pytorchcv")
    assert ROUTE in ROUTES and ROUTES.get(ROUTE).importer == "tflite"
    assert ROUTE in z.extra_routes and ROUTE not in z.routes


def _litert_torch_python():
    from generators.importers.conformance import ConverterUnavailable, litert_torch_python

    try:
        return litert_torch_python()
    except ConverterUnavailable as e:
        pytest.skip(f"{e}")


def test_a_pytorchcv_model_through_litert_torch(tmp_path):
    _litert_torch_python()
    pytest.importorskip("torch")
    pytest.importorskip("pytorchcv")
    pytest.importorskip("ai_edge_litert")
    from generators.importers.conformance import check_model

    (c,) = check_model("pytorchcv", "resnet10", tmp_path, (ROUTE,))
    assert c.status == "imported", f"{c.model} via {c.route}: {c.status}: {c.error}"
    assert abs(c.macs_error) <= MACS_TOLERANCE, f"MACs {c.ir_macs} vs {c.src_macs}"
    assert c.same_outputs is True and c.output_error <= OUTPUT_TOLERANCE, \
        f"outputs differ ({c.output_error}, the runtime's own {c.reference_error}, {c.extra})"
    assert c.conforms and list(tmp_path.iterdir()) == []  # the file and the weights handed over are removed
