import json

import pytest

from generators import OPS, Graph, IRError
from generators.blocks import classifier, conv_bn_act, inverted_residual, squeeze_excite


def small_net(width: int = 16, name: str = "net") -> Graph:
    g = Graph(name, source="test")
    x = g.input([1, 3, 32, 32])
    x = conv_bn_act(g, x, width, 3, stride=2, act="relu6")
    x = inverted_residual(g, x, width, 3, expansion=3, se=True)
    a, b = g.add_multi("split", x, sections=[width // 2, width // 2])
    x = g.add("concat", [g.add("hswish", a), g.add("swish", b)])
    x = g.add("channel_shuffle", x, groups=2)
    g.set_outputs(g.add("softmax", classifier(g, x, 10)))
    return g.validate()


def ir_doc(nodes, outputs):
    return json.dumps({"format": "latbench-ir", "version": 1, "nodes": nodes, "outputs": outputs})


def test_round_trip_is_byte_identical_and_keeps_the_id():
    g = small_net()
    text = g.to_json()
    g2 = Graph.from_json(text)
    assert g2.to_json() == text
    assert g2.model_id == g.model_id
    assert [n.shapes for n in g2.nodes.values()] == [n.shapes for n in g.nodes.values()]


def test_model_id_ignores_names_labels_and_metadata_but_not_structure():
    a, b = small_net(name="a"), small_net(name="b")
    b.meta["note"] = "other"
    renamed = json.loads(a.to_json())
    mapping = {n["name"]: f"n{i}" for i, n in enumerate(renamed["nodes"])}

    def rename(ref):
        base, sep, k = ref.rpartition(":")
        return f"{mapping[base]}:{k}" if sep and k.isdigit() else mapping[ref]

    for n in renamed["nodes"]:
        n["name"], n["inputs"], n["block"] = mapping[n["name"]], [rename(r) for r in n["inputs"]], None
        n.pop("shapes")
    renamed["outputs"] = [rename(r) for r in renamed["outputs"]]
    del renamed["model_id"]
    assert Graph.from_dict(renamed).model_id == a.model_id == b.model_id
    assert small_net(width=24).model_id != a.model_id


def test_shape_inference_and_costs_of_a_conv_by_hand():
    g = Graph()
    x = g.input([1, 8, 15, 15])
    y = g.add("conv2d", x, out_channels=12, kernel=[3, 5], stride=2, padding=[1, 2], groups=4, bias=True)
    g.set_outputs(y).validate()
    assert g.shape(y) == [1, 12, 8, 8]
    (cost,) = [c for c in g.costs() if c.op == "conv2d"]
    assert cost.params == 12 * 2 * 3 * 5 + 12
    assert cost.macs == 12 * 8 * 8 * 2 * 3 * 5
    assert g.flops == cost.macs
    elems = 8 * 15 * 15 + 12 * 8 * 8 + cost.params
    assert g.memory_access("fp32") == 4 * elems and g.memory_access("int8") == elems
    with pytest.raises(IRError, match="unknown precision 'fp64'"):
        g.memory_access("fp64")


def test_lrn_and_div_shapes_and_costs():
    g = Graph()
    x = g.input([1, 8, 6, 5])
    n = g.add("lrn", x, size=5, alpha=2e-4, beta=0.5, bias=2)
    d = g.add("div", [n, g.add("global_avgpool", x)])  # broadcasts [1, 8, 1, 1] over the map
    g.set_outputs(d).validate()
    assert g.shape(n) == g.shape(d) == [1, 8, 6, 5]
    assert g.nodes[n].attrs == {"size": 5, "alpha": 2e-4, "beta": 0.5, "bias": 2}
    assert {c.op: (c.params, c.macs) for c in g.costs() if c.op in ("lrn", "div")} == {"lrn": (0, 0), "div": (0, 0)}
    assert Graph.from_json(g.to_json()).model_id == g.model_id
    assert g.nodes[g.add("lrn", x, size=3)].attrs == {"size": 3, "alpha": 1e-4, "beta": 0.75, "bias": 1.0}


def test_gather_shapes_and_costs():
    g = Graph()
    x = g.input([1, 8, 6, 5])
    y = g.add("gather", x, indices=[7, 7, 0, 3])  # repeats and omissions, as CondenseNet's may
    v = g.add("gather", g.add("flatten", g.add("global_avgpool", x)), indices=list(range(7, -1, -1)) * 300)
    g.set_outputs(y, v).validate()
    assert g.shape(y) == [1, 4, 6, 5] and g.shape(v) == [1, 2400]
    assert g.nodes[y].attrs == {"indices": [7, 7, 0, 3], "axis": 1}
    costs = {c.name: c for c in g.costs() if c.op == "gather"}
    assert [(c.params, c.macs) for c in costs.values()] == [(0, 0), (0, 0)]
    assert costs[y].memory_elements == 8 * 30 + 4 * 30  # the copy: what it reads and writes
    assert Graph.from_json(g.to_json()).model_id == g.model_id
    with pytest.raises(IRError, match=r"^node 'o' \(gather\): gather index 8 out of range for the 8 elements of axis 1"):
        g.add("gather", x, indices=[0, 8], name="o")
    with pytest.raises(IRError, match=r"^node 'b' \(gather\): gather on the batch axis 0"):
        g.add("gather", x, indices=[0], axis=0, name="b")
    with pytest.raises(IRError, match=r"^node 'e' \(gather\): indices must be a list of 1 to \d+ non-negative ints"):
        g.add("gather", x, indices=[], name="e")


def test_pad_of_the_channels():
    g = Graph()
    x = g.input([1, 4, 5, 6])
    assert g.shape(g.add("pad", x, pads=[0, 0, 0, 0, 0, 3])) == [1, 7, 5, 6]
    assert g.shape(g.add("pad", x, pads=[1, 0, 2, 1, 2, 1], value=0.5)) == [1, 7, 6, 9]
    with pytest.raises(IRError, match=r"^node 'p' \(pad\): pads must be four .* or six .*, got \[0, 0, 0, 0, 1\]"):
        g.add("pad", x, pads=[0, 0, 0, 0, 1], name="p")


def test_pool_ceil_mode_and_global_pool_shapes():
    g = Graph()
    x = g.input([1, 4, 7, 7])
    p = g.add("maxpool", x, kernel=3, stride=2, ceil_mode=True)
    q = g.add("avgpool", x, kernel=3, stride=2)
    r = g.add("global_avgpool", x)
    assert g.shape(p) == [1, 4, 3, 3] and g.shape(q) == [1, 4, 3, 3] and g.shape(r) == [1, 4, 1, 1]
    g2 = Graph()
    x = g2.input([1, 4, 8, 8])
    assert g2.shape(g2.add("maxpool", x, kernel=3, stride=2, ceil_mode=True)) == [1, 4, 4, 4]


def test_every_operator_has_shape_inference_and_is_exercised_somewhere():
    g = small_net()
    used = set(g.op_counts()) | {"input"}
    more = Graph()
    x = more.input([1, 4, 8, 8])
    extra = [
        more.add("pad", x, pads=[1, 0, 2, 1]),
        more.add("avgpool", x, kernel=2, stride=2),
        more.add("maxpool", x, kernel=2, stride=2),
        more.add("mul", [x, x]),
        more.add("add", [x, x]),
        more.add("relu", x),
        more.add("sigmoid", x),
        more.add("hsigmoid", x),
        more.add("tanh", x),
        more.add("leaky_relu", x, alpha=0.1),
        more.add("prelu", x, num_parameters=4),
        more.add("reshape", x, shape=[1, 4, 64]),
        more.add("batchnorm", x),
        more.add("scale", x, factor=0.5),
        more.add("shift", x, value=-1),
        more.add("clip", x),
        more.add("crop", x, crops=[1, 0, 2, 1]),
        more.add("upsample", x, scale=2),
        more.add("layernorm", x, axis=1),
        more.add("gelu", x),
        more.add("matmul", [x, x]),
        more.add("transpose", x, perm=[0, 1, 3, 2]),
        more.add("mean", x, axis=2),
        more.add("reduce_max", x, axis=1, keepdim=True),
        more.add("reduce_sum", more.add("reshape", x, shape=[1, 2, 2, 8, 8]), axis=1),
        more.add("instancenorm", x),
        more.add("pos_embed", x),
        more.add("lrn", x, size=3),
        more.add("div", [x, x]),
        more.add("resize", x, size=[3, 13]),
        more.add("gather", x, indices=[3, 0]),
    ]
    tokens = more.input([1, 6, 4], name="tokens")
    extra.append(more.add("cls_token", tokens))
    used |= {more.nodes[r].op for r in extra}
    assert more.shape(extra[-1]) == [1, 7, 4] and more.shape(extra[-6]) == [1, 4, 8, 8]
    assert more.shape(extra[-3]) == [1, 4, 3, 13] and more.shape(extra[-2]) == [1, 2, 8, 8]
    assert more.shape(extra[0]) == [1, 4, 9, 11]  # pads are [top, bottom, left, right]
    assert set(OPS) <= used, f"operators without a test: {set(OPS) - used}"


@pytest.mark.parametrize(
    "nodes,outputs,message",
    [
        ([{"name": "a", "op": "relu", "inputs": ["b"]}, {"name": "b", "op": "relu", "inputs": ["a"]}], ["a"], "cycle through nodes a -> b -> a"),
        ([{"name": "x", "op": "input", "attrs": {"shape": [1, 3, 8, 8]}}, {"name": "y", "op": "relu", "inputs": ["z"]}], ["y"], "node 'y' \\(relu\\): dangling input 'z'"),
        (
            [
                {"name": "x", "op": "input", "attrs": {"shape": [1, 3, 8, 8]}},
                {"name": "c", "op": "conv2d", "inputs": ["x"], "attrs": {"out_channels": 4, "kernel": 1}},
                {"name": "s", "op": "add", "inputs": ["x", "c"]},
            ],
            ["s"],
            "node 's' \\(add\\): input shapes .* do not broadcast",
        ),
        (
            [
                {"name": "x", "op": "input", "attrs": {"shape": [1, 3, 8, 8]}},
                {"name": "p", "op": "maxpool", "inputs": ["x"], "attrs": {"kernel": 2, "stride": 2}},
                {"name": "k", "op": "concat", "inputs": ["x", "p"]},
            ],
            ["k"],
            "node 'k' \\(concat\\): inputs .* differ outside the concat axis 1",
        ),
        (
            [{"name": "x", "op": "input", "attrs": {"shape": [1, 6, 8, 8]}}, {"name": "c", "op": "conv2d", "inputs": ["x"], "attrs": {"out_channels": 8, "kernel": 3, "groups": 4}}],
            ["c"],
            "node 'c' \\(conv2d\\): groups=4 does not divide input channels 6",
        ),
        ([{"name": "x", "op": "input", "attrs": {"shape": [1, 6, 8, 8]}}, {"name": "c", "op": "swiglu", "inputs": ["x"]}], ["c"], "node 'c' \\(swiglu\\): unknown operator type 'swiglu'"),
        ([{"name": "x", "op": "input", "attrs": {"shape": [1, 6, 8, 8]}}, {"name": "c", "op": "relu", "inputs": ["x"], "attrs": {"inplace": True}}], ["c"], "unknown attribute\\(s\\) \\['inplace'\\]"),
        (
            [{"name": "x", "op": "input", "attrs": {"shape": [1, 6, 4, 4]}}, {"name": "c", "op": "conv2d", "inputs": ["x"], "attrs": {"out_channels": 8, "kernel": 7}}],
            ["c"],
            "node 'c' \\(conv2d\\): conv2d window 7 .* larger than padded input",
        ),
        (
            [{"name": "x", "op": "input", "attrs": {"shape": [1, 6, 4, 4]}}, {"name": "n", "op": "lrn", "inputs": ["x"], "attrs": {"size": 0}}],
            ["n"],
            "node 'n' \\(lrn\\): size must be an int in \\[1, ",
        ),
        (
            [{"name": "x", "op": "input", "attrs": {"shape": [1, 6, 4, 4]}}, {"name": "n", "op": "lrn", "inputs": ["x"], "attrs": {"size": 5, "beta": "0.75"}}],
            ["n"],
            "node 'n' \\(lrn\\): beta must be a finite number",
        ),
        (
            [{"name": "x", "op": "input", "attrs": {"shape": [1, 24]}}, {"name": "n", "op": "lrn", "inputs": ["x"], "attrs": {"size": 5}}],
            ["n"],
            "node 'n' \\(lrn\\): input must have rank 4, got shape \\[1, 24\\]",
        ),
        (
            [{"name": "x", "op": "input", "attrs": {"shape": [1, 6, 4, 4]}}, {"name": "n", "op": "lrn", "inputs": ["x"]}],
            ["n"],
            "node 'n' \\(lrn\\): missing required attribute 'size'",
        ),
        (
            [{"name": "x", "op": "input", "attrs": {"shape": [1, 6, 4, 4]}}, {"name": "y", "op": "input", "attrs": {"shape": [1, 6, 4, 1]}},
             {"name": "q", "op": "div", "inputs": ["x", "y", "x"]}],
            ["q"],
            "node 'q' \\(div\\): takes 2 input\\(s\\), got 3",
        ),
        (
            [{"name": "x", "op": "input", "attrs": {"shape": [1, 6, 4, 4]}}, {"name": "y", "op": "input", "attrs": {"shape": [1, 6, 2, 4]}},
             {"name": "q", "op": "div", "inputs": ["x", "y"]}],
            ["q"],
            "node 'q' \\(div\\): input shapes .* do not broadcast",
        ),
        (
            [{"name": "x", "op": "input", "attrs": {"shape": [1, 6, 4, 4]}}, {"name": "r", "op": "relu", "inputs": ["x"]}, {"name": "d", "op": "relu", "inputs": ["x"]}],
            ["r"],
            "node 'd' \\(relu\\): output is never used",
        ),
    ],
)
def test_invalid_ir_gets_one_line_error_naming_the_node(nodes, outputs, message):
    with pytest.raises(IRError, match=message) as exc:
        Graph.from_json(ir_doc(nodes, outputs), where="bad.json")
    assert "\n" not in str(exc.value) and str(exc.value).startswith("bad.json: ")


@pytest.mark.parametrize(
    "text,message",
    [
        ("{not json", "malformed JSON at line 1"),
        ("[]", "expected a JSON object"),
        ('{"format": "onnx"}', "not a latbench-ir file"),
        ('{"format": "latbench-ir", "version": 7}', "unsupported IR version 7"),
    ],
)
def test_malformed_documents(text, message):
    with pytest.raises(IRError, match=message):
        Graph.from_json(text, where="m.json")


def test_tampered_model_id_and_shapes_are_detected(tmp_path):
    d = json.loads(small_net().to_json())
    d["model_id"] = "0" * 16
    with pytest.raises(IRError, match="model_id 0000000000000000 does not match"):
        Graph.from_dict(d, "t.json")
    d = json.loads(small_net().to_json())
    d["nodes"][1]["shapes"] = [[1, 2, 3, 4]]
    with pytest.raises(IRError, match="stored shapes"):
        Graph.from_dict(d, "t.json")
    with pytest.raises(IRError, match="cannot read"):
        Graph.load(tmp_path / "missing.json")


def test_parallel_branches_reload_in_file_order():
    g = Graph()
    x = g.input([1, 4, 8, 8])
    a = g.add("relu", x)
    b = g.add("relu", a)
    c = g.add("sigmoid", x)
    g.set_outputs(g.add("add", [b, c])).validate()
    again = Graph.from_json(g.to_json())
    assert list(again.nodes) == list(g.nodes) and again.model_id == g.model_id
    d = json.loads(g.to_json())
    d["nodes"] = d["nodes"][::-1]  # any order loads, into a topological one
    assert list(Graph.from_dict(d).nodes)[0] == "input"


def test_block_labels_nest():
    g = Graph()
    x = g.input([1, 16, 8, 8])
    with g.block("block3"):
        y = squeeze_excite(g, x)
    labels = {n.block for n in g.nodes.values() if n.op != "input"}
    assert labels == {"block3/se"}
    assert g.nodes[y].op == "mul"


def test_save_is_atomic_and_loadable(tmp_path):
    g = small_net()
    p = g.save(tmp_path / "a" / f"{g.model_id}.json")
    assert not list(tmp_path.rglob("*.tmp"))
    assert Graph.load(p).model_id == g.model_id
