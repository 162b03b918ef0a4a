"""EfficientNetV2-S (Tan and Le, ICML 2021) as torchvision's ``efficientnet_v2_s``.

Stem: 3x3/2 conv 24 + BN + SiLU. Six stages (block, expansion, stride, output width, blocks):
(fused, 1, 1, 24, 2) (fused, 4, 2, 48, 4) (fused, 4, 2, 64, 4) (MBConv, 4, 2, 128, 6)
(MBConv, 6, 1, 160, 9) (MBConv, 6, 2, 256, 15); every kernel is 3x3 and only a stage's first
block has its stride. A fused block is one 3x3 conv to the expanded width + BN + SiLU and a linear
1x1 projection + BN (at expansion 1 the 3x3 conv goes straight to the output width, with its BN
and SiLU, and nothing follows). An MBConv block is a 1x1 expansion + BN + SiLU, a 3x3 depthwise
conv + BN + SiLU, squeeze-excite (bottleneck a quarter of the block's input width, SiLU,
sigmoid) and a linear 1x1 projection + BN. A block adds its input when it has stride 1 and keeps
the width. Last: 1x1 conv 1280 + BN + SiLU. Head: global average pool + FC 1280 -> 1000. Convs
have no bias except in SE and FC; BN eps 1e-3.

Variants redraw one output width per stage (shared by its blocks' residual adds; the stem shares
the first stage's, which adds the stem's output), every expanded and SE width, the last conv's
width, every spatial kernel and, as EfficientNet's compound scaling does, each stage's number of
blocks (``depth_scale``).
"""
from __future__ import annotations

from ..ir import Graph
from .registry import NUM_CLASSES, register_family
from .sampler import Sampler, conv, dwconv, head, squeeze_excite

ACT = "swish"  # SiLU
EPS = 1e-3
STEM = 24
# (fused, expansion, stride, output width, blocks)
STAGES = [(True, 1, 1, 24, 2), (True, 4, 2, 48, 4), (True, 4, 2, 64, 4),
          (False, 4, 2, 128, 6), (False, 6, 1, 160, 9), (False, 6, 2, 256, 15)]
KERNEL = 3
LAST = 1280


def _fused(g: Graph, x: str, choose: Sampler, key: str, out: int, ref_in: int, t: int, stride: int) -> str:
    if t == 1:
        return conv(g, x, choose, key + ".conv", out, KERNEL, stride, act=ACT, eps=EPS)
    y = conv(g, x, choose, key + ".expand", choose.channels(key + ".expand", ref_in * t), KERNEL, stride, act=ACT,
             eps=EPS)
    return conv(g, y, choose, key + ".project", out, 1, act=None, eps=EPS)


def _mbconv(g: Graph, x: str, choose: Sampler, key: str, out: int, ref_in: int, t: int, stride: int) -> str:
    y = conv(g, x, choose, key + ".expand", choose.channels(key + ".expand", ref_in * t), 1, act=ACT, eps=EPS)
    y = dwconv(g, y, choose, key + ".dw", KERNEL, stride, act=ACT, eps=EPS)
    y = squeeze_excite(g, y, choose, key + ".se", max(1, ref_in // 4), act=ACT, gate="sigmoid")
    return conv(g, y, choose, key + ".project", out, 1, act=None, eps=EPS)


@register_family("efficientnetv2", reference="EfficientNetV2-S (torchvision efficientnet_v2_s)", params=21_458_488)
def build(g: Graph, x: str, choose: Sampler) -> str:
    with g.block("stem"):
        # the first stage adds the stem's output to its own: one width for both
        x = conv(g, x, choose, "stem", choose.channels("stage1.out", STEM), KERNEL, 2, act=ACT, eps=EPS)
    ref_in = STEM
    for s, (fused, t, stride, c, n) in enumerate(STAGES):
        out = choose.channels(f"stage{s + 1}.out", c)
        for i in range(choose.depth(f"stage{s + 1}.depth", n)):
            key = f"stage{s + 1}.block{i + 1}"
            st = stride if i == 0 else 1
            with g.block(key.replace(".", "/")):
                y = (_fused if fused else _mbconv)(g, x, choose, key, out, ref_in, t, st)
                if st == 1 and ref_in == c:
                    y = g.add("add", [x, y])
            x, ref_in = y, c
    with g.block("last"):
        x = conv(g, x, choose, "last", choose.channels("last", LAST), 1, act=ACT, eps=EPS)
    return head(g, x, NUM_CLASSES)
