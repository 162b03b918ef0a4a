"""Both exporters build the same network: fp32 TFLite and fp32 PyTorch agree within 1e-4.

A sample of every generator: synthetic space, the reference of every zoo family but the ones of
Qualcomm AI Hub's networks (those export as small variants in test_zoo_aihub_families.py) and
the two heaviest (a variant of each), NAS-Bench-201 cells, imported real CNNs (including the
ones that needed torch.export, the upsampling HRNet and the cropping BagNet). The TFLite file runs in
LiteRT (ai_edge_litert), the TorchScript file in torch; both take the same deterministic
input (NCHW for torch, NHWC for TFLite).
"""
import numpy as np
import pytest

from generators import nasbench201, synthetic
from generators.export.weights import example_input
from generators.zoo.registry import FAMILIES
from generators.zoo.source import reference, variant
from test_zoo_aihub_families import AIHUB_FAMILIES

RTOL = 1e-4


def _graph(kind: str, key):
    if kind == "synthetic":
        return synthetic.build_network(synthetic.SyntheticConfig(), 0, key)
    if kind == "zoo":
        return reference(key)
    if kind == "zoo-variant":
        return variant(key, 0, 0)
    if kind == "nasbench201":
        return nasbench201.build(key)
    from generators.importers.pytorch import import_pytorchcv

    return import_pytorchcv(key)


# families whose reference holds 60 M weights or more: converting and running those fp32 takes
# 20 to 40 s a network, so their variant 0 (a third of the weights, the same builder) stands in
HEAVY = ("alexnet", "vgg")
CASES = (
    [("synthetic", i) for i in (0, 1, 2)]
    + [("zoo", f) for f in FAMILIES.names() if f not in AIHUB_FAMILIES and f not in HEAVY]
    + [("zoo-variant", f) for f in (*HEAVY, "mobilenetv3", "shufflenetv2")]
    + [("nasbench201", i) for i in (0, 1234, 15624)]
    + [("pytorch", m) for m in ("mobilenetv2_w1", "ghostnet", "hrnet_w18_small_v1", "bagnet9", "efficientnet_edge_small_b")]
)


def relative_error(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-30))


@pytest.mark.parametrize("kind,key", CASES, ids=[f"{k}-{v}" for k, v in CASES])
def test_tflite_and_pytorch_fp32_compute_the_same_function(kind, key, tmp_path):
    import torch
    from ai_edge_litert.interpreter import Interpreter

    from generators.export.tflite import export_tflite
    from generators.export.torch_module import export_torchscript, load_artifact

    g = _graph(kind, key)
    export_tflite(g, tmp_path / "m.tflite", precision="fp32")
    export_torchscript(g, tmp_path / "m.pt", precision="fp32")
    x = example_input(g)[g.input_nodes[0].name]

    interp = Interpreter(model_path=str(tmp_path / "m.tflite"))
    interp.allocate_tensors()
    (inp,), (out,) = interp.get_input_details(), interp.get_output_details()
    interp.set_tensor(inp["index"], np.ascontiguousarray(x.transpose(0, 2, 3, 1)))
    interp.invoke()
    y_tflite = interp.get_tensor(out["index"])

    with torch.no_grad():
        y_torch = load_artifact(tmp_path / "m.pt")(torch.from_numpy(x)).numpy()
    assert y_tflite.shape == y_torch.shape == tuple(g.tensor_shape(g.outputs[0]))
    assert np.all(np.isfinite(y_torch)) and np.max(np.abs(y_torch)) > 0
    assert relative_error(y_tflite, y_torch) <= RTOL
