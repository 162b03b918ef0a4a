"""ExecuTorch's XNNPACK delegate (kernels/executorch.py): the operators deduced from the IR for
known patterns, against a real export run with ETDump, and against the kernel records and export
facts already in the data folder."""
from __future__ import annotations

from collections import Counter, defaultdict
from pathlib import Path

import pytest

from generators.ir import Graph
from kernels import executorch as et

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "data"
SCENARIO = DATA / "measurements" / "host" / "host-executorch-cpu-1large-fp32"

T = "Transpose (ND, X32)"
IGEMM = "Convolution (NHWC, F32) IGEMM"
DW = "Convolution (NHWC, F32) DWConv"
FC = "Fully Connected (NC, F32) GEMM"
MEAN = "Mean (ND) Reduce2"
RESHAPE = "Static Reshape (NC)"
CLAMP = "Clamp (NC)"
ADD = "Add (ND)"
MUL = "Multiply (ND)"
COPY = "Copy (NC, X32)"
MAXPOOL = "Max Pooling (NHWC, F32)"
PIXELWISE = "Average Pooling (NHWC, F32) Pixelwise Average Pooling"
AVGPOOL = "Average Pooling (NHWC, F32) Average Pooling"


def _start(name: str, shape=(1, 3, 16, 16)) -> tuple[Graph, str]:
    g = Graph(name=name, source="test")
    return g, g.input(list(shape))


# ---------------------------------------------------------------- known patterns
def test_conv_bn_relu_is_one_igemm_between_the_layout_transposes():
    g, x = _start("cbr")
    x = g.add("relu", g.add("batchnorm", g.add("conv2d", x, out_channels=8, kernel=3, padding=1)))
    g.set_outputs(x).validate()
    # NCHW input -> NHWC, the convolution with its batch norm folded and its relu fused, NHWC -> NCHW output
    assert et.deduce_kernels(g) == [T, IGEMM, T]
    assert et.delegate_calls(g) == 1 and et.portable_ops(g) == []
    ops = et.deduce_kernel_ops(g)
    assert [(k.node, k.edge_op) for k in ops][1] == ("conv2d_0", et.CONV)
    assert {k.call for k in ops} == {0}


def test_global_average_pool_is_a_mean_and_fc_a_gemm():
    g, x = _start("head")
    x = g.add("relu", g.add("batchnorm", g.add("conv2d", x, out_channels=8, kernel=3, padding=1)))
    x = g.add("fc", g.add("flatten", g.add("global_avgpool", x)), out_features=10)
    g.set_outputs(x).validate()
    # the flatten reads NCHW: the mean's NHWC output is transposed back before the reshape
    assert et.deduce_kernels(g) == [T, IGEMM, MEAN, T, RESHAPE, FC]


def test_1x1_convolutions_are_gemms_and_depthwise_ones_dwconv():
    g, x = _start("mbv2", (1, 8, 16, 16))
    x = g.add("relu6", g.add("batchnorm", g.add("conv2d", x, out_channels=16, kernel=1)))
    x = g.add("relu6", g.add("batchnorm", g.add("conv2d", x, out_channels=16, kernel=3, padding=1, groups=16)))
    x = g.add("batchnorm", g.add("conv2d", x, out_channels=8, kernel=1))
    g.set_outputs(x).validate()
    assert et.deduce_kernels(g) == [T, FC, DW, FC, T]


def test_activation_after_an_add_is_a_separate_clamp_and_a_lone_batch_norm_a_depthwise_conv():
    g, x = _start("residual", (1, 8, 16, 16))
    y = g.add("batchnorm", g.add("conv2d", x, out_channels=8, kernel=3, padding=1))
    z = g.add("relu", g.add("add", [x, y]))
    z = g.add("relu6", g.add("batchnorm", g.add("add", [z, x])))
    g.set_outputs(z).validate()
    # relu fused into the add runs as a clamp after it; the batch norm after an add is a 1x1
    # depthwise convolution carrying the relu6; the input's NHWC copy serves both its readers
    assert et.deduce_kernels(g) == [T, IGEMM, ADD, CLAMP, ADD, DW, T]


