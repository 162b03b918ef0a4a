"""The operator vocabulary of the IR: one registry entry per operator type.

Each entry knows how to normalise its attributes, infer its output shapes from its input
shapes, and count its cost. Tensors have batch 1 and PyTorch's axis order: images are NCHW
(``[1, C, H, W]``), ``[1, F]`` after flattening, tokens ``[1, N, C]``, attention tensors
``[1, heads, N, d]``; the channels-last exporters place them (``generators/export/layout.py``).

Cost definitions (written in docs/IR.md too):
- ``macs``: multiply-accumulates of convolutions, fully connected layers and matrix products,
  the number nn-Meter and most papers call "FLOPs". Every other operator counts 0, as
  ``torch.utils.flop_counter`` does (which counts 2 per multiply-add); their cost shows in
  memory access instead.
- ``params``: learnable parameters as PyTorch counts them (conv/FC weight and bias, batch
  and layer norm gamma and beta, PReLU slopes, a position embedding's tensor, a class token);
  batch norm running statistics are buffers, not parameters.
- memory access: input feature maps + output feature maps + parameters, in elements; bytes
  follow from the precision.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable

from foundation import limits

Shape = list[int]


class OpError(ValueError):
    """A problem with one operator's attributes or input shapes (the graph adds the node name)."""


@dataclass(frozen=True)
class OpSpec:
    name: str
    infer: Callable[[dict, list[Shape]], list[Shape]]
    attrs: dict[str, Any] = field(default_factory=dict)  # name -> default (REQUIRED if none)
    arity: tuple[int, int | None] = (1, 1)  # min and max number of inputs (None: unbounded)
    params: Callable[[dict, list[Shape], list[Shape]], int] = lambda a, i, o: 0
    macs: Callable[[dict, list[Shape], list[Shape]], int] = lambda a, i, o: 0
    category: str = "elementwise"  # coarse family used by features and reports
    # attribute schema: name -> kind (a checker from the "attribute kinds" below); every
    # attribute of ``attrs`` has one, so a value from a file is checked before inference
    types: dict[str, "Kind"] = field(default_factory=dict)


REQUIRED = object()
OPS: dict[str, OpSpec] = {}


def register_op(spec: OpSpec) -> OpSpec:
    if spec.name in OPS:
        raise ValueError(f"operator {spec.name!r} registered twice")
    untyped = sorted(set(spec.attrs) - set(spec.types))
    if untyped:
        raise ValueError(f"operator {spec.name!r}: attribute(s) {untyped} without a kind in types")
    OPS[spec.name] = spec
    return spec


def op_spec(op: str) -> OpSpec:
    try:
        return OPS[op]
    except KeyError:
        raise OpError(f"unknown operator type {op!r} (known: {', '.join(sorted(OPS))})") from None


# ---------------------------------------------------------------- attribute helpers
def _pair(value: Any, key: str) -> list[int]:
    if isinstance(value, bool):
        raise OpError(f"{key} must be an int or a pair of ints, got {value!r}")
    if isinstance(value, int):
        return [value, value]
    if isinstance(value, (list, tuple)) and len(value) == 2 and all(
        isinstance(v, int) and not isinstance(v, bool) for v in value
    ):
        return [int(value[0]), int(value[1])]
    raise OpError(f"{key} must be an int or a pair of ints, got {value!r}")


# ---------------------------------------------------------------- attribute kinds
# A kind checks one attribute value (as read from a file: any JSON value) and returns it in
# canonical form, or raises OpError naming the attribute. Sizes are bounded so that no file
# can ask the shape and cost code for astronomically large numbers.
MAX_SIZE = limits.IR_SIZE  # any size, count or index (int32, what the runtimes take)
MAX_LIST = limits.IR_LIST  # elements of a list attribute (shape, sections, pads)
Kind = Callable[[Any, str], Any]


def int_kind(lo: int, hi: int = MAX_SIZE) -> Kind:
    def check(v: Any, key: str) -> int:
        if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
            raise OpError(f"{key} must be an int in [{lo}, {hi}], got {v!r}"[:300])
        return v

    return check


def bool_kind(v: Any, key: str) -> bool:
    if not isinstance(v, bool):
        raise OpError(f"{key} must be true or false, got {v!r}"[:300])
    return v


