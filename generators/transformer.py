"""A vision-transformer space: ViTs and CNN-transformer hybrids, one or several stages.

A network is: input ``input_size`` x ``input_size`` x 3 -> a *front* that turns the image into
tokens at a total stride ``patch`` (drawn from ``patch_sizes``; ``(input_size / patch)^2``
tokens) -> 1 to 3 transformer stages of pre-norm encoder blocks (``blocks.encoder_block``) with
token downsampling between stages -> layer norm, the readout, a fully connected classifier.
The first stage's tokens get a learned position embedding (``pos_embed``); the readout
(``readouts``) is the mean of the tokens or, for a one-stage network, a class token prepended
before the position embedding and read out after the last block (DeiT). Fronts (``fronts``, drawn uniformly):

- ``patch`` (ViT): one patch-sized strided conv (``blocks.patch_embed``);
- ``conv`` (hybrid): a 3x3/2 conv stem + BN + act, ``s`` stride-2 stages of MobileNetV2 inverted
  residuals (``conv_stages``, with ``2^(s+1) <= patch``), then a patch embedding of the remaining
  stride ``patch / 2^(s+1)`` (1: a 1x1 projection, as in ViT-hybrid).

Stage ``k`` has width ``heads_k * head_dim`` (so the heads divide it), ``heads_k = heads_1 *
heads_growth^(k-1)``; a later stage starts with an overlapping patch embedding (3x3/2 conv of
the token grid, then layer norm; PVT v2). ``heads_1`` is drawn uniformly among the values of
``heads`` that keep the network within ``max_mflops`` and ``max_mparams`` given every other draw
(the smallest when none does). Every choice is a field of :class:`TransformerConfig`;
docs/generators.md (*Transformer space*) lists them and the reasons.

Network ``i`` is a pure function of (seed, i, the config): it draws from its own
``random.Random(f"transformer/{seed}/{i}")`` stream, so ``n=50`` extends ``n=20`` and output is
byte-identical across runs.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, Mapping

from .blocks import (class_token_readout, conv_bn_act, encoder_block, image_to_tokens, inverted_residual,
                     patch_embed, tokens_to_image)
from .ir import Graph
from .ops import OPS
from .sources import register_space
from foundation.configs import coerce

SOURCE = "transformer"
SPACE = "vit-hybrid"
FRONTS = ("patch", "conv")
READOUTS = ("mean", "class")
GELU_APPROXIMATIONS = ("none", "tanh")


@dataclass
class TransformerConfig:
    """The space and how many networks to draw from it (ranges are [min, max], inclusive)."""

    n: int = 20  # number of networks; network i depends only on (seed, i, the fields below)
    input_size: int = 224  # input height = width
    in_channels: int = 3
    num_classes: int = 1000
    # --- tokens
    patch_sizes: list[int] = field(default_factory=lambda: [8, 16, 32])  # total stride image -> tokens
    fronts: list[str] = field(default_factory=lambda: list(FRONTS))  # patch: ViT; conv: hybrid
    pos_embed: bool = True  # a learned position embedding added to the first stage's tokens (ViT)
    readouts: list[str] = field(default_factory=lambda: list(READOUTS))  # mean of the tokens | class token (one stage)
    # --- hybrid front: stem, then conv stages of inverted residuals (stride 2 each)
    stem_channels: list[int] = field(default_factory=lambda: [16, 48])
    conv_stages: list[int] = field(default_factory=lambda: [0, 3])  # at most log2(patch) - 1
    conv_depth: list[int] = field(default_factory=lambda: [1, 3])  # blocks per conv stage
    conv_channels: list[list[int]] = field(default_factory=lambda: [[24, 64], [40, 128], [80, 256]])  # per conv stage
    conv_kernels: list[int] = field(default_factory=lambda: [3, 5])  # depthwise kernels
    conv_expansions: list[int] = field(default_factory=lambda: [2, 4, 6])
    conv_act: str = "swish"
    # --- transformer stages
    stage_counts: list[int] = field(default_factory=lambda: [1, 2, 3])  # counts that leave a grid >= min_grid
    min_grid: int = 4  # the last stage's token grid is at least min_grid x min_grid
    single_stage_depth: list[int] = field(default_factory=lambda: [4, 12])  # blocks of a one-stage (ViT) network
    stage_depth: list[int] = field(default_factory=lambda: [1, 4])  # blocks per stage of a multi-stage network
    heads: list[int] = field(default_factory=lambda: [1, 6])  # the first stage's heads
    head_dims: list[int] = field(default_factory=lambda: [32, 48, 64])  # channels per head (one per network)
    heads_growth: int = 2  # heads (and width) multiply by this at each later stage
    mlp_ratios: list[float] = field(default_factory=lambda: [2.0, 3.0, 4.0])  # per stage, MLP hidden / width
    downsample_kernel: int = 3  # the overlapping patch embedding between stages (stride 2)
    act: str = "gelu"  # MLP activation
    gelu_approximate: str = "none"  # none | tanh (for act: gelu)
    norm_eps: float = 1e-6
    # --- size: heads_1 is drawn among the values that keep a network within both
    max_mflops: float = 4100.0  # millions of multiply-accumulates (ResNet-50: 4,089)
    max_mparams: float = 25.6  # millions of parameters (ResNet-50: 25.56)


# ---------------------------------------------------------------- configuration checks
def _err(key: str, msg: str) -> ValueError:
    return ValueError(f"{key}: {msg}")  # the config loader prefixes generator.transformer.


def _range(cfg: TransformerConfig, key: str, minimum: int, r: list | None = None) -> None:
    r = getattr(cfg, key) if r is None else r
    if len(r) != 2:
        raise _err(key, f"must be a pair [min, max] of ints, got {r!r}")
    if r[0] < minimum:
        raise _err(key, f"min must be >= {minimum}, got {r[0]}")
    if r[0] > r[1]:
        raise _err(key, f"min {r[0]} > max {r[1]}")


def _ints(cfg: TransformerConfig, key: str, minimum: int) -> list:
    v = list(getattr(cfg, key))
    if not v or any(x < minimum for x in v):
        raise _err(key, f"must be a non-empty list of values >= {minimum}, got {v!r}")
    return v


def _is_unary_op(name: str) -> bool:
    spec = OPS.get(name)
    return spec is not None and spec.category == "activation" and spec.arity == (1, 1)


def validate_config(cfg: TransformerConfig | Mapping | None) -> TransformerConfig:
    """The checked config (types: :func:`coerce_config`); ValueError with a one-line message
    naming the field for an impossible space."""
    cfg = coerce_config(cfg)
    for key, minimum in (("n", 0), ("input_size", 1), ("in_channels", 1), ("num_classes", 1), ("min_grid", 1),
                         ("heads_growth", 1)):
        if getattr(cfg, key) < minimum:
            raise _err(key, f"must be an int >= {minimum}, got {getattr(cfg, key)!r}")
    for p in _ints(cfg, "patch_sizes", 1):
        if cfg.input_size % p:
            raise _err("patch_sizes", f"patch {p} does not divide input_size {cfg.input_size}")
    for f in list(cfg.fronts) or [None]:
        if f not in FRONTS:
            raise _err("fronts", f"unknown front {f!r} (known: {', '.join(FRONTS)})")
    if len(set(cfg.fronts)) != len(cfg.fronts):
        raise _err("fronts", f"lists a front twice: {cfg.fronts}")
    for r in list(cfg.readouts) or [None]:
        if r not in READOUTS:
            raise _err("readouts", f"unknown readout {r!r} (known: {', '.join(READOUTS)})")
    if len(set(cfg.readouts)) != len(cfg.readouts):
        raise _err("readouts", f"lists a readout twice: {cfg.readouts}")
    for key in ("stem_channels", "conv_depth", "single_stage_depth", "stage_depth", "heads"):
        _range(cfg, key, 1)
    _range(cfg, "conv_stages", 0)
    if len(cfg.conv_channels) < cfg.conv_stages[1]:
        raise _err("conv_channels", f"has {len(cfg.conv_channels)} ranges, need one per conv stage "
                                    f"(conv_stages max {cfg.conv_stages[1]})")
    for j, r in enumerate(cfg.conv_channels):
        _range(cfg, f"conv_channels[{j}]", 1, r)
    for k in _ints(cfg, "conv_kernels", 1):
        if k % 2 == 0:
            raise _err("conv_kernels", f"must hold odd kernels ('same' padding), got {k}")
    _ints(cfg, "conv_expansions", 1)
    _ints(cfg, "stage_counts", 1)
    _ints(cfg, "head_dims", 1)
    _ints(cfg, "mlp_ratios", 0)
    if any(r <= 0 for r in cfg.mlp_ratios):
        raise _err("mlp_ratios", f"must hold ratios > 0, got {cfg.mlp_ratios!r}")
    if cfg.downsample_kernel < 1 or cfg.downsample_kernel % 2 == 0:
        raise _err("downsample_kernel", f"must be an odd int >= 1, got {cfg.downsample_kernel!r}")
    for key in ("act", "conv_act"):
        if not _is_unary_op(getattr(cfg, key)):
            known = sorted(k for k in OPS if _is_unary_op(k))
            raise _err(key, f"unknown activation {getattr(cfg, key)!r} (known: {', '.join(known)})")
    if cfg.gelu_approximate not in GELU_APPROXIMATIONS:
        raise _err("gelu_approximate", f"must be one of {', '.join(GELU_APPROXIMATIONS)}, got {cfg.gelu_approximate!r}")
    for key in ("max_mflops", "max_mparams"):
        if not getattr(cfg, key) > 0:
            raise _err(key, f"must be > 0, got {getattr(cfg, key)!r}")
    if not cfg.norm_eps > 0:
        raise _err("norm_eps", f"must be > 0, got {cfg.norm_eps!r}")
    return cfg


def coerce_config(cfg: Any) -> TransformerConfig:
    """``cfg`` (a TransformerConfig, mapping, OmegaConf node or None) as a TransformerConfig whose
    field types are checked against the schema (foundation.configs.coerce)."""
    return coerce(TransformerConfig, cfg)


# ---------------------------------------------------------------- sampling
def _grids(grid: int, stages: int) -> list[int]:
    out = [grid]
    for _ in range(stages - 1):
        out.append(-(-out[-1] // 2))
    return out


def sample_plan(cfg: TransformerConfig, seed: int, index: int) -> dict:
    """Draw network ``index``'s choices as plain JSON (its metadata): everything but the first
    stage's heads, which :func:`build_network` settles against the size limits."""
    rng = random.Random(f"{SOURCE}/{seed}/{index}")
    patch = rng.choice(cfg.patch_sizes)
    front = rng.choice(cfg.fronts)
    plan: dict[str, Any] = {"patch": patch, "front": front, "conv": None}
    if front == "conv":
        most = max(0, (patch.bit_length() - 1) - 1)  # 2^(s+1) <= patch
        s = rng.randint(min(cfg.conv_stages[0], most), min(cfg.conv_stages[1], most))
        conv = {"stem_channels": rng.randint(*cfg.stem_channels), "stages": []}
        for j in range(s):
            conv["stages"].append({
                "channels": rng.randint(*cfg.conv_channels[j]), "depth": rng.randint(*cfg.conv_depth),
                "kernel": rng.choice(cfg.conv_kernels), "expansion": rng.choice(cfg.conv_expansions),
            })
        conv["embed_patch"] = patch // 2 ** (s + 1)
        plan["conv"] = conv
    grid = cfg.input_size // patch
    fits = [c for c in cfg.stage_counts if _grids(grid, c)[-1] >= cfg.min_grid]
    stages = rng.choice(fits) if fits else 1
    depth = cfg.single_stage_depth if stages == 1 else cfg.stage_depth
    plan["head_dim"] = rng.choice(cfg.head_dims)
    plan["stages"] = [{"grid": gsz, "tokens": gsz * gsz, "depth": rng.randint(*depth), "mlp_ratio": rng.choice(cfg.mlp_ratios)}
                      for gsz in _grids(grid, stages)]
    plan["heads_draw"] = rng.random()  # picks heads_1 among the values that fit (build_network)
    # a class token needs one token sequence: a later stage regroups the tokens into a grid
    plan["readout"] = rng.choice(cfg.readouts) if stages == 1 else "mean"
    return plan


