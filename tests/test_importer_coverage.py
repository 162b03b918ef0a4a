"""The importer conformance suite on a sample of the real zoos (generators/importers/conformance.py;
the whole zoos: benchmarks/bench_importer_coverage.py).

Each sampled model is built as its zoo's users build it, converted the usual way, imported, and
must (1) import, (2) count the source's multiply-accumulates within 1% and (3) compute, as an IR
carrying the file's weights, what the file computes in its own runtime. The sample covers what
the zoos need beyond the CNN operators of the USC study:

- Keras' MobileNetV3Small: its Rescaling layer (``x / 127.5 - 1``: a scalar add, the IR's
  ``shift``), with the converter's free batch and rebuilt on batch 1, which must import to the
  same graph; and a free image size resolved by the input shape;
- Keras' EfficientNetV2B0 with its free batch: the Normalization layer (SUB and DIV by a
  per-channel constant: an affine batch norm);
- pytorchcv's MobileNetV3 and ShuffleNetV2 through both of PyTorch's ONNX exporters; BAM's
  channel gate (an Expand of a computed tensor that a Mul broadcasts); DIA-ResNet's LSTM cell,
  whose first step runs on a zero state (layers evaluated on constants, then per-feature constant
  shifts and gains: affine batch norms);
- a network that computes an output it discards (MSDNet's early exits), held to the live count.

Then ``latbench predict`` on the free-batch Keras file, as a user converted it.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("tensorflow")
pytest.importorskip("torch")
pytest.importorskip("pytorchcv")
pytest.importorskip("onnxscript", reason="the dynamo ONNX exporter needs onnxscript")

from generators.importers.conformance import MACS_TOLERANCE, OUTPUT_TOLERANCE, ROUTES, check, check_model, keras_build  # noqa: E402
from generators.importers import import_tflite  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def _conforms(cases):
    for c in cases:
        assert c.status == "imported", f"{c.model} via {c.route}: {c.status}: {c.error}"
        assert abs(c.macs_error) <= MACS_TOLERANCE, f"{c.model} via {c.route}: MACs {c.ir_macs} vs {c.src_macs}"
        assert c.same_outputs is True and c.output_error <= OUTPUT_TOLERANCE, \
            f"{c.model} via {c.route}: outputs differ ({c.output_error}, the runtime's own {c.reference_error}, {c.extra})"
        assert c.conforms


@pytest.fixture(scope="module")
def mobilenetv3(tmp_path_factory):
    src = keras_build("MobileNetV3Small")
    work = tmp_path_factory.mktemp("keras")
    cases = [check(src, r, work, keep_file=True, predict="host-tflite-cpu-1large-fp32") for r in ("tflite", "tflite-batch1")]
    return src, work, cases


def test_keras_mobilenetv3_free_and_fixed_batch(mobilenetv3):
    src, work, cases = mobilenetv3
    _conforms(cases)
    free, one = (import_tflite(work / f"MobileNetV3Small-b{b}.tflite", input_shape=src.input_shape) for b in ("None", 1))
    assert free.op_counts() == one.op_counts() and free.op_counts()["shift"] == 1  # the Rescaling's offset
    assert free.flops == one.flops and free.params == one.params


def test_keras_normalization_layer_with_a_free_batch(tmp_path):
    cases = check_model("keras", "EfficientNetV2B0", tmp_path, ("tflite",))
    _conforms(cases)
    assert cases[0].ir_params < cases[0].src_params  # the Normalization's statistics are no parameters


@pytest.mark.parametrize("name", ["mobilenetv3_small_w7d20", "shufflenetv2_wd2"])
def test_pytorchcv_through_both_onnx_exporters(name, tmp_path):
    _conforms(check_model("pytorchcv", name, tmp_path, ("onnx-torchscript", "onnx-dynamo")))


@pytest.mark.parametrize("name", ["bam_resnet18", "diaresnet10"])
def test_pytorchcv_attention_gates(name, tmp_path):
    _conforms(check_model("pytorchcv", name, tmp_path, ("onnx-torchscript",)))


def test_refusal_names_the_operator(tmp_path):
    # iSQRT-COV's final pool takes a reciprocal of a computed tensor: no IR form
    (case,) = check_model("pytorchcv", "isqrtcovresnet18", tmp_path, ("onnx-torchscript",))
    assert case.status == "refused" and not case.conforms
    assert "ONNX node '/features/final_pool/Reciprocal' (Reciprocal)" in case.error


def test_predict_takes_the_keras_file_as_converted(mobilenetv3):
    _, work, cases = mobilenetv3
    r = subprocess.run([sys.executable, "-m", "pipelines.cli", "predict", str(work / "MobileNetV3Small-bNone.tflite"),
                        "--scenario", "host-tflite-cpu-1large-fp32"],
                       cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    line = next(ln for ln in r.stdout.splitlines() if ln.strip().startswith("host-tflite-cpu-1large-fp32"))
    assert float(line.split()[1]) == pytest.approx(cases[0].extra["predicted_ms"], rel=1e-3)  # what the suite predicts


def test_work_the_output_does_not_depend_on_is_not_counted(tmp_path):
    # MSDNet's pattern: an early-exit classifier computed and discarded; the exporter drops it,
    # so the file (and the IR) hold the live work only, and the case is held to the live count
    import torch
    from torch import nn

    from generators.importers.conformance import SourceModel

    class EarlyExit(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(inplace=True))
            self.exit1 = nn.Sequential(nn.Conv2d(8, 8, 3, padding=1), nn.ReLU(inplace=True), nn.Flatten(),
                                       nn.Linear(8 * 16 * 16, 10))
            self.head = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 10))

        def forward(self, x):
            x = self.body(x)
            outs = [self.exit1(x), self.head(x)]
            return outs[-1]

    torch.manual_seed(0)
    m = EarlyExit().eval()
    src = SourceModel("pytorchcv", "early_exit", m, [1, 3, 16, 16], sum(p.numel() for p in m.parameters()))
    case = check(src, "onnx-torchscript", tmp_path)
    live = 3 * 8 * 9 * 16 * 16 + 8 * 10  # the body's convolution and the head's fc
    assert case.src_macs == case.ir_macs == live
    assert case.extra["eager_macs"] == live + 8 * 8 * 9 * 16 * 16 + 8 * 16 * 16 * 10  # with the dead exit
    assert case.conforms


def test_routes_are_registered():
    assert {"tflite", "tflite-batch1", "onnx-torchscript", "onnx-dynamo"} <= set(ROUTES)


def test_retry_runs_again_only_the_selected_cases(tmp_path):
    import importlib.util
    import json

    spec = importlib.util.spec_from_file_location("bench_cov", ROOT / "benchmarks" / "bench_importer_coverage.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)

    def row(route, model, conforms):
        return {"zoo": "pytorchcv", "model": model, "route": route, "status": "imported" if conforms else "refused",
                "error": "", "src_macs": 1, "ir_macs": 1, "macs_error": 0.0, "same_outputs": True if conforms else None,
                "conforms": conforms, "extra": {}}

    results = tmp_path / "r.jsonl"
    rows = [row("onnx-torchscript", "no_such_model", False), row("onnx-dynamo", "no_such_model", False),
            row("onnx-torchscript", "kept", True)]
    results.write_text("".join(json.dumps(r) + "\n" for r in rows))
    # the selection names no model the zoo builds: nothing runs, the selected failure is dropped for a rerun
    assert bench.main(["--zoo", "pytorchcv", "--route", "onnx-torchscript", "--model", "no_such_model", "--retry",
                       "--results", str(results)]) == 0
    left = [(r["route"], r["model"]) for r in bench.load(results)]
    assert left == [("onnx-dynamo", "no_such_model"), ("onnx-torchscript", "kept")]  # another route's failure stays
