"""The XNNPACK operators LiteRT runs on CPU for a network, deduced from the IR alone.

Two stages, each a table:

1. The TFLite converter's rewrites, as the project's exporter documents and checks them
   (``generators.export.tflite``: batch norm folded into the preceding convolution, ReLU/ReLU6
   fused into the producing CONV_2D/DEPTHWISE_CONV_2D/FULLY_CONNECTED/ADD/MUL/pool, explicit
   PAD before convolutions whose padding is not SAME/VALID, ...): the TFLite operators of each
   IR node, and which of them carry a fused activation.
2. LiteRT's XNNPACK delegate (:data:`XNN_KERNELS`): each TFLite operator becomes the XNNPACK
   operators it creates, named as the runtime's profiler names them (the ``kernel`` records of
   ``latbench-run --mode kernel``). Rules the names show: a 1x1 stride-1 unpadded convolution
   is a ``Fully Connected`` GEMM; other convolutions are an IGEMM (a 1x1 grouped one a GEMM);
   depthwise convolutions a ``DWConv``; a fused activation stays inside a convolution, fully
   connected or pooling operator but is a separate ``Clamp`` after an element-wise binary one;
   a zero PAD right before a convolution is absorbed into its padding (not before a pooling); a
   FULLY_CONNECTED reshapes its input first; a concatenation or split is one ``Copy``.
   Operators XNNPACK does not take (MIRROR_PAD, RESIZE_NEAREST_NEIGHBOR) stay with
   LiteRT's builtin kernels and are named by their TFLite operator.

:func:`deduce_kernels` returns the predicted operator names in execution order;
:func:`compare` scores a prediction against executed names.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from generators.export import tflite as _tfl
from generators.ir import Graph, Node, split_ref


@dataclass
class TfliteOp:
    """One TFLite operator of the converted model: its builtin name, the IR node it came from,
    and whether a following ReLU/ReLU6 was fused into it."""

    op: str
    node: str
    fused_activation: bool = False
    after_pad: bool = False  # an explicit PAD of the same node precedes it


#: IR activations the converter fuses into the producing operator (when the plan says so).
_FUSABLE_ACTS = {"relu", "relu6", "clip"}


def tflite_ops(graph: Graph) -> list[TfliteOp]:
    """The TFLite operators of ``graph`` after the converter's rewrites, in model order (the
    exporter's own plan; see ``TFLITE_FUSIONS`` in generators/export/tflite.py). The nodes they
    name are those of ``converted_graph(graph)`` (n-ary adds split into partial sums)."""
    graph = converted_graph(graph)
    plans = _tfl.plan_graph(graph)
    per_node = _tfl._expected_ops(graph, plans, "fp32")
    out: list[TfliteOp] = []
    last: dict[str, int] = {}  # node -> index in out of the op producing its output
    for node in graph.nodes.values():
        ops = per_node.get(node.name, [])
        src = split_ref(node.inputs[0])[0] if node.inputs else None
        if ops:
            if node.op == "hsigmoid" and ops == ["MUL"] and src in last:
                out[last[src]].fused_activation = True  # +3 folded into the bias, ReLU6 fused
            for k, op in enumerate(ops):
                out.append(TfliteOp(op, node.name, after_pad=k > 0 and ops[k - 1] in ("PAD", "MIRROR_PAD")))
            if node.op == "hsigmoid" and ops[0] == "ADD":
                out[-len(ops)].fused_activation = True  # ADD(+3) with ReLU6 fused
            last[node.name] = len(out) - 1
        elif src is not None and src in last:
            last[node.name] = last[src]  # folded (batch norm, scale) or fused (activation)
            if node.op in _FUSABLE_ACTS:
                out[last[src]].fused_activation = True
    return out


# ---------------------------------------------------------------- TFLite op -> XNNPACK operators
def _conv(op: TfliteOp, node: Node, graph: Graph) -> list[str]:
    a = node.attrs
    cin = graph.input_shapes(node)[0][1]
    if a["groups"] == cin and cin > 1:
        # depthwise micro-kernels cover windows up to 5x5; larger ones run as a grouped IGEMM
        area = a["kernel"][0] * a["kernel"][1]
        return ["Convolution (NHWC, F32) DWConv" if area <= 25 else "Convolution (NHWC, F32) IGEMM"]
    one = list(a["kernel"]) == [1, 1] and list(a["stride"]) == [1, 1] and list(a["padding"]) == [0, 0]
    if one and a["groups"] == 1:
        return ["Fully Connected (NC, F32) GEMM"]
    return ["Convolution (NHWC, F32) GEMM" if one else "Convolution (NHWC, F32) IGEMM"]


def _fc(op: TfliteOp, node: Node, graph: Graph) -> list[str]:
    # the delegate reshapes every FULLY_CONNECTED input to [batch, features] first
    return ["Static Reshape (NC)", "Fully Connected (NC, F32) GEMM"]


def _binary(name: str) -> Callable[[TfliteOp, Node, Graph], list[str]]:
    return lambda op, node, graph: [name] + (["Clamp (NC)"] if op.fused_activation else [])


def _same(name: str) -> Callable[[TfliteOp, Node, Graph], list[str]]:
    return lambda op, node, graph: [name]


def _builtin(op: TfliteOp, node: Node, graph: Graph) -> list[str]:
    return [op.op]


def _pool(op: TfliteOp, node: Node, graph: Graph) -> list[str]:
    a = node.attrs
    if list(a["kernel"]) == [1, 1]:
        # a 1x1 window is a copy when it does not stride (nothing runs); a strided one is left
        # to the builtin kernel by the delegate
        return [] if list(a["stride"]) == [1, 1] else _builtin(op, node, graph)
    if op.op == "MAX_POOL_2D":
        return ["Max Pooling (NHWC, F32)"]
    # SAME padding divides each window by its real elements: a per-pixel divisor (an explicit
    # PAD before it leaves a VALID, plain average pooling)
    pixelwise = any(a["padding"]) and not op.after_pad
    return ["Average Pooling (NHWC, F32) " + ("Pixelwise Average Pooling" if pixelwise else "Average Pooling")]


#: TFLite operator -> the XNNPACK operators (profiler names) it runs as.
XNN_KERNELS: dict[str, Callable[[TfliteOp, Node, Graph], list[str]]] = {
    "CONV_2D": _conv, "DEPTHWISE_CONV_2D": _conv, "FULLY_CONNECTED": _fc,
    "ADD": _binary("Add (ND)"), "MUL": _binary("Multiply (ND)"), "SUB": _binary("Subtract (ND)"),
    "MINIMUM": _binary("Minimum (ND)"), "MAXIMUM": _binary("Maximum (ND)"),
    "RELU": _same("Clamp (NC)"), "RELU6": _same("Clamp (NC)"), "RELU_N1_TO_1": _same("Clamp (NC)"),
    "LOGISTIC": _same("Sigmoid (NC)"), "HARD_SWISH": _same("HardSwish (NC)"), "TANH": _same("TanH (NC)"),
    "LEAKY_RELU": _same("Leaky ReLU (NC, F32)"), "PRELU": _same("PReLU (NC)"), "SOFTMAX": _same("SoftMax (NC)"),
    "MAX_POOL_2D": _pool, "AVERAGE_POOL_2D": _pool,
    "MEAN": _same("Mean (ND) Reduce2"), "CONCATENATION": _same("Copy (NC, X32)"),
    "RESHAPE": _same("Static Reshape (NC)"), "TRANSPOSE": _same("Transpose (ND, X32) Transpose"),
    "SLICE": _same("Slice (ND, X32)"), "SPLIT": _same("Copy (NC, X32)"), "SPLIT_V": _builtin,
    "PAD": _same("Constant Pad (ND, X32)"), "PADV2": _same("Constant Pad (ND, X32)"),
    "MIRROR_PAD": _builtin, "RESIZE_NEAREST_NEIGHBOR": _builtin,
}
#: A zero PAD is absorbed into the padding of these readers.
_ABSORBS_PAD = {"CONV_2D", "DEPTHWISE_CONV_2D"}


def converted_graph(graph: Graph) -> Graph:
    """The graph as the exporter lowers it (common subexpressions merged, partial sums)."""
    return _tfl.merge_common_subexpressions(graph)


def deduce_kernels(graph: Graph) -> list[str]:
    """The XNNPACK operator names (as the runtime's kernel records name them) LiteRT runs for
    ``graph`` with fp32 weights on CPU, in execution order."""
    graph = converted_graph(graph)
    ops = tflite_ops(graph)
    out: list[str] = []
    for i, op in enumerate(ops):
        if op.op == "PAD" and i + 1 < len(ops) and ops[i + 1].op in _ABSORBS_PAD and ops[i + 1].node == op.node:
            continue
        fn = XNN_KERNELS.get(op.op)
        if fn is None:
            raise KeyError(f"node {op.node!r}: no XNNPACK rule for TFLite operator {op.op}")
        out.extend(fn(op, graph.nodes[op.node], graph))
    return out


def executed_kernels(run: Any) -> list[str]:
    """The operator names of the first timed run of a kernel-mode NativeRun, in order."""
    kernels = run.kernels
    if not kernels:
        return []
    first = kernels[0]["run"]
    return [k["name"] for k in kernels if k["run"] == first]


@dataclass
class Match:
    predicted: int
    executed: int
    matched: int  # multiset intersection of names
    exact: bool  # same names in the same order

    @property
    def share(self) -> float:
        """Matched operators over the larger of the two counts (1.0: same multiset)."""
        n = max(self.predicted, self.executed)
        return self.matched / n if n else 1.0


def compare(predicted: Sequence[str], executed: Sequence[str]) -> Match:
    p, e = Counter(predicted), Counter(executed)
    return Match(len(predicted), len(executed), sum((p & e).values()), list(predicted) == list(executed))


__all__ = ["Match", "TfliteOp", "XNN_KERNELS", "compare", "deduce_kernels", "executed_kernels", "tflite_ops"]
