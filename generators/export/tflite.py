"""IR -> TFLite (LiteRT) flatbuffers in fp32, fp16 (float16 weights) and int8 (full integer).

``export_tflite(graph, path, precision)`` writes the .tflite atomically and returns its facts
(op counts read back from the flatbuffer, tensors, parameters, I/O, converter version, time).

The IR is NCHW (PyTorch's layout); the exported model is a normal TFLite model, NHWC inside and
at its inputs and outputs. It is built as a plain TF graph of raw TF ops over constants (no
Keras, no variables, no tf.function) whose GraphDef goes to ``tf.compat.v1.lite.TFLiteConverter``
as it is, so the flatbuffer holds exactly the operators in ``TFLITE_FUSIONS``, and re-exporting
an IR gives byte-identical files in every precision. The function is PyTorch's up to float
rounding: padding, pooling divisors, batch-norm folding, flatten order and the activations are
lowered so that TFLite computes what ``torch.nn.functional`` computes
(tests/test_export_tflite.py). docs/exporters.md (*The TFLite exporter*) has every lowering rule
and why.
"""
from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path
from typing import Any

import numpy as np

from foundation.atomic import write_bytes
from ..ir import Graph, split_ref
from ..ops import op_spec
from .layout import TO_NCHW
from .names import unique_name
from .tflite_lowering import (  # noqa: F401  (TFLITE_FUSIONS, TFLiteExportError: this module's API)
    TFLITE_FUSIONS,
    TFLITE_LOWERINGS,
    Plan,
    TFLiteExportError,
    build_node,
    swaps_last_two,
    lowering,
    plan_graph,
    tf_shape,
)
from .weights import example_input, graph_weights

FORMAT = "tflite"
PRECISIONS = ("fp32", "fp16", "int8")
DEFAULT_CALIBRATION_SAMPLES = 3


# The per-operator lowering table lives in tflite_lowering.py (one registered entry per IR op).
_tf_shape = tf_shape  # an IR shape in the exported model's layout (tests compare I/O shapes)


# =====================================================================================
# Expected contents of the converted model, from the IR alone
# =====================================================================================
def merge_common_subexpressions(graph: Graph) -> Graph:
    """The graph as the converter sees it after common-subexpression elimination.

    The TFLite converter merges parameter-free operators that compute the same thing from
    the same inputs (NAS-Bench-201's ReLU-Conv-BN edges leaving one node share one RELU;
    two 3x3 average pools of one node become one; an n-ary add, lowered as a chain of binary
    adds, shares a partial sum that another node also computes). Operators with weights
    never merge: each has its own random weights.
    """
    merged = Graph(graph.name, graph.source, graph.meta)
    alias: dict[str, str] = {}
    seen: dict[str, str] = {}

    def ref(r: str) -> str:
        name, k = split_ref(r)
        return f"{alias[name]}:{k}" if r != name else alias[name]

    for node in graph.nodes.values():
        inputs = [ref(r) for r in node.inputs]
        if len(inputs) > 2 and lowering(node).chained:
            # Lowered as a left-to-right chain of binary ops (tflite_lowering); a partial sum that
            # another node computes too is merged like any other common subexpression.
            partial = inputs[0]
            for k, x in enumerate(inputs[1:-1]):
                key = json.dumps([node.op, node.attrs, [partial, x]], sort_keys=True)
                if key not in seen:
                    seen[key] = merged.add(node.op, [partial, x], name=f"{node.name}/partial_{k}", block=node.block)
                partial = seen[key]
            inputs = [partial, inputs[-1]]
        weightless = node.op != "input" and op_spec(node.op).params(node.attrs, graph.input_shapes(node), node.shapes) == 0
        key = json.dumps([node.op, node.attrs, inputs], sort_keys=True)
        if weightless and key in seen:
            alias[node.name] = seen[key]
            continue
        merged.add(node.op, inputs, name=node.name, block=node.block, **node.attrs)
        alias[node.name] = node.name
        if weightless:
            seen[key] = node.name
    return merged.set_outputs(*[ref(r) for r in graph.outputs])


def expected_op_counts(graph: Graph, precision: str = "fp32") -> dict[str, int]:
    """TFLite builtin operator counts the exported model must have (see TFLITE_FUSIONS)."""
    _check_precision(precision)
    graph = merge_common_subexpressions(graph)
    plans = plan_graph(graph)
    counts: dict[str, int] = {}
    for ops in _expected_ops(graph, plans, precision).values():
        for op in ops:
            counts[op] = counts.get(op, 0) + 1
    return dict(sorted(counts.items()))


