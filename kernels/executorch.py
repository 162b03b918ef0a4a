"""The XNNPACK operators ExecuTorch's XNNPACK delegate runs for a network, deduced from the IR alone.

The program is the fp32 one ``generators/export/executorch.py`` writes. Four simulated stages,
nothing exported or run (docs/kernels.md, *XNNPACK on CPU (ExecuTorch)*, has the rules in full):

1. :func:`edge_graph`: each IR node becomes the edge-dialect operators the export shows (the
   facts' names); the XNNPACK partitioner's constraints leave some to portable kernels (splits,
   nearest upsampling, max pooling striding past its window, average pooling counting its
   padding, the two constant casts of a hard-sigmoid, a local response norm's power, ...).
2. :func:`partition` and :func:`program`: ExecuTorch's ``GroupBasedPartitioner`` (from the last
   operator back, a partition absorbs every other unless a path leaves the union and re-enters),
   then the lowering, which contracts each partition into a delegate call and re-sorts the graph
   breadth first: the order of delegate calls and portable kernels, and of the operators inside
   every partition but the first one lowered.
3. The XNNPACK backend's passes per partition: a batch norm folded into its single-user
   convolution/linear, else a 1x1 depthwise convolution; relu/hardtanh fused into a single-user
   convolution, linear, add, sub or mul; concatenations of more than 5 tensors chained; the
   layouts of ``ChannelsLastTaggedReshapePass``, one ``Transpose`` right after a tensor's producer
   per layout a consumer needs and it lacks.
4. XNNPACK's names and rewrites: convolutions as :func:`kernels.xnnpack.conv_operator`; a clamp
   fused into a convolution, fully connected, pooling or clamp whose only consumer it is; an
   activation fused into a binary operator a separate ``Clamp (NC)`` after it; a zero pad taken
   into the convolution it feeds.

:func:`deduce_kernel_ops` / :func:`deduce_kernels`: the operators in execution order, named as
ETDump names them without the per-call ``#N`` (:func:`strip_number`); :func:`portable_ops` /
:func:`portable_nodes`: what runs on portable kernels; :func:`delegated_ops`,
:func:`delegate_calls` and :func:`facts_agreement`: the export facts' view; :func:`recorded_kernels`
and :func:`etdump_kernels` read executed names; :func:`compare` is kernels.xnnpack's.
"""
from __future__ import annotations

import re
from collections import Counter, deque
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from generators.ir import Graph, Node, split_ref

from .xnnpack import Match, compare, conv_operator

# ---------------------------------------------------------------- edge-dialect operator names
CONV = "aten.convolution.default"
LINEAR = "aten.linear.default"
BATCH_NORM = "aten._native_batch_norm_legit_no_training.default"
RELU = "aten.relu.default"
HARDTANH = "aten.hardtanh.default"
CLAMP = "aten.clamp.default"
ADD, SUB, MUL, DIV = "aten.add.Tensor", "aten.sub.Tensor", "aten.mul.Tensor", "aten.div.Tensor"
AVG_POOL = "aten.avg_pool2d.default"
MAX_POOL = "aten.max_pool2d.default"
MAX_POOL_INDICES = "aten.max_pool2d_with_indices.default"
MEAN = "aten.mean.dim"
CAT = "aten.cat.default"
VIEW = "aten.view_copy.default"
PERMUTE = "aten.permute_copy.default"
SLICE = "aten.slice_copy.Tensor"
PAD = "aten.constant_pad_nd.default"
UNSQUEEZE = "aten.unsqueeze_copy.default"
SQUEEZE = "aten.squeeze_copy.dim"
SPLIT = "aten.split_with_sizes_copy.default"
UPSAMPLE = "aten.upsample_nearest2d.vec"
DIM_ORDER_COPY = "dim_order_ops._to_dim_order_copy.default"
LAYOUT_COPY = "aten._to_copy.default"  # inserted by the XNNPACK backend: an NCHW <-> NHWC conversion
POW = "aten.pow.Tensor_Scalar"  # no XNNPACK kernel: a portable one
INDEX_SELECT = "aten.index_select.default"  # no XNNPACK kernel: a portable one (seen: index_select.out)
GETITEM = "getitem"  # graph plumbing (a tuple output's element), not an operator

