"""IR -> TFLite exporter: operator counts against the fusion table, parameter rule, I/O
layout, numerics against torch.nn.functional (fp32), fp16 closeness and int8 correlation.

Reference: every operator of the IR evaluated with torch.nn.functional from the same
weights (``export.weights``), so the fp32 TFLite model must compute PyTorch's function.
"""
from __future__ import annotations

import hashlib

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")
torch = pytest.importorskip("torch")
pytest.importorskip("ai_edge_litert")

import torch.nn.functional as F  # noqa: E402

from generators import blocks as B  # noqa: E402
from generators.export import tflite as T  # noqa: E402
from generators.export.weights import example_input, graph_weights  # noqa: E402
from generators.ir import Graph, split_ref  # noqa: E402
from generators.ops import OPS, OpSpec, register_op  # noqa: E402
from generators.export.layout import NHWC, PLAIN, tensor_layouts  # noqa: E402
from support.nets import close, deit_tiny, mbv3ish_logits, vit_tiny  # noqa: E402

#: fp32 TFLite vs torch: max |diff| <= RTOL * max |reference| (per output).
RTOL = 1e-4
#: fp16 weights vs fp32: max |diff| <= FP16_RTOL * max |fp32 output|.
FP16_RTOL = 1e-2
#: int8 vs fp32 on inputs outside the calibration set: Pearson r >= INT8_MIN_CORR and
#: max |diff| <= INT8_RTOL * max |fp32 output| (measured: r >= 0.998, rel <= 0.03).
INT8_MIN_CORR = 0.99
INT8_RTOL = 0.1


# ------------------------------------------------------------------ the torch reference
def torch_forward(graph: Graph, inputs: dict[str, np.ndarray] | None = None) -> list[np.ndarray]:
    weights = graph_weights(graph)
    inputs = inputs if inputs is not None else example_input(graph)
    env: dict[str, list] = {}
    with torch.no_grad():
        for n in graph.nodes.values():
            a = n.attrs
            w = {k: torch.from_numpy(v) for k, v in weights[n.name].items()}
            xs = [env[split_ref(r)[0]][split_ref(r)[1]] for r in n.inputs]
            x = xs[0] if xs else None
            op = n.op
            if op == "input":
                y = torch.from_numpy(inputs[n.name])
            elif op == "conv2d":
                y = F.conv2d(x, w["weight"], w.get("bias"), a["stride"], a["padding"], a["dilation"], a["groups"])
            elif op == "fc":
                y = F.linear(x, w["weight"], w.get("bias"))
            elif op == "batchnorm":
                y = F.batch_norm(x, w["running_mean"], w["running_var"], w["weight"], w["bias"], False, 0.0, a["eps"])
            elif op == "relu":
                y = F.relu(x)
            elif op == "relu6":
                y = F.relu6(x)
            elif op == "hswish":
                y = F.hardswish(x)
            elif op == "hsigmoid":
                y = F.hardsigmoid(x)
            elif op == "sigmoid":
                y = torch.sigmoid(x)
            elif op == "swish":
                y = F.silu(x)
            elif op == "tanh":
                y = torch.tanh(x)
            elif op == "leaky_relu":
                y = F.leaky_relu(x, a["alpha"])
            elif op == "prelu":
                y = F.prelu(x, w["weight"])
            elif op in ("add", "mul"):
                y = xs[0]
                for t in xs[1:]:
                    y = y + t if op == "add" else y * t
            elif op == "avgpool":
                y = F.avg_pool2d(x, a["kernel"], a["stride"], a["padding"], a["ceil_mode"], a["count_include_pad"])
            elif op == "maxpool":
                y = F.max_pool2d(x, a["kernel"], a["stride"], a["padding"], 1, a["ceil_mode"])
            elif op == "global_avgpool":
                y = F.adaptive_avg_pool2d(x, 1)
            elif op == "concat":
                y = torch.cat(xs, a["axis"])
            elif op == "split":
                y = list(torch.split(x, a["sections"], a["axis"]))
            elif op == "channel_shuffle":
                y = F.channel_shuffle(x, a["groups"])
            elif op == "pad":
                t, b, l, r, *channels = a["pads"]
                y = F.pad(x, (l, r, t, b, *channels), value=a["value"])
            elif op == "reshape":
                y = x.reshape(a["shape"])
            elif op == "flatten":
                y = torch.flatten(x, 1)
            elif op == "softmax":
                y = torch.softmax(x, a["axis"])
            elif op == "scale":
                y = x * a["factor"]
            elif op == "shift":
                y = x + a["value"]
            elif op == "clip":
                y = torch.clamp(x, a["min"], a["max"])
            elif op == "crop":
                t, b, l, r = a["crops"]
                y = x[:, :, t : x.shape[2] - b, l : x.shape[3] - r]
            elif op == "upsample":
                y = F.interpolate(x, scale_factor=tuple(float(v) for v in a["scale"]), mode="nearest") \
                    if a["mode"] == "nearest" else \
                    F.interpolate(x, scale_factor=tuple(float(v) for v in a["scale"]), mode="bilinear",
                                  align_corners=a["mode"] == "bilinear_corners")
            elif op == "layernorm":
                y = F.layer_norm(x.movedim(a["axis"], -1), w["weight"].shape, w["weight"], w["bias"], a["eps"])
                y = y.movedim(-1, a["axis"])
            elif op == "gelu":
                y = F.gelu(x, approximate=a["approximate"])
            elif op == "pos_embed":
                y = x + w["weight"]
            elif op == "cls_token":
                y = torch.cat([w["weight"], x], dim=1)
            elif op == "matmul":
                y = torch.matmul(xs[0], xs[1])
            elif op == "transpose":
                y = x.permute(a["perm"])
            elif op == "mean":
                y = x.mean(a["axis"], keepdim=a["keepdim"])
            elif op == "reduce_max":
                y = x.amax(a["axis"], keepdim=a["keepdim"])
            elif op == "reduce_sum":
                y = x.sum(a["axis"], keepdim=a["keepdim"])
            elif op == "instancenorm":
                y = F.instance_norm(x, weight=w["weight"], bias=w["bias"], eps=a["eps"])
            elif op == "resize":
                y = F.interpolate(x, size=tuple(a["size"]), mode="nearest")
            elif op == "lrn":
                y = F.local_response_norm(x, a["size"], a["alpha"], a["beta"], a["bias"])
            elif op == "div":
                y = xs[0] / xs[1]
            elif op == "gather":
                y = torch.index_select(x, a["axis"], torch.tensor(a["indices"]))
            else:
                raise NotImplementedError(f"no torch reference for {op!r}: add it to this test")
            env[n.name] = y if isinstance(y, list) else [y]
    return [env[split_ref(r)[0]][split_ref(r)[1]].numpy() for r in graph.outputs]