def _compose(p1: list[int], p2: list[int]) -> list[int]:
    """The permutation of transposing by ``p1`` and then by ``p2``."""
    return [p1[j] for j in p2]


def _expected_ops(graph: Graph, plans: dict[str, Plan], precision: str) -> dict[str, list[str]]:
    """Per node, the TFLite ops it ends up as, after the converter's cross-node rewrites."""
    readers = graph.consumers()
    outputs = {split_ref(r)[0] for r in graph.outputs}
    ops = {name: list(pl.ops) for name, pl in plans.items()}
    trail = {name: pl.trail_perm for name, pl in plans.items()}
    lead = _shared_input_transposes(graph, plans, ops)
    # owner[n]: the node whose op list holds the op that produces n's output, when that output is
    # the result of a chain of nodes that are each their producer's only reader (nodes left
    # without ops pass their input through); None otherwise.
    owner: dict[str, str | None] = {}

    def exclusive(src: str, name: str) -> str | None:
        """The owner of ``src``'s output when ``name`` is its only reader (else None)."""
        if readers[src] != [name] or src in outputs:
            return None
        o = owner.get(src)
        return o if o is not None and ops[o] else None

    for node in graph.nodes.values():
        name = node.name
        src = split_ref(node.inputs[0])[0] if node.inputs else None
        if node.op == "matmul":
            # BATCH_MATMUL takes a TRANSPOSE of the last two axes as its adj_x / adj_y.
            for ref in node.inputs:
                o = exclusive(split_ref(ref)[0], name)
                if o is not None and ops[o][-1] == "TRANSPOSE" and swaps_last_two(trail[o]):
                    ops[o].pop()
                    trail[o] = None
        if ops[name] and src is not None:
            o = exclusive(src, name)
            if o is not None:
                # Adjacent TRANSPOSEs merge into one, or cancel when they compose to the identity.
                if ops[name][0] == "TRANSPOSE" and ops[o][-1] == "TRANSPOSE" and trail[o] and lead[name]:
                    ops[name].pop(0)
                    perm = _compose(trail[o], lead[name])
                    if perm == sorted(perm):
                        ops[o].pop()
                        trail[o] = None
                    else:
                        trail[o] = perm
                # Adjacent RESHAPEs merge into one.
                if ops[name] and ops[o] and ops[name][0] == "RESHAPE" and ops[o][-1] == "RESHAPE":
                    ops[name].pop(0)
        if ops[name]:
            owner[name] = name
        elif src is not None:
            o = exclusive(src, name)
            # nothing left: the node passes its input through (the chain stays exclusive)
            owner[name] = o
    if precision == "int8":
        _float_in_int8(graph, readers, outputs, ops)
        # The quantizer gives the inputs of a CONCATENATION the concat's scale. A tensor with
        # a fixed scale (the output of LOGISTIC 1/256, TANH 1/128 or SOFTMAX 1/256) that
        # reaches a concat input, directly or through scale-preserving ops, is requantized
        # once, by a QUANTIZE right after its producer. (Not predicted: a tensor read by
        # several concats may get one too, depending on the quantizer's propagation order.)
        source: dict[str, str | None] = {}
        requantized: set[str] = set()
        for node in graph.nodes.values():
            name = node.name
            scale = lowering(node).int8_scale(plans[name])
            if scale == "fixed":
                source[name] = name
            elif node.inputs and scale == "input":
                source[name] = source.get(split_ref(node.inputs[0])[0])
            if (node.op == "concat" and len(node.inputs) > 1) or node.op == "cls_token":
                for ref in node.inputs:
                    src = source.get(split_ref(ref)[0])
                    if src is not None and src not in requantized:
                        requantized.add(src)
                        ops[src].append("QUANTIZE")
    if precision == "fp16":
        n = len(_distinct_float_consts(plans))
        if n:
            ops["__fp16_dequantize__"] = ["DEQUANTIZE"] * n
    return ops


