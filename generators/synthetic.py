"""The synthetic NAS space of Li, Paolieri and Golubchik (USC), section 4.3.2 and Fig. 11.

A network is: input ``input_size`` x ``input_size`` x 3 -> a stem (3x3 conv, stride 2, as in
MobileNetV2) -> ``num_blocks`` (9) blocks connected sequentially, each of a type drawn uniformly
from ``block_types`` (``conv``, ``dwsep``, ``bottleneck``, ``pool``, ``split``) -> a 1x1 conv to
C10 channels -> global average pooling -> a fully connected classifier. Output channels C1..C9
are drawn from per-block ranges and C10 from its own. What the paper leaves open (stride
schedule, padding, channels of weightless blocks, the group/channel compatibility rule) is a
field of :class:`SyntheticConfig`; docs/generators.md (*Synthetic NAS space*) lists every choice
and why. Channel compatibility is solved when channels are drawn, not by rejection.

Network ``i`` is a pure function of (seed, i, the space parameters): it draws from its own
``random.Random(f"synthetic/{seed}/{i}")`` stream, so ``n=50`` extends ``n=20`` and output
is byte-identical across runs.
"""
from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from typing import Any, Mapping

from .blocks import classifier, conv_bn_act, depthwise_separable, inverted_residual
from .ir import Graph
from .ops import OPS
from .sources import register_space
from foundation.configs import coerce

SOURCE = "synthetic"
SPACE = "usc"
BLOCK_TYPES = ("conv", "dwsep", "bottleneck", "pool", "split")
POOL_KINDS = ("avg", "max")
DOWNSAMPLE_OPS = {"maxpool": "max", "avgpool": "avg"}  # split_downsample -> pool kind


@dataclass
class SyntheticConfig:
    """The space (section 4.3.2 of the USC paper) and how many networks to draw from it."""

    n: int = 20  # number of networks; network i depends only on (seed, i, the fields below)
    # --- input and output
    input_size: int = 224  # input height = width (paper: 224x224x3)
    in_channels: int = 3
    num_classes: int = 1000  # classifier outputs (fc 1000)
    # --- stem (not specified by the paper: MobileNetV2's first layer)
    stem_channels: int = 32  # fixed stem width; rounded like a block's C_i (range [32, 32])
    stem_kernel: int = 3
    stem_stride: int = 2  # 224 -> 112
    # --- the sequence of blocks
    num_blocks: int = 9
    # per-block stride; the default gives 112,56,56,28,28,14,14,7,7 after blocks 1..9
    strides: list[int] = field(default_factory=lambda: [1, 2, 1, 2, 1, 2, 1, 2, 1])
    # [min, max] (inclusive) output channels C_i per block, drawn uniformly before rounding
    channel_ranges: list[list[int]] = field(default_factory=lambda: [[8, 80] for _ in range(5)] + [[80, 400] for _ in range(4)])
    head_channels: list[int] = field(default_factory=lambda: [1200, 1800])  # C10 of the final 1x1 conv
    block_types: list[str] = field(default_factory=lambda: list(BLOCK_TYPES))  # drawn uniformly; restrict to shrink the space
    act: str = "relu6"  # activation after every conv (stem, blocks, head); linear bottlenecks end linear
    # --- 1. convolution (+ BN + act)
    conv_kernels: list[int] = field(default_factory=lambda: [3, 5, 7])
    group_prob: float = 0.5  # probability that a conv block asks for a grouped conv
    group_unit: int = 4  # group size (input channels per group) = group_unit * k
    group_k: list[int] = field(default_factory=lambda: [1, 16])  # [min, max] of k, drawn uniformly
    # when the producer's channel range allows, its channels are rounded to give a grouped conv at
    # least this many groups (else it gets fewer: a group size equal to Cin means groups=1)
    min_groups: int = 2
    # --- 2. depthwise-separable convolution (dw kxk + BN + act, pw 1x1 + BN + act)
    dwsep_kernels: list[int] = field(default_factory=lambda: [3, 5, 7])
    # --- 3. linear bottleneck (MobileNetV2 inverted residual, residual when stride 1 and Cin == Cout)
    bottleneck_kernels: list[int] = field(default_factory=lambda: [3, 5, 7])
    expansions: list[int] = field(default_factory=lambda: [1, 3, 6])  # 1: no expansion conv
    se_prob: float = 0.5  # probability of squeeze-and-excite after the depthwise conv
    se_reduction: int = 4  # SE squeeze ratio (MobileNetV3), mid channels rounded to 8
    se_act: str = "relu"
    se_gate: str = "hsigmoid"
    # --- 4. pooling
    pool_kinds: list[str] = field(default_factory=lambda: ["avg", "max"])
    pool_windows: list[int] = field(default_factory=lambda: [1, 3])  # odd; padding window // 2
    pool_count_include_pad: bool = False  # average pooling ignores padding (TFLite SAME semantics)
    # --- 5. split -> element-wise op per tensor -> concat
    split_counts: list[int] = field(default_factory=lambda: [2, 3, 4])
    # unary ops drawn per tensor; "identity" passes the tensor straight to the concat
    split_ops: list[str] = field(
        default_factory=lambda: ["identity", "relu", "relu6", "hswish", "hsigmoid", "sigmoid", "swish", "tanh"]
    )
    split_equal: bool = True  # round the input channels so the split is into equal sections
    split_downsample: str = "maxpool"  # a split at a stride > 1 position first pools (3x3): maxpool or avgpool
    # --- pool and split blocks
    project_pool_split: bool = False  # True: pool/split end with a 1x1 conv + BN + act to C_i


