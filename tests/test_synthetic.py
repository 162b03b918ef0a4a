"""The synthetic NAS space of the USC paper (generators/synthetic.py)."""
from __future__ import annotations

from collections import Counter, defaultdict

import pytest

from generators.ir import Graph
from generators.sources import SOURCES
from generators.synthetic import (
    BLOCK_TYPES,
    SyntheticConfig,
    SyntheticSource,
    build_network,
    coerce_config,
    validate_config,
)

N = 1000  # enough for every parameter value to appear, large group sizes with groups > 1 included
SIZES = [112, 56, 56, 28, 28, 14, 14, 7, 7]  # after each block, default schedule


def _generate(cfg: SyntheticConfig, seed: int = 0) -> list[Graph]:
    return list(SOURCES.get("synthetic").generate(cfg, seed))


@pytest.fixture(scope="module")
def graphs() -> list[Graph]:
    return _generate(SyntheticConfig(n=N), seed=0)


@pytest.fixture(scope="module")
def blocks(graphs) -> list[dict]:
    return [b for g in graphs for b in g.meta["blocks"]]


def _block_outputs(g: Graph) -> dict[int, list[int]]:
    """Shape of the last node of each block (the block's output, nodes being in order)."""
    out: dict[int, list[int]] = {}
    for node in g.nodes.values():
        if node.block and node.block.startswith("block"):
            out[int(node.block.split("/")[0][5:])] = node.shape
    return out


# ---------------------------------------------------------------- registry and determinism
def test_registered_source():
    src = SOURCES.get("synthetic")
    assert src is SyntheticSource and src.Config is SyntheticConfig
    assert SyntheticConfig().n == 20


def test_same_seed_gives_identical_json():
    a = [g.to_json() for g in _generate(SyntheticConfig(n=5), seed=3)]
    b = [g.to_json() for g in _generate(SyntheticConfig(n=5), seed=3)]
    assert a == b


def test_smaller_n_is_a_prefix():
    small = [g.to_json() for g in _generate(SyntheticConfig(n=5), seed=11)]
    big = [g.to_json() for g in _generate(SyntheticConfig(n=10), seed=11)]
    assert big[:5] == small


def test_network_is_a_function_of_seed_and_index():
    cfg = SyntheticConfig(n=8)
    assert build_network(cfg, 4, 7).to_json() == _generate(cfg, seed=4)[7].to_json()
    assert _generate(SyntheticConfig(n=1), seed=1)[0].model_id != _generate(SyntheticConfig(n=1), seed=2)[0].model_id


def test_default_config_from_mapping_and_omegaconf():
    from omegaconf import OmegaConf

    ref = [g.to_json() for g in _generate(SyntheticConfig(n=3, strides=[2, 1, 1, 2, 1, 2, 1, 2, 1]))]
    as_dict = {"n": 3, "strides": [2, 1, 1, 2, 1, 2, 1, 2, 1]}
    assert [g.to_json() for g in _generate(as_dict)] == ref
    node = OmegaConf.merge(OmegaConf.structured(SyntheticConfig), as_dict)
    assert [g.to_json() for g in _generate(node)] == ref
    with pytest.raises(ValueError, match=r"^nn: unknown key"):
        coerce_config({"nn": 3})


# ---------------------------------------------------------------- every graph is well formed
def test_graphs_validate_and_have_the_right_interface(graphs):
    for i, g in enumerate(graphs):
        g.validate()
        assert g.source == "synthetic"
        assert g.name == f"synthetic-0-{i:05d}"
        assert g.meta["space"] == "usc" and g.meta["seed"] == 0 and g.meta["index"] == i
        assert len(g.meta["blocks"]) == 9
        assert [n.shape for n in g.input_nodes] == [[1, 3, 224, 224]]
        assert [g.tensor_shape(r) for r in g.outputs] == [[1, 1000]]


def test_ids_are_unique(graphs):
    assert len({g.model_id for g in graphs}) == len(graphs)


def test_json_round_trip(graphs):
    for g in graphs[:10]:
        assert Graph.from_json(g.to_json()).to_json() == g.to_json()


