"""IR -> nn-Meter IR: structure checks, and nn-Meter's own kernel detector when it is installed.

nn-Meter lives in its own environment (scripts/setup-nnmeter-env.sh); the cross-check runs
only when LATBENCH_NNMETER_PYTHON names that environment's python.
"""
from __future__ import annotations

import json
import os
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from generators import blocks as B
from generators.export import nnmeter_ir as nm
from generators.export.layout import NHWC, tensor_layouts
from generators.ir import Graph, split_ref
from generators.ops import OPS, OpSpec, register_op

# IR operator -> nn-Meter type (conv2d is dwconv when groups == input channels).
TYPES = {
    "input": "Placeholder",
    "conv2d": "conv",
    "fc": "fc",
    "batchnorm": "bn",
    "relu": "relu",
    "relu6": "relu",  # nn-Meter aliases Relu6 (and ONNX Clip) to relu
    "clip": "relu",
    "hswish": "hswish",
    "hsigmoid": "hardsigmoid",
    "sigmoid": "sigmoid",
    "swish": "swish",
    "tanh": "tanh",
    "leaky_relu": "leakyrelu",
    "prelu": "prelu",
    "add": "add",
    "mul": "mul",
    "scale": "mul",
    "shift": "add",
    "avgpool": "avgpool",
    "maxpool": "maxpool",
    "global_avgpool": "gap",
    "concat": "concat",
    "split": "split",
    "crop": "split",  # nn-Meter aliases ONNX Slice to split
    "channel_shuffle": "channelshuffle",
    "pad": "pad",
    "reshape": "reshape",
    "flatten": "reshape",
    "softmax": "softmax",
    "upsample": "upsample",
    "layernorm": "layernorm",
    "gelu": "gelu",
    "matmul": "matmul",
    "transpose": "transpose",
    "mean": "mean",
    "reduce_max": "reducemax",
    "reduce_sum": "reducesum",
    "instancenorm": "instancenorm",
    "lrn": "lrn",
    "resize": "upsample",
    "div": "div",
    "gather": "gather",
    "pos_embed": "add",  # an Add whose other operand is a weight
    "cls_token": "concat",  # a Concat whose other operand is a weight
}


def all_ops_graph() -> Graph:
    g = Graph(name="nnmeter-all-ops", source="test")
    x = g.input([1, 3, 32, 24])  # H != W so an NCHW/NHWC mix-up shows
    x = B.conv_bn_act(g, x, 16, 3, stride=2, act="relu6")
    x = B.inverted_residual(g, x, 24, expansion=3, se=True, act="hswish")  # dwconv, SE (gap, relu, hsigmoid, mul)
    a, b = g.add_multi("split", x, sections=[8, 16])
    a = B.conv_bn_act(g, a, 8, 3, act="swish")
    b = B.conv_bn_act(g, b, 16, 1, act="sigmoid", bn=False)
    x = g.add("concat", [a, b, a])  # a read twice: two edges from one node
    x = g.add("channel_shuffle", x, groups=4)
    x = g.add("pad", x, pads=[1, 0, 0, 1])
    x = g.add("maxpool", x, kernel=3, stride=2, padding=1, ceil_mode=True)
    y = g.add("tanh", g.add("avgpool", x, kernel=3, stride=1, padding=1))
    z = B.conv_bn_act(g, x, 32, 1, act="leaky_relu")
    x = g.add("add", [x, y, z])
    x = g.add("prelu", g.add("add", [x, x]))
    x = g.add("crop", x, crops=[1, 0, 0, 1])
    x = g.add("upsample", x, scale=2)
    x = g.add("clip", g.add("shift", g.add("scale", x, factor=0.5), value=0.25), min=0.0, max=1.0)
    x = g.add("reshape", x, shape=[1, 32, 12, 16])
    x = B.conv_bn_act(g, x, 32, 3, groups=4)  # grouped, not depthwise: conv
    x = g.add("lrn", g.add("instancenorm", x), size=5)
    x = g.add("div", [x, g.add("shift", g.add("sigmoid", x), value=0.5)])
    x = g.add("add", [x, g.add("resize", g.add("avgpool", x, kernel=5, stride=5), size=g.shape(x)[2:])])
    x = g.add("mul", [x, g.add("sigmoid", g.add("reduce_max", x, axis=1, keepdim=True))])
    x = g.add("reduce_sum", g.add("reshape", x, shape=[1, 2, 16, 12, 16]), axis=1)
    x = g.add("flatten", g.add("global_avgpool", g.add("gather", x, indices=[15 - k for k in range(16)])))
    x = g.add("batchnorm", g.add("fc", g.add("gather", x, indices=[0, 0, 3, 15]), out_features=16))
    logits = g.add("fc", g.add("relu", x), out_features=10)
    return g.set_outputs(logits, g.add("softmax", logits)).validate()


