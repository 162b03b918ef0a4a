"""MobileNetV3-Large 1.0 as torchvision's ``mobilenet_v3_large``.

Stem: 3x3/2 conv 16 + hard-swish. Fifteen bottlenecks (kernel, expanded width, output,
squeeze-excite, activation, stride) as below: 1x1 expand (skipped when the expanded width
equals the input's) + depthwise conv, each BN + activation, optional squeeze-excite
(bottleneck make_divisible(expanded / 4, 8), ReLU, hard-sigmoid), linear 1x1 projection;
a residual add when stride 1 and width kept. Last: 1x1 conv 960 + hard-swish. Head: global
average pool + FC 1280 + hard-swish + FC 1000. Convs have no bias except in SE and FC;
BN eps 1e-3.

Variants redraw every expanded, SE and hidden width and one output width per run of
residual-connected blocks (the stem shares one with the first block, which adds the stem
output to its own).
"""
from __future__ import annotations

from ..blocks import make_divisible
from ..ir import Graph
from .registry import NUM_CLASSES, register_family
from .sampler import Sampler, conv, dwconv, head, squeeze_excite

EPS = 1e-3
STEM = 16
# kernel, expanded, out, SE, activation, stride
BLOCKS = [
    (3, 16, 16, False, "relu", 1),
    (3, 64, 24, False, "relu", 2),
    (3, 72, 24, False, "relu", 1),
    (5, 72, 40, True, "relu", 2),
    (5, 120, 40, True, "relu", 1),
    (5, 120, 40, True, "relu", 1),
    (3, 240, 80, False, "hswish", 2),
    (3, 200, 80, False, "hswish", 1),
    (3, 184, 80, False, "hswish", 1),
    (3, 184, 80, False, "hswish", 1),
    (3, 480, 112, True, "hswish", 1),
    (3, 672, 112, True, "hswish", 1),
    (5, 672, 160, True, "hswish", 2),
    (5, 960, 160, True, "hswish", 1),
    (5, 960, 160, True, "hswish", 1),
]
LAST = 960
HIDDEN = 1280


def width_keys(blocks: list[tuple], stem: int = STEM) -> list[str]:
    """One key per run of blocks joined by residual adds: a block starts a run unless it adds its
    input (stride 1, width kept)."""
    keys, ref_in, run = [], stem, 0
    for _, _, out, _, _, stride in blocks:
        if not (stride == 1 and ref_in == out):
            run += 1
        keys.append(f"width{run}")
        ref_in = out
    return keys


WIDTH_KEYS = width_keys(BLOCKS)


def body(g: Graph, x: str, choose: Sampler, blocks: list[tuple], keys: list[str], last: int, hidden: int,
         stem_key: str, stem: int = STEM) -> str:
    """A MobileNetV3 from the stem to the classifier (the module doc's layers), one definition for
    the Large and Small networks. ``keys``: :func:`width_keys` of ``blocks``; ``stem_key``: the
    sampler key of the stem's width (the Large network shares its first run's)."""
    with g.block("stem"):
        x = conv(g, x, choose, "stem", choose.channels(stem_key, stem), 3, 2, act="hswish", eps=EPS)
    ref_in = stem
    for i, (k, exp, c, se, act, stride) in enumerate(blocks):
        key = f"block{i + 1}"
        out = choose.channels(keys[i], c)
        with g.block(key):
            y = x
            if exp != ref_in:
                y = conv(g, y, choose, key + ".expand", choose.channels(key + ".expand", exp), 1, act=act, eps=EPS)
            y = dwconv(g, y, choose, key + ".dw", k, stride, act=act, eps=EPS)
            if se:
                y = squeeze_excite(g, y, choose, key + ".se", make_divisible(exp // 4, 8), act="relu", gate="hsigmoid")
            y = conv(g, y, choose, key + ".project", out, 1, act=None, eps=EPS)
            if stride == 1 and ref_in == c:
                y = g.add("add", [x, y])
        x, ref_in = y, c
    with g.block("last"):
        x = conv(g, x, choose, "last", choose.channels("last", last), 1, act="hswish", eps=EPS)
    return head(g, x, NUM_CLASSES, [choose.channels("hidden", hidden)], act="hswish")


@register_family("mobilenetv3", reference="MobileNetV3-Large 1.0 (torchvision mobilenet_v3_large)", params=5_483_032)
def build(g: Graph, x: str, choose: Sampler) -> str:
    return body(g, x, choose, BLOCKS, WIDTH_KEYS, LAST, HIDDEN, stem_key=WIDTH_KEYS[0])
