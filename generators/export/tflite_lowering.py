"""The TFLite lowering table: one registered entry per IR operator.

An entry says, for one operator, everything the TFLite exporter knows about it:

- ``plan(site, pl)``: how a node lowers, decided from the node and its neighbours (the TFLite
  builtin operators it ends up as after the converter's fusions, folds into its producer,
  padding mode...), written into the node's :class:`Plan`;
- ``build(tf, graph, node, pl, xs, weights, scalar)``: the raw TF ops computing it in NHWC;
- ``fusion``: the sentence of ``TFLITE_FUSIONS`` saying what the converter makes of it;
- ``int8_scale``: whether its int8 output has a fixed scale (LOGISTIC, TANH, SOFTMAX), keeps its
  input's (layout-only ops) or gets its own, which predicts the converter's requantizations;
- ``chained``: an n-ary op lowered as a left-to-right chain of binary ops (CSE sees partial sums).

Adding an operator to the TFLite exporter is one ``register_lowering`` call (see
docs/operators.md); :func:`elementwise` is the short form for a one-input op that becomes a
fixed list of builtins. The exporter (``tflite.py``) only walks the graph and asks this table.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from ..ir import Graph, Node, split_ref
from .layout import (NHWC, PLAIN, TO_NCHW, TO_NHWC, computes_plain, framework_axis, framework_perm, input_layouts,
                     ir_to_framework, tensor_layouts)


class TFLiteExportError(ValueError):
    """The IR cannot be expressed as TFLite; the message names the node."""


def lowering_error(node: Node, msg: str) -> TFLiteExportError:
    return TFLiteExportError(f"node {node.name!r} ({node.op}): {msg} [format tflite]")


#: TFLite ops that take a fused RELU/RELU6 from a following activation (measured).
FUSES_ACTIVATION = {"CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "ADD", "MUL", "DIV", "MAX_POOL_2D",
                    "AVERAGE_POOL_2D"}
HAS_BIAS = {"CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED"}
#: clip ranges the converter turns into a (fusable) TFLite activation.
CLIP_ACTIVATIONS = {(0.0, 6.0): "RELU6", (-1.0, 1.0): "RELU_N1_TO_1"}


# =====================================================================================
# Plans and the geometry helpers they share with the builders
# =====================================================================================
def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


@dataclass
class Pads:
    mode: str  # "VALID", "SAME" or "PAD" (explicit pads + VALID)
    pads: list[int]  # top, bottom, left, right (for "PAD")
    valid_ok: bool = False
    same_ok: bool = False


def spatial_mode(node: Node, in_shape: list[int], out_shape: list[int], dilation: list[int]) -> Pads:
    """VALID / SAME where TF's rule gives PyTorch's windows, else explicit pads (PAD)."""
    a = node.attrs
    dims = []
    for i in range(2):
        eff = dilation[i] * (a["kernel"][i] - 1) + 1
        size, s, p, out = in_shape[2 + i], a["stride"][i], a["padding"][i], out_shape[2 + i]
        after = max((out - 1) * s + eff - size - p, 0)
        valid = p == 0 and size >= eff and (size - eff) // s + 1 == out
        same_out = _ceil_div(size, s)
        same_total = max((same_out - 1) * s + eff - size, 0)
        same = same_out == out and same_total // 2 == p
        dims.append((valid, same, p, after))
    valid_ok = all(d[0] for d in dims)
    same_ok = all(d[1] for d in dims)
    pads = [dims[0][2], dims[0][3], dims[1][2], dims[1][3]]
    mode = "VALID" if valid_ok else ("SAME" if same_ok else "PAD")
    return Pads(mode, pads, valid_ok, same_ok)


def avgpool_divisor_map(node: Node, in_shape: list[int], out_shape: list[int]) -> np.ndarray:
    """PyTorch's per-output-position divisor of avg_pool2d (count_include_pad, ceil_mode)."""
    a = node.attrs
    per_dim = []
    for i in range(2):
        size, k, s, p, out = in_shape[2 + i], a["kernel"][i], a["stride"][i], a["padding"][i], out_shape[2 + i]
        div = []
        for o in range(out):
            start = o * s - p
            end = min(start + k, size + p)
            if a["count_include_pad"]:
                div.append(end - start)
            else:
                div.append(min(end, size) - max(start, 0))
        per_dim.append(np.array(div, dtype=np.float64))
    return np.outer(per_dim[0], per_dim[1])


@dataclass
class Plan:
    """How one node lowers. ``ops`` are the TFLite ops it becomes after converter fusions."""

    kind: str = ""
    ops: list[str] = field(default_factory=list)
    fold_bn: str | None = None  # conv/fc: name of the batch norm folded into it
    folded_into: str | None = None  # batchnorm: name of the conv/fc it is folded into
    affine_into: str | None = None  # layernorm: the fc its gain and shift fold into
    pads: Pads | None = None
    correction: np.ndarray | None = None  # avgpool: multiplier map [OH, OW] (or None)
    mirror_steps: list[list[int]] = field(default_factory=list)  # maxpool: SYMMETRIC pads
    used_outputs: list[int] = field(default_factory=list)  # split lowered as slices
    fc_perm: np.ndarray | None = None  # fc: input-column permutation (NHWC flatten)
    flatten_mode: str = ""  # "plain", "nhwc" (readers permute) or "transpose"
    transpose_in: bool = False  # reshape/flatten: to NCHW before
    transpose_out: bool = False  # reshape: to NHWC after
    lead_perm: list[int] | None = None  # permutation of a leading TRANSPOSE
    trail_perm: list[int] | None = None  # permutation of a trailing TRANSPOSE
    tail: str | None = None  # TFLite op producing the node's output (fusion decisions)
    tail_fusable: bool = False  # that op can still take a fused activation
    has_bias: bool = True  # conv/fc: has a (nonzero) bias after lowering (folding adds one)
    zero_bias: int = 0  # conv: length of the zero bias the converter gives a bias-less conv
    layer: str | None = None  # the conv/fc whose output this node's tail is (fold targets)
    float_consts: list[Any] = field(default_factory=list)  # keys of distinct float constants
    extra_params: int = 0  # parameter elements beyond graph.params (rule in expected_params)
    layout: str = PLAIN  # the layout of the node's outputs (export.layout)
    in_layouts: list[str] = field(default_factory=list)  # the layouts its inputs come in
    read_layouts: list[str] = field(default_factory=list)  # the layouts its builder reads them in
    convert_in: list[list[int] | None] = field(default_factory=list)  # TRANSPOSE per input (or None)
    convert_out: list[int] | None = None  # TRANSPOSE of its result into ``layout``


def nchw_order_is_nhwc_order(shape: list[int]) -> bool:
    return len(shape) == 4 and (shape[1] == 1 or shape[2] * shape[3] == 1)


def tf_shape(shape: list[int]) -> list[int]:
    """An IR shape at the model's inputs and outputs (NHWC for rank 4)."""
    return ir_to_framework(shape, NHWC if len(shape) == 4 else PLAIN)


def tf_axis(axis: int, rank: int, layout: str) -> int:
    return framework_axis(axis, rank, layout)


