"""The XNNPACK operators LiteRT runs on CPU for a network, deduced from the IR alone.

Three stages:

1. The TFLite converter's rewrites, as the project's exporter documents and checks them
   (``generators.export.tflite``: batch norm folded into the preceding convolution, ReLU/ReLU6
   fused into the producing CONV_2D/DEPTHWISE_CONV_2D/FULLY_CONNECTED/ADD/MUL/pool, explicit
   PAD before convolutions whose padding is not SAME/VALID, ...): the TFLite operators of each
   IR node, and which of them carry a fused activation.
2. LiteRT's XNNPACK delegate (:data:`XNN_KERNELS`): each TFLite operator becomes the XNNPACK
   operators it creates, named as the runtime's profiler names them (the ``kernel`` records of
   ``latbench-run --mode kernel``). Rules the names show: a 1x1 stride-1 unpadded convolution
   is a ``Fully Connected`` GEMM; other convolutions are an IGEMM (a grouped 1x1 one too);
   depthwise convolutions a ``DWConv``; a fused activation stays inside a convolution, fully
   connected or pooling operator but is a separate ``Clamp`` after an element-wise binary one;
   a zero PAD right before a convolution is absorbed into its padding (not before a pooling); a
   FULLY_CONNECTED with a ``[1, F]`` result reshapes its input first, one over the last axis of
   tokens does not; a concatenation or split is one ``Copy``. Transformer operators run as the
   converter leaves them, one XNNPACK operator each: a layer norm is its MEAN, SUB,
   SQUARED_DIFFERENCE, MEAN, ADD, RSQRT and MUL(s) (``Mean (ND) Reduce2``, ``Subtract (ND)``,
   ``Squared Difference (ND)``, ``Add (ND)``, ``Reciprocal Square Root (NC)``, ``Multiply (ND)``),
   GELU ``GELU (NC)``, BATCH_MATMUL of two activations ``Batch Matrix Multiply (NC, F32) GEMM``
   (a folded transpose is its flag, no operator), SOFTMAX ``Softmax (NC, F32)``, attention's
   RESHAPE / TRANSPOSE (up to rank 6) ``Static Reshape (NC)`` / ``Transpose (ND, X32) Transpose``.
   Operators XNNPACK does not take stay with LiteRT's builtin kernels, named by their TFLite
   operator (MIRROR_PAD, RESIZE_NEAREST_NEIGHBOR, LOCAL_RESPONSE_NORMALIZATION, GATHER).

3. LiteRT's partitioning (:func:`partitions`): the delegate takes every operator it supports,
   and the runtime splits the graph into subsets of one kind (delegated or builtin) the way
   TFLite's ``PartitionGraphIntoIndependentNodeSubsets`` does: the first operator whose inputs
   are ready opens a subset and fixes its kind; every further ready operator of that kind joins
   it; when none is left the next subset opens. Each delegated subset runs as one XNNPACK
   runtime whose operators keep the subset's order, so the executed order is the subsets'
   order, not the model's: a branch that does not wait for a builtin MIRROR_PAD runs before it.

:func:`deduce_kernel_ops` returns the predicted operators in execution order, each with the
TFLite operator and IR node it runs (what nn-Meter's kernel predictors need to describe a
measured kernel); :func:`deduce_kernels` their names; :func:`compare` scores a prediction
against executed names.
"""
from __future__ import annotations

import json
import weakref
from collections import Counter
from itertools import accumulate, groupby
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

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
    deps: tuple[int, ...] = ()  # indices (in the op list) of the operators whose outputs it reads


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
            reads = tuple(sorted({last[r] for r in (split_ref(i)[0] for i in node.inputs) if r in last}))
            for k, op in enumerate(ops):
                out.append(TfliteOp(op, node.name, after_pad=k > 0 and ops[k - 1] in ("PAD", "MIRROR_PAD"),
                                    deps=reads if k == 0 else (len(out) - 1,)))
            if node.op == "hsigmoid" and ops[0] == "ADD":
                out[-len(ops)].fused_activation = True  # ADD(+3) with ReLU6 fused
            last[node.name] = len(out) - 1
        elif src is not None and src in last:
            last[node.name] = last[src]  # folded (batch norm, scale) or fused (activation)
            if node.op in _FUSABLE_ACTS:
                out[last[src]].fused_activation = True
    return out


