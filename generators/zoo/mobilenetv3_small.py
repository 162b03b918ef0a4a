"""MobileNetV3-Small 1.0 (Howard et al., ICCV 2019) as torchvision's ``mobilenet_v3_small``.

Stem: 3x3/2 conv 16 + hard-swish. Eleven bottlenecks (kernel, expanded width, output,
squeeze-excite, activation, stride) as below: 1x1 expand (skipped when the expanded width equals
the input's: the first block) + depthwise conv, each BN + activation, optional squeeze-excite
(bottleneck make_divisible(expanded / 4, 8), ReLU, hard-sigmoid), linear 1x1 projection + BN; a
residual add when stride 1 and the width is kept. Last: 1x1 conv 576 + hard-swish. Head: global
average pool + FC 1024 + hard-swish + FC 1000. Convs have no bias except in SE and FC; BN eps
1e-3. The first block's squeeze-excite follows a stride-2 depthwise conv, and the first block
adds no residual (its stride is 2).

Variants redraw every expanded, SE and hidden width, one output width per run of
residual-connected blocks, the stem's and the last conv's widths, and every spatial kernel.
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
    (3, 16, 16, True, "relu", 2),
    (3, 72, 24, False, "relu", 2),
    (3, 88, 24, False, "relu", 1),
    (5, 96, 40, True, "hswish", 2),
    (5, 240, 40, True, "hswish", 1),
    (5, 240, 40, True, "hswish", 1),
    (5, 120, 48, True, "hswish", 1),
    (5, 144, 48, True, "hswish", 1),
    (5, 288, 96, True, "hswish", 2),
    (5, 576, 96, True, "hswish", 1),
    (5, 576, 96, True, "hswish", 1),
]
LAST = 576
HIDDEN = 1024


def _width_keys() -> list[str]:
    """One key per run of blocks joined by residual adds."""
    keys, ref_in, run = [], STEM, 0
    for _, _, out, _, _, stride in BLOCKS:
        if not (stride == 1 and ref_in == out):
            run += 1
        keys.append(f"width{run}")
        ref_in = out
    return keys


WIDTH_KEYS = _width_keys()


@register_family("mobilenetv3_small", reference="MobileNetV3-Small 1.0 (torchvision mobilenet_v3_small)",
                 params=2_542_856)
def build(g: Graph, x: str, choose: Sampler) -> str:
    with g.block("stem"):
        x = conv(g, x, choose, "stem", choose.channels("stem", STEM), 3, 2, act="hswish", eps=EPS)
    ref_in = STEM
    for i, (k, exp, c, se, act, stride) in enumerate(BLOCKS):
        key = f"block{i + 1}"
        out = choose.channels(WIDTH_KEYS[i], c)
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
        x = conv(g, x, choose, "last", choose.channels("last", LAST), 1, act="hswish", eps=EPS)
    return head(g, x, NUM_CLASSES, [choose.channels("hidden", HIDDEN)], act="hswish")