@dataclass
class Site:
    """A node being planned, with what planning needs of its surroundings."""

    graph: Graph
    node: Node
    readers: dict[str, list[str]]  # node -> names of the nodes reading it
    outputs: set[str]  # names of the nodes that are graph outputs
    plans: dict[str, Plan]  # the plans of the nodes before this one

    @property
    def a(self) -> dict:
        return self.node.attrs

    @property
    def ins(self) -> list[list[int]]:
        return self.graph.input_shapes(self.node)

    @property
    def out(self) -> list[int]:
        return self.node.shapes[0]

    @property
    def src(self) -> str | None:
        """The producer of the first input."""
        return split_ref(self.node.inputs[0])[0] if self.node.inputs else None

    @property
    def prev(self) -> Plan | None:
        """The producer's plan."""
        src = self.src
        return self.plans.get(src) if src else None

    def sole_reader(self) -> bool:
        """This node is the only reader of its producer, which is not a graph output."""
        src = self.src
        return self.readers[src] == [self.node.name] and src not in self.outputs

    def folds_into_producer(self, tails: set[str]) -> bool:
        """The producer's last op is one of ``tails``, can take a fused activation and only this node reads it."""
        prev = self.prev
        return prev is not None and prev.tail_fusable and self.sole_reader() and prev.tail in tails


# =====================================================================================
# The registry
# =====================================================================================
Builder = Callable[..., list]  # (tf, graph, node, plan, inputs, weights, scalar) -> output tensors


@dataclass(frozen=True)
class TFLiteLowering:
    op: str
    plan: Callable[[Site, Plan], None]
    build: Builder | None  # None: the node computes nothing (the graph input)
    fusion: str
    # The plan sets ``tail``/``tail_fusable`` itself (ops that fold into or fuse with their
    # neighbours); otherwise the tail is its last op and takes no fused activation.
    sets_tail: bool = False
    int8_scale: Callable[[Plan], str] = lambda pl: "own"  # "fixed", "input" or "own"
    chained: bool = False
    # LiteRT has no int8 kernel for it: the int8 converter leaves it in float, between a
    # DEQUANTIZE and a QUANTIZE (one pair around a run of such operators)
    int8_float: bool = False


#: IR operator -> its TFLite lowering (:func:`register_lowering` adds one): the exporter's
#: registry, as ``torch_module.TORCH_OPS`` and ``nnmeter_ir.NNMETER_OPS`` are the others'.
TFLITE_LOWERINGS: dict[str, TFLiteLowering] = {}
#: IR operator (and cross-node / per-precision rule) -> the TFLite builtin operators of the
#: converted model, measured on TF 2.21's MLIR converter with these lowerings. "P" is the
#: node's producer when this node is its sole reader and it is not a graph output.
TFLITE_FUSIONS: dict[str, str] = {}


def register_lowering(lowering: TFLiteLowering) -> TFLiteLowering:
    if lowering.op in TFLITE_LOWERINGS:
        raise ValueError(f"TFLite lowering of {lowering.op!r} registered twice")
    TFLITE_LOWERINGS[lowering.op] = lowering
    TFLITE_FUSIONS[lowering.op] = lowering.fusion
    return lowering


def lowering(node: Node) -> TFLiteLowering:
    try:
        return TFLITE_LOWERINGS[node.op]
    except KeyError:
        raise lowering_error(node, "operator not supported by the TFLite exporter") from None


def _ops(*names: str) -> Callable[[Site, Plan], None]:
    def plan(s: Site, pl: Plan) -> None:
        pl.ops = list(names)
    return plan


def unary(f: Callable) -> Builder:
    """A builder from ``f(tf, x, node, scalar)`` of a one-input op."""
    return lambda tf, graph, node, pl, xs, weights, scalar: [f(tf, xs[0], node, scalar)]


def elementwise(op: str, tflite_ops: list[str], f: Callable, fusion: str | None = None, int8_scale: str = "own") -> TFLiteLowering:
    """Register a one-input op computed by ``f(tf, x, node, scalar)`` that converts to ``tflite_ops``."""
    return register_lowering(TFLiteLowering(
        op, _ops(*tflite_ops), unary(f), fusion or " + ".join(tflite_ops), int8_scale=lambda pl: int8_scale,
    ))


def plan_graph(graph: Graph) -> dict[str, Plan]:
    """Decide the lowering of every node; raise TFLiteExportError for what TFLite cannot do."""
    readers = graph.consumers()
    outputs = {split_ref(r)[0] for r in graph.outputs}
    layouts = tensor_layouts(graph)
    plans: dict[str, Plan] = {}
    for node in graph.nodes.values():
        entry = lowering(node)
        pl = Plan(kind=node.op, layout=layouts[node.name])
        _plan_layouts(graph, node, layouts, pl)
        entry.plan(Site(graph, node, readers, outputs, plans), pl)
        if not entry.sets_tail:
            pl.tail, pl.tail_fusable = (pl.ops[-1] if pl.ops else None), False
        _add_conversions(pl)
        plans[node.name] = pl
    return plans


def _plan_layouts(graph: Graph, node: Node, layouts: dict[str, str], pl: Plan) -> None:
    """The layouts the node's inputs come in and are read in, and the transposes between."""
    pl.in_layouts = [layouts[split_ref(r)[0]] for r in node.inputs]
    need = input_layouts(node, layouts, graph)
    pl.read_layouts = [want or have for want, have in zip(need, pl.in_layouts)]
    pl.convert_in = [None if want is None or want == have else (TO_NCHW if have == NHWC else TO_NHWC)
                     for want, have in zip(need, pl.in_layouts)]
    pl.convert_out = TO_NHWC if computes_plain(node) and pl.layout == NHWC else None


def _add_conversions(pl: Plan) -> None:
    """Count the layout transposes around the node's own ops."""
    pl.ops = ["TRANSPOSE"] * sum(p is not None for p in pl.convert_in) + pl.ops
    if pl.convert_in and pl.convert_in[0] is not None:
        pl.lead_perm = pl.convert_in[0]
    if pl.convert_out is not None:
        pl.ops.append("TRANSPOSE")
        pl.trail_perm = pl.convert_out
        pl.tail, pl.tail_fusable = "TRANSPOSE", False


def build_node(tf, graph: Graph, node: Node, pl: Plan, xs: list, weights: dict, scalar) -> list:
    """The node's output tensors, with its layout transposes."""
    xs = [x if p is None else tf.transpose(x, p) for x, p in zip(xs, pl.convert_in)]
    ys = TFLITE_LOWERINGS[node.op].build(tf, graph, node, pl, xs, weights, scalar)
    return ys if pl.convert_out is None else [tf.transpose(y, pl.convert_out) for y in ys]


# =====================================================================================
# Shared builder helpers
# =====================================================================================
def fold_bn(w: np.ndarray, b: np.ndarray | None, bn: dict[str, np.ndarray], eps: float) -> tuple[np.ndarray, np.ndarray]:
    """Fold eval-mode batch norm into a layer with output channels on axis 0 (float64)."""
    scale = bn["weight"].astype(np.float64) / np.sqrt(bn["running_var"].astype(np.float64) + eps)
    w = w.astype(np.float64) * scale.reshape((-1,) + (1,) * (w.ndim - 1))
    b0 = b.astype(np.float64) if b is not None else 0.0
    b = (b0 - bn["running_mean"]) * scale + bn["bias"]
    return w.astype(np.float32), b.astype(np.float32)


def conv_pads_tf(pads: list[int]) -> list[list[int]]:
    t, b, l, r = pads
    return [[0, 0], [t, b], [l, r], [0, 0]]


def _channel_shape(rank: int, c: int, layout: str) -> list[int]:
    """Shape of a per-channel (IR axis 1) constant broadcasting over a TF tensor of this rank."""
    return [c] if rank == 2 or layout == NHWC else [c] + [1] * (rank - 2)


