"""Graph passes (generators/passes.py): the network as a device's toolchain ran it.

``zero_scale_dce`` on NAS-Bench-201 cells: the ops that only feed ``none`` (x*0) edges are
removed, what computes on zeros is kept, a cell cut off from its input collapses the network.
``nb201_output_zeros_dce`` applies it only where every ``none`` edge feeds the cell's output node
(what HELP's raspi4 and pixel3 latencies show). Those two scenarios carry it (device catalog) and
every IR consumer of a predictor (``Dataset.graph(model_id, scenario_id)``, ``Networks.graphs``,
the op features) sees the rewritten graph there and the IR as written elsewhere.
"""
from __future__ import annotations

import pytest

from generators.ir import IRError
from generators.nasbench201 import build, index_of
from generators.passes import (PASSES, apply_passes, fold_constants, nb201_output_zeros_dce, parse_passes,
                               zero_scale_dce)

# node 1 = conv(node 0) feeds only `none` edges: dead on a device that rewrites x*0
DEAD_CONV = "|nor_conv_3x3~0|+|nor_conv_3x3~0|none~1|+|skip_connect~0|none~1|nor_conv_3x3~2|"
# node 3 receives only `none` edges: the cell (and so every cell) outputs zeros
CUT_OFF = "|nor_conv_3x3~0|+|nor_conv_3x3~0|nor_conv_3x3~1|+|none~0|none~1|none~2|"
# nodes 1 and 2 feed only `none` edges into the output node: their three convolutions are dead
DEAD_AT_OUTPUT = "|nor_conv_3x3~0|+|nor_conv_3x3~0|nor_conv_1x1~1|+|skip_connect~0|none~1|none~2|"
# as CUT_OFF, but node 2 also receives `none` edges: on raspi4 every op of such a cell ran
CUT_OFF_RAN = "|nor_conv_3x3~0|+|none~0|none~1|+|none~0|none~1|none~2|"
# node 1 = 0 * node 0: the convolutions on node 1 compute on zeros, and still run
ZERO_FED = "|none~0|+|nor_conv_3x3~0|nor_conv_3x3~1|+|skip_connect~0|nor_conv_3x3~1|nor_conv_3x3~2|"


def _convs(g) -> int:
    return sum(n.op == "conv2d" for n in g.nodes.values())


def test_ops_that_only_feed_zero_products_are_removed():
    g = build(DEAD_CONV)
    p = zero_scale_dce(g)
    p.validate()
    # 15 cells lose their edge-0->1 convolution (and its ReLU and BN): 3 convolutions a cell -> 2
    assert _convs(g) - _convs(p) == 15
    assert p.flops < g.flops and p.name == g.name and p.meta["passes"] == ["zero_scale_dce"]
    assert not any(n.op == "scale" for n in p.nodes.values())
    kept = set(p.nodes) - {n for n in p.nodes if n.endswith("/zeros")}
    assert kept <= set(g.nodes)  # node names survive, so op records naming nodes still match
    for name in kept:
        assert (p.nodes[name].op, p.nodes[name].attrs, p.nodes[name].block) == \
               (g.nodes[name].op, g.nodes[name].attrs, g.nodes[name].block)
    assert len(build(DEAD_CONV).nodes) == len(g.nodes)  # the input graph is not changed


def test_a_cut_off_cell_collapses_the_network_and_zero_fed_ops_stay():
    cut = zero_scale_dce(build(CUT_OFF))
    cut.validate()
    assert _convs(cut) == 0 and cut.flops == 64 * 10  # what is left: the head (its FC) on constant zeros
    assert {n.op for n in cut.nodes.values()} == {"input", "add", "batchnorm", "relu", "global_avgpool", "flatten", "fc"}
    fed = build(ZERO_FED)
    assert _convs(zero_scale_dce(fed)) == _convs(fed)  # a constant input does not make a convolution free
    plain = build(index_of("|nor_conv_3x3~0|+|nor_conv_1x1~0|avg_pool_3x3~1|+|skip_connect~0|nor_conv_3x3~1|skip_connect~2|"))
    assert zero_scale_dce(plain) is plain  # nothing to rewrite


def test_the_nb201_rule_removes_dead_ops_only_where_every_none_edge_feeds_the_output():
    g = build(DEAD_AT_OUTPUT)
    p = nb201_output_zeros_dce(g)
    assert _convs(g) - _convs(p) == 15 * 3 and p.meta["passes"] == ["zero_scale_dce"]
    assert _convs(nb201_output_zeros_dce(build(CUT_OFF))) == 0  # collapses, as zero_scale_dce
    for arch in (DEAD_CONV, CUT_OFF_RAN, ZERO_FED):  # a `none` edge into node 1 or 2: as written
        g = build(arch)
        assert nb201_output_zeros_dce(g) is g, arch
    assert _convs(zero_scale_dce(build(CUT_OFF_RAN))) == 0  # which the generic pass would collapse


