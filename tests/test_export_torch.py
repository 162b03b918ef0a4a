"""IR -> PyTorch exporter: module semantics, TorchScript op counts, int8, lite, errors."""
from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import torch

from generators import blocks as B
from generators.export import torch_module as tm
from generators.export.weights import example_input, graph_weights
from generators.ir import Graph, split_ref
from generators.ops import OPS, OpSpec, register_op

# IR operator -> the aten operator it shows as in the traced fp32 TorchScript graph
# (tracing records what runs: Conv2d as aten::_convolution, ReLU6 as aten::hardtanh,
# torch.split as aten::split_with_sizes). n-ary add/mul give n-1 binary aten ops.
ATEN = {
    "conv2d": "aten::_convolution",
    "fc": "aten::linear",
    "batchnorm": "aten::batch_norm",
    "relu": "aten::relu",
    "relu6": "aten::hardtanh",
    "hswish": "aten::hardswish",
    "hsigmoid": "aten::hardsigmoid",
    "sigmoid": "aten::sigmoid",
    "swish": "aten::silu",
    "tanh": "aten::tanh",
    "leaky_relu": "aten::leaky_relu",
    "prelu": "aten::prelu",
    "add": "aten::add",
    "mul": "aten::mul",
    "avgpool": "aten::avg_pool2d",
    "maxpool": "aten::max_pool2d",
    "global_avgpool": "aten::adaptive_avg_pool2d",
    "concat": "aten::cat",
    "split": "aten::split_with_sizes",
    "channel_shuffle": "aten::channel_shuffle",
    "pad": "aten::pad",
    "reshape": "aten::reshape",
    "flatten": "aten::flatten",
    "softmax": "aten::softmax",
    "scale": "aten::mul",
    "shift": "aten::add",
    "clip": "aten::hardtanh",
    "crop": "aten::narrow",  # one per cropped spatial dimension
    "upsample": "aten::upsample_nearest2d",
    "layernorm": "aten::layer_norm",  # + two aten::permute when the axis is not the last
    "gelu": "aten::gelu",
    "matmul": "aten::matmul",
    "transpose": "aten::permute",
    "mean": "aten::mean",
    "reduce_max": "aten::amax",
    "reduce_sum": "aten::sum",
    "instancenorm": "aten::instance_norm",
    "resize": "aten::upsample_nearest2d",
    "lrn": "aten::avg_pool3d",  # + the rest of nn.LocalResponseNorm's decomposition (torch_module.LRN_ATEN)
    "div": "aten::div",
    "gather": "aten::index_select",
    "pos_embed": "aten::add",
    "cls_token": "aten::cat",
}


# ---------------------------------------------------------------- fixture graphs
def all_ops_graph() -> Graph:
    """Every operator of ops.py, at 32x32; two outputs (logits and probabilities)."""
    g = Graph(name="all-ops", source="test")
    x = g.input([1, 3, 32, 32])
    x = B.conv_bn_act(g, x, 16, 3, stride=2, act="relu")
    x = B.depthwise_separable(g, x, 24, act="relu6")
    x = B.inverted_residual(g, x, 24, expansion=3, se=True, act="hswish")  # SE: gap, hsigmoid, mul; add
    a, b = g.add_multi("split", x, sections=[8, 16])
    a = B.conv_bn_act(g, a, 8, 3, act="swish")
    b = B.conv_bn_act(g, b, 16, 1, act="sigmoid", bn=False)
    x = g.add("concat", [a, b])
    x = g.add("channel_shuffle", x, groups=4)
    x = g.add("lrn", x, size=5, alpha=0.5, beta=0.75, bias=2.0)  # AlexNet's (a larger alpha: it shows)
    x = g.add("gather", x, indices=[23 - k for k in range(24) if k != 5] + [0])  # CondenseNet's: one repeated, one left out
    x = g.add("pad", x, pads=[1, 0, 0, 1], value=0.25)
    x = g.add("maxpool", x, kernel=3, stride=2, padding=1, ceil_mode=True)
    y = g.add("avgpool", x, kernel=3, stride=1, padding=1, count_include_pad=False)
    y = g.add("tanh", y)
    z = B.conv_bn_act(g, x, 24, 1, act="leaky_relu")
    x = g.add("add", [x, y, z])
    x = g.add("prelu", x, num_parameters=24)
    x = g.add("batchnorm", x)
    x = g.add("relu", x)
    x = g.add("crop", x, crops=[1, 0, 0, 1])  # 9x9 -> 8x8
    x = g.add("avgpool", x, kernel=2, stride=2, ceil_mode=True)
    x = g.add("upsample", x, scale=[1, 2])
    x = g.add("scale", x, factor=0.5)
    x = g.add("shift", x, value=0.25)
    x = g.add("clip", x, min=-1.0, max=2.0)
    x = g.add("reshape", x, shape=[1, 24, 32, 1])
    x = g.add("global_avgpool", x)
    x = g.add("flatten", x)
    x = g.add("fc", x, out_features=32)
    x = g.add("batchnorm", x)
    x = g.add("prelu", x)
    x = g.add("gather", x, indices=[3, 1, 1, 30, 7])  # of a [1, F] vector: CondenseNet's classifier input
    logits = g.add("fc", x, out_features=10)
    probs = g.add("softmax", logits)
    return g.set_outputs(logits, probs).validate()