def _folding_bn(s: Site) -> str | None:
    """The batch norm that is the only reader of this conv/fc (folded into its weights)."""
    bn = s.readers[s.node.name]
    if len(bn) == 1 and s.node.name not in s.outputs and s.graph.nodes[bn[0]].op == "batchnorm":
        return bn[0]
    return None


# =====================================================================================
# The operators
# =====================================================================================
register_lowering(TFLiteLowering("input", lambda s, pl: None, None, "nothing"))


# ---------------------------------------------------------------- conv2d
def _plan_conv(s: Site, pl: Plan) -> None:
    a, out = s.a, s.out
    cin, g = s.ins[0][1], a["groups"]
    pl.kind = "depthwise" if g == cin and cin > 1 else ("grouped" if g > 1 else "conv")
    pl.pads = spatial_mode(s.node, s.ins[0], out, a["dilation"])
    pl.ops = (["PAD"] if pl.pads.mode == "PAD" else []) + ["DEPTHWISE_CONV_2D" if pl.kind == "depthwise" else "CONV_2D"]
    pl.fold_bn = _folding_bn(s)
    pl.has_bias = a["bias"] or pl.fold_bn is not None
    pl.float_consts = [("w", s.node.name)] + ([("b", s.node.name)] if pl.has_bias else [])
    pl.extra_params = out[1] if (pl.fold_bn and not a["bias"]) else 0
    # TF's Conv2D becomes a CONV_2D with a zero bias when it has none.
    pl.zero_bias = 0 if pl.has_bias else out[1]
    pl.layer = s.node.name
    pl.tail, pl.tail_fusable = pl.ops[-1], True


def _build_conv(tf, graph, node, pl, xs, weights, scalar):
    a = node.attrs
    w = weights[node.name]["weight"]
    b = weights[node.name].get("bias")
    if pl.fold_bn:
        bn_node = graph.nodes[pl.fold_bn]
        w, b = fold_bn(w, b, weights[pl.fold_bn], bn_node.attrs["eps"])
    x = xs[0]
    padding = pl.pads.mode
    if padding == "PAD":
        x = tf.pad(x, conv_pads_tf(pl.pads.pads))
        padding = "VALID"
    strides = [1, a["stride"][0], a["stride"][1], 1]
    dil = [1, a["dilation"][0], a["dilation"][1], 1]
    if pl.kind == "depthwise":
        cin = graph.tensor_shape(node.inputs[0])[1]
        m = a["out_channels"] // cin
        wt = w.reshape(cin, m, *w.shape[2:]).transpose(2, 3, 0, 1)  # [kh, kw, cin, m]
        y = tf.raw_ops.DepthwiseConv2dNative(input=x, filter=tf.constant(np.ascontiguousarray(wt)), strides=strides, padding=padding, dilations=dil)
    else:
        wt = w.transpose(2, 3, 1, 0)  # OIHW -> HWIO (I = in/groups for grouped conv)
        y = tf.raw_ops.Conv2D(input=x, filter=tf.constant(np.ascontiguousarray(wt)), strides=strides, padding=padding, dilations=dil)
    if b is not None:
        y = tf.nn.bias_add(y, tf.constant(b))
    return [y]


register_lowering(TFLiteLowering(
    "conv2d", _plan_conv, _build_conv,
    "CONV_2D (groups=1 or grouped: CONV_2D with a [O, kh, kw, I/g] filter); "
    "DEPTHWISE_CONV_2D when groups == in_channels > 1 (any depth multiplier); preceded by "
    "PAD when PyTorch's padding is not TF SAME/VALID; bias fused; a bias-less conv gets a "
    "zero bias (shared by equal-length ones in fp32/fp16)",
    sets_tail=True,
))


# ---------------------------------------------------------------- fc
def _plan_fc(s: Site, pl: Plan) -> None:
    a, src, prev = s.a, s.src, s.prev
    pl.ops = ["FULLY_CONNECTED"]
    pl.fold_bn = _folding_bn(s)
    pl.has_bias = a["bias"] or pl.fold_bn is not None
    pl.float_consts = [("w", s.node.name)] + ([("b", s.node.name)] if pl.has_bias else [])
    pl.extra_params = a["out_features"] if (pl.fold_bn and not a["bias"]) else 0
    if prev is not None and prev.kind == "flatten" and prev.flatten_mode == "nhwc":
        c, h, w = s.graph.tensor_shape(s.graph.nodes[src].inputs[0])[1:]
        pl.fc_perm = np.arange(c * h * w).reshape(c, h, w).transpose(1, 2, 0).ravel()
    pl.layer = s.node.name
    pl.tail, pl.tail_fusable = "FULLY_CONNECTED", True


def _build_fc(tf, graph, node, pl, xs, weights, scalar):
    w = weights[node.name]["weight"]
    b = weights[node.name].get("bias")
    if pl.fold_bn:
        w, b = fold_bn(w, b, weights[pl.fold_bn], graph.nodes[pl.fold_bn].attrs["eps"])
    if pl.fc_perm is not None:
        w = w[:, pl.fc_perm]
    # [out, in] is FULLY_CONNECTED's own layout: with transpose_b the converter takes the
    # constant as it is (transposing VGG's 100M-weight fc costs seconds).
    y = tf.linalg.matmul(xs[0], tf.constant(np.ascontiguousarray(w)), transpose_b=True)
    if b is not None:
        y = y + tf.constant(b)
    return [y]


register_lowering(TFLiteLowering("fc", _plan_fc, _build_fc, "FULLY_CONNECTED (bias fused)", sets_tail=True))


# ---------------------------------------------------------------- batchnorm
def _plan_bn(s: Site, pl: Plan) -> None:
    prev = s.prev
    if prev is not None and prev.fold_bn == s.node.name:
        pl.folded_into = s.src
        pl.layer = prev.layer
        pl.tail, pl.tail_fusable = prev.tail, prev.tail_fusable
    else:
        c = s.ins[0][1]
        pl.ops = ["MUL", "ADD"]
        pl.float_consts = [("bn_scale", s.node.name), ("bn_shift", s.node.name)]
        pl.extra_params = -2 * c if c == 1 else 0  # 1-element: scalars
        pl.tail, pl.tail_fusable = "ADD_CONST", True


def _build_bn(tf, graph, node, pl, xs, weights, scalar):
    if pl.folded_into:
        return [xs[0]]
    p = weights[node.name]
    scale = p["weight"].astype(np.float64) / np.sqrt(p["running_var"].astype(np.float64) + node.attrs["eps"])
    shift = p["bias"] - p["running_mean"] * scale
    shape = _channel_shape(len(node.shapes[0]), len(scale), pl.layout)
    y = xs[0] * tf.constant(scale.astype(np.float32).reshape(shape))
    return [y + tf.constant(shift.astype(np.float32).reshape(shape))]


register_lowering(TFLiteLowering(
    "batchnorm", _plan_bn, _build_bn,
    "nothing when it is the sole reader of a conv2d/fc (folded into its weights and bias by the "
    "exporter); otherwise MUL + ADD",
    sets_tail=True,
))


# ---------------------------------------------------------------- activations
# A relu/relu6 (and a clip to (0, 6) or (-1, 1)) becomes the fused activation of its producer.
_TAKES_ACTIVATION = FUSES_ACTIVATION | {"ADD_CONST", "MUL_CONST"}