def test_relu_of_a_tensor_with_two_readers_stays_a_clamp():
    g, x = _start("two-readers")
    y = g.add("conv2d", x, out_channels=8, kernel=3, padding=1)
    g.set_outputs(g.add("add", [y, g.add("relu", y)])).validate()
    assert et.deduce_kernels(g) == [T, IGEMM, CLAMP, ADD, T]


def test_relu_after_a_pool_is_fused_by_xnnpack():
    g, x = _start("pool-relu", (1, 8, 8, 8))
    y = g.add("relu", g.add("maxpool", g.add("conv2d", x, out_channels=8, kernel=3, padding=1), kernel=2, stride=2))
    g.set_outputs(y).validate()
    assert et.deduce_kernels(g) == [T, IGEMM, MAXPOOL, T]


def test_a_scale_drags_its_input_to_nchw_and_back():
    g, x = _start("scale")
    y = g.add("conv2d", x, out_channels=8, kernel=1)
    z = g.add("add", [g.add("scale", y, factor=0.0), g.add("conv2d", y, out_channels=8, kernel=3, padding=1)])
    g.set_outputs(z).validate()
    # a multiply by a scalar constant runs in NCHW (the constant is not 4-D)
    assert et.deduce_kernels(g) == [T, FC, T, MUL, T, IGEMM, ADD, T]


def test_hard_sigmoid_gate():
    g, x = _start("se", (1, 8, 8, 8))
    y = g.add("relu", g.add("conv2d", x, out_channels=16, kernel=1))
    s = g.add("hsigmoid", g.add("conv2d", g.add("global_avgpool", y), out_channels=16, kernel=1))
    g.set_outputs(g.add("mul", [y, s])).validate()
    # add(+3), two clamps (XNNPACK merges them), div(6) in NCHW; the constants' casts are portable
    assert et.deduce_kernels(g) == [T, FC, MEAN, FC, T, ADD, CLAMP, "Divide (ND)", T, MUL, T]
    assert et.portable_ops(g) == [et.DIM_ORDER_COPY] * 2
    assert et.delegate_calls(g) == 1
    assert et.delegated_ops(g)[et.CLAMP] == 2


def test_pooling_rules():
    g, x = _start("pools", (1, 8, 16, 16))
    a = g.add("maxpool", x, kernel=3, stride=2, padding=1)
    b = g.add("maxpool", x, kernel=1, stride=2)  # stride past the window: portable
    c = g.add("avgpool", x, kernel=3, stride=2, padding=1, count_include_pad=False)
    d = g.add("avgpool", x, kernel=2, stride=2)
    g.set_outputs(g.add("concat", [a, b, c, d])).validate()
    assert et.portable_ops(g) == [et.MAX_POOL_INDICES]
    assert et.portable_nodes(g) == ["maxpool_1"]
    assert et.deduce_kernels(g) == [T, T, MAXPOOL, PIXELWISE, AVGPOOL, COPY, T]

    g, x = _start("counted-padding", (1, 8, 16, 16))
    g.set_outputs(g.add("avgpool", g.add("conv2d", x, out_channels=8, kernel=1), kernel=3, padding=1)).validate()
    assert et.portable_ops(g) == [et.AVG_POOL]
    assert et.deduce_kernels(g) == [T, FC, T]


def test_a_concatenation_of_more_than_five_is_chained():
    g, x = _start("cat7", (1, 8, 8, 8))
    g.set_outputs(g.add("concat", [g.add("conv2d", x, out_channels=4, kernel=1) for _ in range(7)])).validate()
    assert et.deduce_kernels(g) == [T] + [FC] * 7 + [COPY, COPY, T]


