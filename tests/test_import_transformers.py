"""The ONNX and TFLite importers on transformers: ViTs as PyTorch's ONNX exporter and TFLite's
converter write them, built here from the installed frameworks (no downloads).

For each model the imported IR must count what the source file holds (parameters: the sizes
of the file's weight tensors; MACs: its convolutions, matrix products and fully connected
layers, from the file's own tensor shapes) and compute the same function: the IR turned into a
PyTorch module (``export.torch_module.to_module``) with the weights carried over from the file
gives, on the same input, what the file gives in its own runtime (ONNX Runtime,
``tf.lite.Interpreter``). Unsupported constructs are one-line errors naming the node.
"""
from __future__ import annotations

import io
import math
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")
onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

import torch.nn as nn  # noqa: E402

from generators.importers import UnsupportedModelError, import_onnx  # noqa: E402
from generators.importers import carry  # noqa: E402
from generators.importers.carry import onnx_consts, onnx_weights, tflite_weights  # noqa: E402
from generators.importers.onnx import import_onnx_with_origins  # noqa: E402
from generators.ir import Graph  # noqa: E402

RTOL = 1e-4  # fp32 against fp32: max |diff| <= RTOL * max |reference|


# ------------------------------------------------------------------ helpers
def _randomized(m: nn.Module, seed: int) -> nn.Module:
    """``m`` in eval mode with every parameter drawn at random, norm gains near 1 (no two
    tensors equal: the exporter would share equal initializers)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in m.named_parameters():
            r = torch.randn(p.shape, generator=g)
            if p.ndim == 1 and "norm" in name and name.endswith("weight"):
                p.copy_(1 + 0.1 * r)
            else:
                p.copy_(r * (0.05 if p.ndim == 1 else 1 / math.sqrt(math.prod(p.shape[1:]))))
    return m.eval()


def run_ir(g: Graph, weights: dict, x: np.ndarray) -> np.ndarray:
    return carry.run_ir(g, weights, x)[0]


def close(got: np.ndarray, ref: np.ndarray, what: str) -> float:
    assert got.shape == ref.shape, f"{what}: shape {got.shape} != {ref.shape}"
    err = float(np.abs(got - ref).max())
    assert err <= RTOL * max(float(np.abs(ref).max()), 1e-6), f"{what}: max |diff| {err:.3g}"
    return err


# ------------------------------------------------------------------ ONNX
def export_onnx(m: nn.Module, shape: list[int], opset: int | None = None) -> bytes:
    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the legacy exporter's deprecation notice
        torch.onnx.export(m, (torch.zeros(shape),), buf, dynamo=False, input_names=["x"],
                          dynamic_axes={"x": {0: "N"}}, **({} if opset is None else {"opset_version": opset}))
    return buf.getvalue()


def onnx_counts(blob: bytes, x: np.ndarray) -> tuple[int, int]:
    """(parameters, MACs) of an ONNX file: the elements of the float weight tensors its nodes
    read, and the multiply-accumulates of its Conv, Gemm and MatMul nodes, with the shapes
    their operands have when ONNX Runtime runs the file on ``x``."""
    proto = onnx.load_model_from_string(blob)
    weights = {i for n in proto.graph.node for i in n.input}
    params = sum(math.prod(t.dims) for t in proto.graph.initializer
                 if t.name in weights and t.data_type == onnx.TensorProto.FLOAT and math.prod(t.dims) > 1)
    consts = onnx_consts(proto)
    seen = {o.name for o in proto.graph.output}
    wanted = [t for n in proto.graph.node if n.op_type in ("Conv", "Gemm", "MatMul") for t in (n.input[0], n.output[0])
              if t not in consts]
    for t in dict.fromkeys(wanted):
        if t not in seen and t != "x":
            proto.graph.output.append(onnx.helper.make_empty_tensor_value_info(t))
    sess = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    shapes = {k: v.shape for k, v in zip(names, sess.run(None, {"x": x}))} | {"x": x.shape}
    shapes |= {k: v.shape for k, v in consts.items()}
    macs = 0
    for n in proto.graph.node:
        if n.op_type == "Conv":
            macs += math.prod(shapes[n.output[0]]) * math.prod(shapes[n.input[1]][1:])
        elif n.op_type in ("MatMul", "Gemm"):
            a = shapes[n.input[0]]
            transa = any(at.name == "transA" and at.i for at in n.attribute)
            macs += math.prod(shapes[n.output[0]]) * (a[-2] if transa else a[-1])
    return params, macs


def check_onnx(m: nn.Module, shape: list[int], name: str, opset: int | None = None, seed: int = 0) -> Graph:
    blob = export_onnx(m, shape, opset)
    g, origins = import_onnx_with_origins(blob, name=name)
    x = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    params, macs = onnx_counts(blob, x)
    assert (g.params, g.flops) == (params, macs), f"{name}: IR (params, MACs) {(g.params, g.flops)} != file {(params, macs)}"
    assert g.params == sum(p.numel() for p in m.parameters())
    ref = ort.InferenceSession(blob, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    got = run_ir(g, onnx_weights(onnx.load_model_from_string(blob), g, origins), x)
    close(got, ref, f"{name}: the imported IR vs ONNX Runtime")
    return g


class ConvNeXtish(nn.Module):
    """A small ConvNeXt as timm and torchvision write it: a patchify stem with a channel layer
    norm (permute, LayerNorm, permute back), one block (7x7 depthwise conv, permute to NHWC, layer
    norm, Linear 4C, GELU, Linear C, a learned layer scale, permute back, residual), the pooled
    features' layer norm, head."""

    def __init__(self, dim=16):
        super().__init__()
        self.stem = nn.Conv2d(3, dim, 4, 4)
        self.stem_norm = nn.LayerNorm(dim, eps=1e-6)
        self.dw = nn.Conv2d(dim, dim, 7, padding=3, groups=dim)
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.pw1, self.act, self.pw2 = nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim)
        self.gamma = nn.Parameter(torch.ones(dim))
        self.head_norm, self.head = nn.LayerNorm(dim), nn.Linear(dim, 10)

    def forward(self, x):
        x = self.stem_norm(self.stem(x).permute(0, 2, 3, 1)).permute(0, 3, 1, 2)
        y = self.gamma * self.pw2(self.act(self.pw1(self.norm(self.dw(x).permute(0, 2, 3, 1)))))
        x = x + y.permute(0, 3, 1, 2)
        return self.head(self.head_norm(x.mean([-2, -1])))