def _float_in_int8(graph: Graph, readers: dict[str, list[str]], outputs: set[str], ops: dict[str, list[str]]) -> None:
    """The DEQUANTIZE before and the QUANTIZE after the operators the int8 converter leaves in
    float (``int8_float``: no int8 kernel): none between two of them, a QUANTIZE after one whose
    result an int8 operator or the graph's output reads. (Not predicted: a CONCATENATION or a
    SPLIT_V reading such a result stays float too, its QUANTIZE after it.)"""
    def stays_float(name: str) -> bool:
        return lowering(graph.nodes[name]).int8_float

    for node in graph.nodes.values():
        if not stays_float(node.name):
            continue
        if not stays_float(split_ref(node.inputs[0])[0]):
            ops[node.name].insert(0, "DEQUANTIZE")
        if node.name in outputs or not all(stays_float(r) for r in readers[node.name]):
            ops[node.name].append("QUANTIZE")


def _shared_input_transposes(graph: Graph, plans: dict[str, Plan], ops: dict[str, list[str]]) -> dict[str, list[int] | None]:
    """Drop the layout TRANSPOSEs of a tensor that an earlier node already transposes the same way
    (the converter's common-subexpression elimination); per node, the permutation of its leading
    TRANSPOSE that is left (None: none)."""
    seen: set[tuple[str, tuple[int, ...]]] = set()
    lead: dict[str, list[int] | None] = {}
    for node in graph.nodes.values():
        pl = plans[node.name]
        lead[node.name] = pl.lead_perm
        perms = [TO_NCHW] if pl.transpose_in else pl.convert_in
        k = 0  # index in ops of the next input transpose
        for i, (ref, perm) in enumerate(zip(node.inputs, perms)):
            if perm is None:
                continue
            if (ref, tuple(perm)) in seen:
                ops[node.name].pop(k)
                lead[node.name] = None if i == 0 else lead[node.name]
            else:
                seen.add((ref, tuple(perm)))
                k += 1
    return lead


def _distinct_float_consts(plans: dict[str, Plan]) -> set:
    keys = set()
    for pl in plans.values():
        keys.update(pl.float_consts)
        if pl.zero_bias:  # equal constants are one tensor: zero biases of one length
            keys.add(("zero_bias", pl.zero_bias))
    return keys


def expected_params(graph: Graph, precision: str = "fp32") -> int:
    """Parameter elements the exported model must hold, from ``graph.params``.

    Rule (the same in every precision; counted by ``inspect_tflite``): the weights and
    biases of CONV_2D / DEPTHWISE_CONV_2D / FULLY_CONNECTED, PRELU's slopes and the
    non-scalar constant operands of MUL/ADD/SUB/CONCATENATION (a position embedding, a class
    token), each distinct constant tensor once
    (through fp16's DEQUANTIZE); scalar constants of element-wise ops (hsigmoid's 3 and
    1/6, PADV2's pad value), int32 shape/axis/padding tensors and quantization parameters
    are not parameters. Relative to ``graph.params`` (PyTorch's count):
    a batch norm folded into a conv/fc loses its 2*C (gamma, beta) and gives the layer a
    C-element bias if it had none (net -C or -2C); a standalone batch norm keeps 2*C (its
    MUL scale and ADD shift; 0 if C == 1, being scalars); hsigmoid's +3 folded into a
    bias-less conv/fc creates a C-element bias (+C); an avgpool correction map adds OH*OW;
    any other bias-less conv gets a zero bias of C elements from the converter (+C), in
    fp32/fp16 one tensor shared by all zero biases of that length (+C once per distinct C),
    in int8 one per conv. A bias-less fc stays without bias.
    """
    _check_precision(precision)
    plans = plan_graph(graph)
    total = graph.params
    for name, pl in plans.items():
        node = graph.nodes[name]
        if pl.folded_into:
            total -= 2 * node.shapes[0][1]
        total += pl.extra_params
    zero = [pl.zero_bias for pl in plans.values() if pl.zero_bias]
    total += sum(zero) if precision == "int8" else sum(set(zero))
    return total


# =====================================================================================
# Building the TF function
# =====================================================================================
_TF = None


def _tf():
    global _TF
    if _TF is None:
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        import tensorflow as tf

        _TF = tf
    return _TF


def scope_name(node: str) -> str:
    """The TF name scope of an IR node's operators: the node's name with what TF does not allow in
    a scope replaced by ``_``. The converter names every tensor after the TF operators it came
    from (``<scope>/<op>``, fused ones joined by ``;``), so a ``.tflite`` operator names the IR
    node it was built for (``kernels.xnnpack.file_nodes``)."""
    s = re.sub(r"[^A-Za-z0-9_.\-/]", "_", node).strip("/") or "node"
    s = re.sub(r"/+", "/", s)
    return s if re.match(r"[A-Za-z0-9.]", s) else "n" + s


