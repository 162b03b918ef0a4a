"""The TFLite GPU delegate's kernels for a network: fusion (USC Algorithm B.2) and convolution
kernel selection (USC Algorithm B.3), deduced without running anything.

Li, Paolieri and Golubchik (appendix B) read these rules from TFLite's GPU delegate:

- **Fusion** (``MERGENODES``, Algorithm B.2): walking the delegate's node list in order, a node
  with one output tensor absorbs the next node when that node is the only reader of the
  tensor, reads it as its first input, has one output, all its inputs are already computed
  ("ready"), and is *linkable*: an activation, copy or element-wise arithmetic/comparison
  (``ISLINKABLE``). The merged node keeps the first node's kernel and is retried, so chains
  such as conv + add + relu form one kernel (named ``convolution_2d_3_linked_:_add_4...``).
- **Convolution kernel selection** (``SELECTCONV2DKERNEL``, Algorithm B.3): a grouped kernel
  when groups != 1 and the group sizes are multiples of 4; else Winograd F(4x4, 3x3) for 3x3
  stride-1 ungrouped convolutions with enough channel slices and output tiles, thresholds
  per GPU vendor (Adreno stricter than Mali and PowerVR, Adreno 6xx strictest on tiles);
  else the direct ``convolution_2d``.

The op list they run on is the delegate's graph, which this module builds from the IR the way
the USC models reached the delegate (:func:`delegate_ops`): batch norm folded into a preceding
convolution (otherwise MUL + ADD by constants), hard-sigmoid as ADD(+3) + RELU6 + MUL(1/6),
swish as LOGISTIC + MUL, n-ary adds as chains of ADD. Before fusion the delegate applies graph
transformations the paper does not list but the kernel names show, each in :data:`TRANSFORMS`:
an ADD or MUL by a constant right after a convolution merges into its bias/weights, a 1x1
convolution on a 1x1 input becomes ``fully_connected``, a global average pool becomes
``mean``, and a two-input ADD/MUL of equal shapes takes its most recently written input first
("to have better linking", which is why the identity convolution of a ResNet downsampling
block, written after the body, is the one linked with the add).

Two switches reproduce the paper's text literally for comparison: ``ready="first"`` checks
only the first input of the next node (as the pseudo-code's line 17 does) instead of all its
inputs, and ``reorder=False`` skips the input reordering.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from generators.ir import Graph, Node, split_ref


# ---------------------------------------------------------------- GPUs
@dataclass(frozen=True)
class GpuInfo:
    """What Algorithm B.3 asks of the GPU: its vendor and, for Adreno, its generation."""

    vendor: str  # adreno | mali | powervr | apple | amd | other
    generation: int | None = None  # Adreno 640 -> 6

    @property
    def is_adreno(self) -> bool:
        return self.vendor == "adreno"

    @property
    def is_adreno6xx(self) -> bool:
        return self.vendor == "adreno" and self.generation == 6


#: GPU name pattern -> vendor (first match wins); the scenarios table's ``gpu`` column names them.
GPU_VENDORS: list[tuple[str, str]] = [
    (r"adreno", "adreno"), (r"mali", "mali"), (r"powervr|img ", "powervr"),
    (r"apple|a\d+ bionic", "apple"), (r"amd|radeon", "amd"),
]


def gpu_info(name: str) -> GpuInfo:
    """``"Adreno 640"`` -> GpuInfo("adreno", 6); unknown vendors get the default thresholds."""
    low = (name or "").lower()
    for pattern, vendor in GPU_VENDORS:
        if re.search(pattern, low):
            gen = None
            if vendor == "adreno":
                m = re.search(r"adreno\D*(\d)\d\d", low)
                gen = int(m.group(1)) if m else None
            return GpuInfo(vendor, gen)
    return GpuInfo("other")


# ---------------------------------------------------------------- convolution kernel selection (B.3)
@dataclass(frozen=True)
class ConvInfo:
    """The convolution configuration Algorithm B.3 reads (``op_info``)."""

    in_channels: int
    out_channels: int
    kernel: tuple[int, int]
    stride: tuple[int, int]
    groups: int
    out_h: int
    out_w: int
    dilation: tuple[int, int] = (1, 1)


def check_grouped_conv(op: ConvInfo, src_per_group: bool = True) -> bool:
    """CHECKGROUPEDCONV2D (lines 6-11). The paper's line 6 reads ``src_group_size =
    input_channel``; the delegate's source uses the filter's input channels, i.e. per group
    (``src_per_group``, default). Both agree whenever groups * 4 divides the input channels."""
    src = op.in_channels // op.groups if src_per_group else op.in_channels
    dst = op.out_channels // op.groups
    return op.groups != 1 and src % 4 == 0 and dst % 4 == 0


def check_winograd(gpu: GpuInfo, op: ConvInfo) -> bool:
    """CHECKWINOGRAD (lines 12-30): Winograd F(4x4, 3x3) on this GPU?"""
    if op.groups != 1 or op.kernel != (3, 3) or op.stride != (1, 1) or op.dilation != (1, 1):
        return False
    src_depth = math.ceil(op.in_channels / 4)
    dst_depth = math.ceil(op.out_channels / 4)
    if gpu.is_adreno:
        if src_depth < 32 or dst_depth < 32:
            return False
    elif gpu.vendor == "amd":
        if src_depth < 16 or dst_depth < 8:
            return False
    elif src_depth < 16 or dst_depth < 16:
        return False
    total_tiles = math.ceil(op.out_h / 4) * math.ceil(op.out_w / 4)
    if gpu.is_adreno6xx:
        return total_tiles >= 128
    if gpu.is_adreno:
        return total_tiles >= 64
    return total_tiles >= 32


#: Kernel names as the delegate names its dispatches (before the ``_<node id>`` suffix).
CONV2D, GROUPED, WINOGRAD = "convolution_2d", "convolution_2d_grouped", "convolution_winograd_4x4_6x6"


def select_conv_kernel(gpu: GpuInfo, op: ConvInfo, src_per_group: bool = True) -> str:
    """SELECTCONV2DKERNEL (lines 1-5) for a non-depthwise convolution."""
    if check_grouped_conv(op, src_per_group):
        return GROUPED
    if check_winograd(gpu, op):
        return WINOGRAD
    return CONV2D


# ---------------------------------------------------------------- the delegate's op list
@dataclass
class GpuOp:
    """One node of the delegate's graph. ``type`` is its kernel name stem (``convolution_2d``,
    ``add``, ``relu``...); ``tflite_op`` the TFLite operator it came from (``CONV_2D``...);
    ``const`` marks an element-wise op whose second operand is a constant; ``linked`` lists the
    ops fused into it by Algorithm B.2 (filled by :func:`merge_nodes`)."""

    type: str
    tflite_op: str
    inputs: list[str]
    outputs: list[str]
    nodes: list[str]
    conv: ConvInfo | None = None
    const: bool = False
    shape: tuple[int, ...] = ()
    linked: list["GpuOp"] = field(default_factory=list)

    @property
    def main_node(self) -> str:
        return self.nodes[0]


#: ISLINKABLE (Algorithm B.2, line 24): activations, copy, element-wise arithmetic/comparison.
LINKABLE = {
    "relu", "prelu", "hard_swish", "sigmoid", "tanh", "elu", "copy", "add", "sub", "mul", "div", "exp", "log",
    "sqrt", "square", "abs", "neg", "pow", "equal", "greater", "less", "maximum", "minimum",
}


def is_linkable(op: GpuOp) -> bool:
    """ISLINKABLE (lines 22-26)."""
    return len(op.outputs) == 1 and op.type in LINKABLE


def _conv_info(node: Node, graph: Graph) -> ConvInfo:
    a = node.attrs
    return ConvInfo(in_channels=graph.input_shapes(node)[0][1], out_channels=a["out_channels"],
                    kernel=tuple(a["kernel"]), stride=tuple(a["stride"]), groups=a["groups"],
                    out_h=node.shape[2], out_w=node.shape[3], dilation=tuple(a["dilation"]))


class _Builder:
    """Emits the delegate ops of IR nodes; tensors are IR refs or ``<node>#k`` intermediates."""

    def __init__(self, graph: Graph):
        self.g = graph
        self.ops: list[GpuOp] = []
        self.alias: dict[str, str] = {}  # IR ref -> tensor that holds it (folded batch norm)
        self.readers = graph.consumers()
        self.outputs = {split_ref(r)[0] for r in graph.outputs}

    def t(self, ref: str) -> str:
        return self.alias.get(ref, ref)

    def emit(self, node: Node, parts: list[tuple[str, str, list[str], dict[str, Any]]]) -> None:
        """Chain ``parts`` (type, tflite op, extra runtime inputs, fields): the first reads the
        node's first input, each next one the previous output, the last writes the node."""
        src = self.t(node.inputs[0]) if node.inputs else None
        for k, (typ, tfl, extra, fields) in enumerate(parts):
            out = node.name if k == len(parts) - 1 else f"{node.name}#{k}"
            ins = ([src] if src is not None else []) + [self.t(r) for r in extra]
            self.ops.append(GpuOp(typ, tfl, ins, [out], [node.name], shape=tuple(node.shape), **fields))
            src = out

    def sole_reader(self, name: str, reader: str) -> bool:
        return self.readers[name] == [reader] and name not in self.outputs


