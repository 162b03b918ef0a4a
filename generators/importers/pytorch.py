"""Import PyTorch modules into the architecture IR.

The module (eval mode, batch-1 example input) is traced with ``torch.fx.symbolic_trace``;
modules fx cannot trace (Python control flow on shapes, ``float()`` of a size) fall back to
``torch.export.export(strict=False)``, whose ATen graph has those shapes resolved. The trace is
then *interpreted* node by node over IR values: a tensor is an IR reference whose shape the IR
infers, everything else is a concrete Python value, so shape arithmetic resolves without running
the model. Parameters are only read for their shapes, so models can live on the ``meta`` device
(:func:`import_pytorchcv` builds them there). Both front-ends map onto one set of handlers with
``torch.nn.functional`` semantics, and each IR node is labelled with the module path it came
from. Anything without an IR operator raises :class:`UnsupportedModelError`, one line naming the
model, the trace node and the module path.

Costs agree with PyTorch on the 102 CNNs of the USC dataset: parameters exactly, FLOPs
(multiply-accumulates) exactly half of ``torch.utils.flop_counter.FlopCounterMode``'s count
(tests/test_import_pytorch.py). docs/generators.md (*PyTorch importer*) has the mapping.
"""
from __future__ import annotations

import contextlib
import functools
import math
import operator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterator

from ..ir import Graph
from ..sources import register_source
from foundation.configs import coerce
from .common import Unsupported as _Unsupported
from .common import UnsupportedModelError, finish, materialized, node_errors

if TYPE_CHECKING:  # torch is imported on first use: registering the source stays cheap
    import torch

SOURCE = "pytorch"
DEFAULT_MODELS = ["mobilenetv2_w1", "resnet18", "squeezenet_v1_1"]


# ---------------------------------------------------------------- values
@dataclass(frozen=True)
class _T:
    """A traced tensor: an IR reference, or a pattern awaiting its consumer (``pending``).

    Pending values (e.g. ``x + 3`` inside h-swish) have no IR node yet; ``ref`` is then the
    tensor they derive from and ``data`` the pattern's parameters.
    """

    ref: str
    shape: tuple[int, ...]
    pending: str | None = None
    data: tuple = ()


_PENDING_WHAT = {
    "relu6_plus3": "relu6(x + 3) not divided by 6 (hsigmoid pattern)",
    "x_relu6_plus3": "x * relu6(x + 3) not divided by 6 (hswish pattern)",
    "expanded": "an expand outside an element-wise operation that broadcasts it",
    "shuffled": "a transposed 5-d view outside a channel-shuffle pattern",
}


def _is_weight(v: Any) -> bool:
    """A parameter or buffer of the model (on the meta device: its shape only), not a traced value."""
    import torch

    return isinstance(v, torch.Tensor) and not isinstance(v, _T)


def _is_num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _pair(v: Any) -> list[int]:
    if isinstance(v, (list, tuple)):
        if len(v) == 1:
            return [int(v[0]), int(v[0])]
        if len(v) != 2:
            raise _Unsupported(f"expected an int or a pair, got {v!r}")
        return [int(v[0]), int(v[1])]
    return [int(v), int(v)]