def mobilenet_like() -> Graph:
    g = Graph(name="nnmeter-mbv3-tiny", source="test")
    x = g.input([1, 3, 64, 64])
    x = B.conv_bn_act(g, x, 16, 3, stride=2, act="hswish")
    x = B.inverted_residual(g, x, 16, expansion=1, se=True, act="relu")
    x = B.inverted_residual(g, x, 24, stride=2, expansion=4, act="relu")
    x = B.inverted_residual(g, x, 40, kernel=5, stride=2, expansion=4, se=True, act="hswish")
    x = B.conv_bn_act(g, x, 96, 1, act="hswish")
    return g.set_outputs(B.classifier(g, x, 100, hidden=128, act="hswish")).validate()


def shufflenet_like() -> Graph:
    g = Graph(name="nnmeter-shuffle-tiny", source="test")
    x = g.input([1, 3, 32, 32])
    x = B.conv_bn_act(g, x, 24, 3, stride=2)
    x = g.add("maxpool", x, kernel=3, stride=2, padding=1)
    for _ in range(2):
        a, b = g.add_multi("split", x, sections=[12, 12])
        b = B.conv_bn_act(g, b, 12, 1)
        b = B.conv_bn_act(g, b, 12, 3, groups=12, act=None)
        b = B.conv_bn_act(g, b, 12, 1)
        x = g.add("channel_shuffle", g.add("concat", [a, b]), groups=2)
    return g.set_outputs(B.classifier(g, x, 10)).validate()


def transformer_like() -> Graph:
    """A conv-bn-relu patch embedding (a fusable kernel), a position embedding of the image, and
    a ViT encoder block over its tokens after a class token and their position embedding."""
    g = Graph(name="nnmeter-vit-tiny", source="test")
    x = B.conv_bn_act(g, g.input([1, 3, 16, 12]), 16, 4, stride=4, padding=0)
    x = g.add("pos_embed", g.add("layernorm", x, axis=1))
    t = g.add("transpose", g.add("reshape", x, shape=[1, 16, 12]), perm=[0, 2, 1])
    t = g.add("pos_embed", g.add("cls_token", t))
    t = B.encoder_block(g, t, heads=2, mlp_ratio=2)
    return g.set_outputs(g.add("fc", g.add("mean", g.add("layernorm", t), axis=1), out_features=10)).validate()


GRAPHS = {"all_ops": all_ops_graph, "mobilenet": mobilenet_like, "shufflenet": shufflenet_like,
          "transformer": transformer_like}


@pytest.fixture(scope="module")
def graphs() -> dict[str, Graph]:
    return {k: f() for k, f in GRAPHS.items()}


def test_every_operator_has_an_nnmeter_type(graphs):
    assert set(nm.NNMETER_OPS) >= set(OPS), f"no nn-Meter type for {sorted(set(OPS) - set(nm.NNMETER_OPS))}"
    seen: dict[str, set[str]] = {}
    for g in graphs.values():
        for node in g.nodes.values():
            seen.setdefault(node.op, set()).add(nm.nnmeter_type(g, node))
    assert set(OPS) <= set(seen), f"fixture graphs miss {sorted(set(OPS) - set(seen))}"
    for op, types in seen.items():
        assert types <= {TYPES[op], "dwconv"} if op == "conv2d" else types == {TYPES[op]}, (op, types)
    assert seen["conv2d"] == {"conv", "dwconv"}