def float_kind(v: Any, key: str) -> float | int:
    """A finite number (ints stay ints: the canonical form, and so model ids, are unchanged)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or abs(v) > 1e30:
        raise OpError(f"{key} must be a finite number, got {v!r}"[:300])
    return v


def pair_kind(lo: int) -> Kind:
    def check(v: Any, key: str) -> list[int]:
        pair = _pair(v, key)
        if min(pair) < lo:
            raise OpError(f"{key} must be >= {lo}, got {pair}")
        if max(pair) > MAX_SIZE:
            raise OpError(f"{key} must be at most {MAX_SIZE}, got {pair}"[:300])
        return pair

    return check


def int_list_kind(lo: int, length: int | None = None, min_len: int = 1, what: str | None = None) -> Kind:
    def check(v: Any, key: str) -> list[int]:
        ok = isinstance(v, (list, tuple)) and min_len <= len(v) <= MAX_LIST and (length is None or len(v) == length)
        if not ok or not all(isinstance(x, int) and not isinstance(x, bool) and lo <= x <= MAX_SIZE for x in v):
            want = what or f"a list of ints in [{lo}, {MAX_SIZE}]"
            raise OpError(f"{key} must be {want}, got {v!r}"[:300])
        return list(v)

    return check


def choice_kind(*values: str) -> Kind:
    def check(v: Any, key: str) -> str:
        if not isinstance(v, str) or v not in values:
            raise OpError(f"{key} must be {' or '.join(map(repr, values))}, got {v!r}"[:300])
        return v

    return check


POS_INT, NONNEG_INT, AXIS = int_kind(1), int_kind(0), int_kind(-64, 63)
WINDOW = {"kernel": pair_kind(1), "stride": pair_kind(1), "padding": pair_kind(0), "dilation": pair_kind(1)}


def normalize_attrs(spec: OpSpec, attrs: dict) -> dict:
    """Fill defaults, reject unknown or missing attributes, check each value against its kind
    (the op's attribute schema) and canonicalise pairs and lists."""
    unknown = set(attrs) - set(spec.attrs)
    if unknown:
        names = sorted(map(str, unknown))
        shown = names[:10] + (["..."] if len(names) > 10 else [])
        raise OpError(f"unknown attribute(s) {shown} for {spec.name} (allowed: {sorted(spec.attrs)})"[:400])
    out = {}
    for key, default in spec.attrs.items():
        if key in attrs:
            value = attrs[key]
        elif default is REQUIRED:
            raise OpError(f"missing required attribute {key!r} for {spec.name}")
        else:
            value = default
        kind = spec.types.get(key)
        if kind is not None:
            value = kind(value, key)
        elif isinstance(value, tuple):
            value = list(value)
        out[key] = value
    return out


def _numel(shape: Shape) -> int:
    return math.prod(shape)


def _need_rank(shape: Shape, rank: int, what: str = "input") -> None:
    if len(shape) != rank:
        raise OpError(f"{what} must have rank {rank}, got shape {shape}")


def _pos_int(a: dict, key: str) -> int:
    v = a[key]
    if not isinstance(v, int) or isinstance(v, bool) or v < 1:
        raise OpError(f"{key} must be a positive int, got {v!r}")
    return v


def _window_out(size: int, k: int, s: int, p: int, d: int, ceil: bool, what: str) -> int:
    eff = d * (k - 1) + 1
    span = size + 2 * p - eff
    if span < 0:
        raise OpError(f"{what} window {k} (dilation {d}) larger than padded input {size}+2*{p}")
    out = (-(-span // s) if ceil else span // s) + 1
    # PyTorch's rule: with ceil_mode the last window must start inside the input or left padding.
    if ceil and (out - 1) * s >= size + p:
        out -= 1
    return out


def _window_attrs_ok(a: dict) -> None:
    for key in ("kernel", "stride"):
        if min(a[key]) < 1:
            raise OpError(f"{key} must be >= 1, got {a[key]}")
    if min(a["padding"]) < 0:
        raise OpError(f"padding must be >= 0, got {a['padding']}")
    if "dilation" in a and min(a["dilation"]) < 1:
        raise OpError(f"dilation must be >= 1, got {a['dilation']}")


# ---------------------------------------------------------------- sources
def _infer_input(a: dict, ins: list[Shape]) -> list[Shape]:
    shape = a["shape"]
    if not isinstance(shape, list) or not shape or not all(isinstance(d, int) and d >= 1 for d in shape):
        raise OpError(f"input shape must be a list of positive ints, got {shape!r}")
    if shape[0] != 1:
        raise OpError(f"batch must be 1, got shape {shape}")
    return [list(shape)]


register_op(OpSpec("input", _infer_input, {"shape": REQUIRED}, arity=(0, 0), category="input",
                   types={"shape": int_list_kind(1, what="a list of positive ints")}))


# ---------------------------------------------------------------- convolution
def _infer_conv(a: dict, ins: list[Shape]) -> list[Shape]:
    x = ins[0]
    _need_rank(x, 4)
    cout, groups = _pos_int(a, "out_channels"), _pos_int(a, "groups")
    _window_attrs_ok(a)
    cin = x[1]
    if cin % groups:
        raise OpError(f"groups={groups} does not divide input channels {cin}")
    if cout % groups:
        raise OpError(f"groups={groups} does not divide output channels {cout}")
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = a["kernel"], a["stride"], a["padding"], a["dilation"]
    h = _window_out(x[2], kh, sh, ph, dh, False, "conv2d")
    w = _window_out(x[3], kw, sw, pw, dw, False, "conv2d")
    return [[1, cout, h, w]]


def _conv_params(a: dict, ins: list[Shape], outs: list[Shape]) -> int:
    cin, cout = ins[0][1], a["out_channels"]
    kh, kw = a["kernel"]
    return cout * (cin // a["groups"]) * kh * kw + (cout if a["bias"] else 0)


def _conv_macs(a: dict, ins: list[Shape], outs: list[Shape]) -> int:
    cin = ins[0][1]
    kh, kw = a["kernel"]
    return _numel(outs[0]) * (cin // a["groups"]) * kh * kw


register_op(
    OpSpec(
        "conv2d",
        _infer_conv,
        {"out_channels": REQUIRED, "kernel": REQUIRED, "stride": 1, "padding": 0, "dilation": 1, "groups": 1, "bias": True},
        params=_conv_params,
        macs=_conv_macs,
        category="conv",
        types={"out_channels": POS_INT, **WINDOW, "groups": POS_INT, "bias": bool_kind},
    )
)


def _infer_fc(a: dict, ins: list[Shape]) -> list[Shape]:
    """A linear layer over the last axis: ``[1, F]`` (after flatten) or ``[1, ..., F]`` (tokens)."""
    x = ins[0]
    if len(x) < 2:
        raise OpError(f"input of fc must have rank >= 2, got shape {x}")
    return [x[:-1] + [_pos_int(a, "out_features")]]


register_op(
    OpSpec(
        "fc",
        _infer_fc,
        {"out_features": REQUIRED, "bias": True},
        params=lambda a, i, o: i[0][-1] * a["out_features"] + (a["out_features"] if a["bias"] else 0),
        macs=lambda a, i, o: _numel(o[0]) * i[0][-1],
        category="fc",
        types={"out_features": POS_INT, "bias": bool_kind},
    )
)


# ---------------------------------------------------------------- normalisation and activations
def _same_shape(a: dict, ins: list[Shape]) -> list[Shape]:
    return [list(ins[0])]


def _infer_bn(a: dict, ins: list[Shape]) -> list[Shape]:
    if len(ins[0]) not in (2, 4):
        raise OpError(f"batchnorm input must have rank 2 or 4, got shape {ins[0]}")
    return [list(ins[0])]


register_op(OpSpec("batchnorm", _infer_bn, {"eps": 1e-5}, params=lambda a, i, o: 2 * i[0][1], category="batchnorm",
                   types={"eps": float_kind}))

for _act in ("relu", "relu6", "hswish", "hsigmoid", "sigmoid", "swish", "tanh"):
    register_op(OpSpec(_act, _same_shape, category="activation"))
register_op(OpSpec("leaky_relu", _same_shape, {"alpha": 0.01}, category="activation", types={"alpha": float_kind}))


def _infer_prelu(a: dict, ins: list[Shape]) -> list[Shape]:
    n, x = a["num_parameters"], ins[0]
    if n != 1 and (len(x) < 2 or n != x[1]):
        raise OpError(f"num_parameters must be 1 or the {x[1] if len(x) > 1 else '?'} input channels, got {n}")
    return [list(x)]


register_op(
    OpSpec(
        "prelu",
        _infer_prelu,
        {"num_parameters": 1},
        params=lambda a, i, o: a["num_parameters"],
        category="activation",
        types={"num_parameters": POS_INT},
    )
)


# ---------------------------------------------------------------- element-wise binary
def _broadcast(a: dict, ins: list[Shape]) -> list[Shape]:
    rank = len(ins[0])
    for s in ins[1:]:
        if len(s) != rank:
            raise OpError(f"inputs must have the same rank, got shapes {ins}")
    out = []
    for dims in zip(*ins):
        big = max(dims)
        if any(d not in (1, big) for d in dims):
            raise OpError(f"input shapes {ins} do not broadcast")
        out.append(big)
    return [out]


register_op(OpSpec("add", _broadcast, arity=(2, None)))
register_op(OpSpec("mul", _broadcast, arity=(2, None)))


# ---------------------------------------------------------------- pooling
def _infer_pool(a: dict, ins: list[Shape]) -> list[Shape]:
    x = ins[0]
    _need_rank(x, 4)
    _window_attrs_ok(a)
    (kh, kw), (sh, sw), (ph, pw) = a["kernel"], a["stride"], a["padding"]
    if ph * 2 > kh or pw * 2 > kw:
        raise OpError(f"padding {a['padding']} must be at most half the window {a['kernel']}")
    h = _window_out(x[2], kh, sh, ph, 1, a["ceil_mode"], "pool")
    w = _window_out(x[3], kw, sw, pw, 1, a["ceil_mode"], "pool")
    return [[1, x[1], h, w]]


register_op(
    OpSpec(
        "avgpool",
        _infer_pool,
        {"kernel": REQUIRED, "stride": 1, "padding": 0, "ceil_mode": False, "count_include_pad": True},
        category="pool",
        types={"kernel": WINDOW["kernel"], "stride": WINDOW["stride"], "padding": WINDOW["padding"],
               "ceil_mode": bool_kind, "count_include_pad": bool_kind},
    )
)
register_op(OpSpec("maxpool", _infer_pool, {"kernel": REQUIRED, "stride": 1, "padding": 0, "ceil_mode": False}, category="pool",
                   types={"kernel": WINDOW["kernel"], "stride": WINDOW["stride"], "padding": WINDOW["padding"],
                          "ceil_mode": bool_kind}))


def _infer_gap(a: dict, ins: list[Shape]) -> list[Shape]:
    _need_rank(ins[0], 4)
    return [[1, ins[0][1], 1, 1]]


register_op(OpSpec("global_avgpool", _infer_gap, category="mean"))


# ---------------------------------------------------------------- tensor plumbing
def _axis(a: dict, rank: int) -> int:
    ax = a["axis"]
    if not isinstance(ax, int) or not -rank <= ax < rank:
        raise OpError(f"axis {ax!r} out of range for rank {rank}")
    return ax % rank


def _infer_concat(a: dict, ins: list[Shape]) -> list[Shape]:
    rank = len(ins[0])
    ax = _axis(a, rank)
    for s in ins[1:]:
        if len(s) != rank or any(s[d] != ins[0][d] for d in range(rank) if d != ax):
            raise OpError(f"inputs {ins} differ outside the concat axis {ax}")
    out = list(ins[0])
    out[ax] = sum(s[ax] for s in ins)
    return [out]


register_op(OpSpec("concat", _infer_concat, {"axis": 1}, arity=(1, None), category="concat", types={"axis": AXIS}))


def _infer_split(a: dict, ins: list[Shape]) -> list[Shape]:
    x = ins[0]
    ax = _axis(a, len(x))
    sections = a["sections"]
    if not isinstance(sections, list) or len(sections) < 2 or any(not isinstance(s, int) or s < 1 for s in sections):
        raise OpError(f"sections must be a list of at least two positive ints, got {sections!r}")
    if sum(sections) != x[ax]:
        raise OpError(f"sections {sections} sum to {sum(sections)}, not the {x[ax]} elements of axis {ax}")
    outs = []
    for s in sections:
        o = list(x)
        o[ax] = s
        outs.append(o)
    return outs


register_op(OpSpec("split", _infer_split, {"sections": REQUIRED, "axis": 1}, category="split",
                   types={"sections": int_list_kind(1, min_len=2, what="a list of at least two positive ints"), "axis": AXIS}))


def _infer_shuffle(a: dict, ins: list[Shape]) -> list[Shape]:
    _need_rank(ins[0], 4)
    g = _pos_int(a, "groups")
    if ins[0][1] % g:
        raise OpError(f"groups={g} does not divide input channels {ins[0][1]}")
    return [list(ins[0])]


register_op(OpSpec("channel_shuffle", _infer_shuffle, {"groups": REQUIRED}, category="shuffle", types={"groups": POS_INT}))


PADS = "four non-negative ints [top, bottom, left, right], or six [top, bottom, left, right, front, back]"


def _infer_pad(a: dict, ins: list[Shape]) -> list[Shape]:
    x = ins[0]
    _need_rank(x, 4)
    pads = a["pads"]
    if not isinstance(pads, list) or len(pads) not in (4, 6) or any(not isinstance(p, int) or p < 0 for p in pads):
        raise OpError(f"pads must be {PADS}, got {pads!r}")
    t, b, l, r, front, back = pads + [0, 0] * (len(pads) == 4)
    return [[1, x[1] + front + back, x[2] + t + b, x[3] + l + r]]


# Constant padding of an image: of H and W, and with six pads of the channels too (``front``
# channels before, ``back`` after: PyramidNet's shortcut widens its identity with zero channels).
register_op(OpSpec("pad", _infer_pad, {"pads": REQUIRED, "value": 0.0}, category="pad",
                   types={"pads": int_list_kind(0, min_len=4, what=PADS), "value": float_kind}))


def _infer_reshape(a: dict, ins: list[Shape]) -> list[Shape]:
    shape = a["shape"]
    if not isinstance(shape, list) or not shape or shape[0] != 1 or any(not isinstance(d, int) or d < 1 for d in shape):
        raise OpError(f"shape must be a list of positive ints with batch 1, got {shape!r}")
    if _numel(shape) != _numel(ins[0]):
        raise OpError(f"cannot reshape {ins[0]} ({_numel(ins[0])} elements) to {shape}")
    return [list(shape)]


register_op(OpSpec("reshape", _infer_reshape, {"shape": REQUIRED}, category="reshape",
                   types={"shape": int_list_kind(1, what="a list of positive ints with batch 1")}))
register_op(OpSpec("flatten", lambda a, i: [[1, _numel(i[0])]], category="reshape"))


def _infer_softmax(a: dict, ins: list[Shape]) -> list[Shape]:
    _axis(a, len(ins[0]))
    return [list(ins[0])]


register_op(OpSpec("softmax", _infer_softmax, {"axis": -1}, category="activation", types={"axis": AXIS}))


# ---------------------------------------------------------------- added for NAS-Bench-201 and imported CNNs
# (appended; the operators above are unchanged)
def _infer_scale(a: dict, ins: list[Shape]) -> list[Shape]:
    f = a["factor"]
    if isinstance(f, bool) or not isinstance(f, (int, float)) or not math.isfinite(f):
        raise OpError(f"factor must be a finite number, got {f!r}")
    a["factor"] = float(f)  # canonical: x*0 and x*0.0 are one operator (and one model_id)
    return [list(ins[0])]


# Multiplication by a constant scalar: NAS-Bench-201's "none" edge (its Zero op computes
# x.mul(0.)) and scalar mul/div of imported models that no fused pattern explains.
register_op(OpSpec("scale", _infer_scale, {"factor": REQUIRED}, category="elementwise", types={"factor": float_kind}))


def _infer_shift(a: dict, ins: list[Shape]) -> list[Shape]:
    v = a["value"]
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise OpError(f"value must be a finite number, got {v!r}")
    a["value"] = float(v)
    return [list(ins[0])]


# Addition of a constant scalar: the offset of a preprocessing layer (Keras' Rescaling with an
# offset, ``x / 127.5 - 1``) and scalar add/sub of imported models that no fused pattern explains.
register_op(OpSpec("shift", _infer_shift, {"value": REQUIRED}, category="elementwise", types={"value": float_kind}))


def _infer_clip(a: dict, ins: list[Shape]) -> list[Shape]:
    lo, hi = a["min"], a["max"]
    for key, v in (("min", lo), ("max", hi)):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise OpError(f"{key} must be a finite number, got {v!r}")
    if lo >= hi:
        raise OpError(f"min {lo} must be below max {hi}")
    a["min"], a["max"] = float(lo), float(hi)
    return [list(ins[0])]


# Element-wise clamp to [min, max] (torch.clamp / Hardtanh; GhostNet's gate is clamp(x, 0, 1)).
# relu6 is clip(0, 6) but stays its own operator, as the frameworks keep it.
register_op(OpSpec("clip", _infer_clip, {"min": 0.0, "max": 1.0}, category="activation",
                   types={"min": float_kind, "max": float_kind}))


def _infer_crop(a: dict, ins: list[Shape]) -> list[Shape]:
    x = ins[0]
    _need_rank(x, 4)
    crops = a["crops"]
    if not isinstance(crops, list) or len(crops) != 4 or any(
        not isinstance(c, int) or isinstance(c, bool) or c < 0 for c in crops
    ):
        raise OpError(f"crops must be four non-negative ints [top, bottom, left, right], got {crops!r}")
    t, b, l, r = crops
    h, w = x[2] - t - b, x[3] - l - r
    if h < 1 or w < 1:
        raise OpError(f"crops {crops} leave nothing of the {x[2]}x{x[3]} input")
    return [[1, x[1], h, w]]


# Spatial slice, the inverse of pad: removes rows/columns at the borders (BagNet crops the
# identity branch, x[:, :, :-d, :-d]).
register_op(OpSpec("crop", _infer_crop, {"crops": REQUIRED}, category="pad", types={"crops": int_list_kind(0, 4, what="four non-negative ints [top, bottom, left, right]")}))


def _infer_upsample(a: dict, ins: list[Shape]) -> list[Shape]:
    x = ins[0]
    _need_rank(x, 4)
    a["scale"] = _pair(a["scale"], "scale")
    if min(a["scale"]) < 1:
        raise OpError(f"scale must be >= 1, got {a['scale']}")
    sh, sw = a["scale"]
    return [[1, x[1], x[2] * sh, x[3] * sw]]


# Upsampling by integer factors: nearest neighbour (HRNet's fuse layers), or bilinear with
# half-pixel centres (PyTorch's align_corners=False, TFLite's half_pixel_centers) or with the
# corner pixels aligned (align_corners=True: AirNet's and ResAttNet's attention masks).
UPSAMPLE_MODES = ("nearest", "bilinear", "bilinear_corners")
register_op(OpSpec("upsample", _infer_upsample, {"scale": REQUIRED, "mode": "nearest"}, category="resize",
                   types={"scale": pair_kind(1), "mode": choice_kind(*UPSAMPLE_MODES)}))


# ---------------------------------------------------------------- added for transformers
# Token tensors are [1, N, C] and attention tensors [1, heads, N, d]; multi-head attention is
# built from these parts (fc, split, reshape, transpose, matmul, scale, softmax), not one
# operator, so importers, exporters and kernel deduction see the operators that run.
def _infer_layernorm(a: dict, ins: list[Shape]) -> list[Shape]:
    _axis(a, len(ins[0]))
    return [list(ins[0])]


# Normalisation over one axis with a learnable gain and shift per element of that axis:
# axis -1 is nn.LayerNorm over tokens' channels, axis 1 of [1, C, H, W] ConvNeXt's channel norm.
register_op(OpSpec("layernorm", _infer_layernorm, {"axis": -1, "eps": 1e-5},
                   params=lambda a, i, o: 2 * i[0][a["axis"] % len(i[0])], category="norm",
                   types={"axis": AXIS, "eps": float_kind}))


def _infer_instancenorm(a: dict, ins: list[Shape]) -> list[Shape]:
    if len(ins[0]) != 4:
        raise OpError(f"expects an image [1, C, H, W], got {ins[0]}")
    return [list(ins[0])]


# Normalisation of each channel of an image over H and W with a learnable gain and shift per
# channel (nn.InstanceNorm2d(affine=True): IBN-Net's instance-normalised half).
register_op(OpSpec("instancenorm", _infer_instancenorm, {"eps": 1e-5}, params=lambda a, i, o: 2 * i[0][1],
                   category="norm", types={"eps": float_kind}))
# GELU, exact (erf) or with the tanh approximation.
register_op(OpSpec("gelu", _same_shape, {"approximate": "none"}, category="activation",
                   types={"approximate": choice_kind("none", "tanh")}))


def _infer_matmul(a: dict, ins: list[Shape]) -> list[Shape]:
    x, y = ins
    if len(x) < 2 or len(x) != len(y):
        raise OpError(f"inputs must have the same rank >= 2, got shapes {ins}")
    if x[-1] != y[-2]:
        raise OpError(f"cannot multiply {x} by {y}: inner sizes {x[-1]} and {y[-2]} differ")
    batch = []
    for p, q in zip(x[:-2], y[:-2]):
        if p != q and 1 not in (p, q):
            raise OpError(f"batch dimensions of {x} and {y} do not broadcast")
        batch.append(max(p, q))
    return [batch + [x[-2], y[-1]]]


# Product of two activations, batched over the leading axes: [..., M, K] x [..., K, N].
register_op(OpSpec("matmul", _infer_matmul, arity=(2, 2), macs=lambda a, i, o: _numel(o[0]) * i[0][-1],
                   category="matmul"))


def _infer_transpose(a: dict, ins: list[Shape]) -> list[Shape]:
    x, perm = ins[0], a["perm"]
    if sorted(perm) != list(range(len(x))):
        raise OpError(f"perm {perm} is not a permutation of the {len(x)} axes of {x}")
    if perm[0] != 0:
        raise OpError(f"perm {perm} must keep the batch axis first")
    return [[x[p] for p in perm]]


# Axis permutation (torch.permute).
register_op(OpSpec("transpose", _infer_transpose, {"perm": REQUIRED}, category="transpose",
                   types={"perm": int_list_kind(0, min_len=2, what="a permutation of the input's axes")}))


def _infer_mean(a: dict, ins: list[Shape]) -> list[Shape]:
    x = ins[0]
    ax = _axis(a, len(x))
    if ax == 0:
        raise OpError("axis must not be the batch axis 0")
    out = list(x)
    if a["keepdim"]:
        out[ax] = 1
    else:
        del out[ax]
    return [out]


# Reductions over one axis: the average (torch.mean(x, dim): pooling of tokens), the maximum
# (torch.amax: CBAM's channel-max map) and the sum (torch.sum: split attention's sum over the
# radix of a [1, radix, C, H, W] view).
for _reduce in ("mean", "reduce_max", "reduce_sum"):
    register_op(OpSpec(_reduce, _infer_mean, {"axis": REQUIRED, "keepdim": False}, category="mean",
                       types={"axis": AXIS, "keepdim": bool_kind}))



# Learned constant tensors of a ViT (timm's ``pos_embed`` and ``cls_token``), each with its
# tensor as the node's parameters. ViT's readout of the class token is no operator of its own:
# ``split`` (sections [1, N], axis 1) and ``reshape`` to ``[1, C]``.
# Position embedding: input + a learned tensor of the input's shape (the batch axis is 1).
register_op(OpSpec("pos_embed", _same_shape, params=lambda a, i, o: _numel(i[0]), category="elementwise"))


def _infer_cls_token(a: dict, ins: list[Shape]) -> list[Shape]:
    _need_rank(ins[0], 3, "input (tokens [1, N, C])")
    _, n, c = ins[0]
    return [[1, n + 1, c]]


# Class token: a learned [1, 1, C] token concatenated in front of the tokens [1, N, C].
register_op(OpSpec("cls_token", _infer_cls_token, params=lambda a, i, o: i[0][-1], category="concat"))


# ---------------------------------------------------------------- added for imported CNNs' zoos
def _infer_lrn(a: dict, ins: list[Shape]) -> list[Shape]:
    _need_rank(ins[0], 4)
    return [list(ins[0])]


# Local response normalisation across channels with PyTorch's definition (nn.LocalResponseNorm,
# AlexNet and ZFNet): y_c = x_c / (bias + alpha / size * sum of x_k^2 over the channels k in
# [c - size // 2, c + (size - 1) // 2] within the input)^beta. ONNX's LRN divides alpha by size
# too; TFLite's LOCAL_RESPONSE_NORMALIZATION does not, and its window 2 * radius + 1 is odd:
# for an odd size the three agree (an even-sized window is centred differently by each).
register_op(OpSpec("lrn", _infer_lrn, {"size": REQUIRED, "alpha": 1e-4, "beta": 0.75, "bias": 1.0}, category="norm",
                   types={"size": POS_INT, "alpha": float_kind, "beta": float_kind, "bias": float_kind}))
# Element-wise quotient of two tensors, broadcasting as add and mul do (torch.div, ONNX Div,
# TFLite DIV); a quotient by a constant scalar is a ``scale``.
register_op(OpSpec("div", _broadcast, arity=(2, 2)))


def _infer_resize(a: dict, ins: list[Shape]) -> list[Shape]:
    _need_rank(ins[0], 4)
    h, w = a["size"]
    return [[1, ins[0][1], h, w]]


# Nearest-neighbour resize of an image to an output size [H, W] of any ratio, with PyTorch's
# 'nearest' (source index floor(dst * in / out), TFLite's legacy rule): SCNet's self-calibration
# brings a pooled map back to its input's size (3 -> 14 at 14 x 14). An integer ratio is an upsample.
register_op(OpSpec("resize", _infer_resize, {"size": REQUIRED}, category="resize", types={"size": pair_kind(1)}))


def _index_list(v: Any, key: str) -> list[int]:
    """A gather's indices: at least one non-negative int, at most ``limits.IR_INDICES`` of them
    (one per element picked: a CondenseNet layer picks ~2,000 channels, more than ``MAX_LIST``)."""
    ok = isinstance(v, (list, tuple)) and 1 <= len(v) <= limits.IR_INDICES
    if not ok or not all(isinstance(x, int) and not isinstance(x, bool) and 0 <= x <= MAX_SIZE for x in v):
        raise OpError(f"{key} must be a list of 1 to {limits.IR_INDICES} non-negative ints, got {v!r}"[:300])
    return list(v)


def _infer_gather(a: dict, ins: list[Shape]) -> list[Shape]:
    x = ins[0]
    ax = _axis(a, len(x))
    if ax == 0:
        raise OpError("gather on the batch axis 0 (the IR's tensors have batch 1)")
    bad = [i for i in a["indices"] if i >= x[ax]]
    if bad:
        raise OpError(f"gather index {bad[0]} out of range for the {x[ax]} elements of axis {ax} of {x}")
    out = list(x)
    out[ax] = len(a["indices"])
    return [out]


# A gather of constant indices along one axis (torch.index_select, ONNX Gather, TFLite GATHER):
# CondenseNet picks the input channels of its learned group convolutions and of its classifier
# so (axis 1 of an image or of a [1, F] vector). Indices may repeat or be left out; a copy, no
# MACs: its cost is the memory it reads and writes.
register_op(OpSpec("gather", _infer_gather, {"indices": REQUIRED, "axis": 1}, category="shuffle",
                   types={"indices": _index_list, "axis": AXIS}))


# ---------------------------------------------------------------- op configurations
# An op's *configuration* is what a per-op latency model keys on: the USC study's Table 2 layout
# ``(op type, in spatial, in channels, out spatial, out channels, kernel, stride, padding, groups,
# fan-in)``. The IR computes it once, when it infers the node's shapes (it has the input shapes in
# hand there), so predicting thousands of graphs in a NAS loop reads it instead of walking each
# node's inputs again. Ops whose kernel or padding column comes from shapes or input counts have
# a rule here; every windowed op (an attribute ``kernel``) takes its window; the rest count 1.
#
# Tensors that are not square feature maps (tokens [1, N, C], attention tensors [1, h, N, d], a
# vector [1, F]) are described by their element count as channels at 1 px, so an element-wise
# op's size is right whatever the layout (pipelines.dataset.opfeatures describes measured TFLite
# ops the same way). A product over rows keeps its rows in the ``kernel`` column and its batch in
# ``groups``: a fully connected layer over N tokens is (fc, 1, C_in, 1, C_out, N, 1, 0, 1, 1), a
# matmul [b, M, K] x [b, K, N] is (matmul, 1, K, 1, N, M, 1, 0, b, 2); a CNN's classifier is
# the fully connected layer with 1 row, as before.
Config = tuple  # (op type, hin, cin, hout, cout, kernel, stride, padding, groups, fan-in)


def _hc(shape: Shape) -> tuple[int, int]:
    """(channels, height) of a square [1, C, H, H]; any other tensor is its element count (the
    batch axis left out) of channels at 1 px."""
    if len(shape) == 4 and shape[2] == shape[3]:
        return shape[1], shape[2]
    return _numel(shape[1:]), 1


def _windowed_config(op: str, a: dict, nin: int, x: Shape, y: Shape) -> Config:
    # a window slides over [1, C, H, W]: channels and height, also of a non-square map
    cin, hin, cout, hout = x[1], x[2], y[1], y[2]
    k, st, p = a["kernel"][0], a["stride"][0], a["padding"][0]
    if op == "conv2d":  # split by groups as the USC importer does (groups = input channels: depthwise)
        g = a["groups"]
        return ("conv2d" if g == 1 else "dwconv2d" if g == cin else "group_conv2d", hin, cin, hout, cout, k, st, p, g, nin)
    return (op, hin, cin, hout, cout, k, st, p, 1, nin)


def _fc_config(a, ins, outs, hin, cin, hout, cout) -> Config:
    x = ins[0]
    return ("fc", 1, x[-1], 1, outs[0][-1], _numel(x[1:-1]), 1, 0, 1, len(ins))


def _matmul_config(a, ins, outs, hin, cin, hout, cout) -> Config:
    y = outs[0]
    return ("matmul", 1, ins[0][-1], 1, y[-1], y[-2], 1, 0, _numel(y[1:-2]), len(ins))


def _softmax_config(a, ins, outs, hin, cin, hout, cout) -> Config:
    # attention scores [1, h, N, N] are a square tensor, not a feature map: their element count,
    # as a converted model's SOFTMAX over [1, h, N, N] describes them
    n = _numel(ins[0][1:])
    return ("softmax", 1, n, 1, n, 1, 1, 0, 1, len(ins))


# rule(attrs, input shapes, output shapes, hin, cin, hout, cout) -> the configuration
CONFIG_RULES: dict[str, Callable[..., Config]] = {
    "global_avgpool": lambda a, ins, outs, hin, cin, hout, cout:
        ("global_avgpool", hin, cin, hout, cout, hin, 1, 0, 1, len(ins)),
    # a concat's "kernel" is its input count, as the TFLite files give it
    "concat": lambda a, ins, outs, hin, cin, hout, cout: ("concat", hin, cin, hout, cout, len(ins), 1, 0, 1, len(ins)),
    "split": lambda a, ins, outs, hin, cin, hout, cout: ("split", hin, cin, hout, cout, len(outs), 1, 0, 1, len(ins)),
    "pad": lambda a, ins, outs, hin, cin, hout, cout: ("pad", hin, cin, hout, cout, 1, 1, abs(hout - hin), 1, len(ins)),
    "crop": lambda a, ins, outs, hin, cin, hout, cout: ("crop", hin, cin, hout, cout, 1, 1, abs(hout - hin), 1, len(ins)),
    "fc": _fc_config,
    "matmul": _matmul_config,
    "softmax": _softmax_config,
}


# Every distinct configuration gets a small integer, process-wide, the first time a node has it:
# a per-op model maps these integers to its own table with one array look-up per graph
# (leaderboard.baselines.features), instead of hashing a 10-tuple per node.
_CONFIG_IDS: dict[Config, int] = {}
CONFIGS: list[Config] = []


def config_id(config: Config | None) -> int:
    """The process-wide integer of a configuration (-1 for None: an input node)."""
    if config is None:
        return -1
    i = _CONFIG_IDS.get(config)
    if i is None:
        i = _CONFIG_IDS[config] = len(CONFIGS)
        CONFIGS.append(config)
    return i


def op_config(op: str, a: dict, ins: list[Shape], outs: list[Shape]) -> Config | None:
    """The configuration of a node (None for an input: it runs nothing)."""
    if not ins:
        return None
    if "kernel" in a:
        return _windowed_config(op, a, len(ins), ins[0], outs[0])
    cin, hin = _hc(ins[0])
    cout, hout = _hc(outs[0])
    rule = CONFIG_RULES.get(op)
    if rule is not None:
        return rule(a, ins, outs, hin, cin, hout, cout)
    return (op, hin, cin, hout, cout, 1, 1, 0, 1, len(ins))