# ---------------------------------------------------------------- the interpreter
class _Converter:
    """Interprets one traced graph (fx or export) into an IR graph."""

    def __init__(self, g: Graph, model: str):
        self.g = g
        self.model = model
        self._materialized: dict[_T, str] = {}
        self._splits: dict[tuple, tuple[_T, ...]] = {}  # (ref, axis, sections) -> the split's outputs

    # ------------------------------------------------ tensors
    def t(self, v: Any) -> str:
        """The IR reference of a tensor value (materialising a pending pattern)."""
        if not isinstance(v, _T):
            kind = "a constant tensor" if hasattr(v, "dtype") and hasattr(v, "shape") else repr(v)
            raise _Unsupported(f"expected a tensor computed from the input, got {kind}")
        return materialized(self._materialized, v, self._end_pattern)

    def _end_pattern(self, v: _T) -> str:
        """The IR node a pending pattern ends in when an operator outside it reads it."""
        if v.pending == "crop":
            return self.g.add("crop", v.ref, crops=list(v.data))
        if v.pending == "plus3":  # x + 3 that no h-sigmoid/h-swish pattern continues
            return self.g.add("shift", v.ref, value=3.0)
        if v.pending == "grouped":  # a view [1, g, C/g, H, W] no channel shuffle continues (split attention)
            return self.g.add("reshape", v.ref, shape=list(v.shape))
        raise _Unsupported(_PENDING_WHAT[v.pending])

    def new(self, op: str, inputs: list[Any] | Any, **attrs) -> _T:
        refs = [self.t(x) for x in (inputs if isinstance(inputs, list) else [inputs])]
        ref = self.g.add(op, refs, **attrs)
        return _T(ref, tuple(self.g.shape(ref)))

    def multi(self, op: str, x: Any, **attrs) -> tuple[_T, ...]:
        refs = self.g.add_multi(op, self.t(x), **attrs)
        return tuple(_T(r, tuple(self.g.shape(r))) for r in refs)

    @staticmethod
    def _dim(d: int, rank: int) -> int:
        if not -rank <= d < rank:
            raise _Unsupported(f"dimension {d} out of range for rank {rank}")
        return d % rank

    # ------------------------------------------------ convolution, fc, norm
    def conv2d(self, input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
        x = self.t(input)
        if len(weight.shape) != 4:
            raise _Unsupported(f"only 2-d convolution is supported, weight shape {tuple(weight.shape)}")
        cout, cin_per_group, kh, kw = (int(d) for d in weight.shape)
        cin = self._shape(x)[1]
        if cin != cin_per_group * int(groups):
            raise _Unsupported(f"input has {cin} channels, the weight {tuple(weight.shape)} with groups={groups} expects {cin_per_group * int(groups)}")
        stride, dilation = _pair(stride), _pair(dilation)
        if padding == "valid":
            padding = 0
        elif padding == "same":
            total = [dilation[0] * (kh - 1), dilation[1] * (kw - 1)]
            if stride != [1, 1] or total[0] % 2 or total[1] % 2:
                raise _Unsupported(f"padding='same' needing asymmetric padding (kernel {kh}x{kw}, stride {stride})")
            padding = [total[0] // 2, total[1] // 2]
        return self.new(
            "conv2d", _T(x, self._shape(x)), out_channels=cout, kernel=[kh, kw], stride=stride,
            padding=_pair(padding), dilation=dilation, groups=int(groups), bias=bias is not None,
        )

    def conv3d(self, input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
        """A 3-d convolution over the depth of a one-channel map ``[1, 1, C, H, W]``, 1x1 in height
        and width (ChannelNet's channel-wise convolution): the 2-d convolution of ``[1, 1, C, H*W]``
        by a ``kd x 1`` window, as the ONNX and TFLite importers take it, viewed back in 5-d."""
        triple = lambda v: [int(v)] * 3 if isinstance(v, int) else [int(d) for d in v]  # noqa: E731
        cout, cin_g, kd, kh, kw = (int(d) for d in weight.shape)
        stride, padding, dilation = triple(stride), triple(padding) if not isinstance(padding, str) else None, triple(dilation)
        shape = list(input.shape)
        if len(shape) != 5 or shape[:2] != [1, 1] or cin_g != 1 or int(groups) != 1 or (kh, kw) != (1, 1) \
                or padding is None or stride[1:] + padding[1:] + dilation[1:] != [1, 1, 0, 0, 1, 1]:
            raise _Unsupported(f"a 3-d convolution (weight {tuple(weight.shape)} on {shape}); only one over the depth "
                               "axis of a single input channel (1x1 in height and width) is supported")
        depth, h, w = shape[2:]
        y = self.new("conv2d", self.view(input, [1, 1, depth, h * w]), out_channels=cout, kernel=[kd, 1],
                     stride=[stride[0], 1], padding=[padding[0], 0], dilation=[dilation[0], 1], groups=1,
                     bias=bias is not None)
        return self.view(y, [1, cout, y.shape[2], h, w])

    def linear(self, input, weight, bias=None):
        if len(input.shape) != 2:
            raise _Unsupported(f"fc on a rank-{len(input.shape)} input {list(input.shape)} (the IR's fc takes [1, F])")
        if input.shape[1] != weight.shape[1]:
            raise _Unsupported(f"input has {input.shape[1]} features, the weight {tuple(weight.shape)} expects {weight.shape[1]}")
        return self.new("fc", input, out_features=int(weight.shape[0]), bias=bias is not None)

    def batch_norm(self, input, running_mean, running_var, weight=None, bias=None, training=False, momentum=0.1, eps=1e-5):
        if training:
            raise _Unsupported("batch norm in training mode (call model.eval())")
        if weight is None or bias is None:
            raise _Unsupported("batch norm without affine parameters (the IR counts gamma and beta)")
        if len(input.shape) < 2 or weight.numel() != input.shape[1]:
            raise _Unsupported(f"batch norm over {weight.numel()} channels on an input of shape {list(input.shape)}")
        return self.new("batchnorm", input, eps=float(eps))

    # ------------------------------------------------ activations
    def relu(self, input, inplace=False):
        return self.new("relu", input)

    def relu6(self, input, inplace=False):
        if isinstance(input, _T) and input.pending == "plus3":
            return _T(input.ref, input.shape, "relu6_plus3")
        return self.new("relu6", input)

    def hardtanh(self, input, min_val=-1.0, max_val=1.0, inplace=False):
        return self.clamp(input, min_val, max_val)

    def clamp(self, input, min=None, max=None):
        if min == 0 and max == 6:
            return self.relu6(input)
        if min == 0 and max is None:
            return self.relu(input)
        if min is None or max is None:
            raise _Unsupported(f"one-sided clamp(min={min}, max={max})")
        return self.new("clip", input, min=float(min), max=float(max))

    def _unary(op: str):
        def handler(self, input, *args, inplace=False, **kwargs):
            return self.new(op, input)

        return handler

    sigmoid = _unary("sigmoid")
    tanh = _unary("tanh")
    silu = _unary("swish")
    hardswish = _unary("hswish")
    hardsigmoid = _unary("hsigmoid")
    del _unary

    def leaky_relu(self, input, negative_slope=0.01, inplace=False):
        return self.new("leaky_relu", input, alpha=float(negative_slope))

    def prelu(self, input, weight):
        if weight.numel() not in (1, input.shape[1]):
            raise _Unsupported(f"prelu with {weight.numel()} slopes on {input.shape[1]} channels")
        return self.new("prelu", input, num_parameters=int(weight.numel()))

    def softmax(self, input, dim=None, *args, **kwargs):
        if dim is None:
            raise _Unsupported("softmax without dim")
        return self.new("softmax", input, axis=self._dim(int(dim), len(input.shape)))

    # ------------------------------------------------ element-wise arithmetic
    def add(self, a, b, alpha=1):
        if alpha != 1:
            raise _Unsupported(f"add with alpha={alpha}")
        if isinstance(b, _T) and not isinstance(a, _T):
            a, b = b, a
        if isinstance(a, _T) and isinstance(b, _T):
            return self._broadcast("add", a, b)
        if isinstance(a, _T) and _is_num(b):
            if b == 0:
                return a
            if b == 3 and a.pending is None:
                return _T(a.ref, a.shape, "plus3")
            return self.new("shift", a, value=float(b))
        raise _Unsupported(f"add of {type(a).__name__} and {type(b).__name__}")

    def mul(self, a, b):
        if isinstance(b, _T) and not isinstance(a, _T):
            a, b = b, a
        if isinstance(a, _T) and isinstance(b, _T):
            for x, y in ((a, b), (b, a)):  # x * relu6(x + 3)
                if y.pending == "relu6_plus3" and x.pending is None and x.ref == y.ref:
                    return _T(x.ref, x.shape, "x_relu6_plus3")
            return self._broadcast("mul", a, b)
        if isinstance(a, _T) and _is_num(b):
            return a if b == 1 else self.new("scale", a, factor=float(b))
        if _is_weight(a) and (_is_weight(b) or _is_num(b)):
            # weights computed from weights (XDenseNet's masked kernel): a weight of that shape, on
            # the meta device like the model's (its buffers may be on the CPU)
            import torch

            return torch.empty(torch.broadcast_shapes(a.shape, getattr(b, "shape", ())), device="meta")
        raise _Unsupported(f"mul of {type(a).__name__} and {type(b).__name__}")

    def div(self, a, b, rounding_mode=None):
        if rounding_mode is not None:
            raise _Unsupported(f"division with rounding_mode={rounding_mode!r}")
        if isinstance(a, _T) and _is_num(b):
            if b == 6 and a.pending == "relu6_plus3":
                return self.new("hsigmoid", _T(a.ref, a.shape))
            if b == 6 and a.pending == "x_relu6_plus3":
                return self.new("hswish", _T(a.ref, a.shape))
            if b == 0:
                raise _Unsupported("division by zero")
            return a if b == 1 else self.new("scale", a, factor=1.0 / float(b))
        if isinstance(a, _T) and isinstance(b, _T):
            return self._broadcast("div", a, b)
        raise _Unsupported(f"division of {type(a).__name__} by {type(b).__name__}")

    def _broadcast(self, op: str, a: _T, b: _T) -> _T:
        # an expanded operand: the element-wise op broadcasts the tensor itself
        a, b = (_T(x.ref, x.data[0]) if x.pending == "expanded" else x for x in (a, b))
        if len(a.shape) != len(b.shape):
            raise _Unsupported(f"{op} of tensors of different rank {list(a.shape)} and {list(b.shape)}")
        return self.new(op, [a, b])

    # ------------------------------------------------ pooling
    def avg_pool2d(self, input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True, divisor_override=None):
        if divisor_override is not None:
            raise _Unsupported(f"avg_pool2d with divisor_override={divisor_override}")
        stride = kernel_size if stride is None or stride == [] or stride == () else stride
        return self.new(
            "avgpool", input, kernel=_pair(kernel_size), stride=_pair(stride), padding=_pair(padding),
            ceil_mode=bool(ceil_mode), count_include_pad=bool(count_include_pad),
        )

    def max_pool2d(self, input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
        if _pair(dilation) != [1, 1] or return_indices:
            raise _Unsupported("max pooling with dilation or returned indices")
        stride = kernel_size if stride is None or stride == [] or stride == () else stride
        return self.new("maxpool", input, kernel=_pair(kernel_size), stride=_pair(stride), padding=_pair(padding), ceil_mode=bool(ceil_mode))

    def adaptive_avg_pool2d(self, input, output_size):
        h, w = input.shape[2:]
        out = [h if o is None else o for o in _pair_or_none(output_size)]
        if out == [1, 1]:
            return self.new("global_avgpool", input)
        if out == [h, w]:
            return input
        if h % out[0] == 0 and w % out[1] == 0:  # equal windows: a plain average pool
            k = [h // out[0], w // out[1]]
            return self.new("avgpool", input, kernel=k, stride=k)
        raise _Unsupported(f"adaptive average pooling {h}x{w} -> {out[0]}x{out[1]} (uneven windows)")

    def adaptive_max_pool2d(self, input, output_size, return_indices=False):
        h, w = input.shape[2:]
        out = [h if o is None else o for o in _pair_or_none(output_size)]
        if return_indices or h % out[0] or w % out[1]:
            raise _Unsupported(f"adaptive max pooling {h}x{w} -> {out[0]}x{out[1]} (uneven windows, or indices)")
        if out == [h, w]:
            return input
        k = [h // out[0], w // out[1]]  # equal windows (the whole map for 1x1): a plain max pool
        return self.new("maxpool", input, kernel=k, stride=k)

    def mean(self, input, dim=None, keepdim=False, dtype=None):
        rank = len(input.shape)
        dims = sorted(self._dim(d, rank) for d in ([dim] if isinstance(dim, int) else (dim or [])))
        if rank == 4 and dims == [2, 3]:
            y = self.new("global_avgpool", input)
            return y if keepdim else self.new("flatten", y)
        return self._reduce("mean", input, dims, keepdim)

    def _reduce(self, op: str, input, dims: list[int], keepdim: bool) -> _T:
        """A reduction over one axis that is not the batch."""
        if len(dims) != 1 or dims[0] == 0:
            raise _Unsupported(f"{op} over dims {dims} of {list(input.shape)} (the IR reduces over one axis, not the "
                               "batch; a mean over H and W is a global average pool)")
        return self.new(op, input, axis=dims[0], keepdim=bool(keepdim))

    def amax(self, input, dim=(), keepdim=False):
        rank = len(input.shape)
        return self._reduce("reduce_max", input, sorted(self._dim(d, rank) for d in ([dim] if isinstance(dim, int) else dim)),
                            keepdim)

    def max(self, input, dim=None, keepdim=False):
        """``torch.max(x, dim)``: the values (the indices are not computed by the IR)."""
        if not isinstance(dim, int):
            raise _Unsupported("max without a dimension, or of two tensors (the IR's reduce_max is over one axis)")
        return self.amax(input, dim, keepdim), None

    def sum(self, input, dim=None, keepdim=False, dtype=None):
        rank = len(input.shape)
        return self._reduce("reduce_sum", input,
                            sorted(self._dim(d, rank) for d in ([dim] if isinstance(dim, int) else (dim or []))), keepdim)

    def instance_norm(self, input, running_mean=None, running_var=None, weight=None, bias=None, use_input_stats=True,
                      momentum=0.1, eps=1e-5, cudnn_enabled=False):
        if weight is None or bias is None or not use_input_stats or len(input.shape) != 4:
            raise _Unsupported("instance norm other than nn.InstanceNorm2d(affine=True) on an image "
                               "(the IR's instancenorm has a gain and shift per channel)")
        return self.new("instancenorm", input, eps=float(eps))

    def local_response_norm(self, input, size, alpha=1e-4, beta=0.75, k=1.0):
        if len(input.shape) != 4:
            raise _Unsupported(f"local response norm of a rank-{len(input.shape)} tensor (the IR's lrn takes an image)")
        return self.new("lrn", input, size=int(size), alpha=float(alpha), beta=float(beta), bias=float(k))

    # ------------------------------------------------ resizing, padding, slicing
    def interpolate(self, input, size=None, scale_factor=None, mode="nearest", align_corners=None, recompute_scale_factor=None, antialias=False):
        if mode not in ("nearest", "bilinear") or antialias:
            raise _Unsupported(f"interpolation mode {mode!r}{' with antialias' if antialias else ''} "
                               "(the IR's upsample is nearest or bilinear)")
        ir_mode = "nearest" if mode == "nearest" else "bilinear_corners" if align_corners else "bilinear"
        h, w = input.shape[2:]
        if size is not None:
            oh, ow = _pair(size)
            if (oh % h or ow % w) and mode == "nearest":  # SCNet's pooled map back to its size
                return self.new("resize", input, size=[oh, ow])
            if oh % h or ow % w:
                raise _Unsupported(f"bilinear resize {h}x{w} -> {oh}x{ow} by a non-integer factor")
            scale = [oh // h, ow // w]
        else:
            s = scale_factor if isinstance(scale_factor, (list, tuple)) else [scale_factor, scale_factor]
            if any(float(f) != int(f) for f in s):
                raise _Unsupported(f"nearest upsampling by non-integer factors {s}")
            scale = [int(f) for f in s]
        return input if scale == [1, 1] else self.new("upsample", input, scale=scale, mode=ir_mode)

    def pad(self, input, pad, mode="constant", value=None):
        if mode != "constant":
            raise _Unsupported(f"padding mode {mode!r}")
        pad = [int(p) for p in pad]
        if len(pad) not in (2, 4, 6) or len(input.shape) != 4 or min(pad[4:], default=0) < 0:
            raise _Unsupported(f"padding {pad} of a rank-{len(input.shape)} tensor (only an image's H, W and "
                               "channels, the channels not cropped)")
        left, right = pad[0], pad[1]
        top, bottom = (pad[2], pad[3]) if len(pad) >= 4 else (0, 0)
        pads = [top, bottom, left, right]
        channels = pad[4:] if any(pad[4:]) else []  # PyramidNet's zero channels
        y = input
        if any(p > 0 for p in pads) or channels:
            y = self.new("pad", y, pads=[max(p, 0) for p in pads] + channels, value=float(value or 0.0))
        if any(p < 0 for p in pads):
            y = self._crop(y, [max(-p, 0) for p in pads])
        return y

    def _crop(self, x: _T, crops: list[int]) -> _T:
        """A pending crop (consecutive slices and negative pads merge into one ``crop``)."""
        if not any(crops):
            return x
        if x.pending == "crop":
            base = x.ref
            crops = [a + b for a, b in zip(x.data, crops)]
        else:
            base = self.t(x)
        c, h, w = self._shape(base)[1:]
        h, w = h - crops[0] - crops[1], w - crops[2] - crops[3]
        if h < 1 or w < 1:
            raise _Unsupported(f"slice leaves an empty tensor (crops {crops})")
        return _T(base, (1, c, h, w), "crop", tuple(crops))

    def slice(self, input, dim=0, start=None, end=None, step=1):
        """``x[..., start:end:step]`` along one dim (ATen's slice)."""
        if not isinstance(input, _T):
            raise _Unsupported("slice of a constant")
        rank = len(input.shape)
        d = self._dim(int(dim), rank)
        size = input.shape[d]
        start, end, step = slice(start, end, step).indices(size)
        if step != 1:
            raise _Unsupported(f"strided slice (step {step})")
        if (start, end) == (0, size):
            return input
        if d == 0:
            raise _Unsupported(f"slice along the batch dimension of shape {list(input.shape)}")
        if rank != 4 or d < 2:
            # of another axis (DPN's channel groups): one output of a split, which may leave the
            # others unread; slices cutting a tensor at the same places share one split
            sections = tuple(n for n in (start, end - start, size - end) if n)
            key = (self.t(input), d, sections)
            if key not in self._splits:
                self._splits[key] = self.multi("split", input, sections=list(sections), axis=d)
            return self._splits[key][1 if start else 0]
        crops = [0, 0, 0, 0]
        crops[2 * (d - 2)], crops[2 * (d - 2) + 1] = start, size - end
        return self._crop(input, crops)

    def getitem(self, obj, idx):
        if not isinstance(obj, _T):
            return obj[idx]
        idx = idx if isinstance(idx, tuple) else (idx,)
        if any(i is Ellipsis for i in idx) or len(idx) > len(obj.shape) or not all(isinstance(i, slice) for i in idx):
            raise _Unsupported(f"tensor indexing {idx!r} (only slices x[:, :, a:b, c:d])")
        y = obj
        for d, s in enumerate(idx):
            y = self.slice(y, d, s.start, s.stop, 1 if s.step is None else s.step)
        return y

    # ------------------------------------------------ plumbing
    def cat(self, tensors, dim=0):
        tensors = list(tensors)
        if len(tensors) == 1:
            return tensors[0]
        return self.new("concat", tensors, axis=self._dim(int(dim), len(tensors[0].shape)))

    def split(self, input, split_size_or_sections, dim=0):
        d = self._dim(int(dim), len(input.shape))
        n = input.shape[d]
        if isinstance(split_size_or_sections, int):
            k = split_size_or_sections
            sections = [k] * (n // k) + ([n % k] if n % k else [])
        else:
            sections = [int(s) for s in split_size_or_sections]
        if len(sections) == 1:
            return (input,)
        return self.multi("split", input, sections=sections, axis=d)

    def chunk(self, input, chunks, dim=0):
        n = input.shape[self._dim(int(dim), len(input.shape))]
        return self.split(input, -(-n // int(chunks)), dim)

    def view(self, input, *shape):
        if len(shape) == 1 and isinstance(shape[0], (list, tuple)):
            shape = tuple(shape[0])
        numel = math.prod(input.shape)
        shape = [int(s) for s in shape]
        if shape.count(-1) == 1:
            known = math.prod(s for s in shape if s != -1)
            shape[shape.index(-1)] = numel // known if known else 0
        if math.prod(shape) != numel or any(s < 1 for s in shape):
            raise _Unsupported(f"cannot view {list(input.shape)} as {shape}")
        if input.pending == "shuffled" and len(shape) == 4 and shape == [1, input.data[0] * input.data[1], *input.shape[3:]]:
            return self.new("channel_shuffle", _T(input.ref, self._shape(input.ref)), groups=input.data[0])
        if input.pending is None and len(input.shape) == 4 and len(shape) == 5 and shape[0] == 1 and shape[3:] == list(input.shape[2:]):
            return _T(input.ref, tuple(shape), "grouped", (shape[1], shape[2]))
        if list(input.shape) == shape:
            return input
        made = self.g.nodes.get(input.ref) if input.pending is None else None
        if made is not None and made.op in ("reshape", "flatten"):
            # a view of a view: of what the first one viewed (the first is dropped when nothing else reads it)
            return self.view(_T(made.inputs[0], self._shape(made.inputs[0])), shape)
        if len(shape) == 2 and shape[0] == 1:
            return self.new("flatten", input)
        if shape[0] != 1:
            raise _Unsupported(f"view {list(input.shape)} -> {shape} moves the batch dimension")
        return self.new("reshape", input, shape=shape)

    def _shape(self, ref: str) -> tuple[int, ...]:
        return tuple(self.g.shape(ref))

    def flatten(self, input, start_dim=0, end_dim=-1):
        rank = len(input.shape)
        s, e = self._dim(int(start_dim), rank), self._dim(int(end_dim), rank)
        if s == 0:
            raise _Unsupported("flattening the batch dimension (use flatten(x, 1))")
        shape = list(input.shape[:s]) + [math.prod(input.shape[s : e + 1])] + list(input.shape[e + 1 :])
        return self.view(input, shape)

    def transpose(self, input, dim0, dim1):
        rank = len(input.shape)
        dims = sorted((self._dim(int(dim0), rank), self._dim(int(dim1), rank)))
        if input.pending == "grouped" and dims == [1, 2]:
            a, b = input.data
            return _T(input.ref, (1, b, a, *input.shape[3:]), "shuffled", (a, b))
        perm = list(range(rank))
        perm[dims[0]], perm[dims[1]] = dims[1], dims[0]
        out = [input.shape[d] for d in perm]
        moved = [d for d in perm if input.shape[d] != 1]
        if moved == sorted(moved):
            # a unit axis moves: the same element order (split attention's one group), a view
            return self.view(input, out)
        if 0 in dims:
            raise _Unsupported(f"transpose of dims {dims} of {list(input.shape)} (moves the batch dimension)")
        return self.new("transpose", input, perm=perm)  # DiCENet's dimension-wise convolutions

    def permute(self, input, *dims):
        if len(dims) == 1 and isinstance(dims[0], (list, tuple)):
            dims = tuple(dims[0])
        rank = len(input.shape)
        dims = [self._dim(int(d), rank) for d in dims]
        if dims == list(range(rank)):
            return input
        swapped = [i for i, d in enumerate(dims) if d != i]
        if len(swapped) == 2 and dims[swapped[0]] == swapped[1]:
            return self.transpose(input, *swapped)
        if dims[0] != 0:
            raise _Unsupported(f"permute {dims} (moves the batch dimension)")
        return self.new("transpose", input, perm=dims)

    def unsqueeze(self, input, dim):
        rank = len(input.shape) + 1
        d = self._dim(int(dim), rank)
        return self.view(input, [*input.shape[:d], 1, *input.shape[d:]])

    def squeeze(self, input, dim=None):
        rank = len(input.shape)
        dims = [d for d in range(rank) if input.shape[d] == 1] if dim is None else \
            [self._dim(int(d), rank) for d in (dim if isinstance(dim, (list, tuple)) else [dim])]
        return self.view(input, [s for d, s in enumerate(input.shape) if d not in dims or s != 1 or d == 0])

    def expand(self, input, *sizes):
        """``x.expand(...)``/``expand_as``: left to the element-wise op that reads it, which
        broadcasts (CBAM's channel gate over the map)."""
        if len(sizes) == 1 and isinstance(sizes[0], (list, tuple)):
            sizes = tuple(sizes[0])
        if len(sizes) != len(input.shape):
            raise _Unsupported(f"expand of {list(input.shape)} to {list(sizes)} (only to the same rank)")
        full = tuple(s if int(t) == -1 else int(t) for s, t in zip(input.shape, sizes))
        if any(s not in (1, t) for s, t in zip(input.shape, full)):
            raise _Unsupported(f"expand of {list(input.shape)} to {list(full)}: the shapes do not broadcast")
        return input if full == tuple(input.shape) else _T(input.ref, full, "expanded", (tuple(input.shape),))

    def expand_as(self, input, other):
        return self.expand(input, *other.shape)

    def stack(self, tensors, dim=0):
        tensors = list(tensors)
        rank = len(tensors[0].shape) + 1
        d = self._dim(int(dim), rank)
        return self.cat([self.unsqueeze(t, d) for t in tensors], d)

    def channel_shuffle(self, input, groups):
        return self.new("channel_shuffle", input, groups=int(groups))

    def identity(self, input, *args, **kwargs):
        return input

    def index_select(self, input, dim, index):
        """``torch.index_select`` by a constant index (a buffer: CondenseNet's selected channels) on
        axis 1 of an image or a ``[1, F]`` vector -> ``gather``."""
        import torch

        if not isinstance(input, _T) or not isinstance(index, torch.Tensor) or index.dim() != 1:
            raise _Unsupported("index_select by an index computed from the input (the IR's gather takes constant indices)")
        if index.is_meta:
            raise _Unsupported("index_select by an index on the meta device (its values are unknown: build the model "
                               "on the CPU)")
        rank = len(input.shape)
        if self._dim(int(dim), rank) != 1 or rank not in (2, 4):
            raise _Unsupported(f"index_select on axis {dim} of a rank-{rank} tensor (the IR's gather takes axis 1 of an "
                               "image or a [1, F] vector)")
        return self.new("gather", input, indices=[int(i) for i in index.tolist()], axis=1)

    def size(self, input, dim=None):
        import torch

        return torch.Size(input.shape) if dim is None else input.shape[self._dim(int(dim), len(input.shape))]

    # ------------------------------------------------ modules
    def module(self, m: "torch.nn.Module", args: tuple, kwargs: dict) -> Any:
        handler = _module_handlers().get(type(m))
        if handler is None:
            raise _Unsupported(f"unsupported module type {type(m).__module__}.{type(m).__qualname__}")
        return handler(self, m, *args, **kwargs)


def _pair_or_none(v: Any) -> list:
    if isinstance(v, (list, tuple)):
        return list(v) if len(v) == 2 else [v[0], v[0]]
    return [v, v]


# ---------------------------------------------------------------- dispatch tables
def _module_handlers() -> dict[type, Callable]:
    return _tables()[0]


@functools.lru_cache(maxsize=1)
def _tables() -> tuple[dict, dict, dict, dict]:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    C = _Converter

    def conv(c, m, x):
        if m.padding_mode != "zeros":
            raise _Unsupported(f"convolution padding_mode={m.padding_mode!r}")
        return c.conv2d(x, m.weight, m.bias, m.stride, m.padding, m.dilation, m.groups)

    def bn(c, m, x):
        if not m.track_running_stats:
            raise _Unsupported("batch norm without running statistics")
        return c.batch_norm(x, m.running_mean, m.running_var, m.weight, m.bias, False, m.momentum, m.eps)

    def avg(c, m, x):
        return c.avg_pool2d(x, m.kernel_size, m.stride, m.padding, m.ceil_mode, m.count_include_pad, m.divisor_override)

    def mx(c, m, x):
        return c.max_pool2d(x, m.kernel_size, m.stride, m.padding, m.dilation, m.ceil_mode, m.return_indices)

    def up(c, m, x):
        return c.interpolate(x, m.size, m.scale_factor, m.mode, m.align_corners)

    def flat(c, m, x):
        return c.flatten(x, m.start_dim, m.end_dim)

    modules: dict[type, Callable] = {
        nn.Conv2d: conv,
        nn.Conv3d: lambda c, m, x: c.conv3d(x, m.weight, m.bias, m.stride, m.padding, m.dilation, m.groups),
        nn.Linear: lambda c, m, x: c.linear(x, m.weight, m.bias),
        nn.BatchNorm2d: bn,
        nn.BatchNorm1d: bn,
        nn.InstanceNorm2d: lambda c, m, x: c.instance_norm(x, None, None, m.weight, m.bias,
                                                           not m.track_running_stats, eps=m.eps),
        nn.ReLU: lambda c, m, x: c.relu(x),
        nn.ReLU6: lambda c, m, x: c.relu6(x),
        nn.Hardtanh: lambda c, m, x: c.hardtanh(x, m.min_val, m.max_val),
        nn.Hardswish: lambda c, m, x: c.hardswish(x),
        nn.Hardsigmoid: lambda c, m, x: c.hardsigmoid(x),
        nn.Sigmoid: lambda c, m, x: c.sigmoid(x),
        nn.SiLU: lambda c, m, x: c.silu(x),
        nn.Tanh: lambda c, m, x: c.tanh(x),
        nn.LeakyReLU: lambda c, m, x: c.leaky_relu(x, m.negative_slope),
        nn.PReLU: lambda c, m, x: c.prelu(x, m.weight),
        nn.Softmax: lambda c, m, x: c.softmax(x, m.dim),
        nn.AvgPool2d: avg,
        nn.MaxPool2d: mx,
        nn.AdaptiveAvgPool2d: lambda c, m, x: c.adaptive_avg_pool2d(x, m.output_size),
        nn.AdaptiveMaxPool2d: lambda c, m, x: c.adaptive_max_pool2d(x, m.output_size, m.return_indices),
        nn.Upsample: up,
        nn.LocalResponseNorm: lambda c, m, x: c.local_response_norm(x, m.size, m.alpha, m.beta, m.k),
        nn.ZeroPad2d: lambda c, m, x: c.pad(x, m.padding, "constant", 0.0),
        nn.ConstantPad2d: lambda c, m, x: c.pad(x, m.padding, "constant", m.value),
        nn.Flatten: flat,
        nn.ChannelShuffle: lambda c, m, x: c.channel_shuffle(x, m.groups),
        nn.Identity: lambda c, m, x, *a, **k: x,
        nn.Dropout: lambda c, m, x: x,
        nn.Dropout2d: lambda c, m, x: x,
        nn.AlphaDropout: lambda c, m, x: x,
    }

    # Python-level functions and Tensor methods (fx), by object and by method name.
    functions: dict[Any, Callable] = {}

    def fn(targets, handler):
        for t in targets:
            if t is not None:  # a name missing in this torch version
                functions[t] = handler

    def T(name):  # torch.<name>, if this torch has it
        return getattr(torch, name, None)

    fn([F.conv2d, T("conv2d")], C.conv2d)
    fn([F.linear], C.linear)
    fn([F.batch_norm], C.batch_norm)
    fn([F.relu, T("relu"), F.relu_, T("relu_")], C.relu)
    fn([F.relu6], C.relu6)
    fn([F.hardtanh, F.hardtanh_], C.hardtanh)
    fn([T("clamp"), T("clip")], C.clamp)
    fn([F.sigmoid, T("sigmoid")], C.sigmoid)
    fn([F.tanh, T("tanh")], C.tanh)
    fn([F.silu], C.silu)
    fn([F.hardswish], C.hardswish)
    fn([F.hardsigmoid], C.hardsigmoid)
    fn([F.leaky_relu, F.leaky_relu_], C.leaky_relu)
    fn([F.prelu, T("prelu")], C.prelu)
    fn([F.softmax, T("softmax")], C.softmax)
    fn([operator.add, operator.iadd, T("add")], C.add)
    fn([operator.mul, operator.imul, T("mul")], C.mul)
    fn([operator.truediv, operator.itruediv, T("div")], C.div)
    fn([F.avg_pool2d, T("avg_pool2d")], C.avg_pool2d)
    fn([F.max_pool2d, T("max_pool2d")], C.max_pool2d)
    fn([F.adaptive_avg_pool2d, torch._C._nn.adaptive_avg_pool2d], C.adaptive_avg_pool2d)
    fn([F.adaptive_max_pool2d], C.adaptive_max_pool2d)
    fn([T("mean")], C.mean)
    fn([T("amax")], C.amax)
    fn([T("max")], C.max)
    fn([T("sum")], C.sum)
    fn([F.instance_norm], C.instance_norm)
    fn([F.local_response_norm], C.local_response_norm)
    fn([F.interpolate, F.upsample], C.interpolate)
    fn([F.pad], C.pad)
    fn([T("cat"), T("concat"), T("concatenate")], C.cat)
    fn([T("stack")], C.stack)
    fn([T("unsqueeze")], C.unsqueeze)
    fn([T("squeeze")], C.squeeze)
    fn([T("split")], C.split)
    fn([T("chunk")], C.chunk)
    fn([T("flatten")], C.flatten)
    fn([T("reshape")], C.view)
    fn([T("transpose")], C.transpose)
    fn([T("permute")], C.permute)
    fn([T("channel_shuffle"), F.channel_shuffle, T("native_channel_shuffle")], C.channel_shuffle)
    fn([T("index_select")], C.index_select)
    fn([torch.autograd.Variable], C.identity)  # CondenseNet wraps its index buffer so (a no-op since torch 0.4)
    fn([F.dropout, F.dropout2d, F.alpha_dropout, T("dropout")], C.identity)
    fn([operator.getitem], C.getitem)

    methods: dict[str, Callable] = {
        "relu": C.relu, "relu_": C.relu, "sigmoid": C.sigmoid, "sigmoid_": C.sigmoid, "tanh": C.tanh,
        "clamp": C.clamp, "clamp_": C.clamp, "clip": C.clamp, "softmax": C.softmax,
        "add": C.add, "add_": C.add, "__add__": C.add, "__radd__": C.add, "__iadd__": C.add,
        "mul": C.mul, "mul_": C.mul, "__mul__": C.mul, "__rmul__": C.mul, "__imul__": C.mul,
        "div": C.div, "div_": C.div, "__truediv__": C.div, "__itruediv__": C.div,
        "mean": C.mean, "amax": C.amax, "max": C.max, "sum": C.sum, "view": C.view, "reshape": C.view, "flatten": C.flatten,
        "transpose": C.transpose, "permute": C.permute, "split": C.split, "chunk": C.chunk,
        "contiguous": C.identity, "clone": C.identity, "size": C.size, "unsqueeze": C.unsqueeze,
        "squeeze": C.squeeze, "expand": C.expand, "expand_as": C.expand_as,
        "dim": lambda c, x: len(x.shape), "numel": lambda c, x: math.prod(x.shape),
    }

    # ATen operators (torch.export's graph), by overload packet name.
    def aten_bn(c, input, weight, bias, running_mean, running_var, training, momentum, eps, *rest):
        return c.batch_norm(input, running_mean, running_var, weight, bias, training, momentum, eps)

    def aten_bn_legit(c, input, weight, bias, running_mean, running_var, momentum, eps):
        return (c.batch_norm(input, running_mean, running_var, weight, bias, False, momentum, eps), None, None)

    def aten_upsample(c, input, output_size=None, scale_factors=None):
        return c.interpolate(input, output_size, scale_factors, "nearest")

    def aten_upsample_bilinear(c, input, output_size=None, align_corners=False, scale_factors=None):
        return c.interpolate(input, output_size, scale_factors, "bilinear", align_corners)

    def aten_max_pool_idx(c, input, *args):
        return (c.max_pool2d(input, *args), None)

    aten: dict[str, Callable] = {
        "conv2d": C.conv2d, "linear": C.linear, "batch_norm": aten_bn,
        "_native_batch_norm_legit_no_training": aten_bn_legit,
        "relu": C.relu, "relu_": C.relu, "relu6": C.relu6, "hardtanh": C.hardtanh, "hardtanh_": C.hardtanh,
        "clamp": C.clamp, "clamp_": C.clamp, "sigmoid": C.sigmoid, "sigmoid_": C.sigmoid, "tanh": C.tanh,
        "tanh_": C.tanh, "silu": C.silu, "silu_": C.silu, "hardswish": C.hardswish, "hardswish_": C.hardswish,
        "hardsigmoid": C.hardsigmoid, "hardsigmoid_": C.hardsigmoid, "leaky_relu": C.leaky_relu,
        "leaky_relu_": C.leaky_relu, "prelu": C.prelu, "_prelu_kernel": C.prelu,
        "softmax": C.softmax, "_softmax": C.softmax,
        "add": C.add, "add_": C.add, "mul": C.mul, "mul_": C.mul, "div": C.div, "div_": C.div,
        "avg_pool2d": C.avg_pool2d, "max_pool2d": C.max_pool2d, "max_pool2d_with_indices": aten_max_pool_idx,
        "adaptive_avg_pool2d": C.adaptive_avg_pool2d, "_adaptive_avg_pool2d": C.adaptive_avg_pool2d,
        "mean": C.mean, "amax": C.amax, "sum": C.sum, "instance_norm": C.instance_norm,
        "upsample_nearest2d": aten_upsample, "upsample_bilinear2d": aten_upsample_bilinear, "pad": C.pad, "constant_pad_nd": C.pad,
        "slice": C.slice, "cat": C.cat, "concat": C.cat, "split": C.split, "split_with_sizes": C.split,
        "chunk": C.chunk, "view": C.view, "reshape": C.view, "_unsafe_view": C.view, "flatten": C.flatten,
        "transpose": C.transpose, "permute": C.permute, "channel_shuffle": C.channel_shuffle,
        "native_channel_shuffle": C.channel_shuffle, "index_select": C.index_select, "dropout": C.identity,
        "clone": C.identity, "contiguous": C.identity, "alias": C.identity, "detach": C.identity,
        "unsqueeze": C.unsqueeze, "squeeze": C.squeeze, "expand": C.expand, "stack": C.stack,
    }
    return modules, functions, methods, aten


# ---------------------------------------------------------------- tracing
def _module_path(node: Any) -> str:
    stack = node.meta.get("nn_module_stack") or {}
    if not stack:
        return ""
    path = list(stack.values())[-1][0]
    return path if isinstance(path, str) else ""


def _map_args(value: Any, env: dict) -> Any:
    import torch.fx

    if isinstance(value, torch.fx.Node):
        return env[value]
    if isinstance(value, (list, tuple)):
        mapped = [_map_args(v, env) for v in value]
        return type(value)(mapped) if not hasattr(value, "_fields") else type(value)(*mapped)
    if isinstance(value, dict):
        return {k: _map_args(v, env) for k, v in value.items()}
    if isinstance(value, slice):
        return slice(_map_args(value.start, env), _map_args(value.stop, env), _map_args(value.step, env))
    return value


def _has_tensor(value: Any) -> bool:
    if isinstance(value, _T):
        return True
    if isinstance(value, (list, tuple)):
        return any(_has_tensor(v) for v in value)
    if isinstance(value, dict):
        return any(_has_tensor(v) for v in value.values())
    return False


def _flat_outputs(value: Any) -> list[Any]:
    if isinstance(value, (list, tuple)):
        return [o for v in value for o in _flat_outputs(v)]
    if isinstance(value, dict):
        return [o for v in value.values() for o in _flat_outputs(v)]
    return [value]


def _target_name(target: Any) -> str:
    return getattr(target, "__name__", None) or str(target)


def _interpret(conv: _Converter, graph: Any, root: Any, inputs: dict[str, Any], tracer: str) -> list[str]:
    """Walk a traced graph; return the IR references of its outputs."""
    _, functions, methods, aten = _tables()
    env: dict = {}
    outputs: list[str] = []
    for node in graph.nodes:
        path = _module_path(node) if node.op != "call_module" else str(node.target)
        where = f"{tracer} node {node.name!r}" + (f" ({path})" if path else "")
        with node_errors(conv.model, where, lambda: f"cannot map {node.op} {_target_name(node.target)}"):
            if node.op == "placeholder":
                if node.name not in inputs:
                    raise _Unsupported("an input the importer was not given (only one tensor input is supported)")
                env[node] = inputs[node.name]
                continue
            if node.op == "get_attr":
                obj = root
                for part in str(node.target).split("."):
                    obj = getattr(obj, part)
                env[node] = obj
                continue
            if node.op == "output":
                outs = _flat_outputs(_map_args(node.args[0], env))
                outputs = [conv.t(o) for o in outs if isinstance(o, _T)]
                if len(outputs) != len([o for o in outs if o is not None]):
                    raise _Unsupported("the model returns something other than tensors")
                continue
            args = _map_args(node.args, env)
            kwargs = _map_args(node.kwargs, env)
            with conv.g.block(path) if path else contextlib.nullcontext():
                if node.op == "call_module":
                    env[node] = conv.module(root.get_submodule(str(node.target)), args, kwargs)
                elif node.op == "call_method":
                    handler = methods.get(str(node.target))
                    if handler is None:
                        raise _Unsupported(f"unsupported tensor method .{node.target}()")
                    env[node] = handler(conv, *args, **kwargs)
                elif node.op == "call_function":
                    env[node] = _call_function(conv, node.target, args, kwargs, functions, aten)
                else:  # pragma: no cover - fx has no other node kinds
                    raise _Unsupported(f"unsupported fx node kind {node.op!r}")
    return outputs


def _call_function(conv: _Converter, target: Any, args: tuple, kwargs: dict, functions: dict, aten: dict) -> Any:
    import torch

    if isinstance(target, torch._ops.OpOverload):
        name = target.overloadpacket.__name__
        if target.namespace != "aten":
            raise _Unsupported(f"unsupported operator {target.name()}")
        if name == "sym_size":
            return conv.size(*args)
        handler = aten.get(name)
        if handler is None:
            raise _Unsupported(f"unsupported ATen operator {target.name()}")
        if "self" in kwargs:
            args = (kwargs.pop("self"), *args)
        return handler(conv, *args, **kwargs)
    plain = getattr(target, "__module__", None) in ("_operator", "operator", "math", "builtins")
    if plain and not _has_tensor((args, kwargs)):
        return target(*args, **kwargs)  # arithmetic on sizes: x.size(1) // 4
    handler = functions.get(target)
    if handler is not None:
        return handler(conv, *args, **kwargs)
    if target is getattr:
        obj, attr = args
        if isinstance(obj, _T):
            if attr == "shape":
                return conv.size(obj)
            if attr in ("dtype", "device"):
                raise _Unsupported(f"tensor attribute .{attr}")
        return getattr(obj, attr)
    raise _Unsupported(f"unsupported function {getattr(target, '__module__', '') or ''}.{_target_name(target)}")


def _trace(module: "torch.nn.Module", example: "torch.Tensor", model: str) -> tuple[Any, dict, str]:
    """Trace with fx; fall back to torch.export. Returns (graph, placeholder values, tracer)."""
    import torch
    import torch.fx

    try:
        gm = torch.fx.symbolic_trace(module)
        placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
        return gm.graph, {placeholders[0].name: None} if placeholders else {}, "fx"
    except Exception as fx_error:  # fx raises many types (TraceError, TypeError ...): all mean "cannot trace"
        fx_msg = f"{type(fx_error).__name__}: {str(fx_error).splitlines()[0] if str(fx_error) else ''}"
    try:
        ep = torch.export.export(module, (example,), strict=False)
    except Exception as e:
        msg = str(e).splitlines()[0] if str(e) else ""
        raise UnsupportedModelError(
            f"{model}: neither torch.fx ({fx_msg}) nor torch.export ({type(e).__name__}: {msg}) can trace it"
        ) from e
    state = dict(module.named_parameters(remove_duplicate=False))
    state.update(dict(module.named_buffers(remove_duplicate=False)))
    sig = ep.graph_signature
    values: dict[str, Any] = {}
    for name, fqn in {**sig.inputs_to_parameters, **sig.inputs_to_buffers}.items():
        values[name] = state[fqn]
    for name, fqn in sig.inputs_to_lifted_tensor_constants.items():
        values[name] = ep.constants[fqn]
    user = list(sig.user_inputs)
    if len(user) != 1:
        raise UnsupportedModelError(f"{model}: expected one tensor input, the exported graph has {len(user)}")
    values[user[0]] = None
    return ep.graph, values, "export"


def import_module(
    module: "torch.nn.Module",
    input_shape: tuple[int, ...] | list[int] = (1, 3, 224, 224),
    name: str | None = None,
    source: str = SOURCE,
    meta: dict | None = None,
) -> Graph:
    """Trace ``module`` (put in eval mode) on a batch-1 input of ``input_shape`` into an IR graph.

    The graph's meta holds ``tracer`` ("fx" or "export") besides ``meta``. Raises
    :class:`UnsupportedModelError` (one line, naming the trace node and module path) for
    constructs the IR cannot express.
    """
    import torch

    name = name or type(module).__name__
    shape = [int(d) for d in input_shape]
    if not shape or shape[0] != 1:
        raise UnsupportedModelError(f"{name}: input_shape must start with batch 1, got {list(input_shape)}")
    module.eval()
    first = next(iter(module.parameters()), None)
    device = first.device if first is not None else torch.device("cpu")
    example = torch.zeros(shape, device=device)
    graph, values, tracer = _trace(module, example, name)
    g = Graph(name=name, source=source, meta={**dict(meta or {}), "tracer": tracer})
    x = g.input(shape)
    inputs = {k: (_T(x, tuple(shape)) if v is None else v) for k, v in values.items()}
    conv = _Converter(g, name)
    outputs = _interpret(conv, graph, module, inputs, tracer)
    if not outputs:
        raise UnsupportedModelError(f"{name}: the model has no tensor output")
    return finish(g, name, outputs)


# ---------------------------------------------------------------- pytorchcv
def _pytorchcv_models() -> dict[str, Any]:
    from pytorchcv.model_provider import _models  # the provider's own name -> constructor table

    return _models


def build_pytorchcv(name: str, device: str = "meta", **kwargs: Any) -> "torch.nn.Module":
    """``pytorchcv.model_provider.get_model(name, pretrained=False, **kwargs)``, in eval mode, built
    on ``device`` (``meta`` by default: shapes only, no memory, no weight initialisation);
    ``kwargs`` go to the model's constructor (``in_channels``, ``num_classes``, ``in_size``)."""
    import numpy
    import torch

    if name not in _pytorchcv_models():
        raise ValueError(f"models: unknown pytorchcv model {name!r}")
    # pytorchcv 0.0.67's RegNet code still uses ``np.int``, removed in NumPy 1.24; restore
    # the alias (it meant the builtin int) only where it is missing.
    if not hasattr(numpy, "int"):
        numpy.int = int
    from pytorchcv.model_provider import get_model

    with torch.device(device):
        model = get_model(name, pretrained=False, **kwargs)
    return model.eval()


@functools.lru_cache(maxsize=None)
def _stated_weight_counts(module: str) -> dict[str, int]:
    """The parameter counts a pytorchcv model module states for its models: its ``_test``
    asserts ``model != <name> or weight_count == <count>`` (read from the source with ``ast``)."""
    import ast
    import importlib
    import inspect

    out: dict[str, int] = {}
    tree = ast.parse(inspect.getsource(importlib.import_module(module)))
    for node in ast.walk(tree):
        if not (isinstance(node, ast.BoolOp) and isinstance(node.op, ast.Or) and len(node.values) == 2):
            continue
        a, b = node.values
        if (isinstance(a, ast.Compare) and isinstance(a.ops[0], ast.NotEq) and isinstance(a.comparators[0], ast.Name)
                and isinstance(b, ast.Compare) and isinstance(b.ops[0], ast.Eq) and isinstance(b.left, ast.Name)
                and b.left.id == "weight_count" and isinstance(b.comparators[0], ast.Constant)):
            out[a.comparators[0].id] = int(b.comparators[0].value)
    return out


def pytorchcv_weight_count(name: str) -> int | None:
    """The parameter count pytorchcv itself states for model ``name`` (its model module's test
    metadata), or None when it states none."""
    fn = _pytorchcv_models().get(name)
    if fn is None:
        return None
    return _stated_weight_counts(fn.__module__).get(getattr(fn, "__name__", name))


def import_pytorchcv(name: str, input_size: int | tuple[int, int] | None = 224) -> Graph:
    """Import pytorchcv model ``name`` (pretrained=False); source "pytorch", name = the model name.

    The input is ``1 x 3 x input_size x input_size``: 224 by default, the resolution at which
    the USC dataset measured all 102 CNNs (its FLOPS column matches the IR at 224, also for
    EfficientNet-Edge medium/large, whose pytorchcv ``in_size`` is 240/300). ``None`` takes
    the model's own ``in_size`` (e.g. 32 for the ``*_cifar10`` models).
    """
    model = build_pytorchcv(name)
    if input_size is None:
        input_size = getattr(model, "in_size", (224, 224))
    h, w = (input_size, input_size) if isinstance(input_size, int) else input_size
    channels = getattr(model, "in_channels", 3)
    channels = channels if isinstance(channels, int) else 3
    return import_module(model, (1, channels, h, w), name=name, source=SOURCE, meta={"pytorchcv": name})


# ---------------------------------------------------------------- the source
@dataclass
class PytorchImportConfig:
    models: list[str] = field(default_factory=lambda: list(DEFAULT_MODELS))  # pytorchcv model names


def _as_config(cfg: Any) -> PytorchImportConfig:
    return coerce(PytorchImportConfig, cfg)


def validate_config(cfg: Any) -> PytorchImportConfig:
    """The checked section (types: the schema, through :func:`coerce`); ValueError("<field>: <what
    is wrong>") on the first fault."""
    cfg = _as_config(cfg)
    known = _pytorchcv_models()
    seen: set[str] = set()
    for k, m in enumerate(cfg.models):
        if m not in known:
            raise ValueError(f"models[{k}]: unknown pytorchcv model {m!r}")
        if m in seen:
            raise ValueError(f"models[{k}]: {m!r} listed twice")
        seen.add(m)
    return cfg


def _generate(cfg: Any, seed: int) -> Iterator[Graph]:
    cfg = validate_config(cfg)
    for m in cfg.models:  # deterministic; the seed plays no part
        yield import_pytorchcv(m)


PytorchImportSource = register_source(SOURCE, PytorchImportConfig, validate_config, _generate,
                                      "Real-world CNNs imported from pytorchcv (by name), in the configured order.")