def _safe_name(name: str, used: set[str]) -> str:
    s = re.sub(r"\W", "_", name) or "input"
    if s[0].isdigit():
        s = "t_" + s
    return unique_name(s, used)


def build_tf_graph(graph: Graph, weights: dict[str, dict[str, np.ndarray]] | None = None):
    """Return ``(tf.Graph, input tensors, output tensors)`` computing ``graph`` in NHWC.

    One float32 placeholder per IR input node, in the IR's order (NHWC for rank 4, named
    after the node), and one output tensor per graph output, in order. A plain TF1-style
    graph rather than a ``tf.function``: the converter takes its GraphDef as it is, and
    large constants are not copied back and forth between function definitions (which costs
    seconds on VGG-16's 138M parameters; the converter's own time still dominates there).
    """
    tf = _tf()
    graph.validate()
    plans = plan_graph(graph)
    weights = weights if weights is not None else graph_weights(graph)
    tf_graph = tf.Graph()
    used: set[str] = set()
    with tf_graph.as_default():
        scalars: dict[float, Any] = {}

        def scalar(v: float):
            if v not in scalars:
                scalars[v] = tf.constant(v, tf.float32)
            return scalars[v]

        inputs = [
            tf.compat.v1.placeholder(tf.float32, tf_shape(n.shape), name=_safe_name(n.name, used))
            for n in graph.input_nodes
        ]
        env: dict[str, list] = {n.name: [x] for n, x in zip(graph.input_nodes, inputs)}

        def get(ref: str):
            name, k = split_ref(ref)
            return env[name][k]

        for node in graph.nodes.values():
            if node.op != "input":
                with tf.name_scope(scope_name(node.name) + "/"):  # the trailing / keeps the scope as it is
                    env[node.name] = build_node(tf, graph, node, plans[node.name], [get(r) for r in node.inputs],
                                                weights, scalar)
        outputs = [tf.identity(get(r), name=f"output_{k}") for k, r in enumerate(graph.outputs)]
    return tf_graph, inputs, outputs


# =====================================================================================
# Conversion and inspection
# =====================================================================================
def _check_precision(precision: str) -> None:
    if precision not in PRECISIONS:
        raise TFLiteExportError(f"unknown precision {precision!r} (known: {', '.join(PRECISIONS)}) [format tflite]")


def representative_inputs(graph: Graph, samples: int = DEFAULT_CALIBRATION_SAMPLES) -> list[list[np.ndarray]]:
    """Calibration inputs for int8: ``example_input(graph, sample=k)``, k < samples, in NHWC."""
    out = []
    for k in range(samples):
        ex = example_input(graph, sample=k)
        out.append([to_tf_layout(ex[n.name]) for n in graph.input_nodes])
    return out


def to_tf_layout(x: np.ndarray) -> np.ndarray:
    """An IR (NCHW) array in the exported model's layout (NHWC for rank 4)."""
    return np.ascontiguousarray(x.transpose(0, 2, 3, 1)) if x.ndim == 4 else x


def from_tf_layout(x: np.ndarray) -> np.ndarray:
    """An exported model's array (NHWC for rank 4) in the IR's layout (NCHW)."""
    return np.ascontiguousarray(x.transpose(0, 3, 1, 2)) if x.ndim == 4 else x


def convert(graph: Graph, precision: str = "fp32", calibration_samples: int = DEFAULT_CALIBRATION_SAMPLES) -> bytes:
    """The .tflite flatbuffer of ``graph`` in ``precision`` (no file written)."""
    _check_precision(precision)
    tf = _tf()
    if graph.params * 4 > _GRAPHDEF_LIMIT:
        raise TFLiteExportError(
            f"graph {graph.name or graph.model_id!r}: {graph.params} parameters do not fit the "
            f"converter's 2 GB GraphDef limit in float32 [format tflite]"
        )
    tf_graph, inputs, outputs = build_tf_graph(graph)
    conv = tf.compat.v1.lite.TFLiteConverter(tf_graph.as_graph_def(), inputs, outputs)
    # The CONVERSION_METADATA entry costs a Python unpack/repack of the whole flatbuffer
    # (seconds for a large model); export_tflite records the converter version itself.
    conv.exclude_conversion_metadata = True
    if precision in ("fp32", "fp16"):
        # For float models the converter's last Python pass only de-duplicates identical
        # constant buffers; MLIR already shares equal constants, so here it is a no-op (same
        # bytes, checked) that costs a good share of an fp32 conversion. Not for int8: the same
        # hook does the quantization.
        conv._optimize_tflite_model = lambda model, *args, **kwargs: model
    if precision == "fp16":
        conv.optimizations = [tf.lite.Optimize.DEFAULT]
        conv.target_spec.supported_types = [tf.float16]
    elif precision == "int8":
        data = representative_inputs(graph, calibration_samples)
        conv.optimizations = [tf.lite.Optimize.DEFAULT]
        conv.representative_dataset = lambda: iter(data)
        conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
        conv.inference_input_type = tf.int8
        conv.inference_output_type = tf.int8
    return conv.convert()