def _fused_or(act: str) -> Callable[[Site, Plan], None]:
    def plan(s: Site, pl: Plan) -> None:
        if s.folds_into_producer(_TAKES_ACTIVATION):
            pl.tail, pl.tail_fusable = s.prev.tail, False
        else:
            pl.ops = [act]
    return plan


register_lowering(TFLiteLowering(
    "relu", _fused_or("RELU"), unary(lambda tf, x, n, s: tf.nn.relu(x)),
    "nothing when P's last op is CONV_2D, DEPTHWISE_CONV_2D, FULLY_CONNECTED, ADD, MUL, DIV, "
    "MAX_POOL_2D or AVERAGE_POOL_2D without a fused activation yet (fused activation); otherwise "
    "RELU (e.g. after CONCATENATION, MEAN, PAD, HARD_SWISH or an input)",
    sets_tail=True,
))
register_lowering(TFLiteLowering(
    "relu6", _fused_or("RELU6"), unary(lambda tf, x, n, s: tf.nn.relu6(x)), "as relu: fused, or RELU6", sets_tail=True,
))
elementwise("hswish", ["HARD_SWISH"], lambda tf, x, n, s: x * tf.nn.relu6(x + s(3.0)) / s(6.0),
            "HARD_SWISH (x*relu6(x+3)/6 is pattern-matched, also right after a conv)")


def _plan_hsigmoid(s: Site, pl: Plan) -> None:
    prev = s.prev
    folds = s.folds_into_producer(HAS_BIAS | {"ADD_CONST"})
    pl.ops = ["MUL"] if folds else ["ADD", "MUL"]
    pl.float_consts = [("scalar", 1.0 / 6.0)] + ([] if folds else [("scalar", 3.0)])
    if folds and prev.tail in HAS_BIAS:
        layer = s.plans[prev.layer]
        if not layer.has_bias:  # a bias of 3s replaces the zero (conv) or no (fc) bias
            pl.extra_params = s.graph.nodes[prev.layer].shapes[0][1]
            pl.float_consts.append(("b+3", prev.layer))
            layer.has_bias, layer.zero_bias = True, 0
    pl.tail, pl.tail_fusable = "MUL_CONST", True


register_lowering(TFLiteLowering(
    "hsigmoid", _plan_hsigmoid, unary(lambda tf, x, n, s: tf.nn.relu6(x + s(3.0)) * s(1.0 / 6.0)),
    "MUL when P's last op is CONV_2D/DEPTHWISE_CONV_2D/FULLY_CONNECTED without a fused activation "
    "(the +3 folds into its bias, creating one if the layer had none, and relu6 is fused) or the "
    "constant ADD of a standalone batch norm (+3 folds into it); otherwise ADD (with fused RELU6) + MUL",
    sets_tail=True,
))


def _plan_swish(s: Site, pl: Plan) -> None:
    pl.ops = ["LOGISTIC", "MUL"]
    pl.tail, pl.tail_fusable = "MUL", True


register_lowering(TFLiteLowering("swish", _plan_swish, unary(lambda tf, x, n, s: x * tf.sigmoid(x)), "LOGISTIC + MUL",
                                 sets_tail=True))
elementwise("sigmoid", ["LOGISTIC"], lambda tf, x, n, s: tf.sigmoid(x), int8_scale="fixed")
elementwise("tanh", ["TANH"], lambda tf, x, n, s: tf.tanh(x), "TANH (never fused)", int8_scale="fixed")
elementwise("leaky_relu", ["LEAKY_RELU"], lambda tf, x, n, s: tf.nn.leaky_relu(x, alpha=float(n.attrs["alpha"])))


def _plan_prelu(s: Site, pl: Plan) -> None:
    ins, a = s.ins, s.a
    c = ins[0][1] if len(ins[0]) >= 2 else 1
    if a["num_parameters"] not in (1, c):
        raise lowering_error(s.node, f"num_parameters={a['num_parameters']} is neither 1 nor the {c} channels")
    pl.ops = ["PRELU"]
    pl.float_consts = [("alpha", s.node.name)]


def _build_prelu(tf, graph, node, pl, xs, weights, scalar):
    alpha = weights[node.name]["weight"]
    rank = len(node.shapes[0])
    # The converter matches PRELU only with a slope tensor of rank (input rank - 1): the
    # input's TF shape without the batch, ones except the channel axis ([1, 1, C] in NHWC).
    shape = [1] * (rank - 1)
    if rank >= 2:
        shape[tf_axis(1, rank, pl.layout) - 1] = alpha.size
    neg = tf.constant((-alpha).reshape(shape))
    x = xs[0]
    return [tf.nn.relu(x) + neg * tf.nn.relu(-x)]


register_lowering(TFLiteLowering("prelu", _plan_prelu, _build_prelu, "PRELU"))


# ---------------------------------------------------------------- n-ary add / mul
def _plan_binary(s: Site, pl: Plan) -> None:
    pl.ops = [s.node.op.upper()] * (len(s.node.inputs) - 1)
    if pl.ops:
        pl.tail, pl.tail_fusable = s.node.op.upper(), True


def _build_binary(tf, graph, node, pl, xs, weights, scalar):
    y = xs[0]
    for x in xs[1:]:
        y = y + x if node.op == "add" else y * x
    return [y]


for _op in ("add", "mul"):
    register_lowering(TFLiteLowering(_op, _plan_binary, _build_binary, f"{_op.upper()} x (n_inputs - 1)",
                                     sets_tail=True, chained=True))
register_lowering(TFLiteLowering("div", _plan_binary, lambda tf, graph, node, pl, xs, weights, scalar: [xs[0] / xs[1]],
                                 "DIV (takes a following relu as its fused activation, as ADD and MUL do)",
                                 sets_tail=True))


# ---------------------------------------------------------------- pools
def _plan_maxpool(s: Site, pl: Plan) -> None:
    a = s.a
    pl.pads = spatial_mode(s.node, s.ins[0], s.out, [1, 1])
    if pl.pads.mode == "PAD":
        t, b, l, r = pl.pads.pads
        ph, pw = a["padding"]
        if b <= max(ph, 1) and r <= max(pw, 1):
            pl.mirror_steps = [[t, b, l, r]]
        else:
            rest = [t, b, l, r]
            while any(rest):
                pl.mirror_steps.append([min(v, 1) for v in rest])
                rest = [max(v - 1, 0) for v in rest]
    pl.ops = ["MIRROR_PAD"] * len(pl.mirror_steps) + ["MAX_POOL_2D"]
    pl.tail, pl.tail_fusable = "MAX_POOL_2D", True


def _plan_avgpool(s: Site, pl: Plan) -> None:
    node, a, ins, out = s.node, s.a, s.ins, s.out
    divisor = avgpool_divisor_map(node, ins[0], out)
    kk = a["kernel"][0] * a["kernel"][1]
    pads = spatial_mode(node, ins[0], out, [1, 1])
    # TF SAME divides by the count of real (non-padded) elements of each window.
    real = avgpool_divisor_map(Node(node.name, node.op, node.inputs, dict(a, count_include_pad=False)), ins[0], out)
    if pads.valid_ok:
        pads.mode = "VALID"
    elif pads.same_ok and np.array_equal(divisor, real):
        pads.mode = "SAME"
    else:
        pads.mode = "PAD"
    pl.pads = pads
    pl.ops = ["AVERAGE_POOL_2D"]
    if pads.mode == "PAD":
        if any(pads.pads):
            pl.ops.insert(0, "PAD")
        if not np.all(divisor == kk):
            pl.correction = (kk / divisor).astype(np.float32)
            pl.ops.append("MUL")
            key = ("map", pl.correction.shape, pl.correction.tobytes())
            pl.float_consts = [key]
            pl.extra_params = pl.correction.size
    pl.tail, pl.tail_fusable = pl.ops[-1] if pl.ops[-1] != "MUL" else "MUL_CONST", True


