"""The ONNX importer: round trips ONNX -> IR -> TFLite with equal outputs, mapping rules, errors.

Round trip. A network is built as IR (a tiny MobileNetV2 with SE, a tiny ResNet, a
ShuffleNet-like net, every other operator, synthetic-space networks, a NAS-Bench-201 net),
turned into a real PyTorch module (``export.torch_module``, weights from ``export.weights``)
and exported with PyTorch's TorchScript-based ONNX exporter (``dynamo=False``, a free batch
dimension). The import must give back:

- the same structure: the imported graph's ``model_id`` equals that of the source IR with
  the one rewrite the exporter makes (a batch norm read only by a conv is folded into it,
  which gains a bias): same operators, attributes, wiring and outputs; so the same FLOPs
  and the same parameters less the folded batch norms;
- the same function: the IR exported to TFLite by the project's exporter, with the weights
  carried over from the ONNX file's initializers (the IR itself has none), computes what
  the PyTorch module computes on the same input (fp32, 1e-4 relative).

Hand-written PyTorch modules check the patterns the IR-built ones do not produce (MatMul +
Add, decomposed h-swish, slices, pads, resize, view-based channel shuffle, reshape with
shape arithmetic under a free batch) the same way: numerically against PyTorch.
"""
from __future__ import annotations

import io
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")
onnx = pytest.importorskip("onnx")
pytest.importorskip("tensorflow")
pytest.importorskip("ai_edge_litert")

import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from onnx import numpy_helper  # noqa: E402

from generators import blocks as B  # noqa: E402
from generators.export import tflite as T  # noqa: E402
from generators.export.torch_module import to_module  # noqa: E402
from generators.export.weights import example_input  # noqa: E402
from generators.importers import UnsupportedModelError, import_onnx  # noqa: E402
from generators.importers.carry import onnx_weights  # noqa: E402
from generators.importers.onnx import import_onnx_with_origins  # noqa: E402
from generators.ir import Graph, split_ref  # noqa: E402
from support.nets import (close, misc_ops_head, nb201, ops, resnet_tiny, shufflenet_tiny,  # noqa: E402
                          synthetic_nets, tflite_with_weights)

RTOL = 1e-4  # fp32 TFLite vs PyTorch: max |diff| <= RTOL * max |reference|


# ------------------------------------------------------------------ source networks (IR)
def mbv2_se(size: int = 32) -> Graph:
    g = Graph("mbv2-se", source="test")
    x = g.input([1, 3, size, size])
    x = B.conv_bn_act(g, x, 16, 3, stride=2, act="relu6")
    x = B.inverted_residual(g, x, 16, 3, expansion=1)
    x = B.inverted_residual(g, x, 24, 3, stride=2, expansion=6)
    x = B.inverted_residual(g, x, 24, 3, expansion=6)
    x = B.inverted_residual(g, x, 32, 5, stride=2, expansion=3, se=True, act="hswish")
    return g.set_outputs(B.classifier(g, x, 10, hidden=24, act="swish")).validate()


# resnet_tiny, shufflenet_tiny, synthetic_nets, nb201: support/nets.py
def misc_ops(size: int = 20) -> Graph:
    """The remaining operators, and pool/pad geometries; two outputs."""
    # the head: the first avgpool has count_include_pad and ceil; the batch norm stays one
    g, x = misc_ops_head(size)
    x = g.add("pad", x, pads=[1, 0, 2, 1], value=0.5)
    x = g.add("upsample", x, scale=2)
    x = g.add("crop", x, crops=[1, 2, 0, 3])
    x = g.add("maxpool", x, kernel=2, stride=2, ceil_mode=True)
    s = g.add("sigmoid", x)
    t = g.add("tanh", x)
    gate = g.add("hsigmoid", g.add("global_avgpool", x))
    x = g.add("mul", [g.add("concat", [s, t], axis=1), g.add("concat", [gate, gate], axis=1)])
    x = g.add("scale", x, factor=0.5)
    f = g.add("flatten", x)
    f = g.add("fc", f, out_features=12)
    out1 = g.add("softmax", g.add("reshape", f, shape=[1, 3, 4]), axis=2)
    out2 = g.add("hswish", g.add("fc", g.add("relu6", f), out_features=5, bias=False))
    return g.set_outputs(out1, out2).validate()


NETS = {"mbv2-se": mbv2_se, "resnet-tiny": resnet_tiny, "shufflenet-tiny": shufflenet_tiny, "misc-ops": misc_ops,
        **synthetic_nets(), "nb201": nb201}


# ------------------------------------------------------------------ helpers
class _Plain(nn.Module):
    """Hides an fx.GraphModule's ``graph`` attribute, which the exporter takes for a TorchScript graph."""

    def __init__(self, inner: nn.Module):
        super().__init__()
        self.inner = inner

    def forward(self, x):
        return self.inner(x)


