"""Transformer networks in the assembled dataset (issue 54): every op row of a LiteRT fp32 pair
knows its IR node, every XNNPACK kernel row its op, and the card splits their time into
attention, MLP, norm and the rest (generators/roles.py).

Two networks of the transformer space at 64x64 are generated, exported at fp32 and measured on
this host with a short protocol (2 processes, 6 runs; op and kernel processes of 3 runs), then
assembled."""
from __future__ import annotations

from pathlib import Path

import pytest

from generators.ir import Graph
from generators.roles import ROLES, node_role
from pipelines.assemble import run_assemble
from pipelines.config import compose, validate
from pipelines.dataset import load_dataset
from pipelines.dataset.card import role_frame
from pipelines.measure import run_measure

FP32, INT8 = "host-tflite-cpu-1large-fp32", "host-tflite-cpu-1large-int8"
QUICK = ["measure.processes=2", "measure.warmup=2", "measure.stopping.policy=fixed", "measure.stopping.runs=6",
         "measure.op_runs=3", "measure.overhead_pairs=2", "measure.load.check=false", "release.folder="]


def _network(index: int) -> Graph:
    from generators import transformer

    return transformer.build_network(transformer.validate_config({"input_size": 64}), 0, index)


@pytest.fixture(scope="module")
def assembled(tmp_path_factory) -> tuple[Path, Path]:
    from pipelines.export import run_export
    from pipelines.generate import run_generate

    data = tmp_path_factory.mktemp("transformers") / "data"
    cfg = validate(compose(["generator=[transformer]", "generator.transformer.n=2",
                            "generator.transformer.input_size=64", f"data_dir={data}",
                            "export.formats=[tflite_fp32,tflite_int8]", "export.workers=2",
                            "measure.granularities=[e2e,op,kernel]", *QUICK]))
    run_generate(cfg, progress=False)
    assert run_export(cfg, progress=False)["failed"] == 0
    assert run_measure(cfg, "tflite", "fp32", "1large", progress=False)["ok"] == 2
    assert run_measure(cfg, "tflite", "int8", "1large", progress=False)["ok"] == 2
    out = data / "dataset"
    run_assemble(data_dir=data, out_dir=out, progress=False)
    return data, out


def test_node_roles_of_a_generated_transformer():
    g = _network(0)
    roles = {n.name: node_role(n.name) for n in g.nodes.values()}
    assert set(roles.values()) == set(ROLES)
    for n in g.nodes.values():
        if n.op == "layernorm":
            assert roles[n.name] == "norm", n.name
        elif n.op in ("softmax", "matmul"):
            assert roles[n.name] == "attention", n.name
        elif n.op == "gelu":
            assert roles[n.name] == "mlp", n.name
        elif n.op in ("input", "conv2d") and "attn" not in n.name:
            assert roles[n.name] == "other", n.name
    assert node_role("ln_0") == "other" and node_role("stage1/block1/layernorm_3") == "norm"
    assert node_role("s/token_mixer/avgpool_0") == "attention" and node_role("s/mlp/conv2d_1") == "mlp"


def test_op_rows_know_their_ir_node_and_kernel_rows_their_op(assembled):
    data, out = assembled
    ds = load_dataset(out)
    ops, kernels = ds.ops[ds.ops["scenario_id"] == FP32], ds.kernels[ds.kernels["scenario_id"] == FP32]
    assert len(ops) and ops["node"].notna().all()
    for mid, rows in ops.groupby("model_id"):
        g = Graph.load(next((data / "models").glob(f"*/{mid}.json")))
        from kernels.xnnpack import converted_graph

        names = set(converted_graph(g).nodes)
        assert set(rows["node"]) <= names
        # a layer norm is seven TFLite operators of one node; attention's BATCH_MATMULs are its matmuls
        ln = rows[rows["node"].map(lambda n: converted_graph(g).nodes[n].op == "layernorm")]
        assert set(ln["framework_op"]) >= {"MEAN", "SQUARED_DIFFERENCE", "RSQRT"}
        assert (rows.loc[rows["framework_op"] == "BATCH_MATMUL", "node"].map(node_role) == "attention").all()
    assert len(kernels) and kernels["op_index"].notna().all() and (kernels["n_ops"] == 1).all()
    # an int8 file: every operator but the converter's QUANTIZE / DEQUANTIZE knows its node
    q = ds.ops[ds.ops["scenario_id"] == INT8]
    assert len(q) and set(q.loc[q["node"].isna(), "framework_op"]) <= {"QUANTIZE", "DEQUANTIZE"}
    assert (q.loc[q["framework_op"] == "BATCH_MATMUL", "node"].map(node_role) == "attention").all()
    joined = kernels.merge(ops[["model_id", "op_index", "framework_op"]], on=["model_id", "op_index"])
    assert len(joined) == len(kernels)
    softmax = joined[joined["kernel_name"].str.startswith("Softmax")]
    assert len(softmax) and (softmax["framework_op"] == "SOFTMAX").all()


