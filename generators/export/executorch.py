"""IR -> ExecuTorch: a ``.pte`` program whose operators the XNNPACK delegate runs where it can.

``export_executorch(graph, path, precision)`` builds the network's ``nn.Module``
(:func:`generators.export.torch_module.to_module`, the same weights as every other export),
exports it with ``torch.export.export``, lowers it with
``executorch.exir.to_edge_transform_and_lower(..., partitioner=[XnnpackPartitioner()])`` and
writes ``.to_executorch().buffer`` atomically; it returns the program's facts.

Precisions: ``fp32``, and ``int8`` = PT2E static post-training quantization with ExecuTorch's
``XNNPACKQuantizer`` (``get_symmetric_quantization_config(is_per_channel=True)``: int8
activations per tensor, int8 weights symmetric per output channel), observers calibrated on
``example_tensors(graph, sample=k)`` for k < ``calibration_samples`` (as the PyTorch int8
export), then ``convert_pt2e`` and the same lowering. Operators the quantizer does not annotate
stay float between dequantize and quantize nodes.

Facts: the delegate calls of the lowered program, the operators inside them
(``delegated_ops``) and the ones left to ExecuTorch's portable kernels (``portable_ops``), by
edge-dialect name; parameters of the exported float program; input and output shapes (NCHW,
the IR's order); bytes, digest, versions. One partitioner rule differs from ExecuTorch's
default: PReLU is delegated on 4-D inputs only (the XNNPACK backend's layout pass rejects a
PReLU on a ``[N, F]`` tensor, so that one runs portable). docs/exporters.md (*ExecuTorch*)
says what is delegated and what stays portable.

:func:`run_executorch` runs a ``.pte`` with ``executorch.runtime`` (tests, checks). executorch
itself is imported only inside the functions: importing this module costs no more than torch.
"""
from __future__ import annotations

import functools
import hashlib
import importlib
import time
import warnings
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from foundation.atomic import write_bytes
from ..ir import Graph
from .torch_module import DEFAULT_CALIBRATION_SAMPLES, example_tensors, to_module

FORMAT = "executorch"
BACKEND = "XnnpackBackend"
PRECISIONS = ("fp32", "int8")
_PLUMBING = ("getitem", "executorch_call_delegate")  # graph plumbing, not operators


class ExecuTorchExportError(ValueError):
    """The graph or the options cannot be exported; the message is one line naming the file."""


def _check(precision: str, calibration_samples: int, where: str = FORMAT) -> None:
    if precision not in PRECISIONS:
        raise ExecuTorchExportError(f"{where}: unknown precision {precision!r} for {FORMAT} (known: {', '.join(PRECISIONS)})")
    if calibration_samples < 1:
        raise ExecuTorchExportError(f"{where}: calibration_samples must be >= 1 ({FORMAT}), got {calibration_samples}")


def _first_line(e: BaseException) -> str:
    """The innermost cause of ``e`` on one line (ExecuTorch's pass manager wraps the real error)."""
    while e.__cause__ is not None:
        e = e.__cause__
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0][:300]}" if text else type(e).__name__


@functools.lru_cache(maxsize=1)
def _partitioner_configs() -> tuple:
    """ExecuTorch's XNNPACK partitioner configs, PReLU restricted to 4-D inputs."""
    from executorch.backends.xnnpack.partition.config import ALL_PARTITIONER_CONFIGS
    from executorch.backends.xnnpack.partition.config.node_configs import PreluConfig

    class Prelu4dConfig(PreluConfig):
        def check_constraints(self, node, ep) -> bool:
            val = node.all_input_nodes[0].meta.get("val")
            return val is not None and val.dim() == 4 and super().check_constraints(node, ep)

    return tuple(Prelu4dConfig if c is PreluConfig else c for c in ALL_PARTITIONER_CONFIGS)