def test_convnext_onnx_layer_scale_folds_into_its_linear_layer():
    """ConvNeXt through PyTorch's ONNX exporter: channel layer norms between permutes, Linear
    layers on the NHWC map, and the layer scale (a Mul by a per-feature constant after the
    second Linear), which the IR folds into that layer's weights as TFLite's converter does."""
    m = _randomized(ConvNeXtish(), 5)
    blob = export_onnx(m, [1, 3, 32, 32])
    g, origins = import_onnx_with_origins(blob, name="convnext")
    x = np.random.default_rng(5).standard_normal((1, 3, 32, 32)).astype(np.float32)
    params, macs = onnx_counts(blob, x)
    assert (g.params, g.flops) == (params - 16, macs) and g.params == sum(p.numel() for p in m.parameters()) - 16
    counts = g.op_counts()
    assert (counts["layernorm"], counts["fc"], counts["gelu"], counts.get("mul", 0)) == (3, 3, 1, 0)
    weights = onnx_weights(onnx.load_model_from_string(blob), g, origins)
    gamma = m.gamma.detach().numpy()
    (pw2,) = [n for n, w in weights.items() if g.nodes[n].op == "fc" and w["weight"].shape == (16, 64)]
    weights[pw2] = {"weight": weights[pw2]["weight"] * gamma[:, None], "bias": weights[pw2]["bias"] * gamma}
    ref = ort.InferenceSession(blob, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    close(run_ir(g, weights, x), ref, "convnext: the imported IR vs ONNX Runtime")


class EncoderViT(nn.Module):
    """A ViT on ``torch.nn.TransformerEncoder``: patch conv, pre-norm encoder layers (GELU MLP),
    layer norm, mean of the tokens (no class token), linear head."""

    def __init__(self, dim=32, heads=2, depth=2, patch=8, batch_first=True, act="gelu"):
        super().__init__()
        self.batch_first = batch_first
        self.patch = nn.Conv2d(3, dim, patch, patch)
        layer = nn.TransformerEncoderLayer(dim, heads, 2 * dim, dropout=0.0, activation=act, batch_first=batch_first,
                                           norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, depth, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, 10)

    def forward(self, x):
        x = self.patch(x).flatten(2).transpose(1, 2)
        if not self.batch_first:
            x = x.transpose(0, 1)
        x = self.encoder(x)
        if not self.batch_first:
            x = x.transpose(0, 1)
        return self.head(self.norm(x).mean(1))


class Block(nn.Module):
    def __init__(self, dim, heads, approximate):
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(dim, eps=1e-6), nn.LayerNorm(dim, eps=1e-6)
        self.attn = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(dim, 2 * dim), nn.GELU(approximate=approximate), nn.Linear(2 * dim, dim))

    def forward(self, x):
        y = self.norm1(x)
        x = x + self.attn(y, y, y, need_weights=False)[0]
        return x + self.mlp(self.norm2(x))


