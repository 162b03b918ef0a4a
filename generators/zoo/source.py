"""The ``zoo`` generator source: nn-Meter's model-zoo families and their variants.

Per family (in the configured order) it yields the reference network, if included, then
variants ``0 .. variants-1``. Variant ``i`` of family ``f`` is a pure function of
(seed, f, i, sampling ranges): its random stream is seeded with ``"zoo/{f}/{seed}/{i}"``,
so runs are byte-identical and a larger ``variants`` only appends networks.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, Iterator

from ..ir import Graph
from foundation.registry import UnknownName
from ..sources import register_source
from .registry import FAMILIES
from .sampler import ConfiguredSampler, ReferenceSampler, Sampler, VariantSampler
from foundation.configs import coerce

SOURCE = "zoo"
# The twelve families of nn-Meter's dataset, in the paper's order (Table 2).
NNMETER_FAMILIES = [
    "alexnet", "vgg", "densenet", "resnet", "squeezenet", "googlenet",
    "mobilenetv1", "mobilenetv2", "mobilenetv3", "shufflenetv2", "mnasnet", "proxylessnas",
]


@dataclass
class ZooConfig:
    families: list[str] = field(default_factory=lambda: list(NNMETER_FAMILIES))
    variants: int = 1  # per family (nn-Meter: 2,000)
    include_reference: bool = True
    channel_scale: list[float] = field(default_factory=lambda: [0.2, 1.8])  # output widths: [lo, hi] x reference
    kernel_choices: list[int] = field(default_factory=lambda: [1, 3, 5, 7, 9])  # for every spatial kernel
    # transformer families (vit, mobilevit, efficientformer, ...), convnext and efficientnetv2 (depth);
    # the other CNN families never ask for these
    depth_scale: list[float] = field(default_factory=lambda: [0.5, 1.5])  # blocks per stage: [lo, hi] x reference
    heads_scale: list[float] = field(default_factory=lambda: [0.5, 2.0])  # attention heads: [lo, hi] x reference
    mlp_ratios: list[float] = field(default_factory=lambda: [1.0, 2.0, 3.0, 4.0])  # per block, MLP hidden / width


def _as_config(cfg: Any) -> ZooConfig:
    return coerce(ZooConfig, cfg)


def validate_config(cfg: Any) -> ZooConfig:
    """The checked section (types: the schema, through :func:`coerce`); ValueError("<field>: <what
    is wrong>") on the first fault."""
    cfg = _as_config(cfg)
    families = cfg.families
    if not families:
        raise ValueError(f"families: expected a non-empty list of family names (known: {', '.join(FAMILIES.names())})")
    seen = set()
    for name in families:
        try:
            FAMILIES.get(name)
        except UnknownName as e:
            raise ValueError(f"families: {e}") from None
        if name in seen:
            raise ValueError(f"families: {name!r} listed twice")
        seen.add(name)
    if cfg.variants < 0:
        raise ValueError(f"variants: expected an int >= 0, got {cfg.variants!r}")
    if cfg.variants == 0 and not cfg.include_reference:
        raise ValueError("variants: 0 variants without the reference generates nothing")
    scale = cfg.channel_scale
    if len(scale) != 2 or not 0 < scale[0] <= scale[1]:
        raise ValueError(f"channel_scale: expected [lo, hi] with 0 < lo <= hi, got {scale!r}")
    kernels = cfg.kernel_choices
    if not kernels or not all(k >= 1 and k % 2 == 1 for k in kernels):
        raise ValueError(f"kernel_choices: expected a non-empty list of odd kernel sizes >= 1, got {kernels!r}")
    for key in ("depth_scale", "heads_scale"):
        r = getattr(cfg, key)
        if len(r) != 2 or not 0 < r[0] <= r[1]:
            raise ValueError(f"{key}: expected [lo, hi] with 0 < lo <= hi, got {r!r}")
    if not cfg.mlp_ratios or not all(r > 0 for r in cfg.mlp_ratios):
        raise ValueError(f"mlp_ratios: expected a non-empty list of ratios > 0, got {cfg.mlp_ratios!r}")
    return cfg


def _build(family: str, sampler: Sampler, name: str, meta: dict) -> Graph:
    fam = FAMILIES.get(family)
    g = Graph(name=name, source=SOURCE, meta=meta)
    x = g.input(fam.input_shape)
    g.set_outputs(fam.build(g, x, sampler))
    return g


def reference(family: str) -> Graph:
    """The family's reference network (independent of any seed)."""
    FAMILIES.get(family)
    meta = {"family": family, "seed": None, "index": None, "reference": True}
    return _build(family, ReferenceSampler(), f"zoo-{family}-ref", meta)


def configured(family: str, values: dict[str, float], name: str) -> Graph:
    """The family's network with the widths, kernels, depths, heads or ratios ``values`` names
    (:class:`ConfiguredSampler` keys) and the reference elsewhere, named ``name``."""
    FAMILIES.get(family)
    sampler = ConfiguredSampler(values)
    meta = {"family": family, "seed": None, "index": None, "reference": False, "config": dict(sorted(values.items()))}
    g = _build(family, sampler, name, meta)
    sampler.check_used(family)
    return g


def variant(family: str, seed: int, index: int, cfg: Any = None) -> Graph:
    """Variant ``index`` of ``family`` under ``seed``: a pure function of its arguments."""
    return _variant(family, seed, index, _as_config(cfg))


def _variant(family: str, seed: int, index: int, cfg: ZooConfig) -> Graph:
    FAMILIES.get(family)
    rng = random.Random(f"zoo/{family}/{seed}/{index}")
    sampler = VariantSampler(rng, cfg.channel_scale, cfg.kernel_choices, cfg.depth_scale, cfg.heads_scale, cfg.mlp_ratios)
    meta = {"family": family, "seed": seed, "index": index, "reference": False}
    return _build(family, sampler, f"zoo-{family}-{seed}-{index:05d}", meta)


def _generate(cfg: Any, seed: int) -> Iterator[Graph]:
    cfg = validate_config(cfg)
    for family in cfg.families:
        if cfg.include_reference:
            yield reference(family)
        for i in range(cfg.variants):
            yield _variant(family, seed, i, cfg)  # cfg is checked: no second check per variant


ZooSource = register_source(SOURCE, ZooConfig, validate_config, _generate,
                            "nn-Meter's model-zoo families: per family the reference, then the variants.")