def _build_pool(tf, graph, node, pl, xs, weights, scalar):
    a = node.attrs
    x = xs[0]
    mode = pl.pads.mode
    if mode == "PAD":
        if node.op == "maxpool":
            # Edge replication = PyTorch's -inf padding for max pooling (every window holding
            # a padded element also holds the edge element it copies). One SYMMETRIC
            # MIRROR_PAD replicates the edge when no after-pad exceeds max(p, 1); otherwise
            # repeat one-wide SYMMETRIC pads.
            for step in pl.mirror_steps:
                x = tf.pad(x, conv_pads_tf(step), mode="SYMMETRIC")
        elif any(pl.pads.pads):
            x = tf.pad(x, conv_pads_tf(pl.pads.pads))
        mode = "VALID"
    ksize = [1, a["kernel"][0], a["kernel"][1], 1]
    strides = [1, a["stride"][0], a["stride"][1], 1]
    if node.op == "maxpool":
        return [tf.raw_ops.MaxPool(input=x, ksize=ksize, strides=strides, padding=mode)]
    y = tf.raw_ops.AvgPool(value=x, ksize=ksize, strides=strides, padding=mode)
    if pl.correction is not None:
        y = y * tf.constant(pl.correction.reshape(1, *pl.correction.shape, 1))
    return [y]


register_lowering(TFLiteLowering(
    "avgpool", _plan_avgpool, _build_pool,
    "AVERAGE_POOL_2D; + PAD before when padding is not SAME/VALID-equivalent; + MUL (constant "
    "correction map) after when PyTorch's divisor differs from k*k there",
    sets_tail=True, int8_scale=lambda pl: "input" if pl.correction is None else "own",
))
register_lowering(TFLiteLowering(
    "maxpool", _plan_maxpool, _build_pool,
    "MAX_POOL_2D; + MIRROR_PAD before when not SAME/VALID-equivalent (one, or max(pads) one-wide "
    "ones when a ceil_mode after-pad exceeds max(p, 1))",
    sets_tail=True, int8_scale=lambda pl: "input",
))
elementwise("global_avgpool", ["MEAN"], lambda tf, x, n, s: tf.reduce_mean(x, axis=[1, 2], keepdims=True))


# ---------------------------------------------------------------- scale, clip
def _plan_scale(s: Site, pl: Plan) -> None:
    if s.folds_into_producer(HAS_BIAS):  # the converter scales the layer's weights and bias
        pl.tail, pl.tail_fusable, pl.layer = s.prev.tail, True, s.prev.layer
    else:
        pl.ops = ["MUL"]
        pl.float_consts = [("scalar", float(np.float32(s.a["factor"])))]
        pl.tail, pl.tail_fusable = "MUL_CONST", True


register_lowering(TFLiteLowering(
    "scale", _plan_scale, unary(lambda tf, x, n, s: x * s(float(n.attrs["factor"]))),
    "nothing when P's last op is CONV_2D/DEPTHWISE_CONV_2D/FULLY_CONNECTED without a fused "
    "activation (the factor folds into its weights and bias); otherwise MUL (by a scalar; takes a "
    "following relu)",
    sets_tail=True,
))


def _plan_shift(s: Site, pl: Plan) -> None:
    prev = s.prev
    if s.folds_into_producer(HAS_BIAS | {"ADD_CONST"}):  # the converter adds the value to the bias
        pl.tail, pl.tail_fusable, pl.layer = prev.tail, True, prev.layer
        if prev.tail in HAS_BIAS:
            layer = s.plans[prev.layer]
            if not layer.has_bias:  # a bias of the value replaces the zero (conv) or no (fc) bias
                pl.extra_params = s.graph.nodes[prev.layer].shapes[0][1]
                pl.float_consts = [("b+shift", prev.layer)]
                layer.has_bias, layer.zero_bias = True, 0
    else:
        pl.ops = ["ADD"]
        pl.float_consts = [("scalar", float(np.float32(s.a["value"])))]
        pl.tail, pl.tail_fusable = "ADD_CONST", True


register_lowering(TFLiteLowering(
    "shift", _plan_shift, unary(lambda tf, x, n, s: x + s(float(n.attrs["value"]))),
    "nothing when P's last op is CONV_2D/DEPTHWISE_CONV_2D/FULLY_CONNECTED without a fused "
    "activation or a batch norm's constant ADD (the value folds into its bias, creating one if the "
    "layer had none); otherwise ADD (by a scalar; takes a following relu)",
    sets_tail=True,
))


def _plan_clip(s: Site, pl: Plan) -> None:
    lo, hi = float(s.a["min"]), float(s.a["max"])
    if (lo, hi) in CLIP_ACTIVATIONS:
        _fused_or(CLIP_ACTIVATIONS[(lo, hi)])(s, pl)
    else:
        pl.ops = ["MINIMUM", "RELU" if lo == 0.0 else "MAXIMUM"]
        pl.float_consts = [("scalar", float(np.float32(hi)))] + ([] if lo == 0.0 else [("scalar", float(np.float32(lo)))])


def _build_clip(tf, graph, node, pl, xs, weights, scalar):
    lo, hi = float(node.attrs["min"]), float(node.attrs["max"])
    # min then max, as tf.clip_by_value (the converter matches (0, 6) and (-1, 1)).
    return [tf.maximum(tf.minimum(xs[0], scalar(hi)), scalar(lo))]


register_lowering(TFLiteLowering(
    "clip", _plan_clip, _build_clip,
    "(0, 6): as relu6; (-1, 1): RELU_N1_TO_1, fused like relu; (0, max): MINIMUM + RELU; "
    "otherwise MINIMUM + MAXIMUM",
    sets_tail=True,
))


# ---------------------------------------------------------------- crop, upsample
def _build_crop(tf, graph, node, pl, xs, weights, scalar):
    t, b, l, r = node.attrs["crops"]
    _, c, h, w = node.shapes[0]
    return [tf.slice(xs[0], [0, t, l, 0], [1, h, w, c])]


register_lowering(TFLiteLowering("crop", _ops("SLICE"), _build_crop, "SLICE"))


def _plan_upsample(s: Site, pl: Plan) -> None:
    kind = "RESIZE_NEAREST_NEIGHBOR" if s.a["mode"] == "nearest" else "RESIZE_BILINEAR"
    pl.ops = [kind] if s.a["scale"] != [1, 1] else []


def _build_upsample(tf, graph, node, pl, xs, weights, scalar):
    if node.attrs["scale"] == [1, 1]:
        return [xs[0]]
    _, _, h, w = node.shapes[0]
    mode = node.attrs["mode"]
    if mode != "nearest":  # PyTorch's bilinear: half-pixel centres, or the corners aligned
        return [tf.raw_ops.ResizeBilinear(images=xs[0], size=[h, w], align_corners=mode == "bilinear_corners",
                                          half_pixel_centers=mode == "bilinear")]
    # PyTorch 'nearest' takes source index floor(dst * in / out): TF's legacy rule (no
    # half-pixel centres, no corner alignment).
    return [tf.raw_ops.ResizeNearestNeighbor(images=xs[0], size=[h, w], align_corners=False, half_pixel_centers=False)]