def test_a_zero_pad_before_a_convolution_is_absorbed():
    g, x = _start("pad", (1, 8, 8, 8))
    y = g.add("conv2d", g.add("pad", g.add("conv2d", x, out_channels=8, kernel=1), pads=[1, 1, 1, 1]),
              out_channels=8, kernel=3)
    g.set_outputs(y).validate()
    assert et.deduce_kernels(g) == [T, FC, IGEMM, T]


def tiny_graph() -> Graph:
    """tests/test_etdump.py's: conv+relu | nearest upsampling (portable) | conv, mean, fc."""
    g, x = _start("etdump-tiny")
    x = g.add("relu", g.add("conv2d", x, out_channels=8, kernel=3, padding=1))
    x = g.add("upsample", x, scale=[2, 2])
    x = g.add("conv2d", x, out_channels=8, kernel=1)
    x = g.add("fc", g.add("flatten", g.add("global_avgpool", x)), out_features=10)
    return g.set_outputs(x).validate()


def test_a_portable_kernel_splits_the_program_with_layout_transposes_at_the_boundaries():
    g = tiny_graph()
    assert et.delegate_calls(g) == 2
    assert et.portable_ops(g) == [et.UPSAMPLE] and et.portable_nodes(g) == ["upsample_0"]
    assert [c.kind for c in et.program(g).calls] == ["delegate", "portable", "delegate"]
    per_call = defaultdict(list)
    for k in et.deduce_kernel_ops(g):
        per_call[k.call].append(k.name)
    assert dict(per_call) == {0: [T, IGEMM, T], 1: [T, FC, MEAN, T, RESHAPE, FC]}


def test_a_path_through_a_portable_kernel_keeps_two_partitions():
    g, x = _start("diamond")
    a = g.add("relu", g.add("conv2d", x, out_channels=8, kernel=3, padding=1))
    p = g.add("avgpool", a, kernel=3, padding=1)  # counts its padding: portable
    g.set_outputs(g.add("relu", g.add("add", [a, p]))).validate()
    assert et.delegate_calls(g) == 2
    # the second call reads the first one's (NCHW) output and the pool's: its add runs in NCHW
    assert [(k.call, k.name) for k in et.deduce_kernel_ops(g)] == [(0, T), (0, IGEMM), (0, T), (1, ADD), (1, CLAMP)]


def test_reading_executed_names():
    assert et.strip_number("Convolution (NHWC, F32) IGEMM #12") == IGEMM
    assert et.strip_number("Static Reshape (NC)") == RESHAPE
    record = {"kernel": {"kernels": [
        {"name": "Fully Connected (NC, F32) GEMM #2", "order": 2, "source": "xnnpack"},
        {"name": "Transpose (ND, X32) #1", "order": 0, "source": "xnnpack"},
        {"name": "upsample_nearest2d.vec_out", "order": 1, "source": "portable"}]}}
    assert et.recorded_kernels(record) == [T, FC]
    assert et.recorded_kernels({"kernel": {"kernels": []}}) == [] and et.recorded_kernels({}) == []
    dump = {"events": [
        {"run": 0, "order": 1, "name": "Convolution (NHWC, F32) IGEMM #2", "kind": "delegated"},
        {"run": 0, "order": 0, "name": "Transpose (ND, X32) #1", "kind": "delegated"},
        {"run": 0, "order": 2, "name": "upsample_nearest2d.vec_out", "kind": "portable"},
        {"run": 1, "order": 0, "name": "Transpose (ND, X32) #1", "kind": "delegated"}]}
    assert et.etdump_kernels(dump) == [T, IGEMM]
    m = et.compare([T, IGEMM, T], [T, T, IGEMM])
    assert m.share == 1.0 and not m.exact