#: Operators ChannelsLastTaggedReshapePass runs on NHWC inputs (``memory_sensitive_ops_nhwc``).
NHWC_OPS = frozenset({CONV, MEAN, MAX_POOL, AVG_POOL, "aten.prelu.default", "aten.upsample_bilinear2d.vec"})
#: ... and on NCHW inputs (``memory_sensitive_ops_nchw`` and ``view_copy``).
NCHW_OPS = frozenset({VIEW, SQUEEZE, UNSQUEEZE, LINEAR})
#: Producers FuseActivationPass fuses a following relu/hardtanh into, and the activations.
FUSES_ACTIVATION = frozenset({CONV, ADD, SUB, MUL, LINEAR})
FUSABLE_ACTIVATIONS = frozenset({RELU, HARDTANH})
#: XNNPACK operators that take a clamp into themselves (XNNPACK's ``has_clamp``).
_HAS_CLAMP = frozenset({CONV, LINEAR, AVG_POOL, MAX_POOL, RELU, HARDTANH, CLAMP})
#: The most tensors one XNNPACK concatenation takes (DecomposeConcatenate chains longer ones).
MAX_CAT_INPUTS = 5

#: Edge operator -> the XNNPACK operator it runs as, where the name does not depend on attributes.
XNN_NAMES: dict[str, str] = {
    LINEAR: "Fully Connected (NC, F32) GEMM",
    RELU: "Clamp (NC)", HARDTANH: "Clamp (NC)", CLAMP: "Clamp (NC)",
    ADD: "Add (ND)", SUB: "Subtract (ND)", MUL: "Multiply (ND)", DIV: "Divide (ND)",
    MAX_POOL: "Max Pooling (NHWC, F32)", MEAN: "Mean (ND) Reduce2", CAT: "Copy (NC, X32)",
    VIEW: "Static Reshape (NC)", SQUEEZE: "Static Reshape (NC)", UNSQUEEZE: "Static Reshape (NC)",
    PERMUTE: "Transpose (ND, X32)", LAYOUT_COPY: "Transpose (ND, X32)", SLICE: "Slice (ND, X32)",
    PAD: "Constant Pad (ND, X32)",
    "aten.hardswish.default": "HardSwish (NC)", "aten.sigmoid.default": "Sigmoid (NC)",
    "aten.tanh.default": "TanH (NC)", "aten.leaky_relu.default": "Leaky ReLU (NC, F32)",
    "aten.prelu.default": "PReLU (NC)", "aten._softmax.default": "SoftMax (NC)",
    "aten.upsample_bilinear2d.vec": "Resize Bilinear (NHWC)",
}
CLAMP_NAME = "Clamp (NC)"
_NUMBER = re.compile(r" #\d+$")


def strip_number(name: str) -> str:
    """An ETDump operator name without its per-delegate-call number (``... IGEMM #3`` -> ``... IGEMM``)."""
    return _NUMBER.sub("", name)


# ---------------------------------------------------------------- stage 1: the edge graph
@dataclass
class EdgeNode:
    """One node of the simulated edge-dialect graph: an operator (``kind`` call), a user input
    or a lifted scalar constant. ``node`` is the IR node it comes from."""

    op: str
    node: str
    inputs: list[int]
    rank: int
    supported: bool = True  # the XNNPACK partitioner takes it
    kind: str = "call"  # "call", "input" (a user input), "const" (a lifted constant)
    attrs: dict = field(default_factory=dict)


class _Builder:
    def __init__(self) -> None:
        self.nodes: list[EdgeNode] = []

    def add(self, op: str, node: str, inputs: Sequence[int], rank: int, supported: bool = True, kind: str = "call",
            **attrs: Any) -> int:
        self.nodes.append(EdgeNode(op, node, list(inputs), rank, supported, kind, attrs))
        return len(self.nodes) - 1

    def const(self, node: str) -> int:
        return self.add("constant", node, [], 0, kind="const")


