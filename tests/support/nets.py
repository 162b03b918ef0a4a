"""Small IR networks and output checks shared by the importer and exporter tests
(test_import_onnx.py, test_import_tflite.py, test_export_tflite.py, test_export_executorch.py,
test_transformer_ops.py).

The networks are built the same way in every file that uses them, so a network keeps its
``model_id`` whichever test builds it. Importing this module imports neither TensorFlow nor
PyTorch: the test files skip themselves first when those are missing.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from generators import blocks as B
from generators.ir import Graph


# ------------------------------------------------------------------ source networks (IR)
def mbv3ish_logits(size: int = 32) -> tuple[Graph, str]:
    """MobileNetV3-like: hswish stem, SE blocks (hsigmoid gate), residual, swish head, classifier;
    the graph (outputs not set) and its logits, for each test to finish as it needs."""
    g = Graph("mbv3ish", source="test")
    x = g.input([1, 3, size, size])
    x = B.conv_bn_act(g, x, 16, 3, stride=2, act="hswish")
    x = B.inverted_residual(g, x, 16, 3, expansion=1, se=True, act="relu")
    x = B.inverted_residual(g, x, 24, 5, stride=2, expansion=4, se=True, act="hswish")
    x = B.inverted_residual(g, x, 24, 3, expansion=3, act="relu6")
    x = B.conv_bn_act(g, x, 48, 1, act="swish")
    return g, B.classifier(g, x, 10, hidden=32, act="relu")


def resnet_tiny(size: int = 32) -> Graph:
    g = Graph("resnet-tiny", source="test")
    x = g.input([1, 3, size, size])
    x = B.conv_bn_act(g, x, 16, 7, stride=2)
    x = g.add("maxpool", x, kernel=3, stride=2, padding=1)  # even input, in TFLite: MIRROR_PAD + MAX_POOL_2D
    for out, stride in ((16, 1), (32, 2)):
        y = B.conv_bn_act(g, x, out, 3, stride=stride)  # stride 2 on an even input, in TFLite: PAD + CONV_2D
        y = B.conv_bn_act(g, y, out, 3, act=None)
        s = x if stride == 1 else B.conv_bn_act(g, x, out, 1, stride=stride, act=None)
        x = g.add("relu", g.add("add", [s, y]))
    return g.set_outputs(B.classifier(g, x, 10)).validate()


def shufflenet_tiny(size: int = 32) -> Graph:
    g = Graph("shufflenet-tiny", source="test")
    x = g.input([1, 3, size, size])
    x = B.conv_bn_act(g, x, 24, 3, stride=2)
    a, b = g.add_multi("split", x, sections=[12, 12])
    b = B.conv_bn_act(g, b, 12, 1)
    b = B.conv_bn_act(g, b, 12, 3, groups=12, act=None)
    b = B.conv_bn_act(g, b, 12, 1)
    x = g.add("channel_shuffle", g.add("concat", [a, b]), groups=2)
    x = g.add_multi("split", x, sections=[4, 16, 4])[1]  # outputs left unread (TFLite: one SLICE)
    x = B.conv_bn_act(g, x, 48, 3, stride=2, groups=4, act="leaky_relu")
    return g.set_outputs(B.classifier(g, x, 10)).validate()


def misc_ops_head(size: int = 20) -> tuple[Graph, str]:
    """The first operators of each importer test's ``misc_ops`` network (each goes on with the
    operators its importer maps): a dilated bias-less conv, prelu, a ceil-mode average pool
    added to an unpadded-count one clipped, a standalone batch norm; (graph, last tensor)."""
    g = Graph("misc-ops", source="test")
    x = g.input([1, 4, size, size])
    x = g.add("conv2d", x, out_channels=8, kernel=3, padding=2, dilation=2, bias=False)
    x = g.add("prelu", x, num_parameters=8)
    x = g.add("avgpool", x, kernel=3, stride=2, padding=1, ceil_mode=True)
    x2 = g.add("avgpool", x, kernel=3, stride=1, padding=1, count_include_pad=False)
    x2 = g.add("clip", x2, min=-0.5, max=2.0)
    x = g.add("add", [x, x2])
    return g, g.add("batchnorm", x)  # standalone (after an add): no conv to fold into


def synthetic_nets() -> dict[str, Callable[[], Graph]]:
    from generators.synthetic import SyntheticConfig, build_network

    cfg = SyntheticConfig(input_size=32, num_classes=10, head_channels=[96, 128], num_blocks=5, strides=[1, 2, 1, 2, 1],
                          channel_ranges=[[8, 32]] * 5, split_ops=["identity", "relu", "hswish", "hsigmoid", "swish", "tanh"])
    return {f"synthetic-{i}": (lambda i=i: build_network(cfg, 0, i)) for i in (0, 1, 2, 3)}


def nb201() -> Graph:
    from generators.nasbench201 import build

    return build("|nor_conv_3x3~0|+|none~0|avg_pool_3x3~1|+|skip_connect~0|nor_conv_1x1~1|nor_conv_3x3~2|")


# ------------------------------------------------------------------ helpers
def ops(g: Graph) -> list[str]:
    return [n.op for n in g.nodes.values() if n.op != "input"]


def tflite_with_weights(g: Graph, weights: dict) -> bytes:
    """The project's TFLite export of ``g`` (fp32), with the given weights."""
    from generators.export import tflite as T

    tf = T._tf()
    tf_graph, ins, outs = T.build_tf_graph(g, weights)
    return tf.compat.v1.lite.TFLiteConverter(tf_graph.as_graph_def(), ins, outs).convert()