def test_fold_constants_computes_what_reads_only_constants():
    """After zero_scale_dce, a cut-off network is its head on constant zeros; folding computes
    the head too, and nothing of the network runs. An op that also reads a live tensor stays,
    as does every graph without constants a pass made (network inputs are not constants)."""
    cut = zero_scale_dce(build(CUT_OFF))
    assert cut.meta["constants"] and all(c.endswith("/zeros") for c in cut.meta["constants"])
    folded = fold_constants(cut)
    folded.validate()
    assert [n.op for n in folded.nodes.values()] == ["input"] and folded.flops == 0
    (out,) = folded.outputs
    assert out.endswith("/const") and folded.meta["constants"] == [out]
    assert folded.meta["passes"] == ["zero_scale_dce", "fold_constants"]
    assert folded.tensor_shape(out) == cut.tensor_shape(cut.outputs[0])
    # the cells of DEAD_AT_OUTPUT add live values to the zeros: every convolution still runs
    dead = zero_scale_dce(build(DEAD_AT_OUTPUT))
    kept = fold_constants(dead)
    kept.validate()
    assert _convs(kept) == _convs(dead) and kept.flops <= dead.flops
    assert all(n.op != "input" or n.name in kept.meta["constants"] or not n.name.endswith(("/zeros", "/const"))
               for n in kept.nodes.values())
    for arch in (DEAD_CONV, ZERO_FED):  # no pass made constants: nothing to fold, the same graph back
        g = build(arch)
        assert fold_constants(g) is g
    assert apply_passes(build(CUT_OFF), parse_passes("nb201_output_zeros_dce,fold_constants")).flops == 0


def test_pass_names_are_checked():
    assert parse_passes(None) == () and parse_passes("") == () and parse_passes(float("nan")) == ()
    assert parse_passes(" zero_scale_dce ") == ("zero_scale_dce",) and "nb201_output_zeros_dce" in PASSES
    with pytest.raises(IRError, match=r"^scenarios\.graph_passes of x: unknown graph pass 'fold' \(known: fold_constants, nb201_output_zeros_dce, zero_scale_dce\)"):
        parse_passes("zero_scale_dce,fold", where="scenarios.graph_passes of x")
    assert apply_passes(build(DEAD_CONV), ()).flops == build(DEAD_CONV).flops


def test_help_scenarios_carry_their_toolchain_and_predictors_see_it(help_dir):
    from leaderboard.baselines.base import Networks
    from leaderboard.baselines.features import op_frame
    from pipelines.dataset import Dataset
    from pipelines.dataset.help import HelpConfig, import_help

    idx = [index_of(a) for a in (DEAD_AT_OUTPUT, CUT_OFF, ZERO_FED)]
    ds = Dataset(import_help(HelpConfig(path=str(help_dir), indices=idx)))
    s = ds.scenarios.set_index("scenario_id")["graph_passes"]
    assert s.get("help-raspi4-cpu") == s.get("help-pixel3-tflite-cpu") == "nb201_output_zeros_dce,fold_constants"
    assert s.drop(["help-raspi4-cpu", "help-pixel3-tflite-cpu"]).isna().all()  # pixel2, gold_6226, GPUs: as written
    dead, cut, fed = (ds.models.set_index("name").loc[f"nb201-{i:05d}", "model_id"] for i in idx)
    assert ds.graph(dead, "help-raspi4-cpu").flops < ds.graph(dead, "help-gold6226-cpu").flops == ds.graph(dead).flops
    assert ds.graph(cut, "help-raspi4-cpu") is ds.graph(cut, "help-pixel3-tflite-cpu")  # cached per passes
    ids = [dead, cut, fed]
    for sid, n_convs in (("help-raspi4-cpu", [7, 0, 67]), ("help-gold6226-cpu", [52, 52, 67])):
        X = Networks(ds, tuple(ids), sid)
        assert [_convs(g) for g in X.graphs()] == n_convs, sid
        f = op_frame(X, source="ir")
        assert [int((f.net == k).sum()) for k in range(3)] == [len(g.nodes) - sum(n.op == "input" for n in g.nodes.values())
                                                                  for g in X.graphs()], sid
