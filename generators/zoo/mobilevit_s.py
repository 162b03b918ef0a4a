"""MobileViT-S (Mehta and Rastegari, ICLR 2022) at its 256x256 input: the MobileViT of the
``mobilevit`` family (its module docstring has the blocks) at MobileViT-S's sizes.

Stem: 3x3/2 conv 16. MobileNetV2 blocks with expansion 4 (hidden width ``make_divisible(in * 4,
8)``): layer 1 one block to 32 (no residual: the width changes); layer 2 three to 64. Layers 3, 4,
5: one stride-2 MobileNetV2 block to 96, 128, 160 channels, then a MobileViT block of width
d = 144, 192, 240 with 2, 4, 3 transformer blocks (4 heads, MLP 2d with SiLU). Last: 1x1 conv 640 +
BN + SiLU. Head: global average pool + FC 640 -> 1000. Its 5,578,632 parameters are the published
model's (ml-cvnets, timm ``mobilevit_s``, Hugging Face ``apple/mobilevit-small``).

Variants redraw as the ``mobilevit`` family's do; here layer 1 draws its own width (it adds no
residual to the stem's output).
"""
from __future__ import annotations

from ..ir import Graph
from .mobilevit import MobileViTSizes, build_sizes
from .registry import register_family
from .sampler import Sampler

S = MobileViTSizes(stem=16, expansion=4, mv2_layers=((32, 1, 1), (64, 3, 2)),
                   vit_layers=((96, 144, 2, 4), (128, 192, 4, 4), (160, 240, 3, 4)), last=640)


@register_family("mobilevit_s", reference="MobileViT-S at 256x256 (ml-cvnets mobilevit small)",
                 params=5_578_632, input_size=256)
def build(g: Graph, x: str, choose: Sampler) -> str:
    return build_sizes(g, x, choose, S)
