"""The TFLite exporter's prediction of the converter on transformer networks: the TFLite format's
``verify`` (operator counts, parameters, output shapes) holds for networks of the ``transformer``
source and of the ``vit``, ``mobilevit`` and ``efficientformer`` zoo families, in fp32 and int8.

The converter rewrites attention's layout operators (a transpose of unit axes becomes a RESHAPE
merged with its neighbours; a transpose of the last two axes into a matmul becomes its adjoint
flag; MobileViT's rank-6 unfold/fold and grouped tokens stay in the IR's order): before the plan
modelled these, 5 of 30 networks of the transformer space at 64x64 and every MobileViT and
EfficientFormer network missed their TRANSPOSE/RESHAPE counts.
"""
from __future__ import annotations

import random

import pytest

pytest.importorskip("tensorflow")
pytest.importorskip("ai_edge_litert")

from generators.export import tflite as T  # noqa: E402
from generators.export.formats import FORMATS  # noqa: E402
from generators.ir import Graph  # noqa: E402
from generators.zoo.registry import FAMILIES  # noqa: E402
from generators.zoo.sampler import ReferenceSampler, VariantSampler  # noqa: E402
from generators.zoo.source import _as_config  # noqa: E402
from kernels.report import transformer_networks  # noqa: E402

TRANSFORMER_FAMILIES = ("vit", "mobilevit", "efficientformer")
#: Networks of the small transformer space checked in fp32 (all) and int8 (every INT8_STEP-th).
N_SPACE, INT8_STEP = 30, 5


def family_net(family: str, index: int | None = None, size: int = 64) -> Graph:
    """The family's reference (``index`` None) or variant ``index`` (seed 0, the zoo's default
    ranges) on a ``size`` x ``size`` input."""
    if index is None:
        sampler = ReferenceSampler()
    else:
        cfg = _as_config(None)
        sampler = VariantSampler(random.Random(f"zoo/{family}/0/{index}"), cfg.channel_scale, cfg.kernel_choices,
                                 cfg.depth_scale, cfg.heads_scale, cfg.mlp_ratios)
    g = Graph(f"zoo-{family}-{'ref' if index is None else index}@{size}", source="zoo")
    return g.set_outputs(FAMILIES.get(family).build(g, g.input([1, 3, size, size]), sampler)).validate()


def _failed_checks(g: Graph, precision: str) -> dict:
    """The checks of the format's ``verify`` that fail, with the counts that differ."""
    facts = T.inspect_tflite(T.convert(g, precision))
    checks = FORMATS.get(f"tflite_{precision}").verify(g, facts)
    bad = {k: v for k, v in checks.items() if not v}
    if not checks["op_counts"]:
        want = T.expected_op_counts(g, precision)
        got = facts["op_counts"]
        bad["op_counts"] = {op: (got.get(op, 0), want.get(op, 0)) for op in set(got) | set(want)
                            if got.get(op, 0) != want.get(op, 0)}
    return bad


@pytest.fixture(scope="module")
def space() -> list[Graph]:
    nets = [g for _, g in transformer_networks(N_SPACE)]
    heads = [h for g in nets for h in g.meta["heads"]]
    # the sample holds what the rewrites depend on: one head, several heads, conv fronts, several stages
    assert 1 in heads and max(heads) > 1
    assert {g.meta["front"] for g in nets} == {"patch", "conv"} and max(len(g.meta["stages"]) for g in nets) == 3
    return nets


@pytest.mark.parametrize("precision", ["fp32", "int8"])
def test_transformer_space_verifies(space, precision):
    nets = space if precision == "fp32" else space[::INT8_STEP]
    failed = {g.name: bad for g in nets if (bad := _failed_checks(g, precision))}
    assert not failed


@pytest.mark.parametrize("precision", ["fp32", "int8"])
@pytest.mark.parametrize("family", TRANSFORMER_FAMILIES)
def test_transformer_families_verify(family, precision):
    """The reference and two variants in fp32; the reference in int8."""
    indices = [None, 0, 1] if precision == "fp32" else [None]
    failed = {g.name: bad for g in (family_net(family, i) for i in indices) if (bad := _failed_checks(g, precision))}
    assert not failed