_GRAPHDEF_LIMIT = 2**31 - 2**26  # protobuf's 2 GB, less room for the graph itself
_SCHEMA = None


def _schema():
    global _SCHEMA
    if _SCHEMA is None:
        from ai_edge_litert import schema_py_generated as s

        names = {v: k for k, v in vars(s.BuiltinOperator).items() if not k.startswith("_") and isinstance(v, int)}
        types = {v: k for k, v in vars(s.TensorType).items() if not k.startswith("_") and isinstance(v, int)}
        _SCHEMA = (s, names, types)
    return _SCHEMA


_WEIGHT_INPUTS = {"CONV_2D": (1, 2), "DEPTHWISE_CONV_2D": (1, 2), "FULLY_CONNECTED": (1, 2), "TRANSPOSE_CONV": (1, 3), "PRELU": (1,)}
_CONST_OPERAND_OPS = {"MUL", "ADD", "SUB", "CONCATENATION"}
_VALUE_TYPES = {"FLOAT32", "FLOAT16", "INT8", "UINT8", "INT16"}


def inspect_tflite(model: bytes | str | Path) -> dict[str, Any]:
    """Facts read from a .tflite flatbuffer: op counts, tensors, parameters, I/O."""
    buf = Path(model).read_bytes() if isinstance(model, (str, Path)) else bytes(model)
    s, names, types = _schema()
    m = s.Model.GetRootAs(buf, 0)
    codes = []
    for i in range(m.OperatorCodesLength()):
        c = m.OperatorCodes(i)
        code = max(c.BuiltinCode(), c.DeprecatedBuiltinCode())
        codes.append(names.get(code, f"BUILTIN_{code}") if code != s.BuiltinOperator.CUSTOM else f"CUSTOM:{c.CustomCode().decode()}")
    if m.SubgraphsLength() != 1:
        raise TFLiteExportError(f"expected one subgraph, found {m.SubgraphsLength()} [format tflite]")
    sg = m.Subgraphs(0)

    def is_const(t) -> bool:
        b = t.Buffer()
        if b <= 0 or b >= m.BuffersLength():
            return False
        bb = m.Buffers(b)
        return bb.DataLength() > 0 or bb.Size() > 0

    tensors = [sg.Tensors(i) for i in range(sg.TensorsLength())]
    const = [is_const(t) for t in tensors]
    numel = [int(np.prod(t.ShapeAsNumpy())) if t.ShapeLength() else 1 for t in tensors]
    ttype = [types.get(t.Type(), str(t.Type())) for t in tensors]
    ops = []
    dequant_src: dict[int, int] = {}
    for i in range(sg.OperatorsLength()):
        o = sg.Operators(i)
        name = codes[o.OpcodeIndex()]
        ins = [int(v) for v in o.InputsAsNumpy()] if o.InputsLength() else []
        outs = [int(v) for v in o.OutputsAsNumpy()] if o.OutputsLength() else []
        ops.append((name, ins, outs))
        if name == "DEQUANTIZE" and ins and const[ins[0]]:
            dequant_src[outs[0]] = ins[0]
    counts: dict[str, int] = {}
    params: set[int] = set()
    for name, ins, _ in ops:
        counts[name] = counts.get(name, 0) + 1
        for pos, t in enumerate(ins):
            if t < 0:
                continue
            t = dequant_src.get(t, t)
            if not const[t]:
                continue
            if pos in _WEIGHT_INPUTS.get(name, ()):
                params.add(t)
            elif name in _CONST_OPERAND_OPS and ttype[t] in _VALUE_TYPES and numel[t] > 1:
                params.add(t)

    def io(idx: int) -> dict[str, Any]:
        t = tensors[idx]
        q = t.Quantization()
        d = {"name": t.Name().decode(), "shape": [int(v) for v in t.ShapeAsNumpy()], "dtype": ttype[idx].lower()}
        if q is not None and q.ScaleLength() == 1:
            d["quantization"] = {"scale": float(q.Scale(0)), "zero_point": int(q.ZeroPoint(0))}
        return d

    meta = {}
    for i in range(m.MetadataLength()):
        md = m.Metadata(i)
        if md.Name() == b"min_runtime_version":
            raw = m.Buffers(md.Buffer()).DataAsNumpy()
            meta["min_runtime_version"] = bytes(raw).split(b"\0")[0].decode()
    return {
        "op_counts": dict(sorted(counts.items())),
        "ops": len(ops),
        "tensors": len(tensors),
        "params": int(sum(numel[t] for t in params)),
        "inputs": [io(int(i)) for i in sg.InputsAsNumpy()],
        "outputs": [io(int(i)) for i in sg.OutputsAsNumpy()],
        "schema_version": int(m.Version()),
        **meta,
        "size_bytes": len(buf),
    }


