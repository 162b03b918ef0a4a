"""ViT / DeiT-Tiny (Dosovitskiy et al. 2021; Touvron et al. 2021, DeiT-Ti).

Patch embedding: a 16x16 stride-16 conv to 192 channels (196 tokens at 224x224), a class token
prepended (``cls_token``) and a learned position embedding added (``pos_embed``, 197 x 192).
Twelve pre-norm encoder blocks (layer norm, eps 1e-6; 3-head self-attention with a qkv and a
projection fc, both with bias; MLP 192 -> 768 -> 192 with exact GELU; residual adds). Head:
layer norm, the class token read out (``blocks.class_token_readout``), FC 192 -> 1000: DeiT-Ti's
5,717,416 parameters exactly.

Variants redraw the heads (``heads_scale`` x 3), the embedding width as a multiple of the heads
(``channel_scale`` x 192, shared by every block: the residual stream), the depth
(``depth_scale`` x 12) and every block's MLP ratio (``mlp_ratios``); the patch size stays 16
(it fixes the token count).
"""
from __future__ import annotations

from ..blocks import class_token_readout, encoder_block, patch_embed
from ..ir import Graph
from .registry import NUM_CLASSES, register_family
from .sampler import Sampler

PATCH = 16
WIDTH = 192
HEADS = 3
DEPTH = 12
MLP_RATIO = 4.0
EPS = 1e-6


@register_family("vit", reference="DeiT-Ti / ViT-Ti/16 (class token, position embedding)", params=5_717_416)
def build(g: Graph, x: str, choose: Sampler) -> str:
    heads = choose.heads("heads", HEADS)
    width = choose.channels("embed", WIDTH, multiple=heads)
    x = g.add("pos_embed", g.add("cls_token", patch_embed(g, x, width, PATCH)))
    for i in range(choose.depth("depth", DEPTH)):
        hidden = round(width * choose.ratio(f"block{i + 1}.mlp_ratio", MLP_RATIO))
        with g.block(f"block{i + 1}"):
            x = encoder_block(g, x, heads, act="gelu", eps=EPS, hidden=hidden)
    with g.block("head"):
        x = class_token_readout(g, g.add("layernorm", x, eps=EPS))
        return g.add("fc", x, out_features=NUM_CLASSES)
