"""Import ONNX models into the architecture IR.

``import_onnx(path_or_model, input_shape=None, name=None)`` reads the model with the ``onnx``
package (imported on first use) and walks its nodes in file order over IR values: a tensor
computed from the input is an IR reference whose shape the IR infers; a constant (an
initializer, a ``Constant`` node, anything computed from constants and ``Shape``) is a NumPy
array evaluated as it is met, so the shape arithmetic of a batch-dynamic export resolves to
concrete sizes. Weights are read only for their shapes. Each IR node is named after the ONNX node
it came from, so the per-op breakdown of ``latbench predict`` names the model's own layers. A
free batch dimension resolves to 1; other free dimensions need ``input_shape`` (NCHW, batch 1).

Each ONNX operator (and the decomposed h-swish/h-sigmoid/swish patterns) maps to one IR operator
or vanishes; anything else raises :class:`UnsupportedModelError` (:mod:`.common`), one line naming
the model, the node and its op_type. Every bound of :mod:`foundation.limits` is checked before
the work it bounds: the file's size before reading, its node count in the protobuf wire format
before parsing (:func:`count_nodes`), every declared and evaluated tensor's size before it is
used. docs/generators.md (*ONNX importer*) has the mapping and the bounds in full. The
pool-geometry helpers at the end are shared with the TFLite importer.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from ..ir import Graph, split_ref
from .common import Unsupported as _Unsupported
from .common import UnsupportedModelError, finish, handler_registry, materialized, node_errors, prelu_parameters
from .common import check_bytes, check_elements, check_graph_nodes, quoted, read_model_file, reciprocal
from .common import too_many_elements, unique_name

if TYPE_CHECKING:  # onnx is imported on first use
    import onnx

__all__ = ["import_onnx", "UnsupportedModelError"]


# ---------------------------------------------------------------- values
@dataclass(frozen=True)
class _T:
    """A tensor computed from the input: an IR reference, or a pattern awaiting its reader.

    A pending value (``x + 3`` inside an h-swish, a ``MatMul`` awaiting its bias ``Add``)
    has no IR node yet: ``ref`` is the tensor it derives from, ``data`` its parameters and
    ``origin`` the ONNX node it came from (the name its IR node will take).

    ``shape`` is the ONNX tensor's shape. A *view* (not pending, ``shape`` differing from its IR
    tensor's) holds the IR tensor's elements in the same order under another shape: what a
    ``Reshape``/``Squeeze``/``Unsqueeze``, or a ``Transpose`` moving only unit axes, makes of a
    token tensor when its result has no batch-1 first axis (``[N, 1, C]`` of
    ``torch.nn.MultiheadAttention``'s sequence-first layout); it costs no IR node until an
    operator needs the IR tensor in its own shape (:meth:`_Converter.formed`).
    """

    ref: str
    shape: tuple[int, ...]
    pending: str | None = None
    data: tuple = ()
    origin: str = ""


_PENDING_WHAT = {
    "expanded": "an Expand of a computed tensor read by an operator that does not broadcast it (only Add and Mul do)",
    "relu6_plus3": "Clip(x + 3, 0, 6) not divided by 6 (hsigmoid pattern)",
    "x_relu6_plus3": "x * Clip(x + 3, 0, 6) not divided by 6 (hswish pattern)",
    "shuffled": "a Transpose outside a channel-shuffle pattern (the IR has no transpose)",
}


#: the pending steps of decomposed layer norms and GELUs (see _decomposed)
_DECOMPOSED = {
    "ln_centered": "x - ReduceMean(x) outside a layer-norm pattern",
    "ln_square": "(x - mean)^2 outside a layer-norm pattern",
    "ln_var": "a variance outside a layer-norm pattern",
    "ln_var_eps": "variance + epsilon outside a layer-norm pattern",
    "ln_std": "sqrt(variance + epsilon) outside a layer-norm pattern",
    "erf": "Erf outside a GELU pattern x * 0.5 * (1 + erf(x / sqrt(2))) (the IR has no erf)",
    "erf1": "1 + erf(x / sqrt(2)) outside a GELU pattern",
    "half_erf1": "0.5 * (1 + erf(x / sqrt(2))) outside a GELU pattern",
    "x_erf1": "x * (1 + erf(x / sqrt(2))) outside a GELU pattern",
    "cube": "x^3 outside a tanh-GELU pattern (the IR has no power)",
    "tanh_arg": "a part of tanh-GELU's sqrt(2/pi) * (x + 0.044715 x^3) outside its pattern",
    "tanh_g": "tanh(sqrt(2/pi) * (x + 0.044715 x^3)) outside a tanh-GELU pattern",
    "tanh_g1": "1 + tanh(...) outside a tanh-GELU pattern",
    "half_tanh_g1": "0.5 * (1 + tanh(...)) outside a tanh-GELU pattern",
    "x_tanh_g1": "x * (1 + tanh(...)) outside a tanh-GELU pattern",
    "lrn_view": "squares viewed [1, 1, C, H, W] outside a local-response-norm pattern",
    "lrn_padded": "a Pad of the channel axis outside a local-response-norm pattern (the IR pads H and W)",
    "lrn_avg": "an average over a window of channels outside a local-response-norm pattern",
    "lrn_alpha": "a part of a local response norm's bias + alpha * average outside its pattern",
    "lrn_bias": "a local response norm's bias + alpha * average outside its pattern",
    "lrn_den": "a local response norm's divisor outside its pattern (the IR has no power)",
}
_PENDING_WHAT.update(_DECOMPOSED)


class _Const:
    """A constant tensor, read lazily: weights are only ever asked for their shape."""

    def __init__(self, value: Any = None, proto: Any = None, base_dir: str = ""):
        self._value = None if value is None else np.asarray(value)
        self._proto = proto
        self._base_dir = base_dir

    @property
    def shape(self) -> tuple[int, ...]:
        if self._value is not None:
            return tuple(self._value.shape)
        return tuple(int(d) for d in self._proto.dims)

    @property
    def value(self) -> np.ndarray:
        if self._value is None:
            from onnx import numpy_helper

            try:
                self._value = numpy_helper.to_array(self._proto, base_dir=self._base_dir)
            except Exception as e:  # external data missing, unknown element type ...
                raise _Unsupported(f"cannot read the constant {self._proto.name!r}: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}") from None
        return self._value


def _is_num(v: np.ndarray) -> bool:
    return v.dtype.kind in "fiub"


def f32(v: float) -> float:
    """A float32 value as the shortest decimal that reads back as it (1e-05, not
    9.999999747378752e-06): what the model's author wrote, so attributes (and model ids)
    match those of the same network built directly as IR."""
    return float(str(np.float32(v)))


# ---------------------------------------------------------------- the walker
class _Converter:
    def __init__(self, g: Graph, model: str, readers: dict[str, int], base_dir: str):
        self.g = g
        self.model = model
        self.readers = readers
        self.base_dir = base_dir
        self.env: dict[str, Any] = {}
        self.origin = ""  # the ONNX node being converted (IR nodes are named after it)
        self.opset = 1
        self.index = -1  # position of that node in the graph
        self.index_of: dict[str, int] = {}  # node label -> position
        self.origins: dict[str, tuple[int, ...]] = {}  # IR node -> the ONNX node(s) it came from
        self.source_of: dict[_T, str] = {}  # pending value -> its ONNX tensor (fusions check its readers)
        self.split_cache: dict[tuple, list[str]] = {}  # slices as split outputs (see slice_as_split)
        self._materialized: dict[_T, str] = {}

    # ------------------------------------------------ naming and values
    def _name(self, base: str) -> str:
        return unique_name(self.g, base)

    def t(self, v: Any) -> str:
        """The IR reference of a tensor value (materialising a pending pattern)."""
        if isinstance(v, _Const):
            raise _Unsupported(f"a constant tensor of shape {list(v.shape)} where the IR needs a computed one (the IR has no weights)")
        return materialized(self._materialized, v, self._end_pattern)

    def _end_pattern(self, v: _T) -> str:
        """The IR node a pending pattern ends in when an operator outside it reads it."""
        if v.pending == "crop":
            return self._add("crop", [v.ref], v.origin, crops=list(v.data))
        if v.pending == "matmul":
            return self._add("fc", [v.ref], v.origin, out_features=v.data[0], bias=False)
        if v.pending == "grouped":
            return self._add("reshape", [v.ref], v.origin, shape=list(v.shape))
        if v.pending == "square":
            return self._add("mul", [v.ref, v.ref], v.origin)
        if v.pending == "plus3":  # x + 3 that no h-sigmoid/h-swish pattern continues
            return self._add("shift", [v.ref], v.origin, value=3.0)
        if v.pending == "ln_mean":  # a mean over the last axis that no layer norm follows
            return self._add("mean", [v.ref], v.origin, axis=v.data[0], keepdim=True)
        if v.pending in ("ln", "ln_gain"):  # a layer norm without (or with only) its gain
            ref = self._add("layernorm", [v.ref], v.origin, axis=v.data[0], eps=v.data[1])
            self.origins[ref] = v.data[2]
            return ref
        raise _Unsupported(_PENDING_WHAT[v.pending])

    def _add(self, op: str, refs: list[str], origin: str, **attrs) -> str:
        ref = self.g.add(op, refs, name=self._name(origin), **attrs)
        self.origins[ref] = (self.index_of.get(origin, self.index),)
        return ref

    def new(self, op: str, inputs: list[Any] | Any, origin: str | None = None, **attrs) -> _T:
        refs = [self.t(x) for x in (inputs if isinstance(inputs, list) else [inputs])]
        ref = self._add(op, refs, self.origin if origin is None else origin, **attrs)
        return _T(ref, tuple(self.g.shape(ref)))

    def sole(self, out: str) -> bool:
        """The tensor ``out`` has exactly one reader (and is not a graph output)."""
        return self.readers.get(out, 0) == 1

    # ------------------------------------------------ views (see _T)
    def ir_shape(self, x: _T) -> tuple[int, ...]:
        return tuple(self.g.shape(x.ref))

    def formed(self, x: _T, rank: int = 0, origin: str | None = None) -> tuple[str, list[int]]:
        """(IR reference, IR axis of each ONNX axis) of ``x`` in its IR form (:func:`ir_form`,
        with leading unit axes up to ``rank``), a ``reshape`` node added when the IR tensor has
        another shape."""
        ref = self.t(x)
        shape, axes = ir_form(x.shape, rank)
        if list(self.g.shape(ref)) != shape:
            ref = self._add("reshape", [ref], f"{self.origin if origin is None else origin}/reshape", shape=shape)
        return ref, axes

    def ir_axis(self, x: _T, k: int) -> int | None:
        """The IR axis holding ONNX axis ``k`` (of more than one element) of ``x`` with the same
        elements before and after it, or None."""
        ir = self.ir_shape(x) if x.pending is None else x.shape
        if x.shape[k] == 1:
            return None
        before = math.prod(x.shape[:k])
        for j, d in enumerate(ir):
            if d == x.shape[k] and math.prod(ir[:j]) == before:
                return j
        return None

    def same(self, op: str, x: _T, **attrs) -> _T:
        """``op`` applied element by element to ``x`` (a view stays one, of the same shape)."""
        ref = self._add(op, [self.t(x)], self.origin, **attrs)
        return _T(ref, x.shape)


def ir_form(shape: tuple[int, ...] | list[int], rank: int = 0) -> tuple[list[int], list[int]]:
    """The IR shape holding an ONNX tensor of ``shape`` in the same element order, and the IR
    axis of each ONNX axis: the shape itself when its first axis has one element; else its first
    unit axis moved to the front (``[N, 1, C]`` -> ``[1, N, C]``); else a unit axis prepended
    (``[heads, N, d]`` -> ``[1, heads, N, d]``); leading unit axes added up to ``rank``."""
    shape = [int(d) for d in shape]
    if shape and shape[0] == 1:
        ir, axes = list(shape), list(range(len(shape)))
    elif 1 in shape:
        u = shape.index(1)
        ir = [1] + shape[:u] + shape[u + 1:]
        axes = [k + 1 if k < u else (0 if k == u else k) for k in range(len(shape))]
    else:
        ir, axes = [1] + shape, [k + 1 for k in range(len(shape))]
    pad = max(rank - len(ir), 0)
    return [1] * pad + ir, [a + pad for a in axes]


def _attrs(node: Any) -> dict[str, Any]:
    from onnx import helper

    out = {}
    for a in node.attribute:
        v = helper.get_attribute_value(a)
        if isinstance(v, bytes):
            v = v.decode()
        out[a.name] = v
    return out


def _dim(d: int, rank: int) -> int:
    if not -rank <= d < rank:
        raise _Unsupported(f"axis {d} out of range for rank {rank}")
    return d % rank


def _const(c: "_Converter", v: Any, what: str) -> np.ndarray:
    if not isinstance(v, _Const):
        raise _Unsupported(f"{what} must be a constant, not computed from the input")
    return v.value


def _opt(ins: list[Any], k: int) -> Any:
    return ins[k] if k < len(ins) else None


def _scalar(v: Any) -> float | None:
    """The value of a constant with a single element, else None."""
    if isinstance(v, _Const) and math.prod(v.shape) == 1:
        val = v.value
        if _is_num(val):
            return float(val.reshape(-1)[0])
    return None


# ---------------------------------------------------------------- handlers
# A handler takes (converter, inputs, attrs, node) and returns one value per node output
# (a list) or a single value. Inputs are _T, _Const or None (an omitted optional input).
Handler = Callable[["_Converter", list[Any], dict, Any], Any]
HANDLERS: dict[str, Handler]
HANDLERS, _handler = handler_registry()


def _spatial_pads(a: dict, x_hw: tuple[int, int], kernel: list[int], stride: list[int], dilation: list[int]) -> tuple[list[int], list[int]]:
    """(before, after) pads per spatial dim from ``pads`` / ``auto_pad``."""
    auto = a.get("auto_pad", "NOTSET")
    if auto in ("NOTSET", ""):
        pads = [int(p) for p in a.get("pads", [0, 0, 0, 0])]
        if len(pads) != 4:
            raise _Unsupported(f"pads {pads} (expected 4 for a 2-d window)")
        return pads[:2], pads[2:]
    if auto == "VALID":
        return [0, 0], [0, 0]
    if auto not in ("SAME_UPPER", "SAME_LOWER"):
        raise _Unsupported(f"auto_pad={auto!r}")
    before, after = [], []
    for i in range(2):
        eff = dilation[i] * (kernel[i] - 1) + 1
        out = -(-x_hw[i] // stride[i])
        total = max((out - 1) * stride[i] + eff - x_hw[i], 0)
        small, big = total // 2, total - total // 2
        b, e = (small, big) if auto == "SAME_UPPER" else (big, small)
        before.append(b)
        after.append(e)
    return before, after


def _conv_padding(c: _Converter, x: _T, before: list[int], after: list[int], kernel: list[int], stride: list[int],
                  dilation: list[int]) -> tuple[Any, list[int]]:
    """A symmetric conv padding for (before, after) pads, with a ``pad`` node first if needed."""
    padding = symmetric_conv_padding(x.shape[2:], before, after, kernel, stride, dilation)
    if padding is not None:
        return x, padding
    pad = c.new("pad", x, origin=f"{c.origin}/pad", pads=[before[0], after[0], before[1], after[1]], value=0.0)
    return pad, [0, 0]


@_handler("Conv")
def _conv(c: _Converter, ins, a, node):
    x, w, b = ins[0], ins[1], _opt(ins, 2)
    if not isinstance(x, _T):
        raise _Unsupported("the convolution's input is a constant")
    if not isinstance(w, _Const):
        raise _Unsupported("a convolution weight computed from the input (only constant weights)")
    if len(w.shape) == 5 and len(x.shape) == 5:
        return _conv_along_depth(c, x, w, b, a)
    if len(w.shape) != 4 or len(x.shape) != 4:
        raise _Unsupported(f"only 2-d convolution is supported (weight shape {list(w.shape)})")
    cout, cin_g, kh, kw = w.shape
    groups = int(a.get("group", 1))
    if x.shape[1] != cin_g * groups:
        raise _Unsupported(f"input has {x.shape[1]} channels, the weight {list(w.shape)} with group={groups} expects {cin_g * groups}")
    kernel = [int(k) for k in a.get("kernel_shape", [kh, kw])]
    if kernel != [kh, kw]:
        raise _Unsupported(f"kernel_shape {kernel} differs from the weight's {[kh, kw]}")
    stride = [int(s) for s in a.get("strides", [1, 1])]
    dilation = [int(d) for d in a.get("dilations", [1, 1])]
    before, after = _spatial_pads(a, x.shape[2:], kernel, stride, dilation)
    x, padding = _conv_padding(c, x, before, after, kernel, stride, dilation)
    return c.new("conv2d", x, out_channels=cout, kernel=kernel, stride=stride, padding=padding, dilation=dilation,
                 groups=groups, bias=b is not None)


def _conv_along_depth(c: _Converter, x: _T, w: Any, b: Any, a: dict) -> _T:
    """A 3-d convolution whose window spans the depth axis only (1x1 in height and width), of
    one input channel: ChannelNet's channel-wise convolution, a 1-d convolution over the channels
    of an unsqueezed feature map ``[1, 1, C, H, W]``. It is the 2-d convolution of ``[1, 1, C, H*W]``
    by a ``kd x 1`` window: the same windows, the same multiply-accumulates, its output the
    3-d one's elements in order (``[1, cout, C', H*W]`` holds ``[1, cout, C', H, W]``)."""
    cout, cin_g, kd, kh, kw = (int(d) for d in w.shape)
    groups = int(a.get("group", 1))
    stride = [int(s) for s in a.get("strides", [1, 1, 1])]
    dilation = [int(d) for d in a.get("dilations", [1, 1, 1])]
    pads = [int(p) for p in a.get("pads", [0] * 6)]
    auto = a.get("auto_pad", "NOTSET")
    if x.shape[0] != 1 or x.shape[1] != 1 or cin_g != 1 or groups != 1 or (kh, kw) != (1, 1) \
            or stride[1:] != [1, 1] or dilation[1:] != [1, 1] or pads[1:3] + pads[4:] != [0] * 4 \
            or auto not in ("NOTSET", "") or len(pads) != 6:
        raise _Unsupported(f"a 3-d convolution (weight shape {list(w.shape)} on {list(x.shape)}); only one over "
                           "the depth axis of a single input channel (1x1 in height and width) is supported")
    _, _, depth, h, wd = x.shape
    flat = _reshape_to(c, x, [1, 1, depth, h * wd])
    padding = symmetric_conv_padding((depth, h * wd), [pads[0], 0], [pads[3], 0], [kd, 1], stride[:1] + [1],
                                     dilation[:1] + [1])
    if padding is None:
        raise _Unsupported(f"pads {pads} of a 3-d convolution along depth (only equal pads, or fewer after)")
    y = c.new("conv2d", flat, out_channels=cout, kernel=[kd, 1], stride=[stride[0], 1], padding=padding,
              dilation=[dilation[0], 1], bias=b is not None)
    return _T(y.ref, (1, cout, y.shape[2], h, wd))


def _fc_input(c: _Converter, x: Any) -> _T:
    if not isinstance(x, _T):
        raise _Unsupported("the fc input is a constant")
    if len(x.shape) != 2:
        raise _Unsupported(f"a matrix product on a rank-{len(x.shape)} input {list(x.shape)} (the IR's fc takes [1, F])")
    return x


def _last_axis_ref(c: _Converter, x: _T) -> str:
    """The IR reference of ``x`` with the ONNX tensor's last axis as its last (``fc`` and
    ``layernorm`` over it): its own when it has, else its IR form."""
    if x.pending is None and c.ir_shape(x)[-1] != x.shape[-1]:
        return c.formed(x)[0]
    return c.t(x)


def _fc(c: _Converter, x: _T, n_out: int, bias: bool, origin: str | None = None) -> _T:
    """An ``fc`` over the last axis of ``x`` (a token tensor, a view or a ``[1, F]`` vector)."""
    ref = c._add("fc", [_last_axis_ref(c, x)], c.origin if origin is None else origin, out_features=int(n_out), bias=bias)
    return _T(ref, (*x.shape[:-1], int(n_out)))


def _gemm_of_constants(c: _Converter, ins: list, a: dict) -> _Const:
    """Gemm evaluated (alpha A' B' + beta C): a layer applied to a constant (DIA-ResNet's LSTM cell
    on its zero initial state)."""
    x, w, b = ins[0].value, ins[1].value, None if _opt(ins, 2) is None else ins[2].value
    x = x.T if int(a.get("transA", 0)) else x
    w = w.T if int(a.get("transB", 0)) else w
    _evaluated(c, (x.shape[0], w.shape[-1]), "the Gemm of constants")
    y = float(a.get("alpha", 1.0)) * (x @ w)
    return _Const(y if b is None else y + float(a.get("beta", 1.0)) * b)


@_handler("Gemm")
def _gemm(c: _Converter, ins, a, node):
    if all(v is None or isinstance(v, _Const) for v in ins):
        return _gemm_of_constants(c, ins, a)
    x, w, b = _fc_input(c, ins[0]), ins[1], _opt(ins, 2)
    if int(a.get("transA", 0)):
        raise _Unsupported("Gemm with transA=1")
    if not isinstance(w, _Const) or len(w.shape) != 2:
        raise _Unsupported("Gemm whose B is not a constant matrix")
    n_in, n_out = (w.shape[1], w.shape[0]) if int(a.get("transB", 0)) else w.shape
    if n_in != x.shape[1]:
        raise _Unsupported(f"input has {x.shape[1]} features, B {list(w.shape)} expects {n_in}")
    if b is not None and not isinstance(b, _Const):
        raise _Unsupported("Gemm whose C is computed from the input")
    return _fc(c, x, n_out, b is not None)


@_handler("MatMul")
def _matmul(c: _Converter, ins, a, node):
    x, w = ins
    if isinstance(x, _Const) and isinstance(w, _Const):
        if len(x.shape) >= 2 and len(w.shape) >= 2:
            batch = np.broadcast_shapes(x.shape[:-2], w.shape[:-2])
            _evaluated(c, (*batch, x.shape[-2], w.shape[-1]), "the MatMul of constants")
        return _Const(np.matmul(x.value, w.value))
    if isinstance(x, _Const):
        raise _Unsupported(f"MatMul of a constant {list(x.shape)} by a computed tensor (the IR has no weights)")
    if len(x.shape) < 2:
        raise _Unsupported(f"MatMul of a rank-{len(x.shape)} tensor")
    if isinstance(w, _T):  # a product of two activations (attention): the IR's batched matmul
        if len(w.shape) != len(x.shape):
            raise _Unsupported(f"MatMul of tensors of different rank {list(x.shape)} and {list(w.shape)}")
        shape = (*np.broadcast_shapes(x.shape[:-2], w.shape[:-2]), x.shape[-2], w.shape[-1])
        rank = max(len(ir_form(x.shape)[0]), len(ir_form(w.shape)[0]))
        a, b = c.formed(x, rank)[0], c.formed(w, rank)[0]
        return _T(c._add("matmul", [a, b], c.origin), tuple(int(d) for d in shape))
    if len(w.shape) != 2:
        raise _Unsupported(f"MatMul by a constant of shape {list(w.shape)} (only a [K, N] matrix: an fc)")
    if w.shape[0] != x.shape[-1]:
        raise _Unsupported(f"input has {x.shape[-1]} features, the matrix {list(w.shape)} expects {w.shape[0]}")
    # an fc over the last axis; a bias Add that follows joins it (see _binary)
    ref = _last_axis_ref(c, x)
    return _T(ref, (*x.shape[:-1], int(w.shape[1])), "matmul", (int(w.shape[1]),), c.origin)


@_handler("BatchNormalization")
def _bn(c: _Converter, ins, a, node):
    x = ins[0]
    if not isinstance(x, _T):
        raise _Unsupported("batch norm of a constant")
    if int(a.get("training_mode", 0)) or len([o for o in node.output if o]) > 1:
        raise _Unsupported("batch norm in training mode (export the model in eval mode)")
    scale = ins[1]
    if len(x.shape) not in (2, 4) or not isinstance(scale, _Const) or math.prod(scale.shape) != x.shape[1]:
        raise _Unsupported(f"batch norm with scale of shape {list(getattr(scale, 'shape', []))} on an input of shape {list(x.shape)}")
    return c.new("batchnorm", x, eps=f32(a.get("epsilon", 1e-5)))


# element-wise functions evaluated on a constant (a layer applied to a constant state)
_ON_CONSTANTS = {
    "relu": lambda v: np.maximum(v, 0),
    "sigmoid": lambda v: 1 / (1 + np.exp(-v)),
    "tanh": np.tanh,
    "hswish": lambda v: v * np.clip(v + 3, 0, 6) / 6,
}


def _unary(op: str):
    def handler(c: _Converter, ins, a, node):
        if isinstance(ins[0], _Const) and op in _ON_CONSTANTS:
            return _Const(_ON_CONSTANTS[op](ins[0].value))
        if not isinstance(ins[0], _T):
            raise _Unsupported(f"{node.op_type} of a constant")
        return c.same(op, ins[0])

    return handler


for _name, _op in (("Relu", "relu"), ("HardSwish", "hswish")):
    HANDLERS[_name] = _unary(_op)


HANDLERS["Sigmoid"] = _unary("sigmoid")  # x * Sigmoid(x) replaces it by a swish (see _binary)


@_handler("HardSigmoid")
def _hardsigmoid(c: _Converter, ins, a, node):
    alpha, beta = float(a.get("alpha", 0.2)), float(a.get("beta", 0.5))
    if abs(alpha - 1 / 6) > 1e-6 or abs(beta - 0.5) > 1e-6:
        raise _Unsupported(f"HardSigmoid with alpha={alpha:g}, beta={beta:g} (the IR's hsigmoid is relu6(x + 3) / 6)")
    return c.new("hsigmoid", ins[0])  # x * HardSigmoid(x) replaces it by an hswish (see _binary)


@_handler("LeakyRelu")
def _leaky(c: _Converter, ins, a, node):
    return c.new("leaky_relu", ins[0], alpha=f32(a.get("alpha", 0.01)))


@_handler("PRelu")
def _prelu(c: _Converter, ins, a, node):
    x, slope = ins
    if not isinstance(slope, _Const):
        raise _Unsupported("PRelu slope computed from the input")
    n = prelu_parameters(x.shape, slope.shape,
                         lambda n: f"PRelu with {n} slopes (shape {list(slope.shape)}) on an input of shape {list(x.shape)}")
    return c.new("prelu", x, num_parameters=n)


@_handler("Clip")
def _clip(c: _Converter, ins, a, node):
    x = ins[0]
    if "min" in a or "max" in a:  # opset < 11
        lo, hi = a.get("min"), a.get("max")
    else:
        lo = None if _opt(ins, 1) is None else _scalar(ins[1])
        hi = None if _opt(ins, 2) is None else _scalar(ins[2])
        for k, v in ((1, lo), (2, hi)):
            if _opt(ins, k) is not None and v is None:
                raise _Unsupported("Clip bounds must be scalar constants")
    lo = None if lo is None or lo <= -3.4e38 else f32(lo)
    hi = None if hi is None or hi >= 3.4e38 else f32(hi)
    if isinstance(x, _Const):
        return _Const(np.clip(x.value, lo, hi))
    if lo == 0 and hi == 6:
        if x.pending == "plus3":
            return _T(x.ref, x.shape, "relu6_plus3", (), c.origin)
        return c.new("relu6", x)
    if lo == 0 and hi is None:
        return c.new("relu", x)
    if lo is None or hi is None:
        raise _Unsupported(f"one-sided Clip(min={lo}, max={hi})")
    return c.new("clip", x, min=lo, max=hi)


@_handler("Softmax")
def _softmax(c: _Converter, ins, a, node):
    x = ins[0]
    rank = len(x.shape)
    opset = c.opset
    axis = _dim(int(a.get("axis", -1 if opset >= 13 else 1)), rank)
    if opset < 13 and any(d != 1 for d in x.shape[axis + 1:]):
        raise _Unsupported(f"Softmax (opset {opset}) over the flattened dims {axis}.. of {list(x.shape)} (only one axis)")
    return _along(c, "softmax", x, axis)


def _along(c: _Converter, op: str, x: _T, axis: int, **attrs) -> _T:
    """``op`` over ONNX axis ``axis`` of ``x``, element-wise along the others (softmax, layer
    norm): on the IR axis holding it, else on the IR form."""
    j = c.ir_axis(x, axis) if x.pending is None else None
    if j is not None:
        return _T(c._add(op, [x.ref], c.origin, axis=j, **attrs), x.shape)
    if x.pending is None and c.ir_shape(x) == x.shape:
        return _T(c._add(op, [x.ref], c.origin, axis=axis, **attrs), x.shape)
    ref, axes = c.formed(x)
    return _T(c._add(op, [ref], c.origin, axis=axes[axis], **attrs), x.shape)


@_handler("LayerNormalization")
def _layer_norm(c: _Converter, ins, a, node):
    x, scale, bias = ins[0], _opt(ins, 1), _opt(ins, 2)
    if not isinstance(x, _T):
        raise _Unsupported("layer norm of a constant")
    rank = len(x.shape)
    axis = _dim(int(a.get("axis", -1)), rank)
    if int(a.get("stash_type", 1)) != 1 or len([o for o in node.output if o]) > 1:
        raise _Unsupported("LayerNormalization with its mean or inverse deviation outputs")
    over = [k for k in range(axis, rank) if x.shape[k] != 1]
    if len(over) != 1:
        raise _Unsupported(f"LayerNormalization over the axes {axis}.. of {list(x.shape)} (the IR's layernorm is over one axis)")
    for what, v in (("scale", scale), ("bias", bias)):
        if v is not None and (not isinstance(v, _Const) or math.prod(v.shape) != x.shape[over[0]]):
            raise _Unsupported(f"LayerNormalization {what} of shape {list(getattr(v, 'shape', []))} (a constant per element "
                               f"of the normalised axis of {x.shape[over[0]]})")
    return _along(c, "layernorm", x, over[0], eps=f32(a.get("epsilon", 1e-5)))


@_handler("InstanceNormalization")
def _instance_norm(c: _Converter, ins, a, node):
    x, scale, bias = ins
    if not isinstance(x, _T) or len(x.shape) != 4:
        raise _Unsupported(f"instance norm of {'a constant' if not isinstance(x, _T) else f'a rank-{len(x.shape)} tensor'} "
                           "(the IR's instancenorm is over H and W of an image)")
    for what, v in (("scale", scale), ("bias", bias)):
        if not isinstance(v, _Const) or math.prod(v.shape) != x.shape[1]:
            raise _Unsupported(f"InstanceNormalization {what} of shape {list(getattr(v, 'shape', []))} "
                               f"(a constant per channel of {x.shape[1]})")
    return c.new("instancenorm", x, eps=f32(a.get("epsilon", 1e-5)))


@_handler("LRN")
def _lrn(c: _Converter, ins, a, node):
    x = ins[0]
    if not isinstance(x, _T) or len(x.shape) != 4:
        raise _Unsupported(f"LRN of {'a constant' if not isinstance(x, _T) else f'a rank-{len(x.shape)} tensor'} "
                           "(the IR's lrn takes an image)")
    size = int(a["size"])
    if size % 2 == 0:
        raise _Unsupported(f"LRN of the even size {size} (ONNX centres an even window one channel off PyTorch's, "
                           "the IR's lrn)")
    return c.new("lrn", x, size=size, alpha=f32(a.get("alpha", 1e-4)), beta=f32(a.get("beta", 0.75)),
                 bias=f32(a.get("bias", 1.0)))


@_handler("Gelu")
def _gelu(c: _Converter, ins, a, node):
    if not isinstance(ins[0], _T):
        raise _Unsupported("Gelu of a constant")
    approx = a.get("approximate", "none")
    if approx not in ("none", "tanh"):
        raise _Unsupported(f"Gelu approximate={approx!r}")
    return c.same("gelu", ins[0], approximate=approx)


# ------------------------------------------------ element-wise arithmetic
_NUMPY_BINARY = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Div": None, "Pow": np.power}


def _const_binary(op: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if op == "Div":
        if a.dtype.kind in "iu" and b.dtype.kind in "iu":
            return np.floor_divide(a, b)  # ONNX integer division truncates; shapes are positive
        return np.divide(a, b)
    return _NUMPY_BINARY[op](a, b)


def _same_rank(op: str, a: _T, b: _T) -> None:
    if len(a.shape) != len(b.shape):
        raise _Unsupported(f"{op} of tensors of different rank {list(a.shape)} and {list(b.shape)}")


def _channel_const(x_shape: tuple[int, ...], k_shape: tuple[int, ...]) -> bool:
    """A constant of ``k_shape`` holds one value per channel of an NCHW tensor of ``x_shape`` (or
    per feature of a ``[1, F]`` vector)."""
    if len(x_shape) not in (2, 4) or x_shape[0] != 1 or x_shape[1] < 2:
        return False
    k = list(k_shape)
    if len(x_shape) == 2:
        return k in ([x_shape[1]], [1, x_shape[1]])
    return k in ([x_shape[1], 1, 1], [1, x_shape[1], 1, 1])


@_handler("Add", "Sub", "Mul", "Div", "Pow")
def _binary(c: _Converter, ins, a, node):
    op = node.op_type
    x, y = ins
    if any(isinstance(v, _T) and v.pending == "expanded" for v in (x, y)):
        full = next(v.data for v in (x, y) if isinstance(v, _T) and v.pending == "expanded")
        x, y = (_T(v.ref, v.shape) if isinstance(v, _T) and v.pending == "expanded" else v for v in (x, y))
        if tuple(int(d) for d in np.broadcast_shapes(x.shape, y.shape)) != full:
            raise _Unsupported(_PENDING_WHAT["expanded"])
    if isinstance(x, _Const) and isinstance(y, _Const):
        _evaluated(c, np.broadcast_shapes(x.shape, y.shape), f"the {op} of constants")
        return _Const(_const_binary(op, x.value, y.value))
    if op in ("Add", "Mul") and isinstance(x, _Const):
        x, y = y, x
    fused = _decomposed(c, op, x, y, node)
    if fused is not None:
        return fused
    for v in (x, y):
        if isinstance(v, _T) and v.pending in _DECOMPOSED:
            _ = c.t(v)  # a pattern read by something else: materialised (or refused) here
    if isinstance(x, _T) and isinstance(y, _T):
        if op == "Mul":
            for (p, q), qname in (((x, y), node.input[1]), ((y, x), node.input[0])):
                if p.pending is not None:
                    continue
                if q.pending == "relu6_plus3" and p.ref == q.ref and c.sole(c.source_of[q]):
                    return _T(p.ref, p.shape, "x_relu6_plus3", (), c.origin)
                gate = c.g.nodes.get(q.ref) if q.pending is None else None
                if gate is not None and gate.op in ("sigmoid", "hsigmoid") and gate.inputs == [p.ref] and c.sole(qname):
                    # x * sigmoid(x): the gate's node is left unread and pruned at the end
                    return c.new("swish" if gate.op == "sigmoid" else "hswish", p)
        if op in ("Add", "Mul", "Div"):
            _same_rank(op, x, y)
            shape = tuple(int(d) for d in np.broadcast_shapes(x.shape, y.shape))
            if x.pending is None and y.pending is None and x.shape == y.shape and c.ir_shape(x) == c.ir_shape(y):
                return _T(c._add(op.lower(), [x.ref, y.ref], c.origin), shape)
            return _T(c._add(op.lower(), [c.formed(x)[0], c.formed(y)[0]], c.origin), shape)
        raise _Unsupported(f"{op} of two computed tensors (the IR has no element-wise {op.lower()})")
    if not isinstance(x, _T):
        raise _Unsupported(f"{op} of a constant by a computed tensor")
    v = _scalar(y)
    if op == "Add" and x.pending == "matmul" and isinstance(y, _Const) and math.prod(y.shape) == x.data[0] \
            and c.sole(c.source_of[x]):
        ref = c._add("fc", [x.ref], x.origin, out_features=x.data[0], bias=True)
        c.origins[ref] = (c.index_of[x.origin], c.index)  # weight from the MatMul, bias from this Add
        return _T(ref, x.shape)
    if op == "Mul" and v is None and x.pending is None and isinstance(y, _Const):
        made = c.g.nodes.get(x.ref)
        if made is not None and made.op == "fc" and y.shape[-1:] == (made.attrs["out_features"],) \
                and math.prod(y.shape) == made.attrs["out_features"] \
                and c.sole(node.input[0] if ins[0] is x else node.input[1]):
            # a gain per output feature of a linear layer (ConvNeXt's layer scale): its weights
            # absorb it, as TFLite's converter folds it
            return x
    if v is None and x.pending is None and isinstance(y, _Const) and _channel_const(x.shape, y.shape) \
            and (len(x.shape) == 4 or op in ("Mul", "Div")):
        # a per-channel gain or shift of an image (a normalisation layer's mean and std), a gain
        # per feature of a vector (an LSTM gate times its constant state): an affine batch norm,
        # as the TFLite importer reads the converter's MUL / ADD by such a constant (a vector's
        # constant shift stays what it was, a learned tensor added: pos_embed)
        return c.same("batchnorm", x, eps=0.0)
    if v is None:
        if op == "Add" and learned_like(x.shape, y.shape):
            return c.same("pos_embed", x)  # a position embedding: as many elements as x
        raise _Unsupported(f"{op} by a constant tensor of shape {list(y.shape)} (the IR has no weights; a constant "
                           "added is a position embedding only with one value per element of the tensor)"
                           if op == "Add" else f"{op} by a constant tensor of shape {list(y.shape)} (the IR has no weights)")
    if op == "Sub":
        op, v = "Add", -v
    if op == "Div":
        if v == 6 and x.pending == "relu6_plus3":
            return c.new("hsigmoid", _T(x.ref, x.shape))
        if v == 6 and x.pending == "x_relu6_plus3":
            return c.new("hswish", _T(x.ref, x.shape))
        op, v = "Mul", reciprocal(v)
    if op == "Mul":
        if abs(v - 1 / 6) < 1e-6 and x.pending == "relu6_plus3":
            return c.new("hsigmoid", _T(x.ref, x.shape))
        if abs(v - 1 / 6) < 1e-6 and x.pending == "x_relu6_plus3":
            return c.new("hswish", _T(x.ref, x.shape))
        return x if v == 1 else c.same("scale", x, factor=f32(v))
    if op == "Add":
        if v == 0:
            return x
        if v == 3 and x.pending is None and c.sole(node.output[0]):
            return _T(x.ref, x.shape, "plus3", (), c.origin)
        return c.same("shift", x, value=f32(v))
    raise _Unsupported(f"{op} of a computed tensor and a constant")


def _near(v: float | None, want: float, tol: float = 1e-4) -> bool:
    return v is not None and abs(v - want) <= tol * max(1.0, abs(want))


def _scale_of(c: _Converter, v: Any, factor: float) -> str | None:
    """The input of ``v`` when ``v`` is an IR ``scale`` by ``factor`` (the ``x * 0.5`` or
    ``x / sqrt(2)`` of a decomposed GELU, whose node is pruned when nothing else reads it)."""
    if not isinstance(v, _T) or v.pending is not None:
        return None
    node = c.g.nodes.get(v.ref)
    if node is not None and node.op == "scale" and _near(node.attrs["factor"], factor):
        return node.inputs[0]
    return None


def _decomposed(c: _Converter, op: str, x: Any, y: Any, node: Any) -> _T | None:
    """The next step of a decomposed layer norm or GELU, or None (see _DECOMPOSED).

    Layer norm: ``d = x - ReduceMean(x)``, ``d^2`` (``Pow`` or ``d * d``), ``ReduceMean``,
    ``+ eps``, ``Sqrt``, ``d / that``, then ``* gain`` and ``+ shift``. GELU: ``x / sqrt(2)``
    (a ``scale``), ``Erf``, ``+ 1``, and ``x`` and ``0.5`` multiplied in either order; the tanh
    form: ``x^3``, ``* 0.044715``, ``+ x``, ``* sqrt(2 / pi)``, ``Tanh``, ``+ 1``, then the same.
    """
    v = _scalar(y)
    if not isinstance(x, _T):
        return None
    if op == "Sub" and isinstance(y, _T) and y.pending == "ln_mean" and x.pending is None and x.ref == y.ref:
        return _T(x.ref, x.shape, "ln_centered", y.data, y.origin)
    if x.pending == "ln_centered" and ((op == "Pow" and v == 2) or (op == "Mul" and isinstance(y, _T) and y == x)):
        return _T(x.ref, x.shape, "ln_square", x.data, x.origin)
    if op == "Add" and x.pending == "ln_var" and v is not None:
        return _T(x.ref, x.shape, "ln_var_eps", (*x.data, f32(v)), x.origin)
    if op == "Div" and x.pending == "ln_centered" and isinstance(y, _T) and y.pending == "ln_std" and y.ref == x.ref:
        return _T(x.ref, x.shape, "ln", (y.data[0], y.data[1], (c.index,)), c.origin)
    n_axis = None if x.pending not in ("ln", "ln_gain") else c.g.shape(x.ref)[x.data[0]]
    if op == "Mul" and x.pending == "ln" and isinstance(y, _Const) and math.prod(y.shape) == n_axis:
        return _T(x.ref, x.shape, "ln_gain", (x.data[0], x.data[1], (c.index,)), x.origin)
    if op == "Add" and x.pending in ("ln", "ln_gain") and isinstance(y, _Const) and math.prod(y.shape) == n_axis:
        ref = c._add("layernorm", [x.ref], x.origin, axis=x.data[0], eps=x.data[1])
        c.origins[ref] = (*x.data[2], c.index) if x.pending == "ln_gain" else (c.index,)
        return _T(ref, x.shape)
    lrn = _lrn_step(c, op, x, y, v)
    if lrn is not None:
        return lrn
    # GELU
    if op == "Pow" and x.pending is None and v == 3:
        return _T(x.ref, x.shape, "cube", (), c.origin)
    if op == "Mul" and isinstance(y, _T) and x.pending is None and y.pending is None and x.ref == y.ref \
            and x.shape == y.shape:
        return _T(x.ref, x.shape, "square", (), c.origin)  # x * x: a mul unless x * (x * x) follows
    if op == "Mul" and isinstance(y, _T) and {x.pending, y.pending} == {None, "square"} and x.ref == y.ref:
        return _T(x.ref, x.shape, "cube", (), c.origin)
    if op == "Mul" and x.pending == "cube" and _near(v, 0.044715):
        return _T(x.ref, x.shape, "tanh_arg", (1,), x.origin)
    if op == "Add" and isinstance(y, _T) and {x.pending, y.pending} == {None, "tanh_arg"}:
        p, q = (x, y) if x.pending is None else (y, x)
        if q.data == (1,) and p.ref == q.ref:
            return _T(q.ref, q.shape, "tanh_arg", (2,), q.origin)
    if op == "Mul" and x.pending == "tanh_arg" and x.data == (2,) and _near(v, math.sqrt(2 / math.pi)):
        return _T(x.ref, x.shape, "tanh_arg", (3,), x.origin)
    for kind, approx in (("erf", "none"), ("tanh_g", "tanh")):
        if op == "Add" and x.pending == kind and v == 1:
            return _T(x.ref, x.shape, kind + "1", (), x.origin)
        if op == "Mul" and x.pending == kind + "1" and _near(v, 0.5):
            return _T(x.ref, x.shape, "half_" + kind + "1", (), x.origin)
        if op == "Mul" and x.pending == "x_" + kind + "1" and _near(v, 0.5):
            return _T(c._add("gelu", [x.ref], c.origin, approximate=approx), x.shape)
        if op == "Mul" and isinstance(y, _T):
            for p, q in ((x, y), (y, x)):
                if q.pending == kind + "1" and p.pending is None and p.ref == q.ref:
                    return _T(q.ref, q.shape, "x_" + kind + "1", (), q.origin)
                if (q.pending == kind + "1" and _scale_of(c, p, 0.5) == q.ref) or \
                        (q.pending == "half_" + kind + "1" and p.pending is None and p.ref == q.ref):
                    return _T(c._add("gelu", [q.ref], c.origin, approximate=approx), q.shape)
    return None


def _lrn_step(c: _Converter, op: str, x: _T, y: Any, v: float | None) -> _T | None:
    """The arithmetic steps of a local response norm as torch.onnx decomposes
    ``F.local_response_norm`` (after the window average, see :func:`_lrn_window`):
    ``avg * alpha``, ``+ bias``, ``^ beta``, then ``x / that``; or None."""
    if op == "Mul" and x.pending == "lrn_avg" and v is not None:
        return _T(x.ref, x.shape, "lrn_alpha", (*x.data, f32(v)), x.origin)
    if op == "Add" and x.pending == "lrn_alpha" and v is not None:
        return _T(x.ref, x.shape, "lrn_bias", (*x.data, f32(v)), x.origin)
    if op == "Pow" and x.pending == "lrn_bias" and v is not None:
        return _T(x.ref, x.shape, "lrn_den", (*x.data, f32(v)), x.origin)
    if op == "Div" and x.pending is None and isinstance(y, _T) and y.pending == "lrn_den" and y.ref == x.ref \
            and x.shape == y.shape:
        size, alpha, bias, beta = y.data
        return _T(c._add("lrn", [x.ref], c.origin, size=size, alpha=alpha, beta=beta, bias=bias), x.shape)
    return None


def _lrn_window(c: _Converter, x: _T, op: str, a: dict, pads: list[int] | None = None) -> _T | None:
    """The window steps of a decomposed local response norm, or None: the squares ``x * x`` of an
    image ``[1, C, H, W]`` viewed ``[1, 1, C, H, W]`` (``Reshape``/``Unsqueeze``), zero-padded on
    the channel axis by ``size // 2`` before and ``(size - 1) // 2`` after (``Pad``), averaged
    over ``size`` channels (``AveragePool`` of kernel ``[size, 1, 1]``), viewed back."""
    if op == "view" and x.pending == "square" and len(x.shape) == 4 and len(a["shape"]) == 5 \
            and a["shape"][:3] == [1, 1, x.shape[1]] and math.prod(a["shape"]) == math.prod(x.shape):
        return _T(x.ref, tuple(a["shape"]), "lrn_view", (), c.origin)
    if op == "view" and x.pending == "lrn_avg" and a["shape"] == list(c.g.shape(x.ref)):
        return _T(x.ref, tuple(a["shape"]), "lrn_avg", x.data, x.origin)
    if op == "Pad" and x.pending == "lrn_view" and pads is not None and len(pads) == 10 \
            and all(p == 0 for k, p in enumerate(pads) if k not in (2, 7)):
        before, after = pads[2], pads[7]
        shape = (*x.shape[:2], x.shape[2] + before + after, *x.shape[3:])
        return _T(x.ref, shape, "lrn_padded", (before, after), x.origin)
    if op == "AveragePool" and x.pending == "lrn_padded":
        before, after = x.data
        size = before + after + 1
        plain = [int(p) for p in a.get("pads", [0] * 6)] == [0] * 6 and a.get("auto_pad", "NOTSET") in ("NOTSET", "VALID")
        if [int(k) for k in a["kernel_shape"]] == [size, 1, 1] and [int(s) for s in a.get("strides", [1, 1, 1])] == [1, 1, 1] \
                and plain and before == size // 2 and not int(a.get("ceil_mode", 0)):
            return _T(x.ref, (*x.shape[:2], x.shape[2] - size + 1, *x.shape[3:]), "lrn_avg", (size,), x.origin)
    return None


@_handler("Erf")
def _erf(c: _Converter, ins, a, node):
    x = ins[0]
    if isinstance(x, _Const):
        from math import erf

        return _Const(np.vectorize(erf)(x.value).astype(x.value.dtype))
    src = _scale_of(c, x, 1 / math.sqrt(2))
    if src is None:
        raise _Unsupported(_DECOMPOSED["erf"])
    return _T(src, x.shape, "erf", (), c.origin)


@_handler("Tanh")
def _tanh(c: _Converter, ins, a, node):
    x = ins[0]
    if isinstance(x, _Const):
        return _Const(np.tanh(x.value))
    if x.pending == "tanh_arg" and x.data == (3,):
        return _T(x.ref, x.shape, "tanh_g", (), x.origin)
    return c.same("tanh", x)


@_handler("Sqrt")
def _sqrt(c: _Converter, ins, a, node):
    x = ins[0]
    if isinstance(x, _Const):
        return _Const(np.sqrt(x.value))
    if x.pending == "ln_var_eps":
        return _T(x.ref, x.shape, "ln_std", x.data, x.origin)
    raise _Unsupported("Sqrt of a computed tensor outside a layer-norm pattern (the IR has no square root)")


@_handler("Sum")
def _sum(c: _Converter, ins, a, node):
    if len(ins) == 1:
        return ins[0]
    if not all(isinstance(x, _T) for x in ins):
        raise _Unsupported("Sum with a constant operand (the IR has no weights)")
    for x in ins[1:]:
        _same_rank("Sum", ins[0], x)
    return c.new("add", list(ins))


# ------------------------------------------------ pooling
def _pool_common(c: _Converter, x: _T, a: dict) -> tuple[list[int], list[int], list[int], list[int], bool]:
    if not isinstance(x, _T) or len(x.shape) != 4:
        raise _Unsupported(f"only 2-d pooling is supported (input {list(getattr(x, 'shape', []))})")
    kernel = [int(k) for k in a["kernel_shape"]]
    stride = [int(s) for s in a.get("strides", [1, 1])]
    if [int(d) for d in a.get("dilations", [1, 1])] != [1, 1]:
        raise _Unsupported(f"pooling with dilations {a['dilations']}")
    before, after = _spatial_pads(a, x.shape[2:], kernel, stride, [1, 1])
    return kernel, stride, before, after, bool(a.get("ceil_mode", 0))


def _onnx_pool_count(size: int, k: int, s: int, pb: int, pe: int, ceil: bool) -> int:
    span = size + pb + pe - k
    out = (-(-span // s) if ceil else span // s) + 1
    if ceil and (out - 1) * s >= size + pb:
        out -= 1
    return out


@_handler("MaxPool")
def _maxpool(c: _Converter, ins, a, node):
    if len([o for o in node.output if o]) > 1:
        raise _Unsupported("MaxPool with its Indices output")
    x = ins[0]
    kernel, stride, before, after, ceil = _pool_common(c, x, a)
    if before == after and all(2 * p <= k for p, k in zip(before, kernel)):
        return c.new("maxpool", x, kernel=kernel, stride=stride, padding=before, ceil_mode=ceil)
    n_out = [_onnx_pool_count(x.shape[2 + i], kernel[i], stride[i], before[i], after[i], ceil) for i in range(2)]
    attrs = match_pool("max", x.shape[2:], kernel, stride, before, n_out)
    if attrs is None:
        raise _Unsupported(f"MaxPool pads {before + after} that no symmetric padding reproduces")
    return c.new("maxpool", x, kernel=kernel, stride=stride, **attrs)


@_handler("AveragePool")
def _avgpool(c: _Converter, ins, a, node):
    x = ins[0]
    if isinstance(x, _T) and x.pending == "lrn_padded":
        lrn = _lrn_window(c, x, "AveragePool", a)
        if lrn is None:
            raise _Unsupported(_DECOMPOSED["lrn_padded"])
        return lrn
    kernel, stride, before, after, ceil = _pool_common(c, x, a)
    cip = bool(a.get("count_include_pad", 0))
    if before == after and all(2 * p <= k for p, k in zip(before, kernel)):
        return c.new("avgpool", x, kernel=kernel, stride=stride, padding=before, ceil_mode=ceil, count_include_pad=cip)
    n_out = [_onnx_pool_count(x.shape[2 + i], kernel[i], stride[i], before[i], after[i], ceil) for i in range(2)]
    divisors = []
    for i in range(2):
        size, k, s, pb, pe = x.shape[2 + i], kernel[i], stride[i], before[i], after[i]
        lo, hi = (-pb, size + pe) if cip else (0, size)
        divisors.append([min(o * s - pb + k, hi) - max(o * s - pb, lo) for o in range(n_out[i])])
    attrs = match_pool("avg", x.shape[2:], kernel, stride, before, n_out,
                       lambda dh, dw: dh == divisors[0] and dw == divisors[1])
    if attrs is None:
        raise _Unsupported(f"AveragePool pads {before + after} that no symmetric padding reproduces")
    return c.new("avgpool", x, kernel=kernel, stride=stride, **attrs)


@_handler("GlobalAveragePool")
def _gap(c: _Converter, ins, a, node):
    return c.new("global_avgpool", ins[0])


@_handler("GlobalMaxPool")
def _gmp(c: _Converter, ins, a, node):
    x = ins[0]
    if len(x.shape) != 4:
        raise _Unsupported(f"GlobalMaxPool of a rank-{len(x.shape)} tensor")
    hw = list(x.shape[2:])
    return c.new("maxpool", x, kernel=hw, stride=hw)


@_handler("ReduceMean")
def _reduce_mean(c: _Converter, ins, a, node):
    x = ins[0]
    axes = a.get("axes")
    if axes is None and _opt(ins, 1) is not None:
        axes = [int(v) for v in _const(c, ins[1], "ReduceMean axes").reshape(-1)]
    keep = bool(a.get("keepdims", 1))
    if isinstance(x, _Const):
        return _Const(np.mean(x.value, axis=None if axes is None else tuple(axes), keepdims=keep))
    rank = len(x.shape)
    dims = None if axes is None else sorted({_dim(int(d), rank) for d in axes})
    if rank == 4 and dims == [2, 3] and (x.pending is not None or c.ir_shape(x) == x.shape):
        y = c.new("global_avgpool", x)
        return y if keep else c.new("flatten", y, origin=f"{c.origin}/flatten")
    if dims is None or len(dims) != 1:
        raise _Unsupported(f"ReduceMean over axes {axes} of {list(x.shape)} (over H and W: a global average pool, "
                           "or over one axis)")
    d = dims[0]
    out = tuple(1 if k == d else n for k, n in enumerate(x.shape)) if keep else x.shape[:d] + x.shape[d + 1:]
    if x.pending == "ln_square" and keep and c.ir_axis(_T(x.ref, x.shape), d) == x.data[0]:
        return _T(x.ref, out, "ln_var", x.data, x.origin)
    j = c.ir_axis(x, d) if x.pending is None else None
    if keep and x.pending is None and j is not None and d == rank - 1:  # a layer norm's mean, or a mean
        return _T(x.ref, out, "ln_mean", (j,), c.origin)
    if x.shape[d] == 1:
        return _reshape_to(c, x, list(out))
    if j is None:
        ref, ax = c.formed(x)
        j, x = ax[d], _T(ref, x.shape)
    if j == 0:
        raise _Unsupported(f"ReduceMean over the batch axis of {list(x.shape)}")
    return _T(c._add("mean", [x.ref], c.origin, axis=j, keepdim=keep), out)


def _reduce(kind: str, ir_op: str, fn: Callable[..., np.ndarray]) -> Callable:
    """ReduceMax / ReduceSum: over one axis, ``ir_op``; over H and W of an image, a global pool
    (a max pool of the whole map; for a sum, the average times H x W)."""

    def handler(c: _Converter, ins, a, node):
        x = ins[0]
        axes = a.get("axes")
        if axes is None and _opt(ins, 1) is not None:
            axes = [int(v) for v in _const(c, ins[1], f"{kind} axes").reshape(-1)]
        keep = bool(a.get("keepdims", 1))
        if isinstance(x, _Const):
            return _Const(fn(x.value, axis=None if axes is None else tuple(axes), keepdims=keep))
        rank = len(x.shape)
        dims = None if axes is None else sorted({_dim(int(d), rank) for d in axes})
        if rank == 4 and dims == [2, 3] and (x.pending is not None or c.ir_shape(x) == x.shape):
            hw = list(x.shape[2:])
            if ir_op == "reduce_max":
                y = c.new("maxpool", x, kernel=hw, stride=hw)
            else:
                y = c.new("global_avgpool", x)
                y = _T(c._add("scale", [y.ref], f"{c.origin}/sum", factor=float(hw[0] * hw[1])), y.shape)
            return y if keep else c.new("flatten", y, origin=f"{c.origin}/flatten")
        if dims is None or len(dims) != 1:
            raise _Unsupported(f"{kind} over axes {axes} of {list(x.shape)} (over H and W of an image, or over one axis)")
        d = dims[0]
        out = tuple(1 if k == d else n for k, n in enumerate(x.shape)) if keep else x.shape[:d] + x.shape[d + 1:]
        if x.shape[d] == 1:
            return _reshape_to(c, x, list(out))
        j = c.ir_axis(x, d) if x.pending is None else None
        if j is None:
            ref, ax = c.formed(x)
            j, x = ax[d], _T(ref, x.shape)
        if j == 0:
            raise _Unsupported(f"{kind} over the batch axis of {list(x.shape)}")
        return _T(c._add(ir_op, [x.ref], c.origin, axis=j, keepdim=keep), out)

    return handler


_handler("ReduceMax")(_reduce("ReduceMax", "reduce_max", np.max))
_handler("ReduceSum")(_reduce("ReduceSum", "reduce_sum", np.sum))


# ------------------------------------------------ shapes and plumbing
def _reshape_to(c: _Converter, x: _T | _Const, shape: list[int]) -> _T | _Const:
    if isinstance(x, _Const):  # shape arithmetic: evaluated now
        return _Const(x.value.reshape(shape))
    numel = math.prod(x.shape)
    if list(x.shape) == shape:
        return x
    if math.prod(shape) != numel or any(s < 1 for s in shape):
        raise _Unsupported(f"cannot reshape {list(x.shape)} to {shape}")
    # channel shuffle: [1, C, H, W] -> [1, g, C/g, H, W] -> transpose(1, 2) -> [1, C, H, W]
    if x.pending == "shuffled" and len(shape) == 4 and shape == [1, x.data[0] * x.data[1], *x.shape[3:]]:
        return c.new("channel_shuffle", _T(x.ref, tuple(c.g.shape(x.ref))), groups=x.data[0])
    lrn = _lrn_window(c, x, "view", {"shape": shape}) if x.pending in ("square", "lrn_avg") else None
    if lrn is not None:
        return lrn
    if x.pending is None and len(x.shape) == 4 and len(shape) == 5 and shape[0] == 1 and shape[3:] == list(x.shape[2:]) \
            and x.shape[0] == 1 and c.ir_shape(x) == x.shape:
        return _T(x.ref, tuple(shape), "grouped", (shape[1], shape[2]), c.origin)
    if x.pending is not None:
        x = _T(c.t(x), x.shape)
    if shape[0] != 1 or list(c.ir_shape(x)) == shape:
        return _T(x.ref, tuple(shape))  # a view: the IR tensor holds the elements in this order
    if len(shape) == 2:
        return _T(c._add("flatten", [x.ref], c.origin), tuple(shape))
    return _T(c._add("reshape", [x.ref], c.origin, shape=shape), tuple(shape))


@_handler("Reshape")
def _reshape(c: _Converter, ins, a, node):
    x = ins[0]
    target = [int(v) for v in _const(c, ins[1], "the Reshape shape").reshape(-1)]
    in_shape = list(x.shape)
    allow_zero = int(a.get("allowzero", 0))
    shape = []
    for i, d in enumerate(target):
        if d == 0 and not allow_zero:
            if i >= len(in_shape):
                raise _Unsupported(f"Reshape copies dim {i} of a rank-{len(in_shape)} input")
            d = in_shape[i]
        shape.append(d)
    if shape.count(-1) > 1:
        raise _Unsupported(f"Reshape to {target} with more than one -1")
    if -1 in shape:
        known = math.prod(d for d in shape if d != -1)
        shape[shape.index(-1)] = math.prod(in_shape) // known if known else 0
    return _reshape_to(c, x, shape)


@_handler("Flatten")
def _flatten(c: _Converter, ins, a, node):
    x = ins[0]
    rank = len(x.shape)
    axis = int(a.get("axis", 1))
    axis = axis + rank if axis < 0 else axis
    shape = [math.prod(x.shape[:axis]), math.prod(x.shape[axis:])]
    return _reshape_to(c, x, shape)


@_handler("Transpose")
def _transpose(c: _Converter, ins, a, node):
    x = ins[0]
    rank = len(x.shape)
    perm = [int(p) for p in a.get("perm", list(range(rank))[::-1])]
    if isinstance(x, _Const):
        return _Const(np.transpose(x.value, perm))
    if perm == list(range(rank)):
        return x
    if x.pending == "grouped":
        if perm == [0, 2, 1, 3, 4]:
            g1, g2 = x.data
            return _T(x.ref, (1, g2, g1, *x.shape[3:]), "shuffled", (g1, g2), c.origin)
        x = _T(c.t(x), x.shape)
    if x.pending is not None:
        x = _T(c.t(x), x.shape)
    if sorted(perm) != list(range(rank)):
        raise _Unsupported(f"Transpose {perm} of a rank-{rank} tensor")
    out = [x.shape[d] for d in perm]
    # moving only unit dims keeps the element order: a reshape (or a view, see _T)
    if [d for d in perm if x.shape[d] != 1] == [d for d in range(rank) if x.shape[d] != 1]:
        return _reshape_to(c, x, out)
    # an IR transpose of the IR form; the form's unit axis 0 stays first (an IR transpose keeps
    # the batch axis), wherever the ONNX axis it holds goes: moving a unit axis keeps the order
    ref, axes = c.formed(x)
    if 0 in axes:
        k0 = perm.index(axes.index(0))
        q = [0] + [axes[perm[k]] for k in range(rank) if k != k0]
    else:
        q = [0] + [axes[d] for d in perm]
    return _T(c._add("transpose", [ref], c.origin, perm=q), tuple(out))


@_handler("Concat")
def _concat(c: _Converter, ins, a, node):
    if all(isinstance(x, _Const) for x in ins):
        _evaluated(c, [sum(math.prod(x.shape) for x in ins)], "the Concat of constants")
        return _Const(np.concatenate([np.atleast_1d(x.value) for x in ins], axis=int(a["axis"])))
    if any(isinstance(x, _Const) for x in ins):
        return _class_tokens(c, ins, _dim(int(a["axis"]), len(ins[0].shape)))
    if len(ins) == 1:
        return ins[0]
    return c.new("concat", list(ins), axis=_dim(int(a["axis"]), len(ins[0].shape)))


def _class_tokens(c: _Converter, ins: list[Any], axis: int) -> _T:
    """Constant tokens ``[1, 1, C]`` concatenated in front of tokens ``[1, N, C]`` on axis 1: one
    ``cls_token`` each, the last one first (a class token; DeiT's distillation token after it).
    The constant may come out of an evaluated ``Expand``/``Tile`` of the learned token."""
    x = ins[-1]
    lead = ins[:-1]
    if not isinstance(x, _T) or not all(isinstance(v, _Const) for v in lead) or axis != 1 or len(x.shape) != 3 \
            or x.shape[0] != 1 or any(tuple(v.shape) != (1, 1, x.shape[2]) for v in lead):
        shapes = [list(v.shape) for v in ins]
        raise _Unsupported(f"Concat of {shapes} on axis {axis} mixing computed tensors and constants (a constant is a "
                           "class token only as [1, 1, C] tokens in front of tokens [1, N, C] on axis 1; the IR has no "
                           "other weights)")
    for _ in lead:
        x = c.new("cls_token", _T(c.formed(x)[0], x.shape))
    return x


@_handler("Split")
def _split(c: _Converter, ins, a, node):
    x = ins[0]
    outs = [o for o in node.output]
    axis = _dim(int(a.get("axis", 0)), len(x.shape))
    n = x.shape[axis]
    if "split" in a:
        sections = [int(s) for s in a["split"]]
    elif _opt(ins, 1) is not None:
        sections = [int(s) for s in _const(c, ins[1], "the Split sizes").reshape(-1)]
    else:
        k = int(a.get("num_outputs", len(outs)))
        size = -(-n // k)
        sections = [size] * (n // size) + ([n % size] if n % size else [])
    if len(sections) != len(outs) or sum(sections) != n:
        raise _Unsupported(f"Split of {n} elements into {sections} for {len(outs)} outputs")
    if isinstance(x, _Const):
        return [_Const(v) for v in np.split(x.value, np.cumsum(sections)[:-1], axis=axis)]
    if len(sections) == 1:
        return [x]
    if x.pending is not None:
        x = _T(c.t(x), x.shape)
    j = c.ir_axis(x, axis)
    ref = x.ref
    if j is None:
        ref, axes = c.formed(x)
        j = axes[axis]
    refs = c.g.add_multi("split", ref, name=c._name(c.origin), sections=sections, axis=j)
    c.origins[split_ref(refs[0])[0]] = (c.index,)
    return [_T(r, tuple(n if k == axis else d for k, d in enumerate(x.shape))) for r, n in zip(refs, sections)]


@_handler("Gather")
def _gather_handler(c: _Converter, ins, a, node):
    x, idx = ins
    if all(isinstance(v, _Const) for v in ins):
        _evaluated(c, _gathered([x.shape, idx.shape], int(a.get("axis", 0))), "the Gather output")
        return _Const(_gather(c, [x.value, idx.value], a))
    if isinstance(x, _T) and isinstance(idx, _Const) and len(idx.shape) == 1:
        return _gather_indices(c, x, idx, int(a.get("axis", 0)))
    if not isinstance(x, _T) or not isinstance(idx, _Const) or idx.shape != ():
        raise _Unsupported("Gather of a computed tensor by anything but constant indices (one: q, k, v of a qkv "
                           "tensor; a list: channels)")
    rank = len(x.shape)
    axis = _dim(int(a.get("axis", 0)), rank)
    n = x.shape[axis]
    i = int(idx.value)
    if not -n <= i < n:
        raise _Unsupported(f"Gather index {i} out of range for axis {axis} of {list(x.shape)}")
    out = [d for k, d in enumerate(x.shape) if k != axis]
    if x.pending is not None:
        x = _T(c.t(x), x.shape)
    if n == 1:
        return _reshape_to(c, x, out)
    # one element of an axis: an output of a split of it into ones (one split for all of them),
    # or, when this Gather is the tensor's only reader (ViT's readout x[:, 0]), of a split
    # around that element
    j, ref = c.ir_axis(x, axis), x.ref
    if j is None:
        ref, axes = c.formed(x)
        j = axes[axis]
    if c.sole(node.input[0]):
        part = slice_as_split(c.g, c.split_cache, ref, j, i % n, i % n + 1, c._name(c.origin), c.origins, (c.index,))
        return _reshape_to(c, _T(part, tuple(1 if k == axis else d for k, d in enumerate(x.shape))), out)
    key = (ref, j, (1,) * n)
    if key not in c.split_cache:
        c.split_cache[key] = c.g.add_multi("split", ref, name=c._name(c.origin), sections=[1] * n, axis=j)
        c.origins[split_ref(c.split_cache[key][0])[0]] = (c.index,)
    return _T(c.split_cache[key][i % n], tuple(out))


def _gather_indices(c: _Converter, x: _T, idx: _Const, axis: int) -> _T:
    """A Gather of a list of constant indices on axis 1 of an image or a ``[1, F]`` vector: the
    IR's ``gather`` (CondenseNet's ``index_select`` of its input channels); any other axis or
    tensor is refused."""
    rank = len(x.shape)
    axis = _dim(axis, rank)
    if axis != 1 or rank not in (2, 4) or x.shape[0] != 1:
        raise _Unsupported(f"Gather of {idx.shape[0]} constant indices on axis {axis} of {list(x.shape)} (the IR's "
                           "gather takes axis 1 of an image or a [1, F] vector)")
    n = x.shape[1]
    raw = np.asarray(idx.value)
    if raw.dtype.kind not in "iu":
        raise _Unsupported(f"Gather indices of type {raw.dtype} (integers only)")
    bad = [int(i) for i in raw.reshape(-1) if not -n <= int(i) < n]
    if bad:
        raise _Unsupported(f"Gather index {bad[0]} out of range for axis 1 of {list(x.shape)}")
    if x.pending is not None:
        x = _T(c.t(x), x.shape)
    if c.ir_shape(x) != x.shape:
        raise _Unsupported(f"Gather of channels of a view {list(x.shape)} of the IR tensor {list(c.ir_shape(x))}")
    return c.new("gather", x, indices=[int(i) % n for i in raw.reshape(-1)], axis=1)


def _squeezed_shape(x: Any, vals_axes: list[int] | None, squeeze: bool) -> list[int]:
    shape = list(x.shape)
    if squeeze:
        rank = len(shape)
        axes = [k for k, d in enumerate(shape) if d == 1] if vals_axes is None else [_dim(k, rank) for k in vals_axes]
        if any(shape[k] != 1 for k in axes):
            raise _Unsupported(f"Squeeze of axes {vals_axes} of {shape} that have more than one element")
        return [d for k, d in enumerate(shape) if k not in axes]
    for ax in sorted(_dim(k, len(shape) + len(vals_axes)) for k in vals_axes):
        shape.insert(ax, 1)
    return shape


def _squeeze_like(squeeze: bool):
    const_fn = _squeeze if squeeze else _unsqueeze

    def handler(c: _Converter, ins, a, node):
        if all(v is None or isinstance(v, _Const) for v in ins):
            return _Const(const_fn(c, [None if v is None else v.value for v in ins], a))
        axes = a.get("axes")
        if axes is None and _opt(ins, 1) is not None:
            axes = [int(v) for v in _const(c, ins[1], f"the {node.op_type} axes").reshape(-1)]
        if axes is None and not squeeze:
            raise _Unsupported("Unsqueeze without axes")
        return _reshape_to(c, ins[0], _squeezed_shape(ins[0], axes, squeeze))

    return handler


def _crop(c: _Converter, x: _T, crops: list[int]) -> _T:
    """A pending crop: consecutive slices (and negative pads) merge into one ``crop``."""
    if not any(crops):
        return x
    if x.pending == "crop":
        base, crops = x.ref, [p + q for p, q in zip(x.data, crops)]
    else:
        base = c.t(x)
    ch, h, w = c.g.shape(base)[1:]
    h, w = h - crops[0] - crops[1], w - crops[2] - crops[3]
    if h < 1 or w < 1:
        raise _Unsupported(f"a crop that leaves an empty tensor (crops {crops})")
    return _T(base, (1, ch, h, w), "crop", tuple(crops), c.origin)


@_handler("Pad")
def _pad(c: _Converter, ins, a, node):
    x = ins[0]
    mode = a.get("mode", "constant")
    if "pads" in a:  # opset < 11
        pads, value = [int(p) for p in a["pads"]], float(a.get("value", 0.0))
    else:
        pads = [int(p) for p in _const(c, ins[1], "the Pad amounts").reshape(-1)]
        value = 0.0 if _opt(ins, 2) is None else _scalar(ins[2])
        if value is None:
            raise _Unsupported("Pad value must be a scalar constant")
        if _opt(ins, 3) is not None:  # opset 18: the axes the pads apply to
            rank = len(x.shape)
            axes = [_dim(int(d), rank) for d in _const(c, ins[3], "the Pad axes").reshape(-1)]
            full = [0] * (2 * rank)
            for k, d in enumerate(axes):
                full[d], full[rank + d] = pads[k], pads[len(axes) + k]
            pads = full
    if isinstance(x, _Const):
        raise _Unsupported("Pad of a constant")
    if x.pending == "lrn_view" and mode == "constant" and value == 0:
        lrn = _lrn_window(c, x, "Pad", a, pads)
        if lrn is not None:
            return lrn
    rank = len(x.shape)
    if rank != 4 or len(pads) != 8 or pads[0] or pads[4] or min(pads[1], pads[5]) < 0:
        raise _Unsupported(f"Pad {pads} of a rank-{rank} tensor (only an image's H, W and channels, the "
                           "channels not cropped)")
    if mode != "constant":
        raise _Unsupported(f"Pad mode {mode!r} (only constant)")
    t, l, b, r = pads[2], pads[3], pads[6], pads[7]
    both = [t, b, l, r]
    channels = [pads[1], pads[5]] if pads[1] or pads[5] else []  # PyramidNet's zero channels
    y = x
    if any(p > 0 for p in both) or channels:
        y = c.new("pad", y, pads=[max(p, 0) for p in both] + channels, value=f32(value))
    if any(p < 0 for p in both):
        y = _crop(c, y, [max(-p, 0) for p in both])
    return y


@_handler("Slice")
def _slice(c: _Converter, ins, a, node):
    x = ins[0]
    if "starts" in a:  # opset < 10
        starts, ends = list(a["starts"]), list(a["ends"])
        axes = list(a.get("axes", range(len(starts))))
        steps = [1] * len(starts)
    else:
        starts = [int(v) for v in _const(c, ins[1], "Slice starts").reshape(-1)]
        ends = [int(v) for v in _const(c, ins[2], "Slice ends").reshape(-1)]
        axes = list(range(len(starts))) if _opt(ins, 3) is None else [int(v) for v in _const(c, ins[3], "Slice axes").reshape(-1)]
        steps = [1] * len(starts) if _opt(ins, 4) is None else [int(v) for v in _const(c, ins[4], "Slice steps").reshape(-1)]
    rank = len(x.shape)
    if isinstance(x, _Const):
        idx = [slice(None)] * rank
        for s, e, ax, st in zip(starts, ends, axes, steps):
            idx[_dim(ax, rank)] = slice(s, e, st)
        return _Const(x.value[tuple(idx)])
    crops, other = [0, 0, 0, 0], []
    for s, e, ax, st in zip(starts, ends, axes, steps):
        d = _dim(ax, rank)
        size = x.shape[d]
        lo, hi, step = slice(max(min(s, 2**62), -(2**62)), max(min(e, 2**62), -(2**62)), st).indices(size)
        if step != 1:
            raise _Unsupported(f"Slice with step {st} (only step 1)")
        if hi <= lo:
            raise _Unsupported(f"Slice leaves nothing of axis {d}")
        if (lo, hi) == (0, size):
            continue
        if rank == 4 and d >= 2:
            crops[2 * (d - 2)] += lo
            crops[2 * (d - 2) + 1] += size - hi
        else:
            other.append((d, lo, hi))
    if other:
        if len(other) > 1 or any(crops) or other[0][0] == 0:
            raise _Unsupported(f"Slice {list(zip(starts, ends, axes))} of {list(x.shape)} (one non-batch axis, or H and W)")
        d, lo, hi = other[0]
        ref = slice_as_split(c.g, c.split_cache, c.t(x), d, lo, hi, c._name(c.origin), c.origins, (c.index,))
        return _T(ref, tuple(c.g.shape(ref)))
    return _crop(c, x, crops)


def _nearest_factor(c: _Converter, x: _T, scales: list[float] | None, sizes: list[int] | None) -> list[int]:
    if len(x.shape) != 4:
        raise _Unsupported(f"resize of a rank-{len(x.shape)} tensor")
    h, w = x.shape[2:]
    if sizes is not None:
        if list(sizes[:2]) != list(x.shape[:2]) or sizes[2] % h or sizes[3] % w:
            raise _Unsupported(f"nearest resize {list(x.shape)} -> {list(sizes)} by a non-integer factor")
        return [sizes[2] // h, sizes[3] // w]
    if scales is None or len(scales) != 4 or scales[0] != 1 or scales[1] != 1:
        raise _Unsupported(f"resize scales {scales} (only H and W)")
    if any(float(s) != int(s) or s < 1 for s in scales[2:]):
        raise _Unsupported(f"nearest resize by non-integer factors {scales[2:]}")
    return [int(scales[2]), int(scales[3])]


# Coordinate modes under which an integer-factor nearest resize reads source floor(dst / f):
# asymmetric with floor rounding; the half-pixel family with round-to-nearest (ties cannot occur).
_FLOOR_RESIZE = {("asymmetric", "floor")} | {
    (m, r) for m in ("half_pixel", "pytorch_half_pixel", "tf_half_pixel_for_nn") for r in ("round_prefer_floor", "round_prefer_ceil")
}


@_handler("Resize", "Upsample")
def _resize(c: _Converter, ins, a, node):
    x = ins[0]
    mode = a.get("mode", "nearest")
    ir_mode = "nearest"
    if mode == "linear":  # bilinear: half-pixel centres (PyTorch's align_corners=False) or aligned corners
        coords = a.get("coordinate_transformation_mode", "half_pixel")
        ir_mode = {"half_pixel": "bilinear", "pytorch_half_pixel": "bilinear", "align_corners": "bilinear_corners"}.get(coords)
        if ir_mode is None or node.op_type == "Upsample" or int(a.get("antialias", 0)):
            raise _Unsupported(f"linear resize with coordinate_transformation_mode={coords!r} (the IR's bilinear "
                               "upsample has half-pixel centres or aligned corners)")
    elif mode != "nearest":
        raise _Unsupported(f"interpolation mode {mode!r} (the IR's upsample is nearest or bilinear)")
    scales = sizes = None
    if node.op_type == "Upsample":
        scales = list(a["scales"]) if "scales" in a else [float(v) for v in _const(c, ins[1], "Upsample scales").reshape(-1)]
    else:
        key = (a.get("coordinate_transformation_mode", "half_pixel"), a.get("nearest_mode", "round_prefer_floor"))
        if mode == "nearest" and key not in _FLOOR_RESIZE:
            raise _Unsupported(f"nearest resize with coordinate_transformation_mode={key[0]!r}, nearest_mode={key[1]!r} "
                               "(its source pixels differ from the IR's upsample)")
        if a.get("axes") is not None:
            raise _Unsupported("Resize with axes")
        if _opt(ins, 3) is not None and math.prod(ins[3].shape):
            sizes = [int(v) for v in _const(c, ins[3], "Resize sizes").reshape(-1)]
        elif _opt(ins, 2) is not None and math.prod(ins[2].shape):
            scales = [float(v) for v in _const(c, ins[2], "Resize scales").reshape(-1)]
        else:
            raise _Unsupported("Resize without scales or sizes")
    if mode == "nearest" and sizes is not None and len(x.shape) == 4 and list(sizes[:2]) == list(x.shape[:2]) \
            and (sizes[2] % x.shape[2] or sizes[3] % x.shape[3]):
        if key != ("asymmetric", "floor"):
            raise _Unsupported(f"nearest resize {list(x.shape)} -> {list(sizes)} by a non-integer factor with "
                               f"coordinate_transformation_mode={key[0]!r}, nearest_mode={key[1]!r} (the IR's resize "
                               "reads floor(dst * in / out))")
        return c.new("resize", x, size=[int(sizes[2]), int(sizes[3])])  # SCNet's pooled map back to its size
    scale = _nearest_factor(c, x, scales, sizes)
    return x if scale == [1, 1] else c.new("upsample", x, scale=scale, mode=ir_mode)


@_handler("Identity")
def _identity(c: _Converter, ins, a, node):
    return ins[0]


@_handler("Dropout")
def _dropout(c: _Converter, ins, a, node):
    if len(node.output) > 1 and node.output[1] and c.readers.get(node.output[1], 0):
        raise _Unsupported("Dropout whose mask is read")
    return [ins[0], None]


@_handler("Cast")
def _cast(c: _Converter, ins, a, node):
    from onnx import helper

    x = ins[0]
    to = helper.tensor_dtype_to_np_dtype(int(a["to"]))
    if isinstance(x, _Const):
        return _Const(x.value.astype(to))
    if np.dtype(to).kind != "f":
        raise _Unsupported(f"Cast of a computed tensor to {np.dtype(to).name}")
    return x


@_handler("Constant")
def _constant(c: _Converter, ins, a, node):
    from onnx import numpy_helper

    for attr in node.attribute:
        if attr.name == "value":
            return _Const(numpy_helper.to_array(attr.t))
    for key, dtype in (("value_float", np.float32), ("value_floats", np.float32), ("value_int", np.int64), ("value_ints", np.int64)):
        if key in a:
            return _Const(np.array(a[key], dtype=dtype))
    raise _Unsupported(f"Constant with attribute(s) {sorted(a)}")


def _evaluated(c: _Converter, shape: list[int] | tuple[int, ...], what: str) -> None:
    """A constant the importer is about to evaluate: at most ``limits.TENSOR_ELEMENTS`` elements."""
    if any(int(d) < 0 for d in shape):
        raise _Unsupported(f"{what} of shape {[int(d) for d in shape][:8]} has a negative dimension")
    fault = too_many_elements(shape, f"{what} of shape")
    if fault:
        raise _Unsupported(fault)


@_handler("ConstantOfShape")
def _constant_of_shape(c: _Converter, ins, a, node):
    from onnx import numpy_helper

    shape = [int(v) for v in _const(c, ins[0], "the ConstantOfShape shape").reshape(-1)]
    _evaluated(c, shape, "the ConstantOfShape output")
    value = np.zeros(1, np.float32)
    for attr in node.attribute:
        if attr.name == "value":
            value = numpy_helper.to_array(attr.t).reshape(-1)
    return _Const(np.full(shape, value[0], dtype=value.dtype))


@_handler("Shape")
def _shape(c: _Converter, ins, a, node):
    shape = np.array(ins[0].shape, dtype=np.int64)
    rank = len(shape)
    start = int(a.get("start", 0))
    end = a.get("end")
    return _Const(shape[start: rank if end is None else int(end)])


def _const_only(fn: Callable[..., np.ndarray], out_shape: Callable[..., tuple[int, ...]] | None = None):
    """The handler of an operator the importer evaluates on constants only; ``out_shape(shapes,
    attrs)``, when the output can outgrow the inputs, is its shape, checked before evaluating."""
    def handler(c: _Converter, ins, a, node):
        if not all(x is None or isinstance(x, _Const) for x in ins):
            raise _Unsupported(f"{node.op_type} of a computed tensor (supported on constants only)")
        if out_shape is not None:
            _evaluated(c, out_shape([None if x is None else x.shape for x in ins], a), f"the {node.op_type} output")
        return _Const(fn(c, [None if x is None else x.value for x in ins], a))

    return handler


def _axes(vals: list, a: dict) -> list[int] | None:
    if "axes" in a:
        return [int(v) for v in a["axes"]]
    if len(vals) > 1 and vals[1] is not None:
        return [int(v) for v in vals[1].reshape(-1)]
    return None


def _unsqueeze(c, vals, a):
    y = vals[0]
    for ax in sorted(_axes(vals, a)):
        y = np.expand_dims(y, ax if ax >= 0 else ax + y.ndim + 1)
    return y


def _squeeze(c, vals, a):
    axes = _axes(vals, a)
    return np.squeeze(vals[0]) if axes is None else np.squeeze(vals[0], axis=tuple(axes))


def _gather(c, vals, a):
    return np.take(vals[0], vals[1].astype(np.int64), axis=int(a.get("axis", 0)))


def _gathered(shapes: list[tuple[int, ...]], axis: int) -> tuple[int, ...]:
    data, idx = shapes[0], shapes[1]
    axis = axis + len(data) if axis < 0 else axis
    return (*data[:axis], *idx, *data[axis + 1:])


def _range(c, vals):
    start, limit, delta = (np.asarray(v).reshape(-1)[0] for v in vals[:3])
    if delta == 0:
        raise _Unsupported("Range with delta 0")
    n = math.ceil((float(limit) - float(start)) / float(delta))
    _evaluated(c, [max(n, 0)] if math.isfinite(n) else [2 ** 63], "the Range output")
    return np.arange(start, limit, delta)


def _expand(c, vals):
    shape = tuple(int(d) for d in np.asarray(vals[1]).reshape(-1))
    if any(d < 0 for d in shape):
        raise _Unsupported(f"the Expand output of shape {list(shape)[:8]} has a negative dimension")
    _evaluated(c, np.broadcast_shapes(np.shape(vals[0]), shape), "the Expand output")
    return vals[0] * np.ones(shape, dtype=vals[0].dtype)


def _expand_handler(c: _Converter, ins, a, node):
    x, shape = ins[0], ins[1]
    if isinstance(x, _Const) or x is None:
        return _const_only(lambda c, v, a: _expand(c, v))(c, ins, a, node)
    if not isinstance(shape, _Const):
        raise _Unsupported("Expand to a shape computed from the input")
    target = tuple(int(d) for d in np.asarray(shape.value).reshape(-1))
    try:
        full = tuple(int(d) for d in np.broadcast_shapes(x.shape, target))
    except ValueError:
        raise _Unsupported(f"Expand of {list(x.shape)} to {list(target)}: the shapes do not broadcast") from None
    if full == tuple(x.shape):
        return x
    # a computed tensor broadcast to a larger shape (an attention gate expanded to the feature map):
    # the Add or Mul that reads it broadcasts it itself
    return _T(x.ref, x.shape, "expanded", full, c.origin)


HANDLERS.update({
    "Expand": _expand_handler,
    "Unsqueeze": _squeeze_like(False),
    "Squeeze": _squeeze_like(True),
    "Floor": _const_only(lambda c, v, a: np.floor(v[0])),
    "Mod": _const_only(lambda c, v, a: np.fmod(v[0], v[1]) if int(a.get("fmod", 0)) else np.mod(v[0], v[1]),
                       lambda s, a: np.broadcast_shapes(*s[:2])),
    "Ceil": _const_only(lambda c, v, a: np.ceil(v[0])),
    "Neg": _const_only(lambda c, v, a: np.negative(v[0])),
    "Range": _const_only(lambda c, v, a: _range(c, v)),
    "Equal": _const_only(lambda c, v, a: np.equal(v[0], v[1]), lambda s, a: np.broadcast_shapes(*s[:2])),
    "Where": _const_only(lambda c, v, a: np.where(v[0], v[1], v[2]), lambda s, a: np.broadcast_shapes(*s[:3])),
    "ReduceProd": _const_only(lambda c, v, a: np.prod(v[0], axis=None if _axes(v, a) is None else tuple(_axes(v, a)),
                                                      keepdims=bool(a.get("keepdims", 1)))),
})


# ---------------------------------------------------------------- the entry point
def _load(model: Any, name: str | None = None) -> tuple["onnx.ModelProto", str, str, str]:
    """(ModelProto, default name, base dir of external data, what a refusal names: the file's
    path, else the name), the model's size and node count checked (foundation/limits.py)."""
    import onnx

    if isinstance(model, onnx.ModelProto):
        where = name or model.graph.name or "onnx-model"
        check_graph_nodes(_proto_nodes(model), where)
        return model, model.graph.name or "onnx-model", "", where
    if isinstance(model, (bytes, bytearray, memoryview)):
        data, default, base_dir = bytes(model), None, ""
        where = name or "onnx-model"
        check_bytes(data, where)
    else:
        path = Path(model)
        if not path.is_file():
            raise UnsupportedModelError(f"{path}: no such ONNX file")
        data = read_model_file(path, "ONNX file")  # its size checked before it is read
        where, default, base_dir = str(path), path.stem, str(path.parent)
    check_graph_nodes(count_nodes(data, where), where)  # before the protobuf parser makes an object per node
    try:
        m = onnx.load_model_from_string(data)  # external data (weights) is never read: only their shapes are
    except Exception as e:  # DecodeError and friends: not an ONNX file
        raise UnsupportedModelError(f"{where}: not a readable ONNX model ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})") from None
    if default is None and not name:
        where = m.graph.name or where
    return m, default or m.graph.name or "onnx-model", base_dir, where


# -------- the bounds (foundation/limits.py), before parsing and before mapping
def _node_paths() -> dict[str, dict[int, str]]:
    """For each ONNX message type that can hold nodes (directly or in a nested message): field
    number -> the message type of that field, for the fields that lead to a NodeProto."""
    import onnx

    root = onnx.ModelProto.DESCRIPTOR
    types, todo = {}, [root]
    while todo:  # every message type reachable from ModelProto
        d = todo.pop()
        if d.full_name in types:
            continue
        types[d.full_name] = d
        todo += [f.message_type for f in d.fields if f.message_type is not None]
    node = onnx.NodeProto.DESCRIPTOR.full_name
    leads = {node}
    changed = True
    while changed:  # fixed point: types with a field whose type leads to a node
        changed = False
        for name, d in types.items():
            if name not in leads and any(f.message_type is not None and f.message_type.full_name in leads
                                         for f in d.fields):
                leads.add(name)
                changed = True
    return {name: {f.number: f.message_type.full_name for f in d.fields
                   if f.message_type is not None and f.message_type.full_name in leads}
            for name, d in types.items() if name in leads}


_NODE_PATHS: dict[str, dict[int, str]] | None = None


def _varint(buf: bytes, i: int, end: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if i >= end or shift > 63:
            raise ValueError(f"damaged varint at byte {i}")
        b = buf[i]
        i += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, i
        shift += 7


def count_nodes(buf: bytes, model: str) -> int:
    """The nodes of the ONNX model ``buf`` (protobuf wire format, nothing parsed into objects):
    those of its graph, of subgraphs in node attributes (If, Loop, Scan), of training graphs and
    of functions. Counting stops past ``limits.GRAPH_NODES`` (it returns bound + 1), so the work
    is bounded whatever the file holds; damaged wire format is an UnsupportedModelError."""
    import onnx

    from foundation import limits

    global _NODE_PATHS
    if _NODE_PATHS is None:
        _NODE_PATHS = _node_paths()
    node_type = onnx.NodeProto.DESCRIPTOR.full_name
    n = 0
    stack = [(onnx.ModelProto.DESCRIPTOR.full_name, 0, len(buf))]
    try:
        while stack:
            typ, i, end = stack.pop()
            wanted = _NODE_PATHS[typ]
            while i < end:
                key, i = _varint(buf, i, end)
                field, wire = key >> 3, key & 7
                if wire == 0:
                    _, i = _varint(buf, i, end)
                    continue
                if wire == 1:
                    size = 8
                elif wire == 5:
                    size = 4
                elif wire == 2:
                    size, i = _varint(buf, i, end)
                else:
                    raise ValueError(f"wire type {wire} at byte {i}")
                if i + size > end:
                    raise ValueError(f"field {field} runs past its message at byte {i}")
                child = wanted.get(field) if wire == 2 else None
                if child is not None:
                    if child == node_type:
                        n += 1
                        if n > limits.GRAPH_NODES:
                            return n
                    stack.append((child, i, i + size))
                i += size
    except ValueError as e:
        raise UnsupportedModelError(f"{model}: not a readable ONNX model (damaged protobuf: {e})") from None
    return n


def _proto_nodes(m: "onnx.ModelProto") -> int:
    """The nodes of a parsed model (as :func:`count_nodes` counts them in a file)."""
    from foundation import limits

    n, graphs = 0, [m.graph, *(t.initialization for t in m.training_info), *(t.algorithm for t in m.training_info)]
    nodes = [node for f in m.functions for node in f.node]
    while graphs or nodes:
        if graphs:
            nodes += list(graphs.pop().node)
            continue
        node = nodes.pop()
        n += 1
        if n > limits.GRAPH_NODES:
            return n
        for a in node.attribute:
            graphs += [*([a.g] if a.HasField("g") else []), *a.graphs]
    return n


def _dims(t: Any) -> list[int]:
    """The declared dims of a ValueInfoProto of tensor type (free dims as -1), else []."""
    if not t.type.HasField("tensor_type") or not t.type.tensor_type.HasField("shape"):
        return []
    return [d.dim_value if d.HasField("dim_value") else -1 for d in t.type.tensor_type.shape.dim]


def check_declared_tensors(graph: Any, model: str) -> None:
    """Every tensor the graph declares (inputs, outputs, value_info, initializers, sparse
    initializers, ``Constant`` node values) has at most ``limits.TENSOR_ELEMENTS`` elements."""
    for kind, vis in (("input", graph.input), ("output", graph.output), ("value_info", graph.value_info)):
        for vi in vis:
            check_elements(_dims(vi), model, f"{kind} {quoted(vi.name)} of shape")
    for t in graph.initializer:
        check_elements(t.dims, model, f"initializer {quoted(t.name)} of shape")
    for t in graph.sparse_initializer:
        check_elements(t.dims, model, f"sparse initializer {quoted(t.values.name)} of shape")
    for node in graph.node:
        if node.op_type == "Constant":
            for a in node.attribute:
                if a.HasField("t"):
                    label = node.name or (node.output[0] if node.output else "")
                    check_elements(a.t.dims, model, f"the value of Constant node {quoted(label)} of shape")


def _nodes_with_branches(graph: Any) -> list[Any]:
    """The graph's nodes and those of the subgraphs in their attributes (an If's branches read
    the outer graph's tensors)."""
    out, todo = [], list(graph.node)
    while todo:
        node = todo.pop(0)
        out.append(node)
        for a in node.attribute:
            for sub in ([a.g] if a.HasField("g") else []) + list(a.graphs):
                todo.extend(sub.node)
    return out


def _input_shape(vi: Any, model: str, override: list[int] | None) -> list[int]:
    t = vi.type.tensor_type
    if not vi.type.HasField("tensor_type"):
        raise UnsupportedModelError(f"{model}: input {vi.name!r} is not a tensor")
    dims = [d.dim_value if d.HasField("dim_value") and d.dim_value > 0 else None for d in t.shape.dim]
    if override is not None:
        shape = [int(d) for d in override]
        if len(shape) != len(dims) or not shape or shape[0] != 1 or min(shape) < 1:
            raise UnsupportedModelError(f"{model}: input_shape {list(override)} does not fit input {vi.name!r} of rank {len(dims)} "
                                        "(batch 1, the IR's NCHW layout)")
        return shape
    if not dims:
        raise UnsupportedModelError(f"{model}: input {vi.name!r} has no shape (give input_shape)")
    if dims[0] is None:
        dims[0] = 1  # a free batch dimension
    if dims[0] != 1:
        raise UnsupportedModelError(f"{model}: input {vi.name!r} has batch {dims[0]}; the IR is batch 1 (give input_shape)")
    free = [i for i, d in enumerate(dims) if d is None]
    if free:
        names = [t.shape.dim[i].dim_param or "?" for i in free]
        raise UnsupportedModelError(f"{model}: input {vi.name!r} has free dimension(s) {names} at axes {free} (give input_shape; --shape on the command line)")
    return dims


def import_onnx(model: Any, input_shape: list[int] | tuple[int, ...] | None = None, name: str | None = None) -> Graph:
    """Import an ONNX model (a path, a ``onnx.ModelProto`` or its bytes) into an IR graph.

    ``input_shape`` (NCHW, batch 1) replaces the shape of the model's single input; without
    it a free batch dimension becomes 1 and any other free dimension is an error. Raises
    :class:`UnsupportedModelError`, one line naming the model, the ONNX node and its op_type,
    for anything the IR cannot express. The graph's source is ``"onnx"``; its meta holds the
    producer and opset.
    """
    return import_onnx_with_origins(model, input_shape, name)[0]


def import_onnx_with_origins(model: Any, input_shape: list[int] | tuple[int, ...] | None = None,
                             name: str | None = None) -> tuple[Graph, dict[str, tuple[int, ...]]]:
    """:func:`import_onnx`, plus for each IR node (but the inputs) the positions in
    ``model.graph.node`` of the ONNX node(s) it came from: a conv's ``Conv``, an fc's ``Gemm``
    or ``MatMul`` and bias ``Add``. Whoever holds the weights can carry them over with it."""
    proto, default_name, base_dir, where = _load(model, name)  # size and node count checked
    name = name or default_name
    graph = proto.graph
    check_declared_tensors(graph, where)  # before any node is mapped
    if input_shape is not None:
        check_elements(input_shape, where, "input_shape")
    opset = max((o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")), default=1)
    initializers = {t.name: t for t in graph.initializer}
    real_inputs = [vi for vi in graph.input if vi.name not in initializers]
    if not real_inputs:
        raise UnsupportedModelError(f"{name}: the model has no input")
    if input_shape is not None and len(real_inputs) != 1:
        raise UnsupportedModelError(f"{name}: input_shape given but the model has {len(real_inputs)} inputs")
    readers: dict[str, int] = {}
    for node in _nodes_with_branches(graph):
        for i in node.input:
            if i:
                readers[i] = readers.get(i, 0) + 1
    for o in graph.output:
        readers[o.name] = readers.get(o.name, 0) + 2  # an output is never fused away
    g = Graph(name=name, source="onnx", meta={"producer": f"{proto.producer_name} {proto.producer_version}".strip(), "opset": opset})
    c = _Converter(g, name, readers, base_dir)
    c.opset = opset
    for t in graph.initializer:
        c.env[t.name] = _Const(proto=t, base_dir=base_dir)
    for vi in real_inputs:
        shape = _input_shape(vi, name, None if input_shape is None else list(input_shape))
        ref = g.input(shape, name=c._name(vi.name))
        c.env[vi.name] = _T(ref, tuple(shape))
    for idx, node in enumerate(graph.node):
        label = node.name or f"#{idx} -> {node.output[0] if node.output else '?'}"
        where = f"ONNX node {label!r} ({node.op_type})"
        c.origin = node.name or (node.output[0] if node.output else node.op_type)
        c.index = idx
        c.index_of.setdefault(c.origin, idx)
        with node_errors(name, where):
            _convert_node(c, node)
    outputs = []
    for o in graph.output:
        v = c.env.get(o.name)
        with node_errors(name, f"graph output {o.name!r}", cannot_map=None):
            if not isinstance(v, _T):
                raise _Unsupported("is a constant, not computed from the input" if v is not None else "is produced by no node")
            v = _T(c.t(v), v.shape)
            outputs.append(c.formed(v, origin=o.name)[0] if c.ir_shape(v) != v.shape else v.ref)
    finish(g, name, outputs)
    return g, {k: v for k, v in c.origins.items() if k in g.nodes}


def _convert_node(c: _Converter, node: Any) -> None:
    """Map one ONNX node: its inputs from ``c.env``, its outputs into it."""
    if node.domain not in ("", "ai.onnx"):
        raise _Unsupported(f"operator of domain {node.domain!r}")
    handler = HANDLERS.get(node.op_type)
    if handler is None:
        raise _Unsupported("unsupported operator")
    ins = []
    for i in node.input:
        if not i:
            ins.append(None)
        elif i not in c.env:
            raise _Unsupported(f"input {i!r} is produced by no earlier node")
        else:
            ins.append(c.env[i])
    # a pending pattern read by an operator outside it is materialised (or refused)
    ins = [_materialize(c, v, node.op_type) for v in ins]
    out = handler(c, ins, _attrs(node), node)
    outs = out if isinstance(out, list) else [out]
    for o, v in zip(node.output, outs):
        if o:
            c.env[o] = v
            if isinstance(v, _T) and v.pending:
                c.source_of[v] = o


@_handler("If")
def _if(c: _Converter, ins, a, node):
    """An ``If`` on a constant condition: the branch it takes, its nodes mapped in place (it reads
    the outer graph's tensors). torch.onnx guards a squeeze whose axis it cannot prove of size 1
    so (``F.local_response_norm`` under a free batch)."""
    cond = ins[0]
    if not isinstance(cond, _Const) or math.prod(cond.shape) != 1:
        raise _Unsupported("If on a condition computed from the input (the IR has no control flow)")
    branch = a["then_branch"] if bool(cond.value.reshape(-1)[0]) else a["else_branch"]
    for sub in branch.node:
        _convert_node(c, sub)
    missing = [o.name for o in branch.output if o.name not in c.env]
    if missing:
        raise _Unsupported(f"If branch output {missing[0]!r} is produced by no node of the branch")
    return [c.env[o.name] for o in branch.output]


#: pending patterns an operator may receive as they are (it continues or ends the pattern)
_PASSABLE: dict[str, tuple[str, ...]] = {
    "Mul": ("relu6_plus3", "x_relu6_plus3", "ln_centered", "ln", "cube", "square", "tanh_arg", "erf1", "half_erf1", "x_erf1",
            "tanh_g1", "half_tanh_g1", "x_tanh_g1", "expanded", "lrn_avg"),
    "Div": ("relu6_plus3", "x_relu6_plus3", "ln_centered", "ln_std", "lrn_den"),
    "Clip": ("plus3",),
    "Add": ("matmul", "ln_var", "ln", "ln_gain", "erf", "tanh_g", "tanh_arg", "expanded", "lrn_alpha"),
    "Sub": ("ln_mean",),
    "Pow": ("ln_centered", "lrn_bias"),
    "ReduceMean": ("ln_square",),
    "Sqrt": ("ln_var_eps",),
    "Erf": (),
    "Tanh": ("tanh_arg",),
    "Slice": ("crop",),
    "Pad": ("crop", "lrn_view"),
    "Transpose": ("grouped",),
    "Reshape": ("shuffled", "square", "lrn_avg"),
    "Unsqueeze": ("square",),
    "Squeeze": ("lrn_avg",),
    "AveragePool": ("lrn_padded",),
    # a Shape reads the shape only (torch.onnx's guard of the squeeze in a local response norm)
    "Shape": ("square", "lrn_view", "lrn_padded", "lrn_avg", "lrn_alpha", "lrn_bias", "lrn_den"),
}


#: operators that take views (see _T) as they are: they map ONNX axes to IR axes themselves
_VIEW_OPS = {"Identity", "Dropout", "Cast", "Shape", "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Transpose", "Gather",
             "MatMul", "Gemm", "Add", "Sub", "Mul", "Div", "Pow", "Sum", "Softmax", "LayerNormalization", "ReduceMean",
             "Gelu", "Erf", "Sqrt", "Reciprocal", "Relu", "Tanh", "Sigmoid", "HardSwish", "Split"}


def _materialize(c: _Converter, v: Any, op_type: str) -> Any:
    if op_type in ("Identity", "Dropout"):  # pass any pattern through
        return v
    if isinstance(v, _T) and v.pending and v.pending not in _PASSABLE.get(op_type, ()):
        ref = c.t(v)
        v = _T(ref, v.shape)
    if isinstance(v, _T) and v.pending is None and op_type not in _VIEW_OPS and c.ir_shape(v) != v.shape:
        if v.shape[0] != 1:
            raise _Unsupported(f"{op_type} of a tensor of shape {list(v.shape)} whose first axis is not the batch of 1 "
                               "(the IR keeps the batch axis first)")
        ref, _ = c.formed(v)
        v = _T(ref, v.shape)
    return v


# ---------------------------------------------------------------- shared with the TFLite importer
def learned_like(x: tuple[int, ...] | list[int], y: tuple[int, ...]) -> bool:
    """A constant of shape ``y`` holds one value per element of a tensor of shape ``x`` (it
    broadcasts to ``x`` without repeating: a learned tensor such as a position embedding)."""
    try:
        return tuple(np.broadcast_shapes(x, y)) == tuple(x) and math.prod(y) == math.prod(x) > 1
    except ValueError:
        return False


def slice_as_split(g: Graph, cache: dict[tuple, list[str]], ref: str, axis: int, lo: int, hi: int, name: str,
                   origins: dict, origin: tuple) -> str:
    """``x[..., lo:hi, ...]`` along ``axis`` as one output of a ``split`` (the IR has no slice
    but a split may leave outputs unread); slices of one tensor that cut it at the same places
    share one split node (``torch.chunk`` exports one slice per chunk)."""
    size = g.shape(ref)[axis]
    sections = [n for n in (lo, hi - lo, size - hi) if n]
    key = (ref, axis, tuple(sections))
    if key not in cache:
        cache[key] = g.add_multi("split", ref, name=name, sections=sections, axis=axis)
        origins[split_ref(cache[key][0])[0]] = origin
    return cache[key][1 if lo else 0]


# ---------------------------------------------------------------- window geometry
def symmetric_conv_padding(hw: tuple[int, ...] | list[int], before: list[int], after: list[int], kernel: list[int],
                           stride: list[int], dilation: list[int]) -> list[int] | None:
    """The IR's symmetric conv padding that computes a conv padded by (before, after) per
    spatial dim, or None. Equal pads are that padding; with fewer pads after than before,
    padding ``before`` on both sides gives the same windows when the output size is the same
    (the extra trailing rows/columns are never read)."""
    if list(before) == list(after):
        return list(before)
    for i in range(2):
        size, eff = hw[i], dilation[i] * (kernel[i] - 1) + 1
        actual = (size + before[i] + after[i] - eff) // stride[i] + 1
        sym = (size + 2 * before[i] - eff) // stride[i] + 1
        if after[i] > before[i] or actual != sym:
            return None
    return list(before)


def ir_window_count(size: int, k: int, s: int, p: int, ceil: bool) -> int | None:
    """Output size of an IR pool (PyTorch's rule), or None if the window does not fit."""
    span = size + 2 * p - k
    if span < 0:
        return None
    out = (-(-span // s) if ceil else span // s) + 1
    if ceil and (out - 1) * s >= size + p:
        out -= 1
    return out


def ir_avg_divisors(size: int, k: int, s: int, p: int, n: int, count_include_pad: bool) -> list[int]:
    """PyTorch's avg_pool2d divisor at each of ``n`` output positions along one dim."""
    out = []
    for o in range(n):
        start = o * s - p
        end = min(start + k, size + p)
        out.append(end - start if count_include_pad else min(end, size) - max(start, 0))
    return out


def match_pool(kind: str, hw: tuple[int, ...] | list[int], kernel: list[int], stride: list[int], before: list[int],
               n_out: list[int], divisors_ok: Callable[[list[int], list[int]], bool] | None = None) -> dict | None:
    """IR pool attributes (padding, ceil_mode[, count_include_pad]) that compute a pool whose
    windows start at ``o * stride - before`` for ``o < n_out`` (per spatial dim), or None.

    For max pooling that fixes the function (padding never wins a max); for average pooling
    ``divisors_ok(div_h, div_w)`` must accept the IR's per-position divisors. Defaults are
    preferred: ``ceil_mode=False`` first, ``count_include_pad=True`` first.
    """
    if any(2 * p > k for p, k in zip(before, kernel)):
        return None
    for ceil in (False, True):
        if [ir_window_count(hw[i], kernel[i], stride[i], before[i], ceil) for i in range(2)] != list(n_out):
            continue
        if kind == "max":
            return {"padding": list(before), "ceil_mode": ceil}
        for cip in (True, False):
            divs = [ir_avg_divisors(hw[i], kernel[i], stride[i], before[i], n_out[i], cip) for i in range(2)]
            if divisors_ok(*divs):
                return {"padding": list(before), "ceil_mode": ceil, "count_include_pad": cip}
    return None
