"""IR -> ONNX: the network's PyTorch module exported by ``torch.onnx``, fp32 and int8 (QDQ).

``export_onnx(graph, path, precision)`` writes ``path`` atomically and returns its facts:

- **fp32**: :func:`generators.export.torch_module.to_module` (the same ``nn`` layers and weights as
  every other export of the network) exported with PyTorch's TorchScript-based exporter
  (``dynamo=False``: it needs no onnxscript), opset :data:`OPSET`, static shapes, batch 1,
  constants folded; inputs named after the IR inputs, outputs ``output_<k>``. Four layers are
  swapped for their ONNX form first (the same function): ``nn.ChannelShuffle`` (no ONNX symbolic)
  becomes reshape -> transpose -> reshape, a constant pad one ``Pad`` with constant pads (the
  exporter would compute them in the graph), a resize to a size one ``Resize`` with constant sizes
  (likewise), and ``nn.LocalResponseNorm`` one ``LRN`` of an odd
  size, its decomposition with constant shapes for an even one (the exporter would compute them,
  and guard a squeeze with an ``If``). The file passes ``onnx.checker`` (full check).
- **int8**: the fp32 file quantized by ``onnxruntime.quantization.quantize_static``: QDQ format,
  int8 weights per output channel, uint8 activations per tensor (U8S8, the pairing ORT's x86
  kernels fuse into QLinearConv and friends; with int8 activations part of the graph stays float
  Conv behind DequantizeLinear), MinMax calibration on
  ``example_input(graph, sample=k)`` for k < ``calibration_samples`` (the PyTorch int8 export's
  calibration set). Operators the quantizer does not cover stay float between QDQ pairs.

Operator counts follow :data:`ONNX_OPS` (IR op -> the ONNX operators it becomes after the
exporter's fusions: a batch norm right after a conv it alone reads is folded into it);
:func:`expected_op_counts` and :func:`expected_params` are what ``verify`` in formats.py holds
the facts to. docs/exporters.md (*ONNX*) has the table.
"""
from __future__ import annotations

import hashlib
import tempfile
import time
import warnings
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np

from foundation.atomic import atomic_path

from ..ir import Graph, Node, split_ref
from .weights import example_input

OPSET = 17
FORMAT = "onnx"
PRECISIONS = ("fp32", "int8")
DEFAULT_CALIBRATION_SAMPLES = 8  # as the PyTorch int8 export (torch_module.DEFAULT_CALIBRATION_SAMPLES)
QDQ_OPS = ("QuantizeLinear", "DequantizeLinear")


class OnnxExportError(ValueError):
    """A graph or option the ONNX exporter refuses; one line."""


# ---------------------------------------------------------------- the operator table
@dataclass(frozen=True)
class OnnxOp:
    """The ONNX operators one IR node becomes in the fp32 file: a fixed count per type, or a
    function of the node and its graph. ``chain``: an n-ary operator exported as n - 1 binary
    steps, ``ops`` being one step's."""

    ops: dict[str, int] | Callable[[Node, Graph], dict[str, int]]
    chain: bool = False

    def counts(self, node: Node, graph: Graph) -> dict[str, int]:
        return self.ops(node, graph) if callable(self.ops) else dict(self.ops)


def folded_batchnorm(node: Node, graph: Graph, readers: dict[str, list[str]] | None = None) -> bool:
    """A batch norm the exporter folds into its conv: its input is a conv2d's output that
    nothing else reads and that is not a graph output (torch.onnx's Conv+BatchNormalization fusion)."""
    if node.op != "batchnorm":
        return False
    src = split_ref(node.inputs[0])[0]
    readers = graph.consumers() if readers is None else readers
    outputs = {split_ref(r)[0] for r in graph.outputs}
    return graph.nodes[src].op == "conv2d" and readers[src] == [node.name] and src not in outputs


def _one(op: str) -> OnnxOp:
    return OnnxOp({op: 1})


def _fc(node: Node) -> dict[str, int]:
    """Gemm on [1, F] (MatMul without bias); MatMul (+ Add for the bias) on tokens [1, ..., F]."""
    if len(node.shape) == 2:
        return {"Gemm" if node.attrs["bias"] else "MatMul": 1}
    return {"MatMul": 1, "Add": int(node.attrs["bias"])}


