"""Is a GPU run computing the network? Its outputs against the CPU's on the same input.

LiteRT's GPU accelerator can fail silently: on lavapipe, AlexNet at 224x224 compiles, reports
itself fully delegated, runs in about a millisecond and returns zeros (the compute dispatches
never reach the Vulkan queue; only the host transfers do). A latency measured that way would
be a number for work that never happened. So every GPU process of the instrumented runtime
writes the outputs of its last timed run (``--dump-outputs``; the input is the same
pseudo-random tensor on every accelerator) and :func:`check` compares them with a CPU run of
the same model file (XNNPACK, fp32 arithmetic; one short process per model file, cached for the
life of the Python process). The relative L2 error must stay within :data:`TOLERANCE` of the
precision: fp32 agrees to about 1e-6, fp16 to about 1e-3 on deep networks; zeros or garbage
give an error near 1.

One case is recorded rather than failed: fp16 outputs that are not finite. Networks with
untrained weights can carry activations beyond fp16's range (65504; a NAS-Bench-201 cell here
reaches 1.3e5 at its output on the CPU), and then fp16 arithmetic gives inf/NaN: the GPU did
compute the network, in the precision asked for, and its time is that computation's. The
validation says so (``fp16_overflow``), the dataset keeps the flag, and an fp32 run or any
finite mismatch still fails.
"""
from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

#: GPU compute precision -> largest relative L2 error of the outputs against the CPU
TOLERANCE = {"fp32": 1e-3, "fp16": 5e-2}


class GpuOutputError(RuntimeError):
    """The GPU's outputs do not match the CPU's: the run did not compute the network."""


@dataclass(frozen=True)
class Validation:
    rel_l2: float
    max_abs: float
    tolerance: float
    values: int
    nonfinite: int = 0  # GPU output values that are inf or NaN
    cpu_max_abs: float = 0.0
    fp16_overflow: bool = False  # fp16 outputs not finite: the network exceeds fp16's range

    @property
    def ok(self) -> bool:
        return self.fp16_overflow or (bool(np.isfinite(self.rel_l2)) and self.rel_l2 <= self.tolerance)

    def to_dict(self) -> dict:
        return {"reference": "cpu (XNNPACK, same model file, same input)", "rel_l2": self.rel_l2,
                "max_abs": self.max_abs, "tolerance": self.tolerance, "values": self.values,
                "nonfinite": self.nonfinite, "cpu_max_abs": self.cpu_max_abs, "fp16_overflow": self.fp16_overflow,
                "ok": self.ok}


_REFERENCE: dict[tuple[str, int, int], np.ndarray] = {}


def reference_outputs(model: str | os.PathLike, run_cpu: Callable[[Path, Path], None]) -> np.ndarray:
    """The CPU outputs of ``model`` (float32), computed once per file version by
    ``run_cpu(model, out_path)`` (which writes the raw outputs to ``out_path``)."""
    st = os.stat(model)
    key = (str(Path(model).resolve()), st.st_mtime_ns, st.st_size)
    if key not in _REFERENCE:
        with tempfile.TemporaryDirectory(prefix="latbench-ref-") as tmp:
            out = Path(tmp) / "cpu_outputs.bin"
            run_cpu(Path(model), out)
            _REFERENCE[key] = np.fromfile(out, dtype=np.float32)
    return _REFERENCE[key]


def compare(gpu: np.ndarray, cpu: np.ndarray, precision: str) -> Validation:
    if gpu.shape != cpu.shape:
        raise GpuOutputError(f"GPU outputs have {gpu.size} values, the CPU's {cpu.size}")
    g, c = gpu.astype(np.float64), cpu.astype(np.float64)
    norm = float(np.linalg.norm(c))
    diff = float(np.linalg.norm(g - c))
    rel = diff / norm if norm > 0 else (0.0 if diff == 0 else float("inf"))
    nonfinite = int(np.count_nonzero(~np.isfinite(g)))
    return Validation(rel_l2=rel, max_abs=float(np.max(np.abs(g - c))) if g.size else 0.0,
                      tolerance=TOLERANCE.get(precision or "fp16", TOLERANCE["fp16"]), values=int(g.size),
                      nonfinite=nonfinite, cpu_max_abs=float(np.max(np.abs(c))) if c.size else 0.0,
                      fp16_overflow=precision == "fp16" and nonfinite > 0)


def check(model: str | os.PathLike, gpu_outputs: str | os.PathLike, precision: str,
          run_cpu: Callable[[Path, Path], None]) -> Validation:
    """Validation of one GPU run; raises :class:`GpuOutputError` (one line) when it fails."""
    v = compare(np.fromfile(gpu_outputs, dtype=np.float32), reference_outputs(model, run_cpu), precision)
    if not v.ok:
        raise GpuOutputError(f"{model}: the GPU outputs differ from the CPU's (relative L2 error {v.rel_l2:.3g} > "
                             f"{v.tolerance:g} for {precision}): the accelerator did not compute the network")
    return v


__all__ = ["GpuOutputError", "TOLERANCE", "Validation", "check", "compare", "reference_outputs"]
