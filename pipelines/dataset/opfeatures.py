"""Op and kernel vocabulary for the suite's own records: framework-neutral op types and the
op configuration columns of the ``ops`` table.

- :data:`OP_TYPES`: a registry from the op as a framework names it (TFLite builtin
  ``CONV_2D``, PyTorch ``aten::conv2d``, ``quantized::conv2d_relu``) to the schema's
  framework-neutral ``op_type`` (``conv2d``, ``dwconv2d``, ``group_conv2d``, ``fc``, ...). It
  extends the USC importer's table (:data:`pipelines.dataset.usc.OP_TYPES`) so public and own
  rows share one vocabulary; an unregistered name falls back to its bare lower-case name
  (``aten::narrow`` -> ``narrow``, ``SQUARED_DIFFERENCE`` -> ``squared_difference``).
- :func:`read_tflite_ops`: every node of a ``.tflite`` flatbuffer (operator i of subgraph 0
  is the interpreter's node i, the ``node`` of an op record) with its input/output tensor
  shapes (NHWC), which inputs are constants, and the builtin options that matter for latency
  (stride, padding mode, filter size, dilation, fused activation), read with LiteRT's own
  flatbuffer schema module (``ai_edge_litert.schema_py_generated``).
- :func:`tflite_features` / :func:`torch_features` / :func:`onnx_features`: the ``ops`` columns (``op_type``,
  ``in_channels``, ``in_hw``, ``out_channels``, ``out_hw``, ``kernel``, ``stride``,
  ``padding``, ``groups``) of one TFLite node, one profiled torch operator or one node ONNX
  Runtime ran.
- :data:`KERNEL_TYPES`: per kernel ``source`` (``xnnpack``, ``builtin``, ``gpu``) the rule
  that turns an aggregated kernel entry of a record into ``kernels.kernel_type``. The host's
  GPU commands (``source: gpu``, written by the Vulkan timestamp layer and labelled by
  ``pipelines/gpu/programs.py``) are typed from their ``kernel_kind`` and ``fused`` fields,
  never from their name (``dawn_entry_point 8x4x1 #688e761b`` says nothing about the kernel);
  the USC importer types the public GPU kernel names itself (``usc.kernel_type``). Both join
  the fused parts with ``+`` after the kernel's own kind (``conv+bias+clamp`` here,
  ``convolution_2d+relu`` in the USC data).

A convolution's groups come from its weight: TFLite ``CONV_2D`` weights are
``[out, kh, kw, in/groups]``, depthwise ``[1, kh, kw, out]``; torch ``[out, in/groups, kh, kw]``.
A 2-D convolution with groups = in = out channels is ``dwconv2d``, other grouped ones
``group_conv2d`` (the USC paper's three convolution types, Sec. 3.2).
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from .usc import OP_TYPES as USC_OP_TYPES

# ---------------------------------------------------------------- op types
OP_TYPES: dict[str, str] = {
    **USC_OP_TYPES,
    # TFLite builtins (the suite's exporter emits these; see generators/export/tflite.py)
    "RELU": "relu", "RELU6": "relu6", "RELU_N1_TO_1": "clip", "HARD_SWISH": "hswish", "LOGISTIC": "sigmoid",
    "TANH": "tanh", "LEAKY_RELU": "leaky_relu", "PRELU": "prelu", "SOFTMAX": "softmax",
    "MIRROR_PAD": "pad", "PADV2": "pad", "RESHAPE": "reshape", "SQUEEZE": "reshape", "EXPAND_DIMS": "reshape",
    "SPLIT": "split", "SPLIT_V": "split", "TRANSPOSE": "transpose", "STRIDED_SLICE": "slice", "SLICE": "slice",
    "QUANTIZE": "quantize", "DEQUANTIZE": "dequantize", "SUB": "sub", "DIV": "div",
    "MAXIMUM": "maximum", "MINIMUM": "minimum", "RESIZE_NEAREST_NEIGHBOR": "upsample",
    "RESIZE_BILINEAR": "upsample", "GATHER": "gather", "SUM": "sum", "BATCH_MATMUL": "matmul",
    "LOCAL_RESPONSE_NORMALIZATION": "lrn",
    # PyTorch (TorchScript) operators as torch.profiler names them
    "aten::conv2d": "conv2d", "aten::_convolution": "conv2d", "aten::convolution": "conv2d",
    "aten::linear": "fc", "aten::addmm": "fc", "aten::matmul": "fc", "aten::batch_norm": "batchnorm",
    "aten::relu_": "relu", "aten::relu6": "relu6", "aten::hardtanh": "clip", "aten::hardtanh_": "clip",
    "aten::clamp_": "clip", "aten::hardswish_": "hswish", "aten::hardsigmoid": "hsigmoid",
    "aten::hardsigmoid_": "hsigmoid", "aten::silu": "swish", "aten::silu_": "swish", "aten::sigmoid_": "sigmoid",
    "aten::tanh": "tanh", "aten::tanh_": "tanh", "aten::leaky_relu": "leaky_relu", "aten::leaky_relu_": "leaky_relu",
    "aten::prelu": "prelu", "aten::softmax": "softmax", "aten::cat": "concat", "aten::add_": "add",
    "aten::mul_": "mul", "aten::mean": "global_avgpool", "aten::flatten": "flatten", "aten::view": "reshape",
    "aten::reshape": "reshape", "aten::split": "split", "aten::split_with_sizes": "split", "aten::chunk": "split",
    "aten::constant_pad_nd": "pad", "aten::pad": "pad", "aten::reflection_pad2d": "pad",
    "aten::replication_pad2d": "pad", "aten::upsample_nearest2d": "upsample", "aten::upsample_bilinear2d": "upsample",
    "aten::channel_shuffle": "channel_shuffle", "aten::native_channel_shuffle": "channel_shuffle",
    "aten::index_select": "gather",
    "aten::transpose": "transpose", "aten::permute": "transpose", "aten::slice": "slice", "aten::narrow": "slice",
    "aten::quantize_per_tensor": "quantize", "aten::dequantize": "dequantize",
    "quantized::conv2d": "conv2d", "quantized::conv2d_relu": "conv2d", "quantized::linear": "fc",
    "quantized::linear_relu": "fc", "quantized::add": "add", "quantized::add_relu": "add",
    "quantized::add_scalar": "add", "quantized::mul": "mul", "quantized::mul_scalar": "mul",
    "quantized::cat": "concat", "quantized::batch_norm2d": "batchnorm", "quantized::batch_norm2d_relu": "batchnorm",
    "quantized::hardswish": "hswish", "quantized::leaky_relu": "leaky_relu", "quantized::sigmoid": "sigmoid",
    # ONNX operators as ONNX Runtime's profiler names the nodes it ran (after its graph optimizations:
    # FusedConv/FusedGemm carry a fused activation, ReorderInput/ReorderOutput are the NCHWc layout
    # transforms of its x86 kernels, QLinear* the int8 QDQ graph's fused kernels)
    "Conv": "conv2d", "FusedConv": "conv2d", "QLinearConv": "conv2d", "Gemm": "fc", "FusedGemm": "fc",
    "MatMul": "fc", "QGemm": "fc", "GlobalAveragePool": "global_avgpool", "QLinearGlobalAveragePool": "global_avgpool",
    "MaxPool": "maxpool", "AveragePool": "avgpool", "QLinearAveragePool": "avgpool", "Relu": "relu", "Clip": "clip",
    "HardSigmoid": "hsigmoid", "HardSwish": "hswish", "Sigmoid": "sigmoid", "Tanh": "tanh", "LeakyRelu": "leaky_relu",
    "PRelu": "prelu", "Softmax": "softmax", "Add": "add", "Mul": "mul", "Sub": "sub", "Div": "div",
    "QLinearAdd": "add", "QLinearMul": "mul", "Concat": "concat", "QLinearConcat": "concat", "Split": "split",
    "Flatten": "flatten", "Reshape": "reshape", "Transpose": "transpose", "Pad": "pad", "Resize": "upsample",
    "BatchNormalization": "batchnorm", "Slice": "slice", "ReorderInput": "reorder", "ReorderOutput": "reorder",
    "QuantizeLinear": "quantize", "DequantizeLinear": "dequantize", "LRN": "lrn", "Gather": "gather",
}

# ops whose output has the shape of their (first data) input: the output columns copy the input's
_SHAPE_KEEPING = {"relu", "relu6", "clip", "hswish", "hsigmoid", "swish", "sigmoid", "tanh", "leaky_relu", "prelu",
                  "batchnorm", "add", "mul", "sub", "div", "maximum", "minimum", "quantize", "dequantize",
                  "channel_shuffle", "lrn"}
CONVOLUTIONS = ("conv2d", "dwconv2d", "group_conv2d")


def op_type(framework_op: str) -> str:
    """The framework-neutral type of an op name (see the module doc for the fallback)."""
    if framework_op in OP_TYPES:
        return OP_TYPES[framework_op]
    bare = framework_op.split("::")[-1].rstrip("_").lower()
    return OP_TYPES.get(f"aten::{bare}", bare)


def conv_type(groups: int | None, in_channels: int | None, out_channels: int | None) -> str:
    if not groups or groups <= 1:
        return "conv2d"
    return "dwconv2d" if groups == in_channels == out_channels else "group_conv2d"


def _square(h: Any, w: Any) -> int | None:
    """A square size (the schema's ``*_hw`` columns), else None (the shape stays in config)."""
    return int(h) if h is not None and h == w else None


# ---------------------------------------------------------------- TFLite
@dataclass
class TfliteNode:
    """One operator of a .tflite file: its builtin name, tensor shapes, options."""

    index: int
    name: str
    inputs: list[list[int] | None]  # shapes (None: an optional input left out, index -1)
    outputs: list[list[int]]
    const: list[bool]  # per input: a constant (weights, bias, scalar operand)
    options: dict[str, Any] = field(default_factory=dict)
    output_names: list[str] = field(default_factory=list)  # the output tensors' names (the converter's)

    def data_inputs(self) -> list[list[int]]:
        """Shapes of the non-constant inputs (the feature maps), in order."""
        return [s for s, c in zip(self.inputs, self.const) if s is not None and not c]


class TfliteReadError(ValueError):
    """A .tflite file that cannot be read (one line naming the file)."""


@functools.lru_cache(maxsize=1)
def _tfl_schema() -> tuple[Any, dict[int, str], dict[int, str], dict[int, str]]:
    from ai_edge_litert import schema_py_generated as s

    def names(enum: Any) -> dict[int, str]:
        return {v: k for k, v in vars(enum).items() if not k.startswith("_") and isinstance(v, int)}

    return s, names(s.BuiltinOperator), names(s.Padding), names(s.ActivationFunctionType)


def _options(s: Any, op: Any, padding: dict[int, str], act: dict[int, str]) -> dict[str, Any]:
    """The builtin options of one operator that matter for its cost (stride, window, padding)."""
    table = op.BuiltinOptions()
    if table is None:
        return {}

    def conv(o: Any) -> dict[str, Any]:
        return {"stride": [o.StrideH(), o.StrideW()], "padding": padding.get(o.Padding()),
                "dilation": [o.DilationHFactor(), o.DilationWFactor()]}

    def activation(o: Any) -> dict[str, Any]:
        return {"activation": act.get(o.FusedActivationFunction())}

    B = s.BuiltinOptions
    # options type -> (flatbuffer table class, what to read from it)
    readers: dict[int, tuple[Any, Callable[[Any], dict[str, Any]]]] = {
        B.Conv2DOptions: (s.Conv2DOptions, lambda o: {**conv(o), **activation(o)}),
        B.DepthwiseConv2DOptions: (s.DepthwiseConv2DOptions,
                                   lambda o: {**conv(o), "depth_multiplier": o.DepthMultiplier(), **activation(o)}),
        B.Pool2DOptions: (s.Pool2DOptions, lambda o: {
            "stride": [o.StrideH(), o.StrideW()], "padding": padding.get(o.Padding()),
            "window": [o.FilterHeight(), o.FilterWidth()], **activation(o)}),
        B.FullyConnectedOptions: (s.FullyConnectedOptions, activation),
        B.BatchMatMulOptions: (s.BatchMatMulOptions, lambda o: {"adj_x": bool(o.AdjX()), "adj_y": bool(o.AdjY())}),
        B.AddOptions: (s.AddOptions, activation),
        B.MulOptions: (s.MulOptions, activation),
        B.ConcatenationOptions: (s.ConcatenationOptions, lambda o: {"axis": o.Axis(), **activation(o)}),
    }
    kind = op.BuiltinOptionsType()
    if kind not in readers:
        return {}
    cls, read = readers[kind]
    o = cls()
    o.Init(table.Bytes, table.Pos)
    out = read(o)
    if out.get("activation") == "NONE":
        out.pop("activation")
    return out


def read_tflite_ops(path: str | Path) -> list[TfliteNode]:
    """The operators of subgraph 0 of a .tflite file (index = the runtime's node index)."""
    path = Path(path)
    try:
        buf = path.read_bytes()
    except OSError as e:
        raise TfliteReadError(f"{path}: cannot read: {e.strerror}") from None
    s, op_names, padding, act = _tfl_schema()
    try:
        m = s.Model.GetRootAs(buf, 0)
        codes = []
        for i in range(m.OperatorCodesLength()):
            c = m.OperatorCodes(i)
            code = max(c.BuiltinCode(), c.DeprecatedBuiltinCode())
            codes.append(op_names.get(code, f"BUILTIN_{code}") if code != s.BuiltinOperator.CUSTOM
                         else f"CUSTOM:{c.CustomCode().decode()}")
        sg = m.Subgraphs(0)
        shapes = [[int(v) for v in sg.Tensors(i).ShapeAsNumpy()] if sg.Tensors(i).ShapeLength() else []
                  for i in range(sg.TensorsLength())]
        names = [(sg.Tensors(i).Name() or b"").decode("utf-8", "replace") for i in range(sg.TensorsLength())]

        def is_const(t: int) -> bool:
            b = sg.Tensors(t).Buffer()
            if b <= 0 or b >= m.BuffersLength():
                return False
            bb = m.Buffers(b)
            return bb.DataLength() > 0 or bb.Size() > 0

        nodes = []
        for i in range(sg.OperatorsLength()):
            o = sg.Operators(i)
            ins = [int(v) for v in o.InputsAsNumpy()] if o.InputsLength() else []
            outs = [int(v) for v in o.OutputsAsNumpy()] if o.OutputsLength() else []
            nodes.append(TfliteNode(i, codes[o.OpcodeIndex()], [shapes[t] if t >= 0 else None for t in ins],
                                    [shapes[t] for t in outs], [t >= 0 and is_const(t) for t in ins],
                                    _options(s, o, padding, act), [names[t] for t in outs]))
    except Exception as e:  # noqa: BLE001 - a malformed flatbuffer raises anything from struct to IndexError
        raise TfliteReadError(f"{path}: not a readable .tflite flatbuffer ({type(e).__name__}: {e})") from None
    return nodes


def _chw(shape: list[int] | None, c: int, h: int, w: int) -> tuple[int | None, int | None, int | None]:
    """(channels, height, width) of a rank-4 feature map whose axes ``c``, ``h``, ``w`` hold them;
    a 2-D [N, C] tensor has only channels; any other rank, none."""
    if not shape:
        return None, None, None
    if len(shape) == 4:
        return shape[c], shape[h], shape[w]
    if len(shape) == 2:
        return shape[1], None, None
    return None, None, None


def _nhwc(shape: list[int] | None) -> tuple[int | None, int | None, int | None]:
    """(channels, height, width) of an NHWC feature map (TFLite)."""
    return _chw(shape, 3, 1, 2)


def _same_padding(in_size: int | None, out_size: int | None, k: int | None, stride: int | None,
                  dilation: int = 1) -> int | None:
    """The leading padding TFLite's SAME mode applies (total = max((out-1)*s + d*(k-1)+1 - in, 0))."""
    if None in (in_size, out_size, k, stride):
        return None
    total = max((out_size - 1) * stride + dilation * (k - 1) + 1 - in_size, 0)
    return total // 2


# builtins whose columns describe their own shapes (windows over feature maps, products)
_SHAPED = ("CONV_2D", "DEPTHWISE_CONV_2D", "AVERAGE_POOL_2D", "MAX_POOL_2D", "FULLY_CONNECTED", "BATCH_MATMUL")


def tflite_features(node: TfliteNode) -> dict[str, Any]:
    """The ``ops`` columns of one TFLite node (shapes NHWC; see the module doc)."""
    data = node.data_inputs()
    x = data[0] if data else next((s for s in node.inputs if s), None)
    y = node.outputs[0] if node.outputs else None
    cin, ih, iw = _nhwc(x)
    cout, oh, ow = _nhwc(y)
    t = op_type(node.name)
    out: dict[str, Any] = {"in_channels": cin, "in_hw": _square(ih, iw), "out_channels": cout,
                           "out_hw": _square(oh, ow)}
    opts = node.options
    stride = opts.get("stride")
    stride = stride[0] if stride and stride[0] == stride[1] else None
    if node.name in ("CONV_2D", "DEPTHWISE_CONV_2D"):
        w = node.inputs[1] if len(node.inputs) > 1 else None
        if w and len(w) == 4:
            kh, kw = w[1], w[2]
            groups = (cin // w[3] if cin and w[3] and cin % w[3] == 0 else None) if node.name == "CONV_2D" else cin
            out.update(kernel=_square(kh, kw), groups=groups)
            t = conv_type(groups, cin, cout)
            dil = (opts.get("dilation") or [1, 1])[0]
            out["padding"] = (0 if opts.get("padding") == "VALID"
                              else _same_padding(ih, oh, kh, stride, dil) if opts.get("padding") == "SAME" else None)
        out["stride"] = stride
    elif node.name in ("AVERAGE_POOL_2D", "MAX_POOL_2D"):
        win = opts.get("window")
        k = _square(*win) if win else None
        out.update(kernel=k, stride=stride, padding=(0 if opts.get("padding") == "VALID" else
                                                     _same_padding(ih, oh, k, stride) if opts.get("padding") == "SAME"
                                                     else None))
    elif node.name == "MEAN":
        # a mean over H and W to 1x1 is the global average pool; any other mean keeps its own type
        t = "global_avgpool" if (y and len(y) == 4 and y[1] == y[2] == 1 and ih and ih > 1) or \
            (y and len(y) == 2 and ih) else "mean"
    elif node.name == "FULLY_CONNECTED":
        w = node.inputs[1] if len(node.inputs) > 1 else None
        if w and len(w) == 2:
            out.update(in_channels=w[1], out_channels=w[0], in_hw=None, out_hw=None)
            rows = _numel(x) // w[1] if x and w[1] else 1
            if rows > 1:  # over tokens: the rows in `kernel`, as generators.ops.op_config has them
                out["kernel"] = rows
    elif node.name == "BATCH_MATMUL" and x and y and len(y) >= 2 and len(x) >= 2:
        # [b, M, K] x [b, K, N] -> [b, M, N] (adj_x: x is [b, K, M]): K, N, rows M, batch b
        k = x[-2] if opts.get("adj_x") else x[-1]
        out.update(in_channels=k, in_hw=1, out_channels=y[-1], out_hw=1, kernel=y[-2], groups=_numel(y[:-2]))
    if node.name not in _SHAPED:
        # a tensor that is no square feature map (tokens [1, N, C], attention [1, h, N, d],
        # MobileViT's rank-5 and -6 patch groups) is its element count of channels at 1 px, as in
        # the IR (a vector [1, F] keeps its F channels)
        for side, shape in (("in", x), ("out", y)):
            if shape and len(shape) >= 3 and not (len(shape) == 4 and shape[1] == shape[2]):
                out.update({f"{side}_channels": _numel(shape[1:]), f"{side}_hw": 1})
    out["op_type"] = t
    return out


def _numel(shape: list[int]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


# ---------------------------------------------------------------- PyTorch
def _nchw(shape: list[int] | None) -> tuple[int | None, int | None, int | None]:
    """(channels, height, width) of an NCHW feature map (PyTorch)."""
    return _chw(shape, 1, 2, 3)


# ONNX Runtime's node inputs: where a weight sits among them (x, W, B for Conv; QLinearConv's
# x, x_scale, x_zero_point, W, ...), and the layout of a fully connected node's weight
_ONNX_WEIGHT = {"Conv": 1, "FusedConv": 1, "QLinearConv": 3, "Gemm": 1, "FusedGemm": 1, "QGemm": 3, "MatMul": 1}


def onnx_features(name: str, input_shapes: list[list[int]] | None,
                  output_shapes: list[list[int]] | None = None) -> dict[str, Any]:
    """The ``ops`` columns of one node ONNX Runtime's profiler timed (``name`` its op type) from
    the node's input shapes, the weight's included (``[out, in/groups, kh, kw]``: out channels,
    kernel, groups; a fully connected node whose weight ONNX Runtime prepacked reports its bias
    instead), and its output shapes where the record has them (out size and stride; older
    records do not). NCHWc nodes report the logical NCHW shapes."""
    shapes = [s for s in (input_shapes or []) if isinstance(s, list)]
    x = shapes[0] if shapes else None
    t = op_type(name)
    cin, ih, iw = _nchw(x) if x is not None and len(x) == 4 else (x[1] if x is not None and len(x) == 2 else None,
                                                                  None, None)
    out: dict[str, Any] = {"in_channels": cin, "in_hw": _square(ih, iw)}
    k = _ONNX_WEIGHT.get(name)
    w = shapes[k] if k is not None and len(shapes) > k else None
    if t == "conv2d" and w is not None and len(w) == 4:
        groups = cin // w[1] if cin and w[1] and cin % w[1] == 0 else None
        out.update(out_channels=w[0], kernel=_square(w[2], w[3]), groups=groups)
        t = conv_type(groups, cin, w[0])
    elif t == "fc":
        bias = [s for s in shapes[1:] if len(s) == 1]
        if w is not None and len(w) == 2 and cin is not None:  # Gemm's W is [out, in] (transB) or [in, out]
            out["out_channels"] = w[0] if w[1] == cin else w[1]
        elif bias:  # a prepacked weight is not among the inputs the profiler reports; the bias is
            out["out_channels"] = bias[-1][0]
        out["in_hw"] = None
    elif t == "global_avgpool":
        out.update(out_channels=cin, out_hw=1)
    elif t in ("avgpool", "maxpool"):
        out["out_channels"] = cin
    elif t in _SHAPE_KEEPING or t == "reorder":
        out.update(out_channels=cin, out_hw=out["in_hw"])
    y = next((s for s in (output_shapes or []) if isinstance(s, list)), None)
    if y is not None and len(y) == 4:
        _, oh, ow = _nchw(y)
        out.update(out_channels=y[1], out_hw=_square(oh, ow))
        if t in (*CONVOLUTIONS, "avgpool", "maxpool") and out["in_hw"] and out["out_hw"]:
            out["stride"] = max(1, round(out["in_hw"] / out["out_hw"]))
    out["op_type"] = t
    return out


def torch_features(name: str, input_shapes: list[list[int]] | None) -> dict[str, Any]:
    """The ``ops`` columns of one profiled torch operator from the argument shapes the profiler
    recorded (``record_shapes``): the input NCHW and, for float convolutions and linear
    layers, the weight. Non-tensor arguments (stride, padding, ...) are recorded as ``[]``,
    so stride, padding and the output size are not known here (left missing); quantized
    convolutions carry their weight packed, so only the input side is known."""
    shapes = [s for s in (input_shapes or []) if isinstance(s, list)]
    x = shapes[0] if shapes else None
    t = op_type(name)
    cin, ih, iw = _nchw(x)
    out: dict[str, Any] = {"in_channels": cin, "in_hw": _square(ih, iw)}
    if t == "conv2d" and len(shapes) > 1 and len(shapes[1]) == 4:
        w = shapes[1]
        groups = cin // w[1] if cin and w[1] and cin % w[1] == 0 else None
        out.update(out_channels=w[0], kernel=_square(w[2], w[3]), groups=groups)
        t = conv_type(groups, cin, w[0])
    elif t == "fc":
        if name == "aten::addmm" and len(shapes) > 2 and len(shapes[2]) == 2:  # bias, x, weight^T
            out.update(in_channels=shapes[2][0], out_channels=shapes[2][1])
        elif len(shapes) > 1 and len(shapes[1]) == 2:  # x, weight [out, in]
            out.update(in_channels=shapes[1][1], out_channels=shapes[1][0])
        out["in_hw"] = None
    elif t == "global_avgpool":
        out.update(out_channels=cin, out_hw=1)
    elif t in ("avgpool", "maxpool"):
        out["out_channels"] = cin
    elif t in _SHAPE_KEEPING:
        out.update(out_channels=cin, out_hw=out["in_hw"])
    out["op_type"] = t
    return out


# ---------------------------------------------------------------- kernels
_XNN_NAME = re.compile(r"^(?P<op>[A-Za-z][A-Za-z0-9 ]*?)\s*\((?P<layout>[^)]*)\)\s*(?P<variant>.*)$")


def xnnpack_kernel_type(name: str) -> str:
    """An XNNPACK operator name without its variant details: the operator, lower case, words
    joined by ``_`` (``Convolution (NHWC, F32) IGEMM`` -> ``convolution``, ``Fully Connected
    (NC, QD8, F32, QC8W) GEMM`` -> ``fully_connected``). Layout, data types and the selected
    micro-kernel family stay in ``kernel_name``."""
    m = _XNN_NAME.match(name.strip())
    op = m.group("op") if m else name
    return "_".join(op.lower().split())


def builtin_kernel_type(name: str) -> str:
    """A TFLite node the runtime executed with its builtin kernel: its op name, lower case."""
    return name.strip().lower()


def gpu_kernel_type(entry: dict[str, Any]) -> str:
    """A GPU command of the host's kernel records: its ``kernel_kind`` (pipelines/gpu/programs.py:
    ``conv``, ``winograd_matmul``, ``layout_in``, ``copy``, ...) followed by the operations fused
    into it, in the order the program applies them, joined by ``+`` (``conv+bias+clamp+add``),
    as the USC kernel types join theirs. A record made before the kinds were labelled has the
    layer's command kind only (``dispatch`` or ``copy``), so it never passes for a labelled one."""
    kind = entry.get("kernel_kind") or entry.get("kind") or "dispatch"
    return "+".join([str(kind), *(str(f) for f in entry.get("fused") or [])])


def _by_name(rule: Callable[[str], str]) -> Callable[[dict[str, Any]], str]:
    return lambda entry: rule(str(entry["name"]))


KERNEL_TYPES: dict[str, Callable[[dict[str, Any]], str]] = {
    "xnnpack": _by_name(xnnpack_kernel_type),
    "builtin": _by_name(builtin_kernel_type),
    "gpu": gpu_kernel_type,
}


def kernel_type(entry: dict[str, Any]) -> str:
    """``kernels.kernel_type`` of one aggregated kernel entry (``kernel.kernels[i]`` of a record),
    by its ``source``; a source this code does not know yet gets its name in lower case."""
    return KERNEL_TYPES.get(entry.get("source") or "", _by_name(builtin_kernel_type))(entry)
