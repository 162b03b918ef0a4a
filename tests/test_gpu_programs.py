"""Which kernels LiteRT's GPU accelerator ran: dispatches labelled from the generated programs
(pipelines/gpu/programs.py), GPU outputs checked against the CPU (pipelines/gpu/validate.py),
and the USC rules B.2/B.3 against what ran (kernels/gpu_truth.py).

The tests that run the GPU skip, saying why, when this machine has no Vulkan device
(scripts/setup.sh installs Mesa's lavapipe: docs/gpu.md)."""
from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from generators.ir import Graph
from kernels import gpu_truth
from pipelines import gpu
from pipelines.gpu import programs as gp
from pipelines.gpu import validate as gpu_validate
from pipelines.runners import litert as nr



def mix_graph() -> Graph:
    """Two 3x3 64->64 convolutions at 24x24 (Winograd by B.3: 16 slices, 36 tiles), the second
    with a residual add + ReLU; depthwise + ReLU6; a 1x1 conv and an average pool concatenated;
    max pool, global average pool, dense."""
    g = Graph("gpu-mix", source="probe")
    x = g.input([1, 64, 24, 24])
    a = g.add("relu", g.add("conv2d", x, out_channels=64, kernel=3, padding=1))
    b = g.add("conv2d", a, out_channels=64, kernel=3, padding=1)
    r = g.add("relu", g.add("add", [b, a]))
    d = g.add("relu6", g.add("conv2d", r, out_channels=64, kernel=3, padding=1, groups=64))
    c = g.add("concat", [g.add("conv2d", d, out_channels=32, kernel=1),
                         g.add("avgpool", d, kernel=3, padding=1, count_include_pad=False)])
    m = g.add("maxpool", c, kernel=2, stride=2)
    g.set_outputs(g.add("fc", g.add("flatten", g.add("global_avgpool", m)), out_features=10))
    return g


@pytest.fixture(scope="module")
def mix(needs_gpu, tmp_path_factory):
    from generators.export.tflite import export_tflite

    path = tmp_path_factory.mktemp("gpu-programs") / "mix.tflite"
    export_tflite(mix_graph(), path)
    run = nr.run_native(path, accelerator="gpu", precision="fp16", mode="kernel", warmup=1, runs=2, timeout=300)
    return path, run


# ---------------------------------------------------------------- labels from the programs
def test_every_dispatch_is_labelled_with_its_kernel(mix):
    _, run = mix
    by_run = gpu.kernels_by_run(run)
    assert len(by_run) == 2
    seqs = {tuple(k["kernel_kind"] for k in ks) for ks in by_run.values()}
    assert len(seqs) == 1, "the same model ran different kernels in different runs"
    kinds = list(seqs.pop())
    assert Counter(kinds) == Counter({
        "layout_in": 1, "winograd_input": 2, "winograd_matmul": 2, "winograd_output": 2, "depthwise_conv": 1,
        "conv": 1, "pool": 2, "concat": 1, "mean": 1, "fully_connected": 1, "layout_out": 1, "copy": 1})
    # Winograd runs as transform -> batched matmul -> transform
    starts = [i for i, k in enumerate(kinds) if k == "winograd_input"]
    for i in starts:
        assert kinds[i:i + 3] == ["winograd_input", "winograd_matmul", "winograd_output"]
    assert kinds[0] == "layout_in" and kinds[-2:] == ["layout_out", "copy"]
    summary = run.meta["gpu"]["programs"]
    assert summary["programs"] >= 10 and summary["matched"] == summary["shaders"] - 2  # all but the transfers


def test_fused_parts_come_from_the_epilogues(mix):
    _, run = mix
    ks = gpu.kernels_by_run(run)[max(gpu.kernels_by_run(run))]
    outs = [k["fused"] for k in ks if k["kernel_kind"] == "winograd_output"]
    assert outs == [["bias", "relu"], ["bias", "add", "relu"]]  # the residual add + ReLU linked into the second
    dw = next(k for k in ks if k["kernel_kind"] == "depthwise_conv")
    assert dw["fused"] == ["bias", "clamp"]  # ReLU6 as a clamp
    assert all(k["program"] is not None for k in ks if k["kernel_kind"] not in gpu_truth.TRANSFERS)


def test_gpu_outputs_are_validated_against_the_cpu(mix):
    _, run = mix
    v = run.meta["gpu"]["validation"]
    assert v["ok"] is True and v["values"] == 10 and 0 < v["rel_l2"] < gpu_validate.TOLERANCE["fp16"]


# ---------------------------------------------------------------- USC rules vs what ran
def test_usc_rules_against_the_executed_kernels(mix):
    _, run = mix
    ks = gpu.kernels_by_run(run)[max(gpu.kernels_by_run(run))]
    res = gpu_truth.compare("gpu-mix", mix_graph(), ks)
    assert res.winograd == (2, 2)
    assert res.fusion_agree == res.fusion_checked == len(res.executed)
    # the one difference: the flatten between mean and dense runs no dispatch on this backend
    assert res.differences == ["deduced reshape (flatten_0) as reshape: no such dispatch ran"]


def test_winograd_threshold_on_output_tiles(needs_gpu, tmp_path):
    """B.3's default tile threshold (32 tiles of 4x4): 24x24 -> 36 tiles, Winograd; 20x20 -> 25."""
    from kernels.report import gpu_host_truth

    probes = dict(gpu_truth.probe_networks())
    for name, expect in (("probe-64-64@24", (1, 1)), ("probe-64-64@20", (0, 0))):
        res = gpu_host_truth(probes[name], tmp_path)
        assert res.winograd == expect and res.differences == [], (name, res.differences)


