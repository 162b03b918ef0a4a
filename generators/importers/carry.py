"""The weights of an imported file carried over to its IR graph, to check that the import computes
what the file computes.

The IR holds no weights (architecture only), so an import is checked by function this way: the
file's constants are read through the importer's *origins* (IR node -> indices of the file's
nodes or operators it was made of, ``import_onnx_with_origins`` / ``import_tflite_with_origins``)
into per-node weight dicts in PyTorch's layout (``generators.export.weights``), the graph becomes
a PyTorch module (``export.torch_module.to_module``) with those weights, and its output is
compared with the file's own runtime's (ONNX Runtime, LiteRT) on the same input.

- :func:`onnx_weights`, :func:`tflite_weights`: the weight dicts;
- :func:`run_ir`: the graph as a module with the weights, on an NCHW input;
- :func:`run_onnx`: the ONNX file in ONNX Runtime (a TFLite file runs through
  ``generators.export.tflite.run_tflite``, which takes the imported graph for the layouts);
- :func:`relative_error`: max |difference| over max |reference|.

Used by the importer tests and the conformance suite (:mod:`.conformance`).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from generators.ir import Graph, split_ref

Weights = dict[str, dict[str, np.ndarray]]


def _f32(w: dict[str, Any]) -> dict[str, np.ndarray]:
    return {k: np.ascontiguousarray(v, dtype=np.float32) for k, v in w.items()}


# ---------------------------------------------------------------- ONNX
def onnx_consts(proto: Any) -> dict[str, np.ndarray]:
    """Initializers, Constant nodes and Identity nodes of constants (the exporter shares equal
    constants through them), by tensor name."""
    from onnx import numpy_helper

    consts = {t.name: numpy_helper.to_array(t) for t in proto.graph.initializer}
    for n in proto.graph.node:
        if n.op_type == "Constant" and n.attribute and n.attribute[0].name == "value":
            consts[n.output[0]] = numpy_helper.to_array(n.attribute[0].t)
        elif n.op_type == "Identity" and n.input[0] in consts:
            consts[n.output[0]] = consts[n.input[0]]
    return consts


def onnx_value(proto: Any, tensor: str) -> np.ndarray:
    """The value of a tensor computed from constants only (a class token expanded to the batch),
    read by running the file with the tensor as an extra output."""
    import onnx

    consts = onnx_consts(proto)
    if tensor in consts:
        return consts[tensor]
    p = onnx.ModelProto()
    p.CopyFrom(proto)
    p.graph.output.append(onnx.helper.make_empty_tensor_value_info(tensor))
    import onnxruntime as ort

    sess = ort.InferenceSession(p.SerializeToString(), providers=["CPUExecutionProvider"])
    feed = {i.name: np.zeros([d if isinstance(d, int) else 1 for d in i.shape], np.float32) for i in sess.get_inputs()}
    return sess.run([tensor], feed)[0]


def onnx_constant_operands(proto: Any, nodes: list[Any]) -> dict[str, np.ndarray]:
    """The operands of ``nodes`` that are constant but computed (a zero state made by
    ConstantOfShape of a Shape, a layer applied to it): the file run twice on different random
    inputs with those tensors as extra outputs; an operand whose value does not change is a
    constant, by name."""
    import onnx
    import onnxruntime as ort

    consts = onnx_consts(proto)
    names = sorted({i for n in nodes for i in n.input if i and i not in consts})
    if not names:
        return {}
    p = onnx.ModelProto()
    p.CopyFrom(proto)
    known = {o.name for o in p.graph.output}
    p.graph.output.extend(onnx.helper.make_empty_tensor_value_info(t) for t in names if t not in known)
    sess = ort.InferenceSession(p.SerializeToString(), providers=["CPUExecutionProvider"])
    runs = []
    for seed in (1, 2):
        rng = np.random.default_rng(seed)
        feed = {i.name: rng.standard_normal([d if isinstance(d, int) else 1 for d in i.shape]).astype(np.float32)
                for i in sess.get_inputs()}
        runs.append(dict(zip([o.name for o in sess.get_outputs()], sess.run(None, feed))))
    return {t: runs[0][t] for t in names if np.array_equal(runs[0][t], runs[1][t])}


def _affine(ops: list[tuple[str, np.ndarray]], channels: int) -> dict[str, np.ndarray]:
    """A batch norm's weights (eps 0, mean 0, variance 1) from the per-channel constant gains and
    shifts applied in order (MUL/Mul, DIV/Div, ADD/Add, SUB/Sub)."""
    w, b = np.ones(channels), np.zeros(channels)
    for op, k in ops:
        k = np.broadcast_to(k.reshape(-1), (channels,)).astype(np.float64)
        if op in ("MUL", "Mul"):
            w, b = w * k, b * k
        elif op in ("DIV", "Div"):
            w, b = w / k, b / k
        elif op in ("ADD", "Add"):
            b = b + k
        elif op in ("SUB", "Sub"):
            b = b - k
        else:
            raise ValueError(f"a batch norm made of {op}")
    return {"weight": w, "bias": b, "running_mean": np.zeros(channels), "running_var": np.ones(channels)}


def onnx_weights(proto: Any, g: Graph, origins: dict) -> Weights:
    """The IR nodes' weights (PyTorch layout) from the ONNX file, found through ``origins``."""
    import onnx

    consts, nodes = onnx_consts(proto), proto.graph.node

    def const_input(node: Any) -> np.ndarray:
        if not any(i in consts for i in node.input):  # a constant computed in the file
            consts.update(onnx_constant_operands(proto, [node]))
        return next(consts[i] for i in node.input if i in consts)

    out: Weights = {}
    tokens_made: dict[int, int] = {}  # Concat -> class tokens made of it so far (the last constant first)
    for name, n in g.nodes.items():
        w: dict[str, Any] = {}
        if n.op in ("conv2d", "fc", "layernorm", "instancenorm", "batchnorm", "prelu", "pos_embed", "cls_token"):
            src = nodes[origins[name][0]]
        if n.op == "conv2d":
            # a 3-d convolution along depth is imported as a kd x 1 window (onnx._conv_along_depth)
            w["weight"] = consts[src.input[1]].reshape(n.attrs["out_channels"], -1, *n.attrs["kernel"])
            if n.attrs["bias"]:
                w["bias"] = consts[src.input[2]]
        elif n.op == "fc" and src.op_type == "Gemm":
            attrs = {a.name: onnx.helper.get_attribute_value(a) for a in src.attribute}
            m = consts[src.input[1]] * attrs.get("alpha", 1.0)
            w["weight"] = m if attrs.get("transB", 0) else m.T
            if n.attrs["bias"]:
                w["bias"] = consts[src.input[2]] * attrs.get("beta", 1.0)
        elif n.op == "fc":  # MatMul (+ Add)
            w["weight"] = consts[src.input[1]].T
            if n.attrs["bias"]:
                w["bias"] = const_input(nodes[origins[name][1]]).reshape(-1)
        elif n.op == "batchnorm" and src.op_type == "BatchNormalization":
            w.update(zip(("weight", "bias", "running_mean", "running_var"), (consts[i] for i in src.input[1:5])))
        elif n.op == "batchnorm":  # per-channel constant gains and shifts
            srcs = [nodes[k] for k in sorted(origins[name])]
            w = _affine([(s.op_type, const_input(s)) for s in srcs], g.shape(n.inputs[0])[1])
        elif n.op == "prelu":
            w["weight"] = consts[src.input[1]].reshape(-1)
        elif n.op == "layernorm" and src.op_type == "LayerNormalization":
            w["weight"] = consts[src.input[1]]
            w["bias"] = consts[src.input[2]] if len(src.input) > 2 and src.input[2] else np.zeros_like(w["weight"])
        elif n.op == "instancenorm":
            w["weight"], w["bias"] = consts[src.input[1]], consts[src.input[2]]
        elif n.op == "layernorm":  # decomposed: the gain's Mul, the shift's Add
            w["weight"], w["bias"] = (const_input(nodes[k]).reshape(-1) for k in origins[name])
        elif n.op == "pos_embed":
            w["weight"] = const_input(src).reshape(n.shape)
        elif n.op == "cls_token":
            k = tokens_made[origins[name][0]] = tokens_made.get(origins[name][0], 0) + 1
            w["weight"] = onnx_value(proto, src.input[len(src.input) - 1 - k])
        out[name] = _f32(w)
    return out