def close(got: list[np.ndarray], ref: list[np.ndarray], what: str, rtol: float) -> None:
    """Every output of ``got`` matches ``ref``: same shape, max |diff| <= rtol * max |reference|."""
    assert len(got) == len(ref), what
    for k, (a, r) in enumerate(zip(got, ref)):
        assert a.shape == r.shape, f"{what} output {k}: shape {a.shape} != {r.shape}"
        err, bound = float(np.abs(a - r).max()), rtol * max(float(np.abs(r).max()), 1e-6)
        assert err <= bound, f"{what} output {k}: max |diff| {err:.3g} > {bound:.3g}"


def vit_tiny(size: int = 16, patch: int = 4, dim: int = 16, heads: int = 2, depth: int = 2) -> Graph:
    """ViT-like: patch-embedding conv -> tokens -> pre-norm encoder blocks (multi-head attention
    from fc, split, reshape, transpose, matmul, scale, softmax; GELU MLP) -> layer norm -> mean of
    the tokens -> fc."""
    g = Graph("vit-tiny", source="test")
    x = B.patch_embed(g, g.input([1, 3, size, size]), dim, patch)
    for _ in range(depth):
        x = B.encoder_block(g, x, heads, mlp_ratio=2)
    x = g.add("mean", g.add("layernorm", x), axis=1)
    return g.set_outputs(g.add("fc", x, out_features=10)).validate()


def deit_tiny(size: int = 16, patch: int = 4, dim: int = 16, heads: int = 2, depth: int = 2) -> Graph:
    """DeiT-like: patch-embedding conv -> tokens -> class token prepended (``cls_token``) ->
    position embedding added (``pos_embed``) -> pre-norm encoder blocks -> layer norm -> the
    class token read out -> fc."""
    g = Graph("deit-tiny", source="test")
    x = B.patch_embed(g, g.input([1, 3, size, size]), dim, patch)
    x = g.add("pos_embed", g.add("cls_token", x))
    for _ in range(depth):
        x = B.encoder_block(g, x, heads, mlp_ratio=2)
    x = B.class_token_readout(g, g.add("layernorm", x))
    return g.set_outputs(g.add("fc", x, out_features=10)).validate()


# ------------------------------------------------------------------ output checks of whole networks
def export_and_torch_outputs(g: Graph, fmt: str, tmp_path) -> tuple[np.ndarray, np.ndarray]:
    """``g`` exported to ``fmt`` (tflite_fp32 or onnx_fp32), its params and output shapes (and,
    for ONNX, op counts) verified, run on ``example_input``: (that output, the IR's torch module's
    output on the same input). Skips when the runtime is missing."""
    import pytest
    import torch

    from generators.export.formats import FORMATS
    from generators.export.torch_module import example_tensors, to_module
    from generators.export.weights import example_input

    spec = FORMATS.get(fmt)
    facts = spec.write(g, tmp_path / spec.filename)
    checks = spec.verify(g, facts)
    assert checks["params"] and checks["output_shapes"], checks
    if fmt == "tflite_fp32":
        pytest.importorskip("ai_edge_litert")
        from generators.export.tflite import run_tflite

        got = run_tflite(facts["path"], g, example_input(g))
    else:
        pytest.importorskip("onnxruntime")
        from generators.export.onnx import run_onnx

        assert checks["op_counts"], checks
        got = run_onnx(tmp_path / spec.filename, g, example_input(g))
    with torch.no_grad():
        ref = to_module(g)(*example_tensors(g)).numpy()
    return got[0], ref