def test_mobilevit_unfold_and_fold_stay_three_ops_each():
    """MobileViT's unfold (image -> [1, H/2, 2, W/2, 2, C] -> rank-6 TRANSPOSE -> grouped tokens)
    is RESHAPE + TRANSPOSE + RESHAPE after the conv, its fold the same before the next conv: the
    permutations into and out of NHWC order are no ops, and every tensor between stays plain."""
    g = T.merge_common_subexpressions(family_net("mobilevit"))
    plans = T.plan_graph(g)
    per_node = T._expected_ops(g, plans, "fp32")
    for block in ("unfold", "fold"):
        names = [n for n in g.nodes if n.startswith(f"layer3.mobilevit/{block}/")]
        assert [g.nodes[n].op for n in names] == (["transpose", "reshape", "transpose", "reshape"] if block == "unfold"
                                                  else ["reshape", "transpose", "reshape", "transpose"])
        assert [op for n in names for op in per_node[n]] == ["RESHAPE", "TRANSPOSE", "RESHAPE"], block
    # the transformer blocks on grouped tokens [1, 4, N, d] are plain throughout: no layout TRANSPOSE
    inside = [n for n in g.nodes if "/transformer" in n]
    assert inside and all(plans[n].layout == "plain" and "TRANSPOSE" not in plans[n].ops[:1] for n in inside
                          if g.nodes[n].op != "transpose")


@pytest.mark.parametrize("which", ["space", "mobilevit", "efficientformer"])
def test_measured_op_rows_describe_products_as_the_ir_does(space, which, tmp_path):
    """A converted network's FULLY_CONNECTED and BATCH_MATMUL rows, read as measured op rows
    are (``tflite_features`` -> the featurizer), count the FLOPs the IR's fc and matmul nodes
    count, and every row has its size: a per-op model trained on measured rows prices the IR of
    an unmeasured network alike."""
    import numpy as np
    import pandas as pd

    from leaderboard.baselines.features import COLUMNS, category_of, derive, ir_ops, table_ops
    from pipelines.dataset.opfeatures import read_tflite_ops, tflite_features

    graphs = space[:3] if which == "space" else [family_net(which)]
    for g in graphs:
        path = tmp_path / f"{g.name}.tflite"
        path.write_bytes(T.convert(g, "fp32"))
        rows = pd.DataFrame([tflite_features(n) for n in read_tflite_ops(path)])
        for c in ("kernel", "stride", "padding", "groups", "config"):
            rows[c] = rows[c] if c in rows else None
        flops = {}
        for side, (types, raw) in (("tflite", table_ops(rows)), ("ir", ir_ops(g))):
            raw = np.asarray(raw, dtype=float)
            cols = derive(raw, np.array([category_of(t) for t in types], dtype=object))
            assert not np.isnan(cols).any(), (g.name, side)
            per_type = pd.Series(cols[:, COLUMNS.index("flops")]).groupby(np.asarray(types)).sum()
            flops[side] = {t: per_type.get(t, 0.0) for t in ("fc", "matmul")}
        assert flops["ir"]["fc"] > 0 and flops["ir"]["matmul"] > 0, g.name
        assert flops["tflite"] == pytest.approx(flops["ir"], rel=1e-9), g.name


def test_the_exported_files_import_back_with_the_same_costs(space):
    """`latbench predict` of a `.tflite` the suite wrote itself: the file of a transformer-space
    network and of each family's reference imports into an IR with the source's FLOPs and
    parameters. The exporter's layer norm is TF's centred form (``x - mean``, its variance,
    ``* rsqrt``), whose gain and shift the converter folds into the next fully connected layer
    where there is one; both forms come back as one ``layernorm``. A batch norm after a convolution
    folds into it, as in CNN files (test_import_tflite.py's ``tflite_form``)."""
    from test_import_tflite import tflite_form  # the CNN rewrites (a batch norm folds into its conv)

    from generators.importers import import_tflite

    nets = space[:6] + [family_net(f) for f in TRANSFORMER_FAMILIES]
    for src in nets:
        g = import_tflite(T.convert(src, "fp32"), name=src.name)
        want = tflite_form(src)
        assert (g.flops, g.params) == (want.flops, want.params), src.name
        assert g.op_counts().get("layernorm") == src.op_counts().get("layernorm"), src.name