def test_a_gather_of_channels_is_one_gather_dispatch(needs_gpu, tmp_path):
    """CondenseNet's GATHER of channels, of a map and of the classifier's input: one dispatch each,
    whose program reads an index texture, where the rules deduce them."""
    from kernels.report import gpu_host_truth

    g = Graph("gpu-gather", source="test")
    x = g.add("relu", g.add("conv2d", g.input([1, 3, 16, 16]), out_channels=16, kernel=3, padding=1))
    x = g.add("relu", g.add("conv2d", g.add("gather", x, indices=[3, 3, 0, 7, 15, 1, 2, 2]), out_channels=16,
                            kernel=3, padding=1))
    v = g.add("flatten", g.add("global_avgpool", x))
    g.set_outputs(g.add("fc", g.add("gather", v, indices=[0, 5, 5, 9, 15, 2]), out_features=10))
    res = gpu_host_truth(g, tmp_path)
    assert [t.kind for t in res.executed] == ["conv", "gather", "conv", "mean", "gather", "fully_connected"]
    assert res.differences == ["deduced reshape (flatten_0) as reshape: no such dispatch ran"]


# ---------------------------------------------------------------- without a GPU
def test_program_cache_texts_are_found_between_binary_fields(tmp_path):
    prog = "enable f16;\n@group(0) @binding(0) var<uniform> U: S;\n@compute @workgroup_size(1)\nfn main() {}\n"
    blob = b"\x10\x00\xff\x07" + prog.encode() + b"\x00\x01\x02\xfe" + prog.replace("S;", "T;").encode() + b"\x00"
    path = tmp_path / "m_mldrift_program_cache.bin"
    path.write_bytes(blob)
    assert gp.find_program_caches(tmp_path) == [path]
    assert gp.read_program_cache(path) == [prog, prog.replace("S;", "T;")]


def test_spirv_signature_rejects_what_is_not_spirv():
    with pytest.raises(ValueError, match="magic"):
        gp.spirv_signature(b"\x00" * 40)
    with pytest.raises(ValueError, match="multiple of 4"):
        gp.spirv_signature(b"\x03\x02\x23\x07" * 5 + b"\x00")


def test_unmatched_shaders_are_transfers_or_other():
    sig = gp.Signature(3, 0, 1, 0, 0, 0, ())
    assert gp.match_programs(sig, []) == {"kernel_kind": "layout_in", "fused": [], "program": None}
    assert gp.match_programs(gp.Signature(3, 1, 0, 0, 0, 0, ()), [])["kernel_kind"] == "layout_out"
    # one signature, programs of two kinds: ambiguous, never guessed
    progs = [gp.Program(0, "conv", ["bias"], sig), gp.Program(1, "pool", [], sig)]
    assert gp.match_programs(sig, progs)["kernel_kind"] == "ambiguous"


def test_output_validation_catches_zeros_and_caches_the_reference(tmp_path):
    model = tmp_path / "m.tflite"
    model.write_bytes(b"model")
    ref = np.linspace(-1, 1, 10, dtype=np.float32)
    calls = []

    def run_cpu(path, out):
        calls.append(path)
        ref.tofile(out)

    out = tmp_path / "gpu.bin"
    (ref + 1e-5).tofile(out)
    assert gpu_validate.check(model, out, "fp32", run_cpu).ok
    np.zeros(10, np.float32).tofile(out)
    with pytest.raises(gpu_validate.GpuOutputError, match="relative L2 error 1 "):
        gpu_validate.check(model, out, "fp16", run_cpu)
    assert len(calls) == 1  # one CPU reference per model file
    # fp16 arithmetic beyond fp16's range: recorded, not failed; the same in fp32 fails
    np.full(10, np.nan, np.float32).tofile(out)
    v = gpu_validate.check(model, out, "fp16", run_cpu)
    assert v.ok and v.fp16_overflow and v.to_dict()["nonfinite"] == 10
    with pytest.raises(gpu_validate.GpuOutputError, match="relative L2 error nan"):
        gpu_validate.check(model, out, "fp32", run_cpu)


def test_compare_reports_winograd_and_fusion_differences():
    probes = dict(gpu_truth.probe_networks())
    g = probes["probe-64-64@24"]  # the rules say Winograd + ReLU linked
    direct = [{"kernel_kind": "layout_in", "fused": []}, {"kernel_kind": "conv", "fused": ["bias"], "name": "c"},
              {"kernel_kind": "layout_out", "fused": []}, {"kernel_kind": "copy", "fused": []}]
    res = gpu_truth.compare("p", g, direct)
    assert res.winograd == (1, 0)
    assert any("winograd" in d and "no such dispatch ran" in d for d in res.differences)
    assert any("ran 1 conv dispatch" in d for d in res.differences)
    wino = [{"kernel_kind": k, "fused": f} for k, f in (("winograd_input", []), ("winograd_matmul", []),
                                                          ("winograd_output", ["bias", "clamp"]))]
    res = gpu_truth.compare("p", g, wino)  # clamp is how the generator writes ReLU6 / ReLU: 'relu'
    assert res.differences == [] and res.winograd == (1, 1) and res.fusion_agree == 3
    with pytest.raises(ValueError, match="no kernel_kind"):
        gpu_truth.compare("p", g, [{"name": "x"}])
