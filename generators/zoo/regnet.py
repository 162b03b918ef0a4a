"""RegNetY-800MF (Radosavovic et al., CVPR 2020) as torchvision's ``regnet_y_800mf``.

The RegNet design space (depth 14, w0 56, wa 38.84, wm 2.4, group width 16, bottleneck ratio 1)
quantises to four stages of 1, 3, 8, 2 blocks with widths 64, 144, 320, 784 (each a multiple of
the group width). Stem: 3x3/2 conv 32 + BN + ReLU. Every block is a Y block: 1x1 conv + BN +
ReLU, 3x3 grouped conv (width / 16 groups; stride 2 in a stage's first block) + BN + ReLU,
squeeze-excite (bottleneck round(0.25 x the block's input width), ReLU, sigmoid), 1x1 conv + BN;
the shortcut is a strided 1x1 conv + BN in a stage's first block (its width or stride changes)
and the identity elsewhere; ReLU after the add. Head: global average pool + FC 784 -> 1000. Convs
have no bias except in SE and FC.

Variants redraw one width per stage (its blocks, its projection and its grouped convs: a multiple
of the group width 16, so the groups stay 16 wide), every SE bottleneck width, the stem's width
and every spatial kernel.
"""
from __future__ import annotations

from ..ir import Graph
from .registry import NUM_CLASSES, register_family
from .sampler import Sampler, conv, head, squeeze_excite

STEM = 32
STAGES = [(64, 1), (144, 3), (320, 8), (784, 2)]  # (width, blocks); every stage starts with stride 2
GROUP_WIDTH = 16
SE_RATIO = 0.25


@register_family("regnet", reference="RegNetY-800MF (torchvision regnet_y_800mf)", params=6_432_512)
def build(g: Graph, x: str, choose: Sampler) -> str:
    with g.block("stem"):
        x = conv(g, x, choose, "stem", choose.channels("stem", STEM), 3, 2)
    ref_in = STEM
    for s, (w, n) in enumerate(STAGES):
        out = choose.channels(f"stage{s + 1}.width", w, multiple=GROUP_WIDTH)
        for i in range(n):
            key = f"stage{s + 1}.block{i + 1}"
            stride = 2 if i == 0 else 1
            with g.block(key.replace(".", "/")):
                y = conv(g, x, choose, key + ".a", out, 1)
                y = conv(g, y, choose, key + ".b", out, 3, stride, groups=out // GROUP_WIDTH)
                y = squeeze_excite(g, y, choose, key + ".se", round(SE_RATIO * ref_in), act="relu", gate="sigmoid")
                y = conv(g, y, choose, key + ".c", out, 1, act=None)
                shortcut = conv(g, x, choose, key + ".proj", out, 1, stride, act=None) if i == 0 else x
                x = g.add("relu", g.add("add", [shortcut, y]))
            ref_in = w
    return head(g, x, NUM_CLASSES)
