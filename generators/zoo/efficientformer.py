"""EfficientFormer-L1 (Li et al., NeurIPS 2022) as its reference code and timm's
``efficientformer_l1`` define it.

Stem: two 3x3/2 convs (24, 48) + BN + ReLU. Four stages of widths 48, 96, 224, 448 with 3, 2, 6,
4 blocks; stages 2-4 start with a 3x3/2 conv + BN (the embedding). A 4D meta-block (on images)
is x + (avgpool3x3(x) - x) (stride 1, padding 1, padding not counted; the subtraction is an add
of ``scale(-1)``) then x + MLP(x) with the MLP 1x1 conv (4x) + BN + GELU + 1x1 conv + BN (convs
with bias). The last block of stage 4 is a 3D meta-block on the 49 tokens: x + attention(ln(x)),
then x + MLP(ln(x)) (fc 4x + GELU + fc; layer norm eps 1e-5). Its attention is LeViT's: 8 heads,
one qkv fc to 8 x (32 + 32 + 128), viewed per head and split into q, k (key dim 32) and v
(value dim 4 x 32), ``softmax(q k^T * 32^-0.5) v``, heads merged to 1024 and projected back to
448. Head: layer norm, mean over the tokens, a classifier FC and a distillation FC (448 -> 1000
each) averaged, as at inference.

Not expressible in the IR, which has no learned constant tensors, and left out: the layer scales
(a learned per-channel multiply of each residual branch: 6,784 parameters, one multiply per
block) and the attention's learned position biases added to the scores (8 x 49 = 392
parameters). The published 12.3 M parameters include both.

Variants redraw every stage width (one draw per stage, shared by its residual stream), the stem
widths, every MLP's hidden width through its ratio (``mlp_ratios``), the number of 4D blocks
per stage (``depth_scale``), the attention heads (``heads_scale``) and every spatial conv kernel
(stem and embeddings); the pooling window keeps its size (the zoo's rule), as do the key and
value dims of a head and the one 3D block.
"""
from __future__ import annotations

from ..ir import Graph
from .registry import NUM_CLASSES, register_family
from .sampler import Sampler, conv

STEM = [24, 48]
STAGES = [(48, 3), (96, 2), (224, 6), (448, 4)]  # (width, blocks)
VIT_BLOCKS = 1  # the last block of the last stage is a 3D (attention) meta-block
MLP_RATIO = 4.0
POOL = 3
HEADS = 8
KEY_DIM = 32
ATTN_RATIO = 4  # value dim = ATTN_RATIO * KEY_DIM


def _meta4d(g: Graph, x: str, choose: Sampler, key: str) -> str:
    c = g.shape(x)[1]
    with g.block(key.replace(".", "/")):
        with g.block("token_mixer"):
            pooled = g.add("avgpool", x, kernel=POOL, stride=1, padding=POOL // 2, count_include_pad=False)
            x = g.add("add", [x, g.add("add", [pooled, g.add("scale", x, factor=-1.0)])])
        hidden = round(c * choose.ratio(key + ".mlp_ratio", MLP_RATIO))
        with g.block("mlp"):
            y = g.add("conv2d", x, out_channels=hidden, kernel=1)
            y = g.add("gelu", g.add("batchnorm", y))
            y = g.add("batchnorm", g.add("conv2d", y, out_channels=c, kernel=1))
        return g.add("add", [x, y])


def _attention(g: Graph, x: str, heads: int) -> str:
    """LeViT-style attention over tokens [1, N, C]: per head a key dim for q and k and a larger
    value dim, one qkv fc viewed as [1, N, heads, 2 * key + value] and split per head."""
    _, n, c = g.shape(x)
    d = ATTN_RATIO * KEY_DIM
    with g.block("attn"):
        qkv = g.add("fc", x, out_features=heads * (2 * KEY_DIM + d))
        qkv = g.add("transpose", g.add("reshape", qkv, shape=[1, n, heads, 2 * KEY_DIM + d]), perm=[0, 2, 1, 3])
        q, k, v = g.add_multi("split", qkv, sections=[KEY_DIM, KEY_DIM, d], axis=-1)
        s = g.add("matmul", [q, g.add("transpose", k, perm=[0, 1, 3, 2])])
        s = g.add("softmax", g.add("scale", s, factor=KEY_DIM ** -0.5), axis=-1)
        y = g.add("transpose", g.add("matmul", [s, v]), perm=[0, 2, 1, 3])
        return g.add("fc", g.add("reshape", y, shape=[1, n, heads * d]), out_features=c)


def _meta3d(g: Graph, x: str, choose: Sampler, key: str, heads: int) -> str:
    c = g.shape(x)[-1]
    with g.block(key.replace(".", "/")):
        x = g.add("add", [x, _attention(g, g.add("layernorm", x), heads)])
        hidden = round(c * choose.ratio(key + ".mlp_ratio", MLP_RATIO))
        with g.block("mlp"):
            y = g.add("gelu", g.add("fc", g.add("layernorm", x), out_features=hidden))
            return g.add("add", [x, g.add("fc", y, out_features=c)])


@register_family("efficientformer", reference="EfficientFormer-L1 without layer scales and attention biases",
                 params=12_289_928)
def build(g: Graph, x: str, choose: Sampler) -> str:
    with g.block("stem"):
        for i, c in enumerate(STEM):
            key = f"stem.conv{i + 1}"
            x = conv(g, x, choose, key, choose.channels(key, c), 3, 2)
    for s, (c, n) in enumerate(STAGES):
        width = choose.channels(f"stage{s + 1}.width", c)
        if s > 0:
            key = f"stage{s + 1}.embed"
            with g.block(key.replace(".", "/")):
                x = conv(g, x, choose, key, width, 3, 2, act=None)
        last = s == len(STAGES) - 1
        vit = VIT_BLOCKS if last else 0
        for i in range(choose.depth(f"stage{s + 1}.depth", n - vit)):
            x = _meta4d(g, x, choose, f"stage{s + 1}.block{i + 1}")
    _, c, h, w = g.shape(x)
    x = g.add("transpose", g.add("reshape", x, shape=[1, c, h * w]), perm=[0, 2, 1])  # flatten(2).transpose(1, 2)
    heads = choose.heads("heads", HEADS)
    for i in range(VIT_BLOCKS):
        x = _meta3d(g, x, choose, f"stage{len(STAGES)}.vit{i + 1}", heads)
    with g.block("head"):
        x = g.add("mean", g.add("layernorm", x), axis=1)
        y = g.add("add", [g.add("fc", x, out_features=NUM_CLASSES), g.add("fc", x, out_features=NUM_CLASSES)])
        return g.add("scale", y, factor=0.5)
