"""The registry of artifact formats: one entry per (framework file type, precision).

Each entry names the file it writes under ``<artifacts>/<model_id>/`` and how to write it;
the ``export`` stage and the tests go through this table, so adding a format is one entry.
Framework modules are imported inside the writers: a worker that only writes nn-Meter IR
never imports TensorFlow or torch.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from ..ir import Graph
from foundation.registry import Registry


@dataclass(frozen=True)
class ArtifactFormat:
    name: str
    filename: str  # under <artifacts>/<model_id>/
    framework: str  # tflite | pytorch | executorch | onnxruntime | nnmeter
    precision: str  # fp32 | fp16 | int8 | n/a
    write: Callable[..., dict[str, Any]]  # (graph, path, **options) -> facts
    # (graph, facts) -> {check: passed}: the artifact against the IR, after the known fusions
    verify: Callable[[Graph, dict[str, Any]], dict[str, bool]] = lambda graph, facts: {}


FORMATS: Registry[ArtifactFormat] = Registry("artifact format")


def _register(fmt: ArtifactFormat) -> None:
    FORMATS.register(fmt.name)(fmt)


def _tflite(precision: str) -> Callable[..., dict[str, Any]]:
    def write(graph: Graph, path: Path, **options: Any) -> dict[str, Any]:
        from .tflite import export_tflite

        return export_tflite(graph, path, precision=precision)

    return write


def _nhwc(shape: list[int]) -> list[int]:
    return [shape[0], *shape[2:], shape[1]] if len(shape) == 4 else list(shape)


def _verify_tflite(precision: str) -> Callable[[Graph, dict[str, Any]], dict[str, bool]]:
    def verify(graph: Graph, facts: dict[str, Any]) -> dict[str, bool]:
        from .tflite import expected_op_counts, expected_params

        return {
            "op_counts": facts["op_counts"] == expected_op_counts(graph, precision),
            "params": facts["params"] == expected_params(graph, precision),
            "output_shapes": [o["shape"] for o in facts["outputs"]] == [_nhwc(graph.tensor_shape(r)) for r in graph.outputs],
        }

    return verify


def _verify_torch(precision: str) -> Callable[[Graph, dict[str, Any]], dict[str, bool]]:
    def verify(graph: Graph, facts: dict[str, Any]) -> dict[str, bool]:
        from .torch_module import expected_aten_counts

        # int8 graphs run quantized kernels whose aten names differ; their counts are checked
        # by tests/test_export_torch.py on fixture graphs, not here.
        return {"op_counts": facts["op_counts"] == expected_aten_counts(graph)} if precision == "fp32" else {}

    return verify


def _torch(kind: str, precision: str) -> Callable[..., dict[str, Any]]:
    def write(graph: Graph, path: Path, int8_engine: str = "x86", calibration_samples: int = 8, **options: Any) -> dict[str, Any]:
        from . import torch_module

        fn = torch_module.export_torchscript if kind == "torchscript" else torch_module.export_lite
        return fn(graph, path, precision=precision, engine=int8_engine, calibration_samples=calibration_samples)

    return write


def _executorch(precision: str) -> Callable[..., dict[str, Any]]:
    def write(graph: Graph, path: Path, calibration_samples: int = 8, **options: Any) -> dict[str, Any]:
        from .executorch import export_executorch

        return export_executorch(graph, path, precision=precision, calibration_samples=calibration_samples)

    return write


def _verify_executorch(graph: Graph, facts: dict[str, Any]) -> dict[str, bool]:
    from .executorch import verify

    return verify(graph, facts)


def _onnx(precision: str) -> Callable[..., dict[str, Any]]:
    def write(graph: Graph, path: Path, calibration_samples: int = 8, **options: Any) -> dict[str, Any]:
        from .onnx import export_onnx

        return export_onnx(graph, path, precision=precision, calibration_samples=calibration_samples)

    return write


def _verify_onnx(precision: str) -> Callable[[Graph, dict[str, Any]], dict[str, bool]]:
    def verify(graph: Graph, facts: dict[str, Any]) -> dict[str, bool]:
        from .onnx import verify_onnx

        return verify_onnx(graph, facts, precision)

    return verify


def _nnmeter(graph: Graph, path: Path, **options: Any) -> dict[str, Any]:
    from .nnmeter_ir import export_nnmeter_ir

    return export_nnmeter_ir(graph, path)


for _p in ("fp32", "fp16", "int8"):
    _register(ArtifactFormat(f"tflite_{_p}", f"tflite_{_p}.tflite", "tflite", _p, _tflite(_p), _verify_tflite(_p)))
# fp16 PyTorch is not offered: on a host CPU it is many times slower than fp32 (docs/exporters.md).
for _p in ("fp32", "int8"):
    _register(ArtifactFormat(f"torchscript_{_p}", f"torchscript_{_p}.pt", "pytorch", _p, _torch("torchscript", _p), _verify_torch(_p)))
    _register(ArtifactFormat(f"lite_{_p}", f"lite_{_p}.ptl", "pytorch", _p, _torch("lite", _p), _verify_torch(_p)))
# ExecuTorch programs with the XNNPACK delegate; int8 through its PT2E quantizer (docs/exporters.md)
for _p in ("fp32", "int8"):
    _register(ArtifactFormat(f"executorch_{_p}", f"executorch_{_p}.pte", "executorch", _p, _executorch(_p), _verify_executorch))
# ONNX (torch.onnx export; int8: ONNX Runtime's QDQ quantizer), measured by ONNX Runtime (docs/exporters.md)
for _p in ("fp32", "int8"):
    _register(ArtifactFormat(f"onnx_{_p}", f"onnx_{_p}.onnx", "onnxruntime", _p, _onnx(_p), _verify_onnx(_p)))
_register(ArtifactFormat("nnmeter_ir", "nnmeter_ir.json", "nnmeter", "n/a", _nnmeter))


def exporter_version() -> str:
    """A digest of the exporter code and IR semantics: artifacts made by other code are redone."""
    here = Path(__file__).resolve().parent
    files = sorted(here.glob("*.py")) + [here.parent / "ir.py", here.parent / "ops.py"]
    h = hashlib.sha256()
    for f in files:
        h.update(f.name.encode())
        h.update(f.read_bytes())
    return h.hexdigest()[:12]