def _act(typ: str, tfl: str) -> Callable[[_Builder, Node], None]:
    return lambda b, n: b.emit(n, [(typ, tfl, [], {})])


def _conv(b: _Builder, n: Node) -> None:
    info = _conv_info(n, b.g)
    dw = info.groups == info.in_channels and info.in_channels > 1
    if dw:
        b.emit(n, [("depthwise_convolution", "DEPTHWISE_CONV_2D", [], {"conv": info})])
    else:
        b.emit(n, [(CONV2D, "CONV_2D" if info.groups == 1 else "CONV_2D_GROUP", [], {"conv": info})])


def _fc(b: _Builder, n: Node) -> None:
    b.emit(n, [("fully_connected", "FULLY_CONNECTED", [], {})])


def _bn(b: _Builder, n: Node) -> None:
    src = split_ref(n.inputs[0])[0]
    if b.g.nodes[src].op in ("conv2d", "fc") and b.sole_reader(src, n.name):
        b.alias[n.name] = b.t(n.inputs[0])  # folded into the layer's weights by the converter
        return
    b.emit(n, [("mul", "MUL", [], {"const": True}), ("add", "ADD", [], {"const": True})])


def _binary(typ: str, tfl: str) -> Callable[[_Builder, Node], None]:
    def lower(b: _Builder, n: Node) -> None:
        src = b.t(n.inputs[0])
        for k, ref in enumerate(n.inputs[1:]):
            out = n.name if k == len(n.inputs) - 2 else f"{n.name}#{k}"
            b.ops.append(GpuOp(typ, tfl, [src, b.t(ref)], [out], [n.name], shape=tuple(n.shape)))
            src = out
    return lower


