"""The zoo's transformer families (vit, mobilevit, efficientformer): references against the
published models, variant rules, determinism, and small variants that export and compute the
IR's torch module's function.

Published numbers compared against (parameters, multiply-accumulates at the family's input):
- DeiT-Ti (Touvron et al. 2021; timm ``deit_tiny_patch16_224``): 5,717,416 parameters, 1.3 G
  (fvcore: 1.26 G): equal parameter count (class token and position embedding included).
- MobileViT-XXS (Mehta and Rastegari 2022; timm ``mobilevit_xxs``, 256x256): 1,272,024 (the
  paper's 1.3 M), about 0.4 G: equal parameter count.
- EfficientFormer-L1 (Li et al. 2022): 12.3 M parameters, 1.3 G; layer scales (6,944) and
  attention biases (392) have no IR form: 12,281,752, 0.15% under.
"""
from __future__ import annotations

import numpy as np
import pytest

from generators.ir import Graph
from generators.zoo import FAMILIES, reference, variant
from generators.zoo.sampler import VariantSampler
from generators.zoo.source import validate_config
from support.nets import export_and_torch_outputs

TRANSFORMERS = ("vit", "mobilevit", "efficientformer")


@pytest.mark.parametrize("family,params,published_params,mflops,published_mflops,size", [
    ("vit", 5_717_416, 5_717_416, 1253.7, 1260, 224),
    ("mobilevit", 1_272_024, 1_272_024, 407.4, 400, 256),
    ("efficientformer", 12_281_752, 12_300_000, 1291.3, 1300, 224),  # 0.15% under
])
def test_references_match_the_published_models(family, params, published_params, mflops, published_mflops, size):
    g = reference(family).validate()
    assert g.shape(g.input_nodes[0].name) == [1, 3, size, size] and g.shape(g.outputs[0]) == [1, 1000]
    assert g.params == params
    assert abs(g.params - published_params) <= 0.002 * published_params
    assert g.flops / 1e6 == pytest.approx(mflops, abs=0.1)
    assert abs(g.flops / 1e6 - published_mflops) <= 0.06 * published_mflops
    assert FAMILIES.get(family).input_size == size


def test_reference_structure():
    vit, mvit, eff = (reference(f) for f in TRANSFORMERS)
    assert vit.op_counts()["matmul"] == 24 and vit.op_counts()["layernorm"] == 25
    # MobileViT: 2 + 4 + 3 transformer blocks attend within 4 groups of 2x2-patch positions
    att = [n for n in mvit.nodes.values() if n.op == "softmax"]
    assert len(att) == 9 and {tuple(n.shapes[0]) for n in att} == {(1, 16, 256, 256), (1, 16, 64, 64), (1, 16, 16, 16)}
    # EfficientFormer: 14 pooling mixers, one attention over the 49 tokens with 8 heads
    assert eff.op_counts()["avgpool"] == 14 and [n.shapes[0] for n in eff.nodes.values() if n.op == "softmax"] == [[1, 8, 49, 49]]


@pytest.mark.parametrize("family", TRANSFORMERS)
def test_variants_are_deterministic_and_differ(family):
    a, b = variant(family, 3, 1), variant(family, 3, 1)
    assert a.to_json() == b.to_json()
    ids = {variant(family, 3, i).model_id for i in range(4)} | {reference(family).model_id}
    assert len(ids) == 5


def _vit_draws(g: Graph) -> tuple[int, int, int, set[float]]:
    """(heads, width, depth, MLP ratios) read back from a vit graph."""
    width = g.shape("patch_embed/conv2d_0")[1]
    heads = {n.attrs["shape"][2] for n in g.nodes.values() if n.op == "reshape" and len(n.attrs["shape"]) == 4}
    hidden = {n.attrs["out_features"] for n in g.nodes.values() if n.name.endswith("mlp/fc_0")}
    depth = g.op_counts()["softmax"]
    (h,) = heads
    return h, width, depth, {x / width for x in hidden}


def test_vit_variants_cover_the_documented_ranges():
    draws = [_vit_draws(variant("vit", 0, i)) for i in range(60)]
    heads = {d[0] for d in draws}
    assert heads == set(range(2, 7))  # heads_scale [0.5, 2] x 3
    assert all(w % h == 0 and 0.2 * 192 <= w <= 1.8 * 192 for h, w, _, _ in draws)
    assert min(d[1] for d in draws) < 80 and max(d[1] for d in draws) > 300
    assert {d[2] for d in draws} == set(range(6, 19))  # depth_scale [0.5, 1.5] x 12
    ratios = set().union(*(d[3] for d in draws))
    assert {round(r) for r in ratios} == {1, 2, 3, 4} and all(abs(r - round(r)) <= 0.5 / 38 for r in ratios)