def _channel_shuffle_symbolic(g, x, groups):
    """``aten::channel_shuffle`` as torchvision's ShuffleNet writes it (view, transpose,
    view): the legacy exporter has no symbolic for the aten operator."""
    from torch.onnx import symbolic_helper

    groups = symbolic_helper._get_const(groups, "i", "groups")
    _, c, h, w = symbolic_helper._get_tensor_sizes(x)
    shape5 = g.op("Constant", value_t=torch.tensor([-1, groups, c // groups, h, w]))
    y = g.op("Transpose", g.op("Reshape", x, shape5), perm_i=[0, 2, 1, 3, 4])
    return g.op("Reshape", y, g.op("Constant", value_t=torch.tensor([-1, c, h, w])))


def export_onnx(module: nn.Module, shape: list[int], dynamic: dict | None = None) -> bytes:
    module = (_Plain(module) if hasattr(module, "graph") else module).eval()
    buf = io.BytesIO()
    torch.onnx.register_custom_op_symbolic("aten::channel_shuffle", _channel_shuffle_symbolic, 9)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the legacy exporter's deprecation notice
            torch.onnx.export(module, (torch.zeros(shape),), buf, dynamo=False, input_names=["x"],
                              dynamic_axes={"x": {0: "N"}} if dynamic is None else dynamic)
    finally:
        torch.onnx.unregister_custom_op_symbolic("aten::channel_shuffle", 9)
    return buf.getvalue()


def onnx_form(g: Graph) -> Graph:
    """``g`` as the exporter writes it: every batch norm that is the sole reader of a conv
    folded into it (bias=True), n-ary adds/muls as chains of binary ones (the module's own
    left-to-right steps)."""
    readers = g.consumers()
    outputs = {split_ref(r)[0] for r in g.outputs}
    out = Graph(g.name, g.source, g.meta)
    alias: dict[str, str] = {}

    def ref(r: str) -> str:
        name, k = split_ref(r)
        return alias.get(name, name) if r == name else f"{alias.get(name, name)}:{k}"

    for n in g.nodes.values():
        attrs = dict(n.attrs)
        if n.op == "batchnorm":
            src = split_ref(n.inputs[0])[0]
            if g.nodes[src].op == "conv2d" and readers[src] == [n.name] and src not in outputs:
                alias[n.name] = alias[src]
                continue
        if n.op == "conv2d" and len(readers[n.name]) == 1 and g.nodes[readers[n.name][0]].op == "batchnorm" \
                and n.name not in outputs:
            attrs["bias"] = True
        inputs = [ref(r) for r in n.inputs]
        while n.op in ("add", "mul") and len(inputs) > 2:
            inputs = [out.add(n.op, inputs[:2], name=f"{n.name}/{len(inputs)}")] + inputs[2:]
        alias[n.name] = out.add(n.op, inputs, name=n.name, **attrs)
    return out.set_outputs(*[ref(r) for r in g.outputs])


def check_same_function(blob: bytes, module: nn.Module, x: np.ndarray, name: str = "m") -> Graph:
    """Import ``blob``; its TFLite export with the ONNX weights must compute ``module(x)``."""
    proto = onnx.load_model_from_string(blob)
    g, origins = import_onnx_with_origins(blob, name=name)
    with torch.no_grad():
        ref = module(torch.from_numpy(x))
    ref = [t.numpy() for t in (ref if isinstance(ref, (list, tuple)) else [ref])]
    got = T.run_tflite(tflite_with_weights(g, onnx_weights(proto, g, origins)), g, {g.input_nodes[0].name: x})
    close(got, ref, f"{name}: TFLite of the imported IR vs PyTorch", RTOL)
    return g


# ------------------------------------------------------------------ round trips of IR-built networks
@pytest.mark.parametrize("net", NETS)
def test_round_trip_structure_and_function(net):
    src = NETS[net]()
    module = to_module(src)
    blob = export_onnx(module, src.input_nodes[0].shape)
    g = check_same_function(blob, module, example_input(src)[src.input_nodes[0].name], net)
    expected = onnx_form(src)
    assert g.op_counts() == expected.op_counts()
    assert g.model_id == expected.model_id  # operators, attributes, wiring, outputs
    assert g.flops == src.flops
    folded = sum(2 * src.shape(n.name)[1] for n in src.nodes.values() if n.op == "batchnorm" and n.name not in expected.nodes)
    added_bias = sum(src.nodes[n].attrs["out_channels"] for n in expected.nodes
                     if expected.nodes[n].op == "conv2d" and expected.nodes[n].attrs["bias"] and not src.nodes[n].attrs["bias"])
    assert g.params == src.params - folded + added_bias
    assert (g.source, g.meta["opset"]) == ("onnx", onnx.load_model_from_string(blob).opset_import[0].version)
    assert [n.shape for n in g.input_nodes] == [n.shape for n in src.input_nodes]  # the free batch is 1


def test_nodes_are_named_after_the_onnx_nodes():
    src = resnet_tiny()
    blob = export_onnx(to_module(src), src.input_nodes[0].shape)
    names = {n.name for n in onnx.load_model_from_string(blob).graph.node}
    g = import_onnx(blob)
    assert g.name == "main_graph" or g.name  # the graph's own name when imported from bytes
    assert {n for n, node in g.nodes.items() if node.op != "input"} <= names
    assert import_onnx(blob, name="r18").name == "r18"


# ------------------------------------------------------------------ hand-written modules
class Patterns(nn.Module):
    """Patterns the IR-built modules do not produce, the way hand-written models write them."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 16, 3, stride=2, padding=1)
        self.bn = nn.BatchNorm2d(16)
        self.dw = nn.Conv2d(16, 16, 3, padding=1, groups=16, bias=False)
        self.pw = nn.Conv2d(16, 32, 1)
        self.fc = nn.Parameter(torch.randn(32 * 3 * 3, 20) * 0.05)
        self.fc_b = nn.Parameter(torch.randn(20) * 0.05)
        self.head = nn.Linear(20, 7)

    def forward(self, x):
        x = self.conv(x)
        x = self.bn(x)
        x = x * F.relu6(x + 3.0) / 6.0  # pytorchcv's HSwish
        x = F.relu6(self.dw(x) + 3.0) / 6.0 * x  # HSigmoid gate
        b, c, h, w = x.shape
        x = x.view(b, 2, c // 2, h, w).transpose(1, 2).contiguous().view(b, c, h, w)  # channel shuffle
        x = x * torch.sigmoid(x)  # swish
        a, b = x.chunk(2, dim=1)
        x = torch.cat([b, a], dim=1)
        x = self.pw(x)
        x = F.pad(x, (1, 0, 0, 1))
        x = x[:, :, 1:, :-1]
        x = F.interpolate(F.max_pool2d(x, 2), scale_factor=2, mode="nearest")
        x = torch.clamp(x, 0.0, 1.0) + torch.clamp(x, min=0.0)
        x = F.avg_pool2d(x, 4)
        x = x * F.adaptive_max_pool2d(x, 1)  # GlobalMaxPool
        x = x.view(x.size(0), -1)  # Shape -> Gather -> Unsqueeze -> Concat -> Reshape under a free batch
        x = torch.matmul(x, self.fc) + self.fc_b  # MatMul + Add
        x = torch.tanh(x)
        return F.softmax(self.head(x), dim=1)


def test_hand_written_patterns_map_and_compute_the_same():
    torch.manual_seed(0)
    m = Patterns().eval()
    with torch.no_grad():  # batch statistics away from the identity
        m.bn.running_mean.uniform_(-0.2, 0.2)
        m.bn.running_var.uniform_(0.5, 1.5)
    blob = export_onnx(m, [1, 3, 24, 24])
    x = np.random.default_rng(0).standard_normal((1, 3, 24, 24)).astype(np.float32)
    g = check_same_function(blob, m, x, "patterns")
    assert ops(g) == [
        "conv2d", "hswish", "conv2d", "hsigmoid", "mul", "channel_shuffle", "swish", "split", "concat", "conv2d", "pad", "crop",
        "maxpool", "upsample", "clip", "relu", "add", "avgpool", "maxpool", "mul", "flatten", "fc", "tanh", "fc", "softmax",
    ]
    fcs = [n for n in g.nodes.values() if n.op == "fc"]
    assert [(n.attrs["out_features"], n.attrs["bias"]) for n in fcs] == [(20, True), (7, True)]


def test_torchvision_style_models_compute_the_same():
    """Hand-built torchvision-like blocks: nn.Sequential features, AdaptiveAvgPool + flatten."""
    torch.manual_seed(1)

    class Block(nn.Module):
        def __init__(self, c, out, stride):
            super().__init__()
            self.body = nn.Sequential(nn.Conv2d(c, c * 4, 1, bias=False), nn.BatchNorm2d(c * 4), nn.ReLU6(inplace=True),
                                      nn.Conv2d(c * 4, c * 4, 3, stride, 1, groups=c * 4, bias=False),
                                      nn.BatchNorm2d(c * 4), nn.ReLU6(inplace=True),
                                      nn.Conv2d(c * 4, out, 1, bias=False), nn.BatchNorm2d(out))
            self.res = stride == 1 and c == out

        def forward(self, x):
            return x + self.body(x) if self.res else self.body(x)

    class MobileNetV2Like(nn.Module):
        def __init__(self):
            super().__init__()
            self.features = nn.Sequential(nn.Conv2d(3, 8, 3, 2, 1, bias=False), nn.BatchNorm2d(8), nn.ReLU6(inplace=True),
                                          Block(8, 8, 1), Block(8, 16, 2), Block(16, 16, 1),
                                          nn.Conv2d(16, 64, 1, bias=False), nn.BatchNorm2d(64), nn.Hardswish())
            self.classifier = nn.Sequential(nn.Dropout(0.2), nn.Linear(64, 10))

        def forward(self, x):
            x = nn.functional.adaptive_avg_pool2d(self.features(x), (1, 1))
            return self.classifier(torch.flatten(x, 1))

    m = MobileNetV2Like().eval()
    blob = export_onnx(m, [1, 3, 32, 32])
    x = np.random.default_rng(1).standard_normal((1, 3, 32, 32)).astype(np.float32)
    g = check_same_function(blob, m, x, "mbv2-like")
    assert g.op_counts() == {"add": 2, "conv2d": 11, "fc": 1, "flatten": 1, "global_avgpool": 1, "hswish": 1, "relu6": 7}
    bn = sum(b.num_features for b in m.modules() if isinstance(b, nn.BatchNorm2d))
    assert g.params == sum(p.numel() for p in m.parameters()) - bn  # gamma, beta folded away: a bias each
    from torch.utils.flop_counter import FlopCounterMode

    counter = FlopCounterMode(display=False)
    with counter, torch.no_grad():
        m(torch.from_numpy(x))
    assert 2 * g.flops == counter.get_total_flops()


def test_asymmetric_and_auto_pads():
    """TF-style exports: auto_pad SAME_UPPER and explicit asymmetric pads (a pad before the
    conv where no symmetric padding computes the same; pools by padding + ceil_mode)."""
    from onnx import TensorProto, helper

    w = numpy_helper.from_array(np.zeros((8, 3, 3, 3), np.float32), "w")
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c1"], name="same_s2", kernel_shape=[3, 3], strides=[2, 2], auto_pad="SAME_UPPER"),
        helper.make_node("MaxPool", ["c1"], ["p1"], name="pool", kernel_shape=[3, 3], strides=[2, 2], pads=[0, 0, 1, 1]),
        helper.make_node("AveragePool", ["p1"], ["p2"], name="avg", kernel_shape=[3, 3], strides=[2, 2], auto_pad="SAME_UPPER"),
    ]

    def model(nodes, out="p2"):
        graph = helper.make_graph(nodes, "tfstyle", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 16, 16])],
                                  [helper.make_tensor_value_info(out, TensorProto.FLOAT, None)], [w])
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])

    g = import_onnx(model(nodes))
    assert ops(g) == ["pad", "conv2d", "maxpool", "avgpool"]
    assert g.nodes["same_s2/pad"].attrs["pads"] == [0, 1, 0, 1] and g.shape("same_s2") == [1, 8, 8, 8]
    # windows at 0, 2, 4, 6 reaching one past the end: PyTorch's ceil_mode computes that
    assert (g.nodes["pool"].attrs["padding"], g.nodes["pool"].attrs["ceil_mode"], g.shape("pool")) == ([0, 0], True, [1, 8, 4, 4])
    assert (g.nodes["avg"].attrs["padding"], g.nodes["avg"].attrs["ceil_mode"], g.shape("avg")) == ([0, 0], True, [1, 8, 2, 2])
    # a stride-1 window hanging over the end: no IR pool has it
    nodes[2] = helper.make_node("AveragePool", ["p1"], ["p2"], name="avg", kernel_shape=[2, 2], auto_pad="SAME_UPPER")
    with pytest.raises(UnsupportedModelError, match=r"^tfstyle: ONNX node 'avg' \(AveragePool\): AveragePool pads \[0, 0, 1, 1\] "
                       "that no symmetric padding reproduces$"):
        import_onnx(model(nodes))


# ------------------------------------------------------------------ shapes
def test_dynamic_batch_resolves_to_one_and_input_shape_overrides():
    src = resnet_tiny()
    m = to_module(src)
    g = import_onnx(export_onnx(m, [1, 3, 32, 32]))  # batch exported as the free dimension "N"
    assert g.input_nodes[0].shape == [1, 3, 32, 32]
    free_hw = export_onnx(m, [1, 3, 32, 32], dynamic={"x": {0: "N", 2: "H", 3: "W"}})
    with pytest.raises(UnsupportedModelError, match=r"^m: input 'x' has free dimension\(s\) \['H', 'W'\] at axes \[2, 3\] \(give input_shape; --shape "):
        import_onnx(free_hw, name="m")
    g64 = import_onnx(free_hw, input_shape=[1, 3, 64, 64])
    assert g64.input_nodes[0].shape == [1, 3, 64, 64]
    assert g64.model_id == onnx_form(resnet_tiny(64)).model_id
    static = export_onnx(m, [1, 3, 32, 32], dynamic={})
    assert import_onnx(static, input_shape=(1, 3, 48, 48)).input_nodes[0].shape == [1, 3, 48, 48]
    with pytest.raises(UnsupportedModelError, match=r"input_shape \[3, 48, 48\] does not fit input 'x' of rank 4"):
        import_onnx(static, input_shape=[3, 48, 48])


# ------------------------------------------------------------------ errors
def test_unsupported_operator_names_model_node_and_op():
    m = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ELU())
    with pytest.raises(UnsupportedModelError) as e:
        import_onnx(export_onnx(m, [1, 3, 8, 8]), name="elu-net")
    msg = str(e.value)
    assert msg == "elu-net: ONNX node '/1/Elu' (Elu): unsupported operator"
    assert isinstance(e.value, ImportError)  # the PyTorch importer's type: callers catch one


@pytest.mark.parametrize("fn, what", [
    (lambda x: x - torch.relu(x), r"\(Sub\): Sub of two computed tensors"),
    (lambda x: x + torch.arange(36.0).reshape(1, 1, 6, 6), r"\(Add\): Add by a constant tensor of shape \[1, 1, 6, 6\] "
     r"\(the IR has no weights; a constant added is a position embedding only with one value per element of the "
     r"tensor\)$"),
    (lambda x: F.interpolate(x, scale_factor=1.5, mode="nearest"), r"\(Resize\): nearest resize by non-integer factors"),
    (lambda x: F.interpolate(x, scale_factor=2, mode="bicubic"), r"\(Resize\): interpolation mode 'cubic'"),
])
def test_constructs_without_ir_operator_are_one_line_errors(fn, what):
    class M(nn.Module):
        def forward(self, x):
            return fn(x)

    with pytest.raises(UnsupportedModelError, match=r"^m: ONNX node '[^']+' " + what) as e:
        import_onnx(export_onnx(M(), [1, 4, 6, 6]), name="m")
    assert "\n" not in str(e.value)


def test_bad_files(tmp_path):
    with pytest.raises(UnsupportedModelError, match="no such ONNX file"):
        import_onnx(tmp_path / "missing.onnx")
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\x01not a protobuf at all" * 3)
    with pytest.raises(UnsupportedModelError, match=r"bad.onnx: not a readable ONNX model"):
        import_onnx(bad)


def _const_model(nodes, consts):
    from onnx import TensorProto, helper

    graph = helper.make_graph([helper.make_node("Constant", [], [n], value=helper.make_tensor(n, TensorProto.INT64, [len(v)], v))
                               for n, v in consts.items()] + nodes, "consts",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


BIG = 2**15  # two such dims: 2**30 elements, past limits.TENSOR_ELEMENTS (2**28)
EVALUATED = [
    ("ConstantOfShape", {"s": [BIG, BIG]}, [("ConstantOfShape", ["s"])], r"the ConstantOfShape output of shape \[32768, 32768\]"),
    ("Expand", {"a": [1], "s": [BIG, BIG]}, [("Expand", ["a", "s"])], r"the Expand output of shape \[32768, 32768\]"),
    ("Range", {"a": [0], "b": [2**40], "d": [1]}, [("Range", ["a", "b", "d"])], r"the Range output of shape \[1099511627776\]"),
    ("broadcast Mul", {"a": [1], "s": [1, 1], "e1": [2**14, 1], "e2": [1, 2**15]},
     [("Reshape", ["a", "s"], "a2"), ("Expand", ["a2", "e1"], "a3"), ("Expand", ["a2", "e2"], "b3"), ("Mul", ["a3", "b3"])],
     r"the Mul of constants of shape \[16384, 32768\]"),
]


@pytest.mark.parametrize("what,consts,nodes,message", EVALUATED, ids=[e[0] for e in EVALUATED])
def test_evaluated_constants_are_bounded(what, consts, nodes, message):
    """A constant the importer computes (shape arithmetic) is held to limits.TENSOR_ELEMENTS
    before numpy allocates it: one line naming the node."""
    from onnx import helper

    made = [helper.make_node(op, ins, [out[0] if out else "k"], name=f"n{i}")
            for i, (op, ins, *out) in enumerate(nodes)]
    made.append(helper.make_node("Reshape", ["x", "k"], ["y"], name="r"))
    with pytest.raises(UnsupportedModelError, match=r"^consts: ONNX node 'n\d' \(\w+\): " + message +
                       r" has more than 268435456 elements \(limits.TENSOR_ELEMENTS\)$"):
        import_onnx(_const_model(made, consts))


# ------------------------------------------------------------------ the predict loader
def test_predict_loader_reads_onnx(tmp_path):
    from pipelines.predict import load_model

    src = mbv2_se()
    path = tmp_path / "mbv2.onnx"
    path.write_bytes(export_onnx(to_module(src), [1, 3, 32, 32], dynamic={"x": {0: "N", 2: "H", 3: "W"}}))
    g = load_model(path, [1, 3, 64, 64])
    assert g.name == "mbv2" and g.input_nodes[0].shape == [1, 3, 64, 64]
    assert g.model_id == onnx_form(mbv2_se(64)).model_id
    # the CLI reports ValueErrors as one line (latbench: error: ...)
    with pytest.raises(ValueError, match=r"^mbv2: input 'x' has free dimension\(s\) \['H', 'W'\]"):
        load_model(path)


# ------------------------------------------------------------------ what real zoos add
class Preprocessed(nn.Module):
    """A model with its preprocessing inside (a rescaling with an offset, a per-channel
    normalisation) and an attention gate expanded to the feature map (BAM's channel gate)."""

    def __init__(self):
        super().__init__()
        self.register_buffer("mean", torch.tensor([0.4, 0.5, 0.6]).reshape(1, 3, 1, 1))
        self.register_buffer("std", torch.tensor([0.2, 0.25, 0.3]).reshape(1, 3, 1, 1))
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.fc = nn.Linear(8, 8)

    def forward(self, x):
        x = x / 127.5 - 1.0  # a scalar Div and Sub: scale, shift
        x = (x - self.mean) / self.std  # per-channel Sub and Div: one affine batch norm each
        x = self.conv(x) + 2.0  # a scalar add after a conv
        gate = torch.sigmoid(self.fc(x.mean((2, 3))))
        return x * gate.unsqueeze(2).unsqueeze(3).expand_as(x)  # Expand of a computed tensor, broadcast by Mul


def test_preprocessing_and_expanded_gates_compute_the_same():
    torch.manual_seed(3)
    m = Preprocessed().eval()
    blob = export_onnx(m, [1, 3, 12, 12])
    x = (np.random.default_rng(3).random((1, 3, 12, 12)) * 255).astype(np.float32)
    g = check_same_function(blob, m, x, "preprocessed")
    counts = g.op_counts()
    assert (counts["scale"], counts["shift"], counts["batchnorm"]) == (1, 2, 2)
    assert sorted(n.attrs["value"] for n in g.nodes.values() if n.op == "shift") == [-1.0, 2.0]


def test_expand_read_by_a_non_broadcasting_operator_is_refused():
    class M(nn.Module):
        def forward(self, x):
            return torch.cat([x, x.mean((2, 3), keepdim=True).expand_as(x)], dim=1)

    with pytest.raises(UnsupportedModelError, match=r"an Expand of a computed tensor read by an operator that does not "
                                                    r"broadcast it"):
        import_onnx(export_onnx(M(), [1, 4, 6, 6]), name="m")


@pytest.mark.parametrize("align", [False, True])
def test_bilinear_resize_maps_to_the_bilinear_upsample(align):
    """AirNet's and ResAttNet's attention masks: F.interpolate(mode="bilinear") by an integer
    factor, with half-pixel centres or aligned corners."""
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 4, 3, stride=2, padding=1)
            self.trunk = nn.Conv2d(3, 4, 1)

        def forward(self, x):
            y = self.conv(x)
            return torch.sigmoid(F.interpolate(y, size=x.shape[2:], mode="bilinear", align_corners=align)) * self.trunk(x)

    torch.manual_seed(7)
    m = M().eval()
    x = np.random.default_rng(7).standard_normal((1, 3, 12, 12)).astype(np.float32)
    g = check_same_function(export_onnx(m, [1, 3, 12, 12]), m, x, "bilinear")
    ups = [n for n in g.nodes.values() if n.op == "upsample"]
    assert [(n.attrs["mode"], n.attrs["scale"]) for n in ups] == [("bilinear_corners" if align else "bilinear", [2, 2])]


def test_split_attention_channel_max_and_instance_norm_compute_the_same():
    """ResNeSt's split attention (a rank-5 view summed over its radix, a softmax over the radix),
    CBAM's channel-max map and global max pool, IBN-Net's instance norm: reduce_sum, reduce_max,
    instancenorm, through the file's weights and LiteRT."""
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 8, 3, padding=1)
            self.inorm = nn.InstanceNorm2d(8, affine=True)
            self.att = nn.Conv2d(4, 8, 1)
            self.spatial = nn.Conv2d(2, 1, 3, padding=1)

        def forward(self, x):
            y = self.inorm(self.conv(x))
            v = y.view(1, 2, 4, 12, 12)  # radix 2
            a = self.att(F.adaptive_avg_pool2d(v.sum(1), 1)).view(1, 2, 4, 1, 1).softmax(1)
            y = (v * a).sum(1)
            y = y * torch.sigmoid(self.spatial(torch.cat([y.amax(1, keepdim=True), y.mean(1, keepdim=True)], 1)))
            return F.adaptive_max_pool2d(y, 1).flatten(1)

    torch.manual_seed(5)
    m = M().eval()
    with torch.no_grad():  # a visible gain and shift
        m.inorm.weight.uniform_(0.5, 1.5)
        m.inorm.bias.uniform_(-0.5, 0.5)
    x = np.random.default_rng(5).standard_normal((1, 3, 12, 12)).astype(np.float32)
    g = check_same_function(export_onnx(m, [1, 3, 12, 12]), m, x, "attention")
    counts = g.op_counts()
    assert (counts["reduce_sum"], counts["reduce_max"], counts["instancenorm"]) == (2, 1, 1)

    class S(nn.Module):
        def forward(self, t):
            return t.sum((1, 2))

    with pytest.raises(UnsupportedModelError, match=r"\(ReduceSum\): ReduceSum over axes \[1, 2\]"):
        import_onnx(export_onnx(S(), [1, 4, 6, 6]), name="m")


def test_local_response_norm_and_division_compute_the_same():
    """pytorchcv's AlexNet norm (``F.local_response_norm``, which torch.onnx writes decomposed:
    the squares viewed [1, 1, C, H, W], padded on the channel axis, averaged by an AveragePool,
    times alpha, plus the bias, to the power beta, the input divided by that), nn.LocalResponseNorm
    and a quotient of two tensors, through the file's weights and LiteRT."""
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 8, 3, padding=1)
            self.lrn = nn.LocalResponseNorm(3, alpha=0.3, beta=0.6, k=1.5)

        def forward(self, x):
            y = F.local_response_norm(torch.relu(self.conv(x)), 5, alpha=0.5, k=2.0)
            return self.lrn(y / (torch.sigmoid(y) + 0.5))

    torch.manual_seed(6)
    m = M().eval()
    x = np.random.default_rng(6).standard_normal((1, 3, 10, 10)).astype(np.float32)
    g = check_same_function(export_onnx(m, [1, 3, 10, 10]), m, x, "lrn")
    assert ops(g) == ["conv2d", "relu", "lrn", "sigmoid", "shift", "div", "lrn"]
    assert [n.attrs for n in g.nodes.values() if n.op == "lrn"] == [
        {"size": 5, "alpha": 0.5, "beta": 0.75, "bias": 2.0}, {"size": 3, "alpha": 0.3, "beta": 0.6, "bias": 1.5}]


@pytest.mark.parametrize("size", [5, 4])
def test_exported_local_response_norm_imports_back(size, tmp_path):
    """The exporter writes an odd-sized lrn as ONNX's LRN, an even-sized one decomposed (ONNX
    centres an even window one channel off PyTorch's); both import to the same IR."""
    from generators.export.onnx import export_onnx as export_ir

    src = Graph("lrn", source="test")
    x = src.input([1, 6, 5, 5])
    src.set_outputs(src.add("div", [src.add("lrn", x, size=size, alpha=0.5, beta=0.5, bias=2.0), src.add("sigmoid", x)]))
    facts = export_ir(src.validate(), tmp_path / "m.onnx")
    assert ("LRN" in facts["op_counts"]) == (size % 2 == 1)
    assert import_onnx(tmp_path / "m.onnx").model_id == src.model_id


def test_even_onnx_lrn_is_refused():
    from onnx import TensorProto, helper

    node = helper.make_node("LRN", ["x"], ["y"], size=4)
    graph = helper.make_graph([node], "lrn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 4, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 4, 4])])
    blob = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]).SerializeToString()
    with pytest.raises(UnsupportedModelError, match=r"^m: ONNX node .* \(LRN\): LRN of the even size 4 \(ONNX centres"):
        import_onnx(blob, name="m")