def test_block_labels_and_resolution_schedule(graphs):
    for g in graphs:
        labels = {n.block.split("/")[0] + "/" + n.block.split("/")[1] for n in g.nodes.values() if n.block and n.block.startswith("block")}
        assert labels == {f"block{j}/{b['type']}" for j, b in enumerate(g.meta["blocks"], 1)}
        assert {n.block.split("/")[0] for n in g.nodes.values() if n.block} >= {"stem", "head", "classifier"}
        outs = _block_outputs(g)
        for j, b in enumerate(g.meta["blocks"], 1):
            assert outs[j] == [1, b["out_channels"], SIZES[j - 1], SIZES[j - 1]], (g.name, j)
        head = [n for n in g.nodes.values() if n.block == "head" and n.op == "conv2d"]
        assert len(head) == 1 and head[0].attrs["kernel"] == [1, 1]
        assert head[0].attrs["out_channels"] == g.meta["head_channels"]


# ---------------------------------------------------------------- channel constraints
def test_channels_follow_their_ranges(graphs):
    for g in graphs:
        prev = 32  # the stem
        for j, b in enumerate(g.meta["blocks"], 1):
            assert b["in_channels"] == prev
            if b["type"] in ("conv", "dwsep", "bottleneck"):
                lo, hi = (8, 80) if j <= 5 else (80, 400)
                assert lo <= b["out_channels"] <= hi, (g.name, j, b)
            else:  # pool and split keep their input's channels
                assert b["out_channels"] == b["in_channels"]
            prev = b["out_channels"]
        assert 1200 <= g.meta["head_channels"] <= 1800


def test_grouped_convs_are_consistent(graphs):
    for g in graphs:
        convs = {n.block.split("/")[0]: n for n in g.nodes.values() if n.op == "conv2d" and n.block and n.block.startswith("block")}
        for j, b in enumerate(g.meta["blocks"], 1):
            if b["type"] != "conv":
                continue
            node = convs[f"block{j}"]
            assert node.attrs["groups"] == b["groups"]
            assert node.attrs["kernel"] == [b["kernel"], b["kernel"]]
            if b["group_size"] is None:
                assert b["groups"] == 1
            else:
                assert b["group_size"] == b["requested_group_size"]
                assert b["in_channels"] == b["groups"] * b["group_size"]
                assert b["out_channels"] % b["groups"] == 0


def test_split_sections_sum_to_the_channels(graphs):
    for g in graphs:
        for b in g.meta["blocks"]:
            if b["type"] == "split":
                assert sum(b["sections"]) == b["in_channels"] and len(b["sections"]) == b["splits"]
                assert max(b["sections"]) - min(b["sections"]) <= 1
                assert len(b["ops"]) == b["splits"]
                assert (b["downsample"] == "maxpool") == (b["stride"] > 1)


# ---------------------------------------------------------------- the whole space is reachable
def test_every_block_type_and_parameter_value_appears(blocks):
    by_type = defaultdict(list)
    for b in blocks:
        by_type[b["type"]].append(b)
    assert set(by_type) == set(BLOCK_TYPES)
    for t in ("conv", "dwsep", "bottleneck"):
        assert {b["kernel"] for b in by_type[t]} == {3, 5, 7}, t
    convs = by_type["conv"]
    assert {b["requested_group_size"] for b in convs} == {None} | {4 * k for k in range(1, 17)}
    assert {b["group_size"] for b in convs if b["groups"] > 1} == {4 * k for k in range(1, 17)}
    bottlenecks = by_type["bottleneck"]
    assert {b["expansion"] for b in bottlenecks} == {1, 3, 6}
    assert {b["se"] for b in bottlenecks} == {True, False}
    assert {(b["pool"], b["window"]) for b in by_type["pool"]} == {(k, w) for k in ("avg", "max") for w in (1, 3)}
    splits = by_type["split"]
    assert {b["splits"] for b in splits} == {2, 3, 4}
    assert {op for b in splits for op in b["ops"]} == set(SyntheticConfig().split_ops)
    assert {b["downsample"] for b in splits} == {None, "maxpool"}
    # roughly uniform block types: each about 1/5 of 9,000 blocks
    counts = Counter(b["type"] for b in blocks)
    assert all(1600 <= c <= 2000 for c in counts.values()), counts


def test_ops_in_the_graphs(graphs):
    ops = Counter(op for g in graphs for op in g.op_counts())
    for op in ("conv2d", "batchnorm", "relu6", "avgpool", "maxpool", "split", "concat", "mul", "add", "global_avgpool", "fc"):
        assert ops[op] > 0, op