@pytest.mark.parametrize("name", list(GRAPHS))
def test_structure(graphs, name):
    g = graphs[name]
    ir = nm.to_nnmeter_ir(g)
    layouts = tensor_layouts(g)
    assert list(ir) == list(g.nodes)  # every node, in topological order
    edges_in, edges_out = Counter(), Counter()
    for node_name, entry in ir.items():
        node = g.nodes[node_name]
        assert set(entry) == {"inbounds", "outbounds", "attr"}
        assert set(entry["attr"]) == {"type", "attr", "input_shape", "output_shape"}
        assert "type" not in entry["attr"]["attr"]
        assert entry["inbounds"] == [split_ref(r)[0] for r in node.inputs]
        edges_in.update((src, node_name) for src in entry["inbounds"])
        edges_out.update((node_name, dst) for dst in entry["outbounds"])
        for src in entry["inbounds"]:
            assert src in ir
        # NHWC for images (channels last, H before W), the IR's order for other tensors
        ins, outs = entry["attr"]["input_shape"], entry["attr"]["output_shape"]
        assert len(ins) == len(node.inputs) and len(outs) == len(node.shapes)
        images = [layouts[split_ref(r)[0]] == NHWC for r in node.inputs] + [layouts[node_name] == NHWC] * len(node.shapes)
        for got, ref, image in zip(ins + outs, [g.tensor_shape(r) for r in node.inputs] + node.shapes, images):
            assert got == ([ref[0], ref[2], ref[3], ref[1]] if image else ref)
        kind, attr = entry["attr"]["type"], entry["attr"]["attr"]
        if kind in ("conv", "dwconv", "maxpool", "avgpool"):
            assert attr["ks"] == node.attrs["kernel"] and attr["strides"] == node.attrs["stride"]
        if kind in ("conv", "dwconv"):
            assert outs[0][-1] == node.attrs["out_channels"] and attr["group"] == node.attrs["groups"]
            assert (kind == "dwconv") == (node.attrs["groups"] == ins[0][-1])
        if node.op in ("concat", "split") and len(ins[0]) == 4 and images[0]:
            assert attr["axis"] == {1: 3, 2: 1, 3: 2}[node.attrs["axis"] % 4]
        if node.op in ("softmax", "mean", "layernorm") and not images[0]:
            assert attr["axis"] == node.attrs["axis"] % len(g.tensor_shape(node.inputs[0]))
    assert edges_in == edges_out  # outbounds mirror inbounds, edge for edge
    heads = [n for n, e in ir.items() if not e["inbounds"]]
    assert heads == [n.name for n in g.input_nodes]
    tails = {n for n, e in ir.items() if not e["outbounds"]}
    assert tails and tails <= {split_ref(r)[0] for r in g.outputs}  # no dead ends but the outputs


def test_export_file(graphs, tmp_path):
    g = graphs["all_ops"]
    a = nm.export_nnmeter_ir(g, tmp_path / "a.json")
    b = nm.export_nnmeter_ir(g, tmp_path / "b.json")
    assert a["sha256"] == b["sha256"] and a["format"] == "nnmeter-ir" and a["model_id"] == g.model_id
    assert a["nodes"] == len(g.nodes) and sum(a["type_counts"].values()) == len(g.nodes)
    assert a["output_nodes"] == ["fc_1", "softmax_0"]
    loaded = json.loads((tmp_path / "a.json").read_text())
    assert loaded == nm.to_nnmeter_ir(g)
    assert list(loaded) == list(g.nodes)
    assert not list(tmp_path.glob("*.tmp"))


def test_unsupported_operator_names_node_and_format():
    op = "test_only_identity"
    register_op(OpSpec(op, lambda a, ins: [list(ins[0])]))
    try:
        g = Graph(name="unsupported")
        g.set_outputs(g.add(op, g.input([1, 4, 8, 8]), name="mystery"))
        with pytest.raises(nm.ExportError) as e:
            nm.to_nnmeter_ir(g)
        msg = str(e.value)
        assert "'mystery'" in msg and op in msg and "(nnmeter-ir)" in msg and "\n" not in msg
    finally:
        del OPS[op]


