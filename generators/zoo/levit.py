"""LeViT-128S (Graham et al., ICCV 2021) as Hugging Face's ``LevitForImageClassification``
(``facebook/levit-128S``) runs it at inference.

Stem: four 3x3/2 convs (16, 32, 64, 128 channels, no bias) + BN, hard-swish after the first three:
a 14x14 map at 224x224, flattened to 196 tokens. Three stages of widths 128, 256, 384 with 2, 3,
4 blocks, each block x + attention(x) then x + MLP(x), the MLP an FC to 2C, hard-swish and an FC
back. The attention of a stage with h heads (4, 6, 8) has key dim 16 and value dim 2 x 16: one FC
to h x (16 + 16 + 32), viewed per head and split into q, k and v, ``softmax(q k^T * 16^-0.5 + B) v``
with B the learned attention bias, the heads merged to h x 32, hard-swish and an FC back to C.
Between stages a shrinking attention (no residual) takes the map to the next stage's width and
half its size (14 -> 7 -> 4): heads C_in / 16 (8, 16), key dim 16, value dim 4 x 16; its keys and
values come from every token (one FC to h x (16 + 64)), its queries from every second token of
every second row (a 1x1 average pool with stride 2 on the token map, then an FC to h x 16); the
heads merge to h x 64, hard-swish, FC to the next width; a residual MLP (2x) follows. Head: the
mean over the tokens, BN, FC 384 -> 1000 (the classifier without the distillation head).

Every FC above is followed by a BN in LeViT, and the classifier's FC follows one; at inference
such a BN is an affine map that the exporters fold into the FC next to it, and the IR, whose
batch norm takes no tokens, holds the folded FC with a bias (one parameter per channel fewer
than FC + BN; the classifier's BN, 768 parameters, is gone). The attention bias, which LeViT
stores per head and per relative offset and gathers into a [heads, N_q, N_k] tensor, is that
tensor added to the scores (``pos_embed``): the constant an export holds, with its parameters.

Variants redraw every stage width (one draw per stage, shared by its residual stream and, for
the first stage, the stem's last conv), the other stem widths, every spatial kernel of the stem,
each stage's and each shrinking attention's heads (``heads_scale``), each stage's number of blocks
(``depth_scale``) and every MLP's ratio (``mlp_ratios``); the key and value dims of a head stay.
"""
from __future__ import annotations

from ..blocks import image_to_tokens, tokens_to_image
from ..ir import Graph
from .registry import NUM_CLASSES, register_family
from .sampler import Sampler, conv

STEM = [16, 32, 64]  # the fourth stem conv gives the first stage's width
STAGES = [(128, 4, 2), (256, 6, 3), (384, 8, 4)]  # (width, heads, blocks)
KEY_DIM = 16
ATTN_RATIO = 2  # value dim = ATTN_RATIO * KEY_DIM in a stage's attention
DOWN_RATIO = 4  # and in a shrinking attention
MLP_RATIO = 2.0


def _per_head(g: Graph, x: str, heads: int) -> str:
    """Tokens [1, N, heads * d] -> [1, heads, N, d]."""
    _, n, c = g.shape(x)
    return g.add("transpose", g.add("reshape", x, shape=[1, n, heads, c // heads]), perm=[0, 2, 1, 3])


def _attend(g: Graph, q: str, k: str, v: str, out: int) -> str:
    """``softmax(q k^T / sqrt(d) + B) v`` per head, heads merged, hard-swish, FC to ``out``."""
    _, heads, n, d = g.shape(q)
    s = g.add("matmul", [q, g.add("transpose", k, perm=[0, 1, 3, 2])])
    s = g.add("pos_embed", g.add("scale", s, factor=d ** -0.5))  # the attention bias [1, heads, N_q, N_k]
    y = g.add("matmul", [g.add("softmax", s, axis=-1), v])
    y = g.add("reshape", g.add("transpose", y, perm=[0, 2, 1, 3]), shape=[1, n, heads * g.shape(v)[-1]])
    return g.add("fc", g.add("hswish", y), out_features=out)


def _attention(g: Graph, x: str, heads: int) -> str:
    c = g.shape(x)[-1]
    d = ATTN_RATIO * KEY_DIM
    with g.block("attn"):
        qkv = _per_head(g, g.add("fc", x, out_features=heads * (2 * KEY_DIM + d)), heads)
        q, k, v = g.add_multi("split", qkv, sections=[KEY_DIM, KEY_DIM, d], axis=-1)
        return _attend(g, q, k, v, c)


def _shrinking_attention(g: Graph, x: str, heads: int, out: int, h: int, w: int) -> str:
    d = DOWN_RATIO * KEY_DIM
    with g.block("attn"):
        kv = _per_head(g, g.add("fc", x, out_features=heads * (KEY_DIM + d)), heads)
        k, v = g.add_multi("split", kv, sections=[KEY_DIM, d], axis=-1)
        q = g.add("avgpool", tokens_to_image(g, x, h, w), kernel=1, stride=2)  # every second token and row
        q = _per_head(g, g.add("fc", image_to_tokens(g, q), out_features=heads * KEY_DIM), heads)
        return _attend(g, q, k, v, out)


def _mlp(g: Graph, x: str, choose: Sampler, key: str) -> str:
    c = g.shape(x)[-1]
    hidden = round(c * choose.ratio(key + ".mlp_ratio", MLP_RATIO))
    with g.block("mlp"):
        y = g.add("hswish", g.add("fc", x, out_features=hidden))
        return g.add("add", [x, g.add("fc", y, out_features=c)])


@register_family("levit", reference="LeViT-128S without its distillation head, its batch norms folded into the "
                 "FCs next to them", params=7_814_506)
def build(g: Graph, x: str, choose: Sampler) -> str:
    widths = [choose.channels(f"stage{s + 1}.width", c) for s, (c, _, _) in enumerate(STAGES)]
    with g.block("stem"):
        for i, c in enumerate(STEM + [widths[0]]):
            key = f"stem.conv{i + 1}"
            out = c if i == len(STEM) else choose.channels(key, c)
            x = conv(g, x, choose, key, out, 3, 2, act="hswish" if i < len(STEM) else None)
    _, _, h, w = g.shape(x)
    x = image_to_tokens(g, x)
    for s, (c, heads, n) in enumerate(STAGES):
        heads = choose.heads(f"stage{s + 1}.heads", heads)
        for i in range(choose.depth(f"stage{s + 1}.depth", n)):
            key = f"stage{s + 1}.block{i + 1}"
            with g.block(key.replace(".", "/")):
                x = g.add("add", [x, _attention(g, x, heads)])
                x = _mlp(g, x, choose, key)
        if s + 1 < len(STAGES):
            key = f"stage{s + 1}.down"
            with g.block(key.replace(".", "/")):
                x = _shrinking_attention(g, x, choose.heads(key + ".heads", c // KEY_DIM), widths[s + 1], h, w)
                h, w = (h + 1) // 2, (w + 1) // 2
                x = _mlp(g, x, choose, key)
    with g.block("head"):
        return g.add("fc", g.add("mean", x, axis=1), out_features=NUM_CLASSES)
