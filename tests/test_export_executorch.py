"""IR -> ExecuTorch (.pte, XNNPACK delegate): the program computes the torch module's function.

Each case is exported, loaded and run with ``executorch.runtime.Runtime`` on the graph's
deterministic input, and compared with the fp32 ``nn.Module`` the exporter started from: fp32
within 1e-4 relative (max |a - b| / max |b|), int8 on held-out inputs within the bound of
docs/exporters.md (Pearson r >= 0.99 and max |diff| <= 0.1 x max |fp32|). A sample of the
generator sources: a synthetic network, a zoo reference, a NAS-Bench-201 cell, and the
test graph with every operator (its PReLU on a [1, F] tensor stays portable).
"""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("executorch")

import torch  # noqa: E402

from generators import nasbench201, synthetic  # noqa: E402
from generators.export import executorch as et  # noqa: E402
from generators.export.formats import FORMATS  # noqa: E402
from generators.export.torch_module import example_tensors, to_module  # noqa: E402
from generators.export.weights import example_input  # noqa: E402
from generators.ir import Graph  # noqa: E402
from generators.zoo.source import reference  # noqa: E402
from support.nets import deit_tiny, resnet_tiny, vit_tiny  # noqa: E402
from test_export_torch import all_ops_graph  # noqa: E402

RTOL = 1e-4
INT8_MIN_R, INT8_MAX_DIFF = 0.99, 0.1
HELD_OUT = (101, 102)  # input samples outside the calibration set (k < calibration_samples)

CASES = {
    "synthetic-0": lambda: synthetic.build_network(synthetic.SyntheticConfig(), 0, 0),
    "zoo-squeezenet": lambda: reference("squeezenet"),
    "nasbench201-1234": lambda: nasbench201.build(1234),
    "vit-tiny": vit_tiny,
    "deit-tiny": deit_tiny,
}
INT8_CASES = {"synthetic-0": CASES["synthetic-0"], "resnet-tiny": resnet_tiny, "vit-tiny": vit_tiny,
              "deit-tiny": deit_tiny}


def _torch_outputs(graph, inputs: tuple) -> list[np.ndarray]:
    with torch.no_grad():
        out = to_module(graph)(*inputs)
    return [t.numpy() for t in (out if isinstance(out, tuple) else (out,))]


def relative_error(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-30))


def _fp32_round_trip(graph, path) -> dict:
    """Export, verify, run in the ExecuTorch runtime, compare with the module; the facts."""
    fmt = FORMATS.get("executorch_fp32")
    facts = fmt.write(graph, path)
    assert fmt.verify(graph, facts) == {"params": True, "input_shapes": True, "output_shapes": True, "delegated": True}
    ys = et.run_executorch(path, graph)
    refs = _torch_outputs(graph, example_tensors(graph))
    assert [y.shape for y in ys] == [r.shape for r in refs] == [tuple(graph.tensor_shape(o)) for o in graph.outputs]
    for y, r in zip(ys, refs):
        assert np.all(np.isfinite(r)) and np.max(np.abs(r)) > 0
        assert relative_error(y, r) <= RTOL
    # the facts name what XNNPACK runs: every conv of the network is inside a delegate call
    convs = sum(n.op == "conv2d" for n in graph.nodes.values())
    assert facts["delegate_calls"] >= 1 and facts["backend"] == "XnnpackBackend"
    assert facts["delegated_ops"].get("aten.convolution.default", 0) == convs
    assert "aten.convolution.default" not in facts["portable_ops"]
    assert facts["versions"]["executorch"].startswith("1.5.1")  # "1.5.1+cpu"
    return facts


@pytest.mark.parametrize("name", list(CASES))
def test_fp32_program_equals_the_torch_module(name, tmp_path):
    facts = _fp32_round_trip(CASES[name](), tmp_path / "executorch_fp32.pte")
    if name == "nasbench201-1234":
        assert facts["delegate_calls"] == 1 and facts["portable_ops"] == {}  # a cell is XNNPACK's whole


def test_all_ops_graph_with_its_portable_part(tmp_path):
    """Every IR operator, two outputs; what the partitioner leaves to the portable kernels:
    nearest upsampling, a split, an avg pool counting padding, the [1, F] PReLU (as
    where/gt: the XNNPACK backend's layout pass rejects it, so it is not delegated) and the two
    gathers (index_select: the partitioner takes none)."""
    facts = _fp32_round_trip(all_ops_graph(), tmp_path / "m.pte")
    assert {"aten.upsample_nearest2d.vec", "aten.split_with_sizes_copy.default", "aten.where.self",
            "aten.avg_pool2d.default"} <= set(facts["portable_ops"])
    assert facts["portable_ops"]["aten.index_select.default"] == 2
    assert facts["delegated_ops"]["aten.prelu.default"] == 1  # the 4-D one