# ---------------------------------------------------------------- TFLite op -> XNNPACK operators
def conv_operator(cin: int, groups: int, kernel: Sequence[int], stride: Sequence[int], padding: Sequence[int]) -> str:
    """The XNNPACK operator an fp32 2-D convolution runs as (the same XNNPACK under LiteRT and
    ExecuTorch): a 1x1 stride-1 unpadded ungrouped one a ``Fully Connected`` GEMM, a depthwise
    one a ``DWConv`` up to 5x5 windows, anything else an IGEMM. A grouped 1x1 convolution is an
    IGEMM too: both runtimes' kernel records name it so for every channel count tried (XNNPACK's
    own selection reads as if it were a convolution GEMM; that name never appears in a run)."""
    if groups == cin and cin > 1:
        # depthwise micro-kernels cover windows up to 5x5; larger ones run as a grouped IGEMM
        area = kernel[0] * kernel[1]
        return "Convolution (NHWC, F32) DWConv" if area <= 25 else "Convolution (NHWC, F32) IGEMM"
    one = list(kernel) == [1, 1] and list(stride) == [1, 1] and list(padding) == [0, 0]
    return "Fully Connected (NC, F32) GEMM" if one and groups == 1 else "Convolution (NHWC, F32) IGEMM"


def _conv(op: TfliteOp, node: Node, graph: Graph) -> list[str]:
    a = node.attrs
    return [conv_operator(graph.input_shapes(node)[0][1], a["groups"], a["kernel"], a["stride"], a["padding"])]


def _fc(op: TfliteOp, node: Node, graph: Graph) -> list[str]:
    # a FULLY_CONNECTED with a [batch, features] result (keep_num_dims false) has its input
    # reshaped to 2-D first; one over the last axis of tokens (keep_num_dims) runs as it is
    gemm = ["Fully Connected (NC, F32) GEMM"]
    return gemm if len(node.shapes[0]) > 2 else ["Static Reshape (NC)"] + gemm


def _binary(name: str) -> Callable[[TfliteOp, Node, Graph], list[str]]:
    return lambda op, node, graph: [name] + (["Clamp (NC)"] if op.fused_activation else [])


def _same(name: str) -> Callable[[TfliteOp, Node, Graph], list[str]]:
    return lambda op, node, graph: [name]


def _builtin(op: TfliteOp, node: Node, graph: Graph) -> list[str]:
    return [op.op]


def _concat(op: TfliteOp, node: Node, graph: Graph) -> list[str]:
    # the delegate concatenates up to MAX_CONCAT_INPUTS tensors; more stay with the builtin kernel
    return ["Copy (NC, X32)"] if len(node.inputs) <= MAX_CONCAT_INPUTS else _builtin(op, node, graph)


def _slice(op: TfliteOp, node: Node, graph: Graph) -> list[str]:
    # ViT's class-token readout (a split of tokens [1, N, C] on the token axis, the rest unread:
    # one SLICE) stays with the builtin kernel: every such SLICE of the transformer space and the
    # vit family ran there; other SLICEs run in the delegate
    if node.op == "split" and node.attrs.get("axis") == 1 and len(graph.input_shapes(node)[0]) == 3:
        return _builtin(op, node, graph)
    return ["Slice (ND, X32)"]