def _last_axis(node: Node) -> bool:
    return node.attrs["axis"] % len(node.shape) == len(node.shape) - 1


#: GELU at opset 17 (before ONNX's Gelu operator), as torch.onnx decomposes it.
GELU_OPS = {"none": {"Div": 1, "Erf": 1, "Add": 1, "Mul": 2},
            "tanh": {"Mul": 6, "Add": 2, "Tanh": 1}}


#: nn.LocalResponseNorm of an even size, decomposed as PyTorch computes it (ONNX's LRN centres an
#: even window one channel off PyTorch's, so only odd sizes become an LRN): the squares viewed
#: [1, 1, C, H, W], padded on the channels, averaged, viewed back, times alpha, plus the bias, to
#: the power beta, and the division.
LRN_DECOMPOSED = {"Mul": 2, "Reshape": 2, "Pad": 1, "AveragePool": 1, "Add": 1, "Pow": 1, "Div": 1}


#: IR operator -> the ONNX operators of the exported fp32 file. Adding an operator is one
#: ``register_onnx_op`` call (its PyTorch module must export: torch_module.TORCH_OPS).
ONNX_OPS: dict[str, OnnxOp] = {
    "conv2d": _one("Conv"),
    "fc": OnnxOp(lambda n, g: _fc(n)),
    "batchnorm": OnnxOp(lambda n, g: {} if folded_batchnorm(n, g) else {"BatchNormalization": 1}),
    "relu": _one("Relu"), "relu6": _one("Clip"), "clip": _one("Clip"),
    "hswish": _one("HardSwish"), "hsigmoid": _one("HardSigmoid"), "sigmoid": _one("Sigmoid"),
    "swish": OnnxOp({"Sigmoid": 1, "Mul": 1}), "tanh": _one("Tanh"), "leaky_relu": _one("LeakyRelu"),
    "prelu": _one("PRelu"),
    "add": OnnxOp({"Add": 1}, chain=True), "mul": OnnxOp({"Mul": 1}, chain=True), "div": _one("Div"),
    "scale": _one("Mul"),
    "shift": _one("Add"),
    "avgpool": _one("AveragePool"), "maxpool": _one("MaxPool"), "global_avgpool": _one("GlobalAveragePool"),
    "concat": _one("Concat"), "split": _one("Split"),
    "channel_shuffle": OnnxOp({"Reshape": 2, "Transpose": 1}),
    "gather": _one("Gather"),  # index_select of a buffer: a Gather of an initializer
    "pad": _one("Pad"), "reshape": _one("Reshape"), "flatten": _one("Flatten"), "softmax": _one("Softmax"),
    "crop": OnnxOp(lambda n, g: {"Slice": int(bool(n.attrs["crops"][0] or n.attrs["crops"][1]))
                                 + int(bool(n.attrs["crops"][2] or n.attrs["crops"][3]))}),
    "upsample": _one("Resize"), "resize": _one("Resize"),
    "layernorm": OnnxOp(lambda n, g: {"LayerNormalization": 1, "Transpose": 0 if _last_axis(n) else 2}),
    "instancenorm": _one("InstanceNormalization"),
    "lrn": OnnxOp(lambda n, g: {"LRN": 1} if n.attrs["size"] % 2 else dict(LRN_DECOMPOSED)),
    "gelu": OnnxOp(lambda n, g: GELU_OPS[n.attrs["approximate"]]),
    "matmul": _one("MatMul"), "transpose": _one("Transpose"), "mean": _one("ReduceMean"),
    "reduce_max": _one("ReduceMax"), "reduce_sum": _one("ReduceSum"),
    # the learned tensor is an initializer operand
    "pos_embed": _one("Add"), "cls_token": _one("Concat"),
}


def register_onnx_op(op: str, spec: OnnxOp) -> OnnxOp:
    """Teach the ONNX exporter's expectations one more IR operator."""
    if op in ONNX_OPS:
        raise ValueError(f"ONNX lowering of {op!r} registered twice")
    ONNX_OPS[op] = spec
    return spec


