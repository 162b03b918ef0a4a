"""Op configurations computed by the IR (generators.ops.op_config / config_id) and read by the
per-op predictors' featurizer (leaderboard.baselines.features.ir_config_ids)."""
import numpy as np

from generators import Graph
from generators.nasbench201 import build
from generators.ops import CONFIGS, config_id, op_config
from leaderboard.baselines.features import ConfigTable, _config_ids


def _net() -> Graph:
    g = Graph("cfg", source="test")
    x = g.input([1, 8, 16, 16])
    dense = g.add("conv2d", x, out_channels=16, kernel=3, stride=2, padding=1)
    dw = g.add("conv2d", dense, out_channels=16, kernel=5, stride=1, padding=2, groups=16)
    grouped = g.add("conv2d", dw, out_channels=16, kernel=1, groups=4)
    a, b = g.add_multi("split", grouped, sections=[8, 8])
    cat = g.add("concat", [a, b, a])
    padded = g.add("pad", cat, pads=[1, 1, 1, 1])
    pooled = g.add("maxpool", padded, kernel=2, stride=2)
    gap = g.add("global_avgpool", pooled)
    flat = g.add("flatten", gap)
    g.set_outputs(g.add("fc", flat, out_features=10))
    return g.validate()


def test_configurations_follow_table2_layout():
    g = _net()
    cfg = {n.op if n.op != "conv2d" else n.name: n.config for n in g.nodes.values()}
    assert cfg["input"] is None and g.nodes["input"].config_id == -1
    convs = [n.config for n in g.nodes.values() if n.op == "conv2d"]
    # (type, hin, cin, hout, cout, k, stride, pad, groups, fan-in)
    assert convs[0] == ("conv2d", 16, 8, 8, 16, 3, 2, 1, 1, 1)
    assert convs[1] == ("dwconv2d", 8, 16, 8, 16, 5, 1, 2, 16, 1)  # groups == input channels
    assert convs[2] == ("group_conv2d", 8, 16, 8, 16, 1, 1, 0, 4, 1)
    assert cfg["split"][5] == 2  # its "kernel" is the number of outputs
    assert cfg["concat"][5] == 3 and cfg["concat"][9] == 3  # inputs
    assert cfg["pad"][7] == 2  # spatial growth as padding
    assert cfg["global_avgpool"][5] == 5  # the window is the whole map (10 px padded, pooled by 2)
    assert cfg["fc"][:5] == ("fc", 1, 24, 1, 10)  # a vector is its features as channels at 1 px


def test_every_node_carries_the_configuration_of_its_shapes_and_loading_keeps_it():
    for g in (_net(), build(0), build(1234)):
        for node in g.nodes.values():
            ins = g.input_shapes(node)
            want = op_config(node.op, node.attrs, ins, node.shapes)
            assert node.config == want
            assert node.config_id == config_id(want) and (want is None or CONFIGS[node.config_id] == want)
        again = Graph.from_json(g.to_json())
        assert [n.config_id for n in again.nodes.values()] == [n.config_id for n in g.nodes.values()]


def test_featurizer_maps_ir_ids_to_its_own_table_and_interns_new_ones():
    table = ConfigTable()
    a, b = build(7), build(8)
    ids_a = _config_ids(a, table)
    n_after_a = len(table)
    ids_b = _config_ids(b, table)
    assert len(table) >= n_after_a
    for g, ids in ((a, ids_a), (b, ids_b)):
        configs = [n.config for n in g.nodes.values() if n.config is not None]
        assert len(ids) == len(configs)
        # the same ids as interning each configuration by hand
        assert list(ids) == [table.intern(c[0], c[1:]) for c in configs]
    assert np.array_equal(_config_ids(a, table), ids_a)  # stable


def _attention_net() -> Graph:
    # one attention step on 49 tokens of 64 channels: the shapes a transformer block gives its ops
    g = Graph("tokens", source="test")
    x = g.input([1, 49, 64])
    q = g.add("fc", x, out_features=96)                    # [1, 49, 96]
    heads = g.add("reshape", q, shape=[1, 49, 3, 32])
    heads = g.add("transpose", heads, perm=[0, 2, 1, 3])   # [1, 3, 49, 32]
    keys = g.add("transpose", heads, perm=[0, 1, 3, 2])    # [1, 3, 32, 49]
    scores = g.add("matmul", [heads, keys])                # [1, 3, 49, 49]
    probs = g.add("softmax", scores, axis=-1)
    g.set_outputs(g.add("matmul", [probs, heads]))         # [1, 3, 49, 32]
    return g.validate()


def test_token_and_attention_tensors_are_element_counts_and_products_keep_their_rows():
    from leaderboard.baselines.features import COLUMNS, category_of, derive

    g = _attention_net()
    by_op: dict[str, list[tuple]] = {}
    for n in g.nodes.values():
        by_op.setdefault(n.op, []).append(n.config)
    # (type, hin, cin, hout, cout, k = rows, stride, pad, groups = batch, fan-in)
    assert by_op["fc"] == [("fc", 1, 64, 1, 96, 49, 1, 0, 1, 1)]
    assert by_op["matmul"] == [("matmul", 1, 32, 1, 49, 49, 1, 0, 3, 2), ("matmul", 1, 49, 1, 32, 49, 1, 0, 3, 2)]
    # a non-square [1, 3, 49, 32] and the square scores [1, 3, 49, 49] alike: their element count
    assert by_op["transpose"][0][1:5] == (1, 3 * 49 * 32, 1, 3 * 49 * 32)
    assert by_op["softmax"] == [("softmax", 1, 3 * 49 * 49, 1, 3 * 49 * 49, 1, 1, 0, 1, 1)]
    # the featurizer's FLOPs of the products are the IR's multiply-accumulates, node by node
    nodes = [n for n in g.nodes.values() if n.op in ("fc", "matmul")]
    raw = np.array([n.config[1:] for n in nodes], dtype=float)
    cols = derive(raw, np.array([category_of(n.op) for n in nodes], dtype=object))
    flops = cols[:, COLUMNS.index("flops")]
    assert list(flops) == [49 * 64 * 96, 3 * 49 * 32 * 49, 3 * 49 * 49 * 32]
    memory = cols[:, COLUMNS.index("memory")]
    assert memory[1] == 3 * 49 * 32 + 3 * 32 * 49 + 3 * 49 * 49  # both operands and the product
    assert memory[0] == 49 * 64 + 49 * 96 + 64 * 96 + 96         # input, output, weights, bias
