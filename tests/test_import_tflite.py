"""The TFLite importer: round trips TFLite -> IR -> TFLite with equal outputs, foreign files, errors.

Round trip. A network built as IR (a MobileNetV3-like net, a tiny ResNet, a ShuffleNet-like
net, every other operator, synthetic-space networks, a NAS-Bench-201 net) is exported by the
project's exporter (fp32, weights from ``export.weights``), imported back and exported again
with the weights carried over from the first file (the IR itself has none). Then:

- the same function: the second file computes what the first computes on the same input
  (1e-5 relative), and holds the same TFLite operators and parameter count;
- the same structure: the imported graph's ``model_id`` equals that of the source IR in the
  form the converter writes it (``tflite_form``: each rewrite is one of the exporter's
  documented fusions, ``TFLITE_FUSIONS``: batch norm folded into the conv/fc before it,
  a standalone one as its MUL + ADD, a scale folded into the conv/fc before it, an
  h-sigmoid after a conv/fc as relu6 + MUL 1/6 with the +3 in the bias, relu6-range clips as
  relu6, common subexpressions merged, n-ary adds as binary ones; and an unpadded average
  pool's ``count_include_pad``, moot there, is the default); the same FLOPs.

The int8 and fp16 files of a network import to the same operators (QUANTIZE/DEQUANTIZE
vanish), and TFLite files written from plain TF graphs (TF SAME padding, free batch, Keras'
NHWC flatten before a dense layer, free spatial dims) import with the same function, as do the
forms litert-torch writes a PyTorch model in (an NCHW input transposed inside, a max pool's
padding by -inf, PReLU and local response norm decomposed, NCHW tensors between the convolutions).
"""
from __future__ import annotations

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")
pytest.importorskip("ai_edge_litert")


from generators.export import tflite as T  # noqa: E402
from generators.export.weights import example_input  # noqa: E402
from generators.importers import UnsupportedModelError, import_tflite  # noqa: E402
from generators.importers.onnx import f32  # noqa: E402
from generators.importers.carry import run_ir, tflite_weights  # noqa: E402
from generators.importers.tflite import import_tflite_with_origins  # noqa: E402
from generators.ir import Graph, split_ref  # noqa: E402
from support.nets import (close, mbv3ish_logits, misc_ops_head, nb201, ops, resnet_tiny,  # noqa: E402
                          shufflenet_tiny, synthetic_nets, tflite_with_weights)

RTOL = 1e-5  # the second TFLite file vs the first: max |diff| <= RTOL * max |first|


# ------------------------------------------------------------------ source networks (IR)
def mbv3ish(size: int = 32) -> Graph:
    g, y = mbv3ish_logits(size)
    return g.set_outputs(y).validate()


