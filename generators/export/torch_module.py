"""IR -> PyTorch: an ``nn.Module`` built from real ``torch.nn`` layers, TorchScript and lite files.

The module is a ``torch.fx.GraphModule`` whose generated ``forward`` calls one submodule per
IR node in the IR's topological order (``Conv2d``, ``BatchNorm2d``, ``Linear``, ``ReLU``...),
so ``torch.profiler`` shows the aten operators of each node, eager-mode quantization can fuse
and swap the layers, and ``torch.jit.trace`` records one straight-line graph. Parameters come
from :func:`generators.export.weights.graph_weights`, so the module computes the same
function as every other export of the network.

Artifacts:

- ``export_torchscript(graph, path, precision, engine)``: a traced TorchScript file (``.pt``).
- ``export_lite(graph, path, precision, engine)``: a lite-interpreter file (``.ptl``), the
  format PyTorch Mobile loads; ``optimize_for_mobile`` is not applied (this PyTorch build has
  no XNNPACK, see NOTES.md).

Precisions: ``fp32``, and ``int8`` = eager-mode static post-training quantization: QuantStub /
DeQuantStub placed per tensor, conv+bn(+relu), conv+relu, linear+relu and bn+relu fused,
observers calibrated on ``example_input(graph, sample=k)`` for k < ``calibration_samples``,
then converted, for the ``x86`` engine (default) or ``qnnpack`` (ARM). Operators without a
quantized CPU kernel stay float, between a DeQuantStub and a QuantStub:
:data:`FLOAT_IN_INT8` lists them (swish/SiLU, softmax, batch norm on ``[1, F]`` tensors, GELU,
matmul of two activations, layer norm over an axis that is not the last, the position embedding
and class token: a float parameter added or concatenated; the max and sum reductions, instance
norm, local response norm, the division of two tensors and a padding of the channels).
With qnnpack each relu6/clip reads a contiguous copy of its input (one ``aten::contiguous``),
working around a wrong-result bug of QNNPACK's quantized clamp on channels-last tensors;
PReLU slopes are observed together with 1.0 (see ``_PReLUSlopeObserver``).
``fp16`` is refused: half precision on the host CPU is not a meaningful scenario.

Each export returns a small dict of facts about the artifact (path, format, precision, engine,
op counts of the TorchScript graph, parameter count, output shapes, torch version...).
"""
from __future__ import annotations

import hashlib
import operator
import re
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch
import torch.fx as fx
from torch import nn
from torch.ao.nn.quantized import FloatFunctional
from torch.ao.quantization import DeQuantStub, MinMaxObserver, QuantStub

from foundation.atomic import atomic_path
from ..ir import Graph, Node, split_ref
from .names import unique_name
from .weights import example_input, graph_weights

PRECISIONS = ("fp32", "int8")
ENGINES = ("x86", "qnnpack")
FORMATS = {"torchscript": ".pt", "torchscript-lite": ".ptl"}
DEFAULT_CALIBRATION_SAMPLES = 8


class ExportError(ValueError):
    """The graph or the options cannot be exported; the message is one line naming the node/format."""


# ---------------------------------------------------------------- small modules for plumbing ops
class Nary(nn.Module):
    """Sum or product of n >= 2 tensors (broadcasting), left to right; one FloatFunctional per
    binary step so int8 works (e.g. residual adds, the gate of a squeeze-and-excite)."""

    def __init__(self, kind: str, n: int):
        super().__init__()
        self.kind = kind  # "add" or "mul": the FloatFunctional method
        self.ops = nn.ModuleList([FloatFunctional() for _ in range(n - 1)])

    def forward(self, xs: list[torch.Tensor]) -> torch.Tensor:
        y = xs[0]
        for i, f in enumerate(self.ops):
            y = getattr(f, self.kind)(y, xs[i + 1])
        return y


class Concat(nn.Module):
    def __init__(self, axis: int):
        super().__init__()
        self.axis = axis
        self.op = FloatFunctional()

    def forward(self, xs: list[torch.Tensor]) -> torch.Tensor:
        return self.op.cat(xs, dim=self.axis)


class Split(nn.Module):
    def __init__(self, sections: list[int], axis: int):
        super().__init__()
        self.sections = list(sections)
        self.axis = axis

    def forward(self, x: torch.Tensor) -> list[torch.Tensor]:
        return list(torch.split(x, self.sections, dim=self.axis))