class SmallViT(nn.Module):
    """A small ViT written with torch.nn: patch conv, ``nn.MultiheadAttention`` blocks, mean
    pooling of the tokens (no class token), head."""

    def __init__(self, dim=48, heads=3, depth=2, patch=8, approximate="none"):
        super().__init__()
        self.patch = nn.Conv2d(3, dim, patch, patch)
        self.blocks = nn.Sequential(*[Block(dim, heads, approximate) for _ in range(depth)])
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.head = nn.Linear(dim, 10)

    def forward(self, x):
        x = self.patch(x).flatten(2).transpose(1, 2)
        return self.head(self.norm(self.blocks(x)).mean(1))


@pytest.mark.parametrize("batch_first", [True, False])
def test_transformer_encoder_vit(batch_first):
    g = check_onnx(_randomized(EncoderViT(batch_first=batch_first), 0), [1, 3, 32, 32], "encoder-vit")
    counts = g.op_counts()
    assert (counts["layernorm"], counts["gelu"], counts["matmul"], counts["softmax"], counts["mean"]) == (5, 2, 4, 2, 1)
    assert counts["fc"] == 9  # per layer: in-projection, out-projection, two MLP layers; the head


@pytest.mark.parametrize("opset", [20, 17, 14])
def test_small_vit_every_opset(opset):
    """opset 20 writes LayerNormalization and Gelu, 17 a decomposed GELU (Erf), 14 also a
    decomposed layer norm (ReduceMean, Sub, Pow, Sqrt, Div, Mul, Add): the same IR each time."""
    g = check_onnx(_randomized(SmallViT(), 1), [1, 3, 32, 32], f"small-vit-{opset}", opset)
    counts = g.op_counts()
    assert (counts["layernorm"], counts["gelu"], counts["matmul"], counts["softmax"]) == (5, 2, 4, 2)
    assert all(n.attrs["approximate"] == "none" for n in g.nodes.values() if n.op == "gelu")
    assert {n.attrs["eps"] for n in g.nodes.values() if n.op == "layernorm"} == {1e-6}


@pytest.mark.parametrize("opset", [20, 17])
def test_tanh_gelu(opset):
    g = check_onnx(_randomized(SmallViT(depth=1, approximate="tanh"), 2), [1, 3, 32, 32], "tanh-vit", opset)
    assert [n.attrs["approximate"] for n in g.nodes.values() if n.op == "gelu"] == ["tanh"]