def _runnable_module(graph: Graph):
    """``to_module(graph)`` with each ``nn.LocalResponseNorm`` computed over a ``[1, 1, C, H*W]``
    view by ``avg_pool2d`` (PyTorch's own formulation for 3-D inputs: the same function), since
    ExecuTorch has no kernel for the ``avg_pool3d`` of its 4-D one."""
    import torch.nn.functional as F
    from torch import nn

    class Lrn(nn.Module):
        def __init__(self, m: nn.LocalResponseNorm):
            super().__init__()
            self.size, self.alpha, self.beta, self.k = m.size, m.alpha, m.beta, m.k

        def forward(self, x):
            n, c, h, w = x.shape
            div = F.pad((x * x).reshape(n, 1, c, h * w), (0, 0, self.size // 2, (self.size - 1) // 2))
            div = F.avg_pool2d(div, (self.size, 1), stride=1).reshape(n, c, h, w)
            return x / (div * self.alpha + self.k) ** self.beta

    module = to_module(graph)
    for name, sub in list(module.named_children()):
        if isinstance(sub, nn.LocalResponseNorm):
            setattr(module, name, Lrn(sub))
    return module


def _exported(graph: Graph, precision: str, calibration_samples: int):
    """The ``torch.export`` program to lower and the float parameter count it started from."""
    import torch

    module, example = _runnable_module(graph), example_tensors(graph)
    with torch.no_grad():
        program = torch.export.export(module, example)
    params = sum(program.state_dict[name].numel() for name in program.graph_signature.parameters)
    if precision == "int8":
        from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import (
            XNNPACKQuantizer,
            get_symmetric_quantization_config,
        )
        from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

        quantizer = XNNPACKQuantizer().set_global(get_symmetric_quantization_config(is_per_channel=True))
        prepared = prepare_pt2e(program.module(), quantizer)
        with torch.no_grad():
            for k in range(calibration_samples):
                prepared(*example_tensors(graph, sample=k))
            program = torch.export.export(convert_pt2e(prepared), example)
    return program, params


def lower(graph: Graph, precision: str = "fp32", calibration_samples: int = DEFAULT_CALIBRATION_SAMPLES):
    """The lowered ``EdgeProgramManager`` of ``graph`` (XNNPACK partitions as delegate calls)
    and the float parameter count of the exported program."""
    _check(precision, calibration_samples)
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import to_edge_transform_and_lower

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # export and quantization deprecation chatter
        program, params = _exported(graph, precision, calibration_samples)
        edge = to_edge_transform_and_lower(program, partitioner=[XnnpackPartitioner(configs=list(_partitioner_configs()))])
    return edge, params


def _op_name(target: Any) -> str:
    return getattr(target, "__name__", str(target))


def delegation(edge) -> dict[str, Any]:
    """Delegate calls, and operator counts inside them and outside (portable), by edge-op name."""
    gm = edge.exported_program().graph_module
    calls, delegated, portable = 0, Counter(), Counter()
    for node in gm.graph.nodes:
        if node.op != "call_function":
            continue
        name = _op_name(node.target)
        if name == "executorch_call_delegate":
            calls += 1
            lowered = getattr(gm, node.args[0].target)
            delegated.update(_op_name(n.target) for n in lowered.original_module.graph_module.graph.nodes
                             if n.op == "call_function" and _op_name(n.target) not in _PLUMBING)
        elif name not in _PLUMBING:
            portable[name] += 1
    return {"delegate_calls": calls, "delegated_ops": dict(sorted(delegated.items())),
            "portable_ops": dict(sorted(portable.items()))}


def _output_shapes(edge) -> list[list[int]]:
    out = next(n for n in edge.exported_program().graph_module.graph.nodes if n.op == "output")
    return [list(v.meta["val"].shape) for v in out.args[0]]


def export_executorch(graph: Graph, path: str | Path, precision: str = "fp32",
                      calibration_samples: int = DEFAULT_CALIBRATION_SAMPLES) -> dict[str, Any]:
    """Write ``graph`` as an ExecuTorch program (``.pte``, XNNPACK-delegated); return its facts."""
    _check(precision, calibration_samples, str(path))
    import executorch.version
    import torch

    for module in ("executorch.exir", "executorch.backends.xnnpack.partition.xnnpack_partitioner"):
        importlib.import_module(module)  # importing (seconds, once per process) is not part of the time
    t0 = time.perf_counter()
    try:
        edge, params = lower(graph, precision, calibration_samples)
        facts = delegation(edge)
        output_shapes = _output_shapes(edge)
        data = edge.to_executorch().buffer
    except Exception as e:
        raise ExecuTorchExportError(f"{path}: ExecuTorch could not export the network ({_first_line(e)})") from e
    path = write_bytes(path, data)
    versions = {"executorch": executorch.version.__version__, "torch": torch.__version__}
    if precision == "int8":
        import torchao

        versions["torchao"] = torchao.__version__
    return {
        "path": str(path),
        "format": FORMAT,
        "precision": precision,
        "model_id": graph.model_id,
        "backend": BACKEND,
        **facts,
        "params": params,  # of the exported float program (int8 quantizes the same weights)
        "inputs": [{"name": n.name, "shape": list(n.shape)} for n in graph.input_nodes],
        "output_shapes": output_shapes,
        "bytes": len(data),
        "sha256": hashlib.sha256(data).hexdigest(),
        "calibration_samples": calibration_samples if precision == "int8" else 0,
        "versions": versions,
        "seconds": round(time.perf_counter() - t0, 4),
    }


def verify(graph: Graph, facts: dict[str, Any]) -> dict[str, bool]:
    """The program against the IR: parameters, input and output shapes, something delegated."""
    return {
        "params": facts["params"] == graph.params,
        "input_shapes": [d["shape"] for d in facts["inputs"]] == [list(n.shape) for n in graph.input_nodes],
        "output_shapes": facts["output_shapes"] == [list(graph.tensor_shape(r)) for r in graph.outputs],
        "delegated": facts["delegate_calls"] >= 1 and bool(facts["delegated_ops"]),
    }


def run_executorch(path: str | Path, graph: Graph, inputs: dict[str, np.ndarray] | None = None) -> list[np.ndarray]:
    """Run a ``.pte`` exported from ``graph`` with ``executorch.runtime``; NCHW float in and out.

    ``inputs`` maps IR input names to arrays (default: the graph's example input). The
    ``Program`` is held while its method runs: a method outliving its program reads freed memory.
    """
    import torch
    from executorch.runtime import Runtime

    if inputs is None:
        args = example_tensors(graph)
    else:
        args = tuple(torch.from_numpy(np.ascontiguousarray(inputs[n.name], dtype=np.float32)) for n in graph.input_nodes)
    program = Runtime.get().load_program(Path(path))
    outputs = program.load_method("forward").execute(args)
    return [o.detach().numpy().copy() for o in outputs]
