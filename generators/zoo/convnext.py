"""ConvNeXt-T (Liu et al., CVPR 2022) as torchvision's ``convnext_tiny``.

Stem: a 4x4 stride-4 conv to 96 channels (with bias) + a layer norm over the channels
(``layernorm`` on axis 1, eps 1e-6). Four stages of 3, 3, 9, 3 blocks with widths 96, 192, 384,
768; stages 2-4 start with a downsampling layer: channel layer norm, then a 2x2 stride-2 conv
(with bias) to the stage width. A block is x + f(x) with f: 7x7 depthwise conv (with bias), the
map permuted to channels-last ([1, H, W, C]), layer norm (eps 1e-6), FC to 4C, exact GELU, FC
back to C, permuted back. Head: global average pool, flattened to [1, 768], layer norm, FC 768 ->
1000 (torchvision normalises the pooled [1, 768, 1, 1] map over its channels, then flattens: the
same function).

Not expressible in the IR, which has no learned constant tensors to multiply by, and left out:
the layer scale of every block (a learned per-channel multiply of f(x), initialised to 1e-6:
C parameters per block, 6,624 in ConvNeXt-T). torchvision's ConvNeXt-T has 28,589,128
parameters with them.

Variants redraw every stage width (one draw per stage, shared by its residual stream and, for
the first stage, the stem), every block's depthwise kernel, each stage's number of blocks
(``depth_scale``) and every block's MLP ratio (``mlp_ratios``); the patchify stem and the
downsampling convs keep their kernel (it equals their stride). ``configured`` builds the
published siblings: ConvNeXt-B is stage widths 128, 256, 512, 1024 with 27 blocks in stage 3.
"""
from __future__ import annotations

from ..ir import Graph
from .registry import NUM_CLASSES, register_family
from .sampler import Sampler, conv

STEM_PATCH = 4
STAGES = [(96, 3), (192, 3), (384, 9), (768, 3)]  # (width, blocks)
KERNEL = 7
MLP_RATIO = 4.0
EPS = 1e-6


def _block(g: Graph, x: str, choose: Sampler, key: str) -> str:
    c = g.shape(x)[1]
    with g.block(key.replace(".", "/")):
        y = conv(g, x, choose, key + ".dw", c, KERNEL, groups=c, act=None, bn=False)
        y = g.add("layernorm", g.add("transpose", y, perm=[0, 2, 3, 1]), eps=EPS)
        hidden = round(c * choose.ratio(key + ".mlp_ratio", MLP_RATIO))
        y = g.add("gelu", g.add("fc", y, out_features=hidden))
        y = g.add("transpose", g.add("fc", y, out_features=c), perm=[0, 3, 1, 2])
        return g.add("add", [x, y])


@register_family("convnext", reference="ConvNeXt-T without layer scales (torchvision convnext_tiny)",
                 params=28_582_504)
def build(g: Graph, x: str, choose: Sampler) -> str:
    for s, (c, n) in enumerate(STAGES):
        width = choose.channels(f"stage{s + 1}.width", c)
        if s == 0:
            with g.block("stem"):
                x = g.add("conv2d", x, out_channels=width, kernel=STEM_PATCH, stride=STEM_PATCH)
                x = g.add("layernorm", x, axis=1, eps=EPS)
        else:
            with g.block(f"stage{s + 1}/downsample"):
                x = g.add("layernorm", x, axis=1, eps=EPS)
                x = g.add("conv2d", x, out_channels=width, kernel=2, stride=2)
        for i in range(choose.depth(f"stage{s + 1}.depth", n)):
            x = _block(g, x, choose, f"stage{s + 1}.block{i + 1}")
    with g.block("classifier"):
        x = g.add("layernorm", g.add("flatten", g.add("global_avgpool", x)), eps=EPS)
        return g.add("fc", x, out_features=NUM_CLASSES)