def test_the_sampler_draws_depth_heads_and_ratios_within_their_ranges():
    import random

    s = VariantSampler(random.Random(0), depth_scale=(0.5, 1.5), heads_scale=(0.5, 2.0), mlp_ratios=(2.0, 4.0))
    depths = {VariantSampler(random.Random(k)).depth("d", 4) for k in range(40)}
    assert depths == {2, 3, 4, 5, 6}
    assert {VariantSampler(random.Random(k)).heads("h", 1) for k in range(20)} == {1, 2}  # at least 1
    assert s.ratio("r", 4.0) in (2.0, 4.0) and s.ratio("r", 4.0) == s.ratio("r", 4.0)
    with pytest.raises(ValueError, match="^r: asked with reference 2.0 after 4.0$"):
        s.ratio("r", 2.0)


@pytest.mark.parametrize("key,value,message", [
    ("depth_scale", [1.5, 0.5], r"depth_scale: expected \[lo, hi\] with 0 < lo <= hi"),
    ("heads_scale", [0, 2], r"heads_scale: expected \[lo, hi\]"),
    ("mlp_ratios", [], "mlp_ratios: expected a non-empty list"),
])
def test_bad_transformer_fields_are_one_line_errors(key, value, message):
    with pytest.raises(ValueError, match=message):
        validate_config({key: value})


def test_selectable_through_the_config_and_cnn_variants_unchanged():
    from generators.catalog import SOURCES

    got = list(SOURCES.get("zoo").generate({"families": ["vit", "mobilevit", "efficientformer"], "variants": 1}, 0))
    assert [g.meta["family"] for g in got] == ["vit", "vit", "mobilevit", "mobilevit", "efficientformer", "efficientformer"]
    # CNN families never ask for depth, heads or ratios: their variants do not depend on those fields
    other = {"depth_scale": [1.0, 1.0], "heads_scale": [1.0, 1.0], "mlp_ratios": [4.0]}
    assert variant("mobilenetv2", 0, 0).to_json() == variant("mobilenetv2", 0, 0, other).to_json()


# ---------------------------------------------------------------- small variants export
SMALL_CFG = {"channel_scale": [0.2, 0.3], "kernel_choices": [3, 5], "depth_scale": [0.2, 0.4], "heads_scale": [0.3, 0.5],
             "mlp_ratios": [1.0, 2.0]}


def small_variant(family: str, size: int = 64) -> Graph:
    """A narrow, shallow variant of ``family`` on a ``size`` x ``size`` input."""
    import random

    from generators.zoo.source import _as_config

    cfg = _as_config(SMALL_CFG)
    s = VariantSampler(random.Random(f"test/{family}"), cfg.channel_scale, cfg.kernel_choices, cfg.depth_scale,
                       cfg.heads_scale, cfg.mlp_ratios)
    g = Graph(f"small-{family}", source="test")
    x = g.input([1, 3, size, size])
    return g.set_outputs(FAMILIES.get(family).build(g, x, s)).validate()


@pytest.mark.parametrize("family", TRANSFORMERS)
@pytest.mark.parametrize("fmt", ["tflite_fp32", "onnx_fp32"])
def test_small_variants_export_and_compute_the_torch_modules_function(fmt, family, tmp_path):
    pytest.importorskip("torch")
    got, ref = export_and_torch_outputs(small_variant(family), fmt, tmp_path)
    assert got.shape == ref.shape == (1, 1000) and np.abs(ref).max() > 0
    assert np.abs(got - ref).max() <= 1e-4 * np.abs(ref).max()


@pytest.mark.slow  # ExecuTorch's lowering takes about 25 s
def test_mobilevit_runs_in_executorch(tmp_path):
    """The grouped tokens (rank-5 and rank-6 reshapes and transposes) through ExecuTorch's XNNPACK."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("executorch")
    from generators.export.executorch import run_executorch
    from generators.export.formats import FORMATS
    from generators.export.torch_module import example_tensors, to_module

    g = small_variant("mobilevit")
    spec = FORMATS.get("executorch_fp32")
    facts = spec.write(g, tmp_path / spec.filename)
    assert spec.verify(g, facts) == {"params": True, "input_shapes": True, "output_shapes": True, "delegated": True}
    got = run_executorch(tmp_path / spec.filename, g)
    with torch.no_grad():
        ref = to_module(g)(*example_tensors(g)).numpy()
    assert np.abs(got[0] - ref).max() <= 1e-4 * np.abs(ref).max()


def test_a_configured_family_builds_a_published_sibling():
    """``configured`` sets the named sampler keys and keeps the reference elsewhere: the ViT family
    at ViT-B/16's width and heads is torchvision's vit_b_16 (86,567,656 parameters); a key the
    family's build never asks is an error naming it."""
    from generators.zoo import configured

    g = configured("vit", {"heads": 12, "embed": 768}, "vit_b_16").validate()
    assert g.params == 86_567_656 and g.name == "vit_b_16" and g.meta["config"] == {"embed": 768, "heads": 12}
    assert g.op_counts() == reference("vit").op_counts()  # the same structure, wider
    with pytest.raises(ValueError, match=r"vit: the family's build never asks for width"):
        configured("vit", {"width": 768}, "x")
    with pytest.raises(ValueError, match=r"embed: width 770 is not a multiple of 12"):
        configured("vit", {"heads": 12, "embed": 770}, "x")