class ContiguousInput(nn.Module):
    """Runs ``inner`` on a contiguous (NCHW) copy of its input.

    Works around a PyTorch bug seen with torch 2.13: with the QNNPACK engine, quantized
    ReLU6 / hardtanh / clamp return wrong values (max error 3.1 on a [-6, 6] input) for a
    channels-last input, which is what QNNPACK's quantized conv returns; on a contiguous
    input they are exact.
    """

    def __init__(self, inner: nn.Module):
        super().__init__()
        self.inner = inner

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.inner(x.contiguous())


class Shift(nn.Module):
    """Addition of a constant scalar (a quantized add_scalar in int8 models)."""

    def __init__(self, value: float):
        super().__init__()
        self.value = float(value)
        self.op = FloatFunctional()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.op.add_scalar(x, self.value)


class Scale(nn.Module):
    """Multiplication by a constant scalar (a quantized mul_scalar in int8 models)."""

    def __init__(self, factor: float):
        super().__init__()
        self.factor = float(factor)
        self.op = FloatFunctional()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.op.mul_scalar(x, self.factor)


class Crop(nn.Module):
    """Removes border rows/columns: one ``narrow`` per cropped spatial dimension."""

    def __init__(self, crops: list[int], in_shape: list[int]):
        super().__init__()
        t, b, l, r = crops
        self.cuts = [(dim, start, size - start - end)
                     for dim, start, end, size in ((2, t, b, in_shape[2]), (3, l, r, in_shape[3])) if start or end]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for dim, start, length in self.cuts:
            x = x.narrow(dim, start, length)
        return x


class Reshape(nn.Module):
    def __init__(self, shape: list[int]):
        super().__init__()
        self.shape = list(shape)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.reshape(self.shape)


class Permute(nn.Module):
    def __init__(self, perm: list[int]):
        super().__init__()
        self.perm = list(perm)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.permute(self.perm)


class MatMul(nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.matmul(a, b)


class Div(nn.Module):
    """Element-wise quotient of two tensors (no quantized kernel: float in int8 models)."""

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.div(a, b)


class IndexSelect(nn.Module):
    """``torch.index_select`` of constant indices along one axis, the indices a buffer (as
    CondenseNet keeps them): a copy that works on quantized tensors too."""

    def __init__(self, indices: list[int], axis: int):
        super().__init__()
        self.axis = axis
        self.register_buffer("index", torch.tensor(indices, dtype=torch.int64))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.index_select(x, self.axis, self.index)


class Reduce(nn.Module):
    """A reduction over one axis: ``torch.mean``, ``torch.amax`` or ``torch.sum``."""

    def __init__(self, fn: str, axis: int, keepdim: bool):
        super().__init__()
        self.fn, self.axis, self.keepdim = fn, axis, keepdim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return getattr(torch, self.fn)(x, self.axis, keepdim=self.keepdim)


class AxisLayerNorm(nn.LayerNorm):
    """Layer norm over one axis that is not the last (timm's ``LayerNorm2d`` for axis 1 of NCHW):
    the axis is permuted last, normalised, and permuted back."""

    def __init__(self, channels: int, eps: float, axis: int, rank: int):
        super().__init__(channels, eps=eps)
        self.perm = [d for d in range(rank) if d != axis] + [axis]
        self.back = [self.perm.index(d) for d in range(rank)]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(x.permute(self.perm)).permute(self.back)


class PosEmbed(nn.Module):
    """Adds a learned tensor of the input's shape (timm's ``x + self.pos_embed``)."""

    def __init__(self, shape: list[int]):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(shape))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.weight


