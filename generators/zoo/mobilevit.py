"""MobileViT-XXS (Mehta and Rastegari, ICLR 2022) at its 256x256 input, as Apple's ml-cvnets
defines it.

Stem: 3x3/2 conv 16. MobileNetV2 blocks (1x1 expand + 3x3 depthwise, each BN + SiLU, linear 1x1
projection + BN; expansion 2, hidden width ``make_divisible(in * 2, 8)``, residual add at stride 1
with the width kept): layer 1 one block to 16; layer 2 three to 24 (the first stride 2). Layers 3,
4, 5: one stride-2 MobileNetV2 block to 48, 64, 80 channels, then a MobileViT block of width
d = 64, 80, 96 with 2, 4, 3 transformer blocks (4 heads, MLP 2d with SiLU, layer norm eps 1e-5):
local representation (3x3 conv + BN + SiLU, 1x1 conv to d without bias, BN or activation),
unfolding into 2x2-patch groups (``blocks.unfold``: [1, 4, N, d], attention within each group),
the transformer blocks and a layer norm, folding back, a 1x1 conv to the input width + BN + SiLU,
concatenation with the block's input and a 3x3 fusion conv + BN + SiLU. Last: 1x1 conv 320 +
BN + SiLU. Head: global average pool + FC 320 -> 1000. Convs have no bias. (At other input
sizes, a map that is not a whole number of 2x2 patches, which ml-cvnets resizes bilinearly to
the next multiple, is zero-padded at the bottom and right before unfolding and cropped after
folding: the same tensor sizes.)

Variants redraw every width as the zoo does (one output width per layer, shared by its
residual-connected blocks and its MobileViT block's output; the stem shares layer 1's), every spatial kernel (depthwise,
local and fusion convs, the stem), each MobileViT block's heads and width d (a multiple of the
heads), its number of transformer blocks (``depth_scale``) and every transformer block's MLP
ratio; the patch size stays 2.

``build_sizes`` builds any published MobileViT from its sizes (:class:`MobileViTSizes`); the
``mobilevit_s`` family is MobileViT-S.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..blocks import encoder_block, fold, make_divisible, unfold
from ..ir import Graph
from .registry import NUM_CLASSES, register_family
from .sampler import Sampler, conv, dwconv, head

ACT = "swish"  # SiLU
MLP_RATIO = 2.0
PATCH = 2


@dataclass(frozen=True)
class MobileViTSizes:
    """One published MobileViT: its widths, depths and MobileNetV2 expansion."""

    stem: int
    expansion: int  # of every MobileNetV2 block: hidden width make_divisible(in * expansion, 8)
    mv2_layers: tuple[tuple[int, int, int], ...]  # layers 1, 2: (out, blocks, stride)
    # layers 3..5 (stride 2 each): (out, transformer width d, transformer blocks, heads)
    vit_layers: tuple[tuple[int, int, int, int], ...]
    last: int


XXS = MobileViTSizes(stem=16, expansion=2, mv2_layers=((16, 1, 1), (24, 3, 2)),
                     vit_layers=((48, 64, 2, 4), (64, 80, 4, 4), (80, 96, 3, 4)), last=320)


def _mv2(g: Graph, x: str, choose: Sampler, key: str, out: int, ref_in: int, stride: int, residual: bool,
         expansion: int) -> str:
    with g.block(key.replace(".", "/")):
        hidden = choose.channels(key + ".expand", make_divisible(ref_in * expansion, 8))
        y = conv(g, x, choose, key + ".expand", hidden, 1, act=ACT)
        y = dwconv(g, y, choose, key + ".dw", 3, stride, act=ACT)
        y = conv(g, y, choose, key + ".project", out, 1, act=None)
        return g.add("add", [x, y]) if residual else y


def _mobilevit_block(g: Graph, x: str, choose: Sampler, key: str, ref_d: int, ref_depth: int, ref_heads: int) -> str:
    _, c, h, w = g.shape(x)
    heads = choose.heads(key + ".heads", ref_heads)
    d = choose.channels(key + ".dim", ref_d, multiple=heads)
    with g.block(key):
        y = conv(g, x, choose, key + ".local", c, 3, act=ACT)
        y = conv(g, y, choose, key + ".to_tokens", d, 1, bn=False, bias=False, act=None)
        ph, pw = -h % PATCH, -w % PATCH  # a map that is not a whole number of patches: zero-pad it
        if ph or pw:
            y = g.add("pad", y, pads=[0, ph, 0, pw])
        t = unfold(g, y, PATCH)
        for i in range(choose.depth(key + ".depth", ref_depth)):
            hidden = round(d * choose.ratio(f"{key}.block{i + 1}.mlp_ratio", MLP_RATIO))
            with g.block(f"transformer{i + 1}"):
                t = encoder_block(g, t, heads, act=ACT, hidden=hidden)
        y = fold(g, g.add("layernorm", t), PATCH, h + ph, w + pw)
        if ph or pw:
            y = g.add("crop", y, crops=[0, ph, 0, pw])
        y = conv(g, y, choose, key + ".proj", c, 1, act=ACT)
        return conv(g, g.add("concat", [x, y]), choose, key + ".fusion", c, 3, act=ACT)


def build_sizes(g: Graph, x: str, choose: Sampler, sizes: MobileViTSizes) -> str:
    """The MobileViT of ``sizes`` after input ``x`` (the builder of every MobileViT family)."""
    with g.block("stem"):
        x = conv(g, x, choose, "stem", choose.channels("stem", sizes.stem), 3, 2, act=ACT)
    ref_in = sizes.stem
    for s, (c, n, stride) in enumerate(sizes.mv2_layers):
        # a layer 1 of the stem's width adds the stem's output to its own: one width for both
        shared = s == 0 and c == sizes.stem
        out = choose.channels("stem" if shared else f"layer{s + 1}.out", c)
        for i in range(n):
            st = stride if i == 0 else 1
            x = _mv2(g, x, choose, f"layer{s + 1}.block{i + 1}", out, ref_in, st, st == 1 and ref_in == c,
                     sizes.expansion)
            ref_in = c
    for s, (c, d, depth, heads) in enumerate(sizes.vit_layers, start=3):
        out = choose.channels(f"layer{s}.out", c)
        x = _mv2(g, x, choose, f"layer{s}.block1", out, ref_in, 2, False, sizes.expansion)
        x = _mobilevit_block(g, x, choose, f"layer{s}.mobilevit", d, depth, heads)
        ref_in = c
    with g.block("last"):
        x = conv(g, x, choose, "last", choose.channels("last", sizes.last), 1, act=ACT)
    return head(g, x, NUM_CLASSES)


@register_family("mobilevit", reference="MobileViT-XXS at 256x256 (ml-cvnets mobilevit xx_small)",
                 params=1_272_024, input_size=256)
def build(g: Graph, x: str, choose: Sampler) -> str:
    return build_sizes(g, x, choose, XXS)