def test_a_local_response_norm_squares_pools_and_leaves_its_power_to_a_portable_kernel():
    g, x = _start("lrn")
    x = g.add("relu", g.add("conv2d", x, out_channels=8, kernel=3, padding=1))
    x = g.add("conv2d", g.add("lrn", x, size=5, alpha=1e-4, beta=0.75, bias=2.0), out_channels=8, kernel=3, padding=1)
    g.set_outputs(x).validate()
    assert et.portable_ops(g) == [et.POW] and et.portable_nodes(g) == ["lrn_0"]
    # x * x is XNNPACK's square; the [n, 1, c, h*w] view is padded in NCHW and pooled in NHWC;
    # the division after the power opens the second call
    assert et.deduce_kernels(g) == [T, IGEMM, T, "Square (NC)", T, RESHAPE, "Constant Pad (ND, X32)", T, AVGPOOL, T,
                                    RESHAPE, MUL, ADD, "Divide (ND)", T, IGEMM, T]
    assert et.delegate_calls(g) == 2


def test_a_gather_of_channels_is_a_portable_index_select():
    """CondenseNet's selected channels (torch.index_select of a buffer): the XNNPACK partitioner
    takes no index_select, so each opens a new delegate call (seen in an ETDump run: index_select.out)."""
    g, x = _start("gather")
    x = g.add("relu", g.add("conv2d", x, out_channels=8, kernel=3, padding=1))
    x = g.add("conv2d", g.add("gather", x, indices=[3, 3, 0, 7, 5, 1]), out_channels=8, kernel=1)
    v = g.add("flatten", g.add("global_avgpool", x))
    g.set_outputs(g.add("fc", g.add("gather", v, indices=[0, 5, 5, 2]), out_features=10)).validate()
    assert et.portable_ops(g) == [et.INDEX_SELECT] * 2 and et.portable_nodes(g) == ["gather_0", "gather_1"]
    assert et.deduce_kernels(g) == [T, IGEMM, T, T, FC, MEAN, T, RESHAPE, FC]
    assert et.delegate_calls(g) == 3


def test_an_unknown_operator_names_its_node():
    g, x = _start("unknown")
    g.set_outputs(g.add("relu", x)).validate()
    g.nodes["relu_0"].op = "mystery"
    with pytest.raises(KeyError, match="relu_0"):
        et.deduce_kernels(g)


# ---------------------------------------------------------------- a real export, run with ETDump
def e2e_graphs() -> dict[str, Graph]:
    """One program with portable kernels inside (four delegate calls) and one delegate-only
    program, covering the fusions, the layout transposes, the batch norm and pooling rules, a
    local response norm (the exporter's avg_pool2d formulation, its power a portable kernel), a
    gather of channels (a portable index_select) and a grouped 1x1 convolution (an IGEMM)."""
    def body(g: Graph, x: str, stride: int) -> str:
        x = g.add("relu", g.add("batchnorm", g.add("conv2d", x, out_channels=8, kernel=3, stride=stride, padding=1)))
        y = g.add("batchnorm", g.add("conv2d", x, out_channels=8, kernel=3, padding=1))
        x = g.add("relu", g.add("add", [x, y]))
        x = g.add("add", [g.add("scale", x, factor=0.5), g.add("avgpool", x, kernel=3, padding=1, count_include_pad=False)])
        return g.add("relu6", g.add("batchnorm", x))

    def tail(g: Graph, x: str) -> str:
        x = g.add("concat", [g.add("conv2d", x, out_channels=4, kernel=1, groups=2), g.add("maxpool", x, kernel=3, padding=1)])
        return g.add("fc", g.add("flatten", g.add("global_avgpool", x)), out_features=10)

    g1, x = _start("et-kernels-portable")
    x = g1.add("conv2d", g1.add("upsample", body(g1, x, 1), scale=[2, 2]), out_channels=8, kernel=3, groups=8, padding=1)
    x = g1.add("gather", g1.add("lrn", x, size=5, alpha=1e-4, beta=0.75, bias=2.0), indices=[7, 7, 0, 3, 5, 1, 2, 6])
    g1.set_outputs(tail(g1, x)).validate()
    g2, x = _start("et-kernels-one-call")
    x = body(g2, x, 2)
    x = g2.add("relu6", g2.add("batchnorm", g2.add("conv2d", x, out_channels=8, kernel=3, groups=8, padding=1)))
    g2.set_outputs(tail(g2, x)).validate()
    return {"portable": g1, "one": g2}