def expected_op_counts(graph: Graph, precision: str = "fp32") -> dict[str, int]:
    """ONNX operator counts (Constant nodes aside) the fp32 file of ``graph`` must have: each
    node's :data:`ONNX_OPS` entry, once per distinct computation. The exporter merges identical
    parameter-free operators on the same inputs (common-subexpression elimination: NAS-Bench-201
    cells apply ReLU and the zero op to one tensor on several edges), and an n-ary add or mul is a
    chain of binary ones, merged step by step. In int8 the same, once the QuantizeLinear /
    DequantizeLinear pairs are left out (and the Relu / Clip the quantizer removes)."""
    _check_precision(precision)
    import json

    weighted = {c.name for c in graph.costs() if c.params}
    value: dict[str, str] = {}  # node -> the computation its output is (merged nodes share one)
    seen: dict[tuple, str] = {}
    counts: Counter[str] = Counter()

    def ref(r: str) -> str:
        name, k = split_ref(r)
        return f"{value[name]}:{k}"

    for node in graph.nodes.values():
        if node.op == "input":
            value[node.name] = node.name
            continue
        spec = ONNX_OPS.get(node.op)
        if spec is None:
            raise OnnxExportError(f"node {node.name!r}: operator {node.op!r} has no ONNX_OPS entry "
                                  "(generators/export/onnx.py)")
        ins = [ref(r) for r in node.inputs]
        if spec.chain:  # binary steps, each merged on its own
            acc = ins[0]
            for b in ins[1:]:
                key = (node.op, acc, b)
                if key not in seen:
                    seen[key] = f"{node.name}#{len(seen)}:0"
                    counts.update(spec.counts(node, graph))
                acc = seen[key]
            value[node.name] = acc.rpartition(":")[0]
            continue
        key = None if node.name in weighted else (node.op, json.dumps(node.attrs, sort_keys=True), tuple(ins))
        if key is not None and key in seen:
            value[node.name] = seen[key]
            continue
        if key is not None:
            seen[key] = node.name
        value[node.name] = node.name
        counts.update(spec.counts(node, graph))
    return {k: v for k, v in sorted(counts.items()) if v}


def expected_params(graph: Graph) -> int:
    """Parameter elements the file holds (counted by :func:`inspect_onnx`): ``graph.params``, less
    2C per folded batch norm, plus C for the bias it gives a bias-less conv."""
    total = graph.params
    readers = graph.consumers()
    for node in graph.nodes.values():
        if folded_batchnorm(node, graph, readers):
            conv = graph.nodes[split_ref(node.inputs[0])[0]]
            c = node.shape[1]
            total -= 2 * c
            total += 0 if conv.attrs["bias"] else c
    return total


def verify_onnx(graph: Graph, facts: dict[str, Any], precision: str = "fp32") -> dict[str, bool]:
    """The file's facts against the IR: operator counts (:func:`expected_op_counts`; int8: those of
    fp32 beside the QDQ pairs, less any Relu / Clip the quantizer folded into a quantization
    range), parameters (:func:`expected_params`), input and output shapes; int8 also that it
    quantizes (QuantizeLinear and DequantizeLinear present)."""
    expected = expected_op_counts(graph, precision)
    counts = dict(facts["op_counts"])
    checks = {
        "params": facts["params"] == expected_params(graph),
        "input_shapes": [i["shape"] for i in facts["inputs"]] == [list(n.shape) for n in graph.input_nodes],
        "output_shapes": [o["shape"] for o in facts["outputs"]] == [graph.tensor_shape(r) for r in graph.outputs],
    }
    if precision == "int8":
        qdq = [counts.pop(q, 0) for q in QDQ_OPS]
        checks["quantized"] = all(n > 0 for n in qdq)
        removable = ("Relu", "Clip")
        checks["op_counts"] = (all(counts.get(k, 0) <= expected.get(k, 0) for k in removable)
                               and {k: v for k, v in counts.items() if k not in removable}
                               == {k: v for k, v in expected.items() if k not in removable})
    else:
        checks["op_counts"] = counts == expected
    return checks


def _check_precision(precision: str) -> None:
    if precision not in PRECISIONS:
        raise OnnxExportError(f"precision {precision!r} is not offered for ONNX (known: {', '.join(PRECISIONS)}; "
                              "fp16: see docs/exporters.md)")