def _pool(b: _Builder, n: Node) -> None:
    tfl = "MAX_POOL_2D" if n.op == "maxpool" else "AVERAGE_POOL_2D"
    b.emit(n, [("pooling_2d", tfl, [], {})])


def _concat(b: _Builder, n: Node) -> None:
    b.ops.append(GpuOp("concat", "CONCATENATION", [b.t(r) for r in n.inputs], [n.name], [n.name], shape=tuple(n.shape)))


def _split(b: _Builder, n: Node) -> None:
    outs = [f"{n.name}:{k}" if k else n.name for k in range(len(n.shapes))]
    b.ops.append(GpuOp("split", "SPLIT", [b.t(n.inputs[0])], outs, [n.name], shape=tuple(n.shape)))


def _clip(b: _Builder, n: Node) -> None:
    lo, hi = n.attrs["min"], n.attrs["max"]
    if (lo, hi) == (0.0, 6.0):
        b.emit(n, [("relu", "RELU6", [], {})])
    elif lo == 0.0:
        b.emit(n, [("minimum", "MINIMUM", [], {"const": True}), ("relu", "RELU", [], {})])
    else:
        b.emit(n, [("minimum", "MINIMUM", [], {"const": True}), ("maximum", "MAXIMUM", [], {"const": True})])