class _CondenseLike(nn.Module):
    """CondenseNet's two index_selects of a constant buffer: of the channels of a feature map
    (CondenseComplexConv) and of the classifier's input (CondenseLinear)."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.register_buffer("index", torch.tensor([7, 7, 0, 3, 5, 1]))
        self.pick = nn.Conv2d(6, 8, 1, groups=2)
        self.register_buffer("features", torch.tensor([6, 2, 2, 0]))
        self.fc = nn.Linear(4, 5)

    def forward(self, x):
        y = self.pick(torch.index_select(torch.relu(self.conv(x)), dim=1, index=self.index))
        return self.fc(torch.index_select(torch.flatten(F.adaptive_avg_pool2d(y, 1), 1), dim=1, index=self.features))


@pytest.mark.parametrize("dynamic", [False, True])
def test_channel_gather_computes_the_same(dynamic):
    """A Gather of a constant 1-D index on axis 1 -> gather, through the file's weights and LiteRT
    (under a free batch too, as the coverage benchmark exports)."""
    torch.manual_seed(7)
    m = _CondenseLike().eval()
    x = np.random.default_rng(7).standard_normal((1, 3, 8, 8)).astype(np.float32)
    g = check_same_function(export_onnx(m, [1, 3, 8, 8], {"x": {0: "N"}} if dynamic else None), m, x, "gather")
    assert [n.attrs for n in g.nodes.values() if n.op == "gather"] == [
        {"indices": [7, 7, 0, 3, 5, 1], "axis": 1}, {"indices": [6, 2, 2, 0], "axis": 1}]


def test_exported_gather_imports_back(tmp_path):
    from generators.export.onnx import export_onnx as export_ir

    src = Graph("gather", source="test")
    x = src.input([1, 6, 5, 5])
    v = src.add("flatten", src.add("global_avgpool", src.add("gather", x, indices=[5, 5, 0, 2])))
    src.set_outputs(src.add("fc", src.add("gather", v, indices=[3, 0, 1]), out_features=4))
    facts = export_ir(src.validate(), tmp_path / "m.onnx")
    assert facts["op_counts"]["Gather"] == 2
    assert import_onnx(tmp_path / "m.onnx").model_id == src.model_id


@pytest.mark.parametrize("index,axis,what", [
    ([[0, 1], [2, 3]], 1, r"Gather of a computed tensor by anything but constant indices \(one: .*; a list: channels\)"),
    ([0, 2], 2, r"Gather of 2 constant indices on axis 2 of \[1, 4, 3, 3\] \(the IR's gather takes axis 1"),
])
def test_other_gathers_are_refused_naming_the_node(index, axis, what):
    from onnx import TensorProto, helper, numpy_helper

    idx = numpy_helper.from_array(np.array(index, dtype=np.int64), "idx")
    node = helper.make_node("Gather", ["x", "idx"], ["y"], axis=axis, name="pick")
    out = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 3, 3])], [out],
                              initializer=[idx])
    blob = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]).SerializeToString()
    with pytest.raises(UnsupportedModelError, match=r"^m: ONNX node 'pick' \(Gather\): " + what):
        import_onnx(blob, name="m")


class _ChannelwiseLike(nn.Module):
    """ChannelNet's channel-wise convolution: a Conv3d of one input channel sliding over the
    channels of the unsqueezed map (window 4g, stride g, padding 2g-1), viewed back as a map."""

    def __init__(self, groups: int = 2):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.cw = nn.Conv3d(1, groups, (4 * groups, 1, 1), stride=(groups, 1, 1), padding=(2 * groups - 1, 0, 0),
                            bias=False)

    def forward(self, x):
        y = torch.relu(self.conv(x))
        return self.cw(y.unsqueeze(1)).view(y.shape) + y


def test_a_convolution_along_the_channels_computes_the_same():
    """A 3-d convolution over the depth of a one-channel 5-d view -> a kd x 1 conv2d of the map
    flattened to [1, 1, C, H*W], its MACs the Conv3d's, through the file's weights and LiteRT."""
    torch.manual_seed(3)
    m = _ChannelwiseLike().eval()
    x = np.random.default_rng(3).standard_normal((1, 3, 6, 5)).astype(np.float32)
    g = check_same_function(export_onnx(m, [1, 3, 6, 5]), m, x, "channelwise")
    (cw,) = [n for n in g.nodes.values() if n.op == "conv2d" and n.attrs["kernel"] == [8, 1]]
    assert (cw.attrs["out_channels"], cw.attrs["stride"], cw.attrs["padding"], cw.attrs["bias"]) == (2, [2, 1], [3, 0], False)
    assert g.shape(cw.inputs[0]) == [1, 1, 8, 30] and g.shape(cw.name) == [1, 2, 4, 30]
    assert g.flops == 8 * 3 * 9 * 30 + 2 * 4 * 30 * 8  # the 3x3 conv's MACs, then the Conv3d's own count


def test_other_3d_convolutions_are_refused_naming_the_node():
    from onnx import TensorProto, helper, numpy_helper

    w = numpy_helper.from_array(np.ones((2, 1, 3, 3, 3), dtype=np.float32), "w")
    node = helper.make_node("Conv", ["x", "w"], ["y"], name="c3", pads=[1] * 6)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 4, 5, 5])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], initializer=[w])
    blob = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]).SerializeToString()
    with pytest.raises(UnsupportedModelError, match=r"^m: ONNX node 'c3' \(Conv\): a 3-d convolution \(weight shape "
                                                    r"\[2, 1, 3, 3, 3\] on \[1, 1, 4, 5, 5\]\); only one over the depth"):
        import_onnx(blob, name="m")


def test_channel_padding_computes_the_same():
    """PyramidNet's shortcut: the identity widened by zero channels (a Pad of axis 1) -> pad with
    six pads, through the file's weights and LiteRT."""
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 8, 3, padding=1)
            self.wide = nn.Conv2d(8, 12, 3, padding=1)

        def forward(self, x):
            y = self.conv(x)
            return self.wide(y) + F.pad(y, (0, 0, 0, 0, 0, 4))

    torch.manual_seed(7)
    m = M().eval()
    x = np.random.default_rng(7).standard_normal((1, 3, 8, 8)).astype(np.float32)
    g = check_same_function(export_onnx(m, [1, 3, 8, 8]), m, x, "pyramid")
    assert ops(g) == ["conv2d", "conv2d", "pad", "add"]
    assert next(n for n in g.nodes.values() if n.op == "pad").attrs == {"pads": [0, 0, 0, 0, 0, 4], "value": 0.0}


def test_nearest_resize_to_a_size_computes_the_same():
    """SCNet's self-calibration: a map pooled by 4 brought back to its size by a nearest resize of a
    non-integer ratio (3 -> 14: a Resize with sizes, asymmetric coordinates, floor) -> resize."""
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 8, 3, padding=1)

        def forward(self, x):
            y = self.conv(x)
            return torch.sigmoid(y + F.interpolate(F.avg_pool2d(y, 4), size=y.shape[2:], mode="nearest"))

    torch.manual_seed(8)
    m = M().eval()
    x = np.random.default_rng(8).standard_normal((1, 3, 14, 14)).astype(np.float32)
    g = check_same_function(export_onnx(m, [1, 3, 14, 14]), m, x, "scnet")
    assert ops(g) == ["conv2d", "avgpool", "resize", "add", "sigmoid"]
    assert next(n for n in g.nodes.values() if n.op == "resize").attrs == {"size": [14, 14]}
