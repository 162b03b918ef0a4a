"""IR -> nn-Meter IR: the JSON graph nn-Meter reads as model type ``"nnmeter-ir"``.

The format, as nn-Meter 2.0 consumes it (``model_file_to_graph(path, "nnmeter-ir")`` returns
the loaded JSON as is; its ``KernelDetector`` then runs on it):

- one JSON object mapping each node name to ``{"inbounds": [...], "outbounds": [...],
  "attr": {"type": ..., "attr": {...}, "input_shape": [...], "output_shape": [...]}}``;
  nothing else at top level (every key is taken as a node);
- ``inbounds``/``outbounds`` list producer/consumer node names, one entry per edge (a node
  reading two outputs of a split lists it twice); there are no output ports, so a consumer
  of ``split:1`` names ``split`` and its ``input_shape`` holds the shape of that output;
- shapes are NHWC (``[1, H, W, C]``) for images, in the IR's order for every other tensor
  (vectors ``[1, F]``, tokens ``[1, N, C]``, attention ``[1, heads, N, d]``): the layout rule of
  ``generators/export/layout.py``, which the TFLite export follows too; a node's
  ``input_shape``/``output_shape`` hold one shape per input/output tensor;
- ``type`` is nn-Meter's canonical operator name (after its ``OP_ALIAS`` table), and
  ``attr.attr`` uses the keys its kernel detector and feature extractor read: ``ks`` and
  ``strides`` (``[h, w]``) for conv/dwconv/pools, ``group`` for convs, ``axis`` for concat
  and split (NHWC axis of an image; nn-Meter renames split's to ``split_dim``).

Type choices follow how nn-Meter itself names the same operator when it converts a
TensorFlow or ONNX model, so its fusion rules and block patterns apply: relu6 is ``relu``
(nn-Meter aliases Relu6 and Clip to relu; ``attr.max = 6.0`` keeps the difference), global
average pooling is ``gap`` (its squeeze-and-excite pattern and ``global-avgpool``
predictor key on it), hard sigmoid is ``hardsigmoid``, flatten is ``reshape``, clip is
``relu`` (nn-Meter's alias of ONNX Clip; ``attr`` keeps min/max), scale is a one-input
``mul``, crop is ``split`` (nn-Meter's alias of ONNX Slice), a position embedding a one-input
``add`` (its constant has the output's shape) and a class token a one-input ``concat``
(``attr.const_shape``: the token's ``[1, 1, C]``), the graph input is a
``Placeholder`` (skipped by the kernel detector as a dummy). nn-Meter has no latency
predictor for tanh, swish, sigmoid, leakyrelu, prelu, mul, pad, reshape, softmax, upsample, nor
for the transformer operators (layernorm, gelu, matmul, transpose, mean): its predictor skips
those kernels (they still appear in the graph).
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from foundation.atomic import write_text
from ..ir import Graph, Node, split_ref
from .layout import NHWC, PLAIN, framework_axis, ir_to_framework, tensor_layouts

FORMAT = "nnmeter-ir"


class ExportError(ValueError):
    """The graph cannot be exported; the message is one line naming the node and the format."""


def nhwc(shape: list[int], layout: str = NHWC) -> list[int]:
    """An image's NCHW shape as NHWC; other tensors unchanged (what nn-Meter's converters do)."""
    return ir_to_framework(shape, layout if len(shape) == 4 else PLAIN)


def nhwc_axis(axis: int, rank: int, layout: str = NHWC) -> int:
    return framework_axis(axis, rank, layout if rank == 4 else PLAIN)


def _window(a: dict) -> dict[str, Any]:
    (ph, pw) = a["padding"]
    return {"ks": list(a["kernel"]), "strides": list(a["stride"]), "pads": [ph, pw, ph, pw]}


def _conv(node: Node, ins: list[list[int]]) -> tuple[str, dict]:
    a = node.attrs
    cin = ins[0][1]
    kind = "dwconv" if a["groups"] == cin else "conv"  # nn-Meter's own rule (ir_tools.convert_nodes)
    attr = _window(a)
    attr.update({"dilations": list(a["dilation"]), "group": a["groups"], "bias": a["bias"]})
    return kind, attr


def _pool(kind: str) -> Callable[[Node, list[list[int]]], tuple[str, dict]]:
    def f(node: Node, ins: list[list[int]]) -> tuple[str, dict]:
        attr = _window(node.attrs)
        attr["ceil_mode"] = node.attrs["ceil_mode"]
        if "count_include_pad" in node.attrs:
            attr["count_include_pad"] = node.attrs["count_include_pad"]
        return kind, attr
    return f


def _fixed(kind: str, **attr: Any) -> Callable[[Node, list[list[int]]], tuple[str, dict]]:
    return lambda node, ins: (kind, dict(attr))


def _axis_attr(kind: str, extra: Callable[[Node], dict] = lambda n: {}) -> Callable[[Node, list[list[int]]], tuple[str, dict]]:
    """An op with an IR ``axis`` (the exporter places it in the input's layout)."""
    return lambda node, ins: (kind, {"axis": node.attrs["axis"] % len(ins[0]), **extra(node)})


def _pad(node: Node, ins: list[list[int]]) -> tuple[str, dict]:
    t, b, l, r, *channels = node.attrs["pads"]
    return "pad", {"pads": [t, l, b, r], "value": node.attrs["value"], **({"channel_pads": channels} if channels else {})}


def _rule_conv_type(node: Node, graph: Graph) -> str:
    cin = graph.input_shapes(node)[0][1]
    g = node.attrs["groups"]
    if g == 1:
        return "conv"
    return "dwconv" if g == cin else "gconv"


@dataclass(frozen=True)
class NNMeterOp:
    """How one IR operator appears to nn-Meter.

    ``convert(node, input shapes)`` gives its (type, attr.attr) in the exported nn-Meter IR;
    ``rule_type`` is the operator type nn-Meter's fusion rules and kernel search speak of
    (``kernels.nnmeter_rules``; a finer vocabulary: relu6, hsigmoid, shuffle, clip, scale, crop
    keep their own names there), a string or a function of (node, graph); None for the input.
    """

    convert: Callable[[Node, list[list[int]]], tuple[str, dict]]
    rule_type: str | Callable[[Node, Graph], str] | None


#: IR operator -> its nn-Meter names. Adding an operator is one ``register_nnmeter_op`` call.
NNMETER_OPS: dict[str, NNMeterOp] = {
    "input": NNMeterOp(_fixed("Placeholder"), None),
    "conv2d": NNMeterOp(_conv, _rule_conv_type),
    "fc": NNMeterOp(lambda n, i: ("fc", {"bias": n.attrs["bias"]}), "fc"),
    "batchnorm": NNMeterOp(lambda n, i: ("bn", {"epsilon": n.attrs["eps"]}), "bn"),
    "relu": NNMeterOp(_fixed("relu"), "relu"),
    "relu6": NNMeterOp(_fixed("relu", min=0.0, max=6.0), "relu6"),
    "hswish": NNMeterOp(_fixed("hswish"), "hswish"),
    "hsigmoid": NNMeterOp(_fixed("hardsigmoid"), "hsigmoid"),
    "sigmoid": NNMeterOp(_fixed("sigmoid"), "sigmoid"),
    "swish": NNMeterOp(_fixed("swish"), "swish"),
    "tanh": NNMeterOp(_fixed("tanh"), "tanh"),
    "leaky_relu": NNMeterOp(lambda n, i: ("leakyrelu", {"alpha": n.attrs["alpha"]}), "leakyrelu"),
    "prelu": NNMeterOp(lambda n, i: ("prelu", {"num_parameters": n.attrs["num_parameters"]}), "prelu"),
    "add": NNMeterOp(_fixed("add"), "add"),
    "mul": NNMeterOp(_fixed("mul"), "mul"),
    "div": NNMeterOp(_fixed("div"), "div"),
    "avgpool": NNMeterOp(_pool("avgpool"), "avgpool"),
    "maxpool": NNMeterOp(_pool("maxpool"), "maxpool"),
    "global_avgpool": NNMeterOp(_fixed("gap"), "gap"),
    "concat": NNMeterOp(_axis_attr("concat"), "concat"),
    "split": NNMeterOp(_axis_attr("split", lambda n: {"split": list(n.attrs["sections"])}), "split"),
    "channel_shuffle": NNMeterOp(lambda n, i: ("channelshuffle", {"group": n.attrs["groups"]}), "shuffle"),
    "pad": NNMeterOp(_pad, "pad"),
    "reshape": NNMeterOp(lambda n, i: ("reshape", {"shape": list(n.attrs["shape"])}), "reshape"),
    "flatten": NNMeterOp(_fixed("reshape"), "reshape"),
    "softmax": NNMeterOp(_axis_attr("softmax"), "softmax"),
    # appended IR operators
    "scale": NNMeterOp(lambda n, i: ("mul", {"factor": n.attrs["factor"]}), "scale"),  # a Mul by a constant, as in TF/ONNX graphs
    "shift": NNMeterOp(lambda n, i: ("add", {"value": n.attrs["value"]}), "shift"),  # an Add of a constant, as in TF/ONNX graphs
    "clip": NNMeterOp(lambda n, i: ("relu", {"min": n.attrs["min"], "max": n.attrs["max"]}), "clip"),  # nn-Meter aliases Clip to relu
    "crop": NNMeterOp(lambda n, i: ("split", {"crops": list(n.attrs["crops"])}), "crop"),  # an ONNX Slice, which nn-Meter calls split
    "upsample": NNMeterOp(lambda n, i: ("upsample", {"scale": list(n.attrs["scale"]), "mode": n.attrs["mode"]}), "upsample"),
    "resize": NNMeterOp(lambda n, i: ("upsample", {"size": list(n.attrs["size"]), "mode": "nearest"}), "upsample"),
    # transformers
    "layernorm": NNMeterOp(lambda n, i: ("layernorm", {"axis": n.attrs["axis"] % len(i[0]), "epsilon": n.attrs["eps"]}),
                           "layernorm"),
    "instancenorm": NNMeterOp(lambda n, i: ("instancenorm", {"epsilon": n.attrs["eps"]}), "instancenorm"),
    "gelu": NNMeterOp(lambda n, i: ("gelu", {"approximate": n.attrs["approximate"]}), "gelu"),
    "matmul": NNMeterOp(_fixed("matmul"), "matmul"),
    "transpose": NNMeterOp(lambda n, i: ("transpose", {"perm": list(n.attrs["perm"])}), "transpose"),
    "mean": NNMeterOp(_axis_attr("mean", lambda n: {"keepdims": n.attrs["keepdim"]}), "mean"),
    "reduce_max": NNMeterOp(_axis_attr("reducemax", lambda n: {"keepdims": n.attrs["keepdim"]}), "reduce_max"),
    "reduce_sum": NNMeterOp(_axis_attr("reducesum", lambda n: {"keepdims": n.attrs["keepdim"]}), "reduce_sum"),
    # learned constant tensors: an Add and a Concat whose other operand is a weight, as in TF/ONNX graphs
    "pos_embed": NNMeterOp(_fixed("add"), "pos_embed"),  # the constant has the output's shape
    "cls_token": NNMeterOp(lambda n, i: ("concat", {"axis": 1, "const_shape": [1, 1, i[0][-1]]}), "cls_token"),
    # imported CNNs' zoos: AlexNet's local response norm (ONNX's LRN, with its attribute names)
    "lrn": NNMeterOp(lambda n, i: ("lrn", {k: n.attrs[k] for k in ("size", "alpha", "beta", "bias")}), "lrn"),
    # CondenseNet's selection of channels: an ONNX Gather of a constant index (its values in attr)
    "gather": NNMeterOp(_axis_attr("gather", lambda n: {"indices": list(n.attrs["indices"])}), "gather"),
}


def register_nnmeter_op(op: str, spec: NNMeterOp) -> NNMeterOp:
    """Teach the nn-Meter exporter (and the fusion-rule vocabulary) one more IR operator."""
    if op in NNMETER_OPS:
        raise ValueError(f"nn-Meter lowering of {op!r} registered twice")
    NNMETER_OPS[op] = spec
    return spec


def rule_type(node: Node, graph: Graph) -> str:
    """The operator type nn-Meter's fusion rules speak of (``conv``, ``dwconv``, ``bn``, ``relu``...)."""
    spec = NNMETER_OPS.get(node.op)
    t = spec.rule_type if spec is not None else None
    if t is None:
        raise KeyError(f"node {node.name!r}: no nn-Meter operator type for IR op {node.op!r}")
    return t(node, graph) if callable(t) else t


def nnmeter_type(graph: Graph, node: Node) -> str:
    """The nn-Meter type one node exports as."""
    return _convert(graph, node)[0]


def _convert(graph: Graph, node: Node) -> tuple[str, dict]:
    spec = NNMETER_OPS.get(node.op)
    if spec is None:
        raise ExportError(f"node {node.name!r}: operator {node.op!r} is not supported by the nn-Meter IR exporter ({FORMAT})")
    return spec.convert(node, graph.input_shapes(node))


def _place(attr: dict, node: Node, graph: Graph, layouts: dict[str, str]) -> dict:
    """A converter's IR ``axis`` (of the first input) and ``shape`` (of the result) in the layout
    of the tensors they refer to."""
    attr = dict(attr)
    if "axis" in attr:
        src = split_ref(node.inputs[0])[0]
        attr["axis"] = nhwc_axis(attr["axis"], len(graph.tensor_shape(node.inputs[0])), layouts[src])
    if "shape" in attr:
        attr["shape"] = nhwc(attr["shape"], layouts[node.name])
    return attr


def to_nnmeter_ir(graph: Graph) -> dict[str, dict[str, Any]]:
    """The nn-Meter IR graph of ``graph`` (node name -> node), in the IR's topological order."""
    graph.validate()
    layouts = tensor_layouts(graph)
    out: dict[str, dict[str, Any]] = {}
    for node in graph.nodes.values():
        kind, attr = _convert(graph, node)
        if "type" in attr:  # nn-Meter passes attr.attr as networkx keyword arguments next to type=
            raise ExportError(f"node {node.name!r}: attribute key 'type' is reserved in {FORMAT}")
        out[node.name] = {
            "inbounds": [split_ref(r)[0] for r in node.inputs],
            "outbounds": [],
            "attr": {
                "type": kind,
                "attr": _place(attr, node, graph, layouts) if node.op != "input" else attr,
                "input_shape": [nhwc(graph.tensor_shape(r), layouts[split_ref(r)[0]]) for r in node.inputs],
                "output_shape": [nhwc(s, layouts[node.name]) for s in node.shapes],
            },
        }
    for name, entry in out.items():  # one outbound per edge, as nn-Meter's ModelGraph.refresh builds them
        for src in entry["inbounds"]:
            out[src]["outbounds"].append(name)
    return out


def to_json(ir: dict[str, dict[str, Any]]) -> str:
    """Byte-stable text: one node per line, keys inside a node sorted, nodes in graph order."""
    lines = [f"{json.dumps(name)}:{json.dumps(node, sort_keys=True, separators=(',', ':'))}" for name, node in ir.items()]
    return "{\n" + ",\n".join(lines) + "\n}\n"


def export_nnmeter_ir(graph: Graph, path: str | Path) -> dict[str, Any]:
    """Write the nn-Meter IR JSON (atomically); return the artifact's facts."""
    ir = to_nnmeter_ir(graph)
    text = to_json(ir)
    path = write_text(path, text)
    types: dict[str, int] = {}
    for node in ir.values():
        t = node["attr"]["type"]
        types[t] = types.get(t, 0) + 1
    data = text.encode()
    return {
        "path": str(path),
        "format": FORMAT,
        "model_id": graph.model_id,
        "nodes": len(ir),
        "type_counts": dict(sorted(types.items())),
        "output_nodes": [split_ref(r)[0] for r in graph.outputs],
        "bytes": len(data),
        "sha256": hashlib.sha256(data).hexdigest(),
    }