#: IR operator -> the function that appends a node's delegate ops (:class:`GpuOp`, before fusion) to
#: the op list :func:`delegate_ops` builds (one registry; adding an operator is one line).
DELEGATE_OP_BUILDERS: dict[str, Callable[[_Builder, Node], None]] = {
    "conv2d": _conv, "fc": _fc, "batchnorm": _bn,
    "relu": _act("relu", "RELU"), "relu6": _act("relu", "RELU6"), "leaky_relu": _act("relu", "LEAKY_RELU"),
    "prelu": _act("prelu", "PRELU"), "hswish": _act("hard_swish", "HARD_SWISH"),
    "sigmoid": _act("sigmoid", "LOGISTIC"), "tanh": _act("tanh", "TANH"),
    "hsigmoid": lambda b, n: b.emit(n, [("add", "ADD", [], {"const": True}), ("relu", "RELU6", [], {}),
                                        ("mul", "MUL", [], {"const": True})]),
    "swish": lambda b, n: b.emit(n, [("sigmoid", "LOGISTIC", [], {}), ("mul", "MUL", [n.inputs[0]], {})]),
    "clip": _clip, "scale": lambda b, n: b.emit(n, [("mul", "MUL", [], {"const": True})]),
    "shift": lambda b, n: b.emit(n, [("add", "ADD", [], {"const": True})]),
    "add": _binary("add", "ADD"), "mul": _binary("mul", "MUL"), "div": _binary("div", "DIV"),
    "avgpool": _pool, "maxpool": _pool, "global_avgpool": _act("mean", "MEAN"),
    "concat": _concat, "split": _split,
    "channel_shuffle": lambda b, n: b.emit(n, [("reshape", "RESHAPE", [], {}), ("transpose", "TRANSPOSE", [], {}),
                                               ("reshape", "RESHAPE", [], {})]),
    "pad": _act("padding", "PAD"), "crop": _act("slice", "SLICE"), "upsample": lambda b, n: b.emit(n, [("resize", "RESIZE_NEAREST_NEIGHBOR" if n.attrs["mode"] == "nearest"
                                                   else "RESIZE_BILINEAR", [], {})]),
    "resize": _act("resize", "RESIZE_NEAREST_NEIGHBOR"),
    "reshape": _act("reshape", "RESHAPE"), "flatten": _act("reshape", "RESHAPE"), "softmax": _act("softmax", "SOFTMAX"),
    "gather": _act("gather", "GATHER"),
}


def node_order(graph: Graph, order: str | list[str] = "dfs") -> list[str]:
    """The order the delegate sees the nodes in.

    ``ir``: the IR's own order (PyTorch's execution order for imported networks). ``dfs``:
    post-order depth-first from the outputs, inputs left to right, the order of a converter
    that emits a node right after everything it reads; it puts a ResNet block's body before
    its identity convolution, as the USC models' node ids show. A list of node names (e.g.
    the main ops of an ops table, in the model file's order): those nodes in that order, every
    other node as soon as all it reads is computed.
    """
    if isinstance(order, (list, tuple)):
        return _order_like(graph, list(order))
    if order == "ir":
        return list(graph.nodes)
    if order != "dfs":
        raise ValueError(f"order: expected 'dfs', 'ir' or a list of node names, got {order!r}")
    out: list[str] = []
    done: set[str] = set()
    for ref in graph.outputs:
        root = split_ref(ref)[0]
        if root in done:
            continue
        stack = [(root, iter(graph.nodes[root].inputs))]
        done.add(root)
        while stack:
            name, it = stack[-1]
            for r in it:
                src = split_ref(r)[0]
                if src not in done:
                    done.add(src)
                    stack.append((src, iter(graph.nodes[src].inputs)))
                    break
            else:
                stack.pop()
                out.append(name)
    return out


def _order_like(graph: Graph, reference: list[str]) -> list[str]:
    """Topological order keeping ``reference`` nodes in their given order, others eager."""
    rank = {name: i for i, name in enumerate(reference)}
    missing = [n for n in reference if n not in graph.nodes]
    if missing:
        raise KeyError(f"order: node {missing[0]!r} is not in graph {graph.name!r}")
    deps = {n.name: {split_ref(r)[0] for r in n.inputs} for n in graph.nodes.values()}
    readers = graph.consumers()
    waiting = {name: len(d) for name, d in deps.items()}
    ready_free = [n for n, w in waiting.items() if w == 0 and n not in rank]
    ready_ranked = [n for n, w in waiting.items() if w == 0 and n in rank]
    out: list[str] = []
    while ready_free or ready_ranked:
        if ready_free:
            name = ready_free.pop(0)
        else:
            ready_ranked.sort(key=rank.__getitem__)
            name = ready_ranked.pop(0)
        out.append(name)
        for r in dict.fromkeys(readers[name]):
            waiting[r] -= 1
            if waiting[r] == 0:
                (ready_ranked if r in rank else ready_free).append(r)
    return out