register_lowering(TFLiteLowering("resize", _ops("RESIZE_NEAREST_NEIGHBOR"),
                                 lambda tf, graph, node, pl, xs, weights, scalar: [tf.raw_ops.ResizeNearestNeighbor(
                                     images=xs[0], size=node.attrs["size"], align_corners=False, half_pixel_centers=False)],
                                 "RESIZE_NEAREST_NEIGHBOR to the size (no half-pixel centres, no corner alignment)"))
register_lowering(TFLiteLowering("upsample", _plan_upsample, _build_upsample,
                                 "RESIZE_NEAREST_NEIGHBOR, or RESIZE_BILINEAR in the bilinear modes (nothing for scale 1)"))


# ---------------------------------------------------------------- concat, split, channel_shuffle, pad
def _plan_concat(s: Site, pl: Plan) -> None:
    pl.ops = ["CONCATENATION"] if len(s.node.inputs) > 1 else []
    pl.kind = "concat" if pl.ops else "identity"


def _build_concat(tf, graph, node, pl, xs, weights, scalar):
    if len(xs) == 1:
        return [xs[0]]
    return [tf.concat(xs, axis=tf_axis(node.attrs["axis"], len(node.shapes[0]), pl.layout))]


register_lowering(TFLiteLowering("concat", _plan_concat, _build_concat, "CONCATENATION (nothing with a single input)"))


def _plan_split(s: Site, pl: Plan) -> None:
    graph, name = s.graph, s.node.name
    secs = s.a["sections"]
    read = {split_ref(r)[1] for n2 in graph.nodes.values() for r in n2.inputs if split_ref(r)[0] == name}
    read |= {split_ref(r)[1] for r in graph.outputs if split_ref(r)[0] == name}
    if len(read) == len(secs):
        pl.ops = ["SPLIT"] if len(set(secs)) == 1 else ["SPLIT_V"]
    else:
        # A SPLIT with an unread output makes the int8 quantizer nondeterministic
        # (seen: a float SPLIT between DEQUANTIZE/QUANTIZE in some runs): slice instead.
        pl.kind = "slices"
        pl.used_outputs = sorted(read)
        pl.ops = ["SLICE"] * len(read)


def _build_split(tf, graph, node, pl, xs, weights, scalar):
    secs = node.attrs["sections"]
    axis = tf_axis(node.attrs["axis"], len(node.shapes[0]), pl.layout)
    if pl.kind == "slices":
        rank = len(node.shapes[0])
        outs = [None] * len(secs)
        for k in pl.used_outputs:
            begin, size = [0] * rank, [-1] * rank
            begin[axis], size[axis] = sum(secs[:k]), secs[k]
            outs[k] = tf.slice(xs[0], begin, size)
        return outs
    if len(set(secs)) == 1:
        return list(tf.split(xs[0], len(secs), axis=axis))
    return list(tf.split(xs[0], secs, axis=axis))


_SAME_SCALE = lambda pl: "input"  # noqa: E731  (int8: a layout-only op keeps its input's scale)

register_lowering(TFLiteLowering(
    "split", _plan_split, _build_split,
    "SPLIT (equal sections) or SPLIT_V; one SLICE per read output when some output is not read",
    int8_scale=_SAME_SCALE,
))


def _plan_shuffle(s: Site, pl: Plan) -> None:
    pl.ops = ["RESHAPE", "TRANSPOSE", "RESHAPE"] if s.a["groups"] > 1 else []