def test_the_card_splits_transformer_time_by_part(assembled):
    _, out = assembled
    ds = load_dataset(out)
    rf = role_frame(ds)
    assert {FP32, f"{FP32} kernels", INT8} <= set(rf["label"])
    assert set(rf["role"]) == set(ROLES)
    # every timed op of the pair is in the frame: the shares are of the whole op time
    ops = ds.ops[(ds.ops["scenario_id"] == FP32) & ds.ops["latency_ms"].notna()]
    assert rf.loc[rf["label"] == FP32, "latency_ms"].sum() == pytest.approx(ops["latency_ms"].sum())
    card = (out / "DATASET.md").read_text()
    section = card.split("### Transformer networks", 1)[1].split("\n## ", 1)[0]
    row = next(line for line in section.splitlines() if line.startswith(f"| `{FP32}` |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[1] == "2"
    assert sum(int(c.rstrip("%")) for c in cells[2:6]) in (99, 100, 101)  # rounded shares
    assert (out / "transformer_roles.png").is_file() and "](transformer_roles.png)" in section


def test_cnn_pairs_have_no_transformer_section(tmp_path):
    from pipelines.dataset.card import transformers_section

    from pipelines.dataset.load import Dataset

    full = load_dataset(Path(__file__).resolve().parents[1] / "datasets" / "host-v1")
    cnn = set(full.models.loc[full.models["source"] == "synthetic", "model_id"])
    ds = Dataset({t: (v[v["model_id"].isin(cnn)] if "model_id" in v else v) for t, v in full.tables().items()},
                 check=False)
    stale = tmp_path / "transformer_roles.png"
    stale.write_bytes(b"old")
    assert role_frame(ds).empty and transformers_section(ds, tmp_path) is None
    assert not stale.exists()


def test_file_nodes_without_names_follow_the_plan_and_never_guess():
    from kernels.xnnpack import file_nodes, tflite_ops

    g = _network(1)
    plan = tflite_ops(g)
    nodes = [o.node for o in plan]
    # a file exported without name scopes: the plan's order
    assert file_nodes(g, [(o.op, []) for o in plan]) == nodes
    # a quantized file's QUANTIZE / DEQUANTIZE have no node
    ops = [("QUANTIZE", ["serving_default_input:0"]), *[(o.op, []) for o in plan], ("DEQUANTIZE", ["out"])]
    assert file_nodes(g, ops) == [None, *nodes, None]
    # without names, another order is no plan's: no node
    swapped = [(o.op, []) for o in plan]
    k = next(i for i in range(len(plan) - 1) if plan[i].op != plan[i + 1].op)
    swapped[k], swapped[k + 1] = swapped[k + 1], swapped[k]
    assert file_nodes(g, swapped) is None
    # another multiset of operators: no node at all
    assert file_nodes(g, [(o.op, []) for o in plan[1:]]) is None
    assert file_nodes(g, [*[(o.op, []) for o in plan], ("ADD", [])]) is None


@pytest.mark.parametrize("node, scope", [
    ("stage1/block1/attn/fc_0", "stage1/block1/attn/fc_0"),
    ("/blocks.0/attn/MatMul", "blocks.0/attn/MatMul"),  # an ONNX node's name
    ("_x:0", "n_x_0"), ("a//b c", "a/b_c"), ("", "node"),
])
def test_scope_names_are_ones_tf_takes(node, scope):
    from generators.export.tflite import scope_name

    assert scope_name(node) == scope