# ------------------------------------------------------------------ test graphs
def mbv3ish(size: int = 32) -> Graph:
    """MobileNetV3-like: hswish stem, SE blocks (hsigmoid gate), residual, swish head; softmax."""
    g, y = mbv3ish_logits(size)
    return g.set_outputs(g.add("softmax", y, axis=1)).validate()


def zoo(size: int = 32) -> Graph:
    """Everything else, in contexts that exercise the fusion rules; two outputs."""
    g = Graph("zoo", source="test")
    x = g.input([1, 3, size, size])
    x = B.conv_bn_act(g, x, 16, 3, stride=2, act="prelu")  # PAD + CONV_2D, prelu with one slope
    x = g.add("maxpool", x, kernel=3, stride=2, padding=1)  # even input: MIRROR_PAD
    a, b = g.add_multi("split", x, sections=[8, 8])
    b = B.conv_bn_act(g, b, 8, 1, act="leaky_relu")
    b = B.conv_bn_act(g, b, 8, 3, groups=8, act=None)
    b = B.conv_bn_act(g, b, 8, 1, act="relu")
    x = g.add("concat", [a, b])
    x = g.add("channel_shuffle", x, groups=2)
    x = g.add("conv2d", x, out_channels=24, kernel=3, padding=2, dilation=2, groups=4)  # grouped, dilated
    x = g.add("instancenorm", x)  # IBN-Net's conv + norm: MEAN over H and W ... MUL + ADD per channel
    x = g.add("lrn", x, size=5, alpha=0.5, bias=2.0)  # AlexNet's norm: float in int8, DEQUANTIZE ... QUANTIZE
    x = g.add("gather", x, indices=[23 - k for k in range(24) if k != 5] + [0])  # CondenseNet's: GATHER of the NHWC channels
    x = g.add("prelu", x, num_parameters=24)
    u, v, w = g.add_multi("split", x, sections=[4, 8, 12])
    w = g.add("tanh", w)  # fixed int8 scale into a concat: QUANTIZE
    v = g.add("pad", v, pads=[1, 0, 0, 1], value=0.5)
    v = g.add("avgpool", v, kernel=2, stride=1)
    u = g.add("sigmoid", u)
    x = g.add("concat", [u, v, w])
    s = g.add("conv2d", x, out_channels=24, kernel=1, bias=False)
    s = g.add("hsigmoid", s)  # +3 folds into the bias-less conv: a bias appears
    x = g.add("mul", [x, s])
    x = g.add("batchnorm", x)  # standalone: MUL + ADD, relu6 fused into the ADD
    x = g.add("relu6", x)
    x = g.add("avgpool", x, kernel=3, stride=2, padding=1, ceil_mode=True)  # correction map
    x2 = g.add("avgpool", x, kernel=3, stride=1, padding=1, count_include_pad=False)  # SAME
    x2 = g.add("clip", x2, min=-0.5, max=2.0)
    x = g.add("add", [x, x2, x])
    x = g.add("upsample", x, scale=2)
    x = g.add("add", [x, g.add("resize", g.add("avgpool", x, kernel=3, stride=3), size=g.shape(x)[2:])])  # SCNet
    x = g.add("crop", x, crops=[1, 0, 0, 1])
    x = g.add("scale", x, factor=0.5)
    x = g.add("shift", x, value=-1.0)  # after a MUL: ADD by a scalar
    x = g.add("relu6", g.add("div", [x, g.add("shift", g.add("sigmoid", x), value=0.5)]))  # relu6 fused into DIV
    x = g.add("mul", [x, g.add("sigmoid", g.add("reduce_max", x, axis=1, keepdim=True))])  # CBAM's channel-max map
    _, c, h, w_ = g.shape(x)
    y = g.add("reduce_sum", g.add("reshape", x, shape=[1, 2, c // 2, h, w_]), axis=1)  # split attention's radix sum
    x = g.add("concat", [y, y])
    x = g.add("maxpool", x, kernel=2, stride=2, ceil_mode=True)
    f = g.add("flatten", x)  # 24 x 5 x 5 -> fc: NHWC reshape + permuted fc weights
    f = g.add("fc", f, out_features=16, bias=False)
    f = g.add("batchnorm", f)  # folded into the fc (which gains a bias)
    f = g.add("hswish", f)
    r = g.add("reshape", f, shape=[1, 4, 2, 2])
    out1 = g.add("softmax", r, axis=2)  # adjacent TRANSPOSEs merge
    out2 = g.add("global_avgpool", x)
    out2 = g.add("flatten", out2)
    out2 = g.add("fc", out2, out_features=5)
    return g.set_outputs(out1, out2).validate()


GRAPHS = {"mbv3ish": mbv3ish, "zoo": zoo, "vit": vit_tiny, "deit": deit_tiny}


def _single(name: str, shape: list[int], build) -> Graph:
    g = Graph(name, source="test")
    outs = build(g, g.input(shape))
    return g.set_outputs(*(outs if isinstance(outs, list) else [outs])).validate()


E, O = [1, 8, 12, 10], [1, 8, 11, 9]  # even / odd spatial sizes
#: One small graph per operator variant (padding geometry, layouts, fusion contexts).
SINGLE = {
    "conv_same": (E, lambda g, x: g.add("conv2d", x, out_channels=6, kernel=3, padding=1)),
    "conv_s2_even_pad": (E, lambda g, x: g.add("conv2d", x, out_channels=6, kernel=3, stride=2, padding=1)),
    "conv_s2_odd_same": (O, lambda g, x: g.add("conv2d", x, out_channels=6, kernel=3, stride=2, padding=1)),
    "conv_k5_s2": (O, lambda g, x: g.add("conv2d", x, out_channels=6, kernel=5, stride=2, padding=2)),
    "conv_valid": (E, lambda g, x: g.add("conv2d", x, out_channels=6, kernel=3, bias=False)),
    "conv_1x3": (E, lambda g, x: g.add("conv2d", x, out_channels=6, kernel=[1, 3], padding=[0, 1])),
    "conv_s2_1x1": (O, lambda g, x: g.add("conv2d", x, out_channels=6, kernel=1, stride=2)),
    "conv_dilated": (E, lambda g, x: g.add("conv2d", x, out_channels=6, kernel=3, padding=2, dilation=2)),
    "conv_grouped": (E, lambda g, x: g.add("conv2d", x, out_channels=12, kernel=3, padding=1, groups=2)),
    "conv_dw_mult2": (E, lambda g, x: g.add("conv2d", x, out_channels=16, kernel=3, stride=2, padding=1, groups=8)),
    "conv_bn_relu": (E, lambda g, x: B.conv_bn_act(g, x, 6, 3, act="relu")),
    "fc_flatten_nhwc": (E, lambda g, x: g.add("fc", g.add("flatten", x), out_features=7)),
    "fc_two_readers": (O, lambda g, x: (lambda f: g.add("add", [g.add("fc", f, out_features=5), g.add("fc", f, out_features=5, bias=False)]))(g.add("flatten", x))),
    "flatten_transpose": (E, lambda g, x: g.add("flatten", x)),
    "bn_rank4": (E, lambda g, x: g.add("batchnorm", x, eps=1e-3)),
    "bn_rank2": (E, lambda g, x: g.add("batchnorm", g.add("flatten", g.add("global_avgpool", x)))),
    "relu": (E, lambda g, x: g.add("relu", x)),
    "relu6": (E, lambda g, x: g.add("relu6", x)),
    "hswish": (E, lambda g, x: g.add("hswish", x)),
    "hsigmoid": (E, lambda g, x: g.add("hsigmoid", x)),
    "sigmoid": (E, lambda g, x: g.add("sigmoid", x)),
    "swish": (E, lambda g, x: g.add("swish", x)),
    "tanh": (E, lambda g, x: g.add("tanh", x)),
    "leaky_relu": (E, lambda g, x: g.add("leaky_relu", x, alpha=0.2)),
    "prelu_1": (E, lambda g, x: g.add("prelu", x)),
    "prelu_c": (E, lambda g, x: g.add("prelu", x, num_parameters=8)),
    "prelu_rank2": (E, lambda g, x: g.add("prelu", g.add("flatten", g.add("global_avgpool", x)), num_parameters=8)),
    "add_broadcast": (E, lambda g, x: g.add("add", [x, g.add("global_avgpool", x), g.add("relu", x)])),
    "mul_broadcast": (E, lambda g, x: g.add("mul", [x, g.add("sigmoid", g.add("global_avgpool", x))])),
    "avgpool_valid": (E, lambda g, x: g.add("avgpool", x, kernel=2, stride=2)),
    "avgpool_pad_incl": (E, lambda g, x: g.add("avgpool", x, kernel=3, stride=2, padding=1)),
    "avgpool_pad_excl": (E, lambda g, x: g.add("avgpool", x, kernel=3, stride=2, padding=1, count_include_pad=False)),
    "avgpool_same_excl": (O, lambda g, x: g.add("avgpool", x, kernel=3, stride=1, padding=1, count_include_pad=False)),
    "avgpool_ceil": (O, lambda g, x: g.add("avgpool", x, kernel=3, stride=2, ceil_mode=True)),
    "avgpool_ceil_pad": (E, lambda g, x: g.add("avgpool", x, kernel=3, stride=2, padding=1, ceil_mode=True)),
    "maxpool_mirror": (E, lambda g, x: g.add("maxpool", x, kernel=3, stride=2, padding=1)),
    "maxpool_same": (O, lambda g, x: g.add("maxpool", x, kernel=3, stride=2, padding=1)),
    "maxpool_ceil": (O, lambda g, x: g.add("maxpool", x, kernel=2, stride=2, ceil_mode=True)),
    "maxpool_ceil_wide": (E, lambda g, x: g.add("maxpool", x, kernel=3, stride=2, padding=1, ceil_mode=True)),
    "maxpool_k5": (E, lambda g, x: g.add("maxpool", x, kernel=5, stride=1, padding=2)),
    "maxpool_relu": (E, lambda g, x: g.add("relu", g.add("maxpool", x, kernel=2, stride=2))),
    "global_avgpool": (E, lambda g, x: g.add("global_avgpool", x)),
    "concat_c": (E, lambda g, x: g.add("concat", [x, g.add("relu", x)])),
    "concat_h": (E, lambda g, x: g.add("concat", [x, g.add("relu", x)], axis=2)),
    "concat_one": (E, lambda g, x: g.add("relu", g.add("concat", [x]))),
    "split_equal": (E, lambda g, x: g.add_multi("split", x, sections=[4, 4])),
    "split_unequal_w": (E, lambda g, x: g.add_multi("split", x, sections=[3, 7], axis=3)),
    "split_unread": (E, lambda g, x: g.add_multi("split", x, sections=[2, 4, 2])[1]),
    "channel_shuffle": (E, lambda g, x: g.add("channel_shuffle", x, groups=4)),
    "pad_zero": (E, lambda g, x: g.add("pad", x, pads=[1, 2, 0, 3])),
    "pad_value": (E, lambda g, x: g.add("pad", x, pads=[0, 1, 1, 0], value=-1.5)),
    "pad_channels": (E, lambda g, x: g.add("pad", x, pads=[0, 0, 0, 0, 0, 4])),  # PyramidNet's widened identity
    "pad_channels_hw_value": (E, lambda g, x: g.add("pad", x, pads=[1, 0, 0, 2, 3, 1], value=0.5)),
    "reshape_rank3": (E, lambda g, x: g.add("reshape", x, shape=[1, 8, 120])),
    "reshape_rank4": (E, lambda g, x: g.add("reshape", x, shape=[1, 4, 20, 12])),
    "reshape_to4": (E, lambda g, x: g.add("reshape", g.add("fc", g.add("flatten", x), out_features=24), shape=[1, 6, 2, 2])),
    "softmax_c": (E, lambda g, x: g.add("softmax", x, axis=1)),
    "softmax_w": (E, lambda g, x: g.add("softmax", x, axis=3)),
    "softmax_rank2": (E, lambda g, x: g.add("softmax", g.add("flatten", g.add("global_avgpool", x)))),
    "scale": (E, lambda g, x: g.add("scale", x, factor=-0.25)),
    "shift": (E, lambda g, x: g.add("shift", x, value=0.75)),
    "shift_into_conv": (E, lambda g, x: g.add("shift", g.add("conv2d", x, out_channels=6, kernel=1, bias=False), value=0.5)),
    "scale_into_conv": (E, lambda g, x: g.add("scale", g.add("conv2d", x, out_channels=6, kernel=1, bias=False), factor=0.0)),
    "clip_01": (E, lambda g, x: g.add("clip", x)),
    "clip_relu6": (E, lambda g, x: g.add("clip", g.add("conv2d", x, out_channels=6, kernel=1), min=0, max=6)),
    "clip_n1_1": (E, lambda g, x: g.add("clip", x, min=-1, max=1)),
    "crop": (E, lambda g, x: g.add("crop", x, crops=[0, 2, 1, 1])),
    "upsample": (O, lambda g, x: g.add("upsample", x, scale=[2, 3])),
    "upsample_bilinear": (O, lambda g, x: g.add("upsample", x, scale=2, mode="bilinear")),
    "resize_up": (O, lambda g, x: g.add("resize", g.add("avgpool", x, kernel=4, stride=4), size=[11, 9])),  # SCNet: 2x2 -> 11x9
    "resize_down": (E, lambda g, x: g.add("resize", x, size=[5, 7])),
    "upsample_bilinear_corners": (O, lambda g, x: g.add("upsample", x, scale=[2, 3], mode="bilinear_corners")),
    # transformers: tokens [1, N, C] and attention tensors [1, heads, N, d] are not images
    "tokens": (E, lambda g, x: g.add("transpose", g.add("reshape", x, shape=[1, 8, 120]), perm=[0, 2, 1])),
    "fc_tokens": (E, lambda g, x: g.add("fc", _tokens(g, x), out_features=5)),
    "fc_image_rows": (E, lambda g, x: g.add("fc", x, out_features=4)),  # over W of an image: TRANSPOSE first
    "layernorm_tokens": (E, lambda g, x: g.add("layernorm", _tokens(g, x))),
    "layernorm_into_fc": (E, lambda g, x: g.add("fc", g.add("layernorm", _tokens(g, x), eps=1e-6), out_features=3)),
    "layernorm_channels": (E, lambda g, x: g.add("layernorm", x, axis=1)),  # ConvNeXt: the NHWC last axis
    "layernorm_h": (E, lambda g, x: g.add("layernorm", x, axis=2)),
    "gelu": (E, lambda g, x: g.add("gelu", x)),
    "gelu_tanh": (E, lambda g, x: g.add("gelu", _tokens(g, x), approximate="tanh")),
    "attention_scores": (E, lambda g, x: g.add("softmax", _scores(g, x))),  # a rank-4 output: NHWC, TRANSPOSE last
    "matmul_to_image": (E, lambda g, x: g.add("conv2d", _scores(g, x), out_channels=4, kernel=1)),
    "heads_to_tokens": (E, lambda g, x: g.add("reshape", g.add("transpose", _attend(g, x), perm=[0, 2, 1, 3]), shape=[1, 120, 8])),
    "tokens_to_image": (E, lambda g, x: g.add("conv2d", g.add("reshape", g.add("transpose", g.add("fc", _tokens(g, x), out_features=6), perm=[0, 2, 1]), shape=[1, 6, 12, 10]), out_channels=4, kernel=3, padding=1)),
    "transpose_image": (E, lambda g, x: g.add("transpose", x, perm=[0, 1, 3, 2])),
    "transpose_to_nhwc_order": (E, lambda g, x: g.add("reshape", g.add("transpose", x, perm=[0, 2, 3, 1]), shape=[1, 120, 8])),
    "mean_tokens": (E, lambda g, x: g.add("mean", _tokens(g, x), axis=1)),
    "mean_keepdim_image": (E, lambda g, x: g.add("mean", x, axis=2, keepdim=True)),
    "mean_image_c": (E, lambda g, x: g.add("mean", x, axis=1)),
    "reduce_max_channels_keepdim": (E, lambda g, x: g.add("reduce_max", x, axis=1, keepdim=True)),
    "reduce_max_tokens": (E, lambda g, x: g.add("reduce_max", _tokens(g, x), axis=1)),
    "reduce_sum_radix": (E, lambda g, x: g.add("reduce_sum", g.add("reshape", x, shape=[1, 2, 4, 12, 10]), axis=1)),
    "instancenorm": (E, lambda g, x: g.add("instancenorm", x, eps=1e-3)),
    # imported zoos: AlexNet's local response norm after its conv (relu fused into the conv), a quotient
    "lrn": (E, lambda g, x: g.add("lrn", g.add("relu", g.add("conv2d", x, out_channels=6, kernel=3, padding=1)), size=5,
                                  alpha=0.5, beta=0.75, bias=2.0)),
    "lrn_3": (O, lambda g, x: g.add("lrn", x, size=3)),
    "div": (E, lambda g, x: g.add("div", [x, g.add("shift", g.add("sigmoid", x), value=0.5)])),
    "div_broadcast": (E, lambda g, x: g.add("div", [x, g.add("shift", g.add("sigmoid", g.add("global_avgpool", x)), value=0.5)])),
    # CondenseNet's selected channels: of an image (NHWC's last axis) and of its classifier's input
    "gather_channels": (E, lambda g, x: g.add("conv2d", g.add("gather", x, indices=[7, 7, 0, 3, 5]), out_channels=4, kernel=1)),
    "gather_vector": (E, lambda g, x: g.add("gather", g.add("flatten", g.add("global_avgpool", x)), indices=[1, 1, 6, 0])),
    # learned constant tensors: a position embedding of tokens and of an image (NHWC constant, fused relu)
    "pos_embed_tokens": (E, lambda g, x: g.add("pos_embed", _tokens(g, x))),
    "pos_embed_image_relu": (E, lambda g, x: g.add("relu", g.add("pos_embed", x))),
    "cls_token": (E, lambda g, x: g.add("cls_token", _tokens(g, x))),
    "cls_token_after_sigmoid": (E, lambda g, x: g.add("cls_token", g.add("sigmoid", _tokens(g, x)))),  # int8: QUANTIZE
    "add_mixed_layouts": (E, lambda g, x: g.add("transpose", g.add("add", [g.add("reshape", _heads(g, x, [0, 2, 1, 3]), shape=[1, 8, 12, 10]), x]), perm=[0, 1, 3, 2])),
    # one attention head: q's transpose moves a unit axis (a RESHAPE, merged with q's), k's does not
    "one_head": (E, lambda g, x: g.add("reshape", g.add("matmul", [_one_head(g, _tokens(g, x), [0, 2, 1, 3]), _one_head(g, g.add("gelu", _tokens(g, x)), [0, 2, 3, 1])]), shape=[1, 120, 120])),
    # a transpose of the last two axes read only by a matmul is BATCH_MATMUL's adj_x / adj_y
    "matmul_adjoint": (E, lambda g, x: (lambda a: g.add("matmul", [g.add("transpose", a, perm=[0, 2, 1]), a]))(g.add("fc", _tokens(g, x), out_features=6))),
    # grouped tokens [1, G, N, C] (MobileViT): the residual add reads the fc's rank-4 result in plain order
    "grouped_residual": (E, lambda g, x: (lambda t: g.add("mean", g.add("add", [t, g.add("fc", t, out_features=8)]), axis=2))(B.unfold(g, x, 2))),
}


def _one_head(g: Graph, t: str, perm: list[int]) -> str:
    """Tokens [1, N, C] as one attention head [1, N, 1, C] permuted by ``perm``."""
    return g.add("transpose", g.add("reshape", t, shape=[1, g.shape(t)[1], 1, g.shape(t)[2]]), perm=perm)


def _tokens(g: Graph, x: str) -> str:
    """[1, C, H, W] -> tokens [1, H*W, C] (ViT's flatten(2).transpose(1, 2))."""
    _, c, h, w = g.shape(x)
    return g.add("transpose", g.add("reshape", x, shape=[1, c, h * w]), perm=[0, 2, 1])


def _heads(g: Graph, x: str, perm: list[int]) -> str:
    """[1, 8, H, W] -> tokens -> [1, N, 2, 4] permuted by ``perm`` (attention's heads)."""
    t = _tokens(g, x)
    return g.add("transpose", g.add("reshape", t, shape=[1, g.shape(t)[1], 2, 4]), perm=perm)


def _scores(g: Graph, x: str) -> str:
    """q k^T of two heads of ``x``'s tokens: [1, 2, N, N]."""
    return g.add("matmul", [_heads(g, x, [0, 2, 1, 3]), _heads(g, x, [0, 2, 3, 1])])


def _attend(g: Graph, x: str) -> str:
    """softmax(q k^T) v over two heads of ``x``'s tokens: [1, 2, N, 4]."""
    return g.add("matmul", [g.add("softmax", _scores(g, x)), _heads(g, x, [0, 2, 1, 3])])


def _graph_ops(g: Graph) -> set[str]:
    return {n.op for n in g.nodes.values()}


# ------------------------------------------------------------------ fixtures
@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """(graph name, precision) -> (graph, facts); one conversion each."""
    out = tmp_path_factory.mktemp("tflite")
    res = {}
    for name, build in GRAPHS.items():
        g = build()
        for prec in T.PRECISIONS:
            res[name, prec] = (g, T.export_tflite(g, out / f"{name}.{prec}.tflite", prec))
    return res


@pytest.fixture(scope="module")
def fp32_outputs(exported):
    """graph name -> fp32 TFLite outputs on three inputs outside the calibration set."""
    return {
        name: [T.run_tflite(exported[name, "fp32"][1]["path"], g, example_input(g, sample=100 + k)) for k in range(3)]
        for name, g in ((n, exported[n, "fp32"][0]) for n in GRAPHS)
    }


# ------------------------------------------------------------------ coverage
def test_every_operator_is_covered_and_in_the_fusion_table():
    whole = set().union(*(_graph_ops(b()) for b in GRAPHS.values()))
    assert set(OPS) - whole == set(), "operators missing from the whole test graphs"
    single = set().union(*(_graph_ops(_single(k, s, f)) for k, (s, f) in SINGLE.items()))
    assert set(OPS) - single == {"input"} - single, "operators without a single-operator case"
    assert set(OPS) <= set(T.TFLITE_FUSIONS), "operators missing from TFLITE_FUSIONS"


# ------------------------------------------------------------------ whole graphs, all precisions
@pytest.mark.parametrize("prec", T.PRECISIONS)
@pytest.mark.parametrize("name", GRAPHS)
def test_op_counts_follow_the_fusion_table(exported, name, prec):
    g, facts = exported[name, prec]
    assert facts["op_counts"] == T.expected_op_counts(g, prec)
    assert facts["ops"] == sum(facts["op_counts"].values())


@pytest.mark.parametrize("prec", T.PRECISIONS)
@pytest.mark.parametrize("name", GRAPHS)
def test_parameter_count_rule(exported, name, prec):
    g, facts = exported[name, prec]
    assert facts["params"] == T.expected_params(g, prec)
    assert facts["params"] != g.params  # the rule is not trivial here: folding changes it


@pytest.mark.parametrize("prec", T.PRECISIONS)
@pytest.mark.parametrize("name", GRAPHS)
def test_facts_and_nhwc_io(exported, name, prec):
    g, facts = exported[name, prec]
    assert facts["format"] == "tflite" and facts["precision"] == prec and facts["model_id"] == g.model_id
    assert facts["converter"]["tensorflow"] == tf.__version__ and facts["seconds"] > 0
    assert facts["tensors"] > facts["ops"]
    dtype = "int8" if prec == "int8" else "float32"
    [inp] = facts["inputs"]
    c, h, w = g.input_nodes[0].shape[1:]
    assert inp["shape"] == [1, h, w, c] and inp["dtype"] == dtype and inp["ir_name"] == "input"
    assert [o["shape"] for o in facts["outputs"]] == [T._tf_shape(g.tensor_shape(r)) for r in g.outputs]
    assert all(o["dtype"] == dtype for o in facts["outputs"])
    assert [o["ir_name"] for o in facts["outputs"]] == g.outputs


@pytest.mark.parametrize("name", GRAPHS)
def test_fp32_matches_torch(exported, fp32_outputs, name):
    g = exported[name, "fp32"][0]
    for k in range(3):
        close(fp32_outputs[name][k], torch_forward(g, example_input(g, sample=100 + k)), f"{name} fp32 vs torch", RTOL)


@pytest.mark.parametrize("name", GRAPHS)
def test_fp16_is_close_to_fp32(exported, fp32_outputs, name):
    g, facts = exported[name, "fp16"]
    for k in range(3):
        got = T.run_tflite(facts["path"], g, example_input(g, sample=100 + k))
        close(got, fp32_outputs[name][k], f"{name} fp16 vs fp32", FP16_RTOL)


@pytest.mark.parametrize("name", GRAPHS)
def test_int8_correlates_with_fp32(exported, fp32_outputs, name):
    g, facts = exported[name, "int8"]
    for k in range(3):
        got = T.run_tflite(facts["path"], g, example_input(g, sample=100 + k))
        for j, (a, r) in enumerate(zip(got, fp32_outputs[name][k])):
            corr = np.corrcoef(a.ravel(), r.ravel())[0, 1]
            assert corr >= INT8_MIN_CORR, f"{name} int8 output {j}: r = {corr:.4f}"
        close(got, fp32_outputs[name][k], f"{name} int8 vs fp32", INT8_RTOL)


# ------------------------------------------------------------------ one operator at a time
@pytest.mark.parametrize("case", SINGLE)
def test_single_operator_matches_torch_and_table(case):
    shape, build = SINGLE[case]
    g = _single(case, shape, build)
    blob = T.convert(g, "fp32")
    facts = T.inspect_tflite(blob)
    assert facts["op_counts"] == T.expected_op_counts(g, "fp32")
    assert facts["params"] == T.expected_params(g, "fp32")
    close(T.run_tflite(blob, g), torch_forward(g), f"{case} fp32 vs torch", RTOL)


@pytest.mark.parametrize("case", ["conv_valid", "conv_s2_even_pad", "maxpool_mirror", "hsigmoid", "split_unread", "concat_h", "scale_into_conv", "clip_01",
                                  "layernorm_channels", "layernorm_into_fc", "gelu", "attention_scores", "matmul_to_image", "mean_tokens",
                                  "pos_embed_tokens", "pos_embed_image_relu", "cls_token", "cls_token_after_sigmoid"])
@pytest.mark.parametrize("prec", ["fp16", "int8"])
def test_single_operator_counts_other_precisions(case, prec):
    shape, build = SINGLE[case]
    g = _single(case, shape, build)
    facts = T.inspect_tflite(T.convert(g, prec))
    assert facts["op_counts"] == T.expected_op_counts(g, prec)
    assert facts["params"] == T.expected_params(g, prec)


def test_learned_constants_are_constant_operands_counted_as_parameters():
    g = _single("pos_embed_image_relu", *SINGLE["pos_embed_image_relu"])
    facts = T.inspect_tflite(T.convert(g, "fp32"))
    assert facts["op_counts"] == {"ADD": 1}  # the relu is fused into the ADD of the NHWC constant
    assert facts["params"] == g.params == 8 * 12 * 10
    g = _single("cls_token", *SINGLE["cls_token"])
    facts = T.inspect_tflite(T.convert(g, "int8"))
    assert facts["op_counts"] == {"CONCATENATION": 1, "RESHAPE": 1, "TRANSPOSE": 2} and facts["params"] == g.params == 8
    g = _single("cls_token_after_sigmoid", *SINGLE["cls_token_after_sigmoid"])
    assert T.expected_op_counts(g, "int8")["QUANTIZE"] == 1  # the token takes the concatenation's scale


def test_int8_requantizes_fixed_scale_outputs_into_concat():
    g = _single("sig_concat", E, lambda g, x: g.add("concat", [g.add("sigmoid", x), g.add("conv2d", x, out_channels=4, kernel=1)]))
    assert T.expected_op_counts(g, "int8")["QUANTIZE"] == 1
    assert T.inspect_tflite(T.convert(g, "int8"))["op_counts"] == T.expected_op_counts(g, "int8")


# ------------------------------------------------------------------ files, determinism, errors
def test_reexport_is_byte_identical():
    g = _single("det", E, lambda g, x: g.add("concat", [g.add_multi("split", g.add("sigmoid", x), sections=[2, 4, 2])[0], g.add("conv2d", x, out_channels=4, kernel=1)]))
    for prec in T.PRECISIONS:
        digests = {hashlib.sha256(T.convert(g, prec)).hexdigest() for _ in range(3)}
        assert len(digests) == 1, prec


def test_atomic_write_leaves_only_the_file(tmp_path):
    g = _single("small", E, lambda g, x: g.add("relu", x))
    path = tmp_path / "sub" / "m.tflite"
    facts = T.export_tflite(g, path)
    assert facts["path"] == str(path) and path.read_bytes()[4:8] == b"TFL3"
    assert sorted(p.name for p in path.parent.iterdir()) == ["m.tflite"]
    assert facts["size_bytes"] == path.stat().st_size


@pytest.fixture
def unsupported_op():
    name = "x_test_unsupported"
    register_op(OpSpec(name, lambda a, i: [list(i[0])]))
    yield name
    del OPS[name]


def test_unsupported_operator_is_a_one_line_error(unsupported_op, tmp_path):
    g = _single("bad", E, lambda g, x: g.add(unsupported_op, g.add("relu", x), name="odd_node"))
    with pytest.raises(T.TFLiteExportError) as e:
        T.export_tflite(g, tmp_path / "bad.tflite")
    msg = str(e.value)
    assert "odd_node" in msg and unsupported_op in msg and "tflite" in msg and "\n" not in msg
    assert not any(tmp_path.iterdir())


def test_bad_prelu_and_precision_errors(tmp_path):
    # a prelu whose slope count is neither 1 nor the channels never becomes a graph: the op
    # registry's attribute schema refuses it, naming the node (before, the exporter did)
    from generators.ir import IRError

    with pytest.raises(IRError, match="'p3'.*num_parameters must be 1 or the 8 input channels, got 3"):
        _single("prelu3", E, lambda g, x: g.add("prelu", x, num_parameters=3, name="p3"))
    with pytest.raises(T.TFLiteExportError, match="unknown precision 'int4'"):
        T.export_tflite(_single("ok", E, lambda g, x: g.add("relu", x)), tmp_path / "x.tflite", "int4")


def test_even_lrn_is_a_one_line_error(tmp_path):
    g = _single("lrn4", E, lambda g, x: g.add("lrn", x, size=4, name="norm1"))
    with pytest.raises(T.TFLiteExportError, match=r"^node 'norm1' \(lrn\): size 4 is even: TFLite's "
                                                  r"LOCAL_RESPONSE_NORMALIZATION sums an odd window .* \[format tflite\]$"):
        T.export_tflite(g, tmp_path / "lrn4.tflite")
    assert not any(tmp_path.iterdir())


# NAS-Bench-201 cells exposed two converter rewrites the expectations must model: shared
# ReLUs / average pools of one node (11617, 3301) and a partial sum of an n-ary add that
# another node computes too (13027).
@pytest.mark.parametrize("index", [11617, 3301, 13027])
def test_converter_common_subexpressions_are_expected(index, tmp_path):
    from generators.nasbench201 import build

    g = build(index)
    for precision in ("fp32", "int8"):
        facts = T.export_tflite(g, tmp_path / f"{precision}.tflite", precision=precision)
        assert facts["op_counts"] == T.expected_op_counts(g, precision)
        assert facts["params"] == T.expected_params(g, precision)


# ------------------------------------------------------------------ the layout rule (export.layout)
def test_layout_rule_keeps_tokens_and_attention_tensors_in_ir_order():
    g = vit_tiny()
    lay = tensor_layouts(g)
    by_op = {}
    for n in g.nodes.values():
        by_op.setdefault(n.op, set()).add((len(n.shape), lay[n.name]))
    assert by_op["input"] == by_op["conv2d"] == {(4, NHWC)}
    assert by_op["transpose"] == {(3, PLAIN), (4, PLAIN)} and by_op["matmul"] == {(4, PLAIN)}
    assert by_op["softmax"] == {(4, PLAIN)} and by_op["layernorm"] == {(3, PLAIN)}
    # the patch embedding's conv output is an image: its reshape to [1, C, N] transposes to NCHW first
    plans = T.plan_graph(g)
    assert [plans[n].ops for n in g.nodes if g.nodes[n].op == "reshape"][0] == ["TRANSPOSE", "RESHAPE"]
    # attention's head transposes are plain TRANSPOSEs by the IR's permutation
    assert {tuple(plans[n].lead_perm) for n in g.nodes if g.nodes[n].op == "transpose"} == {(0, 2, 1), (0, 2, 1, 3), (0, 2, 3, 1)}


@pytest.mark.parametrize("case,layouts,ops", [
    # a rank-4 matmul result is plain; as a graph output or a conv input it becomes an image by one TRANSPOSE
    ("attention_scores", {"transpose": PLAIN, "matmul": NHWC, "softmax": NHWC}, {"matmul": ["BATCH_MATMUL", "TRANSPOSE"]}),
    ("matmul_to_image", {"matmul": NHWC, "conv2d": NHWC}, {"matmul": ["BATCH_MATMUL", "TRANSPOSE"]}),
    # a reshape of tokens to [1, C, H, W] read by a conv is an image
    ("tokens_to_image", {"reshape": NHWC}, {"conv2d": ["CONV_2D"]}),
    # a layout-keeping op reads its other inputs in its first input's layout
    ("add_mixed_layouts", {"add": PLAIN}, {"add": ["TRANSPOSE", "ADD"]}),
    # an image's permutation to NHWC order is no op at all in TFLite
    ("transpose_to_nhwc_order", {"transpose": PLAIN}, {"transpose": []}),
    ("fc_image_rows", {"fc": NHWC}, {"fc": ["TRANSPOSE", "FULLY_CONNECTED", "TRANSPOSE"]}),
    # a later input of a layout-keeping op is read in that op's layout: no TRANSPOSE after the fc
    ("grouped_residual", {"fc": PLAIN, "add": PLAIN}, {"fc": ["FULLY_CONNECTED"], "add": ["ADD"]}),
])
def test_layout_of_each_tensor_and_its_transposes(case, layouts, ops):
    shape, build = SINGLE[case]
    g = _single(case, shape, build)
    lay, plans = tensor_layouts(g), T.plan_graph(g)
    last = {}
    for n in g.nodes.values():
        last[n.op] = n.name
    assert {op: lay[last[op]] for op in layouts} == layouts
    assert {op: plans[last[op]].ops for op in ops} == ops


def test_converter_rewrites_of_attention_transposes():
    """The plan's rewrites of attention's layout ops (the counts are checked against the converter
    by the SINGLE cases): one head's q transpose is a RESHAPE merged into q's reshape, k's stays a
    TRANSPOSE; a last-two-axes transpose into a matmul vanishes."""
    g = T.merge_common_subexpressions(_single("one_head", *SINGLE["one_head"]))
    plans = T.plan_graph(g)
    per_node = T._expected_ops(g, plans, "fp32")
    heads = [n for n in g.nodes.values() if n.op == "transpose" and len(n.shape) == 4]
    assert [plans[n.name].kind for n in heads] == ["reshape", "transpose"]
    assert [per_node[n.name] for n in heads] == [[], ["TRANSPOSE"]]  # q's RESHAPE merged into the reshape before it
    assert T.expected_op_counts(g)["RESHAPE"] == 4  # the tokens' (shared), one per head, the result's
    g = _single("matmul_adjoint", *SINGLE["matmul_adjoint"])
    counts = T.expected_op_counts(g)
    assert counts["TRANSPOSE"] == 2 and counts["BATCH_MATMUL"] == 1  # the tokens' two; none for the matmul