def _build_shuffle(tf, graph, node, pl, xs, weights, scalar):
    g = node.attrs["groups"]
    if g == 1:
        return [xs[0]]
    _, c, h, w = node.shapes[0]
    y = tf.reshape(xs[0], [1, h * w, g, c // g])
    y = tf.transpose(y, [0, 1, 3, 2])
    return [tf.reshape(y, [1, h, w, c])]


register_lowering(TFLiteLowering("channel_shuffle", _plan_shuffle, _build_shuffle,
                                 "RESHAPE + TRANSPOSE + RESHAPE (nothing when groups == 1)", int8_scale=_SAME_SCALE))


def _build_gather(tf, graph, node, pl, xs, weights, scalar):
    axis = tf_axis(node.attrs["axis"], len(node.shapes[0]), pl.layout)
    return [tf.gather(xs[0], tf.constant(node.attrs["indices"], dtype=tf.int32), axis=axis)]


register_lowering(TFLiteLowering("gather", _ops("GATHER"), _build_gather,
                                 "GATHER of constant int32 indices on the axis (an image's channels: NHWC's last)",
                                 int8_scale=_SAME_SCALE))


def _plan_pad(s: Site, pl: Plan) -> None:
    pl.ops = ["PAD"] if float(s.a["value"]) == 0.0 else ["PADV2"]
    if pl.ops == ["PADV2"]:
        pl.float_consts = [("scalar", float(np.float32(s.a["value"])))]


def _build_pad(tf, graph, node, pl, xs, weights, scalar):
    v = float(node.attrs["value"])
    pads = conv_pads_tf(node.attrs["pads"][:4])
    pads[3] = list(node.attrs["pads"][4:]) or [0, 0]  # the channels: NHWC's last axis
    if v == 0.0:
        return [tf.pad(xs[0], pads)]
    return [tf.pad(xs[0], pads, constant_values=v)]


register_lowering(TFLiteLowering("pad", _plan_pad, _build_pad, "PAD (value 0) or PADV2 (of the channels too)",
                                 int8_scale=_SAME_SCALE))


# ---------------------------------------------------------------- flatten, reshape
def _plan_reshape(s: Site, pl: Plan) -> None:
    graph, node, readers, outputs = s.graph, s.node, s.readers, s.outputs
    x, out = s.ins[0], s.out
    if list(out) == list(x) and pl.in_layouts[0] == pl.layout:
        pl.kind = "identity"
        return
    same_order = pl.in_layouts[0] == PLAIN or nchw_order_is_nhwc_order(x)
    if node.op == "flatten":
        if same_order:
            pl.flatten_mode = "plain"
        elif all(graph.nodes[r].op == "fc" for r in readers[node.name]) and node.name not in outputs:
            pl.flatten_mode = "nhwc"
        else:
            pl.flatten_mode = "transpose"
        pl.transpose_in = pl.flatten_mode == "transpose"
    else:
        pl.transpose_in = not same_order
        pl.transpose_out = pl.layout == NHWC and not nchw_order_is_nhwc_order(out)
    pl.ops = (["TRANSPOSE"] if pl.transpose_in else []) + ["RESHAPE"] + (["TRANSPOSE"] if pl.transpose_out else [])
    pl.lead_perm = [0, 3, 1, 2] if pl.transpose_in else None
    pl.trail_perm = [0, 2, 3, 1] if pl.transpose_out else None
    # FULLY_CONNECTED flattens its input: a RESHAPE that only drops unit dims (last dim kept)
    # right before a sole fc reader is removed by the converter.
    tf_in = ir_to_framework(x, pl.in_layouts[0]) if not pl.transpose_in else list(x)
    r = readers[node.name]
    if (
        pl.ops == ["RESHAPE"] and len(out) == 2 and tf_in[-1] == out[-1]
        and len(r) == 1 and graph.nodes[r[0]].op == "fc" and node.name not in outputs
    ):
        pl.ops = []
    pl.tail = pl.ops[-1] if pl.ops else None


def _build_reshape(tf, graph, node, pl, xs, weights, scalar):
    if pl.kind == "identity":
        return [xs[0]]
    x = xs[0]
    out = node.shapes[0]
    if pl.transpose_in:
        x = tf.transpose(x, [0, 3, 1, 2])
    if pl.transpose_out:
        return [tf.transpose(tf.reshape(x, out), [0, 2, 3, 1])]
    return [tf.reshape(x, ir_to_framework(out, pl.layout))]


register_lowering(TFLiteLowering(
    "flatten", _plan_reshape, _build_reshape,
    "RESHAPE; TRANSPOSE + RESHAPE when the layouts differ and a reader is not fc; nothing when the "
    "result's sole reader is one fc and the reshape only drops unit dims (FULLY_CONNECTED flattens "
    "its input itself: global pool -> flatten -> fc is MEAN + FULLY_CONNECTED)",
    sets_tail=True, int8_scale=_SAME_SCALE,
))
register_lowering(TFLiteLowering(
    "reshape", _plan_reshape, _build_reshape,
    "RESHAPE, with TRANSPOSE before (rank-4 input) / after (rank-4 result) unless C or H*W is 1; "
    "nothing when the shape does not change; the RESHAPE disappears before a sole fc reader as for "
    "flatten",
    sets_tail=True, int8_scale=_SAME_SCALE,
))


# ---------------------------------------------------------------- softmax
def _plan_softmax(s: Site, pl: Plan) -> None:
    rank = len(s.out)
    ax = tf_axis(s.a["axis"], rank, pl.layout)
    if ax == rank - 1:
        pl.ops = ["SOFTMAX"]
    else:
        pl.ops = ["TRANSPOSE", "SOFTMAX", "TRANSPOSE"]
        perm = list(range(rank))
        perm[ax], perm[-1] = perm[-1], perm[ax]
        pl.lead_perm = pl.trail_perm = perm


def _build_softmax(tf, graph, node, pl, xs, weights, scalar):
    return [tf.nn.softmax(xs[0], axis=tf_axis(node.attrs["axis"], len(node.shapes[0]), pl.layout))]


register_lowering(TFLiteLowering(
    "softmax", _plan_softmax, _build_softmax,
    "SOFTMAX over the last TF axis; TRANSPOSE + SOFTMAX + TRANSPOSE otherwise",
    int8_scale=lambda pl: "fixed",
))


# ---------------------------------------------------------------- transformers
def _affine_reader(s: Site) -> str | None:
    """The fc with a bias that is the only reader of this layer norm over its contraction axis."""
    r = s.readers[s.node.name]
    last = s.a["axis"] % len(s.out) == len(s.out) - 1
    if len(r) != 1 or s.node.name in s.outputs or not last:
        return None
    fc = s.graph.nodes[r[0]]
    return fc.name if fc.op == "fc" and fc.attrs["bias"] else None


def _plan_layernorm(s: Site, pl: Plan) -> None:
    c = s.ins[0][s.a["axis"] % len(s.ins[0])]
    pl.ops = ["MEAN", "SUB", "SQUARED_DIFFERENCE", "MEAN", "ADD", "RSQRT", "MUL"]
    pl.float_consts = [("scalar", float(np.float32(s.a["eps"])))]
    pl.affine_into = _affine_reader(s) if pl.layout == PLAIN else None
    if pl.affine_into:  # the converter scales the fc's weights and shifts its bias
        pl.extra_params = -2 * c
        pl.tail, pl.tail_fusable = "MUL", False
        return
    pl.ops += ["MUL", "ADD"]
    pl.float_consts += [("ln_gamma", s.node.name), ("ln_beta", s.node.name)]
    pl.extra_params = -2 * c if c == 1 else 0  # 1-element: scalars
    pl.tail, pl.tail_fusable = "ADD_CONST", True


def _normalise(tf, x, axes, node, weights, shape, scalar):
    """TF's decomposition of a normalisation over ``axes`` (what the converter lowers to MEAN + SUB +
    SQUARED_DIFFERENCE + MEAN + ADD + RSQRT + MUL + MUL + ADD), the node's gain and shift reshaped to
    ``shape`` to broadcast over the normalised axis (layer norm) or the channels (instance norm)."""
    p = weights[node.name]
    d = x - tf.reduce_mean(x, axis=axes, keepdims=True)
    var = tf.reduce_mean(tf.square(d), axis=axes, keepdims=True)
    y = d * tf.math.rsqrt(var + scalar(float(node.attrs["eps"]))) * tf.constant(p["weight"].reshape(shape))
    return y + tf.constant(p["bias"].reshape(shape))


def _build_layernorm(tf, graph, node, pl, xs, weights, scalar):
    rank = len(node.shapes[0])
    ax = tf_axis(node.attrs["axis"], rank, pl.layout)
    return [_normalise(tf, xs[0], ax, node, weights, [-1] + [1] * (rank - 1 - ax), scalar)]


register_lowering(TFLiteLowering(
    "layernorm", _plan_layernorm, _build_layernorm,
    "MEAN + SUB + SQUARED_DIFFERENCE + MEAN + ADD + RSQRT + MUL + MUL + ADD over the normalised "
    "TF axis (the last one for tokens and for a channel norm of an image); without the last MUL + "
    "ADD when its only reader is an fc with a bias over that axis (gain and shift fold into the "
    "fc's weights and bias; not into a bias-less fc)",
    sets_tail=True,
))


def _plan_instancenorm(s: Site, pl: Plan) -> None:
    pl.ops = ["MEAN", "SUB", "SQUARED_DIFFERENCE", "MEAN", "ADD", "RSQRT", "MUL", "MUL", "ADD"]
    pl.float_consts = [("scalar", float(np.float32(s.a["eps"]))), ("in_gamma", s.node.name), ("in_beta", s.node.name)]
    pl.tail, pl.tail_fusable = "ADD_CONST", True


def _build_instancenorm(tf, graph, node, pl, xs, weights, scalar):
    axes = [tf_axis(2, 4, pl.layout), tf_axis(3, 4, pl.layout)]
    return [_normalise(tf, xs[0], axes, node, weights, [-1, 1, 1] if pl.layout == PLAIN else [-1], scalar)]


register_lowering(TFLiteLowering(
    "instancenorm", _plan_instancenorm, _build_instancenorm,
    "MEAN + SUB + SQUARED_DIFFERENCE + MEAN + ADD + RSQRT + MUL + MUL + ADD over H and W, the gain "
    "and shift per channel (TF's decomposition of instance norm)",
    sets_tail=True,
))
def _plan_lrn(s: Site, pl: Plan) -> None:
    if s.a["size"] % 2 == 0:
        raise lowering_error(s.node, f"size {s.a['size']} is even: TFLite's LOCAL_RESPONSE_NORMALIZATION sums an odd "
                                     "window of 2 * radius + 1 channels")
    pl.ops = ["LOCAL_RESPONSE_NORMALIZATION"]


def _build_lrn(tf, graph, node, pl, xs, weights, scalar):
    # TF's alpha multiplies the sum of squares itself; the IR's (PyTorch's) is divided by size
    a = node.attrs
    return [tf.nn.local_response_normalization(xs[0], depth_radius=(a["size"] - 1) // 2, bias=float(a["bias"]),
                                               alpha=float(a["alpha"]) / a["size"], beta=float(a["beta"]))]


register_lowering(TFLiteLowering("lrn", _plan_lrn, _build_lrn,
                                 "LOCAL_RESPONSE_NORMALIZATION over the NHWC channels (radius (size - 1) / 2, alpha / "
                                 "size; an even size is refused); float in int8 files, between a DEQUANTIZE and a "
                                 "QUANTIZE", int8_float=True))
elementwise("gelu", ["GELU"], lambda tf, x, n, s: tf.nn.gelu(x, approximate=n.attrs["approximate"] == "tanh"))
register_lowering(TFLiteLowering("matmul", _ops("BATCH_MATMUL"),
                                 lambda tf, graph, node, pl, xs, weights, scalar: [tf.linalg.matmul(xs[0], xs[1])],
                                 "BATCH_MATMUL (its inputs in IR order)"))


def moves_only_unit_axes(perm: list[int], shape: list[int]) -> bool:
    """Transposing ``shape`` by ``perm`` keeps the order of its axes longer than 1 (the converter
    makes such a TRANSPOSE a RESHAPE: one head's [1, N, 1, d] -> [1, 1, N, d])."""
    big = [p for p in perm if shape[p] != 1]
    return big == sorted(big)


def swaps_last_two(perm: list[int] | None) -> bool:
    """``perm`` exchanges the last two axes and keeps the others (BATCH_MATMUL's adj_x / adj_y)."""
    r = len(perm or [])
    return r >= 2 and list(perm) == list(range(r - 2)) + [r - 1, r - 2]


def _plan_transpose(s: Site, pl: Plan) -> None:
    perm = framework_perm(s.a["perm"], pl.in_layouts[0], pl.layout)
    if perm == sorted(perm):
        pl.kind = "identity"
    elif moves_only_unit_axes(perm, ir_to_framework(s.ins[0], pl.in_layouts[0])):
        pl.kind = "reshape"
        pl.ops = ["RESHAPE"]
    else:
        pl.ops = ["TRANSPOSE"]
        pl.lead_perm = pl.trail_perm = perm


def _build_transpose(tf, graph, node, pl, xs, weights, scalar):
    if pl.kind == "identity":
        return [xs[0]]
    # a transpose that only moves unit axes is still a TF transpose: the converter makes it a RESHAPE
    return [tf.transpose(xs[0], framework_perm(node.attrs["perm"], pl.in_layouts[0], pl.layout))]


register_lowering(TFLiteLowering(
    "transpose", _plan_transpose, _build_transpose,
    "TRANSPOSE by the permutation between the input's and the result's layouts; nothing when that "
    "is the identity (an image's [0, 2, 3, 1] into tokens' order); RESHAPE when it only moves axes "
    "of size 1 (one attention head: [1, N, 1, d] -> [1, 1, N, d]), which then merges with adjacent "
    "RESHAPEs; nothing when it exchanges the last two axes and its only reader is a matmul "
    "(BATCH_MATMUL's adj_x / adj_y)",
    int8_scale=_SAME_SCALE,
))


def _reduce(fn: str) -> Builder:
    def build(tf, graph, node, pl, xs, weights, scalar):
        ax = tf_axis(node.attrs["axis"], len(graph.tensor_shape(node.inputs[0])), pl.read_layouts[0])
        return [getattr(tf, fn)(xs[0], axis=ax, keepdims=node.attrs["keepdim"])]
    return build


for _op, _fn, _tfl in (("mean", "reduce_mean", "MEAN"), ("reduce_max", "reduce_max", "REDUCE_MAX"),
                       ("reduce_sum", "reduce_sum", "SUM")):
    register_lowering(TFLiteLowering(_op, _ops(_tfl), _reduce(_fn), _tfl))


# ---------------------------------------------------------------- learned constant tensors
def _plan_pos_embed(s: Site, pl: Plan) -> None:
    pl.ops = ["ADD"]
    pl.float_consts = [("pos_embed", s.node.name)]
    n = int(np.prod(s.out))
    pl.extra_params = -n if n == 1 else 0  # 1-element: a scalar
    pl.tail, pl.tail_fusable = "ADD_CONST", True


def _build_pos_embed(tf, graph, node, pl, xs, weights, scalar):
    w = weights[node.name]["weight"]
    if pl.layout == NHWC:
        w = w.transpose(TO_NHWC)
    return [xs[0] + tf.constant(np.ascontiguousarray(w))]


register_lowering(TFLiteLowering(
    "pos_embed", _plan_pos_embed, _build_pos_embed,
    "ADD of a constant of the input's shape (takes a following relu)",
    sets_tail=True,
))


def _plan_cls_token(s: Site, pl: Plan) -> None:
    pl.ops = ["CONCATENATION"]
    pl.float_consts = [("cls_token", s.node.name)]
    pl.extra_params = -1 if s.out[-1] == 1 else 0  # 1-element: a scalar


def _build_cls_token(tf, graph, node, pl, xs, weights, scalar):
    return [tf.concat([tf.constant(weights[node.name]["weight"]), xs[0]], axis=1)]


register_lowering(TFLiteLowering("cls_token", _plan_cls_token, _build_cls_token,
                                 "CONCATENATION of a constant [1, 1, C] token and the tokens"))


# =====================================================================================
# Rules across nodes and per precision (not one operator's)
# =====================================================================================
TFLITE_FUSIONS.update({
    # Rewrites across nodes (node -> sole reader):
    "TRANSPOSE>TRANSPOSE": "adjacent TRANSPOSEs merge into one, or both vanish when their "
    "permutations compose to the identity",
    "RESHAPE>RESHAPE": "adjacent RESHAPEs merge into one",
    "chains": "both merges see through nodes left without ops (a transpose become a RESHAPE and "
    "merged, a no-op transpose, a folded batch norm) as long as each node is its producer's only "
    "reader: a reshape -> one-head transpose -> reshape chain is one RESHAPE",
    "TRANSPOSE>BATCH_MATMUL": "a TRANSPOSE exchanging the last two axes whose only reader is a "
    "matmul vanishes (the matmul's adj_x / adj_y; EfficientFormer's k^T)",
    # Layouts (export.layout):
    "layout": "one TRANSPOSE before each input read in another layout (an image read by matmul, "
    "fc or mean; a layout-keeping op's other inputs in its first input's layout) and one after a "
    "matmul, fc or mean whose rank-4 result is an image; a tensor transposed the same way for "
    "several readers is transposed once (common subexpression); a rank-4 result read as a later "
    "input of a layout-keeping op takes that op's layout (MobileViT's grouped tokens [1, G, N, C] "
    "stay in IR order through the residual adds)",
    # Per precision:
    "fp16": "plus one DEQUANTIZE per distinct float constant tensor (weights, biases, "
    "batch-norm scale/shift, prelu slopes, correction maps, scalars such as hsigmoid's 3 "
    "and 1/6 and PADV2's pad value; equal constants are one tensor)",
    "int8": "int8 input and output tensors, so no QUANTIZE/DEQUANTIZE at the edges; one "
    "QUANTIZE (requantization) after each LOGISTIC/TANH/SOFTMAX whose output reaches a "
    "CONCATENATION input directly or through scale-preserving ops (reshape, flatten, "
    "channel_shuffle, split, pad, maxpool, avgpool without correction map)",
    # Known converter behaviour that expected_op_counts does not model:
    "not modelled": "a TRANSPOSE is also moved through element-wise ops and merged with "
    "the next one (reshape -> relu -> softmax(non-last axis) has one TRANSPOSE fewer); a chain "
    "of reshapes and cancelling TRANSPOSEs that gives back its input's shape vanishes whole (an "
    "image to tokens and straight back); "
    "int8: a tensor read by several CONCATENATIONs may be requantized (QUANTIZE) for one of "
    "them, depending on the quantizer's propagation order",
})