def run_onnx(blob: bytes, x: np.ndarray) -> list[np.ndarray]:
    """The ONNX file's outputs on the NCHW input ``x`` (ONNX Runtime, CPU)."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.log_severity_level = 3
    sess = ort.InferenceSession(blob, opts, providers=["CPUExecutionProvider"])
    return list(sess.run(None, {sess.get_inputs()[0].name: x}))


# ---------------------------------------------------------------- TFLite
class _Flatbuffer:
    """A TFLite file's main subgraph: its operators (name, inputs, outputs) and float constants,
    stored or computed from stored ones alone (the importer evaluates those: DIA-ResNet's LSTM
    step on its zero state, which litert-torch leaves in the file); a computed one is read from
    LiteRT's own run of the file."""

    def __init__(self, blob: bytes):
        from ai_edge_litert import schema_py_generated as s

        self.blob, self._run = blob, None
        self.m = s.Model.GetRootAs(blob, 0)
        self.sg = self.m.Subgraphs(0)
        names = {v: k for k, v in vars(s.BuiltinOperator).items() if not k.startswith("_")}
        self.ops = []
        for i in range(self.sg.OperatorsLength()):
            o = self.sg.Operators(i)
            c = self.m.OperatorCodes(o.OpcodeIndex())
            self.ops.append((names[max(c.BuiltinCode(), c.DeprecatedBuiltinCode())],
                             [int(j) for j in o.InputsAsNumpy()], [int(j) for j in o.OutputsAsNumpy()]))
        self.float32 = s.TensorType.FLOAT32
        self.computed = set()  # tensors an operator computes from constants alone
        for _, ins, outs in self.ops:
            if all(j < 0 or self._stored(j) or j in self.computed for j in ins):
                self.computed.update(outs)

    def _stored(self, j: int) -> bool:
        t = self.sg.Tensors(j)
        return t.Buffer() > 0 and self.m.Buffers(t.Buffer()).DataLength() > 0

    def const(self, j: int) -> np.ndarray | None:
        if j < 0:
            return None
        t = self.sg.Tensors(j)
        if j in self.computed and t.Type() == self.float32:
            return self._computed(j)
        b = self.m.Buffers(t.Buffer())
        if t.Buffer() <= 0 or b.DataLength() == 0 or t.Type() != self.float32:
            return None
        return np.frombuffer(b.DataAsNumpy().tobytes(), np.float32).reshape([int(d) for d in t.ShapeAsNumpy()])

    def _computed(self, j: int) -> np.ndarray:
        """Tensor ``j`` as LiteRT computes it (on zero inputs: it reads none of them)."""
        if self._run is None:
            import warnings

            from ai_edge_litert.interpreter import Interpreter

            with warnings.catch_warnings():  # "for debugging purposes only": keeping intermediates is the point
                warnings.simplefilter("ignore", UserWarning)
                it = Interpreter(model_content=self.blob, experimental_preserve_all_tensors=True)
            it.allocate_tensors()
            for d in it.get_input_details():
                it.set_tensor(d["index"], np.zeros(d["shape"], d["dtype"]))
            it.invoke()
            self._run = it
        return np.array(self._run.get_tensor(j))

    def shape(self, j: int) -> list[int]:
        return [int(d) for d in self.sg.Tensors(j).ShapeAsNumpy()]

    def op_consts(self, k: int) -> list[np.ndarray]:
        return [v for v in (self.const(j) for j in self.ops[k][1]) if v is not None]


