"""Graph passes: the network as a device's converter left it, which is what the device timed.

An IR graph is the network as written. A framework's converter may rewrite it before it runs,
and then the measured latency is the latency of the rewritten graph: a predictor that reads the
IR as written prices work the device never did. A scenario names the passes its toolchain
applied in ``scenarios.graph_passes`` (comma-separated names of :data:`PASSES`; docs/dataset.md),
and ``Dataset.graph(model_id, scenario_id)`` applies them, so every predictor sees the graph
that ran. Each pass is a pure function ``Graph -> Graph`` (a new graph; node names, attributes
and blocks of the nodes it keeps are unchanged, so op records naming nodes still match).
"""
from __future__ import annotations

import re
from typing import Callable

from .ir import Graph, IRError, split_ref
from foundation.registry import Registry

GraphPass = Callable[[Graph], Graph]
PASSES: Registry[GraphPass] = Registry("graph pass")
ZEROS_SUFFIX = "/zeros"
CONST_SUFFIX = "/const"


def register_pass(name: str) -> Callable[[GraphPass], GraphPass]:
    return PASSES.register(name)


def unknown_pass(name: str) -> str | None:
    """Why ``name`` is no graph pass (one line), or None if it is one."""
    return None if name in PASSES else f"unknown graph pass {name!r} (known: {', '.join(PASSES.names())})"


def parse_passes(text: object, where: str = "graph_passes") -> tuple[str, ...]:
    """``"a,b"`` -> ("a", "b"); missing or empty -> (); an unknown name is an error naming it."""
    if text is None or (isinstance(text, float) and text != text) or str(text).strip() in ("", "<NA>"):
        return ()
    names = tuple(p.strip() for p in str(text).split(",") if p.strip())
    for n in names:
        if why := unknown_pass(n):
            raise IRError(f"{where}: {why}")
    return names


def apply_passes(g: Graph, names: tuple[str, ...] | list[str]) -> Graph:
    for n in names:
        g = PASSES.get(n)(g)
    return g


def _zero_products(g: Graph) -> list:
    """The ``scale`` nodes of factor 0 (x * 0: NAS-Bench-201's ``none`` edge)."""
    return [n for n in g.nodes.values() if n.op == "scale" and float(n.attrs.get("factor", 1.0)) == 0.0]


@register_pass("zero_scale_dce")
def zero_scale_dce(g: Graph) -> Graph:
    """``x * 0`` rewritten to zeros of x's shape, then dead-code elimination.

    A converter that knows ``x * 0`` is zero replaces the product by a constant; the product
    then no longer reads ``x``, and every op whose output reached the network's output only
    through such products is dead and removed. What computes *on* zeros is kept (it still runs:
    a constant input does not make a convolution free unless the converter folds constants,
    which is a pass of its own, :func:`fold_constants`).

    Why (NAS-Bench-201 on HELP's devices): its ``none`` edge is ``x.mul(0.)``. On raspi4 and
    pixel3 (TFLite) the 341 architectures whose cell output is cut off from the cell input
    measure a median 0.5% of the devices' median latency (other devices: 66-79%), FLOPs counted without
    the convolutions that only feed ``none`` edges rank raspi4 at Spearman 0.935 instead of 0.873
    (pixel3: 0.904 instead of 0.841), while dropping the convolutions that compute on zeros
    instead makes it worse (0.823): the converters removed dead ops, not what computes on zeros.
    On pixel2, gold_6226, the GPUs and eyeriss every edge ran (the same count ranks them worse).
    They did so only in some cells, though: :func:`nb201_output_zeros_dce` is the rule their
    latencies show, and the one their scenarios name.

    Each product becomes a constant: an ``input`` node named ``<scale node>/zeros`` of its shape
    (inputs are not ops: they have no cost in any predictor), read by the product's consumers.
    """
    zeros = {n.name for n in _zero_products(g)}
    return _as_constants(g, zeros, ZEROS_SUFFIX, "zero_scale_dce") if zeros else g


def _as_constants(g: Graph, replaced: set[str], suffix: str, pass_name: str) -> Graph:
    """``g`` with the nodes ``replaced`` made constants (``input`` nodes ``<name><suffix>`` of
    their shape, read by their consumers) and what then reaches no output removed; ``meta``
    records the pass and the constants left in the graph (network inputs are not constants)."""
    for r in replaced:
        if r + suffix in g.nodes:
            raise IRError(f"graph {g.name!r}: node {r + suffix!r} exists; {pass_name} names its constants so")

    def target(ref: str) -> str:
        name, _ = split_ref(ref)
        return name + suffix if name in replaced else ref

    needed: set[str] = set()
    stack = [split_ref(target(r))[0] for r in g.outputs]
    while stack:
        name = stack.pop()
        if name in needed:
            continue
        needed.add(name)
        if name.endswith(suffix) and name[: -len(suffix)] in replaced:
            continue  # a constant reads nothing
        stack.extend(split_ref(target(r))[0] for r in g.nodes[name].inputs)

    constants = sorted(c for c in {*g.meta.get("constants", []), *(r + suffix for r in replaced)} if c in needed)
    out = Graph(name=g.name, source=g.source,
                meta={**g.meta, "passes": [*g.meta.get("passes", []), pass_name], "constants": constants})
    for node in g.nodes.values():
        if node.name in replaced:
            if node.name + suffix in needed:
                out.add_node("input", [], name=node.name + suffix, block=node.block, attrs={"shape": list(node.shape)})
        elif node.name in needed:
            out.add_node(node.op, [target(r) for r in node.inputs], name=node.name, block=node.block,
                         attrs=dict(node.attrs))
    return out.set_outputs(*[target(r) for r in g.outputs])