# ---------------------------------------------------------------- variants of the space
def test_restricted_block_types():
    for g in _generate(SyntheticConfig(n=5, block_types=["pool"])):
        assert {b["type"] for b in g.meta["blocks"]} == {"pool"}
        assert g.nodes[g.outputs[0]].shape == [1, 1000]
    for g in _generate(SyntheticConfig(n=5, block_types=["conv"], group_prob=1.0)):
        assert all(b["requested_group_size"] for b in g.meta["blocks"])


def test_projection_makes_every_block_follow_its_range():
    cfg = SyntheticConfig(n=30, block_types=["pool", "split"], project_pool_split=True, split_downsample="avgpool")
    for g in _generate(cfg):
        g.validate()
        for j, b in enumerate(g.meta["blocks"], 1):
            lo, hi = cfg.channel_ranges[j - 1]
            assert lo <= b["out_channels"] <= hi and b["projection"]
            if b["type"] == "split":
                assert b["downsample"] == ("avgpool" if b["stride"] > 1 else None)


def test_split_rounding_can_be_turned_off(blocks):
    splits = [b for b in blocks if b["type"] == "split"]
    equal = sum(len(set(b["sections"])) == 1 for b in splits)
    assert equal > 0.85 * len(splits)  # unequal only where the producer's range forbids it (the stem: 32)
    cfg = SyntheticConfig(n=40, split_equal=False)
    splits = [b for g in _generate(cfg) for b in g.meta["blocks"] if b["type"] == "split"]
    assert any(len(set(b["sections"])) > 1 for b in splits)


def test_min_groups_one_allows_a_single_group():
    cfg = SyntheticConfig(n=200, block_types=["conv"], group_prob=1.0, min_groups=1)
    convs = [b for g in _generate(cfg) for b in g.meta["blocks"]]
    assert any(b["group_size"] and b["groups"] == 1 for b in convs)


def test_custom_schedule_and_input():
    cfg = SyntheticConfig(n=3, input_size=96, num_classes=10, num_blocks=3, strides=[2, 1, 2],
                          channel_ranges=[[8, 16], [16, 32], [32, 64]], head_channels=[64, 64])
    for g in _generate(cfg):
        assert [n.shape for n in g.input_nodes] == [[1, 3, 96, 96]]
        assert g.tensor_shape(g.outputs[0]) == [1, 10]
        assert [s[2] for s in _block_outputs(g).values()] == [24, 24, 12]


# ---------------------------------------------------------------- configuration errors
@pytest.mark.parametrize(
    "changes, key",
    [
        ({"channel_ranges": [[80, 8]] + [[8, 80]] * 4 + [[80, 400]] * 4}, "channel_ranges[0]"),
        ({"head_channels": [1800, 1200]}, "head_channels"),
        ({"strides": [1, 2, 1]}, "strides"),
        ({"strides": [1, 2, 1, 2, 1, 2, 1, 2, 0]}, "strides"),
        ({"block_types": []}, "block_types"),
        ({"block_types": ["conv", "attention"]}, "block_types"),
        ({"input_size": 8}, "strides"),  # 4 after the stem, then 4,2,2,1,1: block 6 would stride a 1x1 map
        ({"input_size": 0}, "input_size"),
        ({"conv_kernels": [3, 4]}, "conv_kernels"),
        ({"pool_windows": []}, "pool_windows"),
        ({"group_k": [0, 16]}, "group_k"),
        ({"group_prob": 1.5}, "group_prob"),
        ({"pool_kinds": ["min"]}, "pool_kinds"),
        ({"split_counts": [1, 2]}, "split_counts"),
        ({"split_ops": ["relu", "conv2d"]}, "split_ops"),
        ({"split_downsample": "stride"}, "split_downsample"),
        ({"act": "mish"}, "act"),
        ({"stem_channels": 3}, "stem_channels"),  # fewer than a 4-way split
        ({"n": -1}, "n"),
    ],
)
def test_impossible_configs_name_the_field(changes, key):
    with pytest.raises(ValueError) as e:
        validate_config(SyntheticConfig(**changes))
    msg = str(e.value)
    assert msg.startswith(f"{key}: ") and "\n" not in msg
    with pytest.raises(ValueError):
        next(iter(SyntheticSource.generate(SyntheticConfig(**changes), 0)))


def test_default_config_is_valid():
    validate_config(SyntheticConfig())