def tflite_weights(blob: bytes, g: Graph, origins: dict) -> Weights:
    """The IR nodes' weights (PyTorch layout) from the TFLite file's constants, found through
    ``origins``."""
    fb = _Flatbuffer(blob)
    out: Weights = {}
    for name, n in g.nodes.items():
        w: dict[str, Any] = {}
        if n.op == "conv2d":
            op, ins, _ = fb.ops[origins[name][0]]
            f = fb.const(ins[1])
            if op == "DEPTHWISE_CONV_2D":  # [1, kh, kw, out]
                w["weight"] = f.transpose(3, 0, 1, 2)
            elif f.ndim == 2:  # a FULLY_CONNECTED over an image's channels: a 1x1 convolution
                w["weight"] = f[:, :, None, None]
            elif op == "CONV_3D":  # [kd, 1, 1, 1, out] along depth: a kd x 1 window (tflite._conv3d)
                w["weight"] = f.reshape(f.shape[0], f.shape[-1]).T[:, None, :, None]
            else:  # CONV_2D [out, kh, kw, in]
                w["weight"] = f.transpose(0, 3, 1, 2)
            if n.attrs["bias"]:
                w["bias"] = fb.const(ins[2])
        elif n.op == "fc":
            _, ins, _ = fb.ops[origins[name][0]]
            wt = fb.const(ins[1])
            flat = g.nodes[split_ref(n.inputs[0])[0]]
            if flat.op == "flatten" and flat.name in origins:
                c, h, wd = (g.shape(flat.inputs[0]) + [1, 1])[1:4]
                read = fb.ops[origins[flat.name][0]][1][0]  # the tensor the RESHAPE (or FC) flattened
                if c > 1 and h * wd > 1 and fb.shape(read) == [1, h, wd, c]:  # NHWC order: permute back
                    perm = np.arange(c * h * wd).reshape(c, h, wd).transpose(1, 2, 0).ravel()
                    wt = wt[:, np.argsort(perm)]
            w["weight"] = wt
            if n.attrs["bias"]:
                w["bias"] = fb.const(ins[2])
        elif n.op == "batchnorm":
            w = _affine([(fb.ops[k][0], fb.op_consts(k)[0]) for k in sorted(origins[name])], g.shape(n.inputs[0])[1])
        elif n.op == "prelu":
            w["weight"] = fb.const(fb.ops[origins[name][0]][1][1]).reshape(-1)
        elif n.op in ("pos_embed", "cls_token"):  # the ADD's / CONCATENATION's constant
            w["weight"] = fb.op_consts(origins[name][0])[0].reshape(n.shape if n.op == "pos_embed" else (1, 1, -1))
        elif n.op == "instancenorm":
            # the gain (MUL) and shift (ADD) per channel after the RSQRT, unless the converter
            # dropped a gain of ones and a shift of zeros
            ch = g.shape(n.inputs[0])[1]
            rsqrt = max(k for k in origins[name] if fb.ops[k][0] == "RSQRT")
            for k in origins[name]:
                consts = fb.op_consts(k)
                if k > rsqrt and consts and fb.ops[k][0] in ("MUL", "ADD"):
                    w["weight" if fb.ops[k][0] == "MUL" else "bias"] = consts[0].reshape(-1)
            w.setdefault("weight", np.ones(ch, np.float32))
            w.setdefault("bias", np.zeros(ch, np.float32))
        elif n.op == "layernorm":
            gain, *shift = origins[name][:-1]
            w["weight"] = fb.op_consts(gain)[0].reshape(-1)
            w["bias"] = fb.op_consts(shift[0])[0].reshape(-1) if shift else np.zeros_like(w["weight"])
        out[name] = _f32(w)
    return out