# resnet_tiny, shufflenet_tiny, synthetic_nets, nb201: support/nets.py
def misc_ops(size: int = 20) -> Graph:
    """The remaining operators and geometries; two outputs."""
    # the head, in TFLite: the conv has a zero bias, the first avgpool is PAD + pool + correction
    # MUL, the second SAME, the clip MINIMUM + MAXIMUM, the batch norm MUL + ADD
    g, x = misc_ops_head(size)
    x = g.add("clip", x, min=0.0, max=3.0)  # MINIMUM + RELU
    x = g.add("pad", x, pads=[1, 0, 2, 1], value=0.5)  # PADV2
    x = g.add("upsample", x, scale=2)
    x = g.add("maxpool", x, kernel=3, stride=2, padding=1, ceil_mode=True)  # stacked one-wide MIRROR_PADs
    x = g.add("crop", x, crops=[1, 1, 0, 3])
    x = g.add("maxpool", x, kernel=2, stride=2, ceil_mode=True)  # 11 x 12 -> 6 x 6
    s = g.add("sigmoid", x)
    t = g.add("clip", g.add("tanh", x), min=-1.0, max=1.0)  # RELU_N1_TO_1
    gate = g.add("hsigmoid", g.add("global_avgpool", x))  # ADD (+3, RELU6) + MUL
    x = g.add("mul", [g.add("concat", [s, t], axis=1), g.add("concat", [gate, gate], axis=1)])
    x = g.add("scale", x, factor=0.5)
    x = g.add("mul", [x, g.add("sigmoid", g.add("reduce_max", x, axis=1, keepdim=True))])  # REDUCE_MAX
    _, c, h, w = g.shape(x)
    y = g.add("reduce_sum", g.add("reshape", x, shape=[1, 2, c // 2, h, w]), axis=1)  # SUM over a rank-5 view
    x = g.add("concat", [y, y], axis=1)
    f = g.add("fc", g.add("flatten", x), out_features=12)  # NHWC RESHAPE, permuted fc weights
    r = g.add("reshape", f, shape=[1, 3, 2, 2])  # RESHAPE + TRANSPOSE to NHWC
    out1 = g.add("softmax", r, axis=1)  # TRANSPOSE + SOFTMAX + TRANSPOSE (merged with the one before)
    out2 = g.add("hswish", g.add("fc", f, out_features=5, bias=False))  # (a relu6 here would duplicate f's FC)
    return g.set_outputs(out1, out2).validate()


NETS = {"mbv3ish": mbv3ish, "resnet-tiny": resnet_tiny, "shufflenet-tiny": shufflenet_tiny, "misc-ops": misc_ops,
        **synthetic_nets(), "nb201": nb201}


# ------------------------------------------------------------------ the form the converter writes
def tflite_form(g: Graph) -> Graph:
    """``g`` with the rewrites the exporter and converter make (see the module doc)."""
    g = T.merge_common_subexpressions(g)
    readers = g.consumers()
    outputs = {split_ref(r)[0] for r in g.outputs}
    out = Graph(g.name, g.source, g.meta)
    alias: dict[str, str] = {}
    layer_tail: dict[str, str] = {}  # IR node -> the conv/fc whose output it is (foldable into)

    def ref(r: str) -> str:
        name, k = split_ref(r)
        return alias[name] if r == name else f"{alias[name]}:{k}"

    def sole(src: str, name: str) -> bool:
        return readers[src] == [name] and src not in outputs

    for n in g.nodes.values():
        attrs = dict(n.attrs)
        src = split_ref(n.inputs[0])[0] if n.inputs else None
        inputs = [ref(r) for r in n.inputs]
        if n.op in ("conv2d", "fc"):
            bn = readers[n.name]
            if len(bn) == 1 and g.nodes[bn[0]].op == "batchnorm" and n.name not in outputs:
                attrs["bias"] = True
            if any(g.nodes[r].op == "hsigmoid" for r in bn) and len(bn) == 1 and n.name not in outputs:
                attrs["bias"] = True  # +3 folded into the bias
            alias[n.name] = out.add(n.op, inputs, name=n.name, **attrs)
            layer_tail[n.name] = alias[n.name]
            continue
        if n.op == "batchnorm" and src in layer_tail and g.nodes[src].op in ("conv2d", "fc") and sole(src, n.name):
            alias[n.name] = alias[src]
            layer_tail[n.name] = alias[src]
            continue
        if n.op == "scale" and src in layer_tail and sole(src, n.name):
            alias[n.name] = alias[src]  # folded into the layer's weights
            layer_tail[n.name] = alias[src]
            continue
        if n.op == "hsigmoid" and (src in layer_tail or g.nodes[src].op == "batchnorm") and sole(src, n.name):
            y = out.add("relu6", inputs, name=f"{n.name}/relu6")
            alias[n.name] = out.add("scale", y, name=n.name, factor=f32(1 / 6))
            continue
        if n.op == "batchnorm":
            attrs["eps"] = 0.0  # a MUL + ADD of constants
        if n.op == "avgpool" and attrs["padding"] == [0, 0] and not attrs["ceil_mode"]:
            attrs["count_include_pad"] = True  # moot without padding: the importer takes the default
        if n.op == "clip" and (attrs["min"], attrs["max"]) == (0.0, 6.0):
            n_op, attrs = "relu6", {}
        else:
            n_op = n.op
        while n_op in ("add", "mul") and len(inputs) > 2:
            inputs = [out.add(n_op, inputs[:2], name=f"{n.name}/{len(inputs)}")] + inputs[2:]
        alias[n.name] = out.add(n_op, inputs, name=n.name, **attrs)
    return out.set_outputs(*[ref(r) for r in g.outputs])


def structure_key(g: Graph) -> tuple:
    """``g``'s structure up to the order of independent nodes and of the operands of add and
    mul (the converter reorders both): each node is known by its operator, attributes and
    the keys of its inputs (a Merkle hash of the DAG); the multiset of node keys and the
    output keys are compared."""
    import hashlib
    import json

    key: dict[str, str] = {}
    for n in g.nodes.values():
        ins = [f"{key[split_ref(r)[0]]}:{split_ref(r)[1]}" for r in n.inputs]
        if n.op in ("add", "mul"):
            ins.sort()
        key[n.name] = hashlib.sha256(json.dumps([n.op, n.attrs, ins], sort_keys=True).encode()).hexdigest()[:20]
    return tuple(sorted(key.values())), tuple(f"{key[split_ref(r)[0]]}:{split_ref(r)[1]}" for r in g.outputs)


# ------------------------------------------------------------------ carrying the weights over
def round_trip(blob: bytes, x: np.ndarray, name: str, first_graph: Graph | None = None) -> tuple[Graph, bytes]:
    """Import ``blob``, export the IR again with its weights; both files must compute the same."""
    g, origins = import_tflite_with_origins(blob, name=name)
    blob2 = tflite_with_weights(g, tflite_weights(blob, g, origins))
    first = T.run_tflite(blob, first_graph or g, {(first_graph or g).input_nodes[0].name: x})
    close(T.run_tflite(blob2, g, {g.input_nodes[0].name: x}), first, f"{name}: TFLite -> IR -> TFLite vs TFLite", RTOL)
    return g, blob2


# ------------------------------------------------------------------ round trips of IR-built networks
@pytest.mark.parametrize("net", NETS)
def test_round_trip_function_operators_and_structure(net):
    src = NETS[net]()
    blob = T.convert(src, "fp32")
    x = example_input(src, sample=7)[src.input_nodes[0].name]
    g, blob2 = round_trip(blob, x, net, src)
    first, second = T.inspect_tflite(blob), T.inspect_tflite(blob2)
    assert second["op_counts"] == first["op_counts"]
    assert second["params"] == first["params"]
    expected = tflite_form(src)
    assert g.op_counts() == expected.op_counts()
    assert structure_key(g) == structure_key(expected)  # operators, attributes, wiring, outputs
    assert g.flops == src.flops
    assert [n.shape for n in g.input_nodes] == [n.shape for n in src.input_nodes]
    assert g.source == "tflite"


@pytest.mark.parametrize("precision", ["fp16", "int8"])
@pytest.mark.parametrize("net", ["mbv3ish", "misc-ops", "nb201"])
def test_fp16_and_int8_files_import_to_the_same_operators(net, precision):
    src = NETS[net]()
    g32 = import_tflite(T.convert(src, "fp32"))
    g = import_tflite(T.convert(src, precision))
    assert g.op_counts() == g32.op_counts() and g.flops == g32.flops and g.params == g32.params
    # scalars (hsigmoid's 1/6, clip bounds, a pad value) are fp16 or int8 there: close, not equal
    # (int8: a clip bound outside the calibrated range is stored clamped to it)
    if precision == "fp16":
        assert np.allclose(float_attrs(g), float_attrs(g32), rtol=1e-3, atol=1e-3)
    assert structure_key(without_floats(g)) == structure_key(without_floats(g32))


_FLOAT_ATTRS = ("factor", "min", "max", "value", "alpha")


def float_attrs(g: Graph) -> list[float]:
    return [n.attrs[k] for n in g.nodes.values() for k in _FLOAT_ATTRS if k in n.attrs]


def without_floats(g: Graph) -> Graph:
    """``g`` with its float attributes left out (set to placeholders)."""
    d = g.to_dict()
    del d["model_id"]
    for n in d["nodes"]:
        for k in _FLOAT_ATTRS:
            if k in n["attrs"]:
                n["attrs"][k] = 1.0 if k == "max" else 0.0
    return Graph.from_dict(d)


# ------------------------------------------------------------------ TFLite files from plain TF graphs
def _tf_model(build, shape: list, seed: int = 0) -> bytes:
    """A TFLite file of a TF1-style graph: ``build(x, rng)`` of a float32 placeholder of ``shape``."""
    rng = np.random.default_rng(seed)
    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, shape, name="image")
        y = tf.identity(build(x, rng), name="out")
    return tf.compat.v1.lite.TFLiteConverter(graph.as_graph_def(), [x], [y]).convert()


def _w(rng, *shape):
    return tf.constant((rng.standard_normal(shape) * 0.3).astype(np.float32))


def keras_like(x, rng):
    """What Keras writes: SAME padding everywhere (stride 2 on even inputs pads after), Flatten
    in NHWC order before Dense."""
    y = tf.nn.relu6(tf.nn.conv2d(x, _w(rng, 3, 3, 3, 8), 2, "SAME") + _w(rng, 8))
    y = tf.nn.relu(tf.nn.depthwise_conv2d(y, _w(rng, 3, 3, 8, 2), [1, 1, 1, 1], "SAME") + _w(rng, 16))
    y = tf.image.resize(y, [16, 16], "nearest")  # half-pixel centres: the same pixels for a factor 2
    y = tf.nn.max_pool2d(y, 3, 2, "SAME")
    y = tf.nn.avg_pool2d(y, 3, 1, "SAME")
    y = y[:, 1:, :-1, :]  # STRIDED_SLICE
    y = tf.nn.conv2d(y, _w(rng, 1, 1, 16, 12), 1, "VALID")
    f = tf.reshape(y, [-1, 7 * 7 * 12])
    return tf.nn.softmax(tf.matmul(f, _w(rng, 7 * 7 * 12, 10)) + _w(rng, 10))


def test_keras_like_file_with_free_batch():
    blob = _tf_model(keras_like, [None, 16, 16, 3])
    g, _ = round_trip(blob, np.random.default_rng(3).standard_normal((1, 3, 16, 16)).astype(np.float32), "keras")
    assert g.input_nodes[0].shape == [1, 3, 16, 16]  # shape_signature -1: batch 1
    assert ops(g) == ["pad", "conv2d", "relu6", "conv2d", "relu", "upsample", "maxpool", "avgpool", "crop", "conv2d", "flatten",
                      "fc", "softmax"]
    n = {node.op: node for node in g.nodes.values()}
    assert n["pad"].attrs["pads"] == [0, 1, 0, 1]  # TF SAME, stride 2, even input: all padding after
    assert (n["maxpool"].attrs["padding"], n["maxpool"].attrs["ceil_mode"]) == ([0, 0], True)
    assert (n["avgpool"].attrs["padding"], n["avgpool"].attrs["count_include_pad"]) == ([1, 1], False)
    assert [c.attrs["groups"] for c in g.nodes.values() if c.op == "conv2d"] == [1, 8, 1]


def test_a_layout_a_reader_cannot_take_becomes_an_ir_transpose():
    """A graph output (or any reader needing NHWC) of a tensor in another layout: an IR transpose
    into the layout the file has, computing what the file computes."""
    blob = _tf_model(lambda x, rng: tf.nn.relu(tf.transpose(x, [0, 3, 1, 2])), [1, 4, 5, 3])
    g, _ = round_trip(blob, np.random.default_rng(5).standard_normal((1, 3, 4, 5)).astype(np.float32), "t")
    assert ops(g) == ["relu", "transpose"]


def test_free_spatial_dims_need_input_shape():
    def build(x, rng):
        y = tf.nn.relu(tf.nn.conv2d(x, _w(rng, 3, 3, 3, 8), 1, "SAME") + _w(rng, 8))
        return tf.matmul(tf.reduce_mean(y, axis=[1, 2]), _w(rng, 8, 4))

    blob = _tf_model(build, [None, None, None, 3])
    with pytest.raises(UnsupportedModelError, match=r"^free: input 'image' has free dimension\(s\) at TFLite axes \[1, 2\] .*give input_shape, NCHW; --shape on the command line\)$"):
        import_tflite(blob, name="free")
    g = import_tflite(blob, input_shape=[1, 3, 24, 20])
    assert g.input_nodes[0].shape == [1, 3, 24, 20] and g.shape(next(iter(g.nodes.values())).name) == [1, 3, 24, 20]
    assert ops(g) == ["conv2d", "relu", "global_avgpool", "flatten", "fc"]
    assert g.flops == 24 * 20 * 8 * 27 + 8 * 4
    with pytest.raises(UnsupportedModelError, match=r"input_shape \[1, 24, 20\] does not fit input 'image' of rank 4"):
        import_tflite(blob, input_shape=[1, 24, 20])


def test_input_shape_overrides_a_static_input(tmp_path):
    src = resnet_tiny()
    path = tmp_path / "resnet.tflite"
    path.write_bytes(T.convert(src))
    g = import_tflite(path, input_shape=[1, 3, 64, 64])
    assert g.name == "resnet" and g.input_nodes[0].shape == [1, 3, 64, 64]
    assert structure_key(g) == structure_key(tflite_form(resnet_tiny(64)))


# ------------------------------------------------------------------ errors
def test_unsupported_operator_names_index_tensor_and_op():
    blob = _tf_model(lambda x, rng: tf.exp(tf.nn.relu(x)), [1, 4, 4, 3])
    with pytest.raises(UnsupportedModelError) as e:
        import_tflite(blob, name="exp-net")
    assert str(e.value) == "exp-net: TFLite operator 1 (EXP, output 'out'): unsupported operator"
    assert isinstance(e.value, ImportError)  # the PyTorch importer's type: callers catch one


@pytest.mark.parametrize("build, what", [
    (lambda x, rng: tf.math.squared_difference(x, tf.nn.relu(x)), r"\(SQUARED_DIFFERENCE, .*SQUARED_DIFFERENCE outside a "
     r"layer-norm pattern \(the IR has no squared difference\)$"),
    (lambda x, rng: tf.image.resize(x, [6, 6], "nearest"), r"\(RESIZE_NEAREST_NEIGHBOR, .*nearest resize 4x4 -> 6x6 by a non-integer factor"),
    (lambda x, rng: x - tf.nn.relu(x), r"\(SUB, .*SUB of two computed tensors"),
])
def test_constructs_without_ir_operator_are_one_line_errors(build, what):
    blob = _tf_model(build, [1, 4, 4, 3])
    with pytest.raises(UnsupportedModelError, match=r"^m: (TFLite operator \d+ )?" + what) as e:
        import_tflite(blob, name="m")
    assert "\n" not in str(e.value)


def test_bad_files(tmp_path):
    with pytest.raises(UnsupportedModelError, match="no such TFLite file"):
        import_tflite(tmp_path / "missing.tflite")
    with pytest.raises(UnsupportedModelError, match=r"^junk: not a TFLite flatbuffer \(no TFL3 identifier\)$"):
        import_tflite(b"\x00" * 64, name="junk")


# ------------------------------------------------------------------ the predict loader
def test_predict_loader_reads_tflite(tmp_path):
    from pipelines.predict import load_model

    path = tmp_path / "mbv3.tflite"
    path.write_bytes(T.convert(mbv3ish()))
    g = load_model(path)
    assert g.name == "mbv3" and structure_key(g) == structure_key(tflite_form(mbv3ish()))


# ------------------------------------------------------------------ what real zoos add
def test_keras_preprocessing_and_dense_over_channels_with_a_free_batch():
    """Keras' Rescaling (a scalar MUL and ADD) and Normalization (SUB and DIV by per-channel
    constants), and a Dense over an image's channels, which TF writes under a free batch as
    SHAPE/GATHER/REDUCE_PROD shape arithmetic, RESHAPE to rows, FULLY_CONNECTED, RESHAPE back."""
    import keras

    keras.utils.set_random_seed(5)
    inp = keras.Input((8, 8, 3))
    x = keras.layers.Rescaling(1 / 127.5, offset=-1.0)(inp)
    norm = keras.layers.Normalization(mean=[0.1, 0.2, 0.3], variance=[0.5, 0.6, 0.7])
    x = keras.layers.Conv2D(8, 3, padding="same")(norm(x))
    x = keras.layers.Dense(12, activation="relu")(x)  # over the channels of the image
    y = keras.layers.Dense(5)(keras.layers.GlobalAveragePooling2D()(x))
    blob = tf.lite.TFLiteConverter.from_keras_model(keras.Model(inp, y)).convert()
    x = (np.random.default_rng(5).random((1, 3, 8, 8)) * 255).astype(np.float32)
    g, _ = round_trip(blob, x, "keras-pre")
    counts = g.op_counts()
    assert (counts["scale"], counts["shift"], counts["batchnorm"], counts["conv2d"]) == (1, 1, 2, 2)
    assert [n.attrs["value"] for n in g.nodes.values() if n.op == "shift"] == [-1.0]


# ------------------------------------------------------------------ local response norm, division
def lrn_div(size: int = 12) -> Graph:
    """AlexNet's conv + local response norm, a quotient of two tensors (the divisor in (0.5, 1.5),
    broadcast over the map), PyramidNet's zero channels, SCNet's resize of a pooled map."""
    g = Graph("lrn-div", source="test")
    x = g.add("conv2d", g.input([1, 3, size, size]), out_channels=8, kernel=3, padding=1)
    x = g.add("lrn", g.add("relu", x), size=5, alpha=0.5, beta=0.75, bias=2.0)
    x = g.add("div", [x, g.add("shift", g.add("sigmoid", g.add("global_avgpool", x)), value=0.5)])
    x = g.add("add", [x, g.add("resize", g.add("avgpool", x, kernel=4, stride=2), size=[size, size])])  # 5 -> 12
    return g.set_outputs(g.add("lrn", g.add("pad", x, pads=[0, 0, 0, 0, 0, 2]), size=3)).validate()


def test_local_response_norm_and_division_round_trip():
    src = lrn_div()
    blob = T.convert(src, "fp32")
    assert T.inspect_tflite(blob)["op_counts"]["LOCAL_RESPONSE_NORMALIZATION"] == 2
    g, _ = round_trip(blob, example_input(src, sample=7)[src.input_nodes[0].name], "lrn-div", src)
    assert structure_key(g) == structure_key(tflite_form(src))  # size, alpha (over size), beta, bias back
    assert [n.attrs for n in g.nodes.values() if n.op == "lrn"] == [
        {"size": 5, "alpha": 0.5, "beta": 0.75, "bias": 2.0}, {"size": 3, "alpha": 1e-4, "beta": 0.75, "bias": 1.0}]


def test_tf_local_response_normalization_and_division_compute_the_same():
    def build(x, rng):
        y = tf.nn.local_response_normalization(x, depth_radius=2, bias=1.5, alpha=0.1, beta=0.5)
        return y / (tf.sigmoid(tf.nn.conv2d(x, _w(rng, 1, 1, 6, 6), 1, "VALID")) + 0.5)

    blob = _tf_model(build, [1, 5, 4, 6])
    g, _ = round_trip(blob, np.random.default_rng(4).standard_normal((1, 6, 5, 4)).astype(np.float32), "tf-lrn")
    (lrn,) = (n for n in g.nodes.values() if n.op == "lrn")
    assert lrn.attrs == {"size": 5, "alpha": 0.5, "beta": 0.5, "bias": 1.5}  # TF's alpha times the window
    assert g.op_counts()["div"] == 1


# ------------------------------------------------------------------ gather of channels
def gather_net(size: int = 8) -> Graph:
    """CondenseNet's selected channels: a gather of the channels of a map (NHWC's last axis) before
    a grouped 1x1 convolution, and of the classifier's input vector."""
    g = Graph("gather", source="test")
    x = g.add("relu", g.add("conv2d", g.input([1, 3, size, size]), out_channels=8, kernel=3, padding=1))
    x = g.add("conv2d", g.add("gather", x, indices=[7, 7, 0, 3, 5, 1]), out_channels=8, kernel=1, groups=2)
    v = g.add("flatten", g.add("global_avgpool", x))
    return g.set_outputs(g.add("fc", g.add("gather", v, indices=[6, 2, 2, 0]), out_features=5)).validate()


def test_gather_of_channels_round_trips():
    src = gather_net()
    blob = T.convert(src, "fp32")
    assert T.inspect_tflite(blob)["op_counts"]["GATHER"] == 2
    g, _ = round_trip(blob, example_input(src, sample=3)[src.input_nodes[0].name], "gather", src)
    assert structure_key(g) == structure_key(tflite_form(src))
    assert [n.attrs for n in g.nodes.values() if n.op == "gather"] == [
        {"indices": [7, 7, 0, 3, 5, 1], "axis": 1}, {"indices": [6, 2, 2, 0], "axis": 1}]


def test_a_gather_of_rows_is_refused():
    blob = _tf_model(lambda x, rng: tf.gather(tf.nn.relu(x), [0, 2], axis=1), [1, 4, 4, 3])  # H of NHWC
    with pytest.raises(UnsupportedModelError, match=r"^m: TFLite operator \d+ \(GATHER, .*GATHER of \[1, 4, 4, 3\] on axis 1 "
                                                    r"by 2 constant indices \(the IR's gather takes"):
        import_tflite(blob, name="m")


# ------------------------------------------------------------------ PyTorch's layout (litert-torch)
def _run_nchw(blob: bytes, x: np.ndarray) -> np.ndarray:
    """The file in LiteRT on ``x`` as it is (a file whose input is NCHW)."""
    from ai_edge_litert.interpreter import Interpreter

    it = Interpreter(model_content=blob)
    it.allocate_tensors()
    it.set_tensor(it.get_input_details()[0]["index"], x)
    it.invoke()
    return it.get_tensor(it.get_output_details()[0]["index"])


def torch_like(x, rng):
    """What litert-torch writes for a PyTorch model: its NCHW input transposed to NHWC before the
    first convolution, and a max pool's padding as a PAD by -inf before a VALID max pool."""
    y = tf.transpose(x, [0, 2, 3, 1])
    y = tf.nn.relu(tf.nn.conv2d(tf.pad(y, [[0, 0], [1, 1], [1, 1], [0, 0]]), _w(rng, 3, 3, 3, 8), 2, "VALID") + _w(rng, 8))
    y = tf.pad(y, [[0, 0], [1, 1], [1, 1], [0, 0]], constant_values=-np.inf)
    y = tf.nn.max_pool2d(y, 3, 2, "VALID")
    return tf.matmul(tf.reduce_mean(y, axis=[1, 2]), _w(rng, 8, 4))


def test_an_nchw_input_transposed_to_nhwc_and_a_max_pool_padded_by_minus_infinity():
    blob = _tf_model(torch_like, [1, 3, 16, 16])
    g, origins = import_tflite_with_origins(blob, name="torch-like")
    assert g.input_nodes[0].shape == [1, 3, 16, 16]  # the file's own NCHW shape, no permutation
    assert ops(g) == ["conv2d", "relu", "maxpool", "global_avgpool", "flatten", "fc"]
    n = {node.op: node for node in g.nodes.values()}
    assert n["conv2d"].attrs["padding"] == [1, 1]
    assert (n["maxpool"].attrs["padding"], n["maxpool"].attrs["ceil_mode"]) == ([1, 1], False)  # PyTorch's MaxPool2d(3, 2, 1)
    assert import_tflite(blob, input_shape=[1, 3, 16, 16]).flops == g.flops == 8 * 8 * 8 * 27 + 8 * 4
    x = np.random.default_rng(6).standard_normal((1, 3, 16, 16)).astype(np.float32)
    close(run_ir(g, tflite_weights(blob, g, origins), x), [_run_nchw(blob, x)], "NCHW file vs its IR", 1e-4)


def test_an_nchw_input_padded_before_its_transpose():
    # PyTorch's F.pad of the image before the first convolution (TF-style "same" padding of
    # EfficientNet-B*b): the PAD reads the NCHW input, the TRANSPOSE to NHWC reads the PAD
    def build(x, rng):
        y = tf.transpose(tf.pad(x, [[0, 0], [0, 0], [0, 1], [0, 1]]), [0, 2, 3, 1])
        y = tf.nn.relu(tf.nn.conv2d(y, _w(rng, 3, 3, 3, 8), 2, "VALID"))
        return tf.matmul(tf.reduce_mean(y, axis=[1, 2]), _w(rng, 8, 4))

    blob = _tf_model(build, [1, 3, 16, 16])
    g, origins = import_tflite_with_origins(blob, name="padded-nchw")
    assert g.input_nodes[0].shape == [1, 3, 16, 16]  # the file's own NCHW shape
    assert g.flops == 8 * 8 * 8 * 27 + 8 * 4
    x = np.random.default_rng(7).standard_normal((1, 3, 16, 16)).astype(np.float32)
    close(run_ir(g, tflite_weights(blob, g, origins), x), [_run_nchw(blob, x)], "padded NCHW file vs its IR", 1e-4)


def channelwise_like(x, rng):
    """ChannelNet's channel-wise convolution as litert-torch writes it: the NHWC map transposed to
    NCHW, reshaped to NDHWC ``[1, C, H, W, 1]``, a CONV_3D of window 8 x 1 x 1 and stride 2 on the
    channels (SAME), its ``[1, C/2, H, W, 2]`` transposed and reshaped back to the map."""
    y = tf.nn.relu(tf.nn.conv2d(x, _w(rng, 3, 3, 3, 8), 1, "SAME"))
    v = tf.reshape(tf.transpose(y, [0, 3, 1, 2]), [1, 8, 5, 6, 1])
    z = tf.nn.conv3d(v, _w(rng, 8, 1, 1, 1, 2), [1, 2, 1, 1, 1], "SAME")  # [1, 4, 5, 6, 2]
    z = tf.transpose(tf.reshape(tf.transpose(z, [0, 4, 1, 2, 3]), [1, 8, 5, 6]), [0, 2, 3, 1])
    return z + y


def test_a_convolution_along_the_channels_computes_the_same():
    blob = _tf_model(channelwise_like, [1, 5, 6, 3])
    assert T.inspect_tflite(blob)["op_counts"]["CONV_3D"] == 1
    g, origins = import_tflite_with_origins(blob, name="channelwise")
    (cw,) = [n for n in g.nodes.values() if n.op == "conv2d" and n.attrs["kernel"] == [8, 1]]
    assert (cw.attrs["out_channels"], cw.attrs["stride"], cw.attrs["padding"]) == (2, [2, 1], [3, 0])
    assert g.shape(cw.inputs[0]) == [1, 1, 8, 30] and g.flops == 8 * 27 * 30 + 2 * 4 * 30 * 8
    x = np.random.default_rng(8).standard_normal((1, 3, 5, 6)).astype(np.float32)
    close(run_ir(g, tflite_weights(blob, g, origins), x), T.run_tflite(blob, g, {g.input_nodes[0].name: x}),
          "CONV_3D file vs its IR", 1e-4)


def index_select_like(x, rng):
    """CondenseNet's selected channels as litert-torch writes them: the NCHW map RESHAPEd to
    ``[C, 1, H, W]`` (the channels first, no element moved), GATHER_ND by ``[K, 1]`` indices, a
    TRANSPOSE back to NHWC; the classifier's input vector as ``[F, 1]``, GATHER_ND, ``[1, K]``."""
    y = tf.nn.relu(tf.nn.conv2d(x, _w(rng, 3, 3, 3, 8), 1, "SAME"))
    m = tf.reshape(tf.transpose(y, [0, 3, 1, 2]), [8, 1, 5, 6])
    m = tf.transpose(tf.gather_nd(m, [[7], [0], [3], [3], [5], [1]]), [1, 2, 3, 0])  # [1, 5, 6, 6]
    v = tf.reshape(tf.reduce_mean(tf.nn.conv2d(m, _w(rng, 1, 1, 6, 4), 1, "VALID"), axis=[1, 2], keepdims=True), [4, 1])
    return tf.matmul(tf.reshape(tf.gather_nd(v, [[2], [0], [2]]), [1, 3]), _w(rng, 3, 5))


def test_a_gather_nd_along_channels_put_first_is_a_gather():
    blob = _tf_model(index_select_like, [1, 5, 6, 3])
    assert T.inspect_tflite(blob)["op_counts"]["GATHER_ND"] == 2
    g, origins = import_tflite_with_origins(blob, name="index-select")
    assert [n.attrs for n in g.nodes.values() if n.op == "gather"] == [
        {"indices": [7, 0, 3, 3, 5, 1], "axis": 1}, {"indices": [2, 0, 2], "axis": 1}]
    assert g.flops == 5 * 6 * 8 * 27 + 5 * 6 * 4 * 6 + 3 * 5
    x = np.random.default_rng(9).standard_normal((1, 3, 5, 6)).astype(np.float32)
    close(run_ir(g, tflite_weights(blob, g, origins), x), T.run_tflite(blob, g, {g.input_nodes[0].name: x}),
          "GATHER_ND file vs its IR", 1e-4)


def test_a_gather_nd_of_other_indices_is_refused():
    blob = _tf_model(lambda x, rng: tf.gather_nd(tf.nn.relu(x), [[0, 1]]), [1, 4, 4, 3])
    with pytest.raises(UnsupportedModelError, match=r"^m: TFLite operator \d+ \(GATHER_ND, .*GATHER_ND by constant indices "
                                                    r"of shape \[1, 2\] \(only \[K, 1\]: slices along axis 0\)"):
        import_tflite(blob, name="m")


def radix_softmax_like(x, rng):
    """ResNeSt's split attention as litert-torch writes it: a gate ``[1, 2, 1, C]`` (radix 2)
    through a softmax over the radix written out (REDUCE_MAX, MAXIMUM by -inf, SUB, EXP, SUM,
    DIV), weighting the two halves of a map."""
    y = tf.nn.relu(tf.nn.conv2d(x, _w(rng, 3, 3, 3, 8), 1, "SAME"))  # [1, 5, 6, 8]
    gate = tf.reshape(tf.matmul(tf.reduce_mean(y, axis=[1, 2]), _w(rng, 8, 8)), [1, 2, 1, 4])
    m = tf.maximum(tf.reduce_max(gate, axis=1), -np.inf)
    e = tf.exp(gate - m)
    a = tf.reshape(e / tf.reduce_sum(e, axis=1), [1, 1, 1, 8])
    return tf.reduce_mean(y * a, axis=[1, 2])


def test_a_softmax_written_out_along_an_axis_is_a_softmax():
    blob = _tf_model(radix_softmax_like, [1, 5, 6, 3])
    assert {"REDUCE_MAX", "MAXIMUM", "EXP", "SUM", "DIV"} <= set(T.inspect_tflite(blob)["op_counts"])
    g, origins = import_tflite_with_origins(blob, name="radix-softmax")
    (sm,) = [n for n in g.nodes.values() if n.op == "softmax"]
    assert sm.attrs["axis"] == 1 and g.shape(sm.inputs[0]) == [1, 2, 1, 4]
    assert not {"reduce_max", "reduce_sum", "div"} & set(g.op_counts())
    x = np.random.default_rng(10).standard_normal((1, 3, 5, 6)).astype(np.float32)
    close(run_ir(g, tflite_weights(blob, g, origins), x), T.run_tflite(blob, g, {g.input_nodes[0].name: x}),
          "written-out softmax file vs its IR", 1e-4)


def test_other_3d_convolutions_are_refused():
    blob = _tf_model(lambda x, rng: tf.nn.conv3d(tf.reshape(x, [1, 4, 4, 3, 1]), _w(rng, 3, 3, 1, 1, 2),
                                                 [1, 1, 1, 1, 1], "SAME"), [1, 4, 4, 3])
    with pytest.raises(UnsupportedModelError, match=r"^m: TFLite operator \d+ \(CONV_3D, .*a 3-d convolution \(filter "
                                                    r"\[3, 3, 1, 1, 2\] on \[1, 4, 4, 3, 1\]\); only one over the depth"):
        import_tflite(blob, name="m")


def test_a_pad_by_minus_infinity_outside_a_max_pool_is_refused():
    blob = _tf_model(lambda x, rng: tf.nn.relu(tf.pad(x, [[0, 0], [1, 1], [1, 1], [0, 0]], constant_values=-np.inf)),
                     [1, 4, 4, 3])
    with pytest.raises(UnsupportedModelError, match=r"^m: TFLite operator \d+ \(RELU, .*a PAD by -inf not followed by a "
                                                    r"VALID max pool that takes it as its padding"):
        import_tflite(blob, name="m")


def _with_reduce_window(blob: bytes, size: int) -> bytes:
    """``blob`` with its STRIDED_SLICE replaced by a STABLEHLO_REDUCE_WINDOW summing windows of
    ``size`` along axis 2 (its body one ADD): what litert-torch writes for the window of PyTorch's
    ``F.local_response_norm``, which no TF graph converts to."""
    import flatbuffers
    from ai_edge_litert import schema_py_generated as s

    m = s.ModelT.InitFromPackedBuf(blob, 0)
    sg = m.subgraphs[0]

    def code(name: str) -> int:
        b = getattr(s.BuiltinOperator, name)
        for k, oc in enumerate(m.operatorCodes):
            if max(oc.builtinCode, oc.deprecatedBuiltinCode) == b:
                return k
        oc = s.OperatorCodeT()
        oc.builtinCode, oc.deprecatedBuiltinCode, oc.version = b, min(b, 127), 1
        m.operatorCodes.append(oc)
        return len(m.operatorCodes) - 1

    def tensor(g, value: float | None = None) -> int:
        t = s.TensorT()
        t.shape, t.type, t.buffer = [], s.TensorType.FLOAT32, 0
        if value is not None:
            b = s.BufferT()
            b.data = list(np.float32(value).tobytes())
            m.buffers.append(b)
            t.buffer = len(m.buffers) - 1
        g.tensors.append(t)
        return len(g.tensors) - 1

    (op,) = [op for op in sg.operators if m.operatorCodes[op.opcodeIndex].builtinCode == s.BuiltinOperator.STRIDED_SLICE]
    rank = 5
    o = s.StablehloReduceWindowOptionsT()
    o.windowDimensions = [1, 1, size, 1, 1]
    o.windowStrides = o.baseDilations = o.windowDilations = [1] * rank
    o.padding, o.bodySubgraphIndex = [0] * (2 * rank), 1
    op.opcodeIndex, op.inputs = code("STABLEHLO_REDUCE_WINDOW"), [op.inputs[0], tensor(sg, 0.0)]
    op.builtinOptionsType, op.builtinOptions = 0, None
    op.builtinOptions2Type, op.builtinOptions2 = s.BuiltinOptions2.StablehloReduceWindowOptions, o
    body = s.SubGraphT()
    body.tensors, body.operators = [], []
    a, b, y = (tensor(body) for _ in range(3))
    add = s.OperatorT()
    add.opcodeIndex, add.inputs, add.outputs = code("ADD"), [a, b], [y]
    body.operators, body.inputs, body.outputs = [add], [a, b], [y]
    m.subgraphs.append(body)
    fb = flatbuffers.Builder(0)
    fb.Finish(m.Pack(fb), file_identifier=b"TFL3")
    return bytes(fb.Output())


def _tf_model_with_state(build, shape: list, state: np.ndarray, seed: int = 0) -> bytes:
    """A TFLite file of ``build(x, h, rng)`` whose second input ``h`` is then made a constant of
    the file holding ``state``: what is computed from it is computed from constants alone, which
    the converter would have folded had it been a constant from the start (litert-torch leaves an
    LSTM step on its zero state so)."""
    import flatbuffers
    from ai_edge_litert import schema_py_generated as s

    rng = np.random.default_rng(seed)
    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, shape, name="image")
        h = tf.compat.v1.placeholder(tf.float32, list(state.shape), name="state")
        y = tf.identity(build(x, h, rng), name="out")
    blob = tf.compat.v1.lite.TFLiteConverter(graph.as_graph_def(), [x, h], [y]).convert()
    m = s.ModelT.InitFromPackedBuf(blob, 0)
    sg = m.subgraphs[0]
    (j,) = [j for j in sg.inputs if bytes(sg.tensors[j].name).decode().startswith("state")]
    b = s.BufferT()
    b.data = list(state.astype(np.float32).tobytes())
    m.buffers.append(b)
    sg.tensors[j].buffer = len(m.buffers) - 1
    sg.inputs = [k for k in sg.inputs if k != j]
    fb = flatbuffers.Builder(0)
    fb.Finish(m.Pack(fb), file_identifier=b"TFL3")
    return bytes(fb.Output())


def lstm_gate_like(x, h, rng):
    """DIA-ResNet's attention as litert-torch writes it: an LSTM step whose state half (ADD with a
    fused RELU, then a FULLY_CONNECTED) reads the constant state only, added to the step on the
    pooled map; the gate [1, C] multiplies the NHWC map [1, H, W, C] (TFLite aligns trailing axes)."""
    y = tf.nn.relu(tf.nn.conv2d(x, _w(rng, 3, 3, 3, 8), 1, "SAME"))
    v = tf.reduce_mean(y, axis=[1, 2])
    s = tf.matmul(tf.nn.relu(h + _w(rng, 1, 4)), _w(rng, 4, 8)) + _w(rng, 8)
    return y * tf.sigmoid(tf.matmul(v, _w(rng, 8, 8)) + _w(rng, 8) + s)


def test_what_a_file_computes_from_constants_is_evaluated():
    blob = _tf_model_with_state(lstm_gate_like, [1, 5, 6, 3], np.linspace(-1, 1, 4, dtype=np.float32)[None])
    counts = T.inspect_tflite(blob)["op_counts"]
    assert counts["FULLY_CONNECTED"] == 2 and counts["ADD"] >= 2  # the state's half is in the file, unfolded
    g, origins = import_tflite_with_origins(blob, name="lstm-gate")
    assert g.op_counts()["fc"] == 1 and g.flops == 8 * 27 * 30 + 8 * 8  # the state's layer is no layer of the IR
    assert ops(g)[-3:] == ["sigmoid", "reshape", "mul"]  # the gate viewed [1, C, 1, 1] for the map
    x = np.random.default_rng(9).standard_normal((1, 3, 5, 6)).astype(np.float32)
    close(run_ir(g, tflite_weights(blob, g, origins), x), T.run_tflite(blob, g, {g.input_nodes[0].name: x}),
          "file with a constant state vs its IR", 1e-4)


def torch_instance_norm(affine: bool):
    """PyTorch's ``InstanceNorm2d`` after a conv as litert-torch writes it: to NCHW, the mean over
    the batch, H and W kept, centred, squared by a MUL, the variance as a vector [C], plus eps,
    viewed [1, C, 1, 1], RSQRT, times the centred map, then (``affine``) a gain and a shift per
    channel, back to NHWC."""
    def build(x, rng):
        y = tf.nn.relu(tf.nn.conv2d(x, _w(rng, 3, 3, 3, 8), 1, "SAME"))
        t = tf.transpose(y, [0, 3, 1, 2])
        d = t - tf.reduce_mean(t, axis=[0, 2, 3], keepdims=True)
        n = d * tf.math.rsqrt(tf.reshape(tf.reduce_mean(d * d, axis=[0, 2, 3]) + 1e-5, [1, 8, 1, 1]))
        if affine:
            n = n * tf.reshape(_w(rng, 8) + 1, [1, 8, 1, 1]) + tf.reshape(_w(rng, 8), [1, 8, 1, 1])
        return tf.nn.relu(tf.transpose(n, [0, 2, 3, 1]))
    return build


@pytest.mark.parametrize("affine", [True, False])
def test_an_instance_norm_as_litert_torch_writes_it(affine):
    blob = _tf_model(torch_instance_norm(affine), [1, 5, 6, 3])
    assert T.inspect_tflite(blob)["op_counts"]["RSQRT"] == 1
    g, origins = import_tflite_with_origins(blob, name="torch-instance-norm")
    assert ops(g) == ["conv2d", "relu", "instancenorm", "relu"]
    assert next(n for n in g.nodes.values() if n.op == "instancenorm").attrs == {"eps": pytest.approx(1e-5)}
    x = np.random.default_rng(10).standard_normal((1, 3, 5, 6)).astype(np.float32)
    close(run_ir(g, tflite_weights(blob, g, origins), x), T.run_tflite(blob, g, {g.input_nodes[0].name: x}),
          "instance norm file vs its IR", 1e-4)


def test_a_mean_over_h_and_w_kept_and_read_elsewhere_is_a_global_average_pool():
    blob = _tf_model(lambda x, rng: tf.nn.conv2d(tf.reduce_mean(x, axis=[1, 2], keepdims=True), _w(rng, 1, 1, 3, 4), 1,
                                                 "VALID"), [1, 5, 6, 3])
    assert ops(import_tflite(blob)) == ["global_avgpool", "conv2d"]


def torch_lrn(x, rng):
    """PyTorch's ``LocalResponseNorm(5, alpha=0.5, beta=0.75, k=1.5)`` after a conv as litert-torch
    writes it: squares, to NCHW, viewed [1, 1, C, H, W], zero-padded on the channels, a window sum
    (a slice here, replaced by :func:`_with_reduce_window`), times 1/size, viewed back, times
    alpha, plus k, to NHWC, to the power beta, the conv's output divided by that."""
    y = tf.nn.relu(tf.nn.conv2d(tf.transpose(x, [0, 2, 3, 1]), _w(rng, 3, 3, 3, 8), 1, "VALID") + _w(rng, 8))
    sq = tf.reshape(tf.transpose(tf.multiply(y, y), [0, 3, 1, 2]), [1, 1, 8, 4, 4])
    win = tf.pad(sq, [[0, 0], [0, 0], [2, 2], [0, 0], [0, 0]])[:, :, 2:10] * 0.2
    den = tf.transpose(tf.reshape(win, [1, 8, 4, 4]) * 0.5 + 1.5, [0, 2, 3, 1]) ** 0.75
    return y / den


def test_a_local_response_norm_as_litert_torch_writes_it():
    blob = _with_reduce_window(_tf_model(torch_lrn, [1, 3, 6, 6]), 5)
    g, origins = import_tflite_with_origins(blob, name="torch-lrn")
    assert ops(g) == ["conv2d", "relu", "lrn"]
    (lrn,) = (n for n in g.nodes.values() if n.op == "lrn")
    assert lrn.attrs == {"size": 5, "alpha": 0.5, "beta": 0.75, "bias": 1.5}
    x = np.random.default_rng(7).standard_normal((1, 3, 6, 6)).astype(np.float32)
    close(run_ir(g, tflite_weights(blob, g, origins), x), [_run_nchw(blob, x).transpose(0, 3, 1, 2)], "LRN file vs its IR", 1e-4)


def test_a_window_sum_outside_a_local_response_norm_is_refused():
    def build(x, rng):  # the same window, but the squares' sum is the output: no DIV ends it
        sq = tf.reshape(tf.multiply(x, x), [1, 1, 3, 4, 4])
        return tf.pad(sq, [[0, 0], [0, 0], [1, 1], [0, 0], [0, 0]])[:, :, 1:4]

    blob = _with_reduce_window(_tf_model(build, [1, 3, 4, 4]), 3)
    with pytest.raises(UnsupportedModelError, match=r"^m: TFLite operator \d+ \((RESHAPE|PAD), "):
        import_tflite(blob, name="m")


def test_a_channel_gate_times_a_spatial_gate_in_pytorch_layout():
    """BAM's attention as litert-torch writes it: a channel gate [1, C] viewed [1, C, 1, 1] (NCHW)
    times a spatial gate [1, H, W, 1] viewed [1, 1, H, W], broadcast to [1, C, H, W], then to
    NHWC: the operands in the file's order, whatever layout their unit axes allowed."""
    def build(x, rng):
        y = tf.nn.conv2d(x, _w(rng, 3, 3, 3, 6), 1, "VALID")
        ch = tf.reshape(tf.matmul(tf.reduce_mean(y, axis=[1, 2]), _w(rng, 6, 6)), [1, 6, 1, 1])
        sp = tf.reshape(tf.nn.conv2d(y, _w(rng, 1, 1, 6, 1), 1, "VALID"), [1, 1, 4, 4])
        return y * tf.transpose(tf.sigmoid(ch * sp), [0, 2, 3, 1])

    blob = _tf_model(build, [1, 6, 6, 3])
    g, _ = round_trip(blob, np.random.default_rng(8).standard_normal((1, 3, 6, 6)).astype(np.float32), "bam")
    assert g.op_counts()["mul"] == 2


@pytest.mark.parametrize("slope", [0.25, np.array([0.1, 0.2, 0.3, -0.4, 0.5, 0.6], np.float32)])
def test_a_prelu_as_litert_torch_writes_it(slope):
    """PyTorch's PReLU as ``relu(x) - slope * relu(-x)`` (RELU; MUL by -1 with a fused RELU; MUL by
    the slope; SUB): an IR prelu of one slope or one per channel."""
    def build(x, rng):
        y = tf.nn.conv2d(x, _w(rng, 3, 3, 3, 6), 1, "VALID")
        return tf.nn.relu(y) - tf.nn.relu(y * -1.0) * tf.constant(slope)

    blob = _tf_model(build, [1, 6, 6, 3])
    g, _ = round_trip(blob, np.random.default_rng(9).standard_normal((1, 3, 6, 6)).astype(np.float32), "prelu")
    assert ops(g) == ["conv2d", "prelu"]
    assert next(n for n in g.nodes.values() if n.op == "prelu").attrs["num_parameters"] == np.size(slope)


def test_a_per_channel_constant_of_an_nchw_tensor_held_in_another_layout():
    """NCHW tensors of different layouts concatenated (the standard layout makes the file's W the
    IR's channels), then a batch norm's MUL and ADD by [1, C, 1, 1] constants: the concatenation
    in the file's order, the batch norm on its channels."""
    def build(x, rng):
        a = tf.transpose(tf.nn.conv2d(tf.transpose(x, [0, 2, 3, 1]), _w(rng, 3, 3, 3, 4), 1, "VALID"), [0, 3, 1, 2])
        y = tf.concat([a, tf.transpose(a, [0, 1, 3, 2])], axis=1) * _w(rng, 1, 8, 1, 1) + _w(rng, 1, 8, 1, 1)
        return tf.nn.conv2d(tf.transpose(y, [0, 2, 3, 1]), _w(rng, 1, 1, 8, 5), 1, "VALID")

    blob = _tf_model(build, [1, 3, 6, 6])
    g, origins = import_tflite_with_origins(blob, name="nchw-bn")
    assert g.op_counts()["batchnorm"] == 1 and g.input_nodes[0].shape == [1, 3, 6, 6]
    x = np.random.default_rng(10).standard_normal((1, 3, 6, 6)).astype(np.float32)
    close(run_ir(g, tflite_weights(blob, g, origins), x), [_run_nchw(blob, x).transpose(0, 3, 1, 2)], "NCHW batch norm", 1e-4)