def two_input_graph() -> Graph:
    g = Graph(name="two-inputs", source="test")
    a = g.input([1, 8, 8, 8], name="a")
    b = g.input([1, 8, 8, 8], name="b")
    x = g.add("mul", [a, b])
    x = g.add("div", [x, g.add("shift", g.add("sigmoid", b), value=0.5)])  # a divisor in (0.5, 1.5)
    x = g.add("lrn", x, size=4, alpha=0.5, beta=0.75, bias=1.5)  # an even window: PyTorch's centring
    x = g.add("pad", x, pads=[0, 0, 0, 0, 0, 4])  # PyramidNet's zero channels (float in int8)
    x = g.add("add", [x, g.add("resize", g.add("avgpool", x, kernel=3, stride=3), size=[8, 8])])  # SCNet: 2x2 -> 8x8
    x = g.add("crop", x, crops=[0, 1, 0, 0])  # one narrow only
    x = B.conv_bn_act(g, x, 8, 3)
    return g.set_outputs(x, g.add("global_avgpool", x)).validate()


def mobilenet_like(num_classes: int = 100) -> Graph:
    g = Graph(name="mbv2-tiny", source="test")
    x = g.input([1, 3, 32, 32])
    x = B.conv_bn_act(g, x, 16, 3, stride=2, act="relu6")
    x = B.inverted_residual(g, x, 16, expansion=1)
    x = B.inverted_residual(g, x, 24, stride=2, expansion=6)
    x = B.inverted_residual(g, x, 24, expansion=6)
    x = B.inverted_residual(g, x, 32, stride=2, expansion=6, se=True, act="hswish")
    x = B.inverted_residual(g, x, 32, expansion=6, se=True, act="hswish")
    x = B.conv_bn_act(g, x, 64, 1, act="hswish")
    return g.set_outputs(B.classifier(g, x, num_classes)).validate()


def resnet_like(num_classes: int = 100) -> Graph:
    g = Graph(name="resnet-tiny", source="test")
    x = g.input([1, 3, 32, 32])
    x = B.conv_bn_act(g, x, 16, 3)
    x = g.add("maxpool", x, kernel=3, stride=2, padding=1)
    for c, s in [(16, 1), (32, 2), (64, 2)]:
        with g.block("basic"):
            y = B.conv_bn_act(g, x, c, 3, stride=s)
            y = B.conv_bn_act(g, y, c, 3, act=None)
            sc = x if (s == 1 and g.shape(x)[1] == c) else B.conv_bn_act(g, x, c, 1, stride=s, act=None)
            x = g.add("relu", g.add("add", [y, sc]))
    return g.set_outputs(B.classifier(g, x, num_classes)).validate()


