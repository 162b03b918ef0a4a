"""Where each tensor's axes sit in a channels-last export (TFLite, nn-Meter IR).

The IR keeps PyTorch's axis order. A channels-last framework stores an *image*, a rank-4 tensor
``[1, C, H, W]``, as ``[1, H, W, C]`` (layout ``nhwc``); every other tensor keeps the IR's order
(layout ``plain``): vectors ``[1, F]``, tokens ``[1, N, C]``, and rank-4 tensors that are not
images, such as attention's ``[1, heads, N, d]``. Which rank-4 tensors are images follows from
the operators around them (:func:`tensor_layouts`):

- a graph input and the output of an image operator (:data:`IMAGE_OPS`: windows, spatial
  plumbing and the channel window of a local response norm) are images; so is every graph output of rank 4 (the exported model's I/O is NHWC);
- an operator that keeps its input's axes (activations, add, mul, concat, split, softmax, batch
  and layer norm...) gives its output the layout of its first input;
- an operator that rearranges or contracts axes (:data:`ORDER_OPS`: reshape, transpose, matmul,
  fc, a reduction without keepdim) chooses its rank-4 output's layout from its readers: ``plain`` when
  some reader, directly or through layout-keeping operators, rearranges or contracts axes again
  and none is an image operator or a graph output; ``nhwc`` otherwise (a reshape to an image, as
  before transformers). A layout-keeping reader that takes the result as a later input (a residual
  add after a block's last fc) asks for its own layout, its first input's.

An operator reads its inputs in the layout it needs (:func:`input_layouts`): image operators
read images, matmul, fc and reductions without keepdim read ``plain``, layout-keeping operators read
every input in their output's layout, reshape and transpose read either. A mismatch costs one
transpose, counted by the exporter.
"""
from __future__ import annotations

from ..ir import Graph, Node, split_ref

NHWC, PLAIN = "nhwc", "plain"
#: Operators that read and write images.
IMAGE_OPS = frozenset({"conv2d", "avgpool", "maxpool", "global_avgpool", "upsample", "crop", "pad", "channel_shuffle",
                       "lrn", "resize"})
#: Operators whose result's axes are not their input's: the result's layout is chosen.
#: Reductions over one axis: layout-keeping with keepdim, else they contract an axis.
REDUCE_OPS = frozenset({"mean", "reduce_max", "reduce_sum"})
ORDER_OPS = frozenset({"reshape", "flatten", "transpose", "matmul", "fc"}) | REDUCE_OPS
#: Of those, the ones that handle any input layout themselves.
ANY_INPUT_OPS = frozenset({"reshape", "flatten", "transpose"})
#: NCHW -> NHWC and back, as transposition permutations.
TO_NHWC, TO_NCHW = [0, 2, 3, 1], [0, 3, 1, 2]


def _orders(node: Node) -> bool:
    """The node rearranges or contracts axes (a reduction with keepdim keeps them)."""
    return node.op in ORDER_OPS and not (node.op in REDUCE_OPS and node.attrs["keepdim"])


def _wants(graph: Graph, name: str, readers: dict[str, list[str]], outputs: set[str],
           memo: dict[str, frozenset], known: dict[str, str]) -> frozenset:
    """The layouts the readers of ``name``'s result ask for, through layout-keeping readers."""
    if name in memo:
        return memo[name]
    want = {NHWC} if name in outputs else set()
    for r in readers[name]:
        node = graph.nodes[r]
        if node.op in IMAGE_OPS:
            want.add(NHWC)
        elif _orders(node):
            want.add(PLAIN)
        elif len(node.shapes[0]) != 4:
            continue
        elif split_ref(node.inputs[0])[0] == name:
            want |= _wants(graph, r, readers, outputs, memo, known)
        else:
            # a later input of a layout-keeping reader (the residual add after a block's last fc)
            # is read in the reader's layout, its first input's: known already, or asked for
            first = split_ref(node.inputs[0])[0]
            want |= {known[first]} if first in known else _wants(graph, r, readers, outputs, memo, known)
    memo[name] = frozenset(want)
    return memo[name]


def tensor_layouts(graph: Graph) -> dict[str, str]:
    """Node name -> the layout of its outputs (``nhwc`` or ``plain``)."""
    readers = graph.consumers()
    outputs = {split_ref(r)[0] for r in graph.outputs}
    memo: dict[str, frozenset] = {}
    out: dict[str, str] = {}
    for node in graph.nodes.values():
        if len(node.shapes[0]) != 4:
            out[node.name] = PLAIN
        elif node.op == "input" or node.op in IMAGE_OPS:
            out[node.name] = NHWC
        elif _orders(node):
            want = _wants(graph, node.name, readers, outputs, memo, out)
            out[node.name] = PLAIN if want == {PLAIN} else NHWC
        else:
            out[node.name] = out[split_ref(node.inputs[0])[0]]
    return out


def computes_plain(node: Node) -> bool:
    """The node computes its result in IR order whatever its layout (matmul, fc, a reduction)."""
    return _orders(node) and node.op not in ANY_INPUT_OPS


def input_layouts(node: Node, layouts: dict[str, str], graph: Graph) -> list[str | None]:
    """Per input, the layout ``node`` reads it in (None: as it comes)."""
    if node.op in ANY_INPUT_OPS:
        return [None] * len(node.inputs)
    if node.op in IMAGE_OPS:
        need = NHWC
    elif _orders(node):
        need = PLAIN
    else:
        need = layouts[node.name]
    return [need if len(graph.tensor_shape(r)) == 4 else None for r in node.inputs]


def ir_to_framework(shape: list[int], layout: str) -> list[int]:
    """An IR shape in the framework's order."""
    return [shape[0], shape[2], shape[3], shape[1]] if layout == NHWC else list(shape)


def framework_axis(axis: int, rank: int, layout: str) -> int:
    """An IR axis in the framework's order."""
    axis %= rank
    return TO_NHWC.index(axis) if layout == NHWC else axis


def framework_perm(perm: list[int], in_layout: str, out_layout: str) -> list[int]:
    """The framework permutation computing the IR transposition ``perm`` between two layouts."""
    rank = len(perm)
    to_ir = TO_NCHW if in_layout == NHWC else list(range(rank))  # framework input -> IR input
    from_ir = TO_NHWC if out_layout == NHWC else list(range(rank))  # IR output -> framework output
    ir_out = [to_ir[p] for p in perm]  # IR output axis i comes from framework input axis ir_out[i]
    return [ir_out[q] for q in from_ir]