# ---------------------------------------------------------------- building
def _build(cfg: TransformerConfig, plan: dict, heads1: int, name: str, meta: dict) -> Graph:
    g = Graph(name=name, source=SOURCE, meta=meta)
    x = g.input([1, cfg.in_channels, cfg.input_size, cfg.input_size])
    hd = plan["head_dim"]
    width = heads1 * hd
    if plan["front"] == "conv":
        conv = plan["conv"]
        with g.block("stem"):
            x = conv_bn_act(g, x, conv["stem_channels"], 3, 2, act=cfg.conv_act)
        for j, st in enumerate(conv["stages"], 1):
            for i in range(st["depth"]):
                with g.block(f"conv{j}/block{i + 1}"):
                    x = inverted_residual(g, x, st["channels"], st["kernel"], 2 if i == 0 else 1,
                                          expansion=st["expansion"], act=cfg.conv_act)
        x = patch_embed(g, x, width, conv["embed_patch"])
    else:
        x = patch_embed(g, x, width, plan["patch"])
    if plan["readout"] == "class":
        x = g.add("cls_token", x)
    if cfg.pos_embed:
        x = g.add("pos_embed", x)
    approx = cfg.gelu_approximate if cfg.act == "gelu" else None
    for k, st in enumerate(plan["stages"]):
        heads = heads1 * cfg.heads_growth ** k
        if k:
            grid = plan["stages"][k - 1]["grid"]
            with g.block(f"stage{k + 1}/downsample"):
                y = tokens_to_image(g, x, grid, grid)
                y = g.add("conv2d", y, out_channels=heads * hd, kernel=cfg.downsample_kernel, stride=2,
                          padding=cfg.downsample_kernel // 2)
                x = g.add("layernorm", image_to_tokens(g, y), eps=cfg.norm_eps)
        hidden = round(heads * hd * st["mlp_ratio"])
        for i in range(st["depth"]):
            with g.block(f"stage{k + 1}/block{i + 1}"):
                x = encoder_block(g, x, heads, act=cfg.act, eps=cfg.norm_eps, hidden=hidden, approximate=approx)
    with g.block("head"):
        x = g.add("layernorm", x, eps=cfg.norm_eps)
        x = class_token_readout(g, x) if plan["readout"] == "class" else g.add("mean", x, axis=1)
        x = g.add("fc", x, out_features=cfg.num_classes)
    return g.set_outputs(x)


def build_network(cfg: TransformerConfig, seed: int, index: int) -> Graph:
    """Network ``index`` of the space for ``seed`` (a pure function of its arguments)."""
    plan = sample_plan(cfg, seed, index)
    name = f"{SOURCE}-{seed}-{index:05d}"
    lo, hi = cfg.heads

    def build(h: int) -> Graph:
        meta = {"space": SPACE, "seed": seed, "index": index, **{k: v for k, v in plan.items() if k != "heads_draw"},
                "heads": [h * cfg.heads_growth ** k for k in range(len(plan["stages"]))],
                "widths": [h * cfg.heads_growth ** k * plan["head_dim"] for k in range(len(plan["stages"]))]}
        return _build(cfg, plan, h, name, meta)

    def fits(g: Graph) -> bool:
        s = g.summary()
        return s["flops"] <= cfg.max_mflops * 1e6 and s["params"] <= cfg.max_mparams * 1e6

    # cost grows with the heads: the values that fit are lo..top
    graphs: dict[int, Graph] = {}
    top = lo - 1
    for h in range(lo, hi + 1):
        graphs[h] = build(h)
        if not fits(graphs[h]):
            break
        top = h
    h = lo + int(plan["heads_draw"] * (top - lo + 1)) if top >= lo else lo
    return graphs.get(h) or build(h)


TransformerSource = register_space(SOURCE, TransformerConfig, validate_config, build_network,
                                   "Vision transformers and CNN-transformer hybrids: ``cfg.n`` random networks.")