#: The most inputs a CONCATENATION the XNNPACK delegate takes has (host-v1: every 2-5 input
#: concatenation delegated, every 6- and 9-input one left to the builtin kernel).
MAX_CONCAT_INPUTS = 5


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
    "DIV": _binary("Divide (ND)"),
    "MINIMUM": _binary("Minimum (ND)"), "MAXIMUM": _binary("Maximum (ND)"),
    "RELU": _same("Clamp (NC)"), "RELU6": _same("Clamp (NC)"), "RELU_N1_TO_1": _same("Clamp (NC)"),
    "LOGISTIC": _same("Sigmoid (NC)"), "HARD_SWISH": _same("HardSwish (NC)"), "TANH": _same("TanH (NC)"),
    "LEAKY_RELU": _same("Leaky ReLU (NC, F32)"), "PRELU": _same("PReLU (NC)"), "SOFTMAX": _same("Softmax (NC, F32)"),
    "SQUARED_DIFFERENCE": _binary("Squared Difference (ND)"), "RSQRT": _same("Reciprocal Square Root (NC)"),
    "GELU": _same("GELU (NC)"), "BATCH_MATMUL": _same("Batch Matrix Multiply (NC, F32) GEMM"),
    "MAX_POOL_2D": _pool, "AVERAGE_POOL_2D": _pool,
    "MEAN": _same("Mean (ND) Reduce2"), "CONCATENATION": _concat,
    "SUM": _same("Sum (ND) Reduce2"), "REDUCE_MAX": _same("Reduce Max (ND) Reduce"),  # LiteRT's profiler names (seen)
    "RESHAPE": _same("Static Reshape (NC)"), "TRANSPOSE": _same("Transpose (ND, X32) Transpose"),
    "SLICE": _slice, "SPLIT": _same("Copy (NC, X32)"), "SPLIT_V": _builtin,
    "PAD": _same("Constant Pad (ND, X32)"), "PADV2": _same("Constant Pad (ND, X32)"),
    "MIRROR_PAD": _builtin, "RESIZE_NEAREST_NEIGHBOR": _builtin, "LOCAL_RESPONSE_NORMALIZATION": _builtin,
    "GATHER": _builtin,
    "RESIZE_BILINEAR": _same("Resize Bilinear (NHWC)"),  # the name LiteRT's profiler gives it (seen)
}
#: A zero PAD is absorbed into the padding of these readers.
_ABSORBS_PAD = {"CONV_2D", "DEPTHWISE_CONV_2D"}


#: Graphs that converted_graph made: converting one again changes nothing (its partial sums are
#: binary, its common subexpressions merged), and the deduction's steps each convert what they are
#: given, so a made one is handed back as is (the merge was two thirds of additive_mlp's reading
#: of a NAS-Bench-201 cell when every step repeated it).
_CONVERTED: "weakref.WeakSet[Graph]" = weakref.WeakSet()


def converted_graph(graph: Graph) -> Graph:
    """The graph as the exporter lowers it (common subexpressions merged, partial sums)."""
    if graph in _CONVERTED:
        return graph
    merged = _tfl.merge_common_subexpressions(graph)
    _CONVERTED.add(merged)
    return merged


@dataclass(frozen=True)
class KernelOp:
    """One operator LiteRT runs: its profiler name, the TFLite operator (index into
    :func:`tflite_ops`, and its builtin name) and the IR node it runs, and whether the XNNPACK
    delegate runs it (else LiteRT's builtin kernel)."""

    name: str
    op_index: int
    tflite_op: str
    node: str
    delegated: bool
    subset: int = 0  # the node subset (:func:`partitions`) it runs in

    @property
    def group(self) -> tuple[str, int]:
        """What the runtime's records group it by: its XNNPACK runtime (a delegated subset) or,
        for a builtin kernel, its own TFLite operator."""
        return ("xnnpack", self.subset) if self.delegated else ("builtin", self.op_index)


def _names(ops: Sequence[TfliteOp], graph: Graph) -> list[list[str]]:
    """The operator names each TFLite operator runs as (a PAD absorbed by its convolution: none)."""
    out = []
    for i, op in enumerate(ops):
        if op.op == "PAD" and i + 1 < len(ops) and ops[i + 1].op in _ABSORBS_PAD and ops[i + 1].node == op.node:
            out.append([])
            continue
        fn = XNN_KERNELS.get(op.op)
        if fn is None:
            raise KeyError(f"node {op.node!r}: no XNNPACK rule for TFLite operator {op.op}")
        out.append(fn(op, graph.nodes[op.node], graph))
    return out