class ClsToken(nn.Module):
    """Prepends a learned ``[1, 1, C]`` token to the tokens ``[1, N, C]`` (batch 1, as the IR)."""

    def __init__(self, channels: int):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(1, 1, channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([self.weight, x], dim=1)


# ---------------------------------------------------------------- the operator table
@dataclass(frozen=True)
class TorchOp:
    """How one IR operator becomes a PyTorch module.

    ``aten``: the operator kind the traced fp32 TorchScript graph shows for it (``n_aten``
    of them per node); ``int8``: ``"q"`` runs on quantized tensors, ``"f"`` stays float in
    int8 models, ``"any"`` follows its input (layout-only operators), or a function of the
    node giving one of those.
    """

    build: Callable[[Node, list[list[int]]], nn.Module]
    aten: str
    int8: str | Callable[[Node], str] = "q"
    variadic: bool = False  # the module takes the list of inputs as one argument
    n_aten: Callable[[Node], int] = lambda node: 1
    # aten operators the node shows beside ``n_aten`` of ``aten`` (AxisLayerNorm's permutes)
    extra_aten: Callable[[Node], dict[str, int]] = lambda node: {}
    # QNNPACK runs it with its quantized clamp kernel, which needs a contiguous input (ContiguousInput)
    qnnpack_contiguous: bool = False


def _conv(node: Node, ins: list[list[int]]) -> nn.Module:
    a = node.attrs
    return nn.Conv2d(
        ins[0][1], a["out_channels"], tuple(a["kernel"]), stride=tuple(a["stride"]), padding=tuple(a["padding"]),
        dilation=tuple(a["dilation"]), groups=a["groups"], bias=a["bias"],
    )


def _bn(node: Node, ins: list[list[int]]) -> nn.Module:
    cls = nn.BatchNorm2d if len(ins[0]) == 4 else nn.BatchNorm1d
    return cls(ins[0][1], eps=node.attrs["eps"])


def _pad(node: Node, ins: list[list[int]]) -> nn.Module:
    t, b, l, r, *channels = node.attrs["pads"]
    if channels:  # ConstantPad3d pads the last three axes of a 4-D tensor: C, H, W
        return nn.ConstantPad3d((l, r, t, b, *channels), float(node.attrs["value"]))
    return nn.ConstantPad2d((l, r, t, b), float(node.attrs["value"]))


def _axis(node: Node, ins: list[list[int]]) -> int:
    return node.attrs["axis"] % len(ins[0])


def _last_axis(node: Node) -> bool:
    return node.attrs["axis"] % len(node.shape) == len(node.shape) - 1


def _layernorm(node: Node, ins: list[list[int]]) -> nn.Module:
    ax, eps = _axis(node, ins), node.attrs["eps"]
    if _last_axis(node):
        return nn.LayerNorm(ins[0][ax], eps=eps)
    return AxisLayerNorm(ins[0][ax], eps, ax, len(ins[0]))


#: The aten operators of one nn.LocalResponseNorm beside its avg_pool3d (traced, torch 2.13).
LRN_ATEN = {"aten::mul": 2, "aten::view": 2, "aten::pad": 1, "aten::squeeze": 1, "aten::add": 1, "aten::pow": 1,
            "aten::div": 1, "aten::size": 4}


#: IR operator -> how it becomes a module. Adding an operator is one ``register_torch_op`` call.
TORCH_OPS: dict[str, TorchOp] = {
    "conv2d": TorchOp(_conv, "aten::_convolution"),
    "fc": TorchOp(lambda n, i: nn.Linear(i[0][-1], n.attrs["out_features"], bias=n.attrs["bias"]), "aten::linear"),
    # int8: BatchNorm1d (on [1, F]) has no quantized kernel and stays float
    "batchnorm": TorchOp(_bn, "aten::batch_norm", int8=lambda n: "q" if len(n.shape) == 4 else "f"),
    "relu": TorchOp(lambda n, i: nn.ReLU(), "aten::relu"),
    "relu6": TorchOp(lambda n, i: nn.ReLU6(), "aten::hardtanh", qnnpack_contiguous=True),
    "hswish": TorchOp(lambda n, i: nn.Hardswish(), "aten::hardswish"),
    "hsigmoid": TorchOp(lambda n, i: nn.Hardsigmoid(), "aten::hardsigmoid"),
    "sigmoid": TorchOp(lambda n, i: nn.Sigmoid(), "aten::sigmoid"),
    "swish": TorchOp(lambda n, i: nn.SiLU(), "aten::silu", int8="f"),
    "tanh": TorchOp(lambda n, i: nn.Tanh(), "aten::tanh"),
    "leaky_relu": TorchOp(lambda n, i: nn.LeakyReLU(n.attrs["alpha"]), "aten::leaky_relu"),
    "prelu": TorchOp(lambda n, i: nn.PReLU(n.attrs["num_parameters"]), "aten::prelu"),
    "add": TorchOp(lambda n, i: Nary("add", len(i)), "aten::add", variadic=True, n_aten=lambda n: len(n.inputs) - 1),
    "mul": TorchOp(lambda n, i: Nary("mul", len(i)), "aten::mul", variadic=True, n_aten=lambda n: len(n.inputs) - 1),
    "div": TorchOp(lambda n, i: Div(), "aten::div", int8="f"),
    "avgpool": TorchOp(
        lambda n, i: nn.AvgPool2d(
            tuple(n.attrs["kernel"]), tuple(n.attrs["stride"]), tuple(n.attrs["padding"]),
            ceil_mode=n.attrs["ceil_mode"], count_include_pad=n.attrs["count_include_pad"],
        ),
        "aten::avg_pool2d",
    ),
    "maxpool": TorchOp(
        lambda n, i: nn.MaxPool2d(
            tuple(n.attrs["kernel"]), tuple(n.attrs["stride"]), tuple(n.attrs["padding"]), ceil_mode=n.attrs["ceil_mode"]
        ),
        "aten::max_pool2d",
        int8="any",
    ),
    "scale": TorchOp(lambda n, i: Scale(n.attrs["factor"]), "aten::mul"),
    "shift": TorchOp(lambda n, i: Shift(n.attrs["value"]), "aten::add"),
    "clip": TorchOp(lambda n, i: nn.Hardtanh(n.attrs["min"], n.attrs["max"]), "aten::hardtanh", qnnpack_contiguous=True),
    "crop": TorchOp(
        lambda n, i: Crop(n.attrs["crops"], i[0]), "aten::narrow", int8="any",
        n_aten=lambda n: int(bool(n.attrs["crops"][0] or n.attrs["crops"][1])) + int(bool(n.attrs["crops"][2] or n.attrs["crops"][3])),
    ),
    "upsample": TorchOp(
        lambda n, i: nn.Upsample(scale_factor=tuple(float(v) for v in n.attrs["scale"]), mode=n.attrs["mode"])
        if n.attrs["mode"] == "nearest" else
        nn.Upsample(scale_factor=tuple(float(v) for v in n.attrs["scale"]), mode="bilinear",
                    align_corners=n.attrs["mode"] == "bilinear_corners"),
        "aten::upsample_nearest2d", int8="any", n_aten=lambda n: int(n.attrs["mode"] == "nearest"),
        extra_aten=lambda n: {} if n.attrs["mode"] == "nearest" else {"aten::upsample_bilinear2d": 1},
    ),
    "resize": TorchOp(lambda n, i: nn.Upsample(size=tuple(n.attrs["size"]), mode="nearest"), "aten::upsample_nearest2d",
                      int8="any"),
    "global_avgpool": TorchOp(lambda n, i: nn.AdaptiveAvgPool2d(1), "aten::adaptive_avg_pool2d"),
    "concat": TorchOp(lambda n, i: Concat(_axis(n, i)), "aten::cat", variadic=True),
    "split": TorchOp(lambda n, i: Split(n.attrs["sections"], _axis(n, i)), "aten::split_with_sizes", int8="any"),
    "channel_shuffle": TorchOp(lambda n, i: nn.ChannelShuffle(n.attrs["groups"]), "aten::channel_shuffle", int8="any"),
    "gather": TorchOp(lambda n, i: IndexSelect(n.attrs["indices"], _axis(n, i)), "aten::index_select", int8="any"),
    "pad": TorchOp(_pad, "aten::pad", int8=lambda n: "any" if len(n.attrs["pads"]) == 4 else "f"),
    "reshape": TorchOp(lambda n, i: Reshape(n.attrs["shape"]), "aten::reshape", int8="any"),
    "flatten": TorchOp(lambda n, i: nn.Flatten(1), "aten::flatten", int8="any"),
    "softmax": TorchOp(lambda n, i: nn.Softmax(_axis(n, i)), "aten::softmax", int8="f"),
    # transformers; int8: nn.LayerNorm becomes a quantized LayerNorm, AxisLayerNorm, GELU and
    # matmul of two activations stay float
    "layernorm": TorchOp(_layernorm, "aten::layer_norm", int8=lambda n: "q" if _last_axis(n) else "f",
                         extra_aten=lambda n: {} if _last_axis(n) else {"aten::permute": 2}),
    "instancenorm": TorchOp(lambda n, i: nn.InstanceNorm2d(i[0][1], eps=n.attrs["eps"], affine=True),
                            "aten::instance_norm", int8="f"),
    "gelu": TorchOp(lambda n, i: nn.GELU(approximate=n.attrs["approximate"]), "aten::gelu", int8="f"),
    # nn.LocalResponseNorm is a composite: squares, a window average over the channels (an
    # avg_pool3d of a [1, 1, C, H, W] view), the power and the division; no quantized kernel
    "lrn": TorchOp(lambda n, i: nn.LocalResponseNorm(n.attrs["size"], n.attrs["alpha"], n.attrs["beta"], n.attrs["bias"]),
                   "aten::avg_pool3d", int8="f", extra_aten=lambda n: dict(LRN_ATEN)),
    "matmul": TorchOp(lambda n, i: MatMul(), "aten::matmul", int8="f"),
    "transpose": TorchOp(lambda n, i: Permute(n.attrs["perm"]), "aten::permute", int8="any"),
    "mean": TorchOp(lambda n, i: Reduce("mean", _axis(n, i), n.attrs["keepdim"]), "aten::mean", int8="any"),
    "reduce_max": TorchOp(lambda n, i: Reduce("amax", _axis(n, i), n.attrs["keepdim"]), "aten::amax", int8="f"),
    "reduce_sum": TorchOp(lambda n, i: Reduce("sum", _axis(n, i), n.attrs["keepdim"]), "aten::sum", int8="f"),
    # learned constant tensors; int8: eager mode has no quantized add or cat of a float parameter
    "pos_embed": TorchOp(lambda n, i: PosEmbed(i[0]), "aten::add", int8="f"),
    "cls_token": TorchOp(lambda n, i: ClsToken(i[0][-1]), "aten::cat", int8="f"),
}



def register_torch_op(op: str, spec: TorchOp) -> TorchOp:
    """Teach the PyTorch exporter one more IR operator."""
    if op in TORCH_OPS:
        raise ValueError(f"PyTorch lowering of {op!r} registered twice")
    TORCH_OPS[op] = spec
    return spec


#: IR operators computed in float inside int8 models (no quantized CPU kernel in PyTorch):
#: they get a DeQuantStub before and a QuantStub after. batchnorm is float only on
#: ``[1, F]`` tensors (BatchNorm1d); on feature maps it is fused into the conv or quantized.
FLOAT_IN_INT8 = ("swish", "softmax", "batchnorm (rank 2, BatchNorm1d)", "gelu", "matmul",
                 "layernorm (not over the last axis)", "pos_embed", "cls_token", "reduce_max", "reduce_sum",
                 "instancenorm", "lrn", "div", "pad (of the channels)")


#: Operators that QNNPACK runs with its clamp kernel, which needs a contiguous input (see ContiguousInput).
QNNPACK_CLAMP_OPS = tuple(op for op, spec in TORCH_OPS.items() if spec.qnnpack_contiguous)


def aten_op(op: str) -> str:
    """The aten operator kind that one IR operator shows as in the traced fp32 graph."""
    return TORCH_OPS[op].aten


def expected_aten_counts(graph: Graph) -> dict[str, int]:
    """Aten operator counts the traced fp32 TorchScript graph of ``graph`` must have."""
    counts: dict[str, int] = {}
    for node in graph.nodes.values():
        if node.op == "input":
            continue
        spec = _spec(node, "torchscript")
        counts[spec.aten] = counts.get(spec.aten, 0) + spec.n_aten(node)
        for kind, n in spec.extra_aten(node).items():
            counts[kind] = counts.get(kind, 0) + n
    return {k: v for k, v in sorted(counts.items()) if v}


def _spec(node: Node, fmt: str) -> TorchOp:
    spec = TORCH_OPS.get(node.op)
    if spec is None:
        raise ExportError(f"node {node.name!r}: operator {node.op!r} is not supported by the PyTorch exporter ({fmt})")
    return spec


def _int8_domain(node: Node, graph: Graph) -> str:
    domain = TORCH_OPS[node.op].int8
    return domain(node) if callable(domain) else domain


def _check_precision(precision: str, fmt: str) -> None:
    if precision == "fp16":
        raise ExportError(
            f"precision 'fp16' is not offered for {fmt}: half precision on the host CPU runs about 25x slower "
            "than fp32 and measures nothing meaningful (see NOTES.md); use fp32 or int8"
        )
    if precision not in PRECISIONS:
        raise ExportError(f"unknown precision {precision!r} for {fmt} (known: {', '.join(PRECISIONS)})")


def _check_engine(engine: str, fmt: str) -> None:
    if engine not in ENGINES:
        raise ExportError(f"unknown quantization engine {engine!r} for {fmt} (known: {', '.join(ENGINES)})")
    if engine not in torch.backends.quantized.supported_engines:
        raise ExportError(f"quantization engine {engine!r} is not available in this PyTorch build ({fmt})")


# ---------------------------------------------------------------- building the module
_IDENT = re.compile(r"\W")


def _ident(name: str, taken: set[str], prefix: str = "n_") -> str:
    return unique_name(prefix + _IDENT.sub("_", name), taken)


def _load(module: nn.Module, params: dict[str, np.ndarray], node: Node) -> None:
    state = module.state_dict()
    for key, value in params.items():
        if key not in state or tuple(state[key].shape) != value.shape:
            raise ExportError(f"node {node.name!r}: weight {key!r} of shape {value.shape} does not fit the PyTorch layer")
        state[key] = torch.from_numpy(np.ascontiguousarray(value))
    module.load_state_dict(state)


def _build(graph: Graph, quantizable: bool, fmt: str) -> fx.GraphModule:
    """The float module; with ``quantizable`` it has Quant/DeQuant stubs at domain changes."""
    graph.validate()
    for node in graph.nodes.values():
        if node.op != "input":
            _spec(node, fmt)  # unsupported operators fail before any work
    weights = graph_weights(graph)
    g = fx.Graph()
    mods: dict[str, nn.Module] = {}
    taken: set[str] = set()
    values: dict[tuple[str, int], fx.Node] = {}
    domain: dict[tuple[str, int], str] = {}
    convert_cache: dict[tuple[tuple[str, int], str], fx.Node] = {}
    node_modules: dict[str, str] = {}

    def fetch(ref: str, want: str) -> fx.Node:
        key = split_ref(ref)
        have = domain[key]
        if not quantizable or want == "any" or want == have:
            return values[key]
        cached = convert_cache.get((key, want))
        if cached is None:
            label = f"{key[0]}_{key[1]}" if key[1] else key[0]
            if want == "q":
                ident = _ident(label, taken, "quant_")
                mods[ident] = QuantStub()
            else:
                ident = _ident(label, taken, "dequant_")
                mods[ident] = DeQuantStub()
            cached = g.call_module(ident, (values[key],))
            convert_cache[(key, want)] = cached
        return cached

    for node in graph.nodes.values():
        if node.op == "input":
            values[(node.name, 0)] = g.placeholder(_ident(node.name, taken, "x_"))
            domain[(node.name, 0)] = "f"
            continue
        spec = TORCH_OPS[node.op]
        want = _int8_domain(node, graph) if quantizable else "f"
        args = [fetch(r, want) for r in node.inputs]
        ins = graph.input_shapes(node)
        module = spec.build(node, ins)
        _load(module, weights[node.name], node)
        if quantizable and want == "f":
            module.qconfig = None  # stays float: no observer, no swap
        ident = _ident(node.name, taken)
        mods[ident] = module
        node_modules[node.name] = ident
        out = g.call_module(ident, (args,) if spec.variadic else tuple(args))
        if want == "any":
            want = domain[split_ref(node.inputs[0])]
        if len(node.shapes) > 1:
            for k in range(len(node.shapes)):
                values[(node.name, k)] = g.call_function(operator.getitem, (out, k))
                domain[(node.name, k)] = want
        else:
            values[(node.name, 0)] = out
            domain[(node.name, 0)] = want
    outs = [fetch(r, "f") for r in graph.outputs]
    g.output(outs[0] if len(outs) == 1 else tuple(outs))
    root = nn.Module()
    for ident, m in mods.items():
        root.add_module(ident, m)
    gm = fx.GraphModule(root, g, class_name="LatbenchNet")
    gm.latbench_node_modules = node_modules  # IR node name -> attribute name
    gm.requires_grad_(False)  # an inference artifact: no autograd bookkeeping when it runs
    return gm.eval()


def to_module(graph: Graph) -> nn.Module:
    """The fp32 ``nn.Module`` of ``graph`` (eval mode, parameters without gradients); call it
    with one NCHW tensor per input node, in input-node order."""
    return _build(graph, quantizable=False, fmt="nn.Module")


def example_tensors(graph: Graph, sample: int = 0) -> tuple[torch.Tensor, ...]:
    """The deterministic example input(s) of ``graph`` as torch tensors, in input-node order."""
    return tuple(torch.from_numpy(a) for a in example_input(graph, sample).values())


# ---------------------------------------------------------------- int8
def _fusion_groups(graph: Graph, module: fx.GraphModule) -> list[list[str]]:
    """conv+bn(+relu), conv+relu, fc+relu, bn+relu chains whose inner tensors have one reader."""
    consumers = graph.consumers()
    outputs = {split_ref(r)[0] for r in graph.outputs}
    names = module.latbench_node_modules

    def sole_next(node: Node) -> Node | None:
        if node.name in outputs or len(consumers[node.name]) != 1:
            return None
        nxt = graph.nodes[consumers[node.name][0]]
        return nxt if len(nxt.inputs) == 1 else None

    groups, used = [], set()
    for node in graph.nodes.values():
        if node.name in used:
            continue
        chain = [node]
        if node.op == "conv2d":
            nxt = sole_next(node)
            if nxt is not None and nxt.op == "batchnorm":
                chain.append(nxt)
                nxt = sole_next(nxt)
            if nxt is not None and nxt.op == "relu":
                chain.append(nxt)
        elif node.op == "fc" or (node.op == "batchnorm" and len(node.shape) == 4):
            nxt = sole_next(node)
            if nxt is not None and nxt.op == "relu":
                chain.append(nxt)
        if len(chain) > 1:
            used.update(n.name for n in chain)
            groups.append([names[n.name] for n in chain])
    return groups


class _PReLUSlopeObserver(MinMaxObserver):
    """Weight observer for quantized PReLU: per-tensor quint8 whose range includes 1.0.

    Measured with torch 2.13: positive outputs of ``quantized::prelu`` come out multiplied
    by ``min(1, 255 * weight_scale)``, as if the unit slope of ``x > 0`` were quantized with
    the weight's qparams; slopes observed alone (0.1-0.3, say) shrank them about 3.5x.
    """

    def __init__(self, **kwargs):
        super().__init__(dtype=torch.quint8, qscheme=torch.per_tensor_affine)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        super().forward(torch.cat([x.detach().reshape(-1).float(), torch.ones(1)]))
        return x


def _quantize(graph: Graph, engine: str, calibration_samples: int, fmt: str) -> nn.Module:
    from torch.ao.quantization import QConfig, convert, fuse_modules, get_default_qconfig, prepare

    _check_engine(engine, fmt)
    if calibration_samples < 1:
        raise ExportError(f"calibration_samples must be >= 1 ({fmt}), got {calibration_samples}")
    previous = torch.backends.quantized.engine
    torch.backends.quantized.engine = engine
    try:
        model = _build(graph, quantizable=True, fmt=fmt)
        node_modules = model.latbench_node_modules
        groups = _fusion_groups(graph, model)
        if groups:
            fuse_modules(model, groups, inplace=True)
        qconfig = get_default_qconfig(engine)
        model.qconfig = qconfig
        for m in model.modules():
            if isinstance(m, nn.PReLU):
                m.qconfig = QConfig(activation=qconfig.activation, weight=_PReLUSlopeObserver)
        prepare(model, inplace=True)
        with torch.no_grad():
            for k in range(calibration_samples):
                model(*example_tensors(graph, sample=k))
        convert(model, inplace=True)
        if engine == "qnnpack":
            for node in graph.nodes.values():
                if node.op in TORCH_OPS and TORCH_OPS[node.op].qnnpack_contiguous:
                    ident = node_modules[node.name]
                    setattr(model, ident, ContiguousInput(getattr(model, ident)))
        model.latbench_node_modules = node_modules
        return model.eval()
    finally:
        torch.backends.quantized.engine = previous


# ---------------------------------------------------------------- TorchScript artifacts
def script_op_counts(module: torch.jit.ScriptModule) -> dict[str, int]:
    """Counts of aten:: and quantized:: operators in the inlined TorchScript graph."""
    counts: dict[str, int] = {}

    def walk(block) -> None:
        for n in block.nodes():
            kind = n.kind()
            if kind.startswith(("aten::", "quantized::")):
                counts[kind] = counts.get(kind, 0) + 1
            for b in n.blocks():
                walk(b)

    walk(module.inlined_graph)
    return dict(sorted(counts.items()))


def script_weights(module) -> dict[str, torch.Tensor]:
    """Every weight of a TorchScript module: parameters and buffers, plus the weights and
    biases packed inside quantized conv/linear layers (unpacked), keyed by module path."""
    out = {k: v for k, v in module.state_dict().items()}
    for name, sub in module.named_modules():
        packed = getattr(sub, "_packed_params", None)
        if not isinstance(packed, torch.ScriptObject):
            continue
        if packed._has_method("unpack"):
            w, b = packed.unpack()
        else:
            w, b = torch.ops.quantized.linear_unpack(packed)
        out[f"{name}.weight"] = w
        if b is not None:
            out[f"{name}.bias"] = b
    return dict(sorted(out.items()))


def _tensor_digest(h: "hashlib._Hash", t: torch.Tensor) -> None:
    t = t.detach()
    if t.is_quantized:
        if t.qscheme() in (torch.per_channel_affine, torch.per_channel_symmetric):
            h.update(t.q_per_channel_scales().double().numpy().tobytes())
            h.update(t.q_per_channel_zero_points().numpy().tobytes())
        else:
            h.update(np.array([t.q_scale(), t.q_zero_point()], dtype=np.float64).tobytes())
        t = t.int_repr()
    h.update(f"{t.dtype}{list(t.shape)}".encode())
    h.update(t.contiguous().numpy().tobytes())


def weights_sha256(module) -> str:
    """A digest of :func:`script_weights`: equal for two exports of the same graph.

    TorchScript files themselves are not byte-stable (``torch.jit.save`` writes a random
    ``.data/serialization_id`` and process-dependent ``___torch_mangle_N`` class names).
    """
    h = hashlib.sha256()
    for name, t in script_weights(module).items():
        h.update(name.encode())
        _tensor_digest(h, t)
    return h.hexdigest()


def float_nodes(graph: Graph) -> list[str]:
    """The IR nodes the int8 export keeps float (their ``int8`` domain is ``"f"``)."""
    return [n.name for n in graph.nodes.values() if n.op != "input" and _int8_domain(n, graph) == "f"]


# The last traced module: the TorchScript and lite files of one network at one precision are
# the same traced module saved twice, and int8 calibration is the costly part of exporting.
_last_trace: tuple[tuple, torch.jit.ScriptModule] | None = None


def trace(graph: Graph, precision: str = "fp32", engine: str = "x86",
          calibration_samples: int = DEFAULT_CALIBRATION_SAMPLES, fmt: str = "torchscript") -> torch.jit.ScriptModule:
    """The traced TorchScript module of ``graph`` at ``precision`` (in memory, not saved)."""
    global _last_trace
    _check_precision(precision, fmt)
    _check_engine(engine, fmt)
    key = (graph.model_id, precision, engine if precision == "int8" else None, calibration_samples)
    if _last_trace is not None and _last_trace[0] == key:
        return _last_trace[1]
    traced = _trace(graph, precision, engine, calibration_samples, fmt)
    _last_trace = (key, traced)
    return traced


def _trace(graph: Graph, precision: str, engine: str, calibration_samples: int, fmt: str) -> torch.jit.ScriptModule:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # tracer and quantization deprecation chatter
        if precision == "int8":
            model = _quantize(graph, engine, calibration_samples, fmt)
        else:
            model = _build(graph, quantizable=False, fmt=fmt)
        previous = torch.backends.quantized.engine
        if precision == "int8":
            torch.backends.quantized.engine = engine
        try:
            with torch.no_grad():
                traced = torch.jit.trace(model, example_tensors(graph), check_trace=False)
        finally:
            torch.backends.quantized.engine = previous
    return traced.eval()


def _facts(graph: Graph, traced: torch.jit.ScriptModule, path: Path, fmt: str, precision: str, engine: str,
           calibration_samples: int) -> dict[str, Any]:
    data = path.read_bytes()
    facts: dict[str, Any] = {
        "path": str(path),
        "format": fmt,
        "precision": precision,
        "engine": engine if precision == "int8" else None,
        "model_id": graph.model_id,
        "op_counts": script_op_counts(traced),
        "params": graph.params,  # the float network's; int8 packs them into quantized weights
        "inputs": [{"name": n.name, "shape": list(n.shape)} for n in graph.input_nodes],
        "output_shapes": [list(graph.tensor_shape(r)) for r in graph.outputs],
        "bytes": len(data),
        "sha256": hashlib.sha256(data).hexdigest(),  # of the file; not stable across exports
        "weights_sha256": weights_sha256(traced),  # stable across exports
        "torch_version": torch.__version__,
    }
    if precision == "int8":
        facts["calibration_samples"] = calibration_samples
        facts["float_ops"] = float_nodes(graph)
    return facts


def _save(path: str | Path, write: Callable[[str], None]) -> Path:
    path = Path(path)
    with atomic_path(path) as tmp, warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # torch.jit / lite interpreter deprecation notices
        write(str(tmp))
    return path


def export_torchscript(graph: Graph, path: str | Path, precision: str = "fp32", engine: str = "x86",
                       calibration_samples: int = DEFAULT_CALIBRATION_SAMPLES) -> dict[str, Any]:
    """Write a traced TorchScript file (``torch.jit.load``); return the artifact's facts."""
    fmt = "torchscript"
    traced = trace(graph, precision, engine, calibration_samples, fmt)
    path = _save(path, lambda p: torch.jit.save(traced, p))
    return _facts(graph, traced, path, fmt, precision, engine, calibration_samples)


def export_lite(graph: Graph, path: str | Path, precision: str = "fp32", engine: str = "x86",
                calibration_samples: int = DEFAULT_CALIBRATION_SAMPLES) -> dict[str, Any]:
    """Write a lite-interpreter file (``_load_for_lite_interpreter``); return the artifact's facts."""
    fmt = "torchscript-lite"
    traced = trace(graph, precision, engine, calibration_samples, fmt)
    path = _save(path, lambda p: traced._save_for_lite_interpreter(p))
    return _facts(graph, traced, path, fmt, precision, engine, calibration_samples)


def load_artifact(path: str | Path, engine: str | None = None):
    """Load a TorchScript (``.pt``) or lite (``.ptl``) artifact; int8 ones need their ``engine``.

    Quantized weights are repacked for the engine that is current at load time, so the
    engine is set before loading and left set (the caller runs the model next).
    """
    path = Path(path)
    if engine is not None:
        _check_engine(engine, "torchscript")
        torch.backends.quantized.engine = engine
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        if path.suffix == FORMATS["torchscript-lite"]:
            from torch.jit.mobile import _load_for_lite_interpreter

            return _load_for_lite_interpreter(str(path))
        return torch.jit.load(str(path)).eval()