# ------------------------------------------------------------------ TFLite
def keras_vit(batch=1, dim=32, heads=2, depth=2, patch=8, size=32, approximate=False):
    """A small Keras ViT: Conv2D patches, Reshape to tokens, pre-norm blocks of
    LayerNormalization, MultiHeadAttention and a GELU Dense MLP, mean of the tokens, head."""
    import keras
    from keras import layers

    inp = keras.Input((size, size, 3), batch_size=batch)
    x = layers.Reshape(((size // patch) ** 2, dim))(layers.Conv2D(dim, patch, strides=patch)(inp))
    for _ in range(depth):
        y = layers.LayerNormalization(epsilon=1e-6)(x)
        x = layers.Add()([x, layers.MultiHeadAttention(heads, dim // heads)(y, y)])
        y = layers.Dense(2 * dim, activation=lambda t: keras.activations.gelu(t, approximate=approximate))(
            layers.LayerNormalization(epsilon=1e-6)(x))
        x = layers.Add()([x, layers.Dense(dim)(y)])
    x = layers.GlobalAveragePooling1D()(layers.LayerNormalization(epsilon=1e-6)(x))
    m = keras.Model(inp, layers.Dense(10)(x))
    return randomized_keras(m, 3)


def randomized_keras(m, seed: int):
    """Keras model ``m`` with every weight drawn at random (vectors at scale 0.3, matrices and
    filters scaled by their fan-in), so no bias is all zero and the converter drops none."""
    rng = np.random.default_rng(seed)
    m.set_weights([(rng.standard_normal(w.shape) * (0.3 if w.ndim < 2 else 1 / math.sqrt(math.prod(w.shape[:-1]))))
                   .astype(np.float32) for w in m.get_weights()])
    return m


def tflite_output(blob: bytes, x: np.ndarray) -> np.ndarray:
    """What the TFLite file computes for the NCHW input ``x`` (fed as NHWC), in tf.lite."""
    import tensorflow as tf

    interp = tf.lite.Interpreter(model_content=blob)
    interp.allocate_tensors()
    interp.set_tensor(interp.get_input_details()[0]["index"], x.transpose(0, 2, 3, 1))
    interp.invoke()
    return interp.get_tensor(interp.get_output_details()[0]["index"])


def tflite_file(m) -> bytes:
    import tensorflow as tf

    return tf.lite.TFLiteConverter.from_keras_model(m).convert()


def tflite_counts(blob: bytes) -> tuple[int, int]:
    """(parameters, MACs) of a TFLite file: the elements of its float constant tensors of more
    than one element, and the multiply-accumulates of CONV_2D, DEPTHWISE_CONV_2D,
    FULLY_CONNECTED and BATCH_MATMUL from its tensor shapes."""
    from ai_edge_litert import schema_py_generated as s

    m = s.Model.GetRootAs(blob, 0)
    sg = m.Subgraphs(0)
    names = {v: k for k, v in vars(s.BuiltinOperator).items() if not k.startswith("_")}
    shape = lambda j: [int(d) for d in sg.Tensors(j).ShapeAsNumpy()]  # noqa: E731
    params = sum(math.prod(shape(j)) for j in range(sg.TensorsLength())
                 if m.Buffers(sg.Tensors(j).Buffer()).DataLength() and sg.Tensors(j).Type() == s.TensorType.FLOAT32
                 and math.prod(shape(j)) > 1)
    macs = 0
    for k in range(sg.OperatorsLength()):
        op = sg.Operators(k)
        oc = m.OperatorCodes(op.OpcodeIndex())
        name = names[max(oc.BuiltinCode(), oc.DeprecatedBuiltinCode())]
        ins, out = [int(j) for j in op.InputsAsNumpy()], math.prod(shape(int(op.OutputsAsNumpy()[0])))
        if name == "CONV_2D":
            macs += out * math.prod(shape(ins[1])[1:])
        elif name == "DEPTHWISE_CONV_2D":  # filter [1, kh, kw, out]: a window per output element
            macs += out * math.prod(shape(ins[1])[1:3])
        elif name == "FULLY_CONNECTED":
            macs += out * shape(ins[1])[1]
        elif name == "BATCH_MATMUL":
            macs += out * shape(ins[0])[-1]
    return params, macs


@pytest.mark.parametrize("approximate", [False, True])
def test_keras_vit_tflite(approximate):
    pytest.importorskip("tensorflow")
    from generators.importers.tflite import import_tflite_with_origins

    m = keras_vit(approximate=approximate)
    blob = tflite_file(m)
    g, origins = import_tflite_with_origins(blob, name="keras-vit")
    assert (g.params, g.flops) == tflite_counts(blob)
    assert g.params == m.count_params()
    counts = g.op_counts()
    assert (counts["layernorm"], counts["gelu"], counts["matmul"], counts["softmax"], counts["mean"]) == (5, 2, 4, 2, 1)
    x = np.random.default_rng(4).standard_normal((1, 3, 32, 32)).astype(np.float32)
    ref = tflite_output(blob, x)
    close(run_ir(g, tflite_weights(blob, g, origins), x), ref, "keras-vit: the imported IR vs tf.lite")


def keras_deit(dim=32, heads=2, patch=8, size=32):
    """A small Keras DeiT: Conv2D patches, a class token (a layer holding a [1, 1, C] weight,
    broadcast to the batch and concatenated in front), a position embedding (``Embedding`` of
    the token positions, added), one pre-norm block, layer norm, the class token read out
    (``x[:, 0]``), head."""
    import keras
    from keras import layers, ops

    class ClassToken(layers.Layer):
        def build(self, shape):
            self.token = self.add_weight(shape=(1, 1, shape[-1]), initializer="random_normal")

        def call(self, x):
            return ops.concatenate([ops.broadcast_to(self.token, (ops.shape(x)[0], 1, x.shape[-1])), x], axis=1)

    class PositionEmbedding(layers.Layer):
        def build(self, shape):
            self.embed = layers.Embedding(shape[1], shape[2])
            self.embed.build((shape[1],))

        def call(self, x):
            return x + self.embed(ops.arange(x.shape[1]))

    n = (size // patch) ** 2
    inp = keras.Input((size, size, 3), batch_size=1)
    x = layers.Reshape((n, dim))(layers.Conv2D(dim, patch, strides=patch)(inp))
    x = PositionEmbedding()(ClassToken()(x))
    y = layers.LayerNormalization(epsilon=1e-6)(x)
    x = layers.Add()([x, layers.MultiHeadAttention(heads, dim // heads)(y, y)])
    y = layers.Dense(2 * dim, activation="gelu")(layers.LayerNormalization(epsilon=1e-6)(x))
    x = layers.Add()([x, layers.Dense(dim)(y)])
    x = layers.LayerNormalization(epsilon=1e-6)(x)
    m = keras.Model(inp, layers.Dense(10)(x[:, 0]))
    return randomized_keras(m, 6)


def test_keras_deit_tflite():
    pytest.importorskip("tensorflow")
    from generators.importers.tflite import import_tflite_with_origins

    m = keras_deit()
    blob = tflite_file(m)
    g, origins = import_tflite_with_origins(blob, name="keras-deit")
    assert (g.params, g.flops) == tflite_counts(blob)
    assert g.params == m.count_params()
    counts = g.op_counts()
    assert (counts["cls_token"], counts["pos_embed"], counts["layernorm"]) == (1, 1, 3)
    assert [n.attrs["sections"] for n in g.nodes.values() if n.op == "split" and n.attrs["axis"] == 1] == [[1, 16]]
    x = np.random.default_rng(7).standard_normal((1, 3, 32, 32)).astype(np.float32)
    ref = tflite_output(blob, x)
    close(run_ir(g, tflite_weights(blob, g, origins), x), ref, "keras-deit: the imported IR vs tf.lite")


def keras_convnext(dim=16, size=32):
    """A small Keras ConvNeXt (as keras.applications' ConvNeXt builds it): a patchify stem with
    a channel layer norm, one block (7x7 depthwise conv, layer norm over the channels of the
    NHWC map, Dense 4C with GELU and Dense C on the map, a learned layer scale, the residual),
    the pooled features' layer norm, head."""
    import keras
    from keras import layers

    class LayerScale(layers.Layer):
        def build(self, shape):
            self.gamma = self.add_weight(shape=(shape[-1],), initializer="ones")

        def call(self, x):
            return x * self.gamma

    inp = keras.Input((size, size, 3), batch_size=1)
    x = layers.LayerNormalization(epsilon=1e-6)(layers.Conv2D(dim, 4, strides=4)(inp))
    y = layers.DepthwiseConv2D(7, padding="same")(x)
    y = layers.Dense(4 * dim, activation="gelu")(layers.LayerNormalization(epsilon=1e-6)(y))
    x = layers.Add()([x, LayerScale()(layers.Dense(dim)(y))])
    x = layers.LayerNormalization(epsilon=1e-6)(layers.GlobalAveragePooling2D()(x))
    m = keras.Model(inp, layers.Dense(10)(x))
    return randomized_keras(m, 8)


def test_keras_convnext_tflite():
    """ConvNeXt's layer norm over an image's channels and its Dense layers on the feature map
    (FULLY_CONNECTED keeping the NHWC dims: 1x1 convolutions) import and compute what tf.lite
    computes; the converter folds the layer scale into the second Dense's weights."""
    pytest.importorskip("tensorflow")
    from generators.importers.tflite import import_tflite_with_origins

    m = keras_convnext()
    blob = tflite_file(m)
    g, origins = import_tflite_with_origins(blob, name="keras-convnext")
    assert (g.params, g.flops) == tflite_counts(blob)
    assert g.params == m.count_params() - 16  # the layer scale's 16 gains, folded
    counts = g.op_counts()
    assert (counts["layernorm"], counts["conv2d"], counts["gelu"], counts["fc"]) == (3, 4, 1, 1)
    assert [n.attrs["axis"] for n in g.nodes.values() if n.op == "layernorm"] == [1, 1, 1]
    x = np.random.default_rng(9).standard_normal((1, 3, 32, 32)).astype(np.float32)
    ref = tflite_output(blob, x)
    close(run_ir(g, tflite_weights(blob, g, origins), x), ref, "keras-convnext: the imported IR vs tf.lite")


def test_keras_vit_free_batch_is_one_line_advice():
    pytest.importorskip("tensorflow")
    from generators.importers.tflite import import_tflite

    with pytest.raises(UnsupportedModelError, match=r"^keras-vit: TFLite operator \d+ \(\w+, output '[^']*'\): .* \(the "
                       r"model computes shapes at run time, as a free batch makes the converter write: convert it with "
                       r"batch 1, e\.g\. keras\.Input\(shape, batch_size=1\)\)$") as e:
        import_tflite(tflite_file(keras_vit(batch=None, depth=1)), name="keras-vit")
    assert "\n" not in str(e.value)


class DeiT(SmallViT):
    """``SmallViT`` as timm's ViT/DeiT: learned class (and distillation) tokens expanded to the
    batch and concatenated in front of the patch tokens, a learned position embedding added,
    the class token read out (``x[:, 0]``)."""

    def __init__(self, tokens: int = 1, dim=48, patches=16, **kw):
        super().__init__(dim=dim, **kw)
        self.cls_token = nn.Parameter(torch.zeros(1, tokens, dim))
        self.pos_embed = nn.Parameter(torch.zeros(1, patches + tokens, dim))

    def forward(self, x):
        x = self.patch(x).flatten(2).transpose(1, 2)
        lead = [self.cls_token[:, k:k + 1].expand(x.shape[0], -1, -1) for k in range(self.cls_token.shape[1])]
        x = torch.cat([*lead, x], dim=1) + self.pos_embed
        return self.head(self.norm(self.blocks(x))[:, 0])


@pytest.mark.parametrize("tokens", [1, 2])
def test_deit_class_token_and_position_embedding(tokens):
    """The expanded class token (and DeiT's distillation token) in front of the tokens: cls_token;
    the position embedding added: pos_embed; the readout x[:, 0] (a Gather, the tensor's only
    reader): one split around token 0 and a reshape."""
    g = check_onnx(_randomized(DeiT(tokens, depth=1), 5), [1, 3, 32, 32], f"deit-{tokens}")
    counts = g.op_counts()
    assert (counts["cls_token"], counts["pos_embed"]) == (tokens, 1)
    [pos] = [n for n in g.nodes.values() if n.op == "pos_embed"]
    assert pos.shape == [1, 16 + tokens, 48] and {c.name: c for c in g.costs()}[pos.name].params == (16 + tokens) * 48
    sections = [n.attrs["sections"] for n in g.nodes.values() if n.op == "split"]
    assert [1, 15 + tokens] in sections and max(map(len, sections)) == 3  # not one section per token (q, k, v: 3)


def test_onnx_other_learned_constants_are_one_line_errors():
    class PerToken(nn.Module):  # one value per token, broadcast over the channels
        def __init__(self):
            super().__init__()
            self.patch = nn.Conv2d(3, 16, 8, 8)
            self.bias = nn.Parameter(torch.randn(1, 16, 1))

        def forward(self, x):
            return self.patch(x).flatten(2).transpose(1, 2) + self.bias

    with pytest.raises(UnsupportedModelError, match=r"^pos: ONNX node '/Add' \(Add\): Add by a constant tensor of shape "
                       r"\[1, 16, 1\] \(the IR has no weights; a constant added is a position embedding only with one "
                       r"value per element of the tensor\)$"):
        import_onnx(export_onnx(PerToken().eval(), [1, 3, 32, 32]), name="pos")

    class TokenAfter(PerToken):  # a learned token appended after the tokens
        def forward(self, x):
            t = self.patch(x).flatten(2).transpose(1, 2)
            return torch.cat([t, self.bias[:, :1].expand(t.shape[0], -1, 16)], dim=1)

    with pytest.raises(UnsupportedModelError, match=r"^cls: ONNX node '[^']+' \(Concat\): Concat of \[\[1, 16, 16\], "
                       r"\[1, 1, 16\]\] on axis 1 mixing computed tensors and constants \(a constant is a class token "
                       r"only as \[1, 1, C\] tokens in front of tokens \[1, N, C\] on axis 1; the IR has no other "
                       r"weights\)$") as e:
        import_onnx(export_onnx(TokenAfter().eval(), [1, 3, 32, 32]), name="cls")
    assert "\n" not in str(e.value)