# ---------------------------------------------------------------- reading a file
# where the parameters sit: op type -> input positions holding weights (BatchNormalization: scale
# and bias; its running statistics are not parameters, as in graph.params)
WEIGHT_INPUTS = {"Conv": (1, 2), "Gemm": (1, 2), "MatMul": (1,), "BatchNormalization": (1, 2), "PRelu": (1,),
                 "LayerNormalization": (1, 2), "InstanceNormalization": (1, 2)}
#: op type -> input positions holding a parameter when constant and not a scalar (an fc's bias on
#: tokens, a position embedding; a class token concatenated in front)
CONST_OPERAND_INPUTS = {"Add": (0, 1), "Concat": (0,)}


def inspect_onnx(model: Any) -> dict[str, Any]:
    """Facts of an ONNX model (a path or a ModelProto): op counts by type (Constant nodes counted
    apart), parameter elements (weights of Conv/Gemm/MatMul/PRelu, batch, layer and instance norm scale
    and bias, non-scalar constants added by an Add or first in a Concat, through a DequantizeLinear in
    int8), inputs and
    outputs (name, shape, element type), opset."""
    import onnx

    proto = model if isinstance(model, onnx.ModelProto) else onnx.load(str(model))
    g = proto.graph
    inits = {t.name: t for t in g.initializer}
    dequant = {n.output[0]: n.input[0] for n in g.node if n.op_type == "DequantizeLinear"}
    consts = {n.output[0] for n in g.node if n.op_type == "Constant"}
    counts = Counter(n.op_type for n in g.node if n.op_type != "Constant")
    weights: set[str] = set()
    for n in g.node:
        for pos in WEIGHT_INPUTS.get(n.op_type, ()):
            if pos < len(n.input) and n.input[pos]:
                src = dequant.get(n.input[pos], n.input[pos])
                if src in inits:
                    weights.add(src)
        for pos in CONST_OPERAND_INPUTS.get(n.op_type, ()):
            src = dequant.get(n.input[pos], n.input[pos]) if pos < len(n.input) else None
            if src in inits and int(np.prod(inits[src].dims, dtype=np.int64)) > 1:
                weights.add(src)
    params = sum(int(np.prod(inits[w].dims, dtype=np.int64)) for w in weights)

    def io(v: Any) -> dict[str, Any]:
        t = v.type.tensor_type
        return {"name": v.name, "shape": [d.dim_value if d.HasField("dim_value") else d.dim_param for d in t.shape.dim],
                "dtype": onnx.helper.tensor_dtype_to_np_dtype(t.elem_type).name}

    return {"op_counts": dict(sorted(counts.items())), "ops": sum(counts.values()), "constants": len(consts),
            "initializers": len(inits), "params": params,
            "inputs": [io(v) for v in g.input if v.name not in inits], "outputs": [io(v) for v in g.output],
            "opset": max((o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")), default=None),
            "ir_version": int(proto.ir_version)}


# ---------------------------------------------------------------- writing one
def _onnx_module(graph: Graph):
    """The fp32 module of ``graph`` with the layers that need it in their ONNX form."""
    import torch
    from torch import nn

    from .torch_module import to_module

    class _PadFn(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, pads, value):  # pads: F.pad's (left, right, top, bottom[, front, back])
            return nn.functional.pad(x, pads, value=value)

        @staticmethod
        def symbolic(g, x, pads, value):
            left, right, top, bottom, front, back = (*pads, 0, 0)[:6]
            onnx_pads = torch.tensor([0, front, top, left, 0, back, bottom, right], dtype=torch.int64)
            return g.op("Pad", x, g.op("Constant", value_t=onnx_pads),
                        g.op("Constant", value_t=torch.tensor(value, dtype=torch.float32)), mode_s="constant")

    class Pad(nn.Module):
        def __init__(self, pads: tuple[int, ...], value: float):
            super().__init__()
            self.pads, self.value = tuple(int(p) for p in pads), float(value)

        def forward(self, x):
            return _PadFn.apply(x, self.pads, self.value)

    class _LrnFn(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, size, alpha, beta, bias):
            return nn.functional.local_response_norm(x, size, alpha, beta, bias)

        @staticmethod
        def symbolic(g, x, size, alpha, beta, bias):
            if size % 2:
                return g.op("LRN", x, size_i=size, alpha_f=alpha, beta_f=beta, bias_f=bias)
            # an even window, PyTorch's (ONNX's LRN centres it one channel off): its decomposition
            # with constant shapes and pads
            from torch.onnx import symbolic_helper

            def const(v, dtype=torch.int64):
                return g.op("Constant", value_t=torch.tensor(v, dtype=dtype))

            shape = symbolic_helper._get_tensor_sizes(x)
            sq = g.op("Reshape", g.op("Mul", x, x), const([1, 1, *shape[1:]]))
            pads = [0, 0, size // 2, 0, 0, 0, 0, (size - 1) // 2, 0, 0]
            avg = g.op("AveragePool", g.op("Pad", sq, const(pads), const(0.0, torch.float32), mode_s="constant"),
                       kernel_shape_i=[size, 1, 1], strides_i=[1, 1, 1])
            den = g.op("Mul", g.op("Reshape", avg, const(shape)), const(alpha, torch.float32))
            den = g.op("Pow", g.op("Add", den, const(bias, torch.float32)), const(beta, torch.float32))
            return g.op("Div", x, den)

    class Lrn(nn.Module):
        def __init__(self, m: nn.LocalResponseNorm):
            super().__init__()
            self.args = (int(m.size), float(m.alpha), float(m.beta), float(m.k))

        def forward(self, x):
            return _LrnFn.apply(x, *self.args)

    class _ResizeFn(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, size):
            return nn.functional.interpolate(x, size=size, mode="nearest")

        @staticmethod
        def symbolic(g, x, size):
            from torch.onnx import symbolic_helper

            n, c = symbolic_helper._get_tensor_sizes(x)[:2]
            empty = g.op("Constant", value_t=torch.tensor([], dtype=torch.float32))
            sizes = g.op("Constant", value_t=torch.tensor([n, c, *size], dtype=torch.int64))
            return g.op("Resize", x, empty, empty, sizes, coordinate_transformation_mode_s="asymmetric", mode_s="nearest",
                        nearest_mode_s="floor")

    class Resize(nn.Module):
        def __init__(self, size: tuple[int, int]):
            super().__init__()
            self.size = tuple(int(v) for v in size)

        def forward(self, x):
            return _ResizeFn.apply(x, self.size)

    class ChannelShuffle(nn.Module):
        def __init__(self, groups: int):
            super().__init__()
            self.groups = groups

        def forward(self, x):
            n, c, h, w = x.shape
            return x.reshape(n, self.groups, c // self.groups, h, w).transpose(1, 2).reshape(n, c, h, w)

    module = to_module(graph)
    for name, sub in list(module.named_children()):
        if isinstance(sub, nn.ChannelShuffle):
            setattr(module, name, ChannelShuffle(sub.groups))
        elif isinstance(sub, (nn.ConstantPad2d, nn.ConstantPad3d)):
            setattr(module, name, Pad(sub.padding, sub.value))
        elif isinstance(sub, nn.LocalResponseNorm):
            setattr(module, name, Lrn(sub))
        elif isinstance(sub, nn.Upsample) and sub.size is not None:
            setattr(module, name, Resize(sub.size))
    return module


def _export_fp32(graph: Graph, path: Path) -> None:
    import onnx
    import torch

    from .torch_module import example_tensors

    module = _onnx_module(graph)
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")  # the TorchScript-based exporter's deprecation notice
        torch.onnx.export(module, example_tensors(graph), str(path), dynamo=False, opset_version=OPSET,
                          input_names=[n.name for n in graph.input_nodes],
                          output_names=[f"output_{k}" for k in range(len(graph.outputs))],
                          do_constant_folding=True)
    onnx.checker.check_model(onnx.load(str(path)), full_check=True)


class _Calibration:
    """The calibration inputs of ``graph`` (onnxruntime.quantization's CalibrationDataReader)."""

    def __init__(self, graph: Graph, samples: int):
        self._it = iter([example_input(graph, sample=k) for k in range(samples)])

    def get_next(self) -> dict[str, np.ndarray] | None:
        return next(self._it, None)


def _quantize(graph: Graph, fp32: Path, out: Path, calibration_samples: int) -> None:
    import logging

    from onnxruntime.quantization import CalibrationMethod, QuantFormat, QuantType, quantize_static

    logging.getLogger().setLevel(logging.ERROR)  # the quantizer's advice to pre-process is logged as a warning
    quantize_static(str(fp32), str(out), _Calibration(graph, calibration_samples), quant_format=QuantFormat.QDQ,
                    per_channel=True, activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8,
                    calibrate_method=CalibrationMethod.MinMax, nodes_to_exclude=float_onnx_nodes(graph, fp32))


def float_onnx_nodes(graph: Graph, fp32: Path) -> list[str]:
    """The ONNX nodes of the IR nodes that the PyTorch int8 export keeps float (softmax, GELU,
    matmul between activations, ...: ``generators.export.torch_module.float_nodes``), so that the
    int8 file quantizes what every int8 export of the suite quantizes. The exporter names a node
    ``/n_<IR node>/<op>``."""
    import onnx

    from .torch_module import float_nodes

    keep = {f"/n_{name}/" for name in float_nodes(graph)}
    return [n.name for n in onnx.load(str(fp32)).graph.node if any(n.name.startswith(k) for k in keep)]


def export_onnx(graph: Graph, path: str | Path, precision: str = "fp32",
                calibration_samples: int = DEFAULT_CALIBRATION_SAMPLES) -> dict[str, Any]:
    """Write the ONNX file of ``graph`` at ``precision`` to ``path`` (atomically); return its facts:
    path, format, precision, model_id, :func:`inspect_onnx`'s counts and I/O, versions, seconds."""
    _check_precision(precision)
    if calibration_samples < 1:
        raise OnnxExportError(f"calibration_samples must be >= 1, got {calibration_samples}")
    import onnx
    import torch

    t0 = time.perf_counter()
    path = Path(path)
    with tempfile.TemporaryDirectory(prefix="latbench-onnx-") as tmp, atomic_path(path) as dst:
        fp32 = Path(tmp) / "fp32.onnx" if precision == "int8" else Path(dst)
        _export_fp32(graph, fp32)
        if precision == "int8":
            _quantize(graph, fp32, Path(dst), calibration_samples)
    data = path.read_bytes()
    facts = inspect_onnx(onnx.load_model_from_string(data))
    for d, n in zip(facts["inputs"], graph.input_nodes):
        d["ir_name"] = n.name
    for d, r in zip(facts["outputs"], graph.outputs):
        d["ir_name"] = r
    converter = {"torch": torch.__version__, "onnx": onnx.__version__,
                 "api": "torch.onnx.export (TorchScript-based, dynamo=False)"}
    if precision == "int8":
        import onnxruntime

        converter["onnxruntime"] = onnxruntime.__version__
        converter["quantizer"] = ("onnxruntime.quantization.quantize_static: QDQ, per-channel int8 weights, "
                                  "uint8 activations, MinMax")
    return {"path": str(path), "format": FORMAT, "precision": precision, "model_id": graph.model_id, **facts,
            "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest(),
            "calibration_samples": calibration_samples if precision == "int8" else 0,
            "converter": converter, "seconds": round(time.perf_counter() - t0, 4)}


# ---------------------------------------------------------------- running one (tests, checks)
def run_onnx(model: str | Path, graph: Graph, inputs: dict[str, np.ndarray] | None = None,
             threads: int = 1) -> list[np.ndarray]:
    """Run an ONNX file exported from ``graph`` in ONNX Runtime (CPU); NCHW float in and out, one
    array per graph output. ``inputs`` maps IR input names to arrays (default: ``example_input``)."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.log_severity_level = 3
    sess = ort.InferenceSession(str(model), so, providers=["CPUExecutionProvider"])
    inputs = example_input(graph) if inputs is None else inputs
    feed = {i.name: np.asarray(inputs[n.name], dtype=np.float32) for i, n in zip(sess.get_inputs(), graph.input_nodes)}
    return sess.run(None, feed)