def partitions(ops: Sequence[TfliteOp], delegated: Sequence[bool]) -> list[tuple[bool, list[int]]]:
    """LiteRT's node subsets: ``(delegated, op indices)`` in execution order (see the module
    docstring, stage 3)."""
    subset_of = [-1] * len(ops)
    subsets: list[tuple[bool, list[int]]] = []
    while True:
        kind: bool | None = None
        members: list[int] = []
        changed = True
        while changed:  # sweep until no ready operator of the subset's kind is left
            changed = False
            for i, op in enumerate(ops):
                if subset_of[i] >= 0 or any(subset_of[d] < 0 for d in op.deps):
                    continue
                if kind is None:
                    kind = bool(delegated[i])  # the first ready operator fixes the subset's kind
                if bool(delegated[i]) == kind:
                    subset_of[i] = len(subsets)
                    members.append(i)
                    changed = True
        if not members:
            break
        subsets.append((bool(kind), members))
    if any(s < 0 for s in subset_of):  # a dependency cycle: the op list is not a DAG
        raise ValueError(f"operators never ready: {[ops[i].node for i, s in enumerate(subset_of) if s < 0][:5]}")
    return subsets


def deduce_kernel_ops(graph: Graph) -> list[KernelOp]:
    """The operators LiteRT runs for ``graph`` with fp32 weights on CPU, in execution order,
    each with its TFLite operator and IR node."""
    return _deduce(graph)[1]


def _deduce(graph: Graph) -> tuple[list[TfliteOp], list[KernelOp]]:
    """(the TFLite operators of ``graph``, the operators LiteRT runs for them)."""
    graph = converted_graph(graph)
    ops = tflite_ops(graph)
    names = _names(ops, graph)
    # an operator the delegate does not take runs as its own builtin name
    delegated = [not (len(n) == 1 and n[0] == op.op) for op, n in zip(ops, names)]
    return ops, [KernelOp(name, i, ops[i].op, ops[i].node, d, subset)
                 for subset, (d, members) in enumerate(partitions(ops, delegated)) for i in members for name in names[i]]


#: operators a converter adds to a quantized file, outside the IR's plan (they have no node)
UNPLANNED = frozenset({"QUANTIZE", "DEQUANTIZE"})


def _scope_node(tensor: str, scopes: Mapping[str, str]) -> str | None:
    """The IR node whose name scope is the longest prefix of ``tensor`` (a TF operator's name)."""
    k = tensor.rfind("/")
    while k > 0:
        node = scopes.get(tensor[:k])
        if node is not None:
            return node
        k = tensor.rfind("/", 0, k)
    return None


def file_nodes(graph: Graph, ops: Sequence[tuple[str, Sequence[str]]]) -> list[str | None] | None:
    """The IR node of each operator of a ``.tflite`` exported from ``graph``; ``ops`` are the
    file's operators in model order, each its builtin name and its output tensors' names.

    The exporter builds each node's TF operators in the node's name scope
    (``generators.export.tflite.scope_name``) and the converter names a tensor after the TF
    operators it came from, fused ones joined by ``;``. An operator takes the node its names
    name whose planned operators (:func:`tflite_ops`) still hold its builtin, when exactly one
    does; the others (a reshape the converter moved behind another node's operator and named
    after it) take the first planned operator of their builtin left unmatched, in model order.
    A file whose names name no node (exported without scopes) takes the plan's nodes when its
    operators are the plan's in the plan's order. ``QUANTIZE``/``DEQUANTIZE`` have no node. None
    when the file's other operators are not the plan's as a multiset (or, without names, in
    order): a node is never guessed."""
    plan = tflite_ops(graph)
    by_scope: dict[str, list[str]] = {}
    for n in converted_graph(graph).nodes:
        by_scope.setdefault(_tfl.scope_name(n), []).append(n)
    scopes = {sc: ns[0] for sc, ns in by_scope.items() if len(ns) == 1}  # two nodes in one scope name neither
    planned = [i for i, (op, _) in enumerate(ops) if op not in UNPLANNED]
    if Counter(ops[i][0] for i in planned) != Counter(o.op for o in plan):
        return None
    free: dict[tuple[str, str], int] = Counter((o.node, o.op) for o in plan)
    out: list[str | None] = [None] * len(ops)
    left = []
    for i in planned:
        op, names = ops[i]
        nodes = {_scope_node(part, scopes) for name in names for part in name.split(";")}
        named = [n for n in nodes if n is not None and free[(n, op)] > 0]
        if len(named) == 1:
            free[(named[0], op)] -= 1
            out[i] = named[0]
        else:
            left.append(i)
    if len(left) == len(planned):  # a file exported without name scopes: only the plan's own order names nodes
        if [ops[i][0] for i in planned] != [o.op for o in plan]:
            return None
        for i, o in zip(planned, plan):
            out[i] = o.node
        return out
    # the planned operators no name claimed, per builtin in model order
    rest: dict[str, list[str]] = {}
    taken: Counter = Counter()
    for o in plan:
        key = (o.node, o.op)
        if taken[key] < free[key]:  # the first free[key] of a node's operators of a builtin
            rest.setdefault(o.op, []).append(o.node)
        taken[key] += 1
    for i in left:
        out[i] = rest[ops[i][0]].pop(0)
    return out