# ---------------------------------------------------------------- delegate graph transformations
def _merge_const_into_conv(ops: list[GpuOp], readers: dict[str, list[GpuOp]]) -> list[GpuOp]:
    """An ADD or MUL by a constant right after a convolution/FC (its only reader) is merged into
    the layer's bias or weights (the delegate's fuse_add_to_conv / fuse_mul_to_conv)."""
    out: list[GpuOp] = []
    by_output = {}
    for op in ops:
        if op.const and op.type in ("add", "mul") and len(op.inputs) == 1:
            prod = by_output.get(op.inputs[0])
            if prod is not None and prod.type in (CONV2D, "fully_connected", "depthwise_convolution") \
                    and len(readers.get(op.inputs[0], [])) == 1 and not prod.linked:
                prod.outputs = list(op.outputs)
                for t in op.outputs:
                    by_output[t] = prod
                continue
        out.append(op)
        for t in op.outputs:
            by_output[t] = op
    return out


def _fully_connected_from_conv(op: GpuOp) -> None:
    """A 1x1, stride-1 convolution on a 1x1 input runs as ``fully_connected``."""
    c = op.conv
    if op.type == CONV2D and c is not None and c.groups == 1 and c.kernel == (1, 1) and c.stride == (1, 1) \
            and c.out_h == 1 and c.out_w == 1:
        op.type = "fully_connected"


def _mean_from_global_pool(op: GpuOp, graph: Graph) -> None:
    """An average pool whose window covers its whole (unpadded) input runs as ``mean``."""
    if op.tflite_op != "AVERAGE_POOL_2D":
        return
    n = graph.nodes[op.main_node]
    h, w = graph.input_shapes(n)[0][2:]
    if list(n.attrs["kernel"]) == [h, w] and list(n.attrs["padding"]) == [0, 0]:
        op.type = "mean"


def _reorder_inputs(ops: list[GpuOp]) -> None:
    """Two-input ADD/MUL of equal shapes: the most recently written input goes first."""
    written = {t: i for i, op in enumerate(ops) for t in op.outputs}
    shapes = {t: op.shape for op in ops for t in op.outputs}
    for op in ops:
        if op.type in ("add", "mul") and not op.const and len(op.inputs) == 2 \
                and shapes.get(op.inputs[0]) == shapes.get(op.inputs[1]):
            if written.get(op.inputs[1], -1) > written.get(op.inputs[0], -1):
                op.inputs.reverse()


#: The transformations above, by name (a report can switch each off).
TRANSFORMS = ("merge_const_into_conv", "fully_connected_from_conv", "mean_from_global_pool", "reorder_inputs")


def delegate_ops(graph: Graph, order: str | list[str] = "dfs", transforms: Iterable[str] = TRANSFORMS) -> list[GpuOp]:
    """The delegate's op list for ``graph`` (before fusion), in execution order."""
    transforms = set(transforms)
    unknown = transforms - set(TRANSFORMS)
    if unknown:
        raise ValueError(f"transforms: unknown {sorted(unknown)} (known: {', '.join(TRANSFORMS)})")
    b = _Builder(graph)
    for name in node_order(graph, order):
        node = graph.nodes[name]
        if node.op == "input":
            continue
        lower = DELEGATE_OP_BUILDERS.get(node.op)
        if lower is None:
            raise KeyError(f"node {name!r}: no TFLite GPU lowering for IR op {node.op!r}")
        lower(b, node)
    ops = b.ops
    if "merge_const_into_conv" in transforms:
        readers: dict[str, list[GpuOp]] = {}
        for op in ops:
            for t in op.inputs:
                readers.setdefault(t, []).append(op)
        ops = _merge_const_into_conv(ops, readers)
    for op in ops:
        if "fully_connected_from_conv" in transforms:
            _fully_connected_from_conv(op)
        if "mean_from_global_pool" in transforms:
            _mean_from_global_pool(op, graph)
    if "reorder_inputs" in transforms:
        _reorder_inputs(ops)
    return ops


