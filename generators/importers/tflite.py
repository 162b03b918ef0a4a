"""Import TFLite (LiteRT) flatbuffers into the architecture IR.

``import_tflite(path_or_bytes, input_shape=None, name=None)`` reads the flatbuffer with the
schema module of the ``ai-edge-litert`` wheel (no TensorFlow) and walks the operators of the main
subgraph in order. Constant tensors are read lazily: weights only for their shapes, a few small
ones for their values. Each IR node is named after the output tensor of its operator.

TFLite is NHWC, the IR NCHW: the importer tracks, for each tensor, the permutation between its
TFLite axes and its IR axes, so ``TRANSPOSE`` costs nothing in the IR and axis arguments map to
IR axes; a ``RESHAPE`` of a tensor whose IR axes are in another order is an IR ``transpose`` to
the TFLite order, then the ``reshape``, and one that only moves unit axes relabels them. A
rank-4 input that every reader transposes NCHW -> NHWC, directly or after a ``PAD`` (a PyTorch
model as litert-torch writes it), is NCHW itself. A free batch resolves to 1; other free dimensions need
``input_shape`` (the IR's layout). Each builtin operator (and the converters' patterns for batch
norm, h-swish, swish, clip, channel shuffle, a max pool's padding by -inf and litert-torch's
local response norm and written-out softmax) maps to one IR operator or vanishes; anything else raises
:class:`UnsupportedModelError`, one line naming the model, the operator's index, its output
tensor and its builtin name. Bounds (:mod:`foundation.limits`) are checked before anything is
imported (:func:`check_tflite`). docs/generators.md (*TFLite importer*) has the layout rules,
the mapping and the bounds in full.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np

from ..ir import Graph
from .common import Unsupported as _Unsupported
from .common import UnsupportedModelError, finish, handler_registry, materialized, node_errors, prelu_parameters
from .common import check_bytes, check_elements, check_graph_nodes, quoted, read_model_file, reciprocal
from .common import too_many_elements, unique_name
from .onnx import f32, learned_like, match_pool, slice_as_split, symmetric_conv_padding

__all__ = ["import_tflite", "UnsupportedModelError"]

_ACTIVATIONS = {0: None, 1: "relu", 2: "relu_n1_to_1", 3: "relu6", 4: "tanh", 5: "sign_bit"}
_DTYPES = {"FLOAT32": np.float32, "FLOAT16": np.float16, "FLOAT64": np.float64, "INT32": np.int32, "INT64": np.int64,
           "INT8": np.int8, "UINT8": np.uint8, "INT16": np.int16, "BOOL": np.bool_}
_QUANTIZED = {"INT8", "UINT8", "INT16"}
_LOWEST = float(np.finfo(np.float32).min)  # a pad value this low (or -inf) never wins a max: a max pool's padding


def _schema():
    from ai_edge_litert import schema_py_generated as s

    return s


def _canonical(rank: int) -> tuple[int, ...]:
    """TFLite axis i holds IR axis perm[i]: NHWC <-> NCHW for rank 4, identity otherwise."""
    return (0, 2, 3, 1) if rank == 4 else tuple(range(rank))


def _order(shape: tuple[int, ...], perm: tuple[int, ...]) -> tuple[int, ...]:
    """The IR axes in memory order of the TFLite tensor, unit axes left out."""
    return tuple(p for p in perm if shape[p] != 1)


# ---------------------------------------------------------------- values
@dataclass(frozen=True)
class _V:
    """A computed tensor: IR reference and shape, and ``perm`` (TFLite axis i = IR axis
    perm[i]). A pending value (a ``PAD`` awaiting its conv, ``x + 3`` inside an h-sigmoid)
    has no IR node yet: ``ref`` is the tensor it derives from, ``data`` its parameters."""

    ref: str
    shape: tuple[int, ...]
    perm: tuple[int, ...]
    pending: str | None = None
    data: tuple = ()
    origin: tuple[int, ...] = ()

    @property
    def tfl_shape(self) -> list[int]:
        return [self.shape[p] for p in self.perm]


_PENDING_WHAT = {
    "mirror": "a MIRROR_PAD not followed by a max pool (the IR has no mirror padding)",
    "lrn": "the squares of a local response norm outside its pattern",
    "neg_padded": "a PAD by -inf not followed by a VALID max pool that takes it as its padding (the IR pads with finite values)",
    "relu6_plus3": "relu6(x + 3) not multiplied by 1/6 (h-sigmoid pattern)",
    "x_relu6_plus3": "x * relu6(x + 3) not multiplied by 1/6 (h-swish pattern)",
    "min": "a MINIMUM by a scalar outside a clip pattern (MINIMUM + MAXIMUM or RELU)",
    "max": "a MAXIMUM by a scalar outside a clip pattern (MAXIMUM + MINIMUM)",
    "grouped": "a RESHAPE to a channel-grouped view outside a channel-shuffle pattern",
    "shuffled": "a TRANSPOSE of a channel-grouped view outside a channel-shuffle pattern",
    "rows": "an image's pixels as rows [H*W, C] outside a Dense-over-channels pattern (RESHAPE, FULLY_CONNECTED, RESHAPE)",
}
#: the pending steps of a layer norm (see _layer_norm_step)
_LN_WHAT = {
    "ln_negmean": "NEG of a mean outside a layer-norm pattern",
    "ln_sqdiff": "SQUARED_DIFFERENCE outside a layer-norm pattern (the IR has no squared difference)",
    "ln_var": "a variance outside a layer-norm pattern",
    "ln_var_eps": "variance + epsilon outside a layer-norm pattern",
    "ln_rstd": "RSQRT outside a layer-norm pattern (the IR has no reciprocal square root)",
    "ln_g": "a layer norm's scale outside its pattern",
    "ln_shift": "a layer norm's shift outside its pattern",
    "ln_shift_b": "a layer norm's shift outside its pattern",
    "ln_scaled": "a layer norm's scaled input outside its pattern",
    "ln_centered": "x minus its mean outside a layer-norm pattern (the IR has no element-wise sub)",
    "in_centered": "x minus its mean over H and W outside an instance-norm pattern (the IR has no element-wise sub)",
    "in_sq": "the square of a centred map outside an instance-norm pattern",
    "in_var": "a variance over H and W outside an instance-norm pattern",
    "in_var_eps": "a variance over H and W plus epsilon outside an instance-norm pattern",
    "in_rstd": "RSQRT outside an instance-norm pattern (the IR has no reciprocal square root)",
}
_PENDING_WHAT.update(_LN_WHAT)


class _Const:
    """A constant tensor: shape now, values on demand (``raw`` as stored, ``real`` dequantized)."""

    def __init__(self, reader: "_Reader" = None, index: int = -1, value: np.ndarray | None = None):
        self._reader, self._index = reader, index
        self._value = value

    @property
    def shape(self) -> tuple[int, ...]:
        if self._value is not None:
            return tuple(self._value.shape)
        return tuple(self._reader.tensors[self._index].shape)

    @property
    def raw(self) -> np.ndarray:
        if self._value is None:
            self._value = self._reader.const_value(self._index)
        return self._value

    @property
    def real(self) -> np.ndarray:
        if self._reader is None or self._index < 0:
            return self.raw.astype(np.float64)
        return self._reader.dequantized(self._index, self.raw)


@dataclass
class _Tensor:
    name: str
    shape: list[int]
    signature: list[int] | None
    dtype: str
    buffer: int
    variable: bool


class _Reader:
    """The flatbuffer: tensors, operators, constant data (read lazily)."""

    def __init__(self, buf: bytes, model: str):
        s = _schema()
        self.s, self.buf, self.model = s, buf, model
        self.m = s.Model.GetRootAs(buf, 0)
        if self.m.SubgraphsLength() < 1:
            raise UnsupportedModelError(f"{model}: the model has no subgraph")
        names = {v: k for k, v in vars(s.BuiltinOperator).items() if not k.startswith("_") and isinstance(v, int)}
        types = {v: k for k, v in vars(s.TensorType).items() if not k.startswith("_") and isinstance(v, int)}
        self.codes = []
        for i in range(self.m.OperatorCodesLength()):
            oc = self.m.OperatorCodes(i)
            code = max(oc.BuiltinCode(), oc.DeprecatedBuiltinCode())
            if code == s.BuiltinOperator.CUSTOM:
                self.codes.append(f"CUSTOM:{(oc.CustomCode() or b'').decode(errors='replace')}")
            else:
                self.codes.append(names.get(code, f"BUILTIN_{code}"))
        self.sg = self.m.Subgraphs(0)
        self.tensors = []
        for i in range(self.sg.TensorsLength()):
            t = self.sg.Tensors(i)
            sig = [int(v) for v in t.ShapeSignatureAsNumpy()] if t.ShapeSignatureLength() else None
            self.tensors.append(_Tensor(
                name=(t.Name() or b"").decode(errors="replace"),
                shape=[int(v) for v in t.ShapeAsNumpy()] if t.ShapeLength() else [],
                signature=sig, dtype=types.get(t.Type(), str(t.Type())), buffer=t.Buffer(), variable=bool(t.IsVariable()),
            ))

    def buffer_bytes(self, index: int) -> bytes | None:
        b = self.tensors[index].buffer
        if b <= 0 or b >= self.m.BuffersLength() or self.tensors[index].variable:
            return None
        bb = self.m.Buffers(b)
        if bb.DataLength() > 0:
            return bb.DataAsNumpy().tobytes()
        if bb.Offset() > 1 and bb.Size() > 0:  # large models keep buffers after the flatbuffer
            return self.buf[bb.Offset(): bb.Offset() + bb.Size()]
        return None

    def is_const(self, index: int) -> bool:
        """The tensor has data (checked without copying it: weights are only read for shapes)."""
        b = self.tensors[index].buffer
        if b <= 0 or b >= self.m.BuffersLength() or self.tensors[index].variable:
            return False
        bb = self.m.Buffers(b)
        return bb.DataLength() > 0 or (bb.Offset() > 1 and bb.Size() > 0)

    def const_value(self, index: int) -> np.ndarray:
        t = self.tensors[index]
        dtype = _DTYPES.get(t.dtype)
        if dtype is None:
            raise _Unsupported(f"a constant of type {t.dtype} ({t.name!r})")
        data = np.frombuffer(self.buffer_bytes(index), dtype=dtype)
        return data.reshape(t.shape) if t.shape else data.reshape(())

    def dequantized(self, index: int, raw: np.ndarray) -> np.ndarray:
        t = self.tensors[index]
        q = self.sg.Tensors(index).Quantization()
        if t.dtype not in _QUANTIZED or q is None or q.ScaleLength() == 0:
            return raw.astype(np.float64)
        scale = q.ScaleAsNumpy().astype(np.float64)
        zp = q.ZeroPointAsNumpy().astype(np.float64) if q.ZeroPointLength() else np.zeros_like(scale)
        if scale.size > 1 and raw.ndim:
            shape = [1] * raw.ndim
            shape[q.QuantizedDimension()] = scale.size
            scale, zp = scale.reshape(shape), zp.reshape(shape)
        return (raw.astype(np.float64) - zp) * scale

    def options(self, op: Any) -> Any:
        return self.s.BuiltinOptionsCreator(op.BuiltinOptionsType(), op.BuiltinOptions())


# ---------------------------------------------------------------- the walker
class _Converter:
    def __init__(self, g: Graph, model: str, reader: _Reader):
        self.g, self.model, self.r = g, model, reader
        self.env: dict[int, Any] = {}
        self.index = -1
        self.label = ""
        self.origins: dict[str, tuple[int, ...]] = {}
        self.readers: dict[int, list[tuple[int, int]]] = {}  # tensor -> (op index, input position)
        self.outputs: set[int] = set()
        self.ops: list[tuple[str, list[int], list[int], Any]] = []
        self.absorbed: dict[int, Any] = {}  # op index -> value its output is (folded into an earlier op)
        # op index -> the value of its output, computed by an earlier op that matched a pattern
        # of which this op is part (None: an output read only inside the pattern)
        self.replaced: dict[int, Any] = {}
        self._materialized: dict[_V, str] = {}
        self.split_cache: dict[tuple, list[str]] = {}

    def _name(self, base: str) -> str:
        return unique_name(self.g, base)

    def label_of(self, index: int) -> str:
        name, _, outs, _ = self.ops[index]
        t = self.r.tensors[outs[0]].name.split(";")[0] if outs else ""
        return t or f"{name.lower()}_{index}"

    def add(self, op: str, refs: list[str], origin: tuple[int, ...] | None = None, suffix: str = "", **attrs) -> str:
        origin = origin or (self.index,)
        ref = self.g.add(op, refs, name=self._name(self.label_of(origin[-1]) + suffix), **attrs)
        self.origins[ref] = origin
        return ref

    def t(self, v: Any) -> str:
        """The IR reference of a tensor value (materialising a pending pattern)."""
        if isinstance(v, _Const) or v is None:
            raise _Unsupported("a constant tensor where the IR needs a computed one (the IR has no weights)")
        return materialized(self._materialized, v, self._end_pattern)

    def _end_pattern(self, v: _V) -> str:
        """The IR node a pending pattern ends in when an operator outside it reads it."""
        if v.pending == "padded":
            t, b, l, r, value = v.data
            return self.add("pad", [v.ref], v.origin, pads=[t, b, l, r], value=float(value))
        if v.pending == "affine":
            return self.add("batchnorm", [v.ref], v.origin, eps=0.0)
        if v.pending == "plus3":  # x + 3 that no h-sigmoid/h-swish pattern continues
            return self.add("shift", [v.ref], v.origin, value=3.0)
        if v.pending == "max" and v.data[0] == 0.0:
            return self.add("relu", [v.ref], v.origin)
        if v.pending == "ln_mean":  # a mean over the last axis that no layer norm follows
            return self.add("mean", [v.ref], v.origin, axis=v.data[0], keepdim=True)
        if v.pending in ("ln_normed", "ln_normed_g"):  # no (further) gain or shift: folded into the reader
            return self.add("layernorm", [v.ref], v.origin, axis=v.data[0], eps=v.data[1])
        if v.pending == "in_mean":  # a mean over H and W that no instance norm follows
            return self.add("global_avgpool", [v.ref], v.origin)
        if v.pending in ("in_normed", "in_normed_g"):  # a gain of ones and a shift of zeros, dropped
            return self.add("instancenorm", [v.ref], v.origin, eps=v.data[0])
        raise _Unsupported(_PENDING_WHAT[v.pending])

    def new(self, op: str, inputs: list[Any] | Any, perm: tuple[int, ...] | None = None, origin: tuple[int, ...] | None = None,
            suffix: str = "", **attrs) -> _V:
        xs = inputs if isinstance(inputs, list) else [inputs]
        ref = self.add(op, [self.t(x) for x in xs], origin, suffix, **attrs)
        shape = tuple(self.g.shape(ref))
        return _V(ref, shape, perm if perm is not None and len(perm) == len(shape) else _canonical(len(shape)))

    def plain(self, v: Any) -> _V:
        ref = self.t(v)
        return _V(ref, tuple(self.g.shape(ref)), v.perm)

    def sole(self, tensor: int) -> bool:
        return len(self.readers.get(tensor, [])) == 1 and tensor not in self.outputs

    def only_reader(self, tensor: int) -> tuple[str, int, int] | None:
        """(op name, op index, input position) of the sole reader of ``tensor``, if any."""
        if not self.sole(tensor):
            return None
        i, pos = self.readers[tensor][0]
        return self.ops[i][0], i, pos


def _std(c: _Converter, v: Any, what: str = "") -> _V:
    """``v`` as a tensor in its rank's standard layout (NHWC for rank 4, the plain order else):
    as it is when its layout is that already (or differs in unit axes only), else through an IR
    ``transpose`` whose result has the standard layout and the same TFLite order."""
    if not isinstance(v, _V):
        raise _Unsupported(f"a constant {what or 'operand'} where a computed tensor is needed (the IR has no weights)")
    canon = _canonical(len(v.shape))
    if v.perm == canon or _order(v.shape, v.perm) == _order(v.shape, canon):
        return v if v.perm == canon else _V(v.ref, v.shape, canon, v.pending, v.data, v.origin)
    q = [0] * len(canon)  # IR axis canon[i] of the result is IR axis perm[i] of v (TFLite axis i of both)
    for i, axis in enumerate(canon):
        q[axis] = v.perm[i]
    return _transposed(c, v, q, "/order", canon)


def _act(c: _Converter, v: _V, code: int) -> _V:
    kind = _ACTIVATIONS.get(code, f"code {code}")
    if kind is None:
        return v
    if kind == "relu6" and v.pending == "plus3":
        return _V(v.ref, v.shape, v.perm, "relu6_plus3", (), v.origin)
    if kind == "relu" and v.pending == "min":
        return c.new("clip", _V(v.ref, v.shape, v.perm), v.perm, suffix="/relu", min=0.0, max=v.data[0])
    if kind in ("relu", "relu6", "tanh"):
        return c.new(kind, v, v.perm, suffix=f"/{kind}")
    if kind == "relu_n1_to_1":
        return c.new("clip", v, v.perm, suffix="/clip", min=-1.0, max=1.0)
    raise _Unsupported(f"fused activation {kind}")


def _int_list(v: Any, what: str) -> list[int]:
    if not isinstance(v, _Const):
        raise _Unsupported(f"{what} must be a constant")
    return [int(x) for x in v.raw.reshape(-1)]


def _scalar(v: Any) -> float | None:
    if isinstance(v, _Const) and math.prod(v.shape) == 1:
        return float(v.real.reshape(-1)[0])
    return None


# ---------------------------------------------------------------- handlers
# (converter, op index, inputs (values or None), input tensor indices, output tensor indices, options)
Handler = Callable[..., Any]
HANDLERS: dict[str, Handler]
HANDLERS, _handler = handler_registry()


def _tf_same(size: int, k: int, s: int, d: int = 1) -> tuple[int, int]:
    eff = d * (k - 1) + 1
    out = -(-size // s)
    total = max((out - 1) * s + eff - size, 0)
    return total // 2, total - total // 2


def _window_pads(c: _Converter, x: _V, padding: int, kernel: list[int], stride: list[int], dilation: list[int],
                 fold: str | None) -> tuple[_V, list[int], list[int]]:
    """(input, before, after) of a windowed op: TF SAME/VALID, and a pending pad folded in
    (``fold``: the pending kind this op takes, or None)."""
    s = c.r.s
    if padding == s.Padding.SAME:
        if x.pending in ("padded", "mirror", "neg_padded"):
            x = c.plain(x)
        pads = [_tf_same(x.shape[2 + i], kernel[i], stride[i], dilation[i]) for i in range(2)]
        return x, [p[0] for p in pads], [p[1] for p in pads]
    if x.pending is not None and x.pending == fold and (fold != "padded" or x.data[4] == 0.0):
        t, b, l, r = x.data[:4]
        base = _V(x.ref, tuple(c.g.shape(x.ref)), x.perm)
        return base, [t, l], [b, r]
    if x.pending is not None:
        x = c.plain(x)
    return x, [0, 0], [0, 0]


def _bias_of(c: _Converter, ins: list[Any]) -> bool:
    b = ins[2] if len(ins) > 2 else None
    if b is None:
        return False
    if not isinstance(b, _Const):
        raise _Unsupported("a bias computed from the input")
    return bool(np.any(b.raw != 0))  # the converter gives a bias-less conv an all-zero bias


@_handler("CONV_2D", "DEPTHWISE_CONV_2D")
def _conv(c: _Converter, i, ins, tin, tout, o):
    name = c.ops[i][0]
    x, w = ins[0], ins[1]
    if not isinstance(w, _Const) or len(w.shape) != 4:
        raise _Unsupported("a filter that is not a constant 4-d tensor")
    x = _std(c, x, "a convolution") if not (isinstance(x, _V) and x.pending == "padded") else x
    cin = x.shape[1]
    if name == "CONV_2D":
        cout, kh, kw, cin_g = w.shape
        if cin % cin_g:
            raise _Unsupported(f"input has {cin} channels, the filter {list(w.shape)} expects a multiple of {cin_g}")
        groups = cin // cin_g
    else:
        _, kh, kw, cout = w.shape
        if cout % cin:
            raise _Unsupported(f"depthwise filter {list(w.shape)} on {cin} input channels")
        groups = cin
    stride, dilation = [o.strideH, o.strideW], [o.dilationHFactor, o.dilationWFactor]
    x, before, after = _window_pads(c, x, o.padding, [kh, kw], stride, dilation, "padded")
    padding = symmetric_conv_padding(x.shape[2:], before, after, [kh, kw], stride, dilation)
    if padding is None:
        x = c.new("pad", x, suffix="/pad", pads=[before[0], after[0], before[1], after[1]], value=0.0)
        padding = [0, 0]
    y = c.new("conv2d", x, out_channels=int(cout), kernel=[int(kh), int(kw)], stride=stride, padding=padding,
              dilation=dilation, groups=int(groups), bias=_bias_of(c, ins))
    return _act(c, y, o.fusedActivationFunction)


@_handler("CONV_3D")
def _conv3d(c: _Converter, i, ins, tin, tout, o):
    """A 3-d convolution whose window spans the depth axis only, of one input channel: ChannelNet's
    channel-wise convolution (litert-torch writes it on the map reshaped to NDHWC ``[1, C, H, W,
    1]``). It is the 2-d convolution of ``[1, 1, C, H*W]`` by a ``kd x 1`` window, as the ONNX
    importer takes it; its result is viewed as ``[1, D', H, W, cout]``."""
    x, w = ins[0], ins[1]
    if not isinstance(w, _Const) or len(w.shape) != 5:
        raise _Unsupported("a filter that is not a constant 5-d tensor")
    kd, kh, kw, cin, cout = (int(d) for d in w.shape)
    tfl = x.tfl_shape if isinstance(x, _V) else []
    if len(tfl) != 5 or tfl[0] != 1 or tfl[4] != 1 or cin != 1 or (kh, kw) != (1, 1) \
            or (o.strideH, o.strideW, o.dilationHFactor, o.dilationWFactor) != (1, 1, 1, 1):
        raise _Unsupported(f"a 3-d convolution (filter {list(w.shape)} on {tfl}); only one over the depth axis of "
                           "a single input channel (1x1 in height and width) is supported")
    if x.pending is not None:
        x = c.plain(x)
    depth, h, wd = tfl[1:4]
    flat = _reshape_to(c, i, x, [1, depth, h * wd, 1], tout)  # NHWC of one channel: IR [1, 1, D, H*W]
    stride, dilation = [int(o.strideD), 1], [int(o.dilationDFactor), 1]
    before, after = ([0, 0], [0, 0]) if o.padding != c.r.s.Padding.SAME else \
        ([_tf_same(depth, kd, stride[0], dilation[0])[0], 0], [_tf_same(depth, kd, stride[0], dilation[0])[1], 0])
    padding = symmetric_conv_padding((depth, h * wd), before, after, [kd, 1], stride, dilation)
    if padding is None:
        flat = c.new("pad", flat, suffix="/pad", pads=[before[0], after[0], 0, 0], value=0.0)
        padding = [0, 0]
    y = c.new("conv2d", flat, out_channels=cout, kernel=[kd, 1], stride=stride, padding=padding, dilation=dilation,
              groups=1, bias=_bias_of(c, ins))
    y = _act(c, y, o.fusedActivationFunction)
    d_out = c.g.shape(y.ref)[2]
    return c.new("reshape", y, (0, 2, 3, 4, 1), suffix="/view", shape=[1, cout, d_out, h, wd])


@_handler("FULLY_CONNECTED")
def _fc(c: _Converter, i, ins, tin, tout, o):
    x, w = ins[0], ins[1]
    if not isinstance(w, _Const) or len(w.shape) != 2:
        raise _Unsupported("weights that are not a constant matrix")
    if isinstance(x, _Const):  # a layer applied to a constant: evaluated
        b = ins[2] if len(ins) > 2 else None
        if len(x.shape) != 2 or x.shape[1] != w.shape[1] or not (b is None or isinstance(b, _Const)):
            raise _Unsupported(f"a FULLY_CONNECTED of a constant of shape {list(x.shape)} by weights {list(w.shape)}")
        return _evaluated((x.shape[0], w.shape[0]), o.fusedActivationFunction, "the FULLY_CONNECTED of a constant",
                          lambda: x.real @ w.real.T + (0 if b is None else b.real))
    if not isinstance(x, _V):
        raise _Unsupported("a constant input")
    if x.pending == "rows":  # an image's pixels as rows: a 1x1 convolution, the rows kept pending
        if x.shape[1] != w.shape[1]:
            raise _Unsupported(f"image has {x.shape[1]} channels, the weights {list(w.shape)} expect {w.shape[1]}")
        y = c.new("conv2d", _V(x.ref, x.shape, x.perm), out_channels=int(w.shape[0]), kernel=[1, 1], stride=[1, 1],
                  padding=[0, 0], dilation=[1, 1], groups=1, bias=_bias_of(c, ins))
        y = _act(c, y, o.fusedActivationFunction)
        return _V(y.ref, y.shape, y.perm, "rows", (), y.origin)
    if o.keepNumDims and len(x.shape) > 2:  # over the last axis of tokens: the IR's fc as it is
        x = c.plain(x) if x.pending is not None else x
        if not (len(x.shape) == 4 and x.perm == (0, 1, 2, 3)):  # rank-4 tokens in the plain order (MobileViT's
            x = _std(c, x, "a FULLY_CONNECTED keeping its dims")  # patches [1, P, N, d]) stay as they are
        if len(x.shape) == 4 and x.perm == _canonical(4):
            # over the channels of an NHWC image (Keras' Dense on a feature map, ConvNeXt's
            # pointwise layers): the 1x1 convolution it computes
            if x.shape[1] != w.shape[1]:
                raise _Unsupported(f"image has {x.shape[1]} channels, the weights {list(w.shape)} expect {w.shape[1]}")
            y = c.new("conv2d", x, out_channels=int(w.shape[0]), kernel=[1, 1], stride=[1, 1], padding=[0, 0],
                      dilation=[1, 1], groups=1, bias=_bias_of(c, ins))
            return _act(c, y, o.fusedActivationFunction)
        if x.shape[-1] != w.shape[1]:
            raise _Unsupported(f"input has {x.shape[-1]} features, the weights {list(w.shape)} expect {w.shape[1]}")
        y = c.new("fc", x, x.perm, out_features=int(w.shape[0]), bias=_bias_of(c, ins))
        return _act(c, y, o.fusedActivationFunction)
    if len(x.shape) != 2 or x.pending is not None:
        x = c.plain(x) if x.pending is not None else x
        if len(x.shape) != 2:  # FULLY_CONNECTED flattens its input (the weights absorb the column order)
            x = c.new("flatten", x, suffix="/flatten")
    if x.shape[1] != w.shape[1]:
        raise _Unsupported(f"input has {x.shape[1]} features, the weights {list(w.shape)} expect {w.shape[1]}")
    y = c.new("fc", x, out_features=int(w.shape[0]), bias=_bias_of(c, ins))
    return _act(c, y, o.fusedActivationFunction)


def _pool(c: _Converter, i, ins, tin, tout, o, kind: str):
    x = ins[0]
    if not isinstance(x, _V) or len(x.shape) != 4:
        raise _Unsupported("pooling of a tensor that is not a computed rank-4 tensor")
    if x.pending not in ("padded", "mirror", "neg_padded"):
        x = _std(c, x, "a pool")
    kernel, stride = [o.filterHeight, o.filterWidth], [o.strideH, o.strideW]
    s = c.r.s
    fold = ("neg_padded" if x.pending == "neg_padded" else "mirror") if kind == "max" else "padded"
    src = x
    x, before, after = _window_pads(c, x, o.padding, kernel, stride, [1, 1], fold)
    x = _std(c, x, "a pool")
    hw = x.shape[2:]
    n_out = [(hw[d] + before[d] + after[d] - kernel[d]) // stride[d] + 1 if o.padding != s.Padding.SAME else -(-hw[d] // stride[d])
             for d in range(2)]
    origin = (i,) if src.pending is None or src is x else (*src.origin, i)
    if kind == "max":
        if src.pending == "mirror" and not _mirror_ok(hw, kernel, stride, before, after, n_out, src.data[4]):
            raise _Unsupported(f"MIRROR_PAD {before + after} before a max pool whose windows read mirrored values of other windows")
        attrs = match_pool("max", hw, kernel, stride, before, n_out)
        if attrs is None:
            raise _Unsupported(f"a max pool with pads {before}/{after} that no symmetric padding reproduces")
        y = c.new("maxpool", x, origin=origin, kernel=kernel, stride=stride, **attrs)
        return _act(c, y, o.fusedActivationFunction)
    # average: TF divides by the window's real elements under SAME, by k*k otherwise (zeros of a PAD count)
    if o.padding == s.Padding.SAME:
        divs = [[min(q * stride[d] - before[d] + kernel[d], hw[d]) - max(q * stride[d] - before[d], 0) for q in range(n_out[d])]
                for d in range(2)]
    else:
        divs = [[kernel[d]] * n_out[d] for d in range(2)]
    base = np.outer(divs[0], divs[1]).astype(np.float64)
    # a per-position MUL right after (the exporter's correction map) is part of the pool
    correction, mul_op, act, rtol = None, None, o.fusedActivationFunction, 1e-5
    reader = c.only_reader(tout[0])
    if reader is not None and reader[0] == "MUL" and act == 0:
        _, j, pos = reader
        other = c.ops[j][1][1 - pos]
        k = c.env.get(other) or (_Const(c.r, other) if c.r.is_const(other) else None)  # (fp16: DEQUANTIZE'd)
        if isinstance(k, _Const) and math.prod(k.shape) == n_out[0] * n_out[1] \
                and [d for d in k.shape if d != 1] == [d for d in n_out if d != 1]:
            correction = k.real.reshape(n_out)
            mul_op = j
            # a map stored in fp16 (DEQUANTIZE'd) or int8 is only close to the exact one
            exact = c.r.is_const(other) and c.r.tensors[other].dtype == "FLOAT32"
            rtol = 1e-5 if exact else 2e-2
    effective = base / correction if correction is not None else base

    def ok(dh: list[int], dw: list[int]) -> bool:
        return bool(np.allclose(np.outer(dh, dw), effective, rtol=rtol, atol=0))

    attrs = match_pool("avg", hw, kernel, stride, before, n_out, ok)
    if attrs is None and correction is not None:  # the MUL is something else: leave it to itself
        correction, mul_op, effective = None, None, base
        attrs = match_pool("avg", hw, kernel, stride, before, n_out, ok)
    if attrs is None:
        raise _Unsupported(f"an average pool with pads {before}/{after} that no symmetric padding reproduces")
    if mul_op is not None:
        origin = (*origin, mul_op)
    y = c.new("avgpool", x, origin=origin, kernel=kernel, stride=stride, **attrs)
    if mul_op is not None:
        mul_opts = c.r.options(c.ops[mul_op][3])
        c.absorbed[mul_op] = mul_opts.fusedActivationFunction  # applied when the walker reaches it
        return y
    return _act(c, y, act)


def _mirror_ok(hw, kernel, stride, before, after, n_out, edge: bool) -> bool:
    """Every window that reads mirrored rows also reads the rows they copy (so the max is
    that of its real elements, as with PyTorch's -inf padding): for replicated edges any
    window holding a real element; for a wider SYMMETRIC pad, one whose real part is at
    least as long as its padded part on each side."""
    for d in range(2):
        for q in range(n_out[d]):
            start = q * stride[d] - before[d]
            real = min(start + kernel[d], hw[d]) - max(start, 0)
            need = 1 if edge else max(1, -start, start + kernel[d] - hw[d])
            if real < need:
                return False
    return True


HANDLERS["MAX_POOL_2D"] = lambda c, i, ins, tin, tout, o: _pool(c, i, ins, tin, tout, o, "max")
HANDLERS["AVERAGE_POOL_2D"] = lambda c, i, ins, tin, tout, o: _pool(c, i, ins, tin, tout, o, "avg")


@_handler("MEAN")
def _mean(c: _Converter, i, ins, tin, tout, o):
    x = ins[0]
    if not isinstance(x, _V):
        raise _Unsupported("MEAN of a constant")
    rank = len(x.shape)
    axes = sorted({x.perm[a % rank] for a in _int_list(ins[1], "MEAN axes")})
    # one axis: a mean of tokens or channels, or a layer norm's mean (of an image's channels too:
    # ConvNeXt's channel norm); H and W of an image: the global average pool
    if len(axes) == 1 and axes[0] > 0 and (not (rank == 4 and x.perm == _canonical(4)) or (axes == [1] and o.keepDims)):
        ax = axes[0]
        if x.pending == "ln_sqdiff" and o.keepDims and ax == x.data[0]:
            return _V(x.ref, x.shape, x.perm, "ln_var", x.data, (*x.origin, i))
        if x.pending is not None:
            x = c.plain(x)
        if o.keepDims and x.perm[-1] == ax:  # a layer norm's mean, or a mean
            shape = tuple(1 if k == ax else d for k, d in enumerate(x.shape))
            return _V(x.ref, shape, x.perm, "ln_mean", (ax,), (i,))
        y = c.new("mean", x, tuple(p - (p > ax) for p in x.perm if p != ax) if not o.keepDims else x.perm,
                  axis=ax, keepdim=bool(o.keepDims))
        return y
    if rank == 4 and axes == [0, 2, 3]:  # the unit batch too (litert-torch's instance norm): H and W
        axes = [2, 3]
    if rank != 4 or axes != [2, 3]:
        raise _Unsupported(f"MEAN over IR axes {axes} of {list(x.shape)} (H and W: a global average pool, or one axis)")
    if x.pending == "in_sq":  # the variance of an instance norm, kept or not as [1, C, 1, 1]
        return _V(x.ref, x.shape, x.perm, "in_var", x.data, (*x.origin, i))
    if x.pending is not None:
        x = c.plain(x)
    if o.keepDims:  # an instance norm's mean if a SUB continues the pattern, else this pool
        return _V(x.ref, (*x.shape[:2], 1, 1), x.perm, "in_mean", (), (i,))
    y = c.new("global_avgpool", x, x.perm)
    return y if o.keepDims else c.new("flatten", y, suffix="/flatten")


def _reducer(tfl: str, ir_op: str) -> Callable:
    """REDUCE_MAX / SUM over one axis that is not the batch."""

    def handler(c: _Converter, i, ins, tin, tout, o):
        x = ins[0]
        if not isinstance(x, _V):
            raise _Unsupported(f"{tfl} of a constant")
        rank = len(x.shape)
        axes = sorted({x.perm[a % rank] for a in _int_list(ins[1], f"{tfl} axes")})
        if len(axes) != 1 or axes[0] == 0:
            raise _Unsupported(f"{tfl} over IR axes {axes} of {list(x.shape)} (the IR reduces over one axis, not the batch)")
        if x.pending is not None:
            x = c.plain(x)
        ax = axes[0]
        return c.new(ir_op, x, tuple(p - (p > ax) for p in x.perm if p != ax) if not o.keepDims else x.perm,
                     axis=ax, keepdim=bool(o.keepDims))

    return handler


def _reduce_max(c: _Converter, i, ins, tin, tout, o):
    """REDUCE_MAX, or the start of a softmax along one axis as litert-torch decomposes it."""
    if _softmax_decomposed(c, i, ins, tin, tout) is not None:
        return None  # the maximum is read only inside the softmax, which the DIV's output holds
    return _reduce_max_alone(c, i, ins, tin, tout, o)


_reduce_max_alone = _reducer("REDUCE_MAX", "reduce_max")


def _softmax_decomposed(c: _Converter, i, ins, tin, tout) -> _V | None:
    """A softmax along axis k written out (litert-torch's ``softmax`` over an axis that is not
    the last: ResNeSt's split attention over its radix): ``m = REDUCE_MAX(x, k)``, optionally
    ``MAXIMUM(m, -inf)`` (or the lowest float), ``e = EXP(SUB(x, m))``, ``DIV(e, SUM(e, k))``,
    each intermediate read only inside the pattern. Matched, it is the IR's ``softmax`` of ``x`` along k (the DIV's
    value; the ops between compute nothing of their own); else None."""
    x = ins[0]
    if not isinstance(x, _V) or x.pending is not None or not c.r.is_const(tin[1]):
        return None
    axes = c.r.const_value(tin[1]).reshape(-1).tolist()
    rank = len(x.shape)
    if len(axes) != 1 or not -rank <= axes[0] < rank:
        return None
    k = axes[0] % rank

    def sole(t: int, opname: str, pos: int | None = None) -> int | None:
        r = c.only_reader(t)
        return r[1] if r is not None and r[0] == opname and (pos is None or r[2] == pos) else None

    def fused(j: int) -> int:
        o = c.r.options(c.ops[j][3])
        return getattr(o, "fusedActivationFunction", 0) if o is not None else 0

    part = {}
    m = tout[0]
    j = sole(m, "MAXIMUM")
    if j is not None:
        _, mins, mouts, _ = c.ops[j]
        lim = [t for t in mins if t != m]
        if len(lim) != 1 or not c.r.is_const(lim[0]) or np.asarray(c.r.const_value(lim[0])).size != 1 \
                or float(np.asarray(c.r.const_value(lim[0])).reshape(-1)[0]) > _LOWEST:
            return None
        part[j], m = None, mouts[0]
    j = sole(m, "SUB", 1)
    if j is None or c.ops[j][1][0] != tin[0] or fused(j):
        return None
    part[j] = None
    e_op = sole(c.ops[j][2][0], "EXP")
    if e_op is None:
        return None
    part[e_op] = None
    e = c.ops[e_op][2][0]
    readers = c.readers.get(e, [])
    if len(readers) != 2 or e in c.outputs:
        return None
    (s_op, s_pos), (d_op, d_pos) = sorted(readers, key=lambda r: c.ops[r[0]][0] != "SUM")  # the SUM first
    if c.ops[s_op][0] != "SUM" or s_pos != 0 or c.ops[d_op][0] != "DIV" or d_pos != 0 or fused(d_op):
        return None
    s_axes = c.ops[s_op][1][1]
    if not c.r.is_const(s_axes) or [a % rank for a in c.r.const_value(s_axes).reshape(-1).tolist()] != [k]:
        return None
    if sole(c.ops[s_op][2][0], "DIV", 1) != d_op:
        return None
    part[s_op] = None
    part[d_op] = c.new("softmax", x, x.perm, axis=x.perm[k])
    c.replaced.update(part)
    return part[d_op]


_handler("REDUCE_MAX")(_reduce_max)
_handler("SUM")(_reducer("SUM", "reduce_sum"))


def _affine_const(c: _Converter, x: _V, k: Any) -> bool:
    """``k`` is a per-channel constant broadcasting along the channel axis of ``x``."""
    if not isinstance(k, _Const) or len(x.shape) not in (2, 4) or x.shape[1] < 2:
        return False
    shape = [d for d in k.shape]
    ch = x.perm.index(1)  # TFLite axis of the channels
    want = [1] * len(x.shape)
    want[ch] = x.shape[1]
    return shape == [x.shape[1]] or shape == want or shape == want[len(want) - len(shape):]


def _per_feature(c: _Converter, a: _V, b: Any) -> bool:
    """``b`` is a constant of one value per feature of the axis the layer norm ``a`` normalises
    (a gain or a shift)."""
    return isinstance(b, _Const) and math.prod(b.shape) == c.g.shape(a.ref)[a.data[0]]


def _layer_norm_step(c: _Converter, i: int, op: str, a: Any, b: Any) -> _V | None:
    """The next step of a layer norm as TFLite's converter writes it, or None. Two patterns:
    Keras' LayerNormalization (``m = MEAN(x)``, ``NEG(m)``, ``SQUARED_DIFFERENCE(x, m)``,
    ``MEAN``, ``ADD eps``, ``RSQRT``, ``g = MUL(rsqrt, gain)``, ``MUL(-m, g) ADD shift``,
    ``MUL(x, g)``, and the final ``ADD``), and the centred form a TF graph of ``x - mean(x)`` gives
    (``d = SUB(x, m)``, the same variance, ``MUL(d, rsqrt)``, then ``MUL gain`` and ``ADD shift``,
    or neither when the converter folded them into the fully connected layer that reads it)."""
    if op == "SUB":
        if isinstance(a, _V) and isinstance(b, _V) and a.pending is None and b.pending == "ln_mean" and a.ref == b.ref:
            return _V(a.ref, a.shape, a.perm, "ln_centered", b.data, (*b.origin, i))
        return None
    if isinstance(a, _Const) and isinstance(b, _V):
        a, b = b, a
    if not isinstance(a, _V):
        return None
    if op == "MUL" and isinstance(b, _V) and a.ref == b.ref and {a.pending, b.pending} == {"ln_centered", "ln_rstd"}:
        d, r = (a, b) if a.pending == "ln_centered" else (b, a)
        return _V(a.ref, a.shape, a.perm, "ln_normed", r.data, (*d.origin, *r.origin, i))
    if op == "MUL" and a.pending == "ln_normed" and _per_feature(c, a, b):
        return _V(a.ref, a.shape, a.perm, "ln_normed_g", a.data, (*a.origin, i))
    if op == "ADD" and a.pending == "ln_normed_g" and _per_feature(c, a, b):
        ref = c.add("layernorm", [a.ref], (*a.origin, i), axis=a.data[0], eps=a.data[1])
        return _V(ref, tuple(c.g.shape(ref)), a.perm)
    v = _scalar(b)
    if op == "ADD" and a.pending == "ln_var" and v is not None:
        return _V(a.ref, a.shape, a.perm, "ln_var_eps", (*a.data, f32(v)), (*a.origin, i))
    if op == "MUL" and a.pending == "ln_rstd" and _per_feature(c, a, b):
        return _V(a.ref, a.shape, a.perm, "ln_g", (*a.data, i), a.origin)
    if op == "MUL" and isinstance(b, _V):
        for p, q in ((a, b), (b, a)):
            if q.pending == "ln_g" and p.pending == "ln_negmean" and p.ref == q.ref:
                return _V(q.ref, q.shape, q.perm, "ln_shift", q.data, q.origin)
            if q.pending == "ln_g" and p.pending is None and p.ref == q.ref:
                return _V(q.ref, q.shape, q.perm, "ln_scaled", q.data, q.origin)
    if op == "ADD" and a.pending == "ln_shift" and isinstance(b, _Const):
        return _V(a.ref, a.shape, a.perm, "ln_shift_b", (*a.data, i), a.origin)
    if op == "ADD" and isinstance(b, _V) and a.ref == b.ref and \
            {a.pending, b.pending} in ({"ln_scaled", "ln_shift_b"}, {"ln_scaled", "ln_shift"}):
        shift = a if a.pending != "ln_scaled" else b  # ln_shift: the converter dropped an all-zero shift
        axis, eps, gain, *bias = shift.data
        ref = c.add("layernorm", [a.ref], (gain, *bias, i), axis=axis, eps=eps)
        return _V(ref, tuple(c.g.shape(ref)), a.perm)
    return None


def _per_channel(c: _Converter, a: _V, b: Any) -> bool:
    """``b`` is a constant of one value per channel of the image ``a`` (a gain or a shift)."""
    return isinstance(b, _Const) and math.prod(b.shape) == c.g.shape(a.ref)[1] and max(b.shape, default=1) == math.prod(b.shape)


def _instance_norm_step(c: _Converter, i: int, op: str, a: Any, b: Any, same: bool, act: int) -> _V | None:
    """The next step of an instance norm as litert-torch writes PyTorch's (``m = MEAN`` over H and
    W, ``d = SUB(x, m)``, ``MUL(d, d)``, ``MEAN``, ``ADD eps``, ``RSQRT``, ``MUL(d, rstd)``, then
    ``MUL gain`` and ``ADD shift`` unless the converter dropped a gain of ones and a shift of
    zeros), or None. ``same``: the operator reads one tensor twice; ``act``: its fused activation
    (only the last step, the shift, may have one)."""
    if act:  # a step that ends the pattern, its activation after the norm
        step = _instance_norm_step(c, i, op, a, b, same, 0)
        if step is None or step.pending not in (None, "in_normed", "in_normed_g"):
            return None
        return _act(c, c.plain(step) if step.pending else step, act)
    if op == "SUB":
        if isinstance(a, _V) and isinstance(b, _V) and a.pending is None and b.pending == "in_mean" and a.ref == b.ref:
            return _V(a.ref, a.shape, a.perm, "in_centered", (), (*b.origin, i))
        return None
    if isinstance(a, _Const) and isinstance(b, _V):
        a, b = b, a
    if not isinstance(a, _V):
        return None
    if op == "MUL" and same and a.pending == "in_centered":
        return _V(a.ref, a.shape, a.perm, "in_sq", (), (*a.origin, i))
    v = _scalar(b)
    if op == "ADD" and a.pending == "in_var" and v is not None:
        return _V(a.ref, a.shape, a.perm, "in_var_eps", (f32(v),), (*a.origin, i))
    if op == "MUL" and isinstance(b, _V) and a.ref == b.ref and {a.pending, b.pending} == {"in_centered", "in_rstd"}:
        d, r = (a, b) if a.pending == "in_centered" else (b, a)
        return _V(a.ref, a.shape, a.perm, "in_normed", r.data, (*d.origin, *r.origin, i))
    if op == "MUL" and a.pending == "in_normed" and _per_channel(c, a, b):
        return _V(a.ref, a.shape, a.perm, "in_normed_g", a.data, (*a.origin, i))
    if op == "ADD" and a.pending in ("in_normed", "in_normed_g") and _per_channel(c, a, b):
        ref = c.add("instancenorm", [a.ref], (*a.origin, i), eps=a.data[0])
        return _V(ref, tuple(c.g.shape(ref)), a.perm)
    return None


# ---------------------------------------------------------------- a decomposed PReLU
def _producer(c: _Converter, tensor: int) -> tuple[int, str, list[int], Any] | None:
    """(index, name, inputs, options) of the operator that writes ``tensor``, if any."""
    for j, (name, ins, outs, op) in enumerate(c.ops):
        if tensor in outs:
            return j, name, ins, c.r.options(op)
    return None


def _relu_of_negated(c: _Converter, tensor: int) -> int | None:
    """The tensor x when ``tensor`` is ``relu(-x)``: a MUL by -1 with a fused RELU, or a RELU of a
    NEG or of a MUL by -1; else None."""
    p = _producer(c, tensor)
    if p is None:
        return None
    _, name, ins, o = p
    act = getattr(o, "fusedActivationFunction", 0)
    if name == "RELU":
        q = _producer(c, ins[0])
        if q is None or getattr(q[3], "fusedActivationFunction", 0):
            return None
        _, name, ins, _ = q
    elif act != 1:
        return None
    if name == "NEG":
        return ins[0]
    if name == "MUL":
        for k in (0, 1):
            if _const_scalar(c, ins[1 - k]) == -1.0 and not c.r.is_const(ins[k]):
                return ins[k]
    return None


def _prelu_of(c: _Converter, i: int) -> _V | None:
    """``SUB(RELU(x), MUL(relu(-x), slope))`` (operator ``i``), PyTorch's PReLU as litert-torch
    writes it, as an IR ``prelu``, else None. The slope (one, or one per channel) is the MUL's
    second input, a constant, where the weights are carried from."""
    pos, neg = c.ops[i][1][:2]
    r, m = _producer(c, pos), _producer(c, neg)
    if r is None or m is None or r[1] != "RELU" or m[1] != "MUL" or getattr(m[3], "fusedActivationFunction", 0) \
            or not c.r.is_const(m[2][1]) or _relu_of_negated(c, m[2][0]) != r[2][0]:
        return None
    x = c.env.get(r[2][0])
    if not isinstance(x, _V) or x.pending is not None:
        return None
    slope = tuple(c.r.tensors[m[2][1]].shape)
    n = prelu_parameters(x.shape, slope, lambda n: f"a PReLU with {n} slopes on an input of shape {x.tfl_shape}")
    if n > 1 and _order(slope, tuple(range(len(slope)))) != (len(slope) - 1,) and slope != (n,):
        return None  # a per-channel slope along another axis than the file's last (NHWC channels)
    x = _std(c, x, "a PReLU") if n > 1 else x
    return c.new("prelu", x, x.perm, origin=(m[0], i), num_parameters=n)


# ---------------------------------------------------------------- a decomposed local response norm
def _const_scalar(c: _Converter, tensor: int) -> float | None:
    """The value of a one-element constant tensor, else None."""
    if tensor < 0 or not c.r.is_const(tensor) or math.prod(c.r.tensors[tensor].shape) != 1:
        return None
    return float(np.asarray(c.r.const_value(tensor), dtype=np.float64).reshape(-1)[0])


def _unit_moves(src: list[int], dst: list[int], axes: list) -> list | None:
    """The IR axes of ``dst``'s TFLite axes when a RESHAPE ``src`` -> ``dst`` only adds or drops
    unit axes (the others keep their order; unit axes map to None), else None."""
    kept = [(d, a) for d, a in zip(src, axes) if d != 1]
    if [d for d in dst if d != 1] != [d for d, _ in kept]:
        return None
    it = iter(a for _, a in kept)
    return [next(it) if d != 1 else None for d in dst]


def _sum_window(c: _Converter, op: Any, ins: list[int], rank: int) -> tuple[int, int] | None:
    """(TFLite axis, size) of a STABLEHLO_REDUCE_WINDOW that sums a window of ``size`` along one
    axis (window 1 elsewhere, strides and dilations 1, no padding, initial value 0, its body one
    ADD), else None."""
    o = c.r.s.BuiltinOptions2Creator(op.BuiltinOptions2Type(), op.BuiltinOptions2())
    if o is None or len(ins) != 2 or _const_scalar(c, ins[1]) != 0.0:
        return None
    dims = [int(d) for d in (o.windowDimensions if o.windowDimensions is not None else [])]
    ones = [1] * rank
    if len(dims) != rank or any(list(v if v is not None else ones) != ones
                                for v in (o.windowStrides, o.baseDilations, o.windowDilations)) \
            or (o.padding is not None and any(int(v) for v in o.padding)):
        return None
    wide = [k for k, d in enumerate(dims) if d != 1]
    body = c.r.m.Subgraphs(o.bodySubgraphIndex) if 0 < o.bodySubgraphIndex < c.r.m.SubgraphsLength() else None
    if len(wide) != 1 or body is None or body.OperatorsLength() != 1 \
            or c.r.codes[body.Operators(0).OpcodeIndex()] not in ("ADD", "STABLEHLO_ADD"):
        return None
    return wide[0], dims[wide[0]]


def _lrn_match(c: _Converter, i: int, x: _V) -> tuple[dict, list[int], int] | None:
    """A local response norm of ``x`` as litert-torch writes PyTorch's ``F.local_response_norm``,
    starting at ``MUL(x, x)`` (operator ``i``), or None: the squares, moved (TRANSPOSE, RESHAPE
    adding unit axes) so that the channels are one axis, zero-padded there by ``size // 2``
    before and ``(size - 1) // 2`` after (PAD), summed over windows of ``size`` channels
    (STABLEHLO_REDUCE_WINDOW), moved back, times scalars (MUL, DIV: ``alpha / size``), plus the
    bias (ADD), to the power ``beta`` (POW), then ``DIV(x, that)``. Each step is the sole reader
    of the one before. Returns (the IR lrn's attributes, the steps' operator indices, the
    DIV's index)."""
    tensor = c.ops[i][1][0]
    t, axes, steps = c.ops[i][2][0], list(x.perm), []
    pads = window = bias = beta = None
    factor = 1.0
    while beta is None:
        reader = c.only_reader(t)
        if reader is None or reader[2] != 0:
            return None
        name, j, _ = reader
        _, ins, outs, op = c.ops[j]
        o = c.r.options(op)
        if getattr(o, "fusedActivationFunction", 0):
            return None
        tfl, out = c.r.tensors[t].shape, c.r.tensors[outs[0]].shape
        v = _const_scalar(c, ins[1]) if len(ins) > 1 else None
        if name == "TRANSPOSE" and c.r.is_const(ins[1]):
            axes = [axes[k] for k in c.r.const_value(ins[1]).reshape(-1).tolist()]
        elif name == "RESHAPE":
            axes = _unit_moves(tfl, out, axes)
        elif name in ("PAD", "PADV2") and pads is None and c.r.is_const(ins[1]) and (len(ins) < 3 or _const_scalar(c, ins[2]) == 0.0):
            p = c.r.const_value(ins[1]).reshape(-1, 2).astype(np.int64)
            moved = [k for k in range(len(p)) if p[k].any()]
            if len(moved) != 1 or axes[moved[0]] != 1:
                return None
            pads = (moved[0], int(p[moved[0]][0]), int(p[moved[0]][1]))
        elif name == "STABLEHLO_REDUCE_WINDOW" and pads is not None and window is None:
            window = _sum_window(c, op, ins, len(tfl))
            if window is None or window[0] != pads[0] or window[1] != pads[1] + pads[2] + 1 or pads[1] != window[1] // 2:
                return None
        elif name in ("MUL", "DIV") and window is not None and bias is None and v is not None and v != 0:
            factor = factor * v if name == "MUL" else factor / v
        elif name == "ADD" and window is not None and bias is None and v is not None:
            bias = v
        elif name == "POW" and window is not None and v is not None:
            beta = v
        else:
            return None
        if axes is None:
            return None
        steps.append(j)
        t = outs[0]
    reader = c.only_reader(t)
    if reader is None or reader[0] != "DIV" or reader[2] != 1 or c.ops[reader[1]][1][0] != tensor \
            or getattr(c.r.options(c.ops[reader[1]][3]), "fusedActivationFunction", 0) \
            or [a for a in axes if a is not None] != [a for a in x.perm if x.shape[a] != 1]:  # back in x's layout
        return None
    size = window[1]
    return {"size": size, "alpha": f32(factor * size), "beta": f32(beta), "bias": f32(bias or 0.0)}, steps, reader[1]


def _lrn_start(c: _Converter, i: int, x: _V) -> _V | None:
    """``MUL(x, x)`` beginning a decomposed local response norm (:func:`_lrn_match`): a pending
    value its steps pass on unchanged (they are absorbed) to the DIV that ends it."""
    if x.pending is not None or len(x.shape) != 4:
        return None
    m = _lrn_match(c, i, x)
    if m is None:
        return None
    attrs, steps, div = m
    for j in steps:
        c.absorbed[j] = 0
    return _V(x.ref, x.shape, x.perm, "lrn", (attrs, div), (i, *steps))


#: what a fused activation does to a constant (the file's own evaluation of it)
_CONST_ACTIVATIONS: dict[str | None, Callable[[np.ndarray], np.ndarray]] = {
    None: lambda v: v, "relu": lambda v: np.maximum(v, 0), "relu6": lambda v: np.clip(v, 0, 6),
    "relu_n1_to_1": lambda v: np.clip(v, -1, 1), "tanh": np.tanh}


def _evaluated(shape: Any, act: int, what: str, fn: Callable[[], np.ndarray]) -> _Const:
    """A constant computed from constants (``fn``), its fused activation applied: what the file
    computes from constants alone (DIA-ResNet's LSTM cell on its zero initial state, which
    litert-torch leaves unfolded). At most ``limits.TENSOR_ELEMENTS`` elements."""
    fault = too_many_elements(shape, f"{what} of shape")
    if fault:
        raise _Unsupported(fault)
    kind = _ACTIVATIONS.get(act, f"code {act}")
    if kind not in _CONST_ACTIVATIONS:
        raise _Unsupported(f"{what} with the fused activation {kind}")
    return _Const(value=_CONST_ACTIVATIONS[kind](np.asarray(fn(), dtype=np.float32)).astype(np.float32))


_CONST_BINARY = {"ADD": np.add, "MUL": np.multiply, "SUB": np.subtract, "DIV": np.divide}


@_handler("ADD", "MUL", "SUB", "DIV")
def _binary(c: _Converter, i, ins, tin, tout, o):
    op = c.ops[i][0]
    a, b = ins[0], ins[1]
    act = o.fusedActivationFunction if o is not None else 0
    if op == "MUL" and tin[0] == tin[1] and act == 0 and isinstance(a, _V) and a.pending is None:
        lrn = _lrn_start(c, i, a)
        if lrn is not None:
            return lrn
    if op == "DIV" and isinstance(b, _V) and b.pending == "lrn" and b.data[1] == i:
        return _act(c, c.new("lrn", _V(b.ref, b.shape, b.perm), b.perm, origin=(*b.origin, i), **b.data[0]), act)
    step = _layer_norm_step(c, i, op, a, b) if act == 0 else None
    if step is None:
        step = _instance_norm_step(c, i, op, a, b, tin[0] == tin[1], act)
    if step is not None:
        return step
    for v in (a, b):
        if isinstance(v, _V) and v.pending in _LN_WHAT:
            raise _Unsupported(_LN_WHAT[v.pending])
    if isinstance(a, _Const) and isinstance(b, _Const):
        try:
            shape = np.broadcast_shapes(a.shape, b.shape)
        except ValueError:
            raise _Unsupported(f"{op} of constants of shapes {list(a.shape)} and {list(b.shape)}") from None
        return _evaluated(shape, act, f"the {op} of constants", lambda: _CONST_BINARY[op](a.real, b.real))
    if isinstance(a, _Const) and op in ("ADD", "MUL"):
        a, b = b, a
    if not isinstance(a, _V):
        raise _Unsupported(f"{op} of constants, or of a constant by a computed tensor")
    if a.pending == "affine" and not (op == "ADD" and _affine_const(c, a, b)):
        a = c.plain(a)
    if isinstance(b, _V) and b.pending == "affine":
        b = c.plain(b)
    if isinstance(b, _V):
        if op == "MUL":
            for p, q, tq in ((a, b, tin[1]), (b, a, tin[0])):
                if p.pending is not None:
                    continue
                if q.pending == "relu6_plus3" and p.ref == q.ref and c.sole(tq):
                    return _act_pending(c, _V(p.ref, p.shape, p.perm, "x_relu6_plus3", (), (i,)), act)
                gate = c.g.nodes.get(q.ref) if q.pending is None else None
                if gate is not None and gate.op == "sigmoid" and gate.inputs == [p.ref] and c.sole(tq):
                    # x * LOGISTIC(x): the LOGISTIC's node is left unread and pruned at the end
                    return _act(c, c.new("swish", p, p.perm), act)
        if op in ("ADD", "MUL", "DIV"):
            if len(a.tfl_shape) != len(b.tfl_shape):  # TFLite broadcasts the trailing axes: a [1, C] gate of an NHWC map
                a, b = (_ranked(c, i, v, max(len(a.tfl_shape), len(b.tfl_shape)), tout) for v in (a, b))
            a, b = _same_layout(c, a, b)
            if len(a.shape) != len(b.shape):
                raise _Unsupported(f"{op} of tensors of different rank {a.tfl_shape} and {b.tfl_shape}")
            return _act(c, c.new(op.lower(), [a, b], a.perm), act)
        if op == "SUB":
            prelu = _prelu_of(c, i)
            if prelu is not None:
                return _act(c, prelu, act)
        raise _Unsupported(f"{op} of two computed tensors (the IR has no element-wise {op.lower()})")
    v = _scalar(b)
    if v is None and isinstance(b, _Const) and not _affine_const(c, a, b) and a.pending is None \
            and _affine_const(c, _V(a.ref, tuple(a.tfl_shape), tuple(range(len(a.shape)))), b):
        # per channel along the file's axis 1 (a PyTorch model's NCHW tensor, litert-torch's, the
        # importer holds in another layout): the tensor in the file's order
        a = _tflite_order(c, a)
    if v is None:
        if op in ("SUB", "DIV") and _affine_const(c, a, b):  # a per-channel shift or gain all the same
            op = {"SUB": "ADD", "DIV": "MUL"}[op]
            if a.pending == "affine" and op == "MUL":
                a = c.plain(a)
        if op in ("MUL", "ADD") and _affine_const(c, a, b):
            if op == "MUL" and a.pending is None and act == 0 and c.sole(tout[0]) and (c.only_reader(tout[0]) or ("",))[0] == "ADD":
                return _V(a.ref, a.shape, a.perm, "affine", (), (i,))
            origin = (*a.origin, i) if a.pending == "affine" else (i,)
            base = _V(a.ref, a.shape, a.perm) if a.pending == "affine" else a
            return _act(c, c.new("batchnorm", base, a.perm, origin=origin, eps=0.0), act)
        if op == "ADD" and isinstance(b, _Const) and learned_like(a.tfl_shape, b.shape):
            return _act(c, c.new("pos_embed", a, a.perm), act)  # a position embedding
        raise _Unsupported(f"{op} by a constant tensor of shape {list(getattr(b, 'shape', []))} (the IR has no weights; "
                           "a constant added is a position embedding only with one value per element of the tensor)")
    if op == "SUB":
        op, v = "ADD", -v
    if op == "DIV":
        op, v = "MUL", reciprocal(v)
    if op == "MUL":
        if abs(v * 6 - 1) < 1e-2 and a.pending == "relu6_plus3":  # 1/6 (quantized in int8 files)
            return _act(c, c.new("hsigmoid", _V(a.ref, a.shape, a.perm), a.perm, origin=(*a.origin, i)), act)
        if abs(v * 6 - 1) < 1e-2 and a.pending == "x_relu6_plus3":
            return _act(c, c.new("hswish", _V(a.ref, a.shape, a.perm), a.perm, origin=(*a.origin, i)), act)
        if v == 1:
            return _act(c, a, act)
        return _act(c, c.new("scale", a, a.perm, factor=f32(v)), act)
    if v == 0:
        return _act(c, a, act)
    if abs(v - 3) < 1e-2 and a.pending is None and c.sole(tout[0]):
        return _act_pending(c, _V(a.ref, a.shape, a.perm, "plus3", (), (i,)), act)
    return _act(c, c.new("shift", a, a.perm, value=f32(v)), act)


def _ranked(c: _Converter, i: int, v: _V, rank: int, tout: list[int]) -> _V:
    """``v`` viewed with leading unit axes up to ``rank``, as TFLite's broadcasting aligns the
    trailing axes of an element-wise op's operands."""
    tfl = list(v.tfl_shape)
    if len(tfl) == rank:
        return v
    if v.pending is not None:
        v = c.plain(v)
    return _reshape_to(c, i, v, [1] * (rank - len(tfl)) + tfl, tout)


def _act_pending(c: _Converter, v: _V, act: int) -> _V:
    if act == 0:
        return v
    if v.pending == "plus3" and _ACTIVATIONS.get(act) == "relu6":
        return _V(v.ref, v.shape, v.perm, "relu6_plus3", (), v.origin)
    return _act(c, c.plain(v), act)


def _broadcast(x: Any, y: Any) -> bool:
    return len(x) == len(y) and all(p == q or 1 in (p, q) for p, q in zip(x, y))


def _same_layout(c: _Converter, a: _V, b: _V) -> tuple[_V, _V]:
    """The operands of an element-wise op in one layout: their rank's standard one, or, when
    their IR shapes would not broadcast there but their TFLite shapes do, the TFLite order (a
    PyTorch model's NCHW tensors, which litert-torch keeps outside the convolutions: a channel
    gate [1, C, 1, 1] is read as NHWC for its unit axes, its spatial partner [1, 1, H, W] not)."""
    if a.perm == b.perm:
        return a, b
    if len(a.shape) == len(b.shape):
        sa, sb = _std(c, a, "an element-wise op"), _std(c, b, "an element-wise op")
        if _broadcast(sa.shape, sb.shape) or not _broadcast(a.tfl_shape, b.tfl_shape):
            return sa, sb
        return _tflite_order(c, a), _tflite_order(c, b)  # the unused standard forms are pruned
    raise _Unsupported(f"operands of different rank {a.tfl_shape} and {b.tfl_shape}")


def _tflite_order(c: _Converter, v: _V) -> _V:
    """``v`` with its IR axes in its TFLite order: as it is, an IR ``reshape`` when only unit axes
    move (the same element order), else an IR ``transpose``."""
    ident = tuple(range(len(v.shape)))
    if v.perm == ident:
        return v
    if _order(v.shape, v.perm) == _order(v.shape, ident):
        return c.new("reshape", v, ident, suffix="/order", shape=list(v.tfl_shape))
    return _transposed(c, v, list(v.perm), "/order")


@_handler("MINIMUM", "MAXIMUM")
def _minmax(c: _Converter, i, ins, tin, tout, o):
    op = c.ops[i][0]
    a, b = ins
    if isinstance(a, _Const):
        a, b = b, a
    v = _scalar(b)
    if not isinstance(a, _V) or v is None:
        raise _Unsupported(f"{op} that is not a clamp by a scalar constant")
    if op == "MAXIMUM" and a.pending == "min":
        return c.new("clip", _V(a.ref, a.shape, a.perm), a.perm, origin=(*a.origin, i), min=f32(v), max=a.data[0])
    if op == "MINIMUM" and a.pending == "max":
        return c.new("clip", _V(a.ref, a.shape, a.perm), a.perm, origin=(*a.origin, i), min=a.data[0], max=f32(v))
    if a.pending is not None:
        a = c.plain(a)
    return _V(a.ref, a.shape, a.perm, "min" if op == "MINIMUM" else "max", (f32(v),), (i,))


def _unary(op: str):
    def handler(c: _Converter, i, ins, tin, tout, o):
        x = ins[0]
        if not isinstance(x, _V):
            raise _Unsupported("an activation of a constant")
        return c.new(op, x, x.perm)

    return handler


for _name, _op in (("HARD_SWISH", "hswish"), ("TANH", "tanh")):
    HANDLERS[_name] = _unary(_op)


@_handler("RELU", "RELU6", "RELU_N1_TO_1")
def _relu(c: _Converter, i, ins, tin, tout, o):
    x = ins[0]
    if not isinstance(x, _V):
        raise _Unsupported("an activation of a constant")
    code = {"RELU": 1, "RELU_N1_TO_1": 2, "RELU6": 3}[c.ops[i][0]]
    if x.pending in ("plus3", "min"):
        return _act(c, _V(x.ref, x.shape, x.perm, x.pending, x.data, (*x.origin, i)), code)
    kind = _ACTIVATIONS[code]
    if kind == "relu_n1_to_1":
        return c.new("clip", x, x.perm, min=-1.0, max=1.0)
    return c.new(kind, x, x.perm)


HANDLERS["LOGISTIC"] = _unary("sigmoid")  # x * LOGISTIC(x) replaces it by a swish (see _binary)


@_handler("NEG")
def _neg(c: _Converter, i, ins, tin, tout, o):
    x = ins[0]
    if isinstance(x, _Const):
        return _Const(value=-x.real.astype(np.float32))
    if x.pending == "ln_mean":
        return _V(x.ref, x.shape, x.perm, "ln_negmean", x.data, x.origin)
    return c.new("scale", x, x.perm, factor=-1.0)


@_handler("SQUARED_DIFFERENCE")
def _squared_difference(c: _Converter, i, ins, tin, tout, o):
    x, m = ins
    if isinstance(x, _V) and isinstance(m, _V) and m.pending == "ln_mean" and x.pending is None and x.ref == m.ref:
        return _V(x.ref, x.shape, x.perm, "ln_sqdiff", m.data, (i,))
    raise _Unsupported(_LN_WHAT["ln_sqdiff"])


@_handler("RSQRT")
def _rsqrt(c: _Converter, i, ins, tin, tout, o):
    x = ins[0]
    if isinstance(x, _V) and x.pending == "ln_var_eps":
        return _V(x.ref, x.shape, x.perm, "ln_rstd", x.data, (*x.origin, i))
    if isinstance(x, _V) and x.pending == "in_var_eps":
        return _V(x.ref, x.shape, x.perm, "in_rstd", x.data, (*x.origin, i))
    raise _Unsupported(_LN_WHAT["ln_rstd"])


@_handler("GELU")
def _gelu(c: _Converter, i, ins, tin, tout, o):
    x = ins[0]
    if not isinstance(x, _V):
        raise _Unsupported("GELU of a constant")
    return c.new("gelu", x, x.perm, approximate="tanh" if o is not None and o.approximate else "none")


@_handler("LOCAL_RESPONSE_NORMALIZATION")
def _lrn(c: _Converter, i, ins, tin, tout, o):
    x = ins[0]
    if not isinstance(x, _V) or len(x.shape) != 4:
        raise _Unsupported("LOCAL_RESPONSE_NORMALIZATION of anything but an image (the IR's lrn takes one)")
    # TFLite's window is 2 * radius + 1 channels and its alpha multiplies the sum itself; the
    # IR's alpha (PyTorch's, ONNX's) is divided by the window's size
    size = 2 * int(o.radius) + 1
    return c.new("lrn", _std(c, x, "LOCAL_RESPONSE_NORMALIZATION"), size=size, alpha=_times_size(o.alpha, size),
                 beta=f32(o.beta), bias=f32(o.bias))


def _times_size(alpha: float, size: int) -> float:
    """The shortest decimal whose quotient by ``size`` is the float32 ``alpha`` (the IR's alpha of
    a file written with alpha / size: 1e-4, not 1.00000005e-4), else the product itself."""
    want, product = np.float32(alpha), float(np.float32(alpha)) * size
    for digits in range(1, 18):
        v = float(f"{product:.{digits}g}")
        if np.float32(v / size) == want:
            return v
    return product


@_handler("BATCH_MATMUL")
def _batch_matmul(c: _Converter, i, ins, tin, tout, o):
    a, b = ins[0], ins[1]
    if not isinstance(a, _V) or not isinstance(b, _V):
        raise _Unsupported("BATCH_MATMUL with a constant operand (the IR's matmul multiplies two activations)")
    rank = len(a.shape)
    if len(b.shape) != rank:
        raise _Unsupported(f"BATCH_MATMUL of tensors of different rank {a.tfl_shape} and {b.tfl_shape}")
    xs = []
    for v, adj in ((a, o.adjX if o is not None else False), (b, o.adjY if o is not None else False)):
        v = c.plain(v) if v.pending is not None else v
        perm = list(range(rank))
        if adj:
            perm[-2], perm[-1] = perm[-1], perm[-2]
        want = [v.perm[p] for p in perm]  # IR axis of each TFLite axis of the operand as multiplied
        if want != list(range(rank)):
            if want[0] != 0:
                raise _Unsupported(f"BATCH_MATMUL of a tensor whose batch axis moved ({v.tfl_shape})")
            v = _transposed(c, v, want)
        xs.append(v)
    return c.new("matmul", xs, tuple(range(rank)))


@_handler("SHAPE")
def _shape_op(c: _Converter, i, ins, tin, tout, o):
    x = ins[0]
    if not isinstance(x, _V):
        raise _Unsupported("SHAPE of a constant")
    return _Const(value=np.array(x.tfl_shape, dtype=np.int32))


_SHAPE_LIMIT = 64  # elements of a constant the shape arithmetic evaluates (shape vectors, not weights)


def _shape_values(ins: list[Any], what: str) -> list[np.ndarray]:
    """The values of constant operands of shape arithmetic (a free batch's SHAPE, its pieces)."""
    if not all(isinstance(v, _Const) for v in ins):
        raise _Unsupported(f"{what} of computed tensors")
    if any(math.prod(v.shape) > _SHAPE_LIMIT for v in ins):
        raise _Unsupported(f"{what} of constants of more than {_SHAPE_LIMIT} elements (shape arithmetic only)")
    return [v.raw for v in ins]


@_handler("GATHER")
def _gather(c: _Converter, i, ins, tin, tout, o):
    if isinstance(ins[0], _V):
        return _gather_channels(c, ins[0], ins[1], o)
    x, idx = _shape_values(ins, "GATHER")
    return _Const(value=np.take(x, idx.astype(np.int64), axis=o.axis if o is not None else 0))


@_handler("GATHER_ND")
def _gather_nd(c: _Converter, i, ins, tin, tout, o):
    """GATHER_ND by constant indices of shape ``[K, 1]``: a GATHER of K slices along axis 0
    (litert-torch's ``index_select`` of channels, after a RESHAPE that puts them first)."""
    x, idx = ins[0], ins[1]
    if not isinstance(idx, _Const) or len(idx.shape) != 2 or idx.shape[1] != 1:
        what = "computed indices" if not isinstance(idx, _Const) else f"constant indices of shape {list(idx.shape)}"
        raise _Unsupported(f"GATHER_ND by {what} (only [K, 1]: slices along axis 0)")
    rows = idx.raw.reshape(-1).astype(np.int64)
    if not isinstance(x, _V):
        x = _shape_values(ins[:1], "GATHER_ND")[0]
        return _Const(value=np.take(x, rows, axis=0))
    return _gather_channels(c, x, _Const(value=rows), None)


def _gather_channels(c: _Converter, x: _V, idx: Any, o) -> _V:
    """A GATHER of constant indices on the channel axis of an image (NHWC's last) or on axis 1 of
    a ``[1, F]`` vector: the IR's ``gather`` (CondenseNet's selected input channels)."""
    axis = o.axis if o is not None else 0
    batch_dims = o.batchDims if o is not None else 0
    rank = len(x.shape)
    ir_axis = x.perm[axis % rank] if -rank <= axis < rank else None
    if not isinstance(idx, _Const) or len(idx.shape) != 1 or batch_dims or ir_axis != 1 or rank not in (2, 4):
        what = "computed indices" if not isinstance(idx, _Const) else (
            f"{idx.shape[0]} constant indices" if len(idx.shape) == 1 else f"constant indices of shape {list(idx.shape)}")
        raise _Unsupported(f"GATHER of {x.tfl_shape} on axis {axis} by {what} (the IR's gather takes a list "
                           "of constant indices on the channels of an image or axis 1 of a [1, F] vector)")
    n = x.shape[1]
    indices = [int(v) for v in idx.raw.reshape(-1)]
    if any(not 0 <= v < n for v in indices):
        raise _Unsupported(f"GATHER index out of range for the {n} channels: {indices[:8]}")
    if x.pending is not None:
        x = c.plain(x)
    return c.new("gather", x, x.perm, indices=indices, axis=1)


@_handler("REDUCE_PROD")
def _reduce_prod(c: _Converter, i, ins, tin, tout, o):
    x, axes = _shape_values(ins, "REDUCE_PROD")
    keep = bool(o.keepDims) if o is not None else False
    return _Const(value=np.prod(x, axis=tuple(int(a) for a in np.atleast_1d(axes)), keepdims=keep).astype(x.dtype))


@_handler("PACK")
def _pack(c: _Converter, i, ins, tin, tout, o):
    if not all(isinstance(v, _Const) for v in ins):
        raise _Unsupported("PACK of computed tensors")
    return _Const(value=np.stack([v.raw for v in ins], axis=o.axis if o is not None else 0))


@_handler("LEAKY_RELU")
def _leaky(c: _Converter, i, ins, tin, tout, o):
    return c.new("leaky_relu", ins[0], ins[0].perm, alpha=f32(o.alpha))


@_handler("PRELU")
def _prelu(c: _Converter, i, ins, tin, tout, o):
    x, alpha = ins
    if not isinstance(alpha, _Const):
        raise _Unsupported("a slope computed from the input")
    n = prelu_parameters(x.shape, alpha.shape, lambda n: f"PRELU with {n} slopes on an input of shape {x.tfl_shape}")
    x = _std(c, x, "PRELU") if n > 1 else x
    return c.new("prelu", x, x.perm, num_parameters=n)


@_handler("SOFTMAX")
def _softmax(c: _Converter, i, ins, tin, tout, o):
    x = ins[0]
    if abs(o.beta - 1.0) > 1e-6:
        raise _Unsupported(f"softmax with beta={o.beta:g}")
    return c.new("softmax", x, x.perm, axis=x.perm[-1])


@_handler("CONCATENATION")
def _concat(c: _Converter, i, ins, tin, tout, o):
    if all(isinstance(x, _Const) for x in ins) and all(math.prod(x.shape) <= _SHAPE_LIMIT for x in ins):
        return _Const(value=np.concatenate(_shape_values(ins, "CONCATENATION"), axis=o.axis))  # shape pieces
    if not all(isinstance(x, _V) for x in ins):
        return _act(c, _class_tokens(c, ins, o.axis), o.fusedActivationFunction)
    xs = list(ins)
    if len({x.perm for x in xs}) > 1:
        xs = [_std(c, x, "CONCATENATION of tensors in different layouts") for x in xs]
    rank = len(xs[0].shape)
    if len(xs) == 1:
        return _act(c, xs[0], o.fusedActivationFunction)
    y = c.new("concat", xs, xs[0].perm, axis=xs[0].perm[o.axis % rank])
    return _act(c, y, o.fusedActivationFunction)


def _class_tokens(c: _Converter, ins: list[Any], axis: int) -> _V:
    """Constant tokens ``[1, 1, C]`` concatenated in front of tokens ``[1, N, C]`` on axis 1: one
    ``cls_token`` each, the last one first (the converter folds a ``BROADCAST_TO``/``TILE`` of
    the learned token to the batch into the constant)."""
    x, lead = ins[-1], ins[:-1]
    ok = isinstance(x, _V) and len(x.shape) == 3 and axis % 3 == 1 and all(
        isinstance(v, _Const) and tuple(v.shape) == (1, 1, x.tfl_shape[2]) for v in lead)
    if not ok:
        shapes = [list(getattr(v, "tfl_shape", getattr(v, "shape", []))) for v in ins]
        raise _Unsupported(f"CONCATENATION of {shapes} on axis {axis} mixing computed tensors and constants (a constant "
                           "is a class token only as [1, 1, C] tokens in front of tokens [1, N, C] on axis 1; the IR has "
                           "no other weights)")
    x = _std(c, x, "a class token")
    for _ in lead:
        x = c.new("cls_token", x)
    return x


def _split_into(c: _Converter, x: _V, sections: list[int], tfl_axis: int) -> list[_V]:
    rank = len(x.shape)
    axis = x.perm[tfl_axis % rank]
    if sum(sections) != x.shape[axis]:
        raise _Unsupported(f"split of {x.shape[axis]} elements into {sections}")
    if len(sections) == 1:
        return [x]
    refs = c.g.add_multi("split", c.t(x), name=c._name(c.label_of(c.index)), sections=sections, axis=axis)
    c.origins[refs[0].rpartition(":")[0]] = (c.index,)
    return [_V(r, tuple(c.g.shape(r)), x.perm) for r in refs]


@_handler("SPLIT")
def _split(c: _Converter, i, ins, tin, tout, o):
    axis, x = ins
    [ax] = _int_list(axis, "the SPLIT axis")
    n = x.tfl_shape[ax % len(x.shape)]
    k = o.numSplits
    if k < 1 or n % k:
        raise _Unsupported(f"SPLIT of {n} elements into {k}")
    return _split_into(c, x, [n // k] * k, ax)


@_handler("SPLIT_V")
def _split_v(c: _Converter, i, ins, tin, tout, o):
    x, sizes, axis = ins
    [ax] = _int_list(axis, "the SPLIT_V axis")
    sections = _int_list(sizes, "the SPLIT_V sizes")
    if -1 in sections:
        n = x.tfl_shape[ax % len(x.shape)]
        sections[sections.index(-1)] = n - (sum(sections) + 1)
    return _split_into(c, x, sections, ax)


def _reshape_to(c: _Converter, i: int, x: _V, target: list[int], tout: list[int]) -> _V:
    """A RESHAPE of ``x`` to the TFLite shape ``target`` (resolved, batch included)."""
    tfl = x.tfl_shape
    numel = math.prod(tfl)
    if -1 in target:
        known = math.prod(d for d in target if d != -1)
        target = [numel // known if d == -1 else d for d in target]
    if math.prod(target) != numel or any(d < 1 for d in target):
        raise _Unsupported(f"cannot reshape {tfl} to {target}")
    if target == tfl and x.pending is None:
        return x
    # channel shuffle: [1, H, W, C] -> [1, H*W, g, C/g] or [1, H, W, g, C/g] -> swap the last two -> [1, H, W, C]
    if x.pending == "shuffled":
        _, ch, h, w = c.g.shape(x.ref)
        if target == [1, h, w, ch]:
            return c.new("channel_shuffle", _V(x.ref, tuple(c.g.shape(x.ref)), _canonical(4)), origin=(*x.origin, i), groups=x.data[0])
        raise _Unsupported(_PENDING_WHAT["shuffled"])
    if x.pending == "rows":  # back from rows to the image the FULLY_CONNECTED kept
        if target == list(x.tfl_shape):
            return _V(x.ref, x.shape, x.perm)
        raise _Unsupported(_PENDING_WHAT["rows"])
    if x.pending is not None:
        x = c.plain(x)
    if len(x.shape) == 4 and x.perm == _canonical(4) and target == [tfl[1] * tfl[2], tfl[3]] and tfl[1] * tfl[2] > 1 \
            and (c.only_reader(tout[0]) or ("",))[0] == "FULLY_CONNECTED":
        # an NHWC image's pixels as rows (TF's tensordot under a free batch: a Dense over the
        # channels as RESHAPE, FULLY_CONNECTED, RESHAPE back): the image itself, read by the FC
        return _V(x.ref, x.shape, x.perm, "rows", (), (i,))
    if len(x.shape) == 4 and x.perm == _canonical(4) and x.shape[1] > 1 and x.shape[2] * x.shape[3] > 1:
        _, ch, h, w = x.shape
        lead = target[:-2]
        if lead in ([1, h * w], [1, h, w]) and target[-2] * target[-1] == ch and target[-2] > 1 and target[-1] > 1:
            reader = c.only_reader(tout[0])
            if reader is not None and reader[0] == "TRANSPOSE":
                return _V(x.ref, x.shape, x.perm, "grouped", (target[-2], target[-1], len(target)), (i,))
    ident = tuple(range(len(x.shape)))
    if _order(x.shape, x.perm) == _order(x.shape, ident):
        # the data is in the IR's (NCHW) order: an IR reshape
        if len(target) == 4 and (target[3] == 1 or target[1] * target[2] == 1):
            shape, perm = [1, target[3], target[1], target[2]], _canonical(4)  # NHWC result, same element order
        else:
            shape, perm = list(target), tuple(range(len(target)))
    else:
        readers = c.readers.get(tout[0], [])
        fc_only = readers and tout[0] not in c.outputs and all(c.ops[j][0] == "FULLY_CONNECTED" and p == 0 for j, p in readers)
        if not (len(target) == 2 and fc_only):
            return _reshape_in_tflite_order(c, x, target)
        shape, perm = list(target), (0, 1)
    if shape[0] != 1:
        moved = _unit_axes_moved(c, x, target)
        if moved is not None:
            return moved
        raise _Unsupported(f"RESHAPE {tfl} -> {target} moves the batch dimension")
    if list(x.shape) == shape:
        return _V(x.ref, x.shape, perm)
    made = c.g.nodes.get(x.ref)
    if made is not None and made.op in ("flatten", "reshape") and list(c.g.shape(made.inputs[0])) == shape:
        # a reshape back to what a flatten or reshape started from (a free batch's MEAN without
        # keepdims, then RESHAPE to [-1, 1, 1, C]): the tensor before both; the flatten is
        # pruned when nothing else reads it
        return _V(made.inputs[0], tuple(shape), perm)
    if len(shape) == 2:
        return c.new("flatten", x, perm)
    return c.new("reshape", x, perm, shape=shape)


def _unit_axes_moved(c: _Converter, x: _V, target: list[int]) -> _V | None:
    """A RESHAPE that only moves unit axes (``[1, C, H, W]`` -> ``[C, 1, H, W]``, ``[1, 1, 1, F]``
    -> ``[F, 1]``: litert-torch puts the channels first for a GATHER_ND along them) moves no
    element: ``x`` with its TFLite axes relabelled, the IR's axes as they were (of another rank,
    first an IR reshape to ``[1, wide axes..., 1...]``); None when the RESHAPE is more."""
    wide = [a for a in x.perm if x.shape[a] != 1]
    dims = [d for d in target if d != 1]
    if [x.shape[a] for a in wide] != dims:
        return None
    if len(target) != len(x.shape):
        if len(dims) >= len(target) or _order(x.shape, x.perm) != _order(x.shape, tuple(range(len(x.shape)))):
            return None
        shape = [1, *dims] + [1] * (len(target) - 1 - len(dims))
        x = c.new("flatten", x, tuple(range(2))) if len(shape) == 2 else \
            c.new("reshape", x, tuple(range(len(shape))), shape=shape)
        wide = [a for a in x.perm if x.shape[a] != 1]
    wide_it, unit_it = iter(wide), iter(a for a in x.perm if x.shape[a] == 1)
    return _V(x.ref, x.shape, tuple(next(unit_it) if d == 1 else next(wide_it) for d in target))


def _transposed(c: _Converter, x: _V, perm: list[int], suffix: str = "", layout: tuple[int, ...] | None = None) -> _V:
    """An IR ``transpose`` of ``x`` by ``perm`` (IR axes); the result's TFLite axes are its IR
    axes in ``layout`` order (default: the plain order)."""
    ref = c.add("transpose", [c.t(x)], None, suffix, perm=list(perm))
    shape = tuple(c.g.shape(ref))
    return _V(ref, shape, tuple(range(len(shape))) if layout is None else tuple(layout))


def _reshape_in_tflite_order(c: _Converter, x: _V, target: list[int]) -> _V:
    """A RESHAPE of a tensor whose IR axes are in another order than its TFLite axes: an IR
    ``transpose`` to the TFLite order, then the ``reshape``; an image to tokens ``[1, H*W, C]``
    (a ViT's patch embedding) as ``reshape [1, C, H*W]`` and ``transpose [0, 2, 1]``."""
    if x.perm[0] != 0 or target[0] != 1:
        raise _Unsupported(f"RESHAPE {x.tfl_shape} -> {target} moves the batch dimension")
    if len(x.shape) == 4 and x.perm == _canonical(4) and target == [1, x.shape[2] * x.shape[3], x.shape[1]]:
        _, ch, h, w = x.shape
        y = c.new("reshape", x, (0, 1, 2), suffix="/tokens", shape=[1, ch, h * w])
        return _transposed(c, y, [0, 2, 1])
    y = _transposed(c, x, list(x.perm), "/order")
    if list(y.shape) == list(target):
        return y
    ident = tuple(range(len(target)))
    return c.new("flatten", y, ident) if len(target) == 2 else c.new("reshape", y, ident, shape=list(target))


def _batch_fix(target: list[int]) -> list[int]:
    return [1 if k == 0 and d == -1 else d for k, d in enumerate(target)]


@_handler("RESHAPE")
def _reshape(c: _Converter, i, ins, tin, tout, o):
    x = ins[0]
    if not isinstance(x, _V):
        raise _Unsupported("RESHAPE of a constant")
    if len(ins) > 1 and isinstance(ins[1], _Const):
        target = _int_list(ins[1], "the RESHAPE shape")
    elif o is not None and o.newShape is not None and len(o.newShape):
        target = [int(d) for d in o.newShape]
    else:
        target = list(c.r.tensors[tout[0]].shape)
    if x.pending in ("in_var", "in_var_eps"):  # an instance norm's variance [C] viewed [1, C, 1, 1]
        if math.prod(target) == c.g.shape(x.ref)[1]:
            return _V(x.ref, x.shape, x.perm, x.pending, x.data, (*x.origin, i))
        raise _Unsupported(_LN_WHAT[x.pending])
    return _reshape_to(c, i, x, _batch_fix(target), tout)


@_handler("SQUEEZE")
def _squeeze(c: _Converter, i, ins, tin, tout, o):
    x = ins[0]
    tfl = x.tfl_shape
    dims = [d % len(tfl) for d in (o.squeezeDims if o is not None and o.squeezeDims is not None else [])]
    if not dims:
        dims = [k for k, d in enumerate(tfl) if d == 1 and k > 0]
    return _reshape_to(c, i, x, [d for k, d in enumerate(tfl) if k not in dims], tout)


@_handler("EXPAND_DIMS")
def _expand_dims(c: _Converter, i, ins, tin, tout, o):
    x = ins[0]
    tfl = x.tfl_shape
    [ax] = _int_list(ins[1], "the EXPAND_DIMS axis")
    ax = ax % (len(tfl) + 1)
    return _reshape_to(c, i, x, tfl[:ax] + [1] + tfl[ax:], tout)


@_handler("TRANSPOSE")
def _transpose(c: _Converter, i, ins, tin, tout, o):
    x = ins[0]
    if not isinstance(x, _V):
        raise _Unsupported("TRANSPOSE of a constant")
    p = _int_list(ins[1], "the TRANSPOSE permutation")
    rank = len(p)
    if x.pending == "grouped":
        g1, g2, r = x.data
        if p == list(range(r - 2)) + [r - 1, r - 2]:
            return _V(x.ref, x.shape, x.perm, "shuffled", (g1, g2), (*x.origin, i))
        raise _Unsupported(_PENDING_WHAT["grouped"])
    if x.pending is not None:
        x = c.plain(x)
    if sorted(p) != list(range(len(x.perm))):
        raise _Unsupported(f"TRANSPOSE permutation {p} of a rank-{len(x.perm)} tensor")
    return _V(x.ref, x.shape, tuple(x.perm[p[k]] for k in range(rank)))


def _ir_pads(x: _V, pads: np.ndarray, channels: bool = False) -> list[int]:
    """TFLite per-axis [before, after] pads -> IR [top, bottom, left, right] (H, W), with
    ``channels`` and channel pads [..., front, back] too."""
    rank = len(x.shape)
    if pads.shape != (rank, 2) or rank != 4:
        raise _Unsupported(f"padding {pads.tolist()} of a rank-{rank} tensor (only an image's)")
    by_ir = {x.perm[k]: pads[k] for k in range(rank)}
    if by_ir[0].any() or (by_ir[1].any() and not channels):
        raise _Unsupported(f"padding {pads.tolist()} of the batch or channel axis (only H and W)")
    hw = [int(by_ir[2][0]), int(by_ir[2][1]), int(by_ir[3][0]), int(by_ir[3][1])]
    return hw + [int(by_ir[1][0]), int(by_ir[1][1])] if by_ir[1].any() else hw


@_handler("PAD", "PADV2")
def _pad(c: _Converter, i, ins, tin, tout, o):
    x = ins[0]
    if not isinstance(x, _V):
        raise _Unsupported("PAD of a constant")
    if not isinstance(ins[1], _Const):
        raise _Unsupported("pads computed from the input")
    if x.pending is not None:
        x = c.plain(x)
    pads = _ir_pads(x, ins[1].raw.reshape(-1, 2).astype(np.int64), channels=True)
    value = 0.0
    if len(ins) > 2 and ins[2] is not None:
        v = _scalar(ins[2])
        if v is None:
            raise _Unsupported("a pad value that is not a scalar constant")
        value = f32(v)
    if any(p < 0 for p in pads):
        raise _Unsupported(f"negative pads {pads}")
    reader = c.only_reader(tout[0])
    if value == 0.0 and reader is not None and reader[0] in ("CONV_2D", "DEPTHWISE_CONV_2D", "AVERAGE_POOL_2D") and reader[2] == 0 \
            and x.perm == _canonical(4) and len(pads) == 4:
        return _V(x.ref, x.shape, x.perm, "padded", (*pads, value), (i,))
    if value <= _LOWEST and len(pads) == 4:  # a max pool's padding (PyTorch's), written out by litert-torch
        return _V(x.ref, x.shape, x.perm, "neg_padded", (*pads, value), (i,))
    return c.new("pad", x, x.perm, pads=pads, value=value)


@_handler("MIRROR_PAD")
def _mirror_pad(c: _Converter, i, ins, tin, tout, o):
    x = ins[0]
    if o.mode != c.r.s.MirrorPadMode.SYMMETRIC:
        raise _Unsupported("MIRROR_PAD in REFLECT mode (the IR has no mirror padding)")
    pads = _ir_pads(x, ins[1].raw.reshape(-1, 2).astype(np.int64))
    edge = max(pads) <= 1  # a one-wide SYMMETRIC pad replicates the edge
    if x.pending == "mirror" and x.data[4] and edge:  # stacked one-wide pads: the edge, replicated
        return _V(x.ref, x.shape, x.perm, "mirror", (*[p + q for p, q in zip(x.data[:4], pads)], True), (*x.origin, i))
    if x.pending is not None:
        x = c.plain(x)
    return _V(x.ref, x.shape, x.perm, "mirror", (*pads, edge), (i,))


def _crop(c: _Converter, x: _V, begin: list[int], end: list[int]) -> _V:
    """Slice TFLite axes to [begin, end) (resolved, stride 1): H/W -> ``crop``, one other
    axis -> one output of a ``split`` (shared by slices cutting at the same places)."""
    tfl = x.tfl_shape
    crops, other = [0, 0, 0, 0], []
    for k in range(len(tfl)):
        lo, hi = begin[k], end[k]
        if (lo, hi) == (0, tfl[k]):
            continue
        d = x.perm[k]
        if len(tfl) == 4 and d >= 2:
            crops[2 * (d - 2)], crops[2 * (d - 2) + 1] = lo, tfl[k] - hi
        else:
            other.append((d, lo, hi))
    if x.pending is not None:
        x = c.plain(x)
    if other:
        if len(other) > 1 or any(crops) or other[0][0] == 0:
            raise _Unsupported(f"a slice [{begin}, {end}) of {tfl} (one non-batch axis, or H and W)")
        d, lo, hi = other[0]
        ref = slice_as_split(c.g, c.split_cache, c.t(x), d, lo, hi, c._name(c.label_of(c.index)), c.origins, (c.index,))
        return _V(ref, tuple(c.g.shape(ref)), x.perm)
    if not any(crops):
        return x
    return c.new("crop", x, x.perm, crops=crops)


@_handler("SLICE")
def _slice(c: _Converter, i, ins, tin, tout, o):
    x = ins[0]
    begin, size = _int_list(ins[1], "SLICE begin"), _int_list(ins[2], "SLICE size")
    tfl = x.tfl_shape
    end = [tfl[k] if size[k] == -1 else begin[k] + size[k] for k in range(len(tfl))]
    if any(not 0 <= begin[k] < end[k] <= tfl[k] for k in range(len(tfl))):
        raise _Unsupported(f"SLICE begin {begin} size {size} of {tfl}")
    return _crop(c, x, begin, end)


def _const_strided_slice(v: np.ndarray, begin: list[int], end: list[int], strides: list[int], o: Any) -> np.ndarray:
    if o.ellipsisMask or o.newAxisMask:
        raise _Unsupported("STRIDED_SLICE of a constant with ellipsis or new-axis masks")
    idx: list[Any] = []
    for k in range(len(begin)):
        b = None if o.beginMask >> k & 1 else begin[k]
        e = None if o.endMask >> k & 1 else end[k]
        idx.append(b if o.shrinkAxisMask >> k & 1 else slice(b, e, strides[k]))
    return np.asarray(v[tuple(idx)])


@_handler("STRIDED_SLICE")
def _strided_slice(c: _Converter, i, ins, tin, tout, o):
    x = ins[0]
    if isinstance(x, _Const):  # shape arithmetic of a dynamic-batch model (after SHAPE)
        return _Const(value=_const_strided_slice(x.raw, *(_int_list(ins[k], "STRIDED_SLICE operands") for k in (1, 2, 3)), o))
    begin, end, strides = (_int_list(ins[k], f"STRIDED_SLICE {w}") for k, w in ((1, "begin"), (2, "end"), (3, "strides")))
    if o.ellipsisMask or o.newAxisMask:
        raise _Unsupported("STRIDED_SLICE with ellipsis or new-axis masks")
    tfl = x.tfl_shape
    lo_hi_b, lo_hi_e = [], []
    for k in range(len(tfl)):
        if o.shrinkAxisMask >> k & 1:  # one element, the axis dropped (ViT's readout x[:, 0])
            if not -tfl[k] <= begin[k] < tfl[k]:
                raise _Unsupported(f"STRIDED_SLICE index {begin[k]} out of range for axis {k} of {tfl}")
            lo_hi_b.append(begin[k] % tfl[k])
            lo_hi_e.append(begin[k] % tfl[k] + 1)
            continue
        if strides[k] != 1:
            raise _Unsupported(f"STRIDED_SLICE with stride {strides[k]} (only 1)")
        b = None if o.beginMask >> k & 1 else begin[k]
        e = None if o.endMask >> k & 1 else (b + end[k] if o.offset and b is not None else end[k])
        lo, hi, _ = slice(b, e, 1).indices(tfl[k])
        if hi <= lo:
            raise _Unsupported(f"STRIDED_SLICE leaves nothing of axis {k}")
        lo_hi_b.append(lo)
        lo_hi_e.append(hi)
    y = _crop(c, x, lo_hi_b, lo_hi_e)
    if not o.shrinkAxisMask:
        return y
    kept = [hi - lo for k, (lo, hi) in enumerate(zip(lo_hi_b, lo_hi_e)) if not o.shrinkAxisMask >> k & 1]
    if not kept or o.shrinkAxisMask & 1:
        raise _Unsupported(f"STRIDED_SLICE dropping the batch axis or every axis of {tfl}")
    return _reshape_to(c, i, y, kept, tout)


@_handler("RESIZE_NEAREST_NEIGHBOR", "RESIZE_BILINEAR")
def _resize(c: _Converter, i, ins, tin, tout, o):
    x = _std(c, ins[0], "a resize")
    bilinear = c.ops[i][0] == "RESIZE_BILINEAR"
    if bilinear:  # half-pixel centres or aligned corners; the legacy rule has no IR form
        if not (o.alignCorners or o.halfPixelCenters):
            raise _Unsupported("bilinear resize without half-pixel centres or aligned corners (TF1's legacy rule)")
        mode = "bilinear_corners" if o.alignCorners else "bilinear"
    elif o.alignCorners:
        raise _Unsupported("nearest resize with align_corners (its source pixels differ from the IR's upsample)")
    else:
        mode = "nearest"
    oh, ow = _int_list(ins[1], "the resize size")
    _, ch, h, w = x.shape
    if (oh % h or ow % w) and mode == "nearest" and not o.halfPixelCenters:  # the legacy rule: floor(dst * in / out)
        return c.new("resize", x, size=[oh, ow])
    if oh % h or ow % w:
        raise _Unsupported(f"{'bilinear' if bilinear else 'nearest'} resize {h}x{w} -> {oh}x{ow} by a non-integer factor")
    # for integer factors both the legacy and the half-pixel nearest rule read source floor(dst / f)
    scale = [oh // h, ow // w]
    return x if scale == [1, 1] else c.new("upsample", x, scale=scale, mode=mode)


@_handler("QUANTIZE", "DEQUANTIZE")
def _quantize(c: _Converter, i, ins, tin, tout, o):
    x = ins[0]
    if isinstance(x, _Const):
        return _Const(value=x.real.astype(np.float32))
    return x


# ---------------------------------------------------------------- the entry point
def _load(model: Any, name: str | None = None) -> tuple[bytes, str, str]:
    """(the flatbuffer, default name, what a refusal names: the file's path, else the name),
    its size checked before it is read."""
    if isinstance(model, (bytes, bytearray, memoryview)):
        check_bytes(model, name or "tflite-model")
        return bytes(model), "tflite-model", name or "tflite-model"
    path = Path(model)
    if not path.is_file():
        raise UnsupportedModelError(f"{path}: no such TFLite file")
    return read_model_file(path, "TFLite file"), path.stem, str(path)


def _tensor_name(t: Any) -> str:
    return quoted((t.Name() or b"").decode(errors="replace"))


def check_tflite(buf: bytes, model: str) -> None:
    """The bounds of foundation/limits.py on a TFLite flatbuffer, read through the schema
    without unpacking it: at most ``GRAPH_NODES`` operators over all subgraphs (and subgraphs),
    and every tensor's shape and shape signature at most ``TENSOR_ELEMENTS`` elements.
    UnsupportedModelError names the model (``model``) and the subgraph and tensor."""
    if len(buf) < 8 or buf[4:8] != b"TFL3":
        raise UnsupportedModelError(f"{model}: not a TFLite flatbuffer (no TFL3 identifier)")
    try:
        m = _schema().Model.GetRootAs(buf, 0)
        n_sub = m.SubgraphsLength()
        check_graph_nodes(n_sub, model, "subgraphs")
        ops = 0
        for k in range(n_sub):
            ops += m.Subgraphs(k).OperatorsLength()
            check_graph_nodes(ops, model, "operators")
        for k in range(n_sub):
            sg = m.Subgraphs(k)
            for i in range(sg.TensorsLength()):
                t = sg.Tensors(i)
                for dims, what in ((t.ShapeAsNumpy() if t.ShapeLength() else (), "shape"),
                                   (t.ShapeSignatureAsNumpy() if t.ShapeSignatureLength() else (), "shape signature")):
                    if len(dims):
                        check_elements(dims.tolist(), model, lambda: f"tensor {_tensor_name(t)} (subgraph {k}, index {i}) "
                                                                       f"of {what}")
    except UnsupportedModelError:
        raise
    except Exception as e:  # a damaged flatbuffer fails anywhere in the generated reader
        raise UnsupportedModelError(f"{model}: unreadable TFLite flatbuffer ({type(e).__name__}: "
                                    f"{str(e).splitlines()[0] if str(e) else ''})") from None


def _input_perm(c: _Converter, index: int, rank: int) -> tuple[int, ...]:
    """The layout of graph input ``index`` (TFLite axis i = IR axis perm[i]): NHWC for rank 4,
    as TensorFlow's converter writes an image, but NCHW (the identity) when every reader of the
    input transposes it NCHW -> NHWC first, as litert-torch writes a PyTorch model (its input
    keeps PyTorch's layout, its convolutions run in NHWC), also through a PAD before the
    TRANSPOSE (PyTorch's ``F.pad`` of the image: TF-style "same" padding, EfficientNet-B*b)."""
    if rank != 4 or not _read_as_nchw(c, index):
        return _canonical(rank)
    return tuple(range(rank))


def _read_as_nchw(c: _Converter, index: int) -> bool:
    """Every reader of tensor ``index`` transposes it NCHW -> NHWC, or pads it and every reader of
    the padded tensor does so."""
    readers = c.readers.get(index, [])
    if not readers or index in c.outputs:
        return False
    for i, pos in readers:
        opname, ins, outs, _ = c.ops[i]
        if pos != 0 or len(ins) < 2 or not c.r.is_const(ins[1]):
            return False
        if opname in ("PAD", "PADV2"):
            if not _read_as_nchw(c, outs[0]):
                return False
        elif opname != "TRANSPOSE" or c.r.const_value(ins[1]).reshape(-1).tolist() != [0, 2, 3, 1]:
            return False
    return True


def _input_shape(c: _Converter, t: _Tensor, override: list[int] | None, perm: tuple[int, ...] | None = None) -> list[int]:
    dims = list(t.signature) if t.signature is not None and len(t.signature) == len(t.shape) else list(t.shape)
    rank = len(dims)
    if override is not None:
        shape = [int(d) for d in override]
        if len(shape) != rank or not shape or shape[0] != 1 or min(shape) < 1:
            raise UnsupportedModelError(f"{c.model}: input_shape {list(override)} does not fit input {t.name!r} of rank {rank} "
                                        "(batch 1, the IR's layout: NCHW for rank 4)")
        return shape
    if not dims:
        raise UnsupportedModelError(f"{c.model}: input {t.name!r} is a scalar")
    if dims[0] == -1:
        dims[0] = 1  # a free batch dimension
    if dims[0] != 1:
        raise UnsupportedModelError(f"{c.model}: input {t.name!r} has batch {dims[0]}; the IR is batch 1 (give input_shape)")
    free = [k for k, d in enumerate(dims) if d < 1]
    if free:
        raise UnsupportedModelError(f"{c.model}: input {t.name!r} has free dimension(s) at TFLite axes {free} "
                                    f"(shape signature {t.signature}; give input_shape, NCHW; --shape on the command line)")
    perm = perm or _canonical(rank)
    ir = [0] * rank
    for k in range(rank):
        ir[perm[k]] = dims[k]
    return ir


def import_tflite(model: Any, input_shape: list[int] | tuple[int, ...] | None = None, name: str | None = None) -> Graph:
    """Import a TFLite flatbuffer (a path or its bytes) into an IR graph.

    ``input_shape`` (the IR's layout: NCHW for a rank-4 input, batch 1) replaces the shape
    of the model's single input; without it a free batch dimension becomes 1 and any other
    free dimension is an error. Raises :class:`UnsupportedModelError`, one line naming the
    model, the operator (index, output tensor, builtin name), for anything the IR cannot
    express. The graph's source is ``"tflite"``.
    """
    return import_tflite_with_origins(model, input_shape, name)[0]


def _walk(c: _Converter, r: _Reader, name: str) -> None:
    """Map the operators of subgraph 0 in order onto IR values (``c.env``)."""
    for i, (opname, ins, outs, op) in enumerate(c.ops):
        c.index = i
        label = r.tensors[outs[0]].name if outs else "?"
        where = f"TFLite operator {i} ({opname}, output {quoted(label)})"  # litert-torch names tensors by module paths
        with node_errors(name, where):
            if i in c.replaced:  # computed by the pattern an earlier op matched
                if c.replaced[i] is not None:
                    c.env[outs[0]] = c.replaced[i]
                continue
            if i in c.absorbed:  # folded into an earlier op; apply this op's fused activation
                src = next(c.env[t] for t in ins if t >= 0 and isinstance(c.env.get(t), _V))
                v = _act(c, src, c.absorbed[i])
                c.env[outs[0]] = v
                continue
            handler = HANDLERS.get(opname)
            if handler is None:
                raise _Unsupported("unsupported operator")
            vals = []
            for t in ins:
                if t < 0:
                    vals.append(None)
                elif t in c.env:
                    vals.append(c.env[t])
                elif r.is_const(t):
                    vals.append(_Const(r, t))
                else:
                    raise _Unsupported(f"input tensor {t} ({r.tensors[t].name!r}) is produced by no earlier operator")
            vals = [_materialize(c, v, opname) for v in vals]
            out = handler(c, i, vals, ins, outs, r.options(op))
            outs_v = out if isinstance(out, list) else [out]
            if len(outs_v) != len(outs):
                raise _Unsupported(f"{len(outs)} outputs, {len(outs_v)} mapped")
            for t, v in zip(outs, outs_v):
                c.env[t] = v


def import_tflite_with_origins(model: Any, input_shape: list[int] | tuple[int, ...] | None = None,
                               name: str | None = None) -> tuple[Graph, dict[str, tuple[int, ...]]]:
    """:func:`import_tflite`, plus for each IR node (but the inputs) the indices of the
    operators of subgraph 0 it came from (a conv's ``CONV_2D``; a batch norm's ``MUL`` and
    ``ADD``; an average pool's pool and correction ``MUL``). Whoever holds the weights can
    carry them over with it."""
    buf, default_name, where = _load(model, name)
    name = name or default_name
    if len(buf) < 8 or buf[4:8] != b"TFL3":
        raise UnsupportedModelError(f"{name}: not a TFLite flatbuffer (no TFL3 identifier)")
    check_tflite(buf, where)  # operators and tensor shapes, before anything is read into objects
    if input_shape is not None:
        check_elements(input_shape, where, "input_shape")
    try:
        r = _Reader(buf, name)
    except UnsupportedModelError:
        raise
    except Exception as e:  # a damaged flatbuffer fails anywhere in the generated reader
        raise UnsupportedModelError(f"{name}: unreadable TFLite flatbuffer ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})") from None
    g = Graph(name=name, source="tflite", meta={"schema_version": int(r.m.Version())})
    c = _Converter(g, name, r)
    sg = r.sg
    for i in range(sg.OperatorsLength()):
        op = sg.Operators(i)
        ins = [int(v) for v in op.InputsAsNumpy()] if op.InputsLength() else []
        outs = [int(v) for v in op.OutputsAsNumpy()] if op.OutputsLength() else []
        c.ops.append((r.codes[op.OpcodeIndex()], ins, outs, op))
        for pos, t in enumerate(ins):
            if t >= 0:
                c.readers.setdefault(t, []).append((i, pos))
    graph_inputs = [int(v) for v in sg.InputsAsNumpy()] if sg.InputsLength() else []
    graph_outputs = [int(v) for v in sg.OutputsAsNumpy()] if sg.OutputsLength() else []
    c.outputs = set(graph_outputs)
    if input_shape is not None and len(graph_inputs) != 1:
        raise UnsupportedModelError(f"{name}: input_shape given but the model has {len(graph_inputs)} inputs")
    for t in graph_inputs:
        info = r.tensors[t]
        perm = _input_perm(c, t, len(info.shape))
        shape = _input_shape(c, info, None if input_shape is None else list(input_shape), perm)
        ref = g.input(shape, name=c._name(info.name or "input"))
        c.env[t] = _V(ref, tuple(shape), perm)
    try:
        _walk(c, r, name)
    except UnsupportedModelError as e:
        if any(opname == "SHAPE" for opname, *_ in c.ops):
            raise UnsupportedModelError(f"{e} (the model computes shapes at run time, as a free batch makes the converter "
                                        "write: convert it with batch 1, e.g. keras.Input(shape, batch_size=1))") from None
        raise
    refs = []
    for t in graph_outputs:
        v = c.env.get(t)
        # the tensor's name is looked up only for an error's message
        with node_errors(name, lambda: f"graph output {r.tensors[t].name!r}", cannot_map=None):
            if not isinstance(v, _V):
                raise _Unsupported("is a constant, not computed from the input" if v is not None else "is produced by no operator")
            v = _std(c, _materialize(c, v, ""), "a graph output")
            refs.append(c.t(v))
    if not refs:
        raise UnsupportedModelError(f"{name}: the model has no output")
    finish(g, name, refs)
    return g, {k: v for k, v in c.origins.items() if k in g.nodes}


#: pending patterns an operator may receive as they are (it continues or ends the pattern)
_PASSABLE: dict[str, tuple[str, ...]] = {
    "FULLY_CONNECTED": ("rows",),
    "CONV_2D": ("padded",),
    "DEPTHWISE_CONV_2D": ("padded",),
    "AVERAGE_POOL_2D": ("padded",),
    "MAX_POOL_2D": ("mirror", "neg_padded"),
    "MUL": ("relu6_plus3", "x_relu6_plus3", "affine", "ln_rstd", "ln_g", "ln_negmean", "ln_scaled", "ln_centered",
            "ln_normed", "in_centered", "in_rstd", "in_normed"),
    "ADD": ("affine", "ln_var", "ln_shift", "ln_shift_b", "ln_scaled", "ln_normed_g", "in_var", "in_normed",
            "in_normed_g"),
    "SUB": ("ln_mean", "in_mean"),
    "DIV": ("lrn",),
    "NEG": ("ln_mean",),
    "SQUARED_DIFFERENCE": ("ln_mean",),
    "MEAN": ("ln_sqdiff", "in_sq"),
    "RSQRT": ("ln_var_eps", "in_var_eps"),
    "RELU": ("min",),
    "RELU6": ("plus3",),
    "MINIMUM": ("max",),
    "MAXIMUM": ("min",),
    "TRANSPOSE": ("grouped",),
    "RESHAPE": ("shuffled", "rows", "in_var", "in_var_eps"),
    "MIRROR_PAD": ("mirror",),
    "QUANTIZE": ("padded", "mirror", "plus3", "relu6_plus3", "x_relu6_plus3", "affine", "min", "max", "grouped", "shuffled"),
    "DEQUANTIZE": ("padded", "mirror", "plus3", "relu6_plus3", "x_relu6_plus3", "affine", "min", "max", "grouped", "shuffled"),
}


def _materialize(c: _Converter, v: Any, opname: str) -> Any:
    if isinstance(v, _V) and v.pending and v.pending not in _PASSABLE.get(opname, ()):
        return c.plain(v)
    return v