def executed_ops(graph: Graph, names: Sequence[str], groups: Sequence[Any]) -> list[tuple[str, str, int]] | None:
    """The TFLite operator each executed kernel runs, as ``(IR node, builtin, k)``: the k-th
    operator of that builtin among the node's (what :func:`file_nodes` gives the file's
    operators), from the executed names and runtime groups (:func:`align`); None when the
    executed operators are not the deduced ones."""
    try:
        ops, predicted = _deduce(graph)
    except (KeyError, ValueError):  # an operator without an XNNPACK rule, or no order: nothing to align
        return None
    idx = align(predicted, names, groups)
    if idx is None:
        return None
    seen: Counter = Counter()
    ordinal = []
    for o in ops:
        ordinal.append(seen[(o.node, o.op)])
        seen[(o.node, o.op)] += 1
    return [(predicted[i].node, predicted[i].tflite_op, ordinal[predicted[i].op_index]) for i in idx]


def deduce_kernels(graph: Graph) -> list[str]:
    """The XNNPACK operator names (as the runtime's kernel records name them) LiteRT runs for
    ``graph`` with fp32 weights on CPU, in execution order."""
    return [k.name for k in deduce_kernel_ops(graph)]


def _runs(keys: Sequence[Any]) -> list[tuple[int, int]]:
    """``(start, stop)`` of each run of equal consecutive keys."""
    stops = list(accumulate(len(list(g)) for _, g in groupby(keys)))
    return list(zip([0] + stops[:-1], stops))


def align(predicted: Sequence[KernelOp], names: Sequence[str], groups: Sequence[Any]) -> list[int] | None:
    """Which predicted operator each executed one is: ``names[i]`` ran in the runtime's group
    ``groups[i]`` (an XNNPACK partition, or a builtin kernel's TFLite node: any hashable, equal
    for the operators of one group; None, a record of another runtime, matches nothing), in
    execution order. The groups must match the predicted subsets one to one, in order, each with
    the same operator names; within a group an executed operator is the first unused predicted
    one of its name (parallel branches may run in another order than the IR lists them). None
    when anything differs: a network whose operators were not all deduced teaches nothing
    reliable."""
    if len(names) != len(groups) or len(names) != len(predicted) or any(g is None for g in groups):
        return None
    pred = _runs([k.group for k in predicted])
    done = _runs(list(groups))
    if len(pred) != len(done):
        return None
    out: list[int] = []
    for (p0, p1), (e0, e1) in zip(pred, done):
        if Counter(k.name for k in predicted[p0:p1]) != Counter(names[e0:e1]):
            return None
        free: dict[str, list[int]] = {}
        for j in range(p0, p1):
            free.setdefault(predicted[j].name, []).append(j)
        out += [free[names[i]].pop(0) for i in range(e0, e1)]
    return out


def runtime_group(config: Any) -> tuple[str, int] | None:
    """The runtime's group of one kernel record (``kernels.config``, JSON text or a mapping):
    ``("xnnpack", partition)`` or ``("builtin", TFLite node)`` (what :func:`align` takes); None
    for a record of another runtime (a GPU's, or one without a configuration)."""
    if isinstance(config, str):
        config = json.loads(config)
    if not isinstance(config, Mapping):
        return None
    if config.get("source") == "xnnpack":
        return ("xnnpack", int(config["partition"]))
    if config.get("source") == "builtin":
        return ("builtin", int(config["node"]))
    return None


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


__all__ = ["KernelOp", "MAX_CONCAT_INPUTS", "Match", "TfliteOp", "XNN_KERNELS", "align", "compare", "conv_operator",
           "deduce_kernel_ops", "deduce_kernels", "executed_kernels", "partitions", "runtime_group", "tflite_ops"]
