"""Samplers that pick every layer's width and kernel size, and the layers that ask them.

A family builder asks its sampler for each layer's output channels
(``choose.channels(key, ref)``) and spatial kernel size (``choose.kernel(key, ref)``),
passing the reference value. The ``ReferenceSampler`` answers with the reference value, so
the builder makes the reference network; a ``VariantSampler`` redraws it the way nn-Meter
made its model-zoo variants (MobiSys'21, Sec. 3.3):

- output channels: an integer drawn uniformly from ``[0.2 * ref, 1.8 * ref]`` (the
  ``channel_scale`` bounds), restricted to multiples of ``multiple`` where the graph needs
  one (even widths before a channel shuffle); at least ``multiple``;
- kernel size: a spatial kernel (reference size > 1, in convolutions of any kind:
  dense, depthwise) is drawn from ``kernel_choices`` (default {1, 3, 5, 7, 9}) and padded
  'same' (``(k - 1) // 2``), so a stride-s layer always gives ``ceil(H / s)`` and no
  spatial size can shrink below the reference's; pointwise (1x1) convolutions stay 1x1
  and pooling windows keep their reference sizes. (nn-Meter's Table 2 supports this rule:
  its MobileNetV1 variants average 547 MFLOPs against the reference's 569, impossible if
  the pointwise convolutions, 95% of those FLOPs, had been redrawn up to 9x9.)

Transformer families (vit, mobilevit, mobilevit_s, efficientformer, levit, beit) also ask for
the following (convnext for depth and ratio, efficientnetv2 for depth):
- ``choose.depth(key, ref)``: a stage's number of blocks, an integer drawn uniformly from
  ``[lo * ref, hi * ref]`` (``depth_scale``, default [0.5, 1.5]; at least 1);
- ``choose.heads(key, ref)``: attention heads, an integer drawn uniformly from
  ``[lo * ref, hi * ref]`` (``heads_scale``, default [0.5, 2.0]; at least 1); the embedding width
  is then a ``channels`` draw with ``multiple=heads``, so the heads divide it;
- ``choose.ratio(key, ref)``: an MLP's hidden-to-width ratio, drawn from ``mlp_ratios``
  (default {1, 2, 3, 4}).

Draws are memoised by key: layers that must agree (the two sides of a residual add, the
units of a stage) ask with the same key and get the same value. Widths that follow from
the graph (a depthwise convolution's, a concat's) are not drawn at all. The classifier's
1000 outputs are fixed.
"""
from __future__ import annotations

import math
import random
from typing import Sequence

from .. import blocks
from ..blocks import activation
from ..ir import Graph

_EPS = 1e-9


class Sampler:
    """The interface family builders use; see the module docstring."""

    is_reference = False

    def channels(self, key: str, ref: int, multiple: int = 1) -> int:
        raise NotImplementedError

    def kernel(self, key: str, ref: int) -> int:
        raise NotImplementedError

    def padding(self, kernel: int, ref_kernel: int, ref_padding: int | None = None) -> int:
        """Padding for a convolution with the chosen ``kernel`` (reference: ``ref_padding``)."""
        raise NotImplementedError

    def depth(self, key: str, ref: int) -> int:
        raise NotImplementedError

    def heads(self, key: str, ref: int) -> int:
        raise NotImplementedError

    def ratio(self, key: str, ref: float) -> float:
        raise NotImplementedError


class ReferenceSampler(Sampler):
    """Gives back every reference value: the builder makes the reference network."""

    is_reference = True

    def channels(self, key: str, ref: int, multiple: int = 1) -> int:
        if ref % multiple:
            raise ValueError(f"{key}: reference width {ref} is not a multiple of {multiple}")
        return ref

    def kernel(self, key: str, ref: int) -> int:
        return ref

    def padding(self, kernel: int, ref_kernel: int, ref_padding: int | None = None) -> int:
        return (ref_kernel - 1) // 2 if ref_padding is None else ref_padding

    def depth(self, key: str, ref: int) -> int:
        return ref

    def heads(self, key: str, ref: int) -> int:
        return ref

    def ratio(self, key: str, ref: float) -> float:
        return ref


class ConfiguredSampler(ReferenceSampler):
    """Gives the value ``values`` names for a key (a width, kernel, depth, heads count or ratio)
    and the reference value for every other: a published sibling of the reference (ViT-B/16 from
    the ViT family's widths and heads). A layer's width and its kernel share a key in the builds
    (the variant sampler draws them apart), so a kernel is named ``<key>.kernel``. A key the
    build never asks is an error naming it."""

    is_reference = False

    def __init__(self, values: dict[str, float]):
        self.values = dict(values)
        self.asked: set[str] = set()

    def _get(self, key: str, ref: float) -> float:
        self.asked.add(key)
        return self.values.get(key, ref)

    def channels(self, key: str, ref: int, multiple: int = 1) -> int:
        value = int(self._get(key, ref))
        if value % multiple:
            raise ValueError(f"{key}: width {value} is not a multiple of {multiple}")
        return value

    def kernel(self, key: str, ref: int) -> int:
        return int(self._get(key + ".kernel", ref))

    def padding(self, kernel: int, ref_kernel: int, ref_padding: int | None = None) -> int:
        return super().padding(kernel, ref_kernel, ref_padding) if kernel == ref_kernel else (kernel - 1) // 2

    def depth(self, key: str, ref: int) -> int:
        return int(self._get(key, ref))

    def heads(self, key: str, ref: int) -> int:
        return int(self._get(key, ref))

    def ratio(self, key: str, ref: float) -> float:
        return float(self._get(key, ref))

    def check_used(self, family: str) -> None:
        unused = sorted(set(self.values) - self.asked)
        if unused:
            raise ValueError(f"{family}: the family's build never asks for {', '.join(unused)}")