@pytest.mark.parametrize("name", list(INT8_CASES))
def test_int8_program_tracks_the_float_module(name, tmp_path):
    graph = INT8_CASES[name]()
    fmt = FORMATS.get("executorch_int8")
    facts = fmt.write(graph, tmp_path / fmt.filename, calibration_samples=4)
    assert all(fmt.verify(graph, facts).values())
    assert facts["precision"] == "int8" and facts["calibration_samples"] == 4
    # quantized: the delegate holds the quantize/dequantize pairs XNNPACK turns into int8 operators
    assert facts["delegated_ops"]["quantized_decomposed.dequantize_per_channel.default"] >= 1
    assert "torchao" in facts["versions"]
    for sample in HELD_OUT:
        inputs = example_input(graph, sample)
        (y,) = et.run_executorch(tmp_path / fmt.filename, graph, inputs)
        (r,) = _torch_outputs(graph, tuple(torch.from_numpy(a) for a in inputs.values()))
        assert float(np.corrcoef(y.ravel(), r.ravel())[0, 1]) >= INT8_MIN_R
        assert np.max(np.abs(y - r)) <= INT8_MAX_DIFF * np.max(np.abs(r))


def test_reexport_is_byte_identical(tmp_path):
    graph = Graph(name="tiny", source="test")
    x = graph.input([1, 3, 8, 8])
    x = graph.add("global_avgpool", graph.add("relu", graph.add("conv2d", x, out_channels=4, kernel=3)))
    graph.set_outputs(graph.add("fc", graph.add("flatten", x), out_features=3)).validate()
    a = et.export_executorch(graph, tmp_path / "a.pte")
    b = et.export_executorch(graph, tmp_path / "b.pte")
    assert a["sha256"] == b["sha256"] and (tmp_path / "a.pte").read_bytes() == (tmp_path / "b.pte").read_bytes()


def test_registered_formats():
    for p in ("fp32", "int8"):
        fmt = FORMATS.get(f"executorch_{p}")
        assert (fmt.filename, fmt.framework, fmt.precision) == (f"executorch_{p}.pte", "executorch", p)


@pytest.mark.parametrize("precision,samples,needle", [("fp16", 8, "unknown precision 'fp16' for executorch"),
                                                      ("int8", 0, "calibration_samples must be >= 1 (executorch)")])
def test_bad_options_are_one_line(precision, samples, needle, tmp_path):
    with pytest.raises(et.ExecuTorchExportError) as e:
        et.export_executorch(resnet_tiny(), tmp_path / "m.pte", precision, samples)
    assert str(e.value).startswith(f"{tmp_path / 'm.pte'}: ") and needle in str(e.value) and "\n" not in str(e.value)
    assert not (tmp_path / "m.pte").exists()


def test_rank2_prelu_needs_the_4d_rule_and_failures_name_the_file(tmp_path, monkeypatch):
    """With ExecuTorch's own PReLU rule the XNNPACK layout pass rejects a PReLU on [1, F]: the
    exporter's rule keeps that one portable; a lowering failure is one line naming the file."""
    from executorch.backends.xnnpack.partition.config import ALL_PARTITIONER_CONFIGS

    g = Graph(name="prelu-1d", source="test")
    x = g.add("flatten", g.add("global_avgpool", g.add("conv2d", g.input([1, 3, 8, 8]), out_channels=4, kernel=3)))
    g.set_outputs(g.add("fc", g.add("prelu", g.add("fc", x, out_features=6)), out_features=3)).validate()
    facts = et.export_executorch(g, tmp_path / "ok.pte")
    assert "aten.prelu.default" not in facts["delegated_ops"] and "aten.where.self" in facts["portable_ops"]
    (y,) = et.run_executorch(tmp_path / "ok.pte", g)
    assert relative_error(y, _torch_outputs(g, example_tensors(g))[0]) <= RTOL

    monkeypatch.setattr(et, "_partitioner_configs", lambda: tuple(ALL_PARTITIONER_CONFIGS))
    with pytest.raises(et.ExecuTorchExportError) as e:
        et.export_executorch(g, tmp_path / "bad.pte")
    msg = str(e.value)
    assert msg.startswith(f"{tmp_path / 'bad.pte'}: ExecuTorch could not export the network (") and "\n" not in msg
    assert "non-NHWC compatible node" in msg
    assert not (tmp_path / "bad.pte").exists()