@pytest.fixture(scope="module")
def executed(tmp_path_factory):
    pytest.importorskip("executorch")
    from executorch.runtime import Runtime

    from generators.export.executorch import export_executorch
    from generators.export.torch_module import example_tensors
    from pipelines.runners.etdump import read_etdump, write_etdump

    out = {}
    for key, graph in e2e_graphs().items():
        folder = tmp_path_factory.mktemp(f"et-kernels-{key}")
        facts = export_executorch(graph, folder / "net.pte")
        prog = Runtime.get().load_program(folder / "net.pte", enable_etdump=True)
        method = prog.load_method("forward")
        method.execute(example_tensors(graph))
        out[key] = (graph, facts, read_etdump(write_etdump(prog, folder / "net.etdp")))
        del method, prog
    return out


@pytest.mark.parametrize("key", ["one", "portable"])
def test_deduced_operators_are_the_executed_ones(executed, key):
    graph, facts, dump = executed[key]
    assert Counter(et.deduce_kernels(graph)) == Counter(et.etdump_kernels(dump))


@pytest.mark.parametrize("key", ["one", "portable"])
def test_deduced_program_agrees_with_the_export_facts(executed, key):
    graph, facts, dump = executed[key]
    assert et.facts_agreement(graph, facts) == {"delegate_calls": True, "delegated_ops": True, "portable_ops": True}


def test_one_delegate_call_runs_in_the_deduced_order(executed):
    graph, facts, dump = executed["one"]
    assert facts["delegate_calls"] == 1
    assert et.deduce_kernels(graph) == et.etdump_kernels(dump)


def test_each_delegate_call_runs_its_deduced_operators(executed):
    graph, facts, dump = executed["portable"]
    calls = sorted(c["call"] for c in dump["calls"] if c["run"] == 0 and c["kind"] == "delegate")
    ran = [Counter(et.strip_number(e["name"]) for e in dump["events"]
                   if e["run"] == 0 and e["kind"] == "delegated" and e["call"] == c) for c in calls]
    deduced: dict[int, Counter] = defaultdict(Counter)
    for k in et.deduce_kernel_ops(graph):
        deduced[k.call][k.name] += 1
    assert [deduced[i] for i in range(len(deduced))] == ran


# ---------------------------------------------------------------- the recorded data
@pytest.mark.skipif(not SCENARIO.is_dir(), reason=f"no ExecuTorch kernel records at {SCENARIO}")
def test_the_recorded_networks_run_the_deduced_operators(capsys):
    from kernels.report import executorch_rows, main

    rows = executorch_rows(DATA, SCENARIO)
    rows = [r for r in rows if not r.get("missing_ir")]
    if not rows:
        pytest.skip(f"no network of {SCENARIO} has both kernel records and an IR")
    share = sum(r["matched"] for r in rows) / sum(max(r["predicted"], r["executed"]) for r in rows)
    worst = min(rows, key=lambda r: r["share"])
    assert share >= 0.99 and worst["share"] >= 0.95, (share, worst)
    assert main(["executorch", "--data", str(DATA), "--scenario", str(SCENARIO), "--no-facts"]) == 0
    table = capsys.readouterr().out
    assert "match share" in table and all(r["source"] in table for r in rows)


def test_the_export_facts_agree_with_the_deduction():
    from kernels.report import executorch_facts_rows

    rows = executorch_facts_rows(DATA)
    if not rows:
        pytest.skip(f"no ExecuTorch programs with an IR under {DATA}")
    differ = [r["model_id"] for r in rows if not (r["delegate_calls"] and r["delegated_ops"] and r["portable_ops"])]
    assert len(differ) <= 0.02 * len(rows), differ