@register_pass("fold_constants")
def fold_constants(g: Graph) -> Graph:
    """Constant folding: an op whose every input is a constant a pass made (``meta["constants"]``,
    e.g. :func:`zero_scale_dce`'s zeros) is computed by the converter, not by the device; it
    becomes a constant of its shape (an ``input`` node ``<name>/const``) and what only fed it
    goes. A graph without such constants is returned as it is.

    Why (HELP's raspi4 and pixel3): the NAS-Bench-201 networks whose cells output zeros measure
    0.011-0.0125 ms, whatever their cells hold: nothing of the network ran. After
    :func:`zero_scale_dce` such a network is its classifier head (batch norm, ReLU, pooling, FC)
    on constant zeros, itself a constant, and an op model fitted on those latencies has to price
    that head at next to nothing in every network. Converters fold constants (TFLite's does);
    folded, the graph is what ran: nothing. (0.012 ms alone cannot tell whether the head ran;
    the networks that kept convolutions or pooling on constants in their last cell measure
    0.05-1 ms, see :func:`nb201_output_zeros_dce`.)"""
    constant = set(g.meta.get("constants", []))
    folded: set[str] = set()
    for node in g.nodes.values():  # insertion order is topological
        # a multi-output op (split) stays: its outputs would need one constant each
        if node.op != "input" and node.inputs and len(node.shapes) == 1 \
                and all(split_ref(r)[0] in constant for r in node.inputs):
            folded.add(node.name)
            constant.add(node.name)
    return _as_constants(g, folded, CONST_SUFFIX, "fold_constants") if folded else g


_CELL_OUTPUT_EDGE = re.compile(r"(^|/)edge\d3_none$")  # generators/nasbench201.py's block of an i->3 `none` edge


@register_pass("nb201_output_zeros_dce")
def nb201_output_zeros_dce(g: Graph) -> Graph:
    """:func:`zero_scale_dce` on a NAS-Bench-201 network whose ``none`` edges all feed the cell's
    output node (edges i->3); the network as written when a ``none`` edge feeds node 1 or 2.

    Why not :func:`zero_scale_dce` everywhere: HELP's raspi4 and pixel3 latencies say their
    toolchain removed dead ops only in some cells. Of the 125 architectures whose output node
    receives only ``none`` edges, the 64 without another ``none`` all collapse (0.011-0.0125 ms
    on raspi4); of the 61 with one, 20 ran every op (5-34 ms, within the spread of a linear model
    of the ops as written), 2 a small part (0.14 / 0.38 ms) and 39 collapsed too. Of the 3,296
    other architectures with ops that feed only ``none`` edges, a linear model of the op counts
    fitted on the architectures without such ops predicts the 1,536 of the first kind with a median
    error of 8.4% when their dead ops are removed (40% when kept), and the 1,760 of the second kind
    with 9.3% when kept (29% when removed). The
    mechanism inside that toolchain is not known; the rule is what its measurements show, and
    it is not the whole story. 341 architectures compute a constant (every edge into the output
    node is ``none`` or reads a node that is itself constant, e.g. nb201-04478's skip edges from
    zero nodes). raspi4 timed 128 of them at 0.012 ms (nothing ran), 148 at 0.05-1 ms (what
    fits the last cell's pooling and convolutions on constants, and the head, running) and 65
    whole (5-34 ms). The rule collapses 64 of the 128 and keeps the other 64 and the 148 whole:
    a percentage loss weighs each of those 212 like 10^3-10^7 typical networks, which is what
    makes the op-wise fits collapse where a draw holds some (leaderboard/why_below_flops.yaml).
    No rule over the cell string found yet tells the 65 from the 276.
    A graph without NAS-Bench-201's edge blocks is returned as it is."""
    zeros = _zero_products(g)
    if zeros and all(_CELL_OUTPUT_EDGE.search(n.block or "") for n in zeros):
        return zero_scale_dce(g)
    return g


__all__ = ["PASSES", "GraphPass", "register_pass", "unknown_pass", "parse_passes", "apply_passes", "zero_scale_dce",
           "fold_constants", "nb201_output_zeros_dce"]