def export_tflite(
    graph: Graph,
    path: str | Path,
    precision: str = "fp32",
    calibration_samples: int = DEFAULT_CALIBRATION_SAMPLES,
) -> dict[str, Any]:
    """Convert ``graph`` to a .tflite file at ``path`` (written atomically); return its facts.

    Facts: path, format, precision, model_id, op counts by TFLite builtin operator, tensor
    count, parameter count (rule: ``expected_params``), input/output names, NHWC shapes and
    dtypes (in the IR's input/output order), converter version, seconds taken.
    """
    _check_precision(precision)
    tf = _tf()  # importing TensorFlow (seconds, once per process) is not part of the time
    t0 = time.perf_counter()
    blob = convert(graph, precision, calibration_samples)
    path = write_bytes(path, blob)
    facts = inspect_tflite(blob)
    for d, n in zip(facts["inputs"], graph.input_nodes):
        d["ir_name"] = n.name
    for d, r in zip(facts["outputs"], graph.outputs):
        d["ir_name"] = r
    return {
        "path": str(path),
        "format": FORMAT,
        "precision": precision,
        "model_id": graph.model_id,
        **facts,
        "calibration_samples": calibration_samples if precision == "int8" else 0,
        "converter": {"tensorflow": tf.__version__, "api": "tf.compat.v1.lite.TFLiteConverter (MLIR)"},
        "seconds": round(time.perf_counter() - t0, 4),
    }


# =====================================================================================
# Running an exported model (tests, sanity checks)
# =====================================================================================
def run_tflite(
    model: bytes | str | Path,
    graph: Graph,
    inputs: dict[str, np.ndarray] | None = None,
    num_threads: int = 1,
) -> list[np.ndarray]:
    """Run a model exported from ``graph`` with ai_edge_litert; NCHW float in, NCHW float out.

    ``inputs`` maps IR input names to NCHW arrays (default: ``example_input(graph)``).
    int8 models get their inputs quantized and their outputs dequantized with the tensors'
    own scale and zero point. Returns one array per graph output, in order.
    """
    from ai_edge_litert.interpreter import Interpreter

    kw = {"model_path": str(model)} if isinstance(model, (str, Path)) else {"model_content": bytes(model)}
    return run_interpreter(Interpreter(num_threads=num_threads, **kw), graph, inputs)


def run_interpreter(it: Any, graph: Graph, inputs: dict[str, np.ndarray] | None = None) -> list[np.ndarray]:
    """:func:`run_tflite` on a LiteRT ``Interpreter`` already built from the file."""
    if inputs is None:
        inputs = example_input(graph)
    it.allocate_tensors()
    for d, n in zip(it.get_input_details(), graph.input_nodes):
        x = to_tf_layout(np.asarray(inputs[n.name], dtype=np.float32))
        if d["dtype"] != np.float32:
            scale, zp = d["quantization"]
            info = np.iinfo(d["dtype"])
            x = np.clip(np.round(x / scale) + zp, info.min, info.max).astype(d["dtype"])
        it.set_tensor(d["index"], x)
    it.invoke()
    outs = []
    for d in it.get_output_details():
        y = it.get_tensor(d["index"])
        if d["dtype"] != np.float32:
            scale, zp = d["quantization"]
            y = (y.astype(np.float32) - zp) * scale
        outs.append(from_tf_layout(np.array(y)))
    return outs
