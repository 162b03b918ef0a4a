"""NAS-Bench-201: all 15,625 cells as full CIFAR networks, indexed as NAS-Bench-201 indexes them.

The index is NAS-Bench-201's own: the 5**6 cell strings in lexicographic order, shuffled once
with Python's ``random`` seeded with 88 (not a mixed-radix number of the edges);
:func:`arch_str` and :func:`index_of` reproduce it both ways (the tests check all 15,625 rows of
HELP's latency table). The network is NAS-Bench-201's CIFAR skeleton with an inference cell
(:func:`build`). A ``none`` edge is kept as NAS-Bench-201 computes it, ``x * 0`` (a ``scale``
node with factor 0) added into the node sum like any other edge, so the IR is the computation
the devices ran: every node used, every network valid, 15,625 distinct graphs. pixel3 and
raspi4, whose toolchain removed some of that work, name the rewrite in their scenarios
(``graph_passes``, generators/passes.py). docs/generators.md (*NAS-Bench-201*) has the skeleton,
the cell, and why the ``none`` edges stay.
"""
from __future__ import annotations

import functools
import itertools
import operator
import random
from dataclasses import dataclass, field
from typing import Any, Iterator

from .ir import Graph
from .sources import checked_seed, register_source
from foundation.configs import coerce

SOURCE = "nasbench201"
OPS = ("none", "skip_connect", "nor_conv_1x1", "nor_conv_3x3", "avg_pool_3x3")
NUM_NODES = 4
EDGES = tuple((i, j) for j in range(1, NUM_NODES) for i in range(j))  # (0,1) (0,2) (1,2) (0,3) (1,3) (2,3)
NUM_ARCHS = len(OPS) ** len(EDGES)  # 15,625
SHUFFLE_SEED = 88  # NAS-Bench-201's seed for the order of its architecture list

INPUT_SHAPE = [1, 3, 32, 32]
STEM_CHANNELS = 16
STAGE_CHANNELS = (16, 32, 64)
CELLS_PER_STAGE = 5
NUM_CLASSES = 10


# ---------------------------------------------------------------- index <-> cell string
@functools.lru_cache(maxsize=1)
def _table() -> tuple[tuple[tuple[int, ...], ...], dict[str, int]]:
    cells = list(itertools.product(range(len(OPS)), repeat=len(EDGES)))  # last edge fastest
    random.Random(SHUFFLE_SEED).shuffle(cells)
    strings = {_format(c): i for i, c in enumerate(cells)}
    return tuple(cells), strings


def _format(cell: tuple[int, ...]) -> str:
    parts, k = [], 0
    for j in range(1, NUM_NODES):
        parts.append("|".join(f"{OPS[cell[k + i]]}~{i}" for i in range(j)))
        k += j
    return "|" + "|+|".join(parts) + "|"


def _check_index(index: Any, what: str = "index") -> int:
    if isinstance(index, bool):
        raise ValueError(f"{what}: expected an int, got {index!r}")
    try:
        index = operator.index(index)  # ints and NumPy integers
    except TypeError:
        raise ValueError(f"{what}: expected an int, got {index!r}") from None
    if not 0 <= index < NUM_ARCHS:
        raise ValueError(f"{what}: {index} out of range [0, {NUM_ARCHS})")
    return int(index)


def cell_ops(index: int) -> tuple[str, ...]:
    """The 6 edge ops of cell ``index``, in the order of :data:`EDGES`."""
    return tuple(OPS[o] for o in _table()[0][_check_index(index)])


def arch_str(index: int) -> str:
    """NAS-Bench-201's cell string of architecture ``index``."""
    return _format(_table()[0][_check_index(index)])


def index_of(arch: str) -> int:
    """NAS-Bench-201's index of a cell string (exactly as NAS-Bench-201 writes it)."""
    if not isinstance(arch, str):
        raise ValueError(f"arch_str: expected a string, got {arch!r}")
    try:
        return _table()[1][arch]
    except KeyError:
        pass
    # Not canonical: say what is wrong with it.
    nodes = arch.strip("|").split("|+|") if arch.startswith("|") and arch.endswith("|") else []
    if len(nodes) != NUM_NODES - 1:
        raise ValueError(f"arch_str: {arch!r} is not a cell string like {arch_str(0)!r}")
    for j, node in enumerate(nodes, 1):
        edges = node.split("|")
        for i, edge in enumerate(edges):
            op, _, src = edge.partition("~")
            if op not in OPS:
                raise ValueError(f"arch_str: unknown op {op!r} in {arch!r} (known: {', '.join(OPS)})")
            if src != str(i) or len(edges) != j:
                raise ValueError(f"arch_str: node {j} of {arch!r} must list inputs ~0..~{j - 1} in order")
    raise ValueError(f"arch_str: {arch!r} is not a NAS-Bench-201 cell string")