def _lower_node(b: _Builder, n: Node, xs: list[int], graph: Graph) -> list[int]:
    """The edge operators of one IR node; returns the edge node of each of its outputs."""
    op, name, rank, a = n.op, n.name, len(n.shape), n.attrs
    add = b.add
    if op == "conv2d":
        cin = graph.input_shapes(n)[0][1]
        return [add(CONV, name, xs, rank, cin=cin, groups=a["groups"], kernel=list(a["kernel"]),
                    stride=list(a["stride"]), padding=list(a["padding"]))]
    if op == "fc":
        return [add(LINEAR, name, xs, rank)]
    if op == "batchnorm":
        return [add(BATCH_NORM, name, xs, rank, channels=n.shape[1])]
    if op == "relu":
        return [add(RELU, name, xs, rank)]
    if op in ("relu6", "clip"):
        return [add(HARDTANH, name, xs, rank)]
    if op in ("hswish", "sigmoid", "tanh", "leaky_relu"):
        return [add({"hswish": "aten.hardswish.default", "sigmoid": "aten.sigmoid.default", "tanh": "aten.tanh.default",
                     "leaky_relu": "aten.leaky_relu.default"}[op], name, xs, rank)]
    if op == "hsigmoid":  # clamp(clamp(x + 3, min=0), max=6) / 6, its constants cast by portable kernels
        three = add(DIM_ORDER_COPY, name, [b.const(name)], 0, supported=False)
        y = add(ADD, name, [xs[0], three], rank)
        y = add(CLAMP, name, [add(CLAMP, name, [y], rank)], rank)
        six = add(DIM_ORDER_COPY, name, [b.const(name)], 0, supported=False)
        return [add(DIV, name, [y, six], rank)]
    if op == "swish":  # x * sigmoid(x)
        return [add(MUL, name, [xs[0], add("aten.sigmoid.default", name, xs, rank)], rank)]
    if op == "prelu":
        if rank == 4:
            return [add("aten.prelu.default", name, xs, rank)]
        # the exporter's partitioner leaves a rank-2 PReLU to its decomposition: where(x > 0, x, x * w)
        gt = add("aten.gt.Scalar", name, xs, rank, supported=False)
        return [add("aten.where.self", name, [gt, xs[0], add(MUL, name, xs, rank)], rank, supported=False)]
    if op in ("add", "mul"):
        y = xs[0]
        for x in xs[1:]:
            y = add(ADD if op == "add" else MUL, name, [y, x], rank)
        return [y]
    if op == "div":
        return [add(DIV, name, xs, rank)]
    if op == "scale":
        return [add(MUL, name, [xs[0], b.const(name)], rank)]
    if op == "shift":
        return [add(ADD, name, [xs[0], b.const(name)], rank)]
    if op == "avgpool":
        delegated = not a["ceil_mode"] and not (a["count_include_pad"] and any(a["padding"]))
        return [add(AVG_POOL, name, xs, rank, supported=delegated, padding=list(a["padding"]))]
    if op == "maxpool":
        if any(s > k for s, k in zip(a["stride"], a["kernel"])):  # XNNPACK needs stride <= window
            return [add(GETITEM, name, [add(MAX_POOL_INDICES, name, xs, rank, supported=False)], rank, supported=False)]
        return [add(MAX_POOL, name, xs, rank)]
    if op == "global_avgpool":
        return [add(MEAN, name, xs, rank)]
    if op == "concat":
        return [add(CAT, name, xs, rank, supported=len(xs) >= 2)]
    if op == "split":
        s = add(SPLIT, name, xs, rank, supported=False)
        return [add(GETITEM, name, [s], len(shape), supported=False) for shape in n.shapes]
    if op == "channel_shuffle":  # reshape to (n, g, c/g, h, w), transpose(1, 2), reshape back
        y = add(PERMUTE, name, [add(VIEW, name, xs, rank + 1)], rank + 1)
        return [add(VIEW, name, [y], rank)]
    if op == "pad":
        return [add(PAD, name, xs, rank, pads=list(a["pads"]), value=float(a["value"]))]
    if op == "crop":
        t, bt, l, r = a["crops"]
        y = xs[0]
        for _ in range(int(bool(t or bt)) + int(bool(l or r))):
            y = add(SLICE, name, [y], rank)
        return [y]
    if op == "upsample" and a["mode"] != "nearest":  # XNNPACK's bilinear resize takes it
        return [add("aten.upsample_bilinear2d.vec", name, xs, rank)]
    if op in ("upsample", "resize"):
        return [add(UPSAMPLE, name, xs, rank, supported=False)]
    if op == "gather":  # torch.index_select of a buffer: the partitioner leaves it to a portable kernel
        return [add(INDEX_SELECT, name, xs, rank, supported=False)]
    if op in ("reshape", "flatten"):
        return [add(VIEW, name, xs, rank)]
    if op == "softmax":
        return [add("aten._softmax.default", name, xs, rank, supported=a["axis"] % rank == rank - 1)]
    if op == "lrn":  # the exporter's formulation: x / (avg_pool2d(pad(x * x viewed [n, 1, c, h*w])) * alpha + k) ** beta
        size = a["size"]
        y = add(VIEW, name, [add(MUL, name, [xs[0], xs[0]], rank)], rank)
        y = add(PAD, name, [y], rank, pads=[size // 2, (size - 1) // 2, 0, 0], value=0.0)
        y = add(VIEW, name, [add(AVG_POOL, name, [y], rank, padding=[0, 0])], rank)
        y = add(ADD, name, [add(MUL, name, [y, b.const(name)], rank), b.const(name)], rank)
        return [add(DIV, name, [xs[0], add(POW, name, [y], rank, supported=False)], rank)]
    raise KeyError(f"node {name!r}: no ExecuTorch lowering rule for IR operator {op!r}")


def edge_graph(graph: Graph) -> tuple[list[EdgeNode], list[int]]:
    """The simulated edge-dialect graph of ``graph`` (nodes in graph order) and its output nodes."""
    b = _Builder()
    ref: dict[tuple[str, int], int] = {}
    for n in graph.nodes.values():
        if n.op == "input":
            ref[(n.name, 0)] = b.add("placeholder", n.name, [], len(n.shape), kind="input")
            continue
        outs = _lower_node(b, n, [ref[split_ref(r)] for r in n.inputs], graph)
        for k, e in enumerate(outs):
            ref[(n.name, k)] = e
    return b.nodes, [ref[split_ref(r)] for r in graph.outputs]


def _users(nodes: Sequence[EdgeNode]) -> list[list[int]]:
    users: list[list[int]] = [[] for _ in nodes]
    for i, n in enumerate(nodes):
        for x in dict.fromkeys(n.inputs):
            users[x].append(i)
    return users


# ---------------------------------------------------------------- stage 2: partitions and the program
def partition(nodes: Sequence[EdgeNode]) -> list[list[int]]:
    """The delegate partitions (their operators' edge node indices, graph order) in the
    partitioner's id order (see the module docstring, stage 2). Lifted constants go with the
    operators that read them."""
    calls = [i for i, n in enumerate(nodes) if n.kind == "call"]
    supported = [i for i in calls if nodes[i].supported]
    if not supported:
        return []
    if len(supported) == len(calls):
        members = [supported]
    else:
        users = _users(nodes)
        umask = [0] * len(nodes)
        down = [0] * len(nodes)  # every node reachable from i
        for i in reversed(range(len(nodes))):
            m = 0
            for u in users[i]:
                umask[i] |= 1 << u
                m |= (1 << u) | down[u]
            down[i] = m
        order = supported[::-1]  # ids follow reversed graph order
        parts = [1 << i for i in order]
        out_users = [umask[i] for i in order]
        alive = [True] * len(order)

        def can_merge(comb: int, comb_users: int) -> bool:
            ext = comb_users & ~comb
            while ext:
                low = ext & -ext
                if down[low.bit_length() - 1] & comb:
                    return False
                ext ^= low
            return True

        for p in range(len(order)):
            if not alive[p]:
                continue
            for q in range(p + 1, len(order)):
                if alive[q] and can_merge(parts[p] | parts[q], out_users[p] | out_users[q]):
                    parts[p] |= parts[q]
                    out_users[p] |= out_users[q]
                    alive[q] = False
        members = [[i for i in calls if mask >> i & 1] for mask, live in zip(parts, alive) if live]
    return members


@dataclass(frozen=True)
class Call:
    """One instruction of the program: a delegate call (``ops``: its partition's operators, edge
    node indices in the order the delegate serialises them) or a portable kernel (its one edge node)."""

    kind: str  # "delegate" or "portable"
    ops: tuple[int, ...]


@dataclass(frozen=True)
class Program:
    """The simulated program: the edge graph, its output nodes, the partitions (id order) and
    the instructions in execution order."""

    nodes: list[EdgeNode]
    outputs: list[int]
    partitions: list[list[int]]
    calls: list[Call]


def program(graph: Graph) -> Program:
    """The program of ``graph``: the partitions lowered one by one in id order, each contracted
    into its delegate call (after a ``get_attr`` of its lowered module, followed by one
    ``getitem`` per output) and the graph re-sorted breadth first after each, as ExecuTorch's
    ``create_submodule_from_nodes`` does; the instructions are the final graph's order."""
    nodes, outputs = edge_graph(graph)
    parts = partition(nodes)
    # the top-level graph: lifted constants, user inputs, then the operators in graph order
    order: list[Any] = ([i for i, n in enumerate(nodes) if n.kind == "const"]
                        + [i for i, n in enumerate(nodes) if n.kind == "input"]
                        + [i for i, n in enumerate(nodes) if n.kind == "call"])
    ins: dict[Any, list[Any]] = {i: list(dict.fromkeys(n.inputs)) for i, n in enumerate(nodes)}
    users: dict[Any, list[Any]] = {i: [] for i in range(len(nodes))}
    for i in order:
        for x in ins[i]:
            users[x].append(i)
    out_set = set(outputs)
    internal: list[list[int]] = []
    for p, part in enumerate(parts):
        members = set(part)
        seq = [k for k in order if k in members]
        internal.append([k for k in seq if nodes[k].kind == "call"])
        read = list(dict.fromkeys(x for k in seq for x in ins[k] if x not in members))
        ext_in = [x for x in read if isinstance(x, tuple) or nodes[x].kind != "const"]  # constants go inside
        ext_out = [k for k in seq if k in out_set or any(u not in members for u in users[k])]
        at = max(order.index(k) for k in ext_out) if ext_out else max(order.index(k) for k in seq)
        call, attr = ("call", p), ("get_attr", p)
        items = [("getitem", p, j) for j in range(len(ext_out))]
        order[at + 1:at + 1] = [attr, call] + items
        ins[attr], ins[call], users[attr], users[call] = [], [attr] + ext_in, [call], list(items)
        for x in read:
            users[x] = [u for u in users[x] if u not in members] + ([call] if x in ext_in else [])
        for k, item in zip(ext_out, items):
            ins[item], users[item] = [call], [u for u in users[k] if u not in members]
            for u in users[item]:
                ins[u] = [item if x == k else x for x in ins[u]]
            if k in out_set:
                out_set = (out_set - {k}) | {item}
        order = [k for k in order if k not in members]
        order = _legalized(order, ins, users)
    calls: list[Call] = []
    for k in order:
        if isinstance(k, tuple):
            if k[0] == "call":
                calls.append(Call("delegate", tuple(internal[k[1]])))
        elif nodes[k].kind == "call" and nodes[k].op != GETITEM:
            calls.append(Call("portable", (k,)))
    return Program(nodes, outputs, parts, calls)


def _legalized(order: list[Any], ins: dict[Any, list[Any]], users: dict[Any, list[Any]]) -> list[Any]:
    """torch.fx's ``legalize_graph``: Kahn's algorithm with a FIFO queue seeded with every
    input-free node in graph order; users keep the new order afterwards."""
    indeg = {k: len(ins[k]) for k in order}
    queue = deque(k for k in order if indeg[k] == 0)
    new: list[Any] = []
    while queue:
        cur = queue.popleft()
        new.append(cur)
        for u in users[cur]:
            indeg[u] -= 1
            if indeg[u] == 0:
                queue.append(u)
    if len(new) != len(order):
        raise ValueError("the simulated program graph has a cycle")
    pos = {k: j for j, k in enumerate(new)}
    for k in new:
        users[k].sort(key=pos.__getitem__)
    return new


# ---------------------------------------------------------------- stage 3: the XNNPACK backend's passes
@dataclass(eq=False)
class _L:
    """A node of one delegate's graph while the backend's passes rewrite it."""

    op: str
    node: str
    inputs: list["_L"]
    rank: int
    kind: str = "call"  # "call", "input" (a delegate input), "const"
    attrs: dict = field(default_factory=dict)
    external: bool = False  # a delegate output
    fused: bool = False  # carries a fused activation (FuseActivationPass)
    nhwc: bool | None = None
    partner: "_L | None" = None


def _consumers(seq: Sequence[_L]) -> dict[int, list[_L]]:
    out: dict[int, list[_L]] = {id(n): [] for n in seq}
    for n in seq:
        for x in dict.fromkeys(n.inputs):
            out.setdefault(id(x), []).append(n)
    return out


def _replace_uses(seq: Sequence[_L], old: _L, new: _L) -> None:
    for n in seq:
        n.inputs = [new if x is old else x for x in n.inputs]
    new.external = new.external or old.external


def _delegate_graph(nodes: Sequence[EdgeNode], members: Sequence[int], outputs: set[int],
                    users: Sequence[Sequence[int]]) -> list[_L]:
    """The delegate's graph before the passes: its inputs, constants and operators in order."""
    inside = set(members)
    local: dict[int, _L] = {}
    placeholders: list[_L] = []
    seq: list[_L] = []
    for k in members:
        n = nodes[k]
        for x in n.inputs:
            if x not in local:
                xn = nodes[x]
                kind = "const" if xn.kind == "const" else "input"
                local[x] = _L("constant" if kind == "const" else "placeholder", xn.node, [], xn.rank, kind=kind)
                placeholders.append(local[x])
        local[k] = _L(n.op, n.node, [local[x] for x in n.inputs], n.rank, attrs=dict(n.attrs),
                      external=k in outputs or any(u not in inside for u in users[k]))
        seq.append(local[k])
    return placeholders + seq


def _backend_passes(seq: list[_L]) -> list[_L]:
    """FuseBatchNorm, DecomposeBatchNorm, FuseActivation, DecomposeConcatenate and
    ChannelsLastTaggedReshape on one delegate's graph (module docstring, stage 3)."""
    # FuseBatchNormPass: conv/linear -> batch norm, the batch norm its only user
    cons = _consumers(seq)
    for n in list(seq):
        if n.op in (CONV, LINEAR) and not n.external and len(cons[id(n)]) == 1 and cons[id(n)][0].op == BATCH_NORM:
            bn = cons[id(n)][0]
            seq.remove(bn)
            _replace_uses(seq, bn, n)
            cons = _consumers(seq)
    # DecomposeBatchNorm: a 1x1 depthwise convolution (rank 2: unsqueezed to a 1x1 map and back)
    out: list[_L] = []
    for n in seq:
        if n.op != BATCH_NORM:
            out.append(n)
            continue
        c = n.attrs["channels"]
        conv = dict(cin=c, groups=c, kernel=[1, 1], stride=[1, 1], padding=[0, 0])
        if n.rank == 4:
            n.op, n.attrs = CONV, conv
            out.append(n)
            continue
        u1 = _L(UNSQUEEZE, n.node, n.inputs, 3)
        u2 = _L(UNSQUEEZE, n.node, [u1], 4)
        cv = _L(CONV, n.node, [u2], 4, attrs=conv)
        s1 = _L(SQUEEZE, n.node, [cv], 3)
        n.op, n.inputs, n.attrs = SQUEEZE, [s1], {}
        out += [u1, u2, cv, s1, n]
    seq = out
    # FuseActivationPass: relu/hardtanh into a conv/linear/add/sub/mul that has no other user
    cons = _consumers(seq)
    for n in list(seq):
        if n.op in FUSABLE_ACTIVATIONS:
            p = n.inputs[0]
            if p.kind == "call" and p.op in FUSES_ACTIVATION and len(cons[id(p)]) + p.external == 1:
                p.fused = True
                p.attrs.update(activation=n.node, activation_op=n.op)
                seq.remove(n)
                _replace_uses(seq, n, p)
                cons = _consumers(seq)
    # DecomposeConcatenate: at most MAX_CAT_INPUTS tensors per concatenation
    out = []
    for n in seq:
        while n.op == CAT and len(n.inputs) > MAX_CAT_INPUTS:
            head = _L(CAT, n.node, n.inputs[:MAX_CAT_INPUTS], n.rank)
            out.append(head)
            n.inputs = [head] + n.inputs[MAX_CAT_INPUTS:]
        out.append(n)
    return _channels_last(out)


def _channels_last(seq: list[_L]) -> list[_L]:
    """ChannelsLastTaggedReshapePass: layouts, and a layout copy right after each tensor's
    producer per layout a consumer needs it in that it is not in (shared by all such consumers)."""
    after: dict[int, list[_L]] = {}  # producer -> copies inserted right after it

    def is_nhwc(n: _L) -> bool:
        return bool(n.nhwc)

    def convert(x: _L, target: _L, nhwc: bool) -> None:
        if x.kind == "const":
            return
        if x.kind == "input" and not nhwc:
            return  # delegate inputs are NCHW
        if x.kind != "input" and is_nhwc(x) == nhwc:
            return
        if x.partner is None:
            copy = _L(LAYOUT_COPY, x.node, [x], x.rank, nhwc=nhwc)
            x.partner, copy.partner = copy, x
            after.setdefault(id(x), []).insert(0, copy)  # each insertion goes right after the producer
        target.inputs = [x.partner if y is x else y for y in target.inputs]

    for n in list(seq):
        if n.kind != "call":
            continue
        if n.op in NHWC_OPS:
            convert(n.inputs[0], n, True)
            n.nhwc = True
        elif n.op in NCHW_OPS:
            for x in list(dict.fromkeys(n.inputs)):
                convert(x, n, False)
        else:
            layouts = [is_nhwc(x) for x in n.inputs]
            if layouts and all(layouts):
                n.nhwc = True
            elif any(layouts):
                if all(x.rank == 4 and x.kind != "const" for x in n.inputs):
                    for x in list(dict.fromkeys(n.inputs)):
                        convert(x, n, True)
                    n.nhwc = True
                else:
                    for x in list(dict.fromkeys(n.inputs)):
                        convert(x, n, False)
    for n in list(seq):  # the delegate's outputs leave it in NCHW
        if n.external and is_nhwc(n):
            copy = n.partner
            if copy is None:
                copy = _L(LAYOUT_COPY, n.node, [n], n.rank, nhwc=False)
                n.partner, copy.partner = copy, n
                after.setdefault(id(n), []).insert(0, copy)
            copy.external, n.external = True, False
    out: list[_L] = []
    for n in seq:
        out.append(n)
        out += after.get(id(n), [])
    return out


# ---------------------------------------------------------------- stage 4: XNNPACK operators
def _xnnpack_names(seq: Sequence[_L]) -> list[tuple[str, str, str]]:
    """XNNPACK's operators for one delegate's graph after the backend's passes: (name, IR node,
    edge operator) each, after XNNPACK's clamp and zero-pad fusion (module docstring, stage 4)."""
    cons = _consumers(seq)

    def single(n: _L) -> bool:  # the value has exactly one consumer and stays inside the delegate
        return len(cons[id(n)]) == 1 and not n.external

    clamps: set[int] = set()  # values a clamp-capable XNNPACK operator produces
    padded: set[int] = set()  # convolutions that absorbed a zero padding
    out: list[tuple[str, str, str]] = []
    for n in seq:
        if n.kind != "call":
            continue
        op = n.op
        if op == PAD and n.attrs.get("value") == 0.0 and single(n) and cons[id(n)][0].op == CONV \
                and not any(n.attrs["pads"][4:]):  # (zero channels are no convolution's padding)
            if any(n.attrs["pads"]):
                padded.add(id(cons[id(n)][0]))
            continue
        if op in (RELU, HARDTANH, CLAMP):
            p = n.inputs[0]
            if not (id(p) in clamps and single(p)):  # else XNNPACK fuses it into its producer
                out.append((CLAMP_NAME, n.node, op))
            clamps.add(id(n))
            continue
        if op == CONV:
            a = n.attrs
            name = conv_operator(a["cin"], a["groups"], a["kernel"], a["stride"],
                                 [1, 1] if id(n) in padded else a["padding"])
        elif op == AVG_POOL:
            name = "Average Pooling (NHWC, F32) " + ("Pixelwise Average Pooling" if any(n.attrs["padding"]) else
                                                     "Average Pooling")
        elif op == MUL and n.inputs[0] is n.inputs[1]:
            name = "Square (NC)"  # XNNPACK's unary square for a tensor times itself
        elif op in XNN_NAMES:
            name = XNN_NAMES[op]
        else:
            raise KeyError(f"node {n.node!r}: no XNNPACK operator for edge operator {op}")
        out.append((name, n.node, op))
        if n.fused:
            if op in (ADD, SUB, MUL, DIV):  # XNNPACK runs an activation fused into a binary operator after it
                out.append((CLAMP_NAME, n.attrs.get("activation", n.node), n.attrs.get("activation_op", op)))
            clamps.add(id(n))
        elif op in _HAS_CLAMP:
            clamps.add(id(n))
    return out


@dataclass(frozen=True)
class EtKernelOp:
    """One XNNPACK operator the delegate runs: its name (as ETDump names it, without the number),
    the IR node and edge operator it runs (a layout ``Transpose``: the tensor's producer and
    ``aten._to_copy.default``) and the ordinal of its delegate call in the program."""

    name: str
    node: str
    edge_op: str
    call: int


def deduce_kernel_ops(graph: Graph) -> list[EtKernelOp]:
    """The XNNPACK operators ExecuTorch's delegate runs for ``graph`` (fp32), in execution order."""
    prog = program(graph)
    users = _users(prog.nodes)
    outputs = set(prog.outputs)
    result: list[EtKernelOp] = []
    for ordinal, call in enumerate(c for c in prog.calls if c.kind == "delegate"):
        seq = _backend_passes(_delegate_graph(prog.nodes, call.ops, outputs, users))
        result += [EtKernelOp(name, node, op, ordinal) for name, node, op in _xnnpack_names(seq)]
    return result


def deduce_kernels(graph: Graph) -> list[str]:
    """The XNNPACK operator names ExecuTorch's delegate runs for ``graph`` (fp32), in execution
    order, without the per-call number ETDump appends."""
    return [k.name for k in deduce_kernel_ops(graph)]


def portable_ops(graph: Graph) -> list[str]:
    """The edge operators left to ExecuTorch's portable kernels, in execution order (the names
    the facts' ``portable_ops`` counts)."""
    prog = program(graph)
    return [prog.nodes[c.ops[0]].op for c in prog.calls if c.kind == "portable"]


def portable_nodes(graph: Graph) -> list[str]:
    """The IR nodes (some of) whose operators run on portable kernels, in execution order."""
    prog = program(graph)
    return list(dict.fromkeys(prog.nodes[c.ops[0]].node for c in prog.calls if c.kind == "portable"))


def delegate_calls(graph: Graph) -> int:
    """How many XNNPACK delegate calls the program makes (the facts' ``delegate_calls``)."""
    return len(partition(edge_graph(graph)[0]))


def delegated_ops(graph: Graph) -> dict[str, int]:
    """Edge operator counts inside the delegates before the backend's passes (the facts'
    ``delegated_ops``)."""
    nodes, _ = edge_graph(graph)
    return dict(sorted(Counter(nodes[k].op for p in partition(nodes) for k in p
                               if nodes[k].kind == "call" and nodes[k].op != GETITEM).items()))


# ---------------------------------------------------------------- executed operators
def recorded_kernels(record: Mapping[str, Any]) -> list[str]:
    """The XNNPACK operator names of a measure record's kernel section (``record["kernel"]
    ["kernels"]``, one entry per operator of a run), in execution order, numbers stripped."""
    kernels = (record.get("kernel") or {}).get("kernels") or []
    rows = sorted((k for k in kernels if k.get("source") == "xnnpack"), key=lambda k: k.get("order", 0))
    return [strip_number(k["name"]) for k in rows]


def etdump_kernels(dump: Mapping[str, Sequence[Mapping[str, Any]]], run: int = 0) -> list[str]:
    """The XNNPACK operator names one run of an ETDump reading (:func:`pipelines.runners.etdump.
    read_etdump`) executed, in order, numbers stripped."""
    events = sorted((e for e in dump["events"] if e["run"] == run and e["kind"] == "delegated"), key=lambda e: e["order"])
    return [strip_number(e["name"]) for e in events]


def facts_agreement(graph: Graph, facts: Mapping[str, Any]) -> dict[str, bool]:
    """The deduction against an export's facts: delegate calls, delegated and portable edge
    operator counts."""
    return {"delegate_calls": delegate_calls(graph) == facts.get("delegate_calls"),
            "delegated_ops": delegated_ops(graph) == dict(facts.get("delegated_ops") or {}),
            "portable_ops": Counter(portable_ops(graph)) == Counter(facts.get("portable_ops") or {})}


__all__ = ["Call", "EdgeNode", "EtKernelOp", "Match", "Program", "XNN_NAMES", "compare", "deduce_kernel_ops",
           "deduce_kernels", "delegate_calls", "delegated_ops", "edge_graph", "etdump_kernels", "facts_agreement",
           "partition", "portable_nodes", "portable_ops", "program", "recorded_kernels", "strip_number"]
