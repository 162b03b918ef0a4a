"""BEiT-B/16 (Bao et al., ICLR 2022) fine-tuned for ImageNet classification, as Hugging Face's
``BeitForImageClassification`` (``microsoft/beit-base-patch16-224``) runs it at inference.

Patch embedding: a 16x16 stride-16 conv to 768 channels (196 tokens at 224x224) and a class token
prepended (``cls_token``); no absolute position embedding. Twelve pre-norm encoder blocks (layer
norm eps 1e-12): x + attention(ln(x)), then x + MLP(ln(x)) with the MLP 768 -> 3072 -> 768 and
exact GELU. The attention has 12 heads of 64 and separate q, k and v FCs (q and v with a bias, k
without), ``softmax(q k^T / 8 + B) v`` with B the block's relative position bias, the heads merged
and an output FC. Head: the mean of the 196 patch tokens (the class token left out), a layer
norm, FC 768 -> 1000.

The relative position bias is a learned table per block (one value per head for each of the
(2 x 14 - 1)^2 relative offsets and three class-token pairs), gathered into a [12, 197, 197]
tensor; the IR holds that tensor, the constant an export holds, added to the scores
(``pos_embed``, with its parameters). Not expressible in the IR, which has no learned constant
tensors to multiply by, and left out: the layer scales (a learned per-channel multiply of both
residual branches of every block, 1,536 parameters per block).

Variants redraw the heads (``heads_scale``), the embedding width as a multiple of the heads
(shared by every block: the residual stream), the depth (``depth_scale``) and every block's MLP
ratio (``mlp_ratios``); the patch size stays 16.
"""
from __future__ import annotations

from ..blocks import patch_embed
from ..ir import Graph
from .registry import NUM_CLASSES, register_family
from .sampler import Sampler

PATCH = 16
WIDTH = 768
HEADS = 12
DEPTH = 12
MLP_RATIO = 4.0
EPS = 1e-12


def _per_head(g: Graph, x: str, heads: int, perm: tuple[int, ...] = (0, 2, 1, 3)) -> str:
    """Tokens [1, N, C] -> [1, heads, N, C / heads] (``perm`` of [1, N, heads, C / heads]; the keys
    take [1, heads, C / heads, N], transposed in the same step)."""
    _, n, c = g.shape(x)
    return g.add("transpose", g.add("reshape", x, shape=[1, n, heads, c // heads]), perm=list(perm))


def _attention(g: Graph, x: str, heads: int) -> str:
    _, n, c = g.shape(x)
    with g.block("attn"):
        q = _per_head(g, g.add("fc", x, out_features=c), heads)
        kt = _per_head(g, g.add("fc", x, out_features=c, bias=False), heads, (0, 2, 3, 1))
        v = _per_head(g, g.add("fc", x, out_features=c), heads)
        s = g.add("matmul", [q, kt])
        s = g.add("pos_embed", g.add("scale", s, factor=(c // heads) ** -0.5))  # the relative position bias
        y = g.add("matmul", [g.add("softmax", s, axis=-1), v])
        y = g.add("reshape", g.add("transpose", y, perm=[0, 2, 1, 3]), shape=[1, n, c])
        return g.add("fc", y, out_features=c)


@register_family("beit", reference="BEiT-B/16 at 224x224 without layer scales, its relative position biases "
                 "as [12, 197, 197] constants", params=91_995_640)
def build(g: Graph, x: str, choose: Sampler) -> str:
    heads = choose.heads("heads", HEADS)
    width = choose.channels("embed", WIDTH, multiple=heads)
    x = g.add("cls_token", patch_embed(g, x, width, PATCH))
    for i in range(choose.depth("depth", DEPTH)):
        hidden = round(width * choose.ratio(f"block{i + 1}.mlp_ratio", MLP_RATIO))
        with g.block(f"block{i + 1}"):
            x = g.add("add", [x, _attention(g, g.add("layernorm", x, eps=EPS), heads)])
            with g.block("mlp"):
                y = g.add("gelu", g.add("fc", g.add("layernorm", x, eps=EPS), out_features=hidden))
                x = g.add("add", [x, g.add("fc", y, out_features=width)])
    with g.block("head"):
        _, n, _ = g.shape(x)
        patches = g.add_multi("split", x, sections=[1, n - 1], axis=1)[1]
        x = g.add("layernorm", g.add("mean", patches, axis=1), eps=EPS)
        return g.add("fc", x, out_features=NUM_CLASSES)