# Run inside nn-Meter's environment: load each file as model type "nnmeter-ir", detect
# kernels with and without a fusion-rule file, extract the predictor features.
NNMETER_SCRIPT = r"""
import json, sys
from nn_meter.ir_converter import model_file_to_graph
from nn_meter.kernel_detector import KernelDetector
from nn_meter.predictor.prediction.extract_feature import get_predict_features

rules, out, paths = sys.argv[1], sys.argv[2], sys.argv[3:]
result = {}
for path in paths:
    graph = model_file_to_graph(path, "nnmeter-ir")
    per_rules = {}
    for rule_file in (None, rules):
        kd = KernelDetector(rule_file)
        kd.load_graph(graph)
        kernels = kd.get_kernels()
        features = get_predict_features(kernels)
        per_rules["rules" if rule_file else "none"] = {"kernels": [k["op"] for k in kernels], "features": len(features)}
    result[path] = per_rules
with open(out, "w") as f:
    json.dump(result, f)
"""

# Fusion rules in the format of nn-Meter's predictor packages (fusion_rules.json): the
# operator pairs a mobile CPU backend fuses.
RULES = {f"BF_{a}_{b}": {"obey": True} for a, b in
         [("conv", "bn"), ("conv", "relu"), ("dwconv", "bn"), ("dwconv", "relu"), ("bn", "relu"), ("add", "relu"), ("fc", "relu")]}
RULES["MON"] = {"obey": False}


def test_nnmeter_kernel_detector_reads_our_graphs(graphs, tmp_path):
    python = os.environ.get("LATBENCH_NNMETER_PYTHON")
    if not python:
        pytest.skip("nn-Meter not configured: run scripts/setup-nnmeter-env.sh and set LATBENCH_NNMETER_PYTHON")
    if not Path(python).exists():
        pytest.fail(f"LATBENCH_NNMETER_PYTHON={python} does not exist")
    paths = [nm.export_nnmeter_ir(g, tmp_path / f"{name}.json")["path"] for name, g in graphs.items()]
    (tmp_path / "rules.json").write_text(json.dumps(RULES))
    (tmp_path / "check.py").write_text(NNMETER_SCRIPT)
    out = tmp_path / "result.json"
    proc = subprocess.run(
        [python, str(tmp_path / "check.py"), str(tmp_path / "rules.json"), str(out), *paths],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(out.read_text())
    by_name = {Path(p).stem: r for p, r in result.items()}
    for name, r in by_name.items():
        assert r["none"]["kernels"] and r["rules"]["kernels"], name
        assert len(r["rules"]["kernels"]) < len(r["none"]["kernels"]), name  # the rules fused something
    mb = by_name["mobilenet"]["rules"]["kernels"]
    # nn-Meter recognises our squeeze-and-excite and classifier blocks and fuses conv-bn-act
    assert mb.count("se") == 2 and "gap" in mb and "hswish" in mb
    assert "conv-bn-relu" in mb and "dwconv-bn-relu" in mb and "fc" in mb
    sh = by_name["shufflenet"]["rules"]["kernels"]
    assert sh.count("split") == 2 and sh.count("channelshuffle") == 2 and sh.count("concat") == 2


def test_attention_tensors_keep_the_irs_order(graphs):
    g = graphs["transformer"]
    ir = nm.to_nnmeter_ir(g)
    ln = next(n for n in g.nodes.values() if n.op == "layernorm")  # the channel norm of the image
    assert ir[ln.name]["attr"]["attr"]["axis"] == 3 and ir[ln.name]["attr"]["output_shape"] == [[1, 4, 3, 16]]
    scores = next(n for n in g.nodes.values() if n.op == "matmul")
    assert ir[scores.name]["attr"]["output_shape"] == [[1, 2, 13, 13]]  # [1, heads, N, N], not transposed
    soft = next(n for n in g.nodes.values() if n.op == "softmax")
    assert ir[soft.name]["attr"]["attr"]["axis"] == 3
    pos_image, pos_tokens = (n for n in g.nodes.values() if n.op == "pos_embed")
    assert ir[pos_image.name]["attr"]["output_shape"] == [[1, 4, 3, 16]] and ir[pos_image.name]["inbounds"] == [ln.name]
    assert ir[pos_tokens.name]["attr"]["output_shape"] == [[1, 13, 16]]
    cls = next(n for n in g.nodes.values() if n.op == "cls_token")
    assert ir[cls.name]["attr"]["attr"] == {"axis": 1, "const_shape": [1, 1, 16]}
    assert ir[cls.name]["attr"]["input_shape"] == [[1, 12, 16]] and ir[cls.name]["attr"]["output_shape"] == [[1, 13, 16]]
