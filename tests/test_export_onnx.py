"""IR -> ONNX (generators/export/onnx.py): the file computes the network's function in ONNX Runtime.

fp32: a sample of every generator source (synthetic networks, zoo references and a variant,
NAS-Bench-201 cells, imported CNNs with upsampling and crops) and the exporter's test graphs
(every IR operator) exported and run in ONNX Runtime; the outputs equal the PyTorch module's
within 1e-4 relative, and the facts pass the exporter's checks (operator counts after the
known fusions, parameters, input and output shapes). int8 (QDQ): on inputs outside the
calibration set the outputs correlate with fp32 (Pearson r >= 0.99, max |diff| <= 0.1 x max
|fp32|, the bound the TFLite int8 export is held to), and ORT runs them on quantized kernels.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch
from test_equivalence import _graph
from test_export_torch import GRAPHS

from generators.export.formats import FORMATS
from generators.export.onnx import (ONNX_OPS, OnnxExportError, export_onnx, expected_op_counts, run_onnx,
                                    verify_onnx)
from generators.export.torch_module import to_module
from generators.export.weights import example_input
from generators.ops import OPS

RTOL = 1e-4
# a sample of every source of tests/test_equivalence.py's CASES: channel shuffles (ShuffleNet),
# squeeze-and-excite (MobileNetV3), merged edges (NAS-Bench-201), upsampling (HRNet), crops (BagNet)
CASES = [("synthetic", 0), ("synthetic", 2), ("zoo", "mobilenetv2"), ("zoo", "shufflenetv2"), ("zoo", "squeezenet"),
         ("zoo-variant", "mobilenetv3"), ("nasbench201", 0), ("nasbench201", 15624),
         ("pytorch", "hrnet_w18_small_v1"), ("pytorch", "bagnet9")]
INT8_CASES = [("synthetic", 0), ("zoo", "mobilenetv2"), ("nasbench201", 0)]


def relative_error(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-30))


def torch_outputs(graph, inputs) -> list[np.ndarray]:
    with torch.no_grad():
        out = to_module(graph)(*[torch.from_numpy(inputs[n.name]) for n in graph.input_nodes])
    return [t.numpy() for t in (out if isinstance(out, (tuple, list)) else (out,))]


def check_fp32(g, path) -> dict:
    facts = export_onnx(g, path, "fp32")
    assert verify_onnx(g, facts, "fp32") == dict.fromkeys(("params", "input_shapes", "output_shapes", "op_counts"),
                                                          True), (facts["op_counts"], expected_op_counts(g))
    assert facts["opset"] == 17 and facts["format"] == "onnx" and facts["model_id"] == g.model_id
    x = example_input(g)
    ys, refs = run_onnx(path, g, x), torch_outputs(g, x)
    assert len(ys) == len(refs)
    for y, ref in zip(ys, refs):
        assert y.shape == ref.shape and np.all(np.isfinite(y)) and np.max(np.abs(ref)) > 0
        assert relative_error(y, ref) <= RTOL
    return facts


@pytest.mark.parametrize("kind,key", CASES, ids=[f"{k}-{v}" for k, v in CASES])
def test_fp32_computes_the_networks_function(kind, key, tmp_path):
    check_fp32(_graph(kind, key), tmp_path / "m.onnx")


@pytest.mark.parametrize("name", sorted(GRAPHS))
def test_fp32_of_every_operator(name, tmp_path):
    g = GRAPHS[name]()
    facts = check_fp32(g, tmp_path / "m.onnx")
    assert [i["name"] for i in facts["inputs"]] == [n.name for n in g.input_nodes]
    assert [o["name"] for o in facts["outputs"]] == [f"output_{k}" for k in range(len(g.outputs))]


def test_every_operator_has_an_onnx_entry():
    assert set(OPS) - {"input"} <= set(ONNX_OPS)
    assert FORMATS.get("onnx_fp32").framework == FORMATS.get("onnx_int8").framework == "onnxruntime"
    assert FORMATS.get("onnx_int8").filename == "onnx_int8.onnx"


def _run_qdq(model, g, x) -> list:
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads, so.log_severity_level = 1, 3
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(str(model), so, providers=["CPUExecutionProvider"])
    feed = {i.name: np.asarray(x[n.name], dtype=np.float32) for i, n in zip(sess.get_inputs(), g.input_nodes)}
    return sess.run(None, feed)


def _int8_check(g, tmp_path) -> None:
    import onnx
    import onnxruntime as ort

    fp32, q = tmp_path / "fp32.onnx", tmp_path / "int8.onnx"
    export_onnx(g, fp32, "fp32")
    facts = export_onnx(g, q, "int8")
    assert all(verify_onnx(g, facts, "int8").values()), verify_onnx(g, facts, "int8")
    assert facts["calibration_samples"] == 8 and facts["op_counts"]["QuantizeLinear"] > 0
    x = example_input(g, sample=100)  # outside the calibration set
    # the quantized model as its QDQ nodes define it (ORT's optimizations off): on an x86 core
    # without VNNI, ORT's fused u8s8 kernels saturate 16-bit sums (its documented limitation),
    # which is the runtime's arithmetic on this machine, not the export's
    for a, b in zip(run_onnx(fp32, g, x), _run_qdq(q, g, x)):
        assert np.corrcoef(a.ravel(), b.ravel())[0, 1] >= 0.99
        assert np.max(np.abs(a - b)) <= 0.1 * np.max(np.abs(a))
    # ORT fuses the QDQ pairs into quantized kernels (uint8 activations, int8 weights): no float conv left
    so = ort.SessionOptions()
    so.optimized_model_filepath = str(tmp_path / "optimized.onnx")
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    so.log_severity_level = 3
    ort.InferenceSession(str(q), so, providers=["CPUExecutionProvider"])
    ran = {n.op_type for n in onnx.load(str(tmp_path / "optimized.onnx")).graph.node}
    assert "QLinearConv" in ran and "Conv" not in ran


@pytest.mark.parametrize("kind,key", INT8_CASES, ids=[f"{k}-{v}" for k, v in INT8_CASES])
def test_int8_follows_fp32(kind, key, tmp_path):
    _int8_check(_graph(kind, key), tmp_path)


@pytest.mark.parametrize("name", ["all_ops", "mobilenet", "transformer"])
def test_int8_of_every_operator(name, tmp_path):
    _int8_check(GRAPHS[name](), tmp_path)


@pytest.mark.parametrize("precision", ["fp32", "int8"])
def test_exports_are_deterministic(precision, tmp_path):
    g = GRAPHS["mobilenet"]()
    a = export_onnx(g, tmp_path / "a.onnx", precision, calibration_samples=2)
    b = export_onnx(g, tmp_path / "b.onnx", precision, calibration_samples=2)
    assert a["sha256"] == b["sha256"]


def test_bad_options_are_one_line_errors(tmp_path):
    g = GRAPHS["two_inputs"]()
    for kw, text in (({"precision": "fp16"}, "precision 'fp16' is not offered for ONNX"),
                     ({"calibration_samples": 0}, "calibration_samples must be >= 1")):
        with pytest.raises(OnnxExportError, match=text) as info:
            export_onnx(g, tmp_path / "m.onnx", **kw)
        assert "\n" not in str(info.value)
    assert not (tmp_path / "m.onnx").exists()