# ---------------------------------------------------------------- fusion (B.2)
def merge_nodes(ops: list[GpuOp], graph_inputs: Iterable[str] = ("input",), ready: str = "all") -> list[GpuOp]:
    """MERGENODES (Algorithm B.2) on a copy of ``ops``; returns the kernels in order, each with
    the ops it absorbed in ``linked``. ``ready="all"``: every input of the next node must be
    computed (the delegate's source); ``"first"``: only its first input (the paper's line 17)."""
    if ready not in ("all", "first"):
        raise ValueError(f"ready: expected 'all' or 'first', got {ready!r}")
    nodes = [GpuOp(o.type, o.tflite_op, list(o.inputs), list(o.outputs), list(o.nodes), o.conv, o.const, o.shape)
             for o in ops]
    ready_tensors = set(graph_inputs)
    i = 0
    while i < len(nodes):
        cur = nodes[i]
        ready_tensors.update(cur.outputs)
        if len(cur.outputs) != 1:
            i += 1
            continue
        candidates, link_index = [], 0
        for j in range(i + 1, len(nodes)):
            for k, t in enumerate(nodes[j].inputs):
                if t == cur.outputs[0]:
                    candidates.append(j)
                    link_index = k
        if len(candidates) != 1 or link_index != 0:
            i += 1
            continue
        nxt = nodes[candidates[0]]
        is_ready = all(t in ready_tensors for t in nxt.inputs) if ready == "all" else nxt.inputs[0] in ready_tensors
        if not (is_ready and is_linkable(nxt)):
            i += 1
            continue
        cur.linked.append(nxt)
        cur.outputs = list(nxt.outputs)
        del nodes[candidates[0]]  # retry cur: it may absorb the next one too
    return nodes


# ---------------------------------------------------------------- deduced kernels
@dataclass(frozen=True)
class GpuKernel:
    """A deduced kernel: the selected implementation, the op types linked into it, and the IR
    nodes it covers; ``tflite_op`` is the TFLite operator of its first op."""

    kernel: str
    linked: tuple[str, ...]
    nodes: tuple[str, ...]
    tflite_op: str
    conv: ConvInfo | None

    @property
    def fused(self) -> bool:
        return bool(self.linked)

    @property
    def winograd(self) -> bool:
        return self.kernel == WINOGRAD

    @property
    def grouped(self) -> bool:
        return self.kernel == GROUPED

    @property
    def kernel_type(self) -> str:
        """As the delegate names it (indices dropped, parts joined by ``+``). Winograd kernels
        are three dispatches whose name shows no linked ops, so neither does this one."""
        if self.winograd:
            return self.kernel
        return "+".join((self.kernel,) + self.linked)


def deduce_kernels(graph: Graph, gpu: GpuInfo | str, order: str | list[str] = "dfs", ready: str = "all",
                   transforms: Iterable[str] = TRANSFORMS, src_per_group: bool = True) -> list[GpuKernel]:
    """The kernels the TFLite GPU delegate runs for ``graph`` on ``gpu``, in execution order."""
    if isinstance(gpu, str):
        gpu = gpu_info(gpu)
    inputs = [n.name for n in graph.input_nodes]
    out = []
    for k in merge_nodes(delegate_ops(graph, order, transforms), inputs, ready):
        name = k.type
        if k.type == CONV2D and k.conv is not None:
            name = select_conv_kernel(gpu, k.conv, src_per_group)
        nodes = tuple(dict.fromkeys(k.nodes + [n for l in k.linked for n in l.nodes]))
        out.append(GpuKernel(name, tuple(l.type for l in k.linked), nodes, k.tflite_op, k.conv))
    return out


__all__ = ["ConvInfo", "DELEGATE_OP_BUILDERS", "GpuInfo", "GpuKernel", "GpuOp", "LINKABLE", "TRANSFORMS",
           "check_grouped_conv", "check_winograd", "deduce_kernels", "delegate_ops", "gpu_info", "is_linkable",
           "merge_nodes", "node_order", "select_conv_kernel"]