# ---------------------------------------------------------------- the IR
def load_weights(module: Any, weights: Weights) -> Any:
    """``module`` (``to_module``'s) with the weights of each IR node replaced by ``weights``."""
    import torch

    for name, w in weights.items():
        if not w:
            continue
        sub = getattr(module, module.latbench_node_modules[name])
        state = sub.state_dict()
        for k, v in w.items():
            if tuple(state[k].shape) != v.shape:
                raise ValueError(f"node {name!r}: {k} of shape {v.shape}, the module holds {tuple(state[k].shape)}")
            state[k] = torch.from_numpy(np.array(v, dtype=np.float32))  # a copy: file buffers are read-only
        sub.load_state_dict(state)
    return module


def run_ir(g: Graph, weights: Weights, x: np.ndarray) -> list[np.ndarray]:
    """``g``'s outputs on the NCHW input ``x``, as a PyTorch module with ``weights``."""
    import torch

    from generators.export.torch_module import to_module

    with torch.no_grad():
        y = load_weights(to_module(g), weights)(torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32)))
    return [t.numpy() for t in (y if isinstance(y, (list, tuple)) else [y])]


def relative_error(got: np.ndarray, ref: np.ndarray) -> float:
    """max |got - ref| over max |ref| (inf when the shapes differ)."""
    got, ref = np.asarray(got), np.asarray(ref)
    if got.size != ref.size:
        return float("inf")
    return float(np.abs(got.reshape(ref.shape) - ref).max()) / max(float(np.abs(ref).max()), 1e-12)


__all__ = ["Weights", "load_weights", "onnx_constant_operands", "onnx_consts", "onnx_value", "onnx_weights", "relative_error", "run_ir",
           "run_onnx", "tflite_weights"]