def transformer_graph() -> Graph:
    """ConvNeXt-like stem (channel layer norm, tanh GELU, a mean keeping dims) and ViT-like
    encoder blocks over its tokens (layer norm, attention from matmul, softmax, transpose), with
    a position embedding of the image and a class token and position embedding of the tokens;
    two heads: the mean of the tokens and the class token (split + reshape)."""
    g = Graph(name="transformer", source="test")
    x = g.input([1, 3, 16, 16])
    x = g.add("conv2d", x, out_channels=16, kernel=4, stride=4)
    x = g.add("gelu", g.add("layernorm", x, axis=1, eps=1e-6), approximate="tanh")
    x = g.add("add", [x, g.add("mean", x, axis=3, keepdim=True)])
    x = g.add("instancenorm", x)  # IBN-Net, CBAM's channel-max map, split attention's radix sum
    x = g.add("mul", [x, g.add("sigmoid", g.add("reduce_max", x, axis=1, keepdim=True))])
    x = g.add("concat", [g.add("reduce_sum", g.add("reshape", x, shape=[1, 2, 8, 4, 4]), axis=1)] * 2)
    x = g.add("pos_embed", x)
    t = g.add("transpose", g.add("reshape", x, shape=[1, 16, 16]), perm=[0, 2, 1])
    t = g.add("pos_embed", g.add("cls_token", t))
    for _ in range(2):
        t = B.encoder_block(g, t, heads=2, mlp_ratio=2)
    t = g.add("layernorm", t)
    cls = g.add("reshape", g.add_multi("split", t, sections=[1, 16], axis=1)[0], shape=[1, 16])
    t = g.add("mean", t, axis=1)
    return g.set_outputs(g.add("fc", t, out_features=10), g.add("fc", cls, out_features=10)).validate()


GRAPHS = {"all_ops": all_ops_graph, "two_inputs": two_input_graph, "mobilenet": mobilenet_like, "resnet": resnet_like,
          "transformer": transformer_graph}


@pytest.fixture(autouse=True)
def _restore_quantized_engine():
    """load_artifact(engine=...) sets a process-wide engine; do not leak it into other tests."""
    before = torch.backends.quantized.engine
    yield
    torch.backends.quantized.engine = before


@pytest.fixture(scope="module")
def graphs() -> dict[str, Graph]:
    return {k: f() for k, f in GRAPHS.items()}


def run(module, graph: Graph, sample: int = 0) -> list[np.ndarray]:
    with torch.no_grad():
        out = module(*tm.example_tensors(graph, sample))
    out = out if isinstance(out, (tuple, list)) else [out]
    return [o.detach().numpy() for o in out]


# ---------------------------------------------------------------- a NumPy reference (float64)
def _np_conv(x, w, b, a):
    (sh, sw), (ph, pw), (dh, dw), groups = a["stride"], a["padding"], a["dilation"], a["groups"]
    x = np.pad(x[0], ((0, 0), (ph, ph), (pw, pw)))
    o, cg, kh, kw = w.shape
    ho = (x.shape[1] - dh * (kh - 1) - 1) // sh + 1
    wo = (x.shape[2] - dw * (kw - 1) - 1) // sw + 1
    out = np.zeros((o, ho, wo))
    og = o // groups
    for gi in range(groups):
        xs = x[gi * cg:(gi + 1) * cg]
        cols = np.stack([
            np.stack([xs[:, i * dh:i * dh + sh * (ho - 1) + 1:sh, j * dw:j * dw + sw * (wo - 1) + 1:sw] for j in range(kw)], 1)
            for i in range(kh)
        ], 1)  # [cg, kh, kw, ho, wo]
        out[gi * og:(gi + 1) * og] = np.einsum("ocij,cijhw->ohw", w[gi * og:(gi + 1) * og], cols)
    if b is not None:
        out += b[:, None, None]
    return out[None]


def _np_pool(x, a, out_shape, kind):
    (kh, kw), (sh, sw), (ph, pw) = a["kernel"], a["stride"], a["padding"]
    _, c, h, w = x.shape
    out = np.zeros(out_shape)
    for oh in range(out_shape[2]):
        h0 = oh * sh - ph
        h1 = min(h0 + kh, h + ph)
        for ow in range(out_shape[3]):
            w0 = ow * sw - pw
            w1 = min(w0 + kw, w + pw)
            win = x[0, :, max(h0, 0):min(h1, h), max(w0, 0):min(w1, w)]
            if kind == "max":
                out[0, :, oh, ow] = win.max(axis=(1, 2))
            else:
                n = (h1 - h0) * (w1 - w0) if a["count_include_pad"] else win.shape[1] * win.shape[2]
                out[0, :, oh, ow] = win.sum(axis=(1, 2)) / n
    return out


