"""Small composable building blocks over the IR (timm-style), shared by every generator.

Each block takes the graph and an input reference and returns the output reference; the
nodes it adds are labelled with the block's name so later stages can see what came from
where (a squeeze-and-excite is a subgraph of global pool, 1x1 convs, activations and mul).
"""
from __future__ import annotations

from .ir import Graph


def make_divisible(v: float, divisor: int = 8, min_value: int | None = None) -> int:
    """Round channels to a multiple of ``divisor`` without going more than 10% below ``v``."""
    min_value = min_value or divisor
    new = max(min_value, int(v + divisor / 2) // divisor * divisor)
    if new < 0.9 * v:
        new += divisor
    return new


def same_padding(kernel: int, dilation: int = 1) -> int:
    return dilation * (kernel - 1) // 2


def activation(g: Graph, x: str, kind: str | None) -> str:
    return x if kind in (None, "none", "linear") else g.add(kind, x)


def conv_bn_act(
    g: Graph,
    x: str,
    out: int,
    kernel: int | list[int] = 1,
    stride: int = 1,
    groups: int = 1,
    act: str | None = "relu",
    bn: bool = True,
    padding: int | list[int] | None = None,
    dilation: int = 1,
) -> str:
    if padding is None:
        padding = [same_padding(k, dilation) for k in kernel] if isinstance(kernel, list) else same_padding(kernel, dilation)
    y = g.add(
        "conv2d", x, out_channels=out, kernel=kernel, stride=stride, padding=padding,
        dilation=dilation, groups=groups, bias=not bn,
    )
    if bn:
        y = g.add("batchnorm", y)
    return activation(g, y, act)


def squeeze_excite(
    g: Graph, x: str, reduction: int = 4, act: str = "relu", gate: str = "hsigmoid", divisor: int = 8, mid: int | None = None
) -> str:
    """Squeeze-and-excite: bottleneck width ``mid``, by default channels / reduction rounded to ``divisor``."""
    c = g.shape(x)[1]
    mid = mid or make_divisible(c / reduction, divisor)
    with g.block("se"):
        s = g.add("global_avgpool", x)
        s = g.add("conv2d", s, out_channels=mid, kernel=1, bias=True)
        s = activation(g, s, act)
        s = g.add("conv2d", s, out_channels=c, kernel=1, bias=True)
        s = activation(g, s, gate)
        return g.add("mul", [x, s])


def depthwise_separable(g: Graph, x: str, out: int, kernel: int = 3, stride: int = 1, act: str = "relu") -> str:
    c = g.shape(x)[1]
    with g.block("dwsep"):
        y = conv_bn_act(g, x, c, kernel, stride, groups=c, act=act)
        return conv_bn_act(g, y, out, 1, act=act)


def inverted_residual(
    g: Graph,
    x: str,
    out: int,
    kernel: int = 3,
    stride: int = 1,
    expansion: float = 6,
    se: bool = False,
    act: str = "relu6",
    se_act: str = "relu",
    se_gate: str = "hsigmoid",
    se_reduction: int = 4,
    mid: int | None = None,
) -> str:
    """MobileNetV2's linear bottleneck (optionally with SE, MobileNetV3/MnasNet style)."""
    c = g.shape(x)[1]
    if mid is None:
        mid = make_divisible(c * expansion) if expansion != 1 else c
    with g.block("linear_bottleneck"):
        y = conv_bn_act(g, x, mid, 1, act=act) if expansion != 1 else x
        y = conv_bn_act(g, y, mid, kernel, stride, groups=mid, act=act)
        if se:
            y = squeeze_excite(g, y, reduction=se_reduction, act=se_act, gate=se_gate)
        y = conv_bn_act(g, y, out, 1, act=None)
        if stride == 1 and c == out:
            y = g.add("add", [x, y])
        return y


def classifier(g: Graph, x: str, num_classes: int = 1000, hidden: int | None = None, act: str = "relu") -> str:
    with g.block("classifier"):
        y = g.add("global_avgpool", x)
        y = g.add("flatten", y)
        if hidden:
            y = activation(g, g.add("fc", y, out_features=hidden), act)
        return g.add("fc", y, out_features=num_classes)


# ---------------------------------------------------------------- transformers (timm's ViT)
def patch_embed(g: Graph, x: str, dim: int, patch: int) -> str:
    """Image [1, C, H, W] -> tokens [1, H*W/patch^2, dim]: a patch-sized strided conv, then
    ``flatten(2).transpose(1, 2)``."""
    with g.block("patch_embed"):
        y = g.add("conv2d", x, out_channels=dim, kernel=patch, stride=patch)
        _, c, h, w = g.shape(y)
        y = g.add("reshape", y, shape=[1, c, h * w])
        return g.add("transpose", y, perm=[0, 2, 1])


def class_token_readout(g: Graph, x: str) -> str:
    """ViT's readout ``x[:, 0]``: the class token of tokens [1, N, C] as [1, C] (``split`` into
    [1, N - 1] on the token axis, the rest unread, and ``reshape``)."""
    _, n, c = g.shape(x)
    return g.add("reshape", g.add_multi("split", x, sections=[1, n - 1], axis=1)[0], shape=[1, c])


def _heads(g: Graph, x: str, heads: int, perm: list[int]) -> str:
    """Tokens [1, N, C] -> [1, heads, ., .] by ``perm`` of [1, N, heads, C/heads]; grouped
    tokens [1, G, N, C] -> [1, G*heads, ., .] by ``perm`` of [1, G, N, heads, C/heads]."""
    if len(g.shape(x)) == 4:
        _, grp, n, c = g.shape(x)
        y = g.add("transpose", g.add("reshape", x, shape=[1, grp, n, heads, c // heads]), perm=perm)
        return g.add("reshape", y, shape=[1, grp * heads] + g.shape(y)[3:])
    _, n, c = g.shape(x)
    return g.add("transpose", g.add("reshape", x, shape=[1, n, heads, c // heads]), perm=perm)


def attention(g: Graph, x: str, heads: int) -> str:
    """Multi-head self-attention over tokens [1, N, C] (timm's ``Attention``): one qkv fc split
    into q, k, v, ``softmax(q k^T / sqrt(d)) v`` per head by batched matmuls, the heads merged
    and projected. Built from plain operators, so every exporter and importer sees them.

    Grouped tokens [1, G, N, C] (MobileViT's G = patch-area groups, which PyTorch runs as a batch
    of G sequences) attend within each group: the group and head axes merge into one batch axis
    of the matmuls ([1, G*heads, N, d]), so every matmul and softmax stays rank 4."""
    shape = g.shape(x)
    if len(shape) not in (3, 4):
        raise ValueError(f"attention: expected tokens [1, N, C] or [1, G, N, C], got {shape}")
    n, c = shape[-2:]
    if c % heads:
        raise ValueError(f"attention: {heads} heads do not divide {c} channels")
    grouped = len(shape) == 4
    qv, kt = ([0, 1, 3, 2, 4], [0, 1, 3, 4, 2]) if grouped else ([0, 2, 1, 3], [0, 2, 3, 1])
    with g.block("attn"):
        q, k, v = g.add_multi("split", g.add("fc", x, out_features=3 * c), sections=[c, c, c], axis=-1)
        q = g.add("scale", _heads(g, q, heads, qv), factor=(c // heads) ** -0.5)
        s = g.add("matmul", [q, _heads(g, k, heads, kt)])  # [1, (G*)heads, N, N]
        y = g.add("matmul", [g.add("softmax", s, axis=-1), _heads(g, v, heads, qv)])
        if grouped:
            y = g.add("reshape", y, shape=[1, shape[1], heads, n, c // heads])
            y = g.add("reshape", g.add("transpose", y, perm=[0, 1, 3, 2, 4]), shape=[1, shape[1], n, c])
        else:
            y = g.add("reshape", g.add("transpose", y, perm=[0, 2, 1, 3]), shape=[1, n, c])
        return g.add("fc", y, out_features=c)


def mlp(g: Graph, x: str, hidden: int, act: str = "gelu", approximate: str | None = None) -> str:
    """Token MLP (timm's ``Mlp``): fc to ``hidden``, activation (GELU's ``approximate`` when
    given), fc back."""
    c = g.shape(x)[-1]
    with g.block("mlp"):
        y = g.add("fc", x, out_features=hidden)
        y = g.add("gelu", y, approximate=approximate) if act == "gelu" and approximate else activation(g, y, act)
        return g.add("fc", y, out_features=c)


def encoder_block(g: Graph, x: str, heads: int, mlp_ratio: float = 4.0, act: str = "gelu",
                  eps: float = 1e-5, hidden: int | None = None, approximate: str | None = None) -> str:
    """Pre-norm transformer encoder block: x + attn(ln(x)), then x + mlp(ln(x)); the MLP's
    hidden width is ``hidden``, by default ``int(C * mlp_ratio)``; ``approximate`` is GELU's
    (``"none"`` or ``"tanh"``, for ``act="gelu"``)."""
    c = g.shape(x)[-1]
    hidden = hidden or int(c * mlp_ratio)
    with g.block("block"):
        x = g.add("add", [x, attention(g, g.add("layernorm", x, eps=eps), heads)])
        return g.add("add", [x, mlp(g, g.add("layernorm", x, eps=eps), hidden, act, approximate)])


def image_to_tokens(g: Graph, x: str) -> str:
    """Image [1, C, H, W] -> tokens [1, H*W, C] (``flatten(2).transpose(1, 2)``)."""
    _, c, h, w = g.shape(x)
    return g.add("transpose", g.add("reshape", x, shape=[1, c, h * w]), perm=[0, 2, 1])


def tokens_to_image(g: Graph, t: str, h: int, w: int) -> str:
    """Tokens [1, H*W, C] -> image [1, C, H, W] (``transpose(1, 2).reshape``)."""
    _, n, c = g.shape(t)
    if n != h * w:
        raise ValueError(f"tokens_to_image: {n} tokens are not a {h}x{w} grid")
    return g.add("reshape", g.add("transpose", t, perm=[0, 2, 1]), shape=[1, c, h, w])


def unfold(g: Graph, x: str, patch: int) -> str:
    """MobileViT's unfolding: image [1, C, H, W] -> grouped tokens [1, P, N, C] with P = patch^2
    positions inside a patch and N = (H/patch)(W/patch) patches; group p holds the pixels at
    offset p of every patch (``[1, H, W, C]`` viewed as ``[1, H/p, p, W/p, p, C]``, permuted to
    ``[1, p, p, H/p, W/p, C]``)."""
    _, c, h, w = g.shape(x)
    if h % patch or w % patch:
        raise ValueError(f"unfold: a {h}x{w} map is not a whole number of {patch}x{patch} patches")
    nh, nw = h // patch, w // patch
    with g.block("unfold"):
        y = g.add("reshape", g.add("transpose", x, perm=[0, 2, 3, 1]), shape=[1, nh, patch, nw, patch, c])
        y = g.add("transpose", y, perm=[0, 2, 4, 1, 3, 5])
        return g.add("reshape", y, shape=[1, patch * patch, nh * nw, c])


def fold(g: Graph, t: str, patch: int, h: int, w: int) -> str:
    """The inverse of :func:`unfold`: grouped tokens [1, P, N, C] -> image [1, C, H, W]."""
    _, _, _, c = g.shape(t)
    nh, nw = h // patch, w // patch
    with g.block("fold"):
        y = g.add("reshape", t, shape=[1, patch, patch, nh, nw, c])
        y = g.add("transpose", y, perm=[0, 3, 1, 4, 2, 5])
        y = g.add("reshape", y, shape=[1, h, w, c])
        return g.add("transpose", y, perm=[0, 3, 1, 2])
