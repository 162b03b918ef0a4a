"""The transformer space (generators/transformer.py): determinism, valid shapes, its
distributions over 200 networks, the size limits, config errors, and small networks that export
to TFLite and ONNX and compute the IR's torch module's function."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from generators.catalog import SOURCES
from generators.ir import Graph
from generators.transformer import TransformerConfig, build_network, validate_config
from support.nets import export_and_torch_outputs

N = 200
SMALL = dict(input_size=32, num_classes=10, patch_sizes=[4, 8], stem_channels=[8, 12], conv_stages=[0, 2],
             conv_channels=[[8, 16], [16, 24]], conv_depth=[1, 2], single_stage_depth=[1, 2], stage_depth=[1, 1],
             heads=[1, 2], head_dims=[8], min_grid=2)
SMALL_INDICES = (0, 2, 5, 6)  # a hybrid, a one-stage ViT, a one-stage DeiT (class token) and a two-stage ViT


@pytest.fixture(scope="module")
def nets() -> list[Graph]:
    cfg = TransformerConfig()
    return [build_network(cfg, 0, i) for i in range(N)]


def test_registered_and_generate_is_byte_identical_and_prefix_stable():
    src = SOURCES.get("transformer")
    a = [g.to_json() for g in src.generate({"n": 5}, 7)]
    b = [g.to_json() for g in src.generate({"n": 3}, 7)]
    assert a[:3] == b and a == [g.to_json() for g in src.generate(TransformerConfig(n=5), 7)]
    assert len({Graph.from_json(t).model_id for t in a}) == 5
    assert [g.to_json() for g in src.generate({"n": 3}, 8)] != b  # the seed matters


def test_networks_validate_and_carry_their_draws(nets):
    for g in nets[:40]:
        g.validate()
        m = g.meta
        assert g.source == "transformer" and m["space"] == "vit-hybrid" and m["index"] == int(g.name[-5:])
        assert g.shape(g.outputs[0]) == [1, 1000]
        widths = m["widths"]
        assert widths == [h * m["head_dim"] for h in m["heads"]] and len(widths) == len(m["stages"])
        assert m["stages"][0]["grid"] == 224 // m["patch"] and m["stages"][-1]["grid"] >= 4
        firsts = {n.block: n.shapes[0] for n in reversed(list(g.nodes.values())) if n.op == "layernorm"}
        for k, st in enumerate(m["stages"], 1):
            extra = 1 if m["readout"] == "class" else 0  # the class token
            assert firsts[f"stage{k}/block1/block"] == [1, st["tokens"] + extra, widths[k - 1]]
        assert g.op_counts()["matmul"] == 2 * sum(s["depth"] for s in m["stages"])


def test_position_embedding_and_readouts(nets):
    for g in nets:
        ops, m = g.op_counts(), g.meta
        assert ops["pos_embed"] == 1
        if m["readout"] == "class":  # one stage: the class token, read out after the last block
            assert len(m["stages"]) == 1 and ops["cls_token"] == 1
            assert [n.op for n in g.nodes.values() if n.op in ("cls_token", "pos_embed")] == ["cls_token", "pos_embed"]
        else:
            assert m["readout"] == "mean" and "cls_token" not in ops
    one_stage = {g.meta["readout"] for g in nets if len(g.meta["stages"]) == 1}
    assert one_stage == {"mean", "class"}
    assert {g.meta["readout"] for g in nets if len(g.meta["stages"]) > 1} == {"mean"}
    assert "pos_embed" not in build_network(TransformerConfig(pos_embed=False), 0, 0).op_counts()
    assert {build_network(TransformerConfig(readouts=["mean"]), 0, i).meta["readout"] for i in range(20)} == {"mean"}


def test_size_limits_hold_and_span_mobile_to_resnet50_scale(nets):
    flops = np.array([g.flops for g in nets]) / 1e6
    params = np.array([g.params for g in nets]) / 1e6
    assert flops.max() <= 4100 and params.max() <= 25.6
    assert flops.min() < 100 and flops.max() > 2000 and 150 < np.median(flops) < 1500
    assert params.max() > 10


def test_distributions_cover_their_ranges(nets):
    cfg = TransformerConfig()
    metas = [g.meta for g in nets]
    assert {m["patch"] for m in metas} == set(cfg.patch_sizes)
    assert {m["front"] for m in metas} == {"patch", "conv"}
    assert {len(m["stages"]) for m in metas} == {1, 2, 3}
    assert {m["head_dim"] for m in metas} == set(cfg.head_dims)
    assert {m["heads"][0] for m in metas} == set(range(1, 7))
    assert {s["mlp_ratio"] for m in metas for s in m["stages"]} == set(cfg.mlp_ratios)
    assert {m["stages"][0]["depth"] for m in metas if len(m["stages"]) == 1} == set(range(4, 13))
    assert {s["depth"] for m in metas if len(m["stages"]) > 1 for s in m["stages"]} == {1, 2, 3, 4}
    convs = [m["conv"] for m in metas if m["front"] == "conv"]
    assert {len(c["stages"]) for c in convs} == {0, 1, 2, 3}
    assert {c["embed_patch"] for c in convs} == {1, 2, 4, 8, 16}
    assert {s["kernel"] for c in convs for s in c["stages"]} == {3, 5}
    assert {s["expansion"] for c in convs for s in c["stages"]} == {2, 4, 6}
    stems = [c["stem_channels"] for c in convs]
    assert min(stems) <= 18 and max(stems) >= 46


def test_heads_are_the_largest_that_fit_when_the_draw_is_capped():
    """A tight budget leaves only small head counts; every network stays within it."""
    free, capped = TransformerConfig(), TransformerConfig(max_mflops=300.0)
    for i in range(30):
        a, b = build_network(free, 0, i), build_network(capped, 0, i)
        assert b.meta["heads"][0] <= a.meta["heads"][0] or a.flops > 300e6
        assert b.flops <= 300e6 or b.meta["heads"][0] == 1  # over the limit only when heads=1 is
        a.meta.pop("heads"), b.meta.pop("heads"), a.meta.pop("widths"), b.meta.pop("widths")
        assert a.meta == b.meta  # the limit only changes the heads


@pytest.mark.parametrize("key,value,message", [
    ("patch_sizes", [16, 48], "patch_sizes: patch 48 does not divide input_size 224"),
    ("fronts", ["patch", "cnn"], "fronts: unknown front 'cnn'"),
    ("readouts", ["mean", "cls"], "readouts: unknown readout 'cls'"),
    ("heads", [3, 2], r"heads: min 3 > max 2"),
    ("conv_stages", [0, 4], "conv_channels: has 3 ranges, need one per conv stage"),
    ("act", "gelu2", "act: unknown activation 'gelu2'"),
    ("gelu_approximate", "erf", "gelu_approximate: must be one of none, tanh"),
    ("max_mflops", 0, "max_mflops: must be > 0"),
    ("conv_kernels", [4], r"conv_kernels: must hold odd kernels"),
])
def test_bad_values_are_one_line_errors_naming_the_field(key, value, message):
    with pytest.raises(ValueError, match=message) as e:
        validate_config({key: value})
    assert "\n" not in str(e.value)


def test_every_field_has_a_checked_default():
    cfg = validate_config(None)
    assert {f.name for f in dataclasses.fields(cfg)} >= {"patch_sizes", "heads", "head_dims", "mlp_ratios", "fronts"}


# ---------------------------------------------------------------- exports compute the same function
def _small(i: int) -> Graph:
    return build_network(TransformerConfig(**SMALL), 0, i)


def test_small_networks_span_both_fronts_and_several_stages():
    metas = [_small(i).meta for i in SMALL_INDICES]
    assert {m["front"] for m in metas} == {"patch", "conv"} and max(len(m["stages"]) for m in metas) >= 2


@pytest.mark.parametrize("fmt,index", [("tflite_fp32", 0), ("tflite_fp32", 5), ("tflite_fp32", 6)] + [("onnx_fp32", i) for i in SMALL_INDICES])
def test_small_networks_export_and_compute_the_torch_modules_function(fmt, index, tmp_path):
    pytest.importorskip("torch")
    got, ref = export_and_torch_outputs(_small(index), fmt, tmp_path)
    assert got.shape == ref.shape == (1, 10) and np.abs(ref).max() > 0
    assert np.abs(got - ref).max() <= 1e-4 * np.abs(ref).max()