def _channel(v, rank):
    return v.reshape((1, -1) + (1,) * (rank - 2))


def numpy_forward(graph: Graph, inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
    weights = graph_weights(graph)
    values: dict[tuple[str, int], np.ndarray] = {}
    sig = lambda v: 1.0 / (1.0 + np.exp(-v))
    for node in graph.nodes.values():
        a, w = node.attrs, {k: v.astype(np.float64) for k, v in weights[node.name].items()}
        xs = [values[split_ref(r)] for r in node.inputs]
        x = xs[0] if xs else None
        op = node.op
        if op == "input":
            y = inputs[node.name].astype(np.float64)
        elif op == "conv2d":
            y = _np_conv(x, w["weight"], w.get("bias"), a)
        elif op == "fc":
            y = x @ w["weight"].T + (w["bias"] if "bias" in w else 0.0)
        elif op == "layernorm":
            ax = a["axis"] % x.ndim
            shape = [-1] + [1] * (x.ndim - 1 - ax)
            d = x - x.mean(axis=ax, keepdims=True)
            y = d / np.sqrt((d * d).mean(axis=ax, keepdims=True) + a["eps"])
            y = y * w["weight"].reshape(shape) + w["bias"].reshape(shape)
        elif op == "gelu":
            if a["approximate"] == "tanh":
                y = 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))
            else:
                y = 0.5 * x * (1 + np.vectorize(math.erf)(x / math.sqrt(2)))
        elif op == "pos_embed":
            y = x + w["weight"]
        elif op == "cls_token":
            y = np.concatenate([w["weight"], x], axis=1)
        elif op == "matmul":
            y = np.matmul(xs[0], xs[1])
        elif op == "transpose":
            y = x.transpose(a["perm"])
        elif op == "mean":
            y = x.mean(axis=a["axis"], keepdims=a["keepdim"])
        elif op == "reduce_max":
            y = x.max(axis=a["axis"], keepdims=a["keepdim"])
        elif op == "reduce_sum":
            y = x.sum(axis=a["axis"], keepdims=a["keepdim"])
        elif op == "resize":  # PyTorch's nearest: source floor(dst * in / out)
            rows = (np.arange(a["size"][0]) * x.shape[2]) // a["size"][0]
            cols = (np.arange(a["size"][1]) * x.shape[3]) // a["size"][1]
            y = x[:, :, rows][:, :, :, cols]
        elif op == "lrn":  # PyTorch's window: size // 2 channels before, (size - 1) // 2 after
            n, c = a["size"], x.shape[1]
            sq = np.pad(x * x, ((0, 0), (n // 2, (n - 1) // 2), (0, 0), (0, 0)))
            y = x / (a["bias"] + a["alpha"] / n * sum(sq[:, k:k + c] for k in range(n))) ** a["beta"]
        elif op == "div":
            y = xs[0] / xs[1]
        elif op == "instancenorm":
            d = x - x.mean(axis=(2, 3), keepdims=True)
            y = d / np.sqrt((d * d).mean(axis=(2, 3), keepdims=True) + a["eps"])
            y = y * _channel(w["weight"], 4) + _channel(w["bias"], 4)
        elif op == "batchnorm":
            r = x.ndim
            y = (x - _channel(w["running_mean"], r)) / np.sqrt(_channel(w["running_var"], r) + a["eps"])
            y = y * _channel(w["weight"], r) + _channel(w["bias"], r)
        elif op == "relu":
            y = np.maximum(x, 0)
        elif op == "relu6":
            y = np.clip(x, 0, 6)
        elif op == "hswish":
            y = x * np.clip(x + 3, 0, 6) / 6
        elif op == "hsigmoid":
            y = np.clip(x + 3, 0, 6) / 6
        elif op == "sigmoid":
            y = sig(x)
        elif op == "swish":
            y = x * sig(x)
        elif op == "tanh":
            y = np.tanh(x)
        elif op == "leaky_relu":
            y = np.where(x > 0, x, a["alpha"] * x)
        elif op == "prelu":
            slope = w["weight"] if a["num_parameters"] == 1 else _channel(w["weight"], x.ndim)
            y = np.where(x > 0, x, slope * x)
        elif op == "add":
            y = sum(xs[1:], xs[0])
        elif op == "mul":
            y = math.prod(xs[1:], start=xs[0])
        elif op in ("avgpool", "maxpool"):
            y = _np_pool(x, a, node.shape, op[:3])
        elif op == "scale":
            y = x * a["factor"]
        elif op == "shift":
            y = x + a["value"]
        elif op == "clip":
            y = np.clip(x, a["min"], a["max"])
        elif op == "crop":
            t, bo, l, r = a["crops"]
            y = x[:, :, t:x.shape[2] - bo, l:x.shape[3] - r]
        elif op == "upsample":
            y = x.repeat(a["scale"][0], axis=2).repeat(a["scale"][1], axis=3)
        elif op == "global_avgpool":
            y = x.mean(axis=(2, 3), keepdims=True)
        elif op == "concat":
            y = np.concatenate(xs, axis=a["axis"])
        elif op == "split":
            y = np.split(x, np.cumsum(a["sections"])[:-1], axis=a["axis"])
        elif op == "channel_shuffle":
            n, c, h, wd = x.shape
            y = x.reshape(n, a["groups"], c // a["groups"], h, wd).transpose(0, 2, 1, 3, 4).reshape(x.shape)
        elif op == "pad":
            t, bo, l, r, front, back = a["pads"] + [0, 0] * (len(a["pads"]) == 4)
            y = np.pad(x, ((0, 0), (front, back), (t, bo), (l, r)), constant_values=a["value"])
        elif op == "gather":
            y = np.take(x, a["indices"], axis=a["axis"])
        elif op == "reshape":
            y = x.reshape(a["shape"])
        elif op == "flatten":
            y = x.reshape(1, -1)
        elif op == "softmax":
            e = np.exp(x - x.max(axis=a["axis"], keepdims=True))
            y = e / e.sum(axis=a["axis"], keepdims=True)
        else:
            raise AssertionError(f"no NumPy reference for {op}")
        for k, v in enumerate(y if isinstance(y, list) else [y]):
            values[(node.name, k)] = v
    return [values[split_ref(r)] for r in graph.outputs]


# ---------------------------------------------------------------- tests
def test_every_operator_is_mapped_and_covered(graphs):
    ops = set(OPS) - {"input"}
    assert {op: tm.aten_op(op) for op in sorted(ops)} == {op: ATEN[op] for op in sorted(ops)}
    used = set().union(*(g.op_counts() for g in graphs.values()))
    assert ops <= used, f"fixture graphs miss {sorted(ops - used)}"


@pytest.mark.parametrize("name", list(GRAPHS))
def test_module_matches_ir_and_numpy(graphs, name):
    g = graphs[name]
    m = tm.to_module(g)
    assert not m.training
    assert sum(p.numel() for p in m.parameters()) == g.params
    outs = run(m, g)
    assert [list(o.shape) for o in outs] == [g.tensor_shape(r) for r in g.outputs]
    refs = numpy_forward(g, example_input(g))
    for o, r in zip(outs, refs):
        np.testing.assert_allclose(o, r, rtol=1e-4, atol=1e-4 * max(1.0, float(np.abs(r).max())))


@pytest.mark.parametrize("name", list(GRAPHS))
def test_traced_aten_counts_match_ir(graphs, name):
    g = graphs[name]
    want: dict[str, int] = {}
    for node in g.nodes.values():
        if node.op != "input":
            if node.op in ("add", "mul"):
                n = len(node.inputs) - 1
            elif node.op == "crop":
                t, b, l, r = node.attrs["crops"]
                n = int(bool(t or b)) + int(bool(l or r))
            else:
                n = 1
            want[ATEN[node.op]] = want.get(ATEN[node.op], 0) + n
            if node.op == "layernorm" and node.attrs["axis"] % len(node.shape) != len(node.shape) - 1:
                want["aten::permute"] = want.get("aten::permute", 0) + 2
            if node.op == "lrn":  # nn.LocalResponseNorm is a composite of aten ops
                for kind, k in tm.LRN_ATEN.items():
                    want[kind] = want.get(kind, 0) + k
    got = tm.script_op_counts(tm.trace(g))
    assert got == {k: v for k, v in sorted(want.items()) if v}  # nothing else: no extra aten op per node
    assert tm.expected_aten_counts(g) == got


def test_torchscript_export_facts_and_reload(graphs, tmp_path):
    g = graphs["all_ops"]
    facts = tm.export_torchscript(g, tmp_path / "m.pt")
    assert facts["format"] == "torchscript" and facts["precision"] == "fp32" and facts["engine"] is None
    assert facts["params"] == g.params and facts["model_id"] == g.model_id
    assert facts["output_shapes"] == [[1, 10], [1, 10]]
    assert facts["op_counts"] == tm.expected_aten_counts(g)
    assert facts["torch_version"] == torch.__version__
    assert facts["bytes"] == (tmp_path / "m.pt").stat().st_size
    assert not list(tmp_path.glob("*.tmp"))
    loaded = tm.load_artifact(facts["path"])
    for a, b in zip(run(loaded, g, 3), run(tm.to_module(g), g, 3)):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("precision", ["fp32", "int8"])
def test_exports_are_deterministic(graphs, tmp_path, precision):
    g = graphs["all_ops"]
    a = tm.export_torchscript(g, tmp_path / "a" / "m.pt", precision)
    tm._last_trace = None  # trace (and calibrate) afresh: the second export must not reuse the first
    b = tm.export_torchscript(g, tmp_path / "b" / "m.pt", precision)
    ma, mb = tm.load_artifact(a["path"], "x86"), tm.load_artifact(b["path"], "x86")
    wa, wb = tm.script_weights(ma), tm.script_weights(mb)
    assert wa.keys() == wb.keys() and len(wa) > 0
    for k in wa:
        ta, tb = wa[k], wb[k]
        if ta.is_quantized:
            assert torch.equal(ta.int_repr(), tb.int_repr()) and torch.equal(ta.dequantize(), tb.dequantize()), k
        else:
            assert torch.equal(ta, tb), k
    assert a["weights_sha256"] == b["weights_sha256"]
    assert a["op_counts"] == b["op_counts"]
    for s in (0, 7):
        for oa, ob in zip(run(ma, g, s), run(mb, g, s)):
            np.testing.assert_array_equal(oa, ob)


# Pearson r between int8 and fp32 logits, minimum over held-out inputs. Measured with
# torch 2.13 (8 calibration samples, 10 inputs): mobilenet-like 0.997 (x86) / 0.9988
# (qnnpack), resnet-like 0.9992 / 0.9995, all-ops 0.9997 / 0.9999. A kernel bug shows far
# below the bound: QNNPACK relu6 on channels-last input gave 0.22, quantized PReLU with
# slopes observed without 1.0 gave 0.45 (both worked around in torch_module).
R_MIN = 0.99


@pytest.mark.parametrize("engine", ["x86", "qnnpack"])
@pytest.mark.parametrize("name", ["mobilenet", "resnet", "all_ops", "transformer"])
def test_int8_runs_and_correlates_with_fp32(graphs, tmp_path, engine, name):
    g = graphs[name]
    facts = tm.export_torchscript(g, tmp_path / "m.pt", "int8", engine)
    assert facts["precision"] == "int8" and facts["engine"] == engine
    assert facts["calibration_samples"] == tm.DEFAULT_CALIBRATION_SAMPLES
    counts = facts["op_counts"]
    assert counts.get("aten::quantize_per_tensor", 0) >= 1 and counts.get("aten::dequantize", 0) >= 1
    assert sum(v for k, v in counts.items() if k.startswith("quantized::conv2d")) == g.op_counts()["conv2d"]
    assert counts.get("quantized::linear", 0) == g.op_counts()["fc"]
    q = tm.load_artifact(facts["path"], engine)
    ref = tm.to_module(g)
    rs = []
    for s in range(100, 105):
        logits_q, logits_f = run(q, g, s)[0].ravel(), run(ref, g, s)[0].ravel()
        rs.append(float(np.corrcoef(logits_q, logits_f)[0, 1]))
    assert min(rs) >= R_MIN, rs


def test_int8_float_ops_stay_float(graphs, tmp_path):
    g = graphs["all_ops"]
    facts = tm.export_torchscript(g, tmp_path / "m.pt", "int8")
    floats = [n.name for n in g.nodes.values()
              if n.op in ("swish", "softmax", "lrn") or (n.op == "batchnorm" and len(n.shape) == 2)]
    assert facts["float_ops"] == floats
    counts = facts["op_counts"]
    assert counts["aten::silu"] == 1 and counts["aten::softmax"] == 1 and counts["aten::batch_norm"] == 1
    assert "aten::_convolution" not in counts and "aten::linear" not in counts


@pytest.mark.parametrize("precision", ["fp32", "int8"])
def test_lite_file_loads_and_runs(graphs, tmp_path, precision):
    from torch.jit.mobile import _load_for_lite_interpreter

    g = graphs["all_ops"]
    facts = tm.export_lite(g, tmp_path / "m.ptl", precision)
    assert facts["format"] == "torchscript-lite"
    torch.backends.quantized.engine = "x86"
    lite = _load_for_lite_interpreter(facts["path"])
    full = tm.load_artifact(tm.export_torchscript(g, tmp_path / "m.pt", precision)["path"], "x86")
    outs = run(lite, g, 5)
    assert [list(o.shape) for o in outs] == facts["output_shapes"]
    for a, b in zip(outs, run(full, g, 5)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_fp16_is_refused_with_one_line(graphs, tmp_path):
    for export in (tm.export_torchscript, tm.export_lite):
        with pytest.raises(tm.ExportError) as e:
            export(graphs["resnet"], tmp_path / "m.pt", precision="fp16")
        msg = str(e.value)
        assert "\n" not in msg and "fp16" in msg and "torchscript" in msg and "NOTES.md" in msg
    assert not list(tmp_path.iterdir())


def test_bad_options_are_one_line_errors(graphs, tmp_path):
    with pytest.raises(tm.ExportError, match="unknown precision 'int4'"):
        tm.export_torchscript(graphs["resnet"], tmp_path / "m.pt", precision="int4")
    with pytest.raises(tm.ExportError, match="unknown quantization engine 'arm'"):
        tm.export_torchscript(graphs["resnet"], tmp_path / "m.pt", precision="int8", engine="arm")


def test_unsupported_operator_names_node_and_format(tmp_path):
    op = "test_only_identity"
    register_op(OpSpec(op, lambda a, ins: [list(ins[0])]))
    try:
        g = Graph(name="unsupported")
        x = g.input([1, 4, 8, 8])
        x = g.add("relu", x)
        g.set_outputs(g.add(op, x, name="mystery"))
        for call, fmt in [
            (lambda: tm.to_module(g), "nn.Module"),
            (lambda: tm.export_torchscript(g, tmp_path / "m.pt"), "torchscript"),
            (lambda: tm.export_lite(g, tmp_path / "m.ptl", "int8"), "torchscript-lite"),
        ]:
            with pytest.raises(tm.ExportError) as e:
                call()
            msg = str(e.value)
            assert "'mystery'" in msg and op in msg and f"({fmt})" in msg and "\n" not in msg
    finally:
        del OPS[op]


def test_profiler_sees_aten_ops(graphs):
    from torch.profiler import ProfilerActivity, profile

    g = graphs["resnet"]
    traced = tm.trace(g)
    x = tm.example_tensors(g)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            traced(*x)
    names = {e.key for e in prof.key_averages()}
    # a traced graph calls aten::_convolution directly (eager modules go through aten::conv2d)
    assert {"aten::_convolution", "aten::batch_norm", "aten::linear", "aten::add", "aten::relu"} <= names