# ---------------------------------------------------------------- configuration checks
# Types come from the schema (SyntheticConfig's annotations, checked by foundation.configs.coerce);
# these are the value checks.
def _err(key: str, msg: str) -> ValueError:
    return ValueError(f"{key}: {msg}")  # the config loader prefixes generator.synthetic.


def _check_int(cfg: SyntheticConfig, key: str, minimum: int) -> None:
    v = getattr(cfg, key)
    if v < minimum:
        raise _err(key, f"must be an int >= {minimum}, got {v!r}")


def _check_list(cfg: SyntheticConfig, key: str) -> list:
    v = getattr(cfg, key)
    if not v:
        raise _err(key, f"must be a non-empty list, got {v!r}")
    return list(v)


def _check_ints(cfg: SyntheticConfig, key: str, minimum: int, odd: bool = False) -> None:
    for v in _check_list(cfg, key):
        if v < minimum or (odd and v % 2 == 0):
            kind = "odd ints" if odd else "ints"
            raise _err(key, f"must hold {kind} >= {minimum}, got {v!r}")


def _check_range(key: str, r: list[int], minimum: int) -> None:
    if len(r) != 2:
        raise _err(key, f"must be a pair [min, max] of ints, got {r!r}")
    if r[0] < minimum:
        raise _err(key, f"min must be >= {minimum}, got {r[0]}")
    if r[0] > r[1]:
        raise _err(key, f"min {r[0]} > max {r[1]}")


def _check_prob(cfg: SyntheticConfig, key: str) -> None:
    v = getattr(cfg, key)
    if not 0.0 <= v <= 1.0:
        raise _err(key, f"must be a probability in [0, 1], got {v!r}")


def _is_unary_op(name: str) -> bool:
    spec = OPS.get(name)
    return spec is not None and spec.category == "activation" and spec.arity == (1, 1)


def _check_act(cfg: SyntheticConfig, key: str, allow_identity: bool = False) -> None:
    v = getattr(cfg, key)
    if not (_is_unary_op(v) or (allow_identity and v == "identity")):
        known = sorted(k for k in OPS if _is_unary_op(k))
        raise _err(key, f"unknown activation {v!r} (known: {', '.join(known)})")