# ---------------------------------------------------------------- the network
def _relu_conv_bn(g: Graph, x: str, out: int, kernel: int, stride: int = 1) -> str:
    y = g.add("relu", x)
    y = g.add("conv2d", y, out_channels=out, kernel=kernel, stride=stride, padding=kernel // 2, bias=False)
    return g.add("batchnorm", y)


def _edge(g: Graph, x: str, op: str) -> str:
    if op == "none":
        return g.add("scale", x, factor=0.0)  # NAS-Bench-201's Zero: x.mul(0.)
    if op == "skip_connect":
        return x
    if op == "nor_conv_1x1":
        return _relu_conv_bn(g, x, g.shape(x)[1], 1)
    if op == "nor_conv_3x3":
        return _relu_conv_bn(g, x, g.shape(x)[1], 3)
    if op == "avg_pool_3x3":
        return g.add("avgpool", x, kernel=3, stride=1, padding=1, count_include_pad=False)
    raise AssertionError(op)


def _cell(g: Graph, x: str, ops: tuple[str, ...]) -> str:
    nodes = [x]
    k = 0
    for j in range(1, NUM_NODES):
        terms = []
        for i in range(j):
            with g.block(f"edge{i}{j}_{ops[k]}"):
                terms.append(_edge(g, nodes[i], ops[k]))
            k += 1
        nodes.append(terms[0] if len(terms) == 1 else g.add("add", terms))
    return nodes[-1]


def _reduction(g: Graph, x: str, out: int) -> str:
    """ResNet basic block, stride 2, as NAS-Bench-201 builds it between stages."""
    y = _relu_conv_bn(g, x, out, 3, stride=2)
    y = _relu_conv_bn(g, y, out, 3)
    with g.block("shortcut"):
        s = g.add("avgpool", x, kernel=2, stride=2, padding=0)
        s = g.add("conv2d", s, out_channels=out, kernel=1, bias=False)
    return g.add("add", [s, y])


def build(index_or_arch: int | str) -> Graph:
    """The full CIFAR network of a NAS-Bench-201 index or cell string."""
    index = index_of(index_or_arch) if isinstance(index_or_arch, str) else _check_index(index_or_arch)
    ops = cell_ops(index)
    g = Graph(name=f"nb201-{index:05d}", source=SOURCE, meta={"index": index, "arch_str": arch_str(index)})
    x = g.input(INPUT_SHAPE)
    with g.block("stem"):
        x = g.add("conv2d", x, out_channels=STEM_CHANNELS, kernel=3, padding=1, bias=False)
        x = g.add("batchnorm", x)
    for s, c in enumerate(STAGE_CHANNELS, 1):
        if s > 1:
            with g.block(f"reduction{s}"):
                x = _reduction(g, x, c)
        for k in range(CELLS_PER_STAGE):
            with g.block(f"stage{s}/cell{k}"):
                x = _cell(g, x, ops)
    with g.block("head"):
        x = g.add("batchnorm", x)
        x = g.add("relu", x)
        x = g.add("global_avgpool", x)
        x = g.add("flatten", x)
        x = g.add("fc", x, out_features=NUM_CLASSES)
    return g.set_outputs(x)


# ---------------------------------------------------------------- the source
@dataclass
class NasBench201Config:
    n: int = 10  # architectures sampled without replacement, deterministic from the seed
    indices: list[int] = field(default_factory=list)  # explicit indices (override n)
    all: bool = False  # all 15,625 in index order (overrides n)


def _as_config(cfg: Any) -> NasBench201Config:
    return coerce(NasBench201Config, cfg)


def validate_config(cfg: Any) -> NasBench201Config:
    """The checked section (types: the schema, through :func:`coerce`); ValueError("<field>: <what
    is wrong>") on the first fault."""
    cfg = _as_config(cfg)
    if not 0 <= cfg.n <= NUM_ARCHS:
        raise ValueError(f"n: expected an int in [0, {NUM_ARCHS}], got {cfg.n!r}")
    seen: set[int] = set()
    for k, i in enumerate(cfg.indices):
        i = _check_index(i, f"indices[{k}]")
        if i in seen:
            raise ValueError(f"indices[{k}]: {i} listed twice")
        seen.add(i)
    if cfg.all and seen:
        raise ValueError("all: true cannot be combined with explicit indices")
    return cfg


def selected_indices(cfg: Any, seed: int) -> list[int]:
    """The indices a config selects: explicit ones, all, or ``n`` drawn from a permutation of
    all indices seeded by ``seed`` (so a larger ``n`` only appends architectures)."""
    cfg = validate_config(cfg)
    if cfg.indices:
        return [int(i) for i in cfg.indices]
    if cfg.all:
        return list(range(NUM_ARCHS))
    seed = checked_seed(seed)
    order = list(range(NUM_ARCHS))
    random.Random(f"{SOURCE}/{seed}").shuffle(order)
    return order[: cfg.n]


def _generate(cfg: Any, seed: int) -> Iterator[Graph]:
    for i in selected_indices(cfg, seed):
        yield build(i)


NasBench201Source = register_source(SOURCE, NasBench201Config, validate_config, _generate,
                                    "NAS-Bench-201 architectures as full CIFAR-10 networks (name ``nb201-<index>``).")