class VariantSampler(Sampler):
    """Redraws widths and spatial kernels from ``rng`` (memoised by key)."""

    def __init__(
        self,
        rng: random.Random,
        channel_scale: Sequence[float] = (0.2, 1.8),
        kernel_choices: Sequence[int] = (1, 3, 5, 7, 9),
        depth_scale: Sequence[float] = (0.5, 1.5),
        heads_scale: Sequence[float] = (0.5, 2.0),
        mlp_ratios: Sequence[float] = (1.0, 2.0, 3.0, 4.0),
    ):
        self.rng = rng
        self.lo, self.hi = float(channel_scale[0]), float(channel_scale[1])
        self.kernel_choices = tuple(int(k) for k in kernel_choices)
        self.depth_scale = (float(depth_scale[0]), float(depth_scale[1]))
        self.heads_scale = (float(heads_scale[0]), float(heads_scale[1]))
        self.mlp_ratios = tuple(float(r) for r in mlp_ratios)
        self._channels: dict[str, tuple[int, int, int]] = {}
        self._kernels: dict[str, tuple[int, int]] = {}
        self._drawn: dict[str, tuple[float, float]] = {}  # depth, heads, ratio: key -> (ref, value)

    def channels(self, key: str, ref: int, multiple: int = 1) -> int:
        got = self._channels.get(key)
        if got is not None:
            if got[:2] != (ref, multiple):
                raise ValueError(f"{key}: asked for reference width {ref} (multiple {multiple}) after {got[0]} (multiple {got[1]})")
            return got[2]
        lo = max(1, math.ceil(self.lo * ref / multiple - _EPS))
        hi = max(lo, math.floor(self.hi * ref / multiple + _EPS))
        value = multiple * self.rng.randint(lo, hi)
        self._channels[key] = (ref, multiple, value)
        return value

    def kernel(self, key: str, ref: int) -> int:
        if ref == 1:
            return 1
        got = self._kernels.get(key)
        if got is not None:
            if got[0] != ref:
                raise ValueError(f"{key}: asked for reference kernel {ref} after {got[0]}")
            return got[1]
        value = self.rng.choice(self.kernel_choices)
        self._kernels[key] = (ref, value)
        return value

    def padding(self, kernel: int, ref_kernel: int, ref_padding: int | None = None) -> int:
        return (kernel - 1) // 2

    def _memo(self, key: str, ref: float, draw) -> float:
        got = self._drawn.get(key)
        if got is not None:
            if got[0] != ref:
                raise ValueError(f"{key}: asked with reference {ref} after {got[0]}")
            return got[1]
        value = draw()
        self._drawn[key] = (ref, value)
        return value

    def _scaled(self, key: str, ref: int, scale: tuple[float, float]) -> int:
        lo = max(1, math.ceil(scale[0] * ref - _EPS))
        hi = max(lo, math.floor(scale[1] * ref + _EPS))
        return int(self._memo(key, ref, lambda: self.rng.randint(lo, hi)))

    def depth(self, key: str, ref: int) -> int:
        return self._scaled(key, ref, self.depth_scale)

    def heads(self, key: str, ref: int) -> int:
        return self._scaled(key, ref, self.heads_scale)

    def ratio(self, key: str, ref: float) -> float:
        return self._memo(key, ref, lambda: self.rng.choice(self.mlp_ratios))


# ---------------------------------------------------------------- layers that ask a sampler
def conv(
    g: Graph,
    x: str,
    choose: Sampler,
    key: str,
    out: int,
    kernel: int = 1,
    stride: int = 1,
    padding: int | None = None,
    groups: int = 1,
    act: str | None = "relu",
    bn: bool = True,
    eps: float = 1e-5,
    bias: bool | None = None,
) -> str:
    """Convolution (+ batch norm) (+ activation); the conv has a bias iff no BN follows, unless ``bias`` says.

    ``out`` is the output width as already chosen; ``kernel`` and ``padding`` are the
    reference's, and the kernel is redrawn under ``key`` when it is spatial.
    """
    k = choose.kernel(key, kernel)
    p = choose.padding(k, kernel, padding)
    bias = (not bn) if bias is None else bias
    y = g.add("conv2d", x, out_channels=out, kernel=k, stride=stride, padding=p, groups=groups, bias=bias)
    if bn:
        y = g.add("batchnorm", y, eps=eps)
    return activation(g, y, act)


def dwconv(
    g: Graph, x: str, choose: Sampler, key: str, kernel: int = 3, stride: int = 1,
    act: str | None = "relu", eps: float = 1e-5, padding: int | None = None,
) -> str:
    """Depthwise convolution + batch norm + activation: width and groups follow the input."""
    c = g.shape(x)[1]
    return conv(g, x, choose, key, c, kernel, stride, padding, groups=c, act=act, eps=eps)


def squeeze_excite(
    g: Graph, x: str, choose: Sampler, key: str, ref_mid: int, act: str = "relu", gate: str = "hsigmoid",
) -> str:
    """Squeeze-and-excite with a redrawn bottleneck width (1x1 convs with bias, no BN)."""
    return blocks.squeeze_excite(g, x, act=act, gate=gate, mid=choose.channels(key, ref_mid))


def head(g: Graph, x: str, num_classes: int, hidden: Sequence[int] = (), act: str = "relu", pool: bool = True) -> str:
    """Classifier: global average pool (or none) + flatten + hidden FC layers + logits."""
    with g.block("classifier"):
        y = g.add("global_avgpool", x) if pool else x
        y = g.add("flatten", y)
        for h in hidden:
            y = activation(g, g.add("fc", y, out_features=h), act)
        return g.add("fc", y, out_features=num_classes)