def validate_config(cfg: SyntheticConfig | Mapping | None) -> SyntheticConfig:
    """The checked config (types: :func:`coerce_config`); ValueError with a one-line message
    naming the field for an impossible space."""
    cfg = coerce_config(cfg)
    for key, minimum in (("n", 0), ("input_size", 1), ("in_channels", 1), ("num_classes", 1),
                         ("stem_channels", 1), ("stem_kernel", 1), ("stem_stride", 1), ("num_blocks", 1),
                         ("group_unit", 1), ("min_groups", 1), ("se_reduction", 1)):
        _check_int(cfg, key, minimum)
    if cfg.stem_kernel % 2 == 0:
        raise _err("stem_kernel", f"must be odd ('same' padding), got {cfg.stem_kernel}")
    strides = _check_list(cfg, "strides")
    if len(strides) != cfg.num_blocks:
        raise _err("strides", f"has {len(strides)} entries, need one per block (num_blocks={cfg.num_blocks})")
    _check_ints(cfg, "strides", 1)
    ranges = _check_list(cfg, "channel_ranges")
    if len(ranges) != cfg.num_blocks:
        raise _err("channel_ranges", f"has {len(ranges)} entries, need one per block (num_blocks={cfg.num_blocks})")
    for j, r in enumerate(ranges):
        _check_range(f"channel_ranges[{j}]", r, 1)
    _check_range("head_channels", cfg.head_channels, 1)
    types = _check_list(cfg, "block_types")
    for t in types:
        if t not in BLOCK_TYPES:
            raise _err("block_types", f"unknown block type {t!r} (known: {', '.join(BLOCK_TYPES)})")
    if len(set(types)) != len(types):
        raise _err("block_types", f"lists a type twice: {types}")
    _check_act(cfg, "act")
    _check_act(cfg, "se_act")
    _check_act(cfg, "se_gate")
    for key in ("conv_kernels", "dwsep_kernels", "bottleneck_kernels", "pool_windows"):
        _check_ints(cfg, key, 1, odd=True)
    _check_ints(cfg, "expansions", 1)
    _check_range("group_k", cfg.group_k, 1)
    _check_prob(cfg, "group_prob")
    _check_prob(cfg, "se_prob")
    for kind in _check_list(cfg, "pool_kinds"):
        if kind not in POOL_KINDS:
            raise _err("pool_kinds", f"unknown pool kind {kind!r} (known: {', '.join(POOL_KINDS)})")
    _check_ints(cfg, "split_counts", 2)
    for op in _check_list(cfg, "split_ops"):
        if not (op == "identity" or _is_unary_op(op)):
            known = ["identity"] + sorted(k for k in OPS if _is_unary_op(k))
            raise _err("split_ops", f"unknown element-wise op {op!r} (known: {', '.join(known)})")
    if cfg.split_downsample not in DOWNSAMPLE_OPS:
        raise _err("split_downsample", f"must be one of {', '.join(DOWNSAMPLE_OPS)}, got {cfg.split_downsample!r}")
    if "split" in types:
        most = max(cfg.split_counts)
        if cfg.stem_channels < most:
            raise _err("stem_channels", f"{cfg.stem_channels} is fewer than the largest split count {most}")
        for j, r in enumerate(ranges):
            if r[0] < most:
                raise _err(f"channel_ranges[{j}]", f"min {r[0]} is fewer than the largest split count {most}")
    # Resolution: every layer maps H to ceil(H / stride); a stride on a 1x1 map is a mistake.
    size = -(-cfg.input_size // cfg.stem_stride)
    for j, s in enumerate(strides):
        if s > 1 and size == 1:
            raise _err("strides", f"block {j + 1} has stride {s} but its input is already 1x1 "
                                  f"(input_size={cfg.input_size} is too small for this schedule)")
        size = -(-size // s)
    return cfg


def coerce_config(cfg: Any) -> SyntheticConfig:
    """``cfg`` (a SyntheticConfig, mapping, OmegaConf node or None) as a SyntheticConfig whose
    field types are checked against the schema (foundation.configs.coerce)."""
    return coerce(SyntheticConfig, cfg)


# ---------------------------------------------------------------- sampling
def _changes_channels(b: dict, cfg: SyntheticConfig) -> bool:
    return b["type"] in ("conv", "dwsep", "bottleneck") or cfg.project_pool_split


def _nearest_multiple(value: int, m: int, lo: int, hi: int) -> int | None:
    """The multiple of ``m`` in [lo, hi] nearest to ``value`` (ties go down), None if there is none."""
    first, last = -(-lo // m) * m, hi // m * m
    if first > last:
        return None
    down = value // m * m
    best = down if value - down <= down + m - value else down + m
    return min(max(best, first), last)


def sample_plan(cfg: SyntheticConfig, seed: int, index: int) -> tuple[list[dict], int]:
    """Draw network ``index``'s choices: one plain-JSON dict per block, and C10.

    Draws come first (type, C_i, the type's parameters; then C10) from the network's own
    stream; channel compatibility is then resolved deterministically (module docstring).
    """
    rng = random.Random(f"{SOURCE}/{seed}/{index}")
    plan: list[dict] = []
    draws: list[int] = []
    for j in range(cfg.num_blocks):
        t = rng.choice(cfg.block_types)
        lo, hi = cfg.channel_ranges[j]
        draws.append(rng.randint(lo, hi))
        b: dict[str, Any] = {"type": t, "stride": cfg.strides[j], "in_channels": 0, "out_channels": 0}
        if t == "conv":
            b["kernel"] = rng.choice(cfg.conv_kernels)
            grouped = rng.random() < cfg.group_prob
            b["requested_group_size"] = cfg.group_unit * rng.randint(*cfg.group_k) if grouped else None
            b["group_size"] = b["requested_group_size"]
            b["groups"] = 1
        elif t == "dwsep":
            b["kernel"] = rng.choice(cfg.dwsep_kernels)
        elif t == "bottleneck":
            b["kernel"] = rng.choice(cfg.bottleneck_kernels)
            b["expansion"] = rng.choice(cfg.expansions)
            b["se"] = rng.random() < cfg.se_prob
        elif t == "pool":
            b["pool"] = rng.choice(cfg.pool_kinds)
            b["window"] = rng.choice(cfg.pool_windows)
            b["projection"] = cfg.project_pool_split
        else:  # split
            n = rng.choice(cfg.split_counts)
            b["splits"] = n
            b["ops"] = [rng.choice(cfg.split_ops) for _ in range(n)]
            b["sections"] = []
            b["downsample"] = cfg.split_downsample if b["stride"] > 1 else None
            b["projection"] = cfg.project_pool_split
        plan.append(b)
    head = rng.randint(*cfg.head_channels)
    _resolve_channels(cfg, plan, draws)
    return plan, head


def _resolve_channels(cfg: SyntheticConfig, plan: list[dict], draws: list[int]) -> None:
    """Fix every block's in/out channels, groups and split sections (see module docstring)."""
    producers = [-1] + [j for j, b in enumerate(plan) if _changes_channels(b, cfg)]
    for k, p in enumerate(producers):
        end = producers[k + 1] if k + 1 < len(producers) else len(plan) - 1
        consumers = range(p + 1, end + 1)  # the blocks that read p's output (the next producer included)
        if p < 0:
            lo = hi = value = cfg.stem_channels
        else:
            (lo, hi), value = cfg.channel_ranges[p], draws[p]
        # Divisors wanted on p's output channels, in priority order: (divisor, block, what).
        wanted: list[tuple[int, int, str]] = []
        if p >= 0 and plan[p]["type"] == "conv" and plan[p]["group_size"]:
            wanted.append((plan[p]["in_channels"] // plan[p]["group_size"], p, "own_groups"))
        for q in consumers:
            b = plan[q]
            if b["type"] == "split" and cfg.split_equal:
                wanted.append((b["splits"], q, "split"))
            if b["type"] == "conv" and b["group_size"]:
                wanted.append((b["group_size"], q, "group_size"))
        m = 1
        for d, q, what in wanted:
            mm = math.lcm(m, d)
            if what == "group_size" and _nearest_multiple(value, mm, max(lo, cfg.min_groups * d), hi) is not None:
                m, lo = mm, max(lo, cfg.min_groups * d)  # enough channels for min_groups groups
            elif _nearest_multiple(value, mm, lo, hi) is not None:
                m = mm
            elif what != "split":  # an unmet split divisor just gives near-equal sections (below)
                plan[q]["group_size"] = None  # the conv falls back to groups=1
        channels = _nearest_multiple(value, m, lo, hi)
        if p >= 0:
            plan[p]["out_channels"] = channels
            if plan[p]["type"] == "conv" and plan[p]["group_size"]:
                plan[p]["groups"] = plan[p]["in_channels"] // plan[p]["group_size"]
        for q in consumers:
            b = plan[q]
            b["in_channels"] = channels
            if not _changes_channels(b, cfg):
                b["out_channels"] = channels
            if b["type"] == "split":
                n = b["splits"]
                base, extra = divmod(channels, n)
                b["sections"] = [base + (1 if i < extra else 0) for i in range(n)]
    for b in plan:
        if b["type"] == "bottleneck":
            b["residual"] = b["stride"] == 1 and b["in_channels"] == b["out_channels"]


# ---------------------------------------------------------------- building
def _pool_attrs(cfg: SyntheticConfig, kind: str, window: int, stride: int) -> tuple[str, dict]:
    attrs = {"kernel": window, "stride": stride, "padding": window // 2}
    if kind == "avg":
        attrs["count_include_pad"] = cfg.pool_count_include_pad
        return "avgpool", attrs
    return "maxpool", attrs


def _build_block(g: Graph, x: str, b: dict, cfg: SyntheticConfig) -> str:
    t, s, out = b["type"], b["stride"], b["out_channels"]
    if t == "conv":
        return conv_bn_act(g, x, out, b["kernel"], s, groups=b["groups"], act=cfg.act)
    if t == "dwsep":
        return depthwise_separable(g, x, out, b["kernel"], s, act=cfg.act)
    if t == "bottleneck":
        return inverted_residual(
            g, x, out, b["kernel"], s, expansion=b["expansion"], se=b["se"], act=cfg.act,
            se_act=cfg.se_act, se_gate=cfg.se_gate, se_reduction=cfg.se_reduction,
        )
    if t == "pool":
        op, attrs = _pool_attrs(cfg, b["pool"], b["window"], s)
        y = g.add(op, x, **attrs)
    else:  # split
        if b["downsample"]:
            op, attrs = _pool_attrs(cfg, DOWNSAMPLE_OPS[b["downsample"]], 3, s)
            x = g.add(op, x, **attrs)
        parts = g.add_multi("split", x, sections=b["sections"], axis=1)
        parts = [p if op == "identity" else g.add(op, p) for p, op in zip(parts, b["ops"])]
        y = g.add("concat", parts, axis=1)
    if b["projection"]:
        y = conv_bn_act(g, y, out, 1, act=cfg.act)
    return y


def build_network(cfg: SyntheticConfig, seed: int, index: int) -> Graph:
    """Network ``index`` of the space for ``seed`` (a pure function of its arguments)."""
    plan, head = sample_plan(cfg, seed, index)
    meta = {"space": SPACE, "seed": seed, "index": index, "blocks": plan, "head_channels": head}
    g = Graph(name=f"{SOURCE}-{seed}-{index:05d}", source=SOURCE, meta=meta)
    x = g.input([1, cfg.in_channels, cfg.input_size, cfg.input_size])
    with g.block("stem"):
        x = conv_bn_act(g, x, cfg.stem_channels, cfg.stem_kernel, cfg.stem_stride, act=cfg.act)
    for j, b in enumerate(plan, 1):
        with g.block(f"block{j}/{b['type']}"):
            x = _build_block(g, x, b, cfg)
    with g.block("head"):
        x = conv_bn_act(g, x, head, 1, act=cfg.act)
    x = classifier(g, x, cfg.num_classes)
    return g.set_outputs(x)


SyntheticSource = register_space(SOURCE, SyntheticConfig, validate_config, build_network,
                                 "The synthetic NAS space of the USC paper (section 4.3.2): ``cfg.n`` random networks.")
